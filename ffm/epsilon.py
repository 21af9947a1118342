"""ε-pruning (FFM §6.3, after Papadimitriou & Yannakakis): an ε-Pareto set through the
one Pareto filter (`pmapgen.pareto.pareto_mask`), run on coarsened criteria.

Coarsening maps each criterion x >= 0 to its bucket floor(log(x) / log(1+δ)) (0 -> -inf,
inf -> inf). The filter drops a row only if a kept row is in the same or a lower bucket
in every criterion, so the kept row is < (1+δ)·x in each nonzero criterion and exactly 0
wherever the dropped row is 0. With δ = 0 nothing is coarsened: the filter is exact.

The join prunes after every step; substitutions compound, so an end-to-end factor 1+ε
over n coarsened steps needs a per-step δ with (1+δ)^n = 1+ε (`step_epsilon`).
"""
from __future__ import annotations

import numpy as np

from pmapgen.pareto import pareto_mask


def coarsen(criteria: np.ndarray, delta: float) -> np.ndarray:
    """Bucket index of every (non-negative) entry on the grid (1+δ)^k; δ = 0 returns a copy."""
    x = np.asarray(criteria, dtype=np.float64)
    if delta <= 0:
        return x.copy()
    if np.any(x < 0):
        raise ValueError("ε-pruning needs non-negative criteria")
    with np.errstate(divide="ignore"):
        return np.floor(np.log(x) / np.log1p(delta))  # log(0) = -inf stays below every bucket


def epsilon_mask(criteria: np.ndarray, groups: np.ndarray | None, delta: float) -> np.ndarray:
    """Rows kept by ε-pruning with per-row-criterion factor 1+δ (exact Pareto when δ = 0).

    Of rows in the same buckets the filter keeps the first; rows are offered to it in
    lexicographic order of their real criteria, so that one is the best in the first
    criterion (the objective, by the join's column order)."""
    x = np.asarray(criteria, dtype=np.float64)
    if delta <= 0 or len(x) == 0:
        return pareto_mask(x, groups)
    order = np.lexsort(tuple(x[:, c] for c in range(x.shape[1] - 1, -1, -1)))
    g = None if groups is None else np.asarray(groups)[order]
    keep = np.zeros(len(x), dtype=bool)
    keep[order] = pareto_mask(coarsen(x[order], delta), g)
    return keep


def step_epsilon(epsilon: float, steps: int) -> float:
    """Per-step δ such that `steps` compounded substitutions stay within 1+ε."""
    if epsilon <= 0 or steps <= 0:
        return 0.0
    return float(np.expm1(np.log1p(epsilon) / steps))
