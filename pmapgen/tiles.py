"""All tile shapes of a template: per rank variable, every chain of tiles (each dividing the
extent above it, every bound >= 2), crossed over rank variables, keeping only shapes whose
spatial loops fit their fanout dims."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from arch.model import Arch
from pmapgen.templates import Template
from workloads.model import Workload


@lru_cache(maxsize=None)
def divisor_chains(size: int, length: int) -> tuple[tuple[int, ...], ...]:
    """Strictly decreasing chains t1 > ... > t_length >= 1, each dividing the previous (t0 = size)."""
    if length == 0:
        return ((),)
    out = []
    for t in range(1, size):
        if size % t == 0:
            out += [(t, *rest) for rest in divisor_chains(t, length - 1)]
    return tuple(out)


def tile_shapes(template: Template, workload: Workload, arch: Arch, allowed: dict | None = None) -> np.ndarray:
    """(n_shapes x n_slots) int64 array of every legal tile assignment of `template`;
    `allowed` (rank -> tile sizes) restricts the tiles of that rank's loops."""
    slots = template.slots()
    n = template.n_slots
    by_rank: dict[str, list[int]] = {}
    for loop in slots:
        by_rank.setdefault(loop.rank_variable, []).append(loop.tile)
    tiles = np.ones((1, n), dtype=np.int64)
    for r, ks in by_rank.items():
        chains = np.array(divisor_chains(workload.rank_sizes[r], len(ks)), dtype=np.int64).reshape(-1, len(ks))
        if allowed and r in allowed:
            chains = chains[np.isin(chains, list(allowed[r])).all(axis=1)]
        if len(chains) == 0:
            return np.zeros((0, n), dtype=np.int64)
        rows = np.repeat(tiles, len(chains), axis=0)
        rows[:, ks] = np.tile(chains, (len(tiles), 1))
        tiles = rows
    # spatial fit: per dim, the product of its loops' bounds must not exceed the dim's size
    extent = {r: np.full(len(tiles), workload.rank_sizes[r], dtype=np.int64) for r in by_rank}
    used: dict[str, np.ndarray] = {}
    for loop in slots:
        t = tiles[:, loop.tile]
        bound = extent[loop.rank_variable] // t
        extent[loop.rank_variable] = t
        if loop.spatial is not None:
            used[loop.spatial] = used.get(loop.spatial, 1) * bound
    keep = np.ones(len(tiles), dtype=bool)
    for dim, product in used.items():
        keep &= product <= arch.fanout_owner(dim, template.unit).dim(dim).size
    return tiles[keep]
