"""Energy budgets: proving a time-limited energy result optimal (docs/mapper.md, "Energy proof").

A valid mapping of energy U bounds the optimum, and energy is a sum over Einsums of
non-negative terms. So in any mapping of energy at most U, Einsum e's pmapping has energy
at most U - sum over the other Einsums o of min_o, where min_o is the lowest energy any
pmapping of o has. Budgeted prefix searches (`pmapgen.prefixes.generate_by_prefixes`,
which keeps the frontier of the pmappings within a budget) turn that into tables the
join can search exactly:

1. **minima**: each Einsum is searched with budgets rising from its energy floor until
   one keeps a pmapping, at most the lowest energy t_e of the pmappings found for it so
   far (a real pmapping's, so t_e >= min_e: the frontier within it holds a lowest-energy
   pmapping; `pmapgen.prefixes.generate_by_rising_budgets`). The join over these tables
   together with the pmappings found before is the best mapping made of either; it may
   lower U, and it is kept as the result even if the proof then cannot complete. Every
   Einsum runs even when one hits the time limit: a search cut short still bounds its
   minimum from below (`Stats.lower_bound`), and the sum of the minima and those bounds
   bounds the optimum (`Proof.lower`).
2. **budgets**: each Einsum is searched again with min_e + (U - sum of minima) as budget,
   unless that is at most step 1's final budget for every Einsum (then step 1's tables
   already hold every pmapping within its budget).

If every search completes, every pmapping of every mapping of energy at most U is in the
tables or dominated within its compatibility group by one that is, so the join over them
returns the exact optimum (the U mapping guarantees that there is one).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.search import SearchResult, search
from pmapgen import Constraints, Stats, generate_all
from pmapgen.all_einsums import union
from pmapgen.prefixes import energy_lower_bound
from workloads.model import Workload

RTOL = 1e-9  # budgets equal up to summation order


@dataclass(frozen=True)
class Proof:
    """What the energy proof did. `bound` is U (the best found, or the step-1 join's if
    lower) and `lower` a lower bound on the optimum, so the best found is within
    bound / lower of it; `minima` (per Einsum, pJ) holds the exact minima found, `budgets`
    is set once every minimum is known; `incomplete` names the Einsums whose search hit
    the time limit (or did not start after another did); `steps` holds each step run as
    (name, {einsum: Stats})."""
    bound: float
    lower: float = 0.0  # a lower bound on the optimum: each Einsum's minimum where known, else a bound on it
    minima: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)
    incomplete: tuple[str, ...] = ()
    steps: tuple[tuple[str, dict[str, Stats]], ...] = ()
    seconds: float = 0.0
    found: float = 0.0  # the best mapping's energy before the proof (`bound` is lower if the proof found better)

    @property
    def proven(self) -> bool:
        return bool(self.budgets) and not self.incomplete

    @property
    def timed_out(self) -> tuple[str, ...]:
        """The Einsums whose budgeted search hit the time limit (the rest of `incomplete`
        did not start)."""
        last = self.steps[-1][1] if self.steps else {}
        return tuple(e for e in self.incomplete if e in last and not last[e].complete)


def einsum_budgets(bound: float, minima: dict[str, float]) -> dict[str, float]:
    """Per Einsum, the most energy its pmapping can have in a mapping of energy <= `bound`."""
    slack = bound - sum(minima.values())
    return {e: m + slack for e, m in minima.items()}


def prove_energy(workload: Workload, arch: Arch, bound: float, found: dict[str, tuple],
                 constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
                 workers: int | None = None, progress: bool = True,
                 join_tables: Callable[[dict[str, pd.DataFrame], str, float], SearchResult] | None = None,
                 improve: Callable[[dict, SearchResult], tuple[dict, SearchResult]] | None = None):
    """(results, best, Proof): `best` is the best mapping the proof's tables gave (a
    SearchResult over `results`, `generate_all`-style): the exact energy optimum when
    `Proof.proven`; otherwise the join of step 1's tables together with `found`'s when it
    beats `bound`; else both are None. `found` holds the pmappings found so far
    (`generate_all`-style, per Einsum (table, templates, stats)), `bound` the energy of a
    valid mapping made of their rows. `join_tables(tables, name, known)` runs a join (default:
    `ffm.search.search` for energy with `known`: the energy of a mapping the tables hold),
    so a caller can show progress. `improve(results, best)` (e.g. `ffm.descent.descend`)
    may lower step 1's join result before step 2 takes its energy as U."""
    start, given = time.perf_counter(), bound
    order = tuple(workload.einsum_names)
    steps = []
    join_tables = join_tables or (lambda tabs, name, known: search(tabs, workload, arch, "energy", known=known))

    def run(budgets: dict[str, float], name: str, stop: bool, rising: bool = False):
        res = generate_all(workload, arch, constraints, objectives=("energy",), workers=workers, progress=progress,
                           time_limit=time_limit, budgets=budgets, stop_when_incomplete=stop, desc=f"proof: {name}",
                           rising=rising)
        steps.append((name, {e: r[2] for e, r in res.items()}))
        return res, tuple(e for e in order if e not in res or not res[e][2].complete)

    def proof(minima: dict[str, float], bound: float, **kwargs) -> Proof:
        first = steps[0][1] if steps else {}
        # a rising search's bound already includes the energy floor it started from
        lower = sum(minima[e] if e in minima else first[e].lower_bound if e in first else
                    energy_lower_bound(e, workload, arch, (constraints or {}).get(e)) for e in order)
        return Proof(bound, lower, minima, steps=tuple(steps), seconds=time.perf_counter() - start, found=given,
                     **kwargs)

    lowest = {e: float(found[e][0]["energy"].min()) for e in order}
    res, incomplete = run(lowest, "minima", stop=False, rising=True)
    done = [e for e in order if e not in incomplete]
    if any(res[e][0].empty for e in done):  # cannot happen: each holds the pmapping found or a better one
        raise RuntimeError("an energy budget at a found pmapping's own energy kept nothing")
    minima = {e: float(res[e][0]["energy"].min()) for e in done}
    # the best mapping of pmappings found so far or by step 1 (each Einsum's least-energy
    # ones): it may lower U even when the proof cannot complete
    both = union(found, res)
    joined = join_tables({e: r[0] for e, r in both.items()}, "join (proof: minima)", bound)  # found's U mapping
    best = None
    if not joined.best.empty and float(joined.best["energy"].iloc[0]) < bound:
        if improve is not None:  # the join chose new compatibility groups: search within them
            both, joined = improve(both, joined)
        bound, best = float(joined.best["energy"].iloc[0]), (both, joined)
    if incomplete:
        return *(best or (None, None)), proof(minima, bound, incomplete=incomplete)
    budgets = einsum_budgets(bound, minima)
    searched = {e: res[e][2].budget for e in order}  # step 1's tables: the frontiers within these
    if all(budgets[e] <= searched[e] * (1 + RTOL) for e in order):
        # step 1's tables hold every pmapping within its budget: their join is the optimum
        return both, joined, proof(minima, bound, budgets=budgets)
    res, incomplete = run(budgets, "budgets", stop=True)
    if incomplete:
        return *(best or (None, None)), proof(minima, bound, budgets=budgets, incomplete=incomplete)
    # each pmapping of the U mapping is within its budget, so these tables hold it or better
    return res, join_tables({e: r[0] for e, r in res.items()}, "join (proof)", bound), \
        proof(minima, bound, budgets=budgets)
