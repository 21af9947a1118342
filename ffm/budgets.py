"""Energy budgets: proving a time-limited energy result optimal (docs/mapper.md, "Proof").

A valid mapping of energy U bounds the optimum, and energy is a sum over Einsums of
non-negative terms. So in any mapping of energy at most U, Einsum e's pmapping has energy
at most U - sum over the other Einsums o of min_o, where min_o is the lowest energy any
pmapping of o has. Two budgeted prefix searches (`pmapgen.prefixes.generate_by_prefixes`,
which keeps the frontier of the pmappings within a budget) turn that into tables the
join can search exactly:

1. **minima**: each Einsum searched with the energy u_e its pmapping has in the U mapping
   as budget (u_e >= min_e, so the frontier within it holds a lowest-energy pmapping);
2. **budgets**: each Einsum searched again with min_e + (U - sum of minima) as budget
   (>= u_e), unless that equals u_e and step 1's table already is the answer.

If every search completes, every pmapping of every mapping of energy at most U is in the
tables or dominated within its compatibility group by one that is, so the join over them
returns the exact optimum (the U mapping itself guarantees it finds one).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd

from arch.model import Arch
from pmapgen import Constraints, Stats, generate_all
from workloads.model import Workload

RTOL = 1e-9  # budgets equal up to summation order


@dataclass(frozen=True)
class Proof:
    """What the energy proof did. `minima` / `budgets` are per Einsum (pJ) once the step that
    computes them completed; `incomplete` names the Einsums whose search hit the time limit
    (or was cancelled after another did); `stats` are the budgeted searches' (last step run)."""
    bound: float  # U, the energy of the mapping the proof started from
    minima: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)
    incomplete: tuple[str, ...] = ()
    stats: dict[str, Stats] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def proven(self) -> bool:
        return bool(self.budgets) and not self.incomplete


def einsum_budgets(bound: float, minima: dict[str, float]) -> dict[str, float]:
    """Per Einsum, the most energy its pmapping can have in a mapping of energy <= `bound`."""
    slack = bound - sum(minima.values())
    return {e: m + slack for e, m in minima.items()}


def pmapping_energies(row: pd.Series, tables: dict[str, pd.DataFrame], order: tuple[str, ...]) -> dict[str, float]:
    """The energy of each Einsum's pmapping in one joined row (`row["rows"]`: table labels)."""
    return {e: float(tables[e].loc[k, "energy"]) for e, k in zip(order, row["rows"])}


def prove_energy(workload: Workload, arch: Arch, row: pd.Series, tables: dict[str, pd.DataFrame],
                 constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
                 workers: int | None = None, progress: bool = True):
    """(results, Proof): `generate_all`-style results whose join is the exact energy optimum
    when `Proof.proven`, else None. `row` is a joined mapping of `tables` (its energy is U)."""
    start = time.perf_counter()
    order = tuple(workload.einsum_names)
    own = pmapping_energies(row, tables, order)
    bound = float(row["energy"])

    def run(budgets: dict[str, float], desc: str):
        res = generate_all(workload, arch, constraints, objectives=("energy",), workers=workers, progress=progress,
                           time_limit=time_limit, budgets=budgets, stop_when_incomplete=True, desc=desc)
        incomplete = tuple(e for e in order if e not in res or not res[e][2].complete)
        return res, incomplete, {e: r[2] for e, r in res.items()}

    res, incomplete, stats = run(own, "proof: minima")
    if incomplete:
        return None, Proof(bound, incomplete=incomplete, stats=stats, seconds=time.perf_counter() - start)
    if any(res[e][0].empty for e in order):  # cannot happen: each table holds the U mapping's pmapping or better
        raise RuntimeError("an energy budget at a found pmapping's own energy kept nothing")
    minima = {e: float(res[e][0]["energy"].min()) for e in order}
    budgets = einsum_budgets(bound, minima)
    if any(budgets[e] > own[e] * (1 + RTOL) for e in order):
        res, incomplete, stats = run(budgets, "proof: budgets")
    proof = Proof(bound, minima, budgets, incomplete, stats, time.perf_counter() - start)
    return (None if incomplete else res), proof
