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
