"""The EDP proof: a mapping proven EDP-optimal from energy proofs under latency budgets
(docs/mapper.md, "Step 56").

Take a mapping of EDP V (the candidate) and E_low, a lower bound on every mapping's
energy (the energy proof's). A mapping of latency L has EDP at least E_low x L, so one
that beats V takes less than h = V / E_low. A mapping of latency at most h keeps each
Einsum within its latency floor plus (h - B) (B: `ffm.latency_bound`), since the others
take at least their floors; so the energy proof with those latency budgets
(`ffm.latency_proof.floor_constraints`) bounds its energy from below by its
`Proof.lower`, E(h). Every mapping with latency L in [V / E(h), h] then has EDP at least
E(h) x L >= V, and the proof sweeps down: h becomes V / E(h), until it is at most B (no
mapping beats V: proven), or h stops falling or `MAX_STEPS` proofs ran (not proven). A
mapping a proof finds with an EDP below V becomes the candidate, which lowers h.

The budgets bound each Einsum, not the sum: a mapping within them may take up to B plus
n (h - B) for n Einsums, so E(h) may be the energy of a mapping slower than h, and the
sweep then stalls (tests/test_edp_proof.py's `dag`: its candidate, at B, is not proven).
Holding the join's total latency to h would close that gap.

At gpt3 batch 1 on tpuv4i the candidate is the least-energy mapping at B (the floors
proof's, 127.29 mJ at 6.768 ms), E_low the energy optimum (125.64 mJ), and one step
closes it: with every Einsum given its floor plus 0.089 ms (h = 6.857 ms), the least
energy is still 127.29 mJ.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.budgets import prove_energy
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import floor_constraints
from ffm.search import BOUND_RTOL, SearchResult
from pmapgen import Constraints
from workloads.model import Workload

# at most this many energy proofs before the EDP proof gives up
MAX_STEPS = 8


@dataclass(frozen=True)
class Step:
    """One energy proof of the sweep: every mapping of latency at most `high` (seconds)
    takes at least `energy` (pJ)."""
    high: float
    energy: float

    def closed(self, value: float) -> float:
        """The least latency above which no mapping of latency at most `high` beats EDP
        `value` (pJ*s)."""
        return value / self.energy if self.energy > 0 else math.inf


@dataclass(frozen=True, eq=False)
class EdpProof:
    """What the EDP proof gave: the candidate's EDP (pJ*s), the tables and the energy join
    (a SearchResult whose first row is the candidate) it came from, the energy lower bound
    and latency bound it started from, the sweep's steps, whether it proved the candidate
    optimal, and its wall seconds."""
    value: float
    tables: dict[str, tuple]
    found: SearchResult
    energy_low: float
    latency_bound: float
    steps: tuple[Step, ...]
    proven: bool
    seconds: float

    @property
    def latency_max(self) -> float:
        """Above this latency no mapping can beat the candidate (its EDP over the energy
        bound)."""
        return self.value / self.energy_low


def edp_of(found: SearchResult | None) -> float:
    """The EDP of a search result's first row (pJ*s; inf for none)."""
    if found is None or found.best.empty:
        return math.inf
    row = found.best.iloc[0]
    return float(row["energy"]) * float(row["latency"])


def prove_edp(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None,
              candidate: tuple[dict[str, tuple], SearchResult], energy_low: float, time_limit: float | None,
              workers: int | None = None, progress: bool = False,
              join_tables: Callable[[dict[str, pd.DataFrame], str, float | None], SearchResult] | None = None,
              max_steps: int = MAX_STEPS) -> EdpProof:
    """The EDP proof (module docstring) for `candidate` ((tables, energy join) whose first
    row is a mapping) and `energy_low`, a lower bound on every mapping's energy (pJ): energy
    proofs of `time_limit` seconds per search (`ffm.budgets.prove_energy`, `join_tables`
    its joins), at most `max_steps` of them."""
    start = time.perf_counter()
    bound = latency_lower_bound(workload, arch)
    tables, found = candidate
    value = edp_of(found)
    high = value / energy_low
    steps: list[Step] = []
    proven = high <= bound * (1 + BOUND_RTOL)
    while not proven and len(steps) < max_steps:
        res, best, proof = prove_energy(workload, arch, math.inf, {},
                                        floor_constraints(workload, arch, constraints, slack=high - bound),
                                        time_limit, workers, progress, join_tables)
        if edp_of(best) < value * (1 - BOUND_RTOL):  # a better candidate
            tables, found, value = res, best, edp_of(best)
        steps.append(Step(high, max(proof.lower, energy_low)))
        edge = min(steps[-1].closed(value), value / energy_low)
        proven = edge <= bound * (1 + BOUND_RTOL)
        if edge >= high * (1 - BOUND_RTOL):  # h no longer falls (module docstring)
            break
        high = edge
    return EdpProof(value, tables, found, energy_low, bound, tuple(steps), proven, time.perf_counter() - start)
