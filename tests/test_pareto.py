"""The Pareto filter against a brute-force definition."""
import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pmapgen.pareto as pareto
from pmapgen.pareto import dominated, group_labels, pareto_mask, uncovered_corners


def brute(x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    keep = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j and groups[i] == groups[j] and np.all(x[j] <= x[i]):
                if np.any(x[j] < x[i]) or j < i:  # strictly better, or an earlier duplicate
                    keep[i] = False
    return keep


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda d: hnp.arrays(np.float64, st.tuples(st.integers(0, 40), st.just(d)),
                                                      elements=st.sampled_from([0.0, 1.0, 2.0, 3.5, 1e9, np.inf]))),
       st.integers(1, 3))
def test_matches_brute_force(x, n_groups):
    groups = np.arange(len(x)) % n_groups
    assert (pareto_mask(x, groups) == brute(x, groups)).all()
    assert (pareto_mask(np.asfortranarray(x), groups) == brute(x, groups)).all()  # the prefix search's layout


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4).flatmap(lambda d: st.tuples(*(
    hnp.arrays(np.float64, st.tuples(st.integers(0, 30), st.just(d)),
               elements=st.sampled_from([0.0, 1.0, 2.0, 3.5, 1e9, np.inf])) for _ in range(2)))))
def test_dominated_matches_brute_force(pair):
    """`dominated`: a row is marked iff some front row is at most it in every column
    (ties count; with no columns, any front row dominates)."""
    x, front = pair
    want = np.array([any(np.all(f <= row) for f in front) for row in x], dtype=bool)
    assert (dominated(x, front) == want).all()


def test_dominated_example():
    front = np.array([[1.0, 5.0], [3.0, 3.0]])
    x = np.array([[1.0, 5.0], [2.0, 6.0], [2.0, 4.0], [4.0, 3.0], [0.0, 9.0]])
    assert dominated(x, front).tolist() == [True, True, False, True, False]
    assert dominated(x, front[:0]).tolist() == [False] * 5


def test_two_criteria_example():
    x = np.array([[1, 5], [2, 2], [3, 3], [5, 1], [1, 5], [0.5, 9]])
    assert pareto_mask(x).tolist() == [True, True, False, True, False, True]


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(0, 3), st.integers(1, 6), st.sampled_from([3, 5000]), st.integers(0, 2**32 - 1),
       st.sampled_from([7, -3, 2**30 + 1]))
def test_group_labels_give_equal_rows_equal_labels(k, distinct, n, seed, spread):
    """Every way of labelling (sorting small inputs, hashing large ones: as one mixed-radix
    number when the columns' ranges fit one int64, as here with spread 7 or -3, else column
    by column) gives rows the same label exactly when they are equal."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, distinct, size=(n, k)) * spread
    truth = np.unique(values, axis=0, return_inverse=True)[1].reshape(-1) if k else np.zeros(n, int)
    for rows in (10**9, 0):  # sorted, then hashed
        old, pareto.SORT_ROWS = pareto.SORT_ROWS, rows
        try:
            labels = group_labels(values)
        finally:
            pareto.SORT_ROWS = old
        assert len(set(zip(labels.tolist(), truth.tolist()))) == len(set(truth.tolist())) == len(set(labels.tolist()))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(
    hnp.arrays(np.int64, d, elements=st.integers(0, 5)),
    hnp.arrays(np.int64, st.tuples(st.integers(0, 6), st.just(d)), elements=st.integers(0, 7)))))
def test_uncovered_corners_match_brute_force(case):
    """`uncovered_corners` (the room cut, `prefixes._Search._room_beaten`): the integer
    points of the box below some corner are exactly those no row of `need` is at most,
    each corner is such a point, and no corner is below another."""
    room, need = case
    corners = uncovered_corners(room, need)
    box = [np.array(p) for p in itertools.product(*(range(int(r) + 1) for r in room))]
    uncovered = {tuple(p) for p in box if not any((a <= p).all() for a in need)}
    assert {tuple(p) for p in box if any((p <= c).all() for c in corners)} == uncovered
    assert {tuple(int(v) for v in c) for c in corners} <= uncovered
    assert not any(i != k and (c <= q).all() for i, c in enumerate(corners) for k, q in enumerate(corners))


def test_uncovered_corners_example():
    """Incumbents needing (2, 0) and (0, 3) more than a row holds, in a box of (4, 5):
    every point with at least 2 on the first axis is covered, and every one with at least
    3 on the second, so what is left lies below (1, 2); with (1, 1) needed as well, below
    (0, 2) or (1, 0). One needing nothing covers the box."""
    got = {tuple(c) for c in uncovered_corners(np.array([4, 5]), np.array([[2, 0], [0, 3]]))}
    assert got == {(1.0, 2.0)}
    got = {tuple(c) for c in uncovered_corners(np.array([4, 5]), np.array([[2, 0], [0, 3], [1, 1]]))}
    assert got == {(0.0, 2.0), (1.0, 0.0)}
    assert len(uncovered_corners(np.array([4, 5]), np.array([[0, 0]]))) == 0
    assert {tuple(c) for c in uncovered_corners(np.array([4, 5]), np.zeros((0, 2)))} == {(4.0, 5.0)}
