"""Coordinate descent on a time-limited energy result (docs/mapper.md, "Descent").

When pmapgen is cut short, an Einsum's table may lack its best pmapping in the
compatibility group the join chose for it: the join picks the best combination of what
was found, and a pmapping that is compatible with its neighbours was not necessarily
found. With every other Einsum's pmapping fixed, any pmapping of Einsum e with the same
compatibility key joins them (compatibility is a property of keys; capacity is checked by
the join). So each Einsum of the best mapping is searched again within its own key
(`Constraints.key`, `pmapgen.fixed_key`) below the energy of its chosen pmapping, with
budgets rising from the key's energy floor (`generate_by_rising_budgets`: the least
energy in the group and the frontier just above it), and the join runs again over the
found tables together with these rows, told the current energy (it can only improve).
Rounds repeat while the join's choice has keys not yet searched.

A search is worth its time only where the group's energy floor (`energy_lower_bound`
within the key, milliseconds) is well below the chosen pmapping's energy: at batch 64 a
search of QK in a group whose floor was 3% below its chosen 4.76 J built 78 M partial
pmappings in 122 s without completing. So an Einsum whose gap (chosen energy minus that
floor) is under MIN_GAP of the mapping's energy is skipped; the Descent records the
gaps skipped, which bound what their searches could have gained.

This lowers the result (U) and, with it, the slack the energy proof's budgets get
(ffm.budgets); it proves nothing by itself.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.search import SearchResult
from pmapgen import Constraints, Stats, generate_all
from pmapgen.all_einsums import union
from pmapgen.prefixes import energy_lower_bound
from workloads.model import Workload

RTOL = 1e-9  # a join result counts as lower only past summation-order noise
MIN_GAP = 0.01  # skip an Einsum whose group could lower the mapping's energy by less than this share


@dataclass(frozen=True)
class Descent:
    """What coordinate descent did: the energy before and after, and per round the Einsums
    searched (with their Stats) and the energy the round's join reached;
    `skipped` the Einsums last skipped with their gap (pJ: the most their search could
    have lowered the energy, module docstring)."""
    before: float
    after: float
    rounds: tuple[tuple[dict[str, Stats], float], ...] = ()
    seconds: float = 0.0
    skipped: dict[str, float] = field(default_factory=dict)


def descend(workload: Workload, arch: Arch, results: dict[str, tuple], best: SearchResult,
            join_tables: Callable[[dict[str, pd.DataFrame], str, float], SearchResult],
            constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
            workers: int | None = None, progress: bool = True, max_rounds: int = 4, searched: set | None = None,
            min_gap: float = MIN_GAP) -> tuple[dict[str, tuple], SearchResult, Descent]:
    """(results, best, Descent): `results` (`generate_all`-style) with the rows the
    descent found added, and the best mapping over them (`best`, a SearchResult for the
    energy objective over `results`, if nothing better was found). `join_tables(tables,
    name, known)` runs an energy join told a mapping of energy `known` the tables hold.
    `searched` holds the (Einsum, key) pairs searched before (updated in place): they are
    not searched again, even if their search was cut short (it would be again). An Einsum
    whose chosen pmapping is within `min_gap` x the mapping's energy of its group's energy
    floor is skipped (module docstring)."""
    start = time.perf_counter()
    order = tuple(workload.einsum_names)
    constraints = constraints or {}
    energy = before = float(best.best["energy"].iloc[0])
    searched = set() if searched is None else searched
    rounds, skipped = [], {}
    while len(rounds) < max_rounds:
        chosen = {e: results[e][0].loc[i] for e, i in zip(order, best.best["rows"].iloc[0])}
        keyed = {e: replace(constraints.get(e) or Constraints(), key=row["compat"]) for e, row in chosen.items()
                 if (e, row["compat"]) not in searched}
        gap = {e: float(chosen[e]["energy"]) - energy_lower_bound(e, workload, arch, c) for e, c in keyed.items()}
        skipped = {e: g for e, g in gap.items() if g < min_gap * energy}
        todo = {e: chosen[e] for e in keyed if e not in skipped}
        if not todo:
            break
        searched |= {(e, row["compat"]) for e, row in todo.items()}
        found = generate_all(workload, arch, keyed, objectives=("energy",), workers=workers, progress=progress,
                             time_limit=time_limit, budgets={e: float(row["energy"]) for e, row in todo.items()},
                             desc=f"descent {len(rounds) + 1}", rising=True, einsums=tuple(todo))
        results = union(results, found)
        joined = join_tables({e: r[0] for e, r in results.items()}, f"join (descent {len(rounds) + 1})", energy)
        lower = not joined.best.empty and float(joined.best["energy"].iloc[0]) < energy * (1 - RTOL)
        if lower:
            energy, best = float(joined.best["energy"].iloc[0]), joined
        rounds.append(({e: r[2] for e, r in found.items()}, energy))
        if not lower:
            break
    return results, best, Descent(before, energy, tuple(rounds), time.perf_counter() - start, skipped)
