"""The latency proof: a latency result proven optimal by the latency set at the bound
(docs/mapper.md, "Step 54").

`ffm.latency_bound` bounds every mapping's latency from below by B. Issue 3's latency set
at U = B (`ffm.slack.latency_slack_tables`: each Einsum's pmappings within B minus the
other Einsums' floors, each input held to the c_T its producer's table gives it) holds,
for every mapping of latency at most B, a row of each Einsum's compatibility group that
dominates its pmapping. So when the set is complete, its latency join finds a mapping of
latency at most B exactly when one exists, and that mapping is optimal: no mapping is
faster than B. When the join finds none, every mapping is slower than B: the set proves
that too, and the time-limited flow has to find the result.

A mapping within B needs no complete set, only real pmappings: the set stops as soon as
the rows of the roots ended join to one (`latency_slack_tables`' `early`), and roots are
searched on the c_T their producers have given so far before those end (guesses). Only
"every mapping is slower than B" needs the set complete.

The set completes at gpt3 batch 1 on tpuv4i (450 to 510 s on this 2-core machine); with
the early stop and guesses it meets B in about 115 s (docs/mapper.md, "Step 55"), where
the time-limited flow ends within 1.01x of B in about 290 s. `ffm.map --objective
latency` runs it first, within `seconds` of wall time, each root within half of that, and
stops it as soon as one root is cut short (the set can no longer complete): at batch 64
V's first roots reached that cap (Step 54, before guesses).

Before the set, `ffm.map` tries a faster proof (`prove_at_floors`, docs/mapper.md "Step
56"). B is the sum of the Einsums' latency floors and a mapping's latency the sum of its
Einsums', each at least its floor; so a mapping has latency B exactly when every Einsum's
pmapping is at its floor. The energy proof (`ffm.budgets.prove_energy`) with every Einsum
held to its floor (`Constraints.latency_budget`) therefore finds the least energy over the
mappings at B: any mapping it finds is latency-optimal, and when it completes it is the
least-energy one among them, the latency end of the energy-latency frontier. An Einsum
with no pmapping within its floor proves that no mapping meets B.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.budgets import PROOF_ROWS, Proof, prove_energy
from ffm.latency_bound import einsum_latency_floor, latency_lower_bound
from ffm.search import BOUND_RTOL, SearchResult
from ffm.slack import latency_slack_tables
from pmapgen import Constraints
from workloads.model import Workload

# wall seconds `ffm.map` gives the set by default: the set completes at gpt3 batch 1 in
# about 450 s on this machine (docs/mapper.md, "Step 54")
LATENCY_SET_TIME = 600.0


@dataclass(frozen=True, eq=False)
class LatencyProof:
    """What the latency set at the bound gave: the bound B (seconds), the set's tables per
    Einsum (`generate_all`-style; an Einsum cut short or not reached has an empty one), its
    wall seconds and the latency join of the tables when every Einsum completed (None
    otherwise)."""
    bound: float
    tables: dict[str, tuple]
    seconds: float
    found: SearchResult | None = None
    early: bool = False  # stopped as soon as the rows of the roots ended joined within B

    @property
    def complete(self) -> bool:
        """Whether every Einsum's table is complete within its budget (not when the set
        stopped early)."""
        return not self.early and all(st.complete for _, _, st in self.tables.values())

    @property
    def met(self) -> bool:
        """Whether the set found a mapping at the bound (so the optimum): its join, or that
        of the roots ended when it stopped early, holds one of latency at most B."""
        return _within(self.found, self.bound)

    @property
    def above(self) -> bool:
        """Whether the set proved every mapping slower than B: complete, and its join found
        no mapping within it."""
        return self.complete and self.found is not None and not self.met

    @property
    def cut_short(self) -> tuple[str, ...]:
        """The Einsums whose tables are incomplete (a root cut short, or not started)."""
        return tuple(e for e, (_, _, st) in self.tables.items() if not st.complete)


def prove_latency(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None, seconds: float,
                  join: Callable[[dict[str, pd.DataFrame]], SearchResult], workers: int | None = None,
                  progress: bool = False, bound: float | None = None) -> LatencyProof:
    """The latency set at the bound, within `seconds` of wall time, and `join` (the latency
    join) of its tables when it completes. `bound` (seconds; default `ffm.latency_bound`'s)
    is the set's U: any other U makes `met` say only that a mapping within U exists. A
    root gets at most half of `seconds` (one that needs more leaves too little for the
    rest) and the proof's cap on waiting rows (`PROOF_ROWS`); the first root cut short ends
    the set (`latency_slack_tables`' `stop_when_incomplete`). So where the set cannot
    complete it costs about half of `seconds` (gpt3 batch 64: V's first roots run two at a
    time to the cap), and at gpt3 batch 1 no root takes more than about 140 s."""
    start = time.perf_counter()
    bound = latency_lower_bound(workload, arch) if bound is None else bound
    hits: list[SearchResult] = []

    def early(tables: dict[str, tuple]) -> bool:  # the rows so far join to a mapping within U: done
        found = join({e: t for e, (t, _, _) in tables.items()})
        if _within(found, bound):
            hits.append(found)
        return bool(hits)

    chained = latency_slack_tables(workload, arch, bound, constraints, time_limit=seconds / 2, workers=workers,
                                   progress=progress, max_rows=PROOF_ROWS, deadline=start + seconds,
                                   stop_when_incomplete=True, early=early)
    if chained.early is not None:
        return LatencyProof(bound, chained.early, time.perf_counter() - start, hits[0], early=True)
    tables = chained.results
    found = None
    if all(st.complete for _, _, st in tables.values()):
        found = join({e: t for e, (t, _, _) in tables.items()})
    return LatencyProof(bound, tables, time.perf_counter() - start, found)


@dataclass(frozen=True, eq=False)
class FloorsProof:
    """What the energy proof with every Einsum held to its latency floor gave (module
    docstring): the bound B (seconds, the floors' sum), the proof's tables per Einsum
    (`generate_all`-style), its best mapping (an energy join over them; None if none was
    found), the energy proof's account, and its wall seconds."""
    bound: float
    tables: dict[str, tuple]
    found: SearchResult | None
    proof: Proof
    seconds: float

    @property
    def met(self) -> bool:
        """Whether it found a mapping at the bound (so a latency optimum)."""
        return _within(self.found, self.bound)

    @property
    def least(self) -> bool:
        """Whether that mapping is the least-energy one of every mapping at the bound: the
        proof completed."""
        return self.met and self.proof.proven

    @property
    def above(self) -> bool:
        """Whether the proof's lower bound is infinite, so every mapping takes longer than
        the bound: some Einsum has no pmapping within its floor (its search complete), or
        the tables, complete, join to none."""
        return math.isinf(self.proof.lower)


def floor_constraints(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None = None,
                      slack: float = 0.0) -> dict[str, Constraints]:
    """Each Einsum's constraints with its latency held to its floor
    (`ffm.latency_bound.einsum_latency_floor`) plus `slack` seconds, within `BOUND_RTOL`:
    every mapping of latency at most the bound plus `slack` keeps each Einsum within it,
    since the others take at least their floors (`ffm.edp_proof`)."""
    given = constraints or {}
    return {e: replace(given.get(e) or Constraints(),
                       latency_budget=(einsum_latency_floor(e, workload, arch) + slack) * (1 + BOUND_RTOL))
            for e in workload.einsum_names}


def prove_at_floors(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None,
                    time_limit: float | None, workers: int | None = None, progress: bool = False,
                    join_tables: Callable[[dict[str, pd.DataFrame], str, float | None], SearchResult] | None = None
                    ) -> FloorsProof:
    """The energy proof (`ffm.budgets.prove_energy`, searches of `time_limit` seconds each,
    `join_tables` its energy joins) with every Einsum held to its latency floor
    (`floor_constraints`): the least-energy mapping at the latency bound, if any (module
    docstring). The bound is `ffm.latency_bound`'s, which this relies on being the floors'
    sum.

    While no mapping is known, the first raise cut short ends the proof (`prove_energy`'s
    `raise_after_cut`): the proof is a shortcut, not the flow, and at gpt3 batch 64, where
    the Einsums' pmappings at their floors do not join, the raises after the first one cut
    short took 250 s and found none (docs/mapper.md, "Step 61"). Where no raise is cut short
    (every search completes, as at gpt3 batch 1) nothing changes."""
    start = time.perf_counter()
    bound = latency_lower_bound(workload, arch)
    tables, found, proof = prove_energy(workload, arch, math.inf, {}, floor_constraints(workload, arch, constraints),
                                        time_limit, workers, progress, join_tables, raise_after_cut=False)
    return FloorsProof(bound, tables or {}, found, proof, time.perf_counter() - start)


def _within(found: SearchResult | None, bound: float) -> bool:
    """Whether the join found a mapping of latency at most `bound`."""
    return found is not None and not found.best.empty and \
        float(found.best["latency"].iloc[0]) <= bound * (1 + BOUND_RTOL)
