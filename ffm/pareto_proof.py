"""The pareto proof: an energy-latency frontier proven exact from complete tables over the
boxes no known mapping dominates (docs/mapper.md, "Step 57").

Take known mappings (points (E, L)) whose frontier starts at the latency bound B with the
least energy there (the floors proof's, `ffm.latency_proof.prove_at_floors`) and ends at
the energy optimum E_low (the energy proof's). Sweep up in latency. Once every
Pareto-optimal mapping of latency at most `proven_to` is known, let `cap` be the least
energy among the known points there and L' the least latency of a known point ahead of it
(lower energy, more latency). A Pareto-optimal mapping of latency in (proven_to, L'] costs
at most `cap` (else the point at `cap` dominates it), so it lies in the box {E <= cap,
L <= L'}. A mapping in that box keeps each Einsum within its latency floor plus L' - B
(`ffm.latency_proof.floor_constraints`: the others take at least their floors), and within
its energy budget for U = cap (`ffm.slack.slack_tables`, its searches on energy and
latency). Those tables, complete, hold a row dominating each pmapping of each such
mapping in its compatibility group, so the pareto join over them finds every
Pareto-optimal mapping in the box: `proven_to` becomes L', and `cap` the least energy
now known up to it. The sweep ends once `cap` is E_low: no mapping costs less, so none
slower is Pareto-optimal. The frontier is then exact.

The boxes follow the known points, so their number is the frontier's. Each box's cost
grows with its energy slack above the Einsums' minima within its latency budgets: at gpt3
batch 1 the three boxes take 64 to 105 s each, where one set over the whole region (energy
at most the least-latency point's, 127.29 mJ) took 476 s (docs/pmapgen.md, "The Pareto
set as boxes").
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.budgets import PROOF_ROWS
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import floor_constraints
from ffm.search import BOUND_RTOL, SearchResult, search
from ffm.slack import slack_tables
from pmapgen import Constraints
from pmapgen.all_einsums import generate_all, union
from workloads.model import Workload


# `ffm.map` gives the pareto proof this many times one box's own deadline (its search time
# limit per Einsum) of wall: a frontier of many points has as many boxes. At gpt3 batch 1
# with the CLI's 30 s, 600 s for the 237 s its three boxes take
WALL_BOXES = 2.0


@dataclass(frozen=True)
class Box:
    """Every mapping of energy at most `energy` (pJ) and latency at most `latency` (s)."""
    energy: float
    latency: float


@dataclass(frozen=True)
class BoxRun:
    """One box of the sweep: whether its tables completed, the frontier points its join
    found in it, and its wall seconds (minima and tables)."""
    box: Box
    complete: bool
    points: int
    seconds: float


@dataclass(frozen=True, eq=False)
class ParetoProof:
    """What the pareto proof gave: the union of the seed's and the boxes' tables, their pareto
    join (a SearchResult over them), the boxes searched in order, whether the frontier is
    proven exact, why not (`reason`, "" when proven), and its wall seconds."""
    tables: dict[str, tuple]
    found: SearchResult
    runs: tuple[BoxRun, ...]
    proven: bool
    reason: str
    seconds: float


def frontier_points(found: SearchResult) -> list[tuple[float, float]]:
    """A pareto join's frontier as (energy pJ, latency s), by increasing latency."""
    return sorted(zip(found.best["energy"].astype(float), found.best["latency"].astype(float)),
                  key=lambda p: (p[1], p[0]))


def next_box(points: list[tuple[float, float]], proven_to: float, energy_low: float) -> Box | None:
    """The sweep's next box (module docstring) once every Pareto-optimal mapping of latency at
    most `proven_to` is among `points`, or None when the least energy known there is
    `energy_low` (the energy optimum: nothing slower is Pareto-optimal). Its latency is
    inf when no known point costs less further on."""
    cap = min(e for e, lat in points if lat <= proven_to * (1 + BOUND_RTOL))
    if cap <= energy_low * (1 + BOUND_RTOL):
        return None
    ahead = [lat for e, lat in points if lat > proven_to * (1 + BOUND_RTOL) and e < cap * (1 - BOUND_RTOL)]
    return Box(cap, min(ahead, default=math.inf))


def box_tables(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None, box: Box,
               time_limit: float | None, workers: int | None = None, progress: bool = False,
               deadline: float | None = None) -> tuple[dict[str, tuple], bool]:
    """Tables holding every pmapping of every mapping in `box` (module docstring), and whether
    they are complete: each Einsum's least energy within its latency floor plus the box's
    slack (rising budgets), then `ffm.slack.slack_tables` for U = the box's energy under
    those latency budgets, no keyed search starting after `deadline` (a
    `time.perf_counter()` value; default: `time_limit` per Einsum from the keyed searches'
    start). An Einsum with no pmapping within its budget leaves the box empty: no tables,
    complete."""
    bound = latency_lower_bound(workload, arch)
    held = floor_constraints(workload, arch, constraints, slack=box.latency - bound)
    names = workload.einsum_names
    minima = generate_all(workload, arch, held, objectives=("energy", "latency"),
                          budgets={e: math.inf for e in names}, rising=True, workers=workers, progress=progress,
                          time_limit=time_limit, desc="pareto proof: minima")
    if not all(s.complete for _, _, s in minima.values()):
        return {}, False
    if any(len(t) == 0 for t, _, _ in minima.values()):
        return {}, True
    lows = {e: float(t["energy"].min()) for e, (t, _, _) in minima.items()}
    own = None if time_limit is None else time.perf_counter() + time_limit * len(names)
    st = slack_tables(workload, arch, box.energy, lows, held, time_limit=time_limit, workers=workers,
                      progress=progress, max_rows=PROOF_ROWS,
                      deadline=min((d for d in (own, deadline) if d is not None), default=None))
    return dict(st.results), not st.incomplete


def prove_pareto(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None,
                 seed: dict[str, tuple], energy_low: float, at_bound: bool, time_limit: float | None,
                 workers: int | None = None, progress: bool = False,
                 join_pareto: Callable[[dict[str, pd.DataFrame]], SearchResult] | None = None,
                 seconds: float | None = None) -> ParetoProof:
    """The pareto proof (module docstring) from the `seed` tables (`generate_all`-style; the
    floors proof's and the energy proof's), `energy_low` the proven energy optimum (pJ),
    `at_bound` whether the seed's least energy at the latency bound is proven the least
    there (else a first box at the bound proves it). Searches of `time_limit` seconds
    (`box_tables`); `join_pareto` is the pareto join (default `ffm.search.search`). With
    `seconds`, no box (nor keyed search) starts that many seconds after the start: a
    frontier of many points has as many boxes (not proven then)."""
    start = time.perf_counter()
    deadline = None if seconds is None else start + seconds
    join = join_pareto or (lambda tabs: search(tabs, workload, arch, "pareto"))
    bound = latency_lower_bound(workload, arch)
    tables = seed
    found = join({e: t for e, (t, _, _) in tables.items()})
    runs: list[BoxRun] = []
    proven_to = bound if at_bound else None
    reason = ""
    while True:
        points = frontier_points(found)
        if proven_to is None:
            at = [e for e, lat in points if lat <= bound * (1 + BOUND_RTOL)]
            if not at:
                reason = "no known mapping at the latency bound"
                break
            box = Box(min(at), bound)
        else:
            box = next_box(points, proven_to, energy_low)
            if box is None:
                break
            if math.isinf(box.latency):
                reason = "no known mapping reaches the energy optimum"
                break
        began = time.perf_counter()
        if deadline is not None and began > deadline:
            reason = f"out of time after {len(runs)} box{'' if len(runs) == 1 else 'es'}"
            break
        got, complete = box_tables(workload, arch, constraints, box, time_limit, workers, progress, deadline)
        if got:
            tables = union(tables, got)
            found = join({e: t for e, (t, _, _) in tables.items()})
        inside = sum(e <= box.energy * (1 + BOUND_RTOL) and lat <= box.latency * (1 + BOUND_RTOL)
                     for e, lat in frontier_points(found))
        runs.append(BoxRun(box, complete, inside, time.perf_counter() - began))
        if not complete:
            reason = "a box's searches were cut short"
            break
        proven_to = box.latency
    return ParetoProof(tables, found, tuple(runs), not reason, reason, time.perf_counter() - start)
