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
else reads them, and merged rows compare (and prune) better. All of it is vectorised over
rows; s, F_Y and the next depth vary per row.
"""
from __future__ import annotations

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
    `fresh`/`dying` Y's shared backing tiles at this level that start / stop being live."""
    n = len(s)
    rows = np.arange(n)
    U = [p[f"U:{lv}:{j}"].copy() for j in range(depth + 1)]
    R = {(j, k): p[f"R:{lv}:{j}:{k}"].copy() for j in range(depth + 1) for k in range(j)}
    B = p[f"B:{lv}"]
    usage_y = res_y[rows, fy] + B + fresh  # while Y runs
    for j in range(1, depth + 1):
        m = np.minimum(j, s)
        has = m >= 1
        idx = np.maximum(m - 1, 0)
        U[j] += np.where(has, res_y[rows, idx], 0.0)  # Y's part live while class j ran
        usage_y += np.where(has, _pick(R, j, idx), 0.0)  # class j's part live while Y runs
    _merge(U, R, s)
    for j in range(depth + 1):
        U[j] = np.where(fy == j, np.maximum(U[j], usage_y), U[j])
        for k in range(j):
            R[j, k] += np.where(fy == j, res_y[:, k], 0.0)
    ok = np.ones(n, dtype=bool)
    for u in U:
        ok &= u <= capacity
    _merge(U, R, s_next)
    out = {f"B:{lv}": B + fresh - dying}
    for j in range(depth + 1):
        out[f"U:{lv}:{j}"] = U[j]
        for k in range(j):
            out[f"R:{lv}:{j}:{k}"] = R[j, k]
    return out, ok


def _pick(R: dict, j: int, idx: np.ndarray) -> np.ndarray:
    """R[j, idx[row]] per row."""
    out = np.zeros(len(idx))
    for k in range(j):
        out = np.where(idx == k, R[j, k], out)
    return out


def _merge(U: list[np.ndarray], R: dict, s: np.ndarray) -> None:
    """Merge, per row, the classes deeper than s[row] into class s[row] (in place)."""
    depth = len(U) - 1
    if not len(s) or int(s.min()) >= depth:
        return
    top = np.zeros(len(s))
    for j in range(depth + 1):
        top = np.maximum(top, np.where(j >= s, U[j], 0.0))
    for t in range(depth):
        target = s == t
        for k in range(t):
            for j in range(t + 1, depth + 1):
                R[t, k] += np.where(target, R[j, k], 0.0)
    for j in range(depth + 1):
        U[j] = np.where(j > s, 0.0, np.where(j == s, top, U[j]))
        for k in range(j):
            R[j, k] = np.where(j > s, 0.0, R[j, k])
