"""The prefix search's key order (`pmapgen.key_order`): level by level, or deepest fused
structure first, never handing out a key that a waiting key could still reach."""
from dataclasses import dataclass

from pmapgen.key_order import KeyOrder


@dataclass(frozen=True)
class K:
    fused: tuple
    progress: int


def test_level_by_level_hands_out_the_lowest_progress_first():
    order = KeyOrder()
    keys = [K(("a", "b"), 30), K(("a",), 20), K(("c",), 10), K(("a",), 10)]
    for k in keys:
        order.add(k)
    got = [order.pop() for _ in range(4)]
    assert [k.progress for batch in got for k in batch] == [10, 10, 20, 30]
    assert not order


def test_deepest_first_waits_for_a_structure_it_extends_with_a_lower_progress():
    order = KeyOrder()
    for k in [K(("a",), 10), K(("a", "b"), 20), K(("a", "b", "c"), 30), K(("x", "y"), 15)]:
        order.add(k)
    # ("a", "b", "c") and ("a", "b") extend ("a",), which waits at progress 10: not ready;
    # ("x", "y") extends nothing waiting: the deepest ready structure
    assert order.pop(deepest=True) == [K(("x", "y"), 15)]
    assert order.pop(deepest=True) == [K(("a",), 10)]
    assert order.pop(deepest=True) == [K(("a", "b"), 20)]  # ("a", "b", "c") at 30 still extends it
    assert order.pop(deepest=True) == [K(("a", "b", "c"), 30)]
    assert not order


def test_keys_of_one_structure_and_progress_come_together_in_either_order():
    for deepest in (False, True):
        order = KeyOrder()
        keys = [K(("a",), 10), K(("a",), 10), K(("a",), 20)]
        for k in keys:
            order.add(k)
        assert order.pop(deepest) == keys[:2]
        order.add(K(("a",), 30))
        assert order.pop(deepest) == [keys[2]]
        assert order.pop(deepest) == [K(("a",), 30)]


def test_deepest_first_waits_for_a_structure_whose_events_are_within_this_one_s():
    """Keys hold the events of their rows' fused structures as a multiset (sorted), so a
    key that may reach another is one whose events are within the other's, in any order."""
    order = KeyOrder()
    for k in [K(("b",), 10), K(("a", "b"), 20), K(("a", "c"), 25)]:
        order.add(k)
    assert order.pop(deepest=True) == [K(("a", "c"), 25)]  # ("b",) is not within ("a", "c")
    assert order.pop(deepest=True) == [K(("b",), 10)]  # ("a", "b") waits for it: ("b",) is within
    assert order.pop(deepest=True) == [K(("a", "b"), 20)]
    assert not order


@dataclass(frozen=True)
class V:
    name: str
    progress: int
    vector: tuple


def test_reached_first_hands_out_the_highest_progress_no_waiting_key_may_reach():
    order = KeyOrder(reach=lambda k: k.vector)
    a, b, c, d = V("a", 10, (0, 0)), V("b", 20, (1, 0)), V("c", 30, (1, 1)), V("d", 25, (0, 2, 1))
    for k in (a, b, c, d):
        order.add(k)
    # a (0, 0) may reach every other; once it is out, b (1, 0) still may reach c (1, 1) but
    # not d (0, 2, 1): d has the highest progress of the ready ones. Vectors grow with
    # entries seen later (zeros before): c is (1, 1, 0)
    assert order.pop() == [a]
    assert order.pop(deepest=True) == [d]
    assert order.pop() == [b]
    order.add(V("e", 40, (2, 1)))  # c may reach e: c first, though e's progress is higher
    order.add(V("f", 35, (0, 0, 2)))  # nothing waiting may reach f
    assert order.pop() == [V("f", 35, (0, 0, 2))]
    assert order.pop() == [c]
    assert order.pop() == [V("e", 40, (2, 1))]
    assert not order


def test_reached_first_matches_brute_force_on_random_keys():
    """Each key handed out is the highest progress of the waiting keys that no other
    waiting key of lower progress is at most in every entry; keys added while others wait.
    A spilled pop (`spill`, a search past its share of waiting rows) takes the highest
    progress of all, and the keys left are then handed out as if it had never waited."""
    import random
    rng = random.Random(0)
    spilled = 0
    for trial in range(300):
        order, waiting = KeyOrder(reach=lambda k: k.vector), []
        pending = [V(str(i), rng.randrange(6), tuple(rng.randrange(3) for _ in range(rng.randrange(1, 4))))
                   for i in range(rng.randrange(1, 12))]
        while pending or waiting:
            if pending and (not waiting or rng.random() < 0.5):
                k = pending.pop()
                order.add(k)
                waiting.append(k)
                continue
            width = max(len(k.vector) for k in waiting)
            pad = lambda k: k.vector + (0,) * (width - len(k.vector))
            ready = [k for k in waiting if not any(j.progress < k.progress and all(x <= y for x, y in zip(pad(j), pad(k)))
                                                   for j in waiting)]
            spill = trial >= 200 and rng.random() < 0.3
            spilled += spill
            got = order.pop(spill=spill)
            among = waiting if spill else ready
            assert got[0] in among and got[0].progress == max(k.progress for k in among), trial
            waiting.remove(got[0])
        assert not order
    assert spilled > 50
