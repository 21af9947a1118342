"""Choosing the optimal full mapping(s) for an objective from the joined pmappings.

`search` is the interface the mapper uses; it runs the exact join (FFM §6.2) with the
criteria the objective needs and picks the optimum (or, for `pareto`, the energy-latency
frontier). The ε-pruned two-pass search (FFM §6.3) plugs in here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from arch.model import Arch
from ffm.join import join
from pmapgen.pareto import pareto_mask
from workloads.model import Workload

OBJECTIVES = ("energy", "latency", "edp", "pareto")


def criteria(objective: str) -> tuple[str, ...]:
    """Objective columns pruning must keep for `objective` (EDP is monotone in both)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return (objective,) if objective in ("energy", "latency") else ("energy", "latency")


@dataclass
class SearchResult:
    best: pd.DataFrame  # chosen full mappings: one row, or the frontier for `pareto`
    steps: list[tuple[str, int]] = field(default_factory=list)  # (einsum, partial mappings kept)


def select(full: pd.DataFrame, objective: str) -> pd.DataFrame:
    """The optimum of `objective` among full mappings (all of the frontier for pareto)."""
    if full.empty:
        return full
    if objective == "pareto":
        x = full[["energy", "latency"]].to_numpy(dtype=float)
        front = full[pareto_mask(x, np.zeros(len(full), dtype=np.int64))]
        return front.sort_values("energy").reset_index(drop=True)
    value = full["energy"] * full["latency"] if objective == "edp" else full[objective]
    return full.iloc[[int(np.argmin(value.to_numpy()))]].reset_index(drop=True)


def search(tables: dict[str, pd.DataFrame], workload: Workload, arch: Arch, objective: str = "energy",
           on_step=None) -> SearchResult:
    """The optimal full mapping(s) for `objective` over the pmapping tables."""
    steps: list[tuple[str, int]] = []

    def record(einsum: str, kept: int) -> None:
        steps.append((einsum, kept))
        if on_step:
            on_step(einsum, kept)

    full = join(tables, workload, arch, criteria(objective), on_step=record)
    return SearchResult(select(full, objective), steps)
