"""The one Pareto filter (all criteria minimised), compiled with numba.

Used by pmapgen (prune within a compatibility group) and by the join (prune after each
join step). A row is dropped iff another row of its group is <= in every column; of exact
duplicates the first is kept.

Algorithm: sort each group by its first column; a row that weakly dominates another then
comes first or in the same run of equal first columns, so one pass that tests each row
against the rows kept so far, and within a run also drops the kept rows a newer one
dominates, is exact.
"""
from __future__ import annotations

import math

import numba
import numpy as np
import pandas as pd

SORT_ROWS = 2048  # below this, group_labels sorts (measured crossover with hashing: about 2,000 rows)


@numba.njit(cache=True)
def _le(x: np.ndarray, a: int, b: int) -> bool:
    """Is row a at most row b in every column?"""
    for c in range(x.shape[1]):
        if x[a, c] > x[b, c]:
            return False
    return True


@numba.njit(cache=True)
def _dominated_by_kept(x: np.ndarray, row: int, kept: np.ndarray, n_kept: int) -> bool:
    for k in range(n_kept):
        if _le(x, kept[k], row):
            return True
    return False


@numba.njit(cache=True)
def _pareto_sorted(x: np.ndarray, order: np.ndarray, starts: np.ndarray, keep: np.ndarray) -> None:
    """`order` lists rows group by group, each group sorted by its first column (ties in
    row order); groups begin at `starts` (with a final sentinel). Marks non-dominated
    rows in `keep`. A row can be dominated only by one with a first column at most its
    own: those before its run of equal first columns are final when the run begins; within
    the run, a row kept drops the run's kept rows it dominates."""
    kept = np.empty(order.shape[0], dtype=np.int64)
    for g in range(starts.shape[0] - 1):
        n_kept = 0
        p = starts[g]
        while p < starts[g + 1]:
            q = p + 1
            while q < starts[g + 1] and x[order[q], 0] == x[order[p], 0]:
                q += 1
            first = n_kept  # the run's kept rows start here
            for i in range(p, q):
                row = order[i]
                if _dominated_by_kept(x, row, kept, n_kept):
                    continue
                w = first
                for k in range(first, n_kept):
                    j = kept[k]
                    if not _le(x, row, j):
                        kept[w] = j
                        w += 1
                    else:
                        keep[j] = False
                n_kept = w
                kept[n_kept] = row
                n_kept += 1
                keep[row] = True
            p = q


def pareto_mask(criteria: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of the rows of `criteria` (n x d, minimised) on their group's frontier.

    `groups` (n integer labels) restricts dominance to rows with the same label; None
    puts every row in one group.
    """
    x = np.asarray(criteria, dtype=np.float64)  # C or Fortran order (the prefix search's is a transposed stack)
    if x.ndim != 2:
        raise ValueError("criteria must be a 2-D array (rows x criteria)")
    n = x.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return keep
    g = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    # by group, then the first column (stable: ties in row order); sorting by every column
    # was nine tenths of the filter's time in the prefix search (24 columns)
    if x.shape[1] == 0:  # every row equals every other: the first of each group
        keep[np.unique(g, return_index=True)[1]] = True
        return keep
    order = np.lexsort((x[:, 0], g)).astype(np.int64)
    sorted_groups = g[order]
    edges = np.ones(n + 1, dtype=np.bool_)  # where a group starts, and the end (np.r_ costs 5 us a call)
    np.not_equal(sorted_groups[1:], sorted_groups[:-1], out=edges[1:n])
    starts = np.flatnonzero(edges).astype(np.int64)
    _pareto_sorted(x, order, starts, keep)
    return keep


@numba.njit(cache=True)
def _state_frontier(state: np.ndarray, x: np.ndarray, keep: np.ndarray) -> bool:
    """`pareto_mask(x, group_labels(state))` in one call, for integer `state` whose columns'
    ranges fit one int64 key together (False, nothing marked, if they do not): the prefix
    search prunes tens of thousands of batches of a few dozen rows, where the two calls'
    numpy steps cost more than the filter."""
    n, k = state.shape
    key = np.zeros(n, dtype=np.int64)
    radix = 1
    for c in range(k):
        low, high = state[0, c], state[0, c]
        for i in range(1, n):
            v = state[i, c]
            if v < low:
                low = v
            elif v > high:
                high = v
        span = high - low + 1
        if span <= 0 or radix > (1 << 62) // span:
            return False
        if span > 1:
            for i in range(n):
                key[i] += (state[i, c] - low) * radix
            radix *= span
    by_first = np.argsort(x[:, 0], kind="mergesort")  # (then by group, stably: np.lexsort((x[:, 0], key)))
    order = by_first[np.argsort(key[by_first], kind="mergesort")]
    starts = np.empty(n + 1, dtype=np.int64)
    m = 0
    for i in range(n):
        if i == 0 or key[order[i]] != key[order[i - 1]]:
            starts[m] = i
            m += 1
    starts[m] = n
    _pareto_sorted(x, order, starts[:m + 1], keep)
    return True


def state_frontier(state: np.ndarray, criteria: np.ndarray) -> np.ndarray:
    """`pareto_mask(criteria, group_labels(state))`: the rows of `criteria` (n x d,
    minimised) on the frontier of their group of equal `state` rows (n x k), in one
    compiled call where `state` is integer and its ranges fit one key."""
    x = np.asarray(criteria, dtype=np.float64)
    n = x.shape[0]
    if n and x.shape[1] and state.shape[1] and state.dtype.kind in "iu":
        keep = np.zeros(n, dtype=np.bool_)
        if _state_frontier(state.astype(np.int64, copy=False), x, keep):
            return keep
    return pareto_mask(x, group_labels(state) if state.shape[1] else None)


@numba.njit(cache=True)
def _dominated(x: np.ndarray, front: np.ndarray, out: np.ndarray) -> None:
    for i in range(x.shape[0]):
        for j in range(front.shape[0]):
            le = True
            for c in range(x.shape[1]):
                if front[j, c] > x[i, c]:
                    le = False
                    break
            if le:
                out[i] = True
                break


def dominated(criteria: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of `criteria` (n x d, minimised) that some row of `front`
    (m x d) weakly dominates: is at most in every column. The prefix search drops partial
    rows so against the pmappings it has finished (`pmapgen.prefixes._Search._beaten`)."""
    x = np.ascontiguousarray(criteria, dtype=np.float64)
    f = np.ascontiguousarray(front, dtype=np.float64)
    if x.ndim != 2 or f.ndim != 2 or (len(f) and f.shape[1] != x.shape[1]):
        raise ValueError("criteria and front must be 2-D arrays with the same columns")
    out = np.zeros(len(x), dtype=np.bool_)
    if len(x) and len(f):
        _dominated(x, f, out)
    return out


def group_labels(values: np.ndarray) -> np.ndarray:
    """One integer label per row of `values` (n x k): equal rows get equal labels.

    Small inputs (the prefix search's batches, mostly a few hundred rows) are sorted
    lexicographically: one numpy call instead of two pandas ones per column. Large ones use
    a mixed radix over each column's codes, re-factorised after every column so codes stay
    below n: hashing is faster than sorting there (np.unique(axis=0) is several times
    slower). Only equality of labels means anything."""
    values = np.asarray(values)
    n = len(values)
    if values.ndim != 2 or values.shape[1] == 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if n <= SORT_ROWS:
        order = np.lexsort(values.T[::-1])
        ordered = values.take(order, axis=0)  # (take: a 2-D gather at a third of indexing's cost)
        new = np.ones(n, dtype=np.bool_)
        np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
        code = np.empty(n, dtype=np.int64)
        code[order] = np.cumsum(new) - 1
        return code
    if values.dtype.kind in "iu":  # integer columns whose ranges fit one int64 together: one hash
        low, high = values.min(axis=0), values.max(axis=0)
        spans = [int(h) - int(lo) + 1 for lo, h in zip(low, high)]
        if math.prod(spans) < 1 << 62:
            radix = np.cumprod([1] + spans[:-1]).astype(np.int64)
            return pd.factorize((values - low) @ radix)[0].astype(np.int64)
    code = np.zeros(n, dtype=np.int64)
    for c in range(values.shape[1]):
        inverse, uniques = pd.factorize(values[:, c])
        code = pd.factorize(code * len(uniques) + inverse)[0].astype(np.int64)
    return code
