"""Brute-force oracles for small problems: every legal pmapping, by plain enumeration.

Deliberately dumb and independent of pmapgen: it builds every sequence of loops and storage
nodes (any order, any tile chain, any spatial dim) and keeps what the validator accepts;
the only thing it does not repeat is the order of storage nodes with no loop between them
(the same pmapping written twice). Nor does it build a tensor's chain that no pmapping may
hold, whatever the rest (DESIGN §4): one with a top-level node below a loop, or one of a
workload input or output that does not start at the top level. Those were over nine in ten
of the candidates; `tests/test_oracle.py` checks that the validator rejects every one.
"""
from __future__ import annotations

from itertools import combinations, combinations_with_replacement, product
from typing import Iterator

from looptree.nodes import Compute, Loop, Pmapping, Storage
from looptree.validate import MappingError, normalize, validate_pmapping


def all_pmappings(workload, arch, einsum: str, max_loops: int = 4, every: bool = False) -> Iterator[Pmapping]:
    """Every legal pmapping of `einsum` (on every compute unit that runs it) with at most
    `max_loops` loops, each once: every loop sequence (any order, tile, spatial dim), and
    every placement of every tensor's chain of levels into the gaps between those loops
    (storage nodes in one gap are one set); the validator decides what is legal. `every`
    builds the chains no pmapping may hold too (module docstring)."""
    e = workload.einsum(einsum)
    for unit in arch.computes_for(e):
        path = [m.name for m in arch.path(unit.name)]
        dims = [d.name for m in arch.path(unit.name) for d in m.fanout]
        for loops in _loop_sequences(e, workload, dims, max_loops):
            # normalize drops only bound-1 loops, which no sequence has: every candidate below
            # normalizes to itself, so it is checked once per sequence, not per candidate
            bare = Pmapping(einsum, loops + (Compute(unit.name),))
            assert normalize(bare, workload) == bare, loops
            gaps = len(loops) + 1
            per_tensor = [list(_chain_placements(t, path, gaps, workload.tensors[t].role != "intermediate", every))
                          for t in e.tensors]
            for placement in product(*per_tensor):
                at: dict = {}  # (gap, level) -> tensors kept there
                for part in placement:
                    for t, lv, g in part:
                        at.setdefault((g, lv), []).append(t)
                nodes: list = []
                for g in range(gaps):
                    for level in path:
                        if (g, level) in at:
                            nodes.append(Storage(level, tuple(sorted(at[g, level]))))
                    if g < len(loops):
                        nodes.append(loops[g])
                p = Pmapping(einsum, tuple(nodes) + (Compute(unit.name),))
                try:
                    validate_pmapping(p, workload, arch)
                except MappingError:
                    continue
                yield p


def _loop_sequences(e, workload, dims, max_loops: int, extents=None, prefix=()) -> Iterator[tuple]:
    extents = extents or dict(workload.rank_sizes)
    yield prefix
    if len(prefix) == max_loops:
        return
    for r in e.rank_variables:
        for tile in range(1, extents[r]):
            if extents[r] % tile == 0:
                for spatial in (None, *dims):
                    yield from _loop_sequences(e, workload, dims, max_loops, {**extents, r: tile},
                                               prefix + (Loop(r, tile, spatial),))


def _chain_placements(tensor: str, path: list[str], gaps: int, top: bool = False, every: bool = False) -> Iterator[tuple]:
    """Every choice of levels keeping `tensor` (in level order) and a non-decreasing gap for
    each; unless `every`, only those whose top-level node is above every loop, and which
    start at the top level if `top` (the tensor is a workload input or output)."""
    for k in range(1, len(path) + 1):
        for levels in combinations(path, k):
            if not every and top and levels[0] != path[0]:
                continue
            for positions in combinations_with_replacement(range(gaps), k):
                if not every and levels[0] == path[0] and positions[0] > 0:
                    continue
                yield tuple((tensor, lv, g) for lv, g in zip(levels, positions))
