"""The analytical model of one pmapping: tiles, fills, accesses, energy, latency.

Closed form of docs/semantics.md §3. Every count is a product of loop bounds, so the same
code evaluates an int tile, a numpy array of tiles (one entry per tile shape) or a sympy
symbol; it assumes every loop has bound >= 2 (`looptree.validate.normalize` drops bound-1
loops, pmapgen templates only generate bounds >= 2).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import reduce
from typing import Any, Iterable, Mapping as MappingT

import numpy as np

from arch.model import Arch, FanoutDim
from looptree.counts import AccessCounts
from looptree.nodes import Loop, Pmapping, Storage
from workloads.model import Einsum, Workload


def _prod(xs: Iterable[Any]) -> Any:
    return math.prod(xs)  # (ints, numpy arrays and sympy symbols alike)


def _div(a: Any, b: Any) -> Any:
    """Exact division of loop extents: integer for ints/arrays, rational for symbols."""
    if isinstance(a, (int, np.integer, np.ndarray)) and isinstance(b, (int, np.integer, np.ndarray)):
        return a // b
    return a / b


def _max(*xs: Any) -> Any:
    if any(hasattr(x, "free_symbols") for x in xs):
        import sympy
        return sympy.Max(*xs)
    return reduce(np.maximum, xs) if any(isinstance(x, np.ndarray) for x in xs) else max(xs)


@dataclass(frozen=True)
class PlacedLoop:
    index: int  # position in pmapping.nodes
    loop: Loop
    bound: Any


@dataclass(frozen=True)
class StorageTile:
    """One storage node of one tensor, with everything the counts need."""
    index: int  # position in pmapping.nodes
    level: str
    tensor: str
    depth: int  # number of loops above it
    lifetime_depth: int  # loops above it that change its tile: depth minus the trailing run of
    # loops (spatial, or temporal over rank variables not indexing the tensor) directly above
    values: Any  # per-instance tile in values
    instances: Any  # product of spatial bounds above it
    fills: Any  # refills per instance (F)
    distinct: Any  # distinct tiles per instance (D)
    parent: int | None  # index into the tensor's chain of the parent node, None if backing


@dataclass(frozen=True)
class PmappingAnalysis:
    pmapping: Pmapping
    loops: tuple[PlacedLoop, ...]
    tiles: tuple[StorageTile, ...]
    ops: Any
    counts: AccessCounts

    def chain(self, tensor: str) -> tuple[StorageTile, ...]:
        return tuple(t for t in self.tiles if t.tensor == tensor)


def place_loops(pmapping: Pmapping, workload: Workload) -> tuple[PlacedLoop, ...]:
    """Each loop with its bound (extent above / tile)."""
    extents: dict[str, Any] = dict(workload.rank_sizes)
    placed = []
    for i, node in enumerate(pmapping.nodes):
        if isinstance(node, Loop):
            placed.append(PlacedLoop(i, node, _div(extents[node.rank_variable], node.tile)))
            extents[node.rank_variable] = node.tile
    return tuple(placed)


def tile_values(pmapping: Pmapping, workload: Workload) -> list[tuple[str, str, Any]]:
    """(level, tensor, per-instance tile in values) of every storage node, top-down: the
    same tiles `analyze` computes, without the counts."""
    einsum = workload.einsum(pmapping.einsum)
    extents: dict[str, Any] = dict(workload.rank_sizes)
    out = []
    for node in pmapping.nodes:
        if isinstance(node, Loop):
            extents[node.rank_variable] = node.tile
        elif isinstance(node, Storage):
            out += [(node.level, t, _prod(extents[r] for r in einsum.use(t).ranks)) for t in node.tensors]
    return out


@dataclass(frozen=True)
class Above:
    """What the loops above one point of a pmapping fix for every node below it.

    The model is a fold of `after_loop` over the nodes, top-down: a storage node's counts
    depend only on the `Above` where it sits (`storage_tile`, `link_counts`), the leaf's on
    the one at the bottom (`leaf_counts`). pmapgen's search runs the same steps on columns
    of many partial pmappings at once, so every number is one of these expressions."""
    extents: MappingT[str, Any]  # rank variable -> its extent here (the tile of the loops above)
    temporal: MappingT[str, Any]  # rank variable -> product of its temporal bounds above
    time: Any  # product of all temporal bounds above
    fills: MappingT[str, Any]  # tensor -> `time` just below its last indexing temporal loop
    instances: Any  # product of all spatial bounds above
    between: MappingT[str, Any]  # tensor -> multicast (read) or reduction (output) factor of
    # the spatial loops since its last storage node (or the root)
    depth: int  # loops above
    lifetime: MappingT[str, int]  # tensor -> loops down to its last indexing temporal loop

    def but(self, **changes: Any) -> "Above":
        """`dataclasses.replace` without its per-field work (the prefix search takes
        tens of thousands of steps per search)."""
        new = object.__new__(Above)
        new.__dict__.update(self.__dict__, **changes)
        return new


def start(einsum: Einsum, workload: Workload) -> Above:
    """The point above every loop of a pmapping of `einsum`."""
    ranks = einsum.rank_variables
    tensors = einsum.tensors
    return Above(extents={r: workload.rank_sizes[r] for r in ranks}, temporal={r: 1 for r in ranks}, time=1,
                 fills={t: 1 for t in tensors}, instances=1, between={t: 1 for t in tensors}, depth=0,
                 lifetime={t: 0 for t in tensors})


def after_loop(above: Above, einsum: Einsum, rank: str, bound: Any, dim: FanoutDim | None) -> Above:
    """The point just below a loop over `rank` with `bound` (`dim`: its fanout dim if spatial)."""
    extents = {**above.extents, rank: _div(above.extents[rank], bound)}
    if dim is None:
        time = above.time * bound
        indexed = [t for t in einsum.tensors if einsum.indexes(rank, t)]
        return above.but(extents=extents, temporal={**above.temporal, rank: above.temporal[rank] * bound},
                         time=time, fills={**above.fills, **{t: time for t in indexed}}, depth=above.depth + 1,
                         lifetime={**above.lifetime, **{t: above.depth + 1 for t in indexed}})
    between = dict(above.between)
    for t in einsum.tensors:
        if _spreads(einsum, t, rank, dim):
            between[t] = between[t] * bound
    return above.but(extents=extents, instances=above.instances * bound, between=between, depth=above.depth + 1)


def _spreads(einsum: Einsum, tensor: str, rank: str, dim: FanoutDim) -> bool:
    """Whether a spatial loop over `rank` on `dim` saves traffic of `tensor` above it:
    multicast of a read tensor it does not index, reduction of the output over it."""
    if einsum.is_output(tensor):
        return rank in einsum.reduced and dim.reduce
    return not einsum.indexes(rank, tensor) and dim.multicast


def after_storage(above: Above, tensor: str) -> Above:
    """The point below a storage node of `tensor`: its spatial factor starts again."""
    return above.but(between={**above.between, tensor: 1})


def storage_tile(above: Above, einsum: Einsum, tensor: str) -> tuple[Any, Any, Any]:
    """(per-instance tile in values, fills F, distinct tiles D) of a node of `tensor` here."""
    return (tile_size(above, einsum, tensor), above.fills[tensor],
            _prod(above.temporal[r] for r in einsum.use(tensor).ranks))


def tile_size(above: Above, einsum: Einsum, tensor: str) -> Any:
    """`storage_tile`'s per-instance tile alone, in values (what capacity checks read)."""
    return _prod(above.extents[r] for r in einsum.use(tensor).ranks)


def link_counts(is_output: bool, level: str, parent: str, values: Any, fills: Any, distinct: Any,
                instances: Any, between: Any) -> list[tuple[str, str, Any]]:
    """('read'|'write', level, values) of the link between a storage node and its parent:
    fills of the child's tile; an output's partial sums also go back down."""
    moved = fills * instances * values
    if not is_output:
        return [("read", parent, _div(moved, between)), ("write", level, moved)]
    psum = _div((fills - distinct) * instances * values, between)
    return [("read", level, moved), ("write", parent, _div(moved, between)),
            ("read", parent, psum), ("write", level, psum)]


def leaf_counts(is_output: bool, level: str, ops: Any, between: Any) -> tuple[str, str, Any]:
    """The compute's reads of an input (writes of the output) at its innermost node."""
    return ("write" if is_output else "read"), level, _div(ops, between)


def _add(counts: AccessCounts, tensor: str, access: tuple[str, str, Any]) -> None:
    kind, level, n = access
    (counts.add_write if kind == "write" else counts.add_read)(level, tensor, n)


def analyze(pmapping: Pmapping, workload: Workload, arch: Arch) -> PmappingAnalysis:
    """Tiles, fills and access counts of `pmapping` (docs/semantics.md §3, closed form)."""
    einsum = workload.einsum(pmapping.einsum)
    unit = pmapping.compute.unit
    loops = place_loops(pmapping, workload)
    bounds = {pl.index: pl for pl in loops}
    above = start(einsum, workload)
    chains: dict[str, list[StorageTile]] = {t: [] for t in einsum.tensors}
    counts = AccessCounts()
    ops = _prod(workload.rank_sizes[r] for r in einsum.rank_variables)  # the full iteration space
    counts.ops = ops
    for i, node in enumerate(pmapping.nodes):
        if isinstance(node, Loop):
            dim = arch.fanout_owner(node.spatial, unit).dim(node.spatial) if node.spatial else None
            above = after_loop(above, einsum, node.rank_variable, bounds[i].bound, dim)
            continue
        if not isinstance(node, Storage):
            continue
        for t in node.tensors:
            values, fills, distinct = storage_tile(above, einsum, t)
            chain = chains[t]
            tile = StorageTile(index=i, level=node.level, tensor=t, depth=above.depth,
                               lifetime_depth=above.lifetime[t], values=values, instances=above.instances,
                               fills=fills, distinct=distinct, parent=len(chain) - 1 if chain else None)
            if chain:
                for access in link_counts(einsum.is_output(t), node.level, chain[-1].level, values, fills,
                                          distinct, above.instances, above.between[t]):
                    _add(counts, t, access)
            chain.append(tile)
            above = after_storage(above, t)
    for use in einsum.tensor_uses:
        _add(counts, use.tensor, leaf_counts(einsum.is_output(use.tensor), chains[use.tensor][-1].level, ops,
                                             above.between[use.tensor]))
    tiles = tuple(tile for use in einsum.tensor_uses for tile in chains[use.tensor])
    return PmappingAnalysis(pmapping, loops, tiles, ops, counts)


@dataclass(frozen=True)
class PmappingCost:
    energy_pJ: Any
    latency_s: Any
    compute_energy_pJ: Any
    energy_by_access: dict[tuple[str, str], Any]  # (level, tensor) -> pJ
    compute_latency_s: Any
    memory_latency_s: dict[str, Any]  # level -> seconds


def used_instances(analysis: PmappingAnalysis, arch: Arch, level: str | None) -> Any:
    """Product of the spatial bounds of fanouts at or above `level` (None: the compute unit)."""
    unit = analysis.pmapping.compute.unit
    limit = math.inf if level is None else arch.memory_index[level]
    return _prod(pl.bound for pl in analysis.loops if pl.loop.spatial is not None
                 and arch.memory_index[arch.fanout_owner(pl.loop.spatial, unit).name] <= limit)


def cost(analysis: PmappingAnalysis, workload: Workload, arch: Arch) -> PmappingCost:
    """Energy (pJ) and latency (s) of one pmapping from its counts (docs/semantics.md §6)."""
    counts = analysis.counts
    unit = arch.compute(analysis.pmapping.compute.unit)
    by_access: dict[tuple[str, str], Any] = {}
    read_bits: dict[str, Any] = {}
    write_bits: dict[str, Any] = {}
    for key in sorted(set(counts.reads) | set(counts.writes)):  # fixed order: reproducible sums
        level, tensor = key
        memory, bits = arch.memory(level), workload.tensors[tensor].bits
        r, w = counts.reads.get(key, 0) * bits, counts.writes.get(key, 0) * bits
        by_access[key] = r * memory.read_energy + w * memory.write_energy
        read_bits[level] = read_bits.get(level, 0) + r
        write_bits[level] = write_bits.get(level, 0) + w
    compute_energy = analysis.ops * unit.energy
    compute_latency = analysis.ops / (used_instances(analysis, arch, None) * unit.throughput) / arch.clock_hz
    memory_latency = {}
    for level in read_bits:
        m = arch.memory(level)
        n = used_instances(analysis, arch, level)
        r, w = read_bits[level], write_bits[level]
        terms = port_times(m, r, w, n)
        memory_latency[level] = _max(*terms) if terms else 0
    energy = compute_energy + _sum(by_access.values())
    latency = _max(compute_latency, *memory_latency.values())
    return PmappingCost(energy, latency, compute_energy, by_access, compute_latency, memory_latency)


def port_times(memory, read_bits: Any, write_bits: Any, instances: Any = 1) -> list[Any]:
    """Seconds each of a level's finite-bandwidth ports needs for these bits (read port,
    write port, shared port), spread over `instances`; the level's latency is their max."""
    return [x / (bw * instances) for x, bw in ((read_bits, memory.read_bandwidth),
                                                (write_bits, memory.write_bandwidth),
                                                (read_bits + write_bits, memory.bandwidth)) if bw != math.inf]


def _sum(xs: Iterable[Any]) -> Any:
    """Left to right from 0, as written (builtin `sum` compensates float sums from Python 3.12:
    the model's totals would then differ in the last bits from the search's)."""
    return reduce(operator.add, xs, 0)
