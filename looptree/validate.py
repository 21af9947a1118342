"""The mapspace rules (docs/semantics.md §2, §4): normalise and validate pmappings and mappings.

Errors are `MappingError`s naming the Einsum and the offending node, so a user who wrote a
mapping by hand sees exactly what to change.
"""
from __future__ import annotations

from dataclasses import replace

from arch.model import Arch
from looptree.nodes import Compute, Loop, Mapping, Pmapping, Storage
from specio import SpecError
from workloads.model import Workload


class MappingError(SpecError):
    """A mapping outside the mapspace."""

    def __init__(self, einsum: str, node: int | None, message: str, source: str = "<mapping>"):
        field = f"pmappings.{einsum}" + (f"[{node}]" if node is not None else "")
        super().__init__(source, field, message)


def normalize(pmapping: Pmapping, workload: Workload) -> Pmapping:
    """Drop loops whose bound is 1 (they change nothing); tiles must divide extents."""
    extents = dict(workload.rank_sizes)
    kept = []
    for i, node in enumerate(pmapping.nodes):
        if isinstance(node, Loop):
            r = node.rank_variable
            if r not in extents:
                raise MappingError(pmapping.einsum, i, f"loop over unknown rank variable {r!r}")
            tile = node.tile
            if isinstance(tile, bool) or not isinstance(tile, int) or tile <= 0:
                raise MappingError(pmapping.einsum, i, f"tile of {r} must be a positive integer, got {tile!r}")
            if extents[r] % tile:
                raise MappingError(pmapping.einsum, i,
                                   f"tile {tile} of {r} does not divide its extent {extents[r]}")
            if extents[r] == tile:
                continue
            extents[r] = tile
        kept.append(node)
    return replace(pmapping, nodes=tuple(kept))


def validate_pmapping(p: Pmapping, workload: Workload, arch: Arch) -> None:
    """Raise MappingError if the (normalised) pmapping is outside the mapspace of §2."""
    name = p.einsum
    if name not in workload.einsum_names:
        raise MappingError(name, None, f"workload {workload.name} has no Einsum {name!r}")
    einsum = workload.einsum(name)
    if not p.nodes or not isinstance(p.nodes[-1], Compute):
        raise MappingError(name, len(p.nodes) - 1, "a pmapping must end in one compute node")
    unit = p.nodes[-1].unit
    if unit not in [c.name for c in arch.computes]:
        raise MappingError(name, len(p.nodes) - 1, f"unknown compute unit {unit!r}")
    if not arch.compute(unit).runs(einsum):
        raise MappingError(name, len(p.nodes) - 1, f"compute unit {unit} does not run {einsum.kind} Einsum {name}")
    path = [m.name for m in arch.path(unit)]
    level_of = {lv: k for k, lv in enumerate(path)}
    kept: dict[str, list[tuple[int, str]]] = {t: [] for t in einsum.tensors}
    seen_loop = False
    for i, node in enumerate(p.nodes):
        if isinstance(node, Compute) and i != len(p.nodes) - 1:
            raise MappingError(name, i, "compute node before the leaf")
        if isinstance(node, Loop):
            seen_loop = True
            if node.rank_variable not in einsum.rank_variables:
                raise MappingError(name, i, f"loop over {node.rank_variable!r}, which Einsum {name} does not have")
        if isinstance(node, Storage):
            if node.level not in level_of:
                raise MappingError(name, i, f"level {node.level!r} is not on the path of compute unit {unit} "
                                            f"(expected one of {', '.join(path)})")
            for t in node.tensors:
                if t not in kept:
                    raise MappingError(name, i, f"tensor {t!r} is not used by Einsum {name}")
                if not arch.may_keep(node.level, workload.tensors[t], einsum):
                    raise MappingError(name, i, f"{node.level} may not keep {t}")
                if any(lv == node.level for _, lv in kept[t]):
                    raise MappingError(name, i, f"{t} is kept twice at {node.level}")
                if kept[t] and level_of[kept[t][-1][1]] > level_of[node.level]:
                    raise MappingError(name, i, f"storage nodes of {t} are not in level order "
                                                f"({kept[t][-1][1]} above {node.level})")
                if node.level == path[0] and seen_loop:
                    raise MappingError(name, i, f"top-level storage of {t} must come before the first loop")
                kept[t].append((i, node.level))
    for t, chain in kept.items():
        tensor = workload.tensors[t]
        if not chain:
            raise MappingError(name, None, f"tensor {t} is kept nowhere (expected a backing storage node)")
        if tensor.role != "intermediate" and chain[0][1] != path[0]:
            raise MappingError(name, chain[0][0], f"workload {tensor.role} {t} must be backed at {path[0]}, "
                                                  f"not {chain[0][1]}")
        for level in path:
            if arch.must_keep(level, tensor, einsum) and level not in [lv for _, lv in chain]:
                raise MappingError(name, None, f"{level} must keep {t}")
    _validate_spatial(p, workload, arch, kept, level_of, path)
    _validate_fused_loops(p, workload, arch, kept)


def _validate_spatial(p: Pmapping, workload: Workload, arch: Arch, kept: dict, level_of: dict, path: list) -> None:
    einsum = workload.einsum(p.einsum)
    unit = p.compute.unit
    used: dict[str, int] = {}
    extents = dict(workload.rank_sizes)
    storage = [(i, lv) for t in kept for i, lv in kept[t]]
    for i, node in enumerate(p.nodes):
        if not isinstance(node, Loop):
            continue
        bound = extents[node.rank_variable] // node.tile
        extents[node.rank_variable] = node.tile
        if node.spatial is None:
            continue
        try:
            owner = arch.fanout_owner(node.spatial, unit)
        except KeyError:
            raise MappingError(p.einsum, i, f"spatial dim {node.spatial!r} is not a fanout on the path of {unit}") from None
        dim = owner.dim(node.spatial)
        k = level_of[owner.name]
        for j, lv in storage:
            if level_of[lv] < k and j > i:
                raise MappingError(p.einsum, i, f"spatial loop over {owner.name}'s fanout {node.spatial} "
                                                f"must be below {lv} storage (node {j})")
            if level_of[lv] >= k and j < i:
                raise MappingError(p.einsum, i, f"spatial loop over {owner.name}'s fanout {node.spatial} "
                                                f"must be above {lv} storage (node {j})")
        used[node.spatial] = used.get(node.spatial, 1) * bound
        if used[node.spatial] > dim.size:
            raise MappingError(p.einsum, i, f"spatial loops on {node.spatial} use {used[node.spatial]} "
                                            f"instances; the fanout has {dim.size}")
        if node.rank_variable in einsum.reduced and not dim.reduce:
            raise MappingError(p.einsum, i, f"spatial loop over reduced rank variable {node.rank_variable} "
                                            f"on {node.spatial}, which cannot reduce")
        on_dim = [n.rank_variable for n in p.nodes if isinstance(n, Loop) and n.spatial == node.spatial]
        if not dim.allows(einsum, on_dim):
            raise MappingError(p.einsum, i, f"spatial loops over {', '.join(on_dim)} on {node.spatial}, which "
                                            f"iterates only {dim.iterates} loops")


def _validate_fused_loops(p: Pmapping, workload: Workload, arch: Arch, kept: dict) -> None:
    einsum = workload.einsum(p.einsum)
    top = arch.memories[0].name
    deepest = max((chain[0][0] for t, chain in kept.items()
                   if workload.is_shared(t) and chain[0][1] != top), default=-1)
    fused = p.loops_above(deepest) if deepest >= 0 else ()
    ranks = [lp.rank_variable for lp in fused]
    for r in ranks:
        if ranks.count(r) > 1:
            index = [i for i, n in enumerate(p.nodes) if isinstance(n, Loop) and n.rank_variable == r][1]
            raise MappingError(p.einsum, index, f"second fused loop over {r}: a rank variable may be "
                                                f"fused once (loops above shared on-chip tensors)")
    for t, chain in kept.items():
        if not workload.is_shared(t) or chain[0][1] == top:
            continue
        index = chain[0][0]
        for loop in p.loops_above(index):
            # (for the producer this also forbids reduced rank variables: they never index T)
            if loop.rank_variable not in einsum.use(t).ranks:
                raise MappingError(p.einsum, index, f"loop over {loop.rank_variable} above the backing "
                                                    f"of shared tensor {t}, which it does not index")


def canonical_loops(loops) -> list:
    """Loops with each run of adjacent spatial loops sorted by (dim, rank variable): spatial
    loops do not iterate in time, so their order among themselves means nothing."""
    out, run = [], []
    for lp in loops:
        if lp.spatial is not None:
            run.append(lp)
            continue
        out += sorted(run, key=lambda x: (x.spatial, x.rank_variable))
        run = []
        out.append(lp)
    return out + sorted(run, key=lambda x: (x.spatial, x.rank_variable))


def compatibility(p: Pmapping, tensor: str, workload: Workload) -> tuple:
    """c_T = (backing level, ((position of T, tile, spatial dim) for each loop above the
    backing node)); adjacent spatial loops in canonical order."""
    index, level = p.backing(tensor)
    ranks = workload.einsum(p.einsum).use(tensor).ranks
    return level, tuple((ranks.index(lp.rank_variable), lp.tile, lp.spatial)
                        for lp in canonical_loops(p.loops_above(index)) if lp.rank_variable in ranks)


def fused_depth(p: Pmapping, workload: Workload, arch: Arch) -> int:
    """Number of loops above the deepest on-chip backing node of a shared tensor (F)."""
    top = arch.memories[0].name
    deepest = [p.backing(t)[0] for t in workload.einsum(p.einsum).tensors
               if workload.is_shared(t) and p.backing(t)[1] != top]
    return len(p.loops_above(max(deepest))) if deepest else 0


def fused_depths(mapping: Mapping, workload: Workload, arch: Arch) -> list[int]:
    """s(X, Y) for each consecutive pair of the order (docs/semantics.md §4)."""
    order = list(mapping.order)
    top = arch.memories[0].name
    n = len(order)
    direct = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            ea, eb = workload.einsum(order[a]), workload.einsum(order[b])
            for t in set(ea.tensors) & set(eb.tensors):
                level, loops = compatibility(mapping[order[a]], t, workload)
                if level != top:
                    direct[a][b] = max(direct[a][b], len(loops))
    return [max(direct[w][z] for w in range(i + 1) for z in range(i + 1, n)) for i in range(n - 1)]


def validate_mapping(mapping: Mapping, workload: Workload, arch: Arch) -> None:
    """Raise MappingError unless `mapping` is in the mapspace: every pmapping valid, order
    topological, shared tensors compatible, consecutive Einsums nested consistently."""
    names = set(workload.einsum_names)
    if set(mapping.order) != names or len(mapping.order) != len(names):
        raise MappingError("order", None, f"order must list each Einsum once: {sorted(names)}")
    if set(mapping.pmappings) != names:
        missing = sorted(names - set(mapping.pmappings))
        raise MappingError("*", None, f"missing pmappings for {missing}" if missing else
                           f"pmappings for unknown Einsums {sorted(set(mapping.pmappings) - names)}")
    position = {e: k for k, e in enumerate(mapping.order)}
    for e in workload.einsums:
        for u in e.inputs:
            producer = workload.producer(u.tensor)
            if producer is not None and position[producer] > position[e.name]:
                raise MappingError("order", None, f"{e.name} runs before {producer}, which produces {u.tensor}")
    for name in mapping.order:
        validate_pmapping(mapping[name], workload, arch)
    for t, tensor in workload.tensors.items():
        users = workload.users(t)
        if len(users) < 2:
            continue
        first = compatibility(mapping[users[0]], t, workload)
        for other in users[1:]:
            c = compatibility(mapping[other], t, workload)
            if c != first:
                raise MappingError(other, None, f"incompatible with {users[0]} on shared tensor {t}: "
                                                f"{_show(c)} vs {_show(first)}")
    depths = fused_depths(mapping, workload, arch)
    for i, s in enumerate(depths):
        x, y = mapping[mapping.order[i]], mapping[mapping.order[i + 1]]
        for e in (x, y):
            if fused_depth(e, workload, arch) < s:
                raise MappingError(e.einsum, None, f"sits inside {s} fused loops (between {x.einsum} and "
                                                   f"{y.einsum}) but has only {fused_depth(e, workload, arch)} "
                                                   f"fused loops of its own")
        lx, ly = x.loops[:s], y.loops[:s]
        if len(lx) < s or len(ly) < s or not _same_loops(lx, ly, x.einsum, y.einsum, workload):
            raise MappingError(y.einsum, None, f"must share its first {s} loops with {x.einsum} "
                                               f"(they sit inside the same fused loops)")


def _same_loops(lx, ly, ex: str, ey: str, workload: Workload) -> bool:
    shared = set(workload.einsum(ex).tensors) & set(workload.einsum(ey).tensors)
    for a, b in zip(lx, ly):
        if a.tile != b.tile or (a.spatial is None) != (b.spatial is None):
            return False
        same_position = any(a.rank_variable in workload.einsum(ex).use(t).ranks
                            and b.rank_variable in workload.einsum(ey).use(t).ranks
                            and workload.einsum(ex).use(t).ranks.index(a.rank_variable)
                            == workload.einsum(ey).use(t).ranks.index(b.rank_variable) for t in shared)
        if not same_position and a.rank_variable != b.rank_variable:
            return False
    return True


def _show(c: tuple) -> str:
    level, loops = c
    return f"{level} under " + (", ".join(f"rank {pos} tile {tile}" + (f" on {sp}" if sp else "")
                                          for pos, tile, sp in loops) or "no loops")
