"""The Pareto filter against a brute-force definition."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import pmapgen.pareto as pareto
from pmapgen.pareto import dominated, group_labels, pareto_mask, state_frontier


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


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(0, 3), st.integers(1, 4), st.integers(0, 40), st.integers(0, 2**32 - 1),
       st.sampled_from([1, -5, 2**40, 2**62]), st.booleans())
def test_state_frontier_matches_brute_force(k, d, n, seed, spread, fortran):
    """`state_frontier` (one compiled call: the state's rows as one mixed-radix key, or, when
    their ranges do not fit one int64, as spread 2**40 or 2**62 makes them with k > 1,
    `group_labels` and `pareto_mask`) keeps exactly the rows no row of equal state
    dominates, of exact duplicates the first, in either memory layout the prefix search
    builds."""
    rng = np.random.default_rng(seed)
    state = rng.integers(0, 3, size=(n, k)) * spread
    x = rng.choice(np.array([0.0, 1.0, 2.0, 3.5, 1e9, np.inf]), size=(n, d))
    if fortran:
        state, x = np.asfortranarray(state), np.asfortranarray(x)
    truth = np.unique(state, axis=0, return_inverse=True)[1].reshape(-1) if k and n else np.zeros(n, int)
    assert (state_frontier(state, x) == brute(x, truth)).all()
