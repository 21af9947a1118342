"""Fusion moves: changing which intermediate stays on chip (docs/mapper.md, "Fusion moves").

Coordinate descent within fixed compatibility keys (`ffm.descent`) cannot fuse a tensor
the best mapping sends through the top level (DRAM): that changes the key of every
Einsum using it, and, through the loops they must then share, of every Einsum fused to
them. A fusion move searches those Einsums again together:

- a mapping's **clusters** are its Einsums linked by shared tensors backed on chip (the
  Einsums that share loops);
- the **window** of a tensor T backed at the top is the union of the clusters of T's
  users; every other shared tensor crossing the window's edge is backed at the top (else
  its users would be in one cluster), so any pmappings of the window's Einsums that keep
  those at the top, whatever else they do, are compatible with the rest of the mapping;
- the move runs pmapgen on the window's Einsums with **window constraints**: T backed on
  chip, the tensors crossing the edge at the top, the rest free; the join over the found
  tables together with these rows then finds any better mapping they make (capacity is
  checked by the join).

The enumeration samples each Einsum's pmappings separately, so a fused key all the
window's Einsums share is rarely in every sample. A **chain** proposes one: the
**anchor** (the user of T costing the most in the mapping, `anchor`) is searched again
for its least energy with T on chip and takes that row (`ffm.descent`, `_chain`); each
Einsum of the window sharing a tensor with the rows fixed so far is
then searched with those tensors' c_T fixed to theirs (`Constraints.tensor_keys`: the
c_T the join would require), and its lowest-energy row fixes its own neighbours' in turn
(`chain_constraints`).

Which tensor first: the one whose top-level traffic costs the most energy in the mapping
(`top_energy`). That is what fusing it would remove, not a bound on what the move gains
(fusing changes the other accesses too); it only orders the moves.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from arch.model import Arch
from looptree.evaluation import Evaluation
from pmapgen import Constraints
from workloads.model import Workload


def backings(chosen: dict[str, pd.Series]) -> dict[str, str]:
    """Each shared tensor's backing level in a mapping, from its chosen rows' `compat`
    (users of a tensor agree on it: that is compatibility)."""
    return {t: level for row in chosen.values() for t, (level, _) in row["compat"][0]}


def clusters(chosen: dict[str, pd.Series], workload: Workload, arch: Arch) -> list[frozenset[str]]:
    """The mapping's Einsums grouped by shared tensors backed below the top, in order of
    their first Einsum."""
    top = arch.memories[0].name
    parent = {e: e for e in chosen}

    def root(e: str) -> str:
        while parent[e] != e:
            e = parent[e]
        return e

    for t, level in backings(chosen).items():
        if level != top:
            users = [e for e in workload.users(t) if e in chosen]
            for e in users[1:]:
                parent[root(e)] = root(users[0])
    groups: dict[str, set] = {}
    for e in chosen:
        groups.setdefault(root(e), set()).add(e)
    return [frozenset(g) for g in groups.values()]


def window(tensor: str, chosen: dict[str, pd.Series], workload: Workload, arch: Arch) -> tuple[str, ...]:
    """The Einsums a fusion move of `tensor` searches again: the clusters of its users, in
    workload order."""
    users = set(workload.users(tensor))
    inside = set().union(*(c for c in clusters(chosen, workload, arch) if c & users))
    return tuple(e for e in workload.einsum_names if e in inside)


def window_constraints(tensor: str, einsums: tuple[str, ...], workload: Workload, arch: Arch,
                       constraints: dict[str, Constraints] | None = None) -> dict[str, Constraints] | None:
    """Per Einsum of the window, its constraints (the caller's, without a key) with
    `tensor` backed below the top and every shared tensor used outside the window at the
    top; None if the caller's constraints leave one of these no such level."""
    top = arch.memories[0].name
    onchip = tuple(m.name for m in arch.memories[1:])
    out = {}
    for e in einsums:
        c = replace((constraints or {}).get(e) or Constraints(), key=None)
        backing = dict(c.backing)
        for t in workload.einsum(e).tensors:
            if not workload.is_shared(t):
                continue
            if t == tensor:
                wanted = onchip
            elif any(u not in einsums for u in workload.users(t)):
                wanted = (top,)
            else:
                continue
            levels = tuple(lv for lv in backing.get(t, wanted) if lv in wanted)
            if not levels:
                return None
            backing[t] = levels
        out[e] = replace(c, backing=backing)
    return out


def top_energy(evaluation: Evaluation, chosen: dict[str, pd.Series], arch: Arch) -> dict[str, float]:
    """Per shared tensor backed at the top in the mapping, the energy (pJ) of its accesses
    there, highest first."""
    top = arch.memories[0].name
    at_top = [t for t, level in backings(chosen).items() if level == top]
    cost = evaluation.energy_by_access_pJ.get(top, {})
    return dict(sorted(((t, float(cost.get(t, 0.0))) for t in at_top), key=lambda kv: -kv[1]))


def anchor(tensor: str, einsums: tuple[str, ...], found: dict, chosen: dict[str, pd.Series],
           arch: Arch) -> tuple[str, pd.Series] | None:
    """The chain's first Einsum and row: of `tensor`'s users in the window, the one whose
    chosen pmapping costs the most, with its lowest-energy row of `found` (its window
    search's table) backing `tensor` below the top; None if it has none."""
    top = arch.memories[0].name
    users = [e for e in einsums if e in found and any(t == tensor for t, _ in chosen[e]["compat"][0])]
    if not users:
        return None
    e = max(users, key=lambda u: float(chosen[u]["energy"]))
    table = found[e][0]
    on = table[[dict(c[0])[tensor][0] != top for c in table["compat"]]]
    return None if on.empty else (e, on.loc[on["energy"].idxmin()])


def chain_constraints(fixed: dict[str, pd.Series | None], einsums: tuple[str, ...], workload: Workload,
                      window_c: dict[str, Constraints]) -> dict[str, Constraints]:
    """The chain's next searches: per Einsum of the window not yet in `fixed` (Einsum ->
    its row, None if its search found none) that shares a tensor with a fixed row, its
    window constraints with those tensors' c_T fixed to that row's."""
    out = {}
    for e in einsums:
        if e in fixed:
            continue
        keys = {t: c for row in fixed.values() if row is not None for t, c in row["compat"][0]
                if t in workload.einsum(e).tensors}
        if keys:
            out[e] = replace(window_c[e], tensor_keys={**window_c[e].tensor_keys, **keys})
    return out
