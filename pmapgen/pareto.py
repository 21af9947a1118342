"""The one Pareto filter (all criteria minimised), compiled with numba.

Used by pmapgen (prune within a compatibility group) and by the join (prune after each
join step). A row is dropped iff another row of its group is <= in every column; of exact
duplicates the first is kept.

Algorithm: sort each group lexicographically; a row that weakly dominates another then
always comes first, so one pass that tests each row against the rows kept so far is exact.
"""
from __future__ import annotations

import numba
import numpy as np
import pandas as pd

SORT_ROWS = 2048  # below this, group_labels sorts (measured crossover with hashing: about 2,000 rows)


@numba.njit(cache=True)
def _dominated_by_kept(x: np.ndarray, row: int, kept: np.ndarray, n_kept: int) -> bool:
    d = x.shape[1]
    for k in range(n_kept):
        j = kept[k]
        le = True
        for c in range(d):
            if x[j, c] > x[row, c]:
                le = False
                break
        if le:
            return True
    return False


@numba.njit(cache=True)
def _pareto_sorted(x: np.ndarray, order: np.ndarray, starts: np.ndarray, keep: np.ndarray) -> None:
    """`order` lists rows group by group, each group lexicographically sorted; groups
    begin at `starts` (with a final sentinel). Marks non-dominated rows in `keep`."""
    kept = np.empty(order.shape[0], dtype=np.int64)
    for g in range(starts.shape[0] - 1):
        n_kept = 0
        for p in range(starts[g], starts[g + 1]):
            row = order[p]
            if not _dominated_by_kept(x, row, kept, n_kept):
                kept[n_kept] = row
                n_kept += 1
                keep[row] = True


def pareto_mask(criteria: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of the rows of `criteria` (n x d, minimised) on their group's frontier.

    `groups` (n integer labels) restricts dominance to rows with the same label; None
    puts every row in one group.
    """
    x = np.ascontiguousarray(criteria, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError("criteria must be a 2-D array (rows x criteria)")
    n = x.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    if n == 0:
        return keep
    g = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    # lexsort: last key is primary -> group, then column 0, column 1, ...
    order = np.lexsort(tuple(x[:, c] for c in range(x.shape[1] - 1, -1, -1)) + (g,)).astype(np.int64)
    sorted_groups = g[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1], True]).astype(np.int64)
    _pareto_sorted(x, order, starts, keep)
    return keep


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
        ordered = values[order]
        new = np.ones(n, dtype=np.bool_)
        np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
        code = np.empty(n, dtype=np.int64)
        code[order] = np.cumsum(new) - 1
        return code
    code = np.zeros(n, dtype=np.int64)
    for c in range(values.shape[1]):
        inverse, uniques = pd.factorize(values[:, c])
        code = pd.factorize(code * len(uniques) + inverse)[0].astype(np.int64)
    return code
