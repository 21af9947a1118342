"""The analytical model of one pmapping: tiles, fills, accesses, energy, latency.

Closed form of docs/semantics.md §3. Every count is a product of loop bounds, so the same
code evaluates an int tile, a numpy array of tiles (one entry per tile shape) or a sympy
symbol; it assumes every loop has bound >= 2 (`looptree.validate.normalize` drops bound-1
loops, pmapgen templates only generate bounds >= 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce
from typing import Any, Iterable

import numpy as np

from arch.model import Arch
from looptree.counts import AccessCounts
from looptree.nodes import Loop, Pmapping, Storage
from workloads.model import Workload


def _prod(xs: Iterable[Any]) -> Any:
    return reduce(lambda a, b: a * b, xs, 1)


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


def _tile_values(loops_above: Iterable[PlacedLoop], ranks: tuple[str, ...], workload: Workload) -> Any:
    extents = {r: workload.rank_sizes[r] for r in ranks}
    for pl in loops_above:
        if pl.loop.rank_variable in extents:
            extents[pl.loop.rank_variable] = pl.loop.tile
    return _prod(extents[r] for r in ranks)


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


def _fills_and_distinct(loops_above: list[PlacedLoop], ranks: tuple[str, ...]) -> tuple[Any, Any]:
    temporal = [pl for pl in loops_above if pl.loop.spatial is None]
    relevant = [k for k, pl in enumerate(temporal) if pl.loop.rank_variable in ranks]
    fills = _prod(pl.bound for pl in temporal[: relevant[-1] + 1]) if relevant else 1
    distinct = _prod(temporal[k].bound for k in relevant)
    return fills, distinct


def _lifetime_depth(loops_above: list[PlacedLoop], ranks: tuple[str, ...]) -> int:
    depth = len(loops_above)
    while depth and (loops_above[depth - 1].loop.spatial is not None
                     or loops_above[depth - 1].loop.rank_variable not in ranks):
        depth -= 1
    return depth


def _spatial_between(loops: tuple[PlacedLoop, ...], lo: int, hi: int) -> list[PlacedLoop]:
    return [pl for pl in loops if pl.loop.spatial is not None and lo < pl.index < hi]


def analyze(pmapping: Pmapping, workload: Workload, arch: Arch) -> PmappingAnalysis:
    """Tiles, fills and access counts of `pmapping` (docs/semantics.md §3, closed form)."""
    einsum = workload.einsum(pmapping.einsum)
    unit = pmapping.compute.unit
    loops = place_loops(pmapping, workload)
    leaf = len(pmapping.nodes) - 1

    def dim(pl: PlacedLoop):
        return arch.fanout_owner(pl.loop.spatial, unit).dim(pl.loop.spatial)

    def multicast(lo: int, hi: int, ranks: tuple[str, ...]) -> Any:
        return _prod(pl.bound for pl in _spatial_between(loops, lo, hi)
                     if pl.loop.rank_variable not in ranks and dim(pl).multicast)

    def reduction(lo: int, hi: int) -> Any:
        return _prod(pl.bound for pl in _spatial_between(loops, lo, hi)
                     if pl.loop.rank_variable in einsum.reduced and dim(pl).reduce)

    tiles: list[StorageTile] = []
    counts = AccessCounts()
    ops = _prod(workload.rank_sizes[r] for r in einsum.rank_variables)  # the full iteration space
    counts.ops = ops
    for use in einsum.tensor_uses:
        is_output = einsum.is_output(use.tensor)
        chain: list[StorageTile] = []
        for i, node in enumerate(pmapping.nodes):
            if not (isinstance(node, Storage) and use.tensor in node.tensors):
                continue
            above = [pl for pl in loops if pl.index < i]
            fills, distinct = _fills_and_distinct(above, use.ranks)
            tile = StorageTile(
                index=i, level=node.level, tensor=use.tensor, depth=len(above),
                lifetime_depth=_lifetime_depth(above, use.ranks),
                values=_tile_values(above, use.ranks, workload),
                instances=_prod(pl.bound for pl in above if pl.loop.spatial is not None),
                fills=fills, distinct=distinct, parent=len(chain) - 1 if chain else None)
            chain.append(tile)
            if tile.parent is None:
                continue
            parent = chain[tile.parent]
            moved = tile.fills * tile.instances * tile.values
            if is_output:
                r = reduction(parent.index, i)
                counts.add_read(node.level, use.tensor, moved)
                counts.add_write(parent.level, use.tensor, _div(moved, r))
                psum = _div((tile.fills - tile.distinct) * tile.instances * tile.values, r)
                counts.add_read(parent.level, use.tensor, psum)
                counts.add_write(node.level, use.tensor, psum)
            else:
                counts.add_read(parent.level, use.tensor, _div(moved, multicast(parent.index, i, use.ranks)))
                counts.add_write(node.level, use.tensor, moved)
        tiles.extend(chain)
        innermost = chain[-1]
        if is_output:
            counts.add_write(innermost.level, use.tensor, _div(ops, reduction(innermost.index, leaf)))
        else:
            counts.add_read(innermost.level, use.tensor,
                            _div(ops, multicast(innermost.index, leaf, use.ranks)))
    return PmappingAnalysis(pmapping, loops, tuple(tiles), ops, counts)


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
        terms = [x / (bw * n) for x, bw in ((r, m.read_bandwidth), (w, m.write_bandwidth),
                                             (r + w, m.bandwidth)) if bw != math.inf]
        memory_latency[level] = _max(*terms) if terms else 0
    energy = compute_energy + _sum(by_access.values())
    latency = _max(compute_latency, *memory_latency.values())
    return PmappingCost(energy, latency, compute_energy, by_access, compute_latency, memory_latency)


def _sum(xs: Iterable[Any]) -> Any:
    return reduce(lambda a, b: a + b, xs, 0)
