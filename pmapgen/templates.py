"""Templates: the structure of a pmapping (storage nodes, loop order, spatial loops) with
its tiles left open, enumerated once per Einsum and evaluated for all tile shapes at once.

Only provably equivalent or dominated structures are skipped (docs/pmapgen.md gives the
arguments; tests/test_pmapgen.py checks them against brute force). Inside the fused region
(above a shared tensor's on-chip backing) the loop order is part of the compatibility key,
so there only legality prunes; the rules marked * apply below it:

- storage nodes with no loop between them are one set (order is irrelevant);
- a storage node (other than a shared tensor's on-chip backing, which may not move below a
  loop that does not index it) is never directly above a temporal loop over a rank variable
  that does not index its tensor (moving it below changes no count, tile or lifetime),
  nor directly above one that does unless the temporal loop just above the node does not
  index its tensor (otherwise moving it below keeps its traffic, shrinks its tile and
  shortens its lifetime);
- * between two cuts (storage runs or spatial groups) a rank variable has at most one
  temporal loop;
- * loops of a block with the same relevance class (the set of
  tensors they index) are contiguous and in name order; across classes every order is kept;
- a fanout's spatial loops form one group between the levels above and below it, *never
  directly below a temporal loop (spatial loops do not iterate in time, so that loop is
  equivalent to one directly below the group);
- a temporal loop with no storage node below it is never placed (it changes nothing);
- loops above the on-chip backing node of a shared tensor index that tensor (DESIGN §6).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, product
from typing import Iterator

from arch.model import Arch
from looptree.nodes import Compute, Loop, Pmapping, Storage
from pmapgen.capacity import fits
from pmapgen.constraints import Constraints
from workloads.model import Einsum, Workload


@dataclass(frozen=True)
class Template:
    """A pmapping whose loop tiles are slot numbers (`Loop.tile` = slot index)."""
    einsum: str
    unit: str
    nodes: tuple
    n_slots: int

    def with_tiles(self, tiles) -> Pmapping:
        """The pmapping with slot k's tile set to tiles[k] (ints or arrays)."""
        return Pmapping(self.einsum, tuple(Loop(n.rank_variable, tiles[n.tile], n.spatial)
                                           if isinstance(n, Loop) else n for n in self.nodes))

    def slots(self) -> list[Loop]:
        return [n for n in self.nodes if isinstance(n, Loop)]


def _subsets(items: list) -> Iterator[tuple]:
    for k in range(len(items) + 1):
        yield from combinations(items, k)


def storage_choices(einsum: Einsum, workload: Workload, arch: Arch, unit: str,
                    constraints: Constraints) -> Iterator[dict[str, tuple[int, ...]]]:
    """For each tensor, the levels (indices into the unit's path) that keep it."""
    path = arch.path(unit)
    per_tensor = []
    for t in einsum.tensors:
        tensor = workload.tensors[t]
        allowed = [k for k, m in enumerate(path) if arch.may_keep(m.name, tensor, einsum)]
        must = {k for k, m in enumerate(path) if arch.must_keep(m.name, tensor, einsum)}
        if tensor.role == "intermediate":
            backings = [k for k in allowed if constraints.backing_allowed(t, path[k].name)]
        else:
            backings = [0] if 0 in allowed else []
        options = []
        for b in backings:
            below = [k for k in allowed if k > b]
            options += [(b, *extra) for extra in _subsets(below) if must <= {b, *extra}]
        per_tensor.append(options)
    for combo in product(*per_tensor):
        choice = dict(zip(einsum.tensors, combo))
        if all(_smallest_fit(path[k], [t for t, lv in choice.items() if k in lv], workload)
               for k in range(1, len(path))):
            yield choice


def _smallest_fit(memory, tensors: list[str], workload: Workload) -> bool:
    """Whether one value of each tensor fits (tiles are at least one value)."""
    return (len(tensors) <= memory.capacity_values
            and sum(workload.tensors[t].bits for t in tensors) <= memory.capacity_bits)


def spatial_choices(einsum: Einsum, workload: Workload, arch: Arch, unit: str,
                    constraints: Constraints) -> Iterator[dict[int, tuple[tuple[str, str], ...]]]:
    """For each level with a fanout, the (dim, rank variable) spatial loops it uses."""
    path = arch.path(unit)
    per_level = []
    levels = []
    for k, m in enumerate(path):
        slots = [(d.name, r) for d in m.fanout for r in einsum.rank_variables
                 if workload.rank_sizes[r] > 1 and (r not in einsum.reduced or d.reduce)
                 and constraints.spatial_allowed(r, d.name)]
        if slots:
            levels.append(k)
            per_level.append([s for s in _subsets(slots) if len(s) <= constraints.max_spatial_per_level
                              and all(d.allows(einsum, [r for dd, r in s if dd == d.name]) for d in m.fanout)])
    choices = [{k: s for k, s in zip(levels, combo) if s} for combo in product(*per_level)]
    # most potential parallelism first: a time-limited (anytime) run meets good ones early
    yield from sorted(choices, key=lambda c: -_parallelism(c, workload, arch, unit))


def _parallelism(choice: dict, workload: Workload, arch: Arch, unit: str) -> int:
    """Instances a spatial choice could use at most (per dim: min(dim size, rank sizes))."""
    total = 1
    for group in choice.values():
        dims: dict[str, int] = {}
        for dim, r in group:
            dims[dim] = dims.get(dim, 1) * workload.rank_sizes[r]
        for dim, n in dims.items():
            total *= min(n, arch.fanout_owner(dim, unit).dim(dim).size)
    return total


def templates(einsum: Einsum, workload: Workload, arch: Arch, unit: str,
              constraints: Constraints | None = None) -> Iterator[Template]:
    """Every template of `einsum` on compute `unit` (see the module docstring)."""
    constraints = constraints or Constraints()
    ranks = [r for r in einsum.rank_variables if workload.rank_sizes[r] > 1]
    relevance = {r: frozenset(t for t in einsum.tensors if r in einsum.use(t).ranks) for r in ranks}
    max_loops = {r: min(constraints.max_loops_per_rank, _prime_factors(workload.rank_sizes[r])) for r in ranks}
    spatial_list = list(spatial_choices(einsum, workload, arch, unit, constraints))
    streams = [_storage_templates(einsum, workload, arch, unit, constraints, ranks, relevance, max_loops,
                                  spatial_list, levels)
               for levels in storage_choices(einsum, workload, arch, unit, constraints)]
    # round robin over storage choices: a time-limited (anytime) run samples all of them
    while streams:
        alive = []
        for stream in streams:
            template = next(stream, None)
            if template is not None:
                yield template
                alive.append(stream)
        streams = alive


def _storage_templates(einsum, workload, arch, unit, constraints, ranks, relevance, max_loops,
                       spatial_list, levels) -> Iterator[Template]:
    """The templates of one storage choice (`levels`: tensor -> levels keeping it)."""
    path = [m.name for m in arch.path(unit)]
    shared_onchip = {t for t, lv in levels.items() if lv[0] != 0 and workload.is_shared(t)}
    pending = sorted((t, k) for t, lv in levels.items() for k in lv if k != 0)
    root = tuple(sorted(t for t, lv in levels.items() if lv[0] == 0))

    def fit(nodes) -> bool:  # the nodes placed so far fit even if every loop tile ends up 1
        smallest = [Loop(n.rank_variable, 1, n.spatial) if isinstance(n, Loop) else n for n in nodes]
        return bool(fits(Pmapping(einsum.name, (*smallest, Compute(unit))), workload, arch))

    for spatial in spatial_list:
        used = {r: sum(rr == r for group in spatial.values() for _, rr in group) for r in ranks}
        if any(used[r] > max_loops[r] for r in ranks):
            continue  # every loop needs a bound >= 2
        yield from _extend(einsum, unit, path, relevance, max_loops, spatial, shared_onchip, levels,
                           constraints, fit, nodes=[Storage(path[0], root)] if root else [],
                           pending=pending, spatial_done=frozenset(), block=(), last="root",
                           last_run=(), loops=used)


def _extend(einsum, unit, path, relevance, max_loops, spatial, shared_onchip, levels, constraints, fit,
            nodes, pending, spatial_done, block, last, last_run, loops) -> Iterator[Template]:
    placed_backing = {t for t in shared_onchip if (t, levels[t][0]) not in pending}
    fused = placed_backing != shared_onchip  # still above some shared on-chip backing node
    need_index = shared_onchip - placed_backing  # loops placed now are above their backing
    if not pending and spatial_done == frozenset(spatial):
        slots = sum(isinstance(n, Loop) for n in nodes)
        yield Template(einsum.name, unit, tuple(nodes) + (Compute(unit),), slots)
    # (a) a storage run: for each tensor, the next nodes of its chain (possibly none)
    if last != "storage":
        def node_ok(k: int) -> bool:
            return (all(j in spatial_done for j in spatial if j <= k)
                    and not any(j in spatial_done for j in spatial if j > k))
        options = []
        for t in sorted({t for t, _ in pending}):
            chain = sorted(k for tt, k in pending if tt == t)
            opts = [()]
            for n in range(1, len(chain) + 1):
                if not node_ok(chain[n - 1]):
                    break
                opts.append(tuple((t, k) for k in chain[:n]))
            options.append(opts)
        for combo in product(*options):
            run = [x for part in combo for x in part]
            if not run:
                continue
            rest = [p for p in pending if p not in run]
            run_nodes = [Storage(path[k], tuple(sorted(t for t, kk in run if kk == k)))
                         for k in sorted({k for _, k in run})]
            movable = tuple(sorted({t for t, k in run if not (t in shared_onchip and k == levels[t][0])}))
            if not fit(nodes + run_nodes):
                continue  # loops placed later cannot shrink these tiles: nothing below fits
            yield from _extend(einsum, unit, path, relevance, max_loops, spatial, shared_onchip, levels,
                               constraints, fit, nodes + run_nodes, rest, spatial_done, (), "storage", movable, loops)
    # (b) a spatial group
    for k, group in spatial.items():
        if k in spatial_done or (last == "temporal" and not fused):
            continue  # a temporal loop right above a spatial group equals one right below it
        if any(kk < k for _, kk in pending) or any(kk >= k for kk in _placed_levels(nodes, path)):
            continue
        if any(not need_index <= relevance[r] for _, r in group):
            continue
        if fused:  # fused loops: each rank variable at most once
            group_ranks = [r for _, r in group]
            if len(set(group_ranks)) < len(group_ranks) or any(
                    isinstance(n, Loop) and n.rank_variable in group_ranks for n in nodes):
                continue
        slot = sum(isinstance(n, Loop) for n in nodes)
        group_nodes = [Loop(r, slot + i, dim) for i, (dim, r) in enumerate(group)]
        yield from _extend(einsum, unit, path, relevance, max_loops, spatial, shared_onchip, levels,
                           constraints, fit, nodes + group_nodes, pending, spatial_done | {k}, (), "spatial", (), loops)
    # (c) a temporal loop; one with no storage node below it changes nothing (the leaf iterates
    # whatever extent is left), so loops only go above pending storage
    for r in (relevance if pending else ()):
        if (r in block and not fused) or loops[r] >= max_loops[r] or not need_index <= relevance[r]:
            continue
        if fused and any(isinstance(n, Loop) and n.rank_variable == r for n in nodes):
            continue  # a rank variable is at most once among the fused loops (semantics §2)
        if last == "storage" and not set(last_run) <= relevance[r]:
            continue  # those nodes of the run above would be moved below this loop
        if last == "storage" and last_run:
            above = _last_temporal(nodes)
            if above is None or any(t in relevance[above] for t in last_run):
                continue  # no reuse run above them: moving them below this loop dominates
        if not fused and block:
            prev = block[-1]
            if relevance[prev] == relevance[r]:
                if r < prev:
                    continue
            elif any(relevance[b] == relevance[r] for b in block):
                continue
        if not constraints.loop_allowed(r, fused) or not constraints.order_allowed(block, r):
            continue
        slot = sum(isinstance(n, Loop) for n in nodes)
        yield from _extend(einsum, unit, path, relevance, max_loops, spatial, shared_onchip, levels,
                           constraints, fit, nodes + [Loop(r, slot)], pending, spatial_done, block + (r,), "temporal",
                           (), {**loops, r: loops[r] + 1})


def _last_temporal(nodes) -> str | None:
    for n in reversed(nodes):
        if isinstance(n, Loop) and n.spatial is None:
            return n.rank_variable
    return None


def _placed_levels(nodes, path) -> set[int]:
    return {path.index(n.level) for n in nodes if isinstance(n, Storage)} - {0}


def _prime_factors(n: int) -> int:
    count, p = 0, 2
    while p * p <= n:
        while n % p == 0:
            n //= p
            count += 1
        p += 1
    return count + (n > 1)
