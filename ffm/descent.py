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

Descent within keys cannot fuse a tensor the mapping sends through the top level: that
changes the keys of several Einsums at once. When no key is left to search, a fusion
move (`ffm.fusion`) searches the Einsums around such a tensor again with it on chip,
and chains a key they can share from the costliest one's best pmapping with it on chip.

This lowers the result (U) and, with it, the slack the energy proof's budgets get
(ffm.budgets); it proves nothing by itself.

Its rising searches stop, cut short, once `ffm.budgets.PROOF_ROWS` partial rows wait, as
the proof's do: a rising search keeps nothing from a round cut short, by its time limit
or by this cap, so the cap costs no result the time limit would have kept unless the
search would have completed in time, and it bounds a worker's memory (at batch 64 a
descent worker reached 5.19 GB and 5.45 GB without it; docs/mapper.md, "Step 19").
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, NamedTuple

import pandas as pd

from arch.model import Arch
from ffm.budgets import PROOF_ROWS
from ffm.fusion import anchor, chain_constraints, top_energy, window, window_constraints
from ffm.search import SearchResult, full_mapping
from looptree.evaluation import evaluate
from pmapgen import Constraints, Stats, generate_all
from pmapgen.all_einsums import union
from pmapgen.prefixes import energy_lower_bound
from workloads.model import Workload

RTOL = 1e-9  # a join result counts as lower only past summation-order noise
MIN_GAP = 0.01  # skip an Einsum whose group could lower the mapping's energy by less than this share
FUSIONS = 2  # fusion moves tried per descent (each searches a window of Einsums for `time_limit`, then tunes)
LATER_MOVE_SHARE = 0.05  # a move after the first needs a tensor costing this share of the energy at the top


@dataclass(frozen=True)
class Round:
    """One move of the descent: the Einsums it searched (with their Stats), the energy the
    best mapping had after its join, and for a fusion move the tensor it moved on chip
    (None: searches within the chosen keys)."""
    stats: dict[str, Stats]
    energy: float
    fused: str | None = None
    trial: float | None = None  # a fusion move: the best mapping with the tensor on chip, after `inner`
    inner: Descent | None = None  # a fusion move: the descent within keys that tuned that mapping
    anchor: str | None = None  # a fusion move: the Einsum its chain started from (`ffm.fusion`)
    chain: dict[str, Stats] = field(default_factory=dict)  # ... and the chain's searches, in order, the anchor's first
    skipped: dict[str, float] = field(default_factory=dict)  # the Einsums this move skipped, with their gaps (pJ)
    top: float | None = None  # a fusion move: the energy (pJ) of the tensor's accesses at the top when chosen


@dataclass(frozen=True)
class Descent:
    """What coordinate descent did: the energy before and after, its rounds, and
    `skipped` the Einsums last skipped with their gap (pJ: the most their search could
    have lowered the energy, module docstring), for the mapping it ended with (each
    Round holds its own)."""
    before: float
    after: float
    rounds: tuple[Round, ...] = ()
    seconds: float = 0.0
    skipped: dict[str, float] = field(default_factory=dict)


def descend(workload: Workload, arch: Arch, results: dict[str, tuple], best: SearchResult,
            join_tables: Callable[[dict[str, pd.DataFrame], str, float | None], SearchResult],
            constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
            workers: int | None = None, progress: bool = True, max_rounds: int = 4, searched: set | None = None,
            min_gap: float = MIN_GAP, fusions: int = FUSIONS, later_share: float = LATER_MOVE_SHARE,
            on_chip: frozenset[str] = frozenset()) -> tuple[dict[str, tuple], SearchResult, Descent]:
    """(results, best, Descent): `results` (`generate_all`-style) with the rows the
    descent found added, and the best mapping over them (`best`, a SearchResult for the
    energy objective over `results`, if nothing better was found). `join_tables(tables,
    name, known)` runs an energy join told a mapping of energy `known` the tables hold
    (None: none known).
    `searched` holds the (Einsum, key) pairs searched before and the fusion moves tried
    (updated in place): they are not searched again, even if their search was cut short
    (it would be again). An Einsum whose chosen pmapping is within `min_gap` x the
    mapping's energy of its group's energy floor is skipped (module docstring).

    At most `max_rounds` rounds search within keys; when none is left to search, a
    fusion move (`ffm.fusion`) is tried, at most `fusions` of them, on the tensor at the
    top whose accesses there cost the most (at least `min_gap` x the mapping's energy).
    A later move runs only if the one before it lowered the energy, and only on a tensor
    costing at least `later_share` x the energy at the top (a move costs a window's
    searches: about two minutes at batch 64).
    The move searches the tensor's window, then chains a fused key through it from the
    anchor (`_chain`), each search below the current energy. Its rows are joined twice:
    with the tensor required on chip (the best such mapping, then tuned by rounds within
    its keys, however it compares at first), and freely, told the current energy.
    `on_chip` names the tensors every join here requires on chip (those rounds)."""
    start = time.perf_counter()
    order = tuple(workload.einsum_names)
    constraints = constraints or {}
    energy = before = float(best.best["energy"].iloc[0])
    searched = set() if searched is None else searched
    rounds: list[Round] = []
    skipped: dict[str, float] = {}
    while True:
        chosen = {e: results[e][0].loc[i] for e, i in zip(order, best.best["rows"].iloc[0])}
        keyed = {e: replace(constraints.get(e) or Constraints(), key=row["compat"]) for e, row in chosen.items()
                 if (e, row["compat"]) not in searched}
        gap = {e: float(chosen[e]["energy"]) - energy_lower_bound(e, workload, arch, c) for e, c in keyed.items()}
        skipped = {e: g for e, g in gap.items() if g < min_gap * energy}
        todo = {e: chosen[e] for e in keyed if e not in skipped}
        if todo and sum(r.fused is None for r in rounds) < max_rounds:
            searched |= {(e, row["compat"]) for e, row in todo.items()}
            name, fused, top = f"descent {len(rounds) + 1}", None, None
            found = generate_all(workload, arch, keyed, objectives=("energy",), workers=workers, progress=progress,
                                 time_limit=time_limit, budgets={e: float(row["energy"]) for e, row in todo.items()},
                                 desc=name, rising=True, einsums=tuple(todo), max_rows=PROOF_ROWS)
        else:
            moves = [i for i, r in enumerate(rounds) if r.fused is not None]
            paid = not moves or rounds[moves[-1]].energy < (rounds[moves[-1] - 1].energy if moves[-1] else before)
            least = (min_gap if not moves else max(min_gap, later_share)) * energy
            move = None if len(moves) >= fusions or not paid else \
                _fusion_move(workload, arch, results, best, chosen, constraints, searched, least)
            if move is None:
                break
            fused, einsums, window_c, top = move
            searched.add(("fuse", fused, einsums))
            name = f"descent {len(rounds) + 1}: fuse {fused}"
            found = generate_all(workload, arch, window_c, objectives=("energy",), workers=workers, progress=progress,
                                 time_limit=time_limit, desc=name, einsums=einsums)
        results = union(results, found)
        trial, inner, first, chain = None, None, None, {}
        if fused is not None:
            ch = _chain(workload, arch, fused, einsums, window_c, found, chosen, energy, time_limit, workers,
                        progress, name)
            results = union(results, ch.found)
            first, chain = ch.anchor, {e: r[2] for e, r in ch.found.items()}
            need = on_chip | {fused}
            with_it = join_tables(_view(results, need, arch), f"join ({name}, on chip)", None)
            if not with_it.best.empty:
                results, with_it, inner = descend(workload, arch, results, with_it, join_tables, constraints,
                                                  time_limit, workers, progress, max_rounds, searched, min_gap, 0, need)
                trial = inner.after
        joined = join_tables(_view(results, on_chip, arch), f"join ({name})", energy)
        if not joined.best.empty and float(joined.best["energy"].iloc[0]) < energy * (1 - RTOL):
            energy, best = float(joined.best["energy"].iloc[0]), joined
        rounds.append(Round({e: r[2] for e, r in found.items()}, energy, fused, trial, inner, first, chain, skipped,
                            top))
    return results, best, Descent(before, energy, tuple(rounds), time.perf_counter() - start, skipped)


def _view(results: dict, on_chip: frozenset[str], arch: Arch) -> dict[str, pd.DataFrame]:
    """Each Einsum's table without the rows that back a tensor of `on_chip` at the top
    (labels kept: the join's chosen rows index `results`)."""
    top = arch.memories[0].name
    if not on_chip:
        return {e: r[0] for e, r in results.items()}
    return {e: r[0][[all(level != top for t, (level, _) in c[0] if t in on_chip) for c in r[0]["compat"]]]
            for e, r in results.items()}


class Chain(NamedTuple):
    """What a fusion move's chain (`ffm.fusion`) did: its anchor and the anchor's row it
    started from, each search's (table, templates, Stats) in the order run (the anchor's
    first), and the c_T each search after the anchor's fixed."""
    anchor: str | None
    row: pd.Series | None
    found: dict
    keys: dict


def _chain(workload: Workload, arch: Arch, tensor: str, einsums: tuple[str, ...], window_c: dict, found: dict,
           chosen: dict, ceiling: float, time_limit: float | None, workers: int | None, progress: bool,
           name: str) -> Chain:
    """A fusion move's chain (`ffm.fusion`). The anchor is searched again for its least
    energy with the tensor on chip (its window constraints), below its lowest such row in
    `found` (the window's sampled tables): that row if the search is cut short. Each
    later search rises from its energy floor up to `ceiling` (the mapping's energy: no
    pmapping above it can be part of a better one) and keeps the lowest pmapping it finds
    and the frontier just above it."""
    start = anchor(tensor, einsums, found, chosen, arch)
    if start is None:
        return Chain(None, None, {}, {})
    first, row = start
    out = generate_all(workload, arch, {first: window_c[first]}, objectives=("energy",), workers=workers,
                       progress=progress, time_limit=time_limit, budgets={first: float(row["energy"])},
                       desc=f"{name}: anchor", rising=True, einsums=(first,), max_rows=PROOF_ROWS)
    if not out[first][0].empty:
        row = out[first][0].loc[out[first][0]["energy"].idxmin()]
    fixed, keys = {first: row}, {}
    while todo := chain_constraints(fixed, einsums, workload, window_c):
        got = generate_all(workload, arch, todo, objectives=("energy",), workers=workers, progress=progress,
                           time_limit=time_limit, budgets={e: ceiling for e in todo}, desc=f"{name}: chain",
                           rising=True, einsums=tuple(todo), max_rows=PROOF_ROWS)
        for e in todo:
            table = got[e][0]
            fixed[e] = None if table.empty else table.loc[table["energy"].idxmin()]
            out[e], keys[e] = got[e], todo[e].tensor_keys
    return Chain(first, row, out, keys)


def _fusion_move(workload: Workload, arch: Arch, results: dict, best: SearchResult, chosen: dict,
                 constraints: dict[str, Constraints], searched: set, least: float):
    """(tensor, window, window constraints, its top-level energy) of the next fusion move
    worth trying (a tensor at the top costing at least `least` pJ there), or None."""
    order = tuple(workload.einsum_names)
    evaluation = evaluate(full_mapping(best.best.iloc[0], results, order), workload, arch)
    for tensor, cost in top_energy(evaluation, chosen, arch).items():
        if cost < least:
            return None
        einsums = window(tensor, chosen, workload, arch)
        window_c = window_constraints(tensor, einsums, workload, arch, constraints)
        if window_c is not None and ("fuse", tensor, einsums) not in searched:
            return tensor, einsums, window_c, cost
    return None
