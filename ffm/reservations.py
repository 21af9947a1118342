"""Reservations in the join, consolidated by lifetime (FFM §5.2, DESIGN §6).

Per finite level a partial mapping keeps, whatever the number of Einsums joined:
- `U:<level>:<j>`: the largest usage seen while an Einsum of lifetime class j ran, where
  class j holds the joined Einsums that share j loops with the frontier (0..D);
- `R:<level>:<j>:<k>` (k < j): over class j, the sum of reservations with lifetime depth
  <= k, which stay live while a later Einsum sharing more than k loops runs;
- `B:<level>`: the backing tiles of live shared tensors.

Joining a pmapping Y at shared depth s adds Y's live part to every class, merges classes
deeper than s into s (their lifetimes are closed: nothing later shares more than s loops
with them) and adds Y as class F_Y. After the step, classes deeper than the depth the next
Einsum must share are merged right away: the next step would merge them before anything
else reads them, and merged rows compare (and prune) better. s, F_Y and the next depth
vary per row, so a compiled kernel takes the rows one by one (`_join_rows`).
"""
from __future__ import annotations

import numba
import numpy as np


def columns(levels: list[str], depth: int) -> list[str]:
    """The reservation columns of a partial mapping, in a fixed order."""
    cols = []
    for lv in levels:
        cols.append(f"B:{lv}")
        for j in range(depth + 1):
            cols.append(f"U:{lv}:{j}")
            cols += [f"R:{lv}:{j}:{k}" for k in range(j)]
    return cols


def join_level(p: dict[str, np.ndarray], lv: str, depth: int, res_y: np.ndarray, fresh: np.ndarray,
               dying: np.ndarray, s: np.ndarray, fy: np.ndarray, s_next: np.ndarray,
               capacity: float) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The reservation columns of one level for joined rows, and which rows fit.

    `p` holds the partial side's columns (already one row per joined row); `res_y[:, k]`
    Y's reservation at this level with lifetime depth <= min(k, F_Y) (k = 0..depth);
    `fresh`/`dying` Y's shared backing tiles at this level that start / stop being live.
    Row by row (`_join_rows`): Y's part live while class j ran (its reservation with
    lifetime depth below min(j, s)) joins U_j, and class j's part live while Y runs
    (R_j,min(j,s)-1) joins Y's usage; the classes deeper than s merge into s; Y becomes
    class F_Y (its usage, and its reservations by lifetime depth); the row fits if every
    U_j does; then the classes deeper than the next Einsum's s merge."""
    n = len(s)
    U = np.empty((depth + 1, n))
    R = np.zeros((depth + 1, depth + 1, n))
    for j in range(depth + 1):
        U[j] = p[f"U:{lv}:{j}"]
        for k in range(j):
            R[j, k] = p[f"R:{lv}:{j}:{k}"]
    B = p[f"B:{lv}"]
    ok = np.empty(n, dtype=np.bool_)
    _join_rows(U, R, np.ascontiguousarray(res_y, dtype=np.float64), B + fresh,
               np.asarray(s, dtype=np.int64), np.asarray(fy, dtype=np.int64), np.asarray(s_next, dtype=np.int64),
               float(capacity), ok)
    out = {f"B:{lv}": B + fresh - dying}
    for j in range(depth + 1):
        out[f"U:{lv}:{j}"] = U[j]
        for k in range(j):
            out[f"R:{lv}:{j}:{k}"] = R[j, k]
    return out, ok


@numba.njit(cache=True)
def _join_rows(U, R, res_y, backed, s, fy, s_next, capacity, ok):
    """`join_level` per row, in place on U[j, row] and R[j, k, row] (k < j); `backed` is
    the level's live backing tiles while Y runs. Sums run in the order of the column-wise
    version this replaced, so totals are the same to the bit."""
    depth = U.shape[0] - 1
    for r in range(U.shape[1]):
        usage = res_y[r, fy[r]] + backed[r]
        for j in range(1, depth + 1):
            m = min(j, s[r])
            if m >= 1:
                U[j, r] += res_y[r, m - 1]
                usage += R[j, m - 1, r]
        _merge_row(U, R, r, s[r])
        j = fy[r]
        U[j, r] = max(U[j, r], usage)
        for k in range(j):
            R[j, k, r] += res_y[r, k]
        fits = True
        for i in range(depth + 1):
            fits = fits and U[i, r] <= capacity
        ok[r] = fits
        _merge_row(U, R, r, s_next[r])


@numba.njit(cache=True)
def _merge_row(U, R, r, s):
    """Merge row r's classes deeper than s into class s: its peak the most of theirs, its
    sums by lifetime depth theirs added (their lifetimes are closed)."""
    depth = U.shape[0] - 1
    if s >= depth:
        return
    top = 0.0
    for j in range(s, depth + 1):
        top = max(top, U[j, r])
    for k in range(s):
        for j in range(s + 1, depth + 1):
            R[s, k, r] += R[j, k, r]
    U[s, r] = top
    for j in range(s + 1, depth + 1):
        U[j, r] = 0.0
        for k in range(j):
            R[j, k, r] = 0.0
