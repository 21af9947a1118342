"""Choosing the optimal full mapping(s) for an objective: the two-pass search of FFM §6.3.

1. **Dirty pass**: the join with ε-pruning (`ffm.epsilon`) on every criterion, objectives
   and reservations, with the per-step δ that keeps the end-to-end factor at 1+ε. Capacity
   is still checked on real values, so whatever it finds is a valid mapping; its objective
   is an upper bound B on the optimum. If it finds nothing (coarsened reservations can lose
   every valid mapping), it is retried with ε/4, ... down to `EPSILON_FLOOR`, then exactly.
2. **Clean pass**: the exact join, dropping after every step (and from the pmapping tables
   before joining) every partial mapping whose objective lower bound exceeds B. Energy and
   latency are sums over Einsums of non-negative terms, so a partial mapping's value plus
   the smallest value each remaining Einsum's table offers bounds every completion from
   below; EDP = energy x latency is increasing in both, so the product of the two bounds
   bounds it. The optimum (value <= B) is never dropped, and exact pruning keeps it or a
   mapping at least as good, so the clean pass returns the exact optimum.

A caller that already knows a valid mapping of objective U made of the tables' rows (or of
rows each weakly dominated within its compatibility group by one in the tables) passes
`known=U`: both passes then drop from the start what cannot beat U, and the clean pass
prunes against min(B, U); a dirty pass that finds nothing under U is not retried (the U
mapping is there for the clean pass to find). Without one, a **scout** pass looks for it:
a join that goes on after each step with only the most promising partial mappings (the
`scout` of least lower bound and the least of each compatibility group). It is fast and
what it finds is valid, so its value serves as U; exactness still rests on the clean pass.

For `pareto` no single bound exists: the scout's frontier prunes instead. The exact join
drops every partial mapping whose energy and latency lower bounds are both above those of
one of the scout's mappings (`_undominated`): each of its completions is strictly dominated.
docs/search.md has the rules, the dirty pass's guarantee and the defaults.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from arch.model import Arch
from ffm.epsilon import step_epsilon
from ffm.join import TABLE_ROWS_HELD, Step, hold, join
from looptree.nodes import Mapping
from pmapgen import rebuild
from pmapgen.pareto import pareto_mask
from workloads.model import Workload

OBJECTIVES = ("energy", "latency", "edp", "pareto")
DEFAULT_EPSILON = 0.2  # the paper's first guess (FFM §6.3), here the end-to-end factor
EPSILON_FLOOR = 0.01  # retries go ε, ε/4, ... while >= this, then exact
BOUND_RTOL = 1e-9  # slack on B: lower bounds and totals are summed in different orders
SCOUT_WIDTH = 1000  # partial mappings the scout pass goes on with after each step
KEPT_HELD = 32  # `_kept` results held (`_KEPT`)
_KEPT: dict = {}  # (id of a table, its rows kept, packed): (the table, those rows)


def criteria(objective: str) -> tuple[str, ...]:
    """Objective columns pruning must keep for `objective` (EDP is monotone in both)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return (objective,) if objective in ("energy", "latency") else ("energy", "latency")


def objective_value(energy, latency, objective: str):
    """The scalar objective (energy, latency or EDP) of arrays of energies and latencies."""
    if objective == "energy":
        return energy
    if objective == "latency":
        return latency
    if objective == "edp":
        return np.asarray(energy) * np.asarray(latency)
    raise ValueError(f"no scalar value for objective {objective!r}")


@dataclass(frozen=True)
class Pass:
    """One join run: `name` is dirty, clean or exact; `epsilon` its end-to-end ε and
    `delta` the per-step δ (0: exact pruning); `found` full mappings it kept."""
    name: str
    epsilon: float
    delta: float
    steps: tuple[Step, ...]
    found: int


@dataclass
class SearchResult:
    best: pd.DataFrame  # chosen full mappings: one row, or the frontier for `pareto`
    steps: list[tuple[str, int]] = field(default_factory=list)  # (einsum, kept) of the pass that gave `best`
    passes: list[Pass] = field(default_factory=list)  # every pass, in order (retries included)
    bound: float | None = None  # B, the dirty optimum the clean pass pruned against
    epsilon: float = 0.0  # ε of the dirty pass that found a mapping (0: none was run, or exact)


def select(full: pd.DataFrame, objective: str) -> pd.DataFrame:
    """The optimum of `objective` among full mappings (all of the frontier for pareto)."""
    if full.empty:
        return full
    if objective == "pareto":
        x = full[["energy", "latency"]].to_numpy(dtype=float)
        front = full[pareto_mask(x, np.zeros(len(full), dtype=np.int64))]
        return front.sort_values("energy").reset_index(drop=True)
    value = objective_value(full["energy"].to_numpy(), full["latency"].to_numpy(), objective)
    return full.iloc[[int(np.argmin(value))]].reset_index(drop=True)


def _completion_bound(tables: dict[str, pd.DataFrame], order: list[str], objective: str):
    """lower(frame, missing): per row (energy and latency of some Einsums), a lower bound on
    the objective of every full mapping completing it, adding the smallest energy and
    latency each Einsum in `missing` (indices into `order`) offers."""
    low_e = np.array([tables[e]["energy"].min() for e in order], dtype=float)
    low_l = np.array([tables[e]["latency"].min() for e in order], dtype=float)

    def lower(frame, missing: list[int]) -> np.ndarray:  # (a table, or a join's `ffm.join.Columns`)
        return objective_value(np.asarray(frame["energy"], dtype=float) + low_e[missing].sum(),
                               np.asarray(frame["latency"], dtype=float) + low_l[missing].sum(), objective)

    return lower


def _under_bound(tables: dict[str, pd.DataFrame], order: list[str], objective: str, bound: float):
    """(tables without rows that cannot be in a mapping within `bound`, admit(i, partial)
    for the join)."""
    limit = bound * (1 + BOUND_RTOL)
    lower = _completion_bound(tables, order, objective)
    return _pruned(tables, order, lambda frame, missing: lower(frame, missing) <= limit)


def _pruned(tables: dict[str, pd.DataFrame], order: list[str], open_: Callable):
    """(each table without the rows `open_` closes, admit(i, partial) for the join), where
    open_(frame, missing) masks the rows of a table or partial mapping that may still be
    in a wanted full mapping once the Einsums `missing` (indices into `order`) join."""
    n = len(order)
    kept = {e: _kept(tables[e], open_(tables[e], [j for j in range(n) if j != k])) for k, e in enumerate(order)}

    def admit(i: int, partial) -> np.ndarray:
        return open_(partial, list(range(i + 1, n)))

    return kept, admit


def _kept(table: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """table[mask], the same frame again for the same table (by identity: tables are never
    written in place) and rows, so that the join builds its view of it once
    (`ffm.join._table`): the energy proof's refinements search the same tables under the
    same U again and again (at batch 1, 16 searches rebuilt 160 views, 1.8 s of the
    main process; forty-seventh session)."""
    if mask.all():
        return table
    key = (id(table), np.packbits(mask).tobytes())
    held = _KEPT.pop(key, None)
    if held is None or held[0] is not table:
        held = (table, table[mask])
    hold(_KEPT, key, held, KEPT_HELD, TABLE_ROWS_HELD)
    return held[1]


def _undominated(tables: dict[str, pd.DataFrame], order: list[str], front: pd.DataFrame):
    """`_under_bound` for pareto: (tables without rows that cannot be on the frontier,
    admit(i, partial) for the join). `front` holds valid full mappings of the tables (the
    scout's frontier). A partial mapping whose lower bounds on energy and latency (its own
    plus the least each missing Einsum offers) are both above those of a point of `front`
    has every completion strictly dominated by that point, so no frontier mapping is lost."""
    lower_e = _completion_bound(tables, order, "energy")
    lower_l = _completion_bound(tables, order, "latency")
    by_energy = front.sort_values("energy")
    energies = by_energy["energy"].to_numpy(dtype=float) * (1 + BOUND_RTOL)
    # the least latency among the points of at most each energy
    latencies = np.minimum.accumulate(by_energy["latency"].to_numpy(dtype=float)) * (1 + BOUND_RTOL)

    def open_(frame, missing: list[int]) -> np.ndarray:
        below = np.searchsorted(energies, lower_e(frame, missing), side="left")  # points of less energy
        least = latencies[np.maximum(below - 1, 0)]
        return (below == 0) | (lower_l(frame, missing) <= least)

    return _pruned(tables, order, open_)


def _most_promising(tables: dict[str, pd.DataFrame], order: list[str], objective: str, width: int):
    """narrow(i, frame) for the scout pass: a mask of the `width` partial mappings with the
    least lower bound, and the least of every compatibility group (so that every way the
    next Einsums could join stays open). For pareto, `width` by each of energy, latency and
    EDP (the frontier's ends and its knee)."""
    lowers = [_completion_bound(tables, order, o)
              for o in (("energy", "latency", "edp") if objective == "pareto" else (objective,))]

    def narrow(i: int, frame) -> np.ndarray:
        n = len(frame["group"])
        if n <= width:
            return np.ones(n, dtype=bool)
        keep = np.zeros(n, dtype=bool)
        for lower in lowers:
            value = lower(frame, list(range(i + 1, len(order))))
            keep[np.argpartition(value, width)[:width]] = True
        by_value = np.argsort(value, kind="stable")
        groups = frame["group"][by_value]
        keep[by_value[np.unique(groups, return_index=True)[1]]] = True
        return keep

    return narrow


def search(tables: dict[str, pd.DataFrame], workload: Workload, arch: Arch, objective: str = "energy",
           on_step: Callable[[str, int], None] | None = None, *, epsilon: float = DEFAULT_EPSILON,
           dirty_only: bool = False, on_pass: Callable[[str, float], None] | None = None,
           known: float | None = None, scout: int = SCOUT_WIDTH) -> SearchResult:
    """The optimal full mapping(s) for `objective` over the pmapping tables (row labels of
    `tables` are what `best["rows"]` holds).

    `epsilon` is the dirty pass's end-to-end factor (0: one exact pass, after the scout); `dirty_only`
    returns the dirty pass's choice (within the guarantee of docs/search.md) without the
    clean pass. `on_step(einsum, kept)` is called after every join step of every pass,
    `on_pass(name, epsilon)` before each pass. `known` is the objective of a valid mapping
    the tables hold (module docstring; ignored for pareto); with `dirty_only`, an empty
    result then means the dirty pass kept nothing under it. Without `known`, a scout pass
    that goes on with only the `scout` most promising partial mappings after each step
    looks for one first (0: no scout; not for pareto or `dirty_only`).
    """
    crit = criteria(objective)
    order = list(workload.einsum_names)
    passes: list[Pass] = []
    bounded = objective != "pareto" and all(len(tables[e]) for e in order)

    def run(name: str, eps: float, delta: float, tabs=tables, admit=None, narrow=None) -> pd.DataFrame:
        if on_pass:
            on_pass(name, eps)
        trace: list[Step] = []
        full = join(tabs, workload, arch, crit, on_step=on_step, delta=delta, admit=admit, trace=trace,
                    narrow=narrow)
        passes.append(Pass(name, eps, delta, tuple(trace), len(full)))
        return full

    first, first_admit = tables, None
    pareto = objective == "pareto"  # (its scout's frontier prunes; `known` is ignored)
    if (known is None or pareto) and scout > 0 and all(len(tables[e]) for e in order) and not dirty_only:
        found = select(run("scout", 0.0, 0.0, narrow=_most_promising(tables, order, objective, scout)), objective)
        if not found.empty and pareto:
            first, first_admit = _undominated(tables, order, found)
        elif not found.empty:
            known = float(objective_value(found["energy"].to_numpy(), found["latency"].to_numpy(), objective)[0])
    if known is not None and bounded:
        first, first_admit = _under_bound(tables, order, objective, known)

    def result(full: pd.DataFrame, bound: float | None = None, eps: float = 0.0) -> SearchResult:
        last = passes[-1]
        return SearchResult(select(full, objective), [(s.einsum, s.kept) for s in last.steps], passes, bound, eps)

    if epsilon <= 0 or (objective == "pareto" and not dirty_only) or any(len(tables[e]) == 0 for e in order):
        return result(run("exact", 0.0, 0.0, first, first_admit))
    eps = epsilon
    while True:
        delta = step_epsilon(eps, len(order) - 1)
        full = run("dirty" if delta else "exact", eps if delta else 0.0, delta, first, first_admit)
        if not full.empty or not delta or known is not None:
            break
        eps = eps / 4 if eps / 4 >= EPSILON_FLOOR else 0.0
    if dirty_only or not delta:  # (an exact pass is the answer: nothing to clean)
        return result(full, eps=eps if delta else 0.0)
    if full.empty:  # only with `known`: the dirty pass lost every mapping under it
        bound = known
    else:
        dirty = select(full, objective)
        bound = float(objective_value(dirty["energy"].to_numpy(), dirty["latency"].to_numpy(), objective)[0])
        bound = bound if known is None else min(bound, known)
    kept, admit = _under_bound(tables, order, objective, bound)
    clean = run("clean", 0.0, 0.0, kept, admit)
    if clean.empty:  # impossible: the dirty mapping itself is within the bound
        raise RuntimeError(f"clean pass lost every mapping within the dirty bound {bound!r}")
    return result(clean, bound, eps)


def full_mapping(row: pd.Series, results: dict, order: tuple[str, ...]) -> Mapping:
    """The full mapping a joined row stands for: one rebuilt pmapping per Einsum
    (`results` as `pmapgen.generate_all` returns them, indexed by the row's `rows`)."""
    return Mapping({e: rebuild(results[e][0].loc[i], results[e][1]) for e, i in zip(order, row["rows"])}, order)
