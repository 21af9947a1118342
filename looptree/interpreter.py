"""Reference interpreter: access counts of one pmapping BY EXECUTION (docs/semantics.md §3).

Execution semantics implemented here, deliberately literal and slow (small shapes only):

- The loop nest is the pmapping's loops, plus implicit temporal tile-1 loops just above the
  compute leaf over whatever extent of each rank variable is left, so that the leaf sees
  every point of the Einsum's full iteration space (one op per point).
- Temporal points are enumerated in nest order; at each one, every combination of spatial
  indices is visited (all instances run the same temporal schedule in lockstep).
- At every point, every non-backing storage node S of tensor T checks, for its instance
  (the spatial indices above it), whether the tile id (indices of the loops above S over
  rank variables indexing T) differs from the tile it holds; if so it is refilled: inputs
  read a tile from the parent; outputs write back the held tile and read a partial sum back
  if this instance held the new tile id before. Held output tiles are written back at the end.
- The leaf reads one value of each input at its innermost node and writes one update at the
  output's innermost node per op.
- Multicast and spatial reduction are applied by merging requests: within one temporal
  point, requests that agree on everything except the indices of the mergeable spatial loops
  are counted once at the parent (or at the innermost node, for the leaf).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from itertools import product
from operator import itemgetter
from typing import Callable, Hashable

from arch.model import Arch, FanoutDim
from looptree.counts import AccessCounts
from looptree.nodes import Loop, Pmapping
from workloads.model import Einsum, Workload

Point = tuple[int, ...]  # one index per loop of the (extended) nest, outermost first
Picker = Callable[[Point], tuple[int, ...]]


def _picker(positions: tuple[int, ...]) -> Picker:
    """A function returning the indices of `point` at `positions`, as a tuple."""
    if not positions:
        return lambda point: ()
    if len(positions) == 1:
        (i,) = positions
        return lambda point: (point[i],)
    return itemgetter(*positions)


@dataclass(frozen=True)
class _NestLoop:
    """A loop of the extended nest: where it sits among the pmapping's nodes and its bound."""
    rank_variable: str
    bound: int
    node_index: int  # position in pmapping.nodes (len(nodes) - 1 for implicit leaf loops)
    fanout: FanoutDim | None  # None for temporal loops


class _Moment:
    """Requests made at one temporal point; a request key is counted only the first time."""

    def __init__(self) -> None:
        self._seen: set[Hashable] = set()

    def first(self, key: Hashable) -> bool:
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


@dataclass
class _StorageState:
    """One storage node of one tensor, with per-instance state."""
    uid: int
    tensor: str
    level: str
    parent_level: str | None
    is_output: bool
    values: int  # tile size in values, per instance
    instance: Picker  # spatial indices above the node
    tile_id: Picker  # indices of loops above the node over rank variables indexing the tensor
    group_positions: tuple[int, ...]  # positions within the instance tuple that are NOT merged
    held: dict[tuple[int, ...], tuple[int, ...]] = field(default_factory=dict)
    history: dict[tuple[int, ...], set[tuple[int, ...]]] = field(default_factory=dict)

    def group(self, instance: tuple[int, ...]) -> tuple[int, ...]:
        """The instance's merge group: its spatial indices without the merged loops."""
        return tuple(instance[j] for j in self.group_positions)

    def visit(self, point: Point, moment: _Moment, counts: AccessCounts) -> None:
        if self.parent_level is None:  # the backing node is never refilled
            return
        instance, tile = self.instance(point), self.tile_id(point)
        if instance in self.held and self.held[instance] == tile:
            return
        if self.is_output:
            self._refill_output(instance, tile, moment, counts)
        else:
            self._refill_input(instance, tile, moment, counts)

    def _refill_input(self, instance: tuple[int, ...], tile: tuple[int, ...],
                      moment: _Moment, counts: AccessCounts) -> None:
        self.held[instance] = tile
        if moment.first(("fill", self.uid, tile, self.group(instance))):
            counts.add_read(self.parent_level, self.tensor, self.values)
        counts.add_write(self.level, self.tensor, self.values)

    def _refill_output(self, instance: tuple[int, ...], tile: tuple[int, ...],
                       moment: _Moment, counts: AccessCounts) -> None:
        """Write back the held tile (an update), then read the new one back as a partial
        sum if this instance held it before, else start it at zero."""
        if instance in self.held:
            counts.add_read(self.level, self.tensor, self.values)
            if moment.first(("update", self.uid, self.held[instance], self.group(instance))):
                counts.add_write(self.parent_level, self.tensor, self.values)
        self.held[instance] = tile
        seen = self.history.setdefault(instance, set())
        if tile in seen and moment.first(("psum", self.uid, tile, self.group(instance))):
            counts.add_read(self.parent_level, self.tensor, self.values)
            counts.add_write(self.level, self.tensor, self.values)
        seen.add(tile)

    def finish(self, moment: _Moment, counts: AccessCounts) -> None:
        """At the end, every output tile still held is written back to the parent."""
        if not self.is_output or self.parent_level is None:
            return
        for instance, tile in self.held.items():
            counts.add_read(self.level, self.tensor, self.values)
            if moment.first(("final", self.uid, tile, self.group(instance))):
                counts.add_write(self.parent_level, self.tensor, self.values)


@dataclass(frozen=True)
class _LeafAccess:
    """The compute leaf's per-op access of one tensor at its innermost storage node."""
    tensor: str
    level: str
    is_output: bool
    element: Picker  # indices of all loops over rank variables indexing the tensor
    group: Picker  # spatial indices that are not merged (multicast / reduction)

    def visit(self, point: Point, moment: _Moment, counts: AccessCounts) -> None:
        if not moment.first(("leaf", self.tensor, self.element(point), self.group(point))):
            return
        if self.is_output:
            counts.add_write(self.level, self.tensor, 1)
        else:
            counts.add_read(self.level, self.tensor, 1)


# --------------------------------------------------------------------------- building


def _build_nest(pmapping: Pmapping, einsum: Einsum, workload: Workload,
                arch: Arch) -> list[_NestLoop]:
    """The pmapping's loops with their bounds, plus implicit tile-1 loops above the leaf."""
    unit = pmapping.compute.unit
    extent = {r: int(workload.rank_sizes[r]) for r in einsum.rank_variables}
    nest: list[_NestLoop] = []
    for i, node in enumerate(pmapping.nodes):
        if not isinstance(node, Loop):
            continue
        r, tile = node.rank_variable, node.tile
        if r not in extent:
            raise ValueError(f"{pmapping.einsum}: loop over {r!r}, which Einsum "
                             f"{einsum.name} does not have")
        if not isinstance(tile, numbers.Integral) or tile <= 0 or extent[r] % tile:
            raise ValueError(f"{pmapping.einsum}: loop over {r} has tile {tile!r}, which is "
                             f"not a positive integer dividing the extent {extent[r]}")
        fanout = _fanout(node, arch, unit) if node.spatial else None
        nest.append(_NestLoop(r, extent[r] // int(tile), i, fanout))
        extent[r] = int(tile)
    leaf = len(pmapping.nodes) - 1
    nest += [_NestLoop(r, extent[r], leaf, None) for r in einsum.rank_variables if extent[r] > 1]
    return nest


def _fanout(loop: Loop, arch: Arch, unit: str) -> FanoutDim:
    try:
        return arch.fanout_owner(loop.spatial, unit).dim(loop.spatial)
    except KeyError:
        raise ValueError(f"spatial loop over {loop.rank_variable} names fanout dim "
                         f"{loop.spatial!r}, which no memory on {unit}'s path has") from None


def _tile_values(einsum: Einsum, tensor: str, node_index: int, nest: list[_NestLoop],
                 workload: Workload) -> int:
    """Per-instance tile of `tensor` at node `node_index`, in values."""
    def extent(r: str) -> int:
        inner = [lp for lp in nest if lp.rank_variable == r and lp.node_index < node_index]
        size = int(workload.rank_sizes[r])
        for lp in inner:
            size //= lp.bound
        return size
    return math.prod(extent(r) for r in einsum.use(tensor).ranks)


def _mergeable(lp: _NestLoop, tensor: str, einsum: Einsum) -> bool:
    """Whether requests of instances differing only in spatial loop `lp` count once:
    multicast of an input it does not index, or reduction of the output over a reduced rank."""
    if lp.fanout is None:
        return False
    if einsum.is_output(tensor):
        return lp.rank_variable in einsum.reduced and lp.fanout.reduce
    return not einsum.indexes(lp.rank_variable, tensor) and lp.fanout.multicast


def _build_storage(pmapping: Pmapping, einsum: Einsum, nest: list[_NestLoop],
                   workload: Workload) -> list[_StorageState]:
    """One state per (storage node, tensor), each tensor's chain top-down. Spatial loops
    between the parent node and this one that are mergeable for the tensor are left out
    of the merge group (loops above the parent separate parent instances, never merge)."""
    states: list[_StorageState] = []
    for tensor in einsum.tensors:
        parent: tuple[int, str] | None = None
        for node_index, level in pmapping.storage_positions(tensor):
            above = [k for k, lp in enumerate(nest) if lp.node_index < node_index]
            spatial = tuple(k for k in above if nest[k].fanout is not None)
            indexing = tuple(k for k in above if einsum.indexes(nest[k].rank_variable, tensor))
            lower = parent[0] if parent else -1
            group = tuple(j for j, k in enumerate(spatial)
                          if not (nest[k].node_index > lower
                                  and _mergeable(nest[k], tensor, einsum)))
            states.append(_StorageState(
                uid=len(states), tensor=tensor, level=level,
                parent_level=parent[1] if parent else None,
                is_output=einsum.is_output(tensor),
                values=_tile_values(einsum, tensor, node_index, nest, workload),
                instance=_picker(spatial), tile_id=_picker(indexing),
                group_positions=group))
            parent = (node_index, level)
    return states


def _build_leaf(pmapping: Pmapping, einsum: Einsum, nest: list[_NestLoop]) -> list[_LeafAccess]:
    """Per-op accesses; spatial loops below a tensor's innermost node may merge them."""
    accesses: list[_LeafAccess] = []
    for tensor in einsum.tensors:
        node_index, level = pmapping.storage_positions(tensor)[-1]
        element = tuple(k for k, lp in enumerate(nest)
                        if einsum.indexes(lp.rank_variable, tensor))
        group = tuple(k for k, lp in enumerate(nest) if lp.fanout is not None
                      and not (lp.node_index > node_index and _mergeable(lp, tensor, einsum)))
        accesses.append(_LeafAccess(tensor, level, einsum.is_output(tensor),
                                    _picker(element), _picker(group)))
    return accesses


# --------------------------------------------------------------------------- running


def interpret(pmapping: Pmapping, workload: Workload, arch: Arch,
              max_points: int = 2_000_000) -> AccessCounts:
    """Count reads, writes and ops of `pmapping` by stepping through every iteration point."""
    einsum = workload.einsum(pmapping.einsum)
    nest = _build_nest(pmapping, einsum, workload, arch)
    points = math.prod(lp.bound for lp in nest)
    if points > max_points:
        raise ValueError(f"interpreting {pmapping.einsum} would step through {points} "
                         f"iteration points, more than max_points={max_points}; "
                         f"use a smaller shape")
    storages = _build_storage(pmapping, einsum, nest, workload)
    leaf = _build_leaf(pmapping, einsum, nest)
    counts = AccessCounts()
    for s in storages:  # every kept (level, tensor) appears, even with zero counts
        counts.reads.setdefault((s.level, s.tensor), 0)
        counts.writes.setdefault((s.level, s.tensor), 0)

    temporal = [k for k, lp in enumerate(nest) if lp.fanout is None]
    spatial = [k for k, lp in enumerate(nest) if lp.fanout is not None]
    point = [0] * len(nest)
    for t in product(*(range(nest[k].bound) for k in temporal)):
        for k, i in zip(temporal, t):
            point[k] = i
        moment = _Moment()
        for s in product(*(range(nest[k].bound) for k in spatial)):
            for k, i in zip(spatial, s):
                point[k] = i
            p = tuple(point)
            for state in storages:  # top-down within each tensor's chain
                state.visit(p, moment, counts)
            for access in leaf:
                access.visit(p, moment, counts)
            counts.ops += 1
    final = _Moment()
    for state in storages:
        state.finish(final, counts)
    return counts
