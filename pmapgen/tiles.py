"""All tile shapes of a template: per rank variable, every chain of tiles (each dividing the
extent above it, every bound >= 2), crossed over rank variables, keeping only shapes whose
spatial loops fit their fanout dims and whose tiles fit every level's capacity.

Both checks are applied as early as they are sound: per rank before crossing, and again
after each rank is crossed, with the tiles of ranks not yet decided at 1 (tiles only grow
with them), so that misfits are never built. Most of a template's shapes can overflow a
small level (gpt3 V on tpuv4i: 70% of rows, 62% of templates with none that fit)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterator

import numpy as np

from arch.model import Arch
from pmapgen.capacity import fits
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


def tile_shape_chunks(template: Template, workload: Workload, arch: Arch, allowed: dict | None = None,
                      max_rows: int = 1 << 20) -> Iterator[np.ndarray]:
    """Every legal tile assignment of `template` (see `tile_shapes`), in arrays of at most
    about `max_rows` rows, so memory stays bounded however many shapes a template has."""
    n = template.n_slots
    by_rank: dict[str, list] = {}
    for loop in template.slots():
        by_rank.setdefault(loop.rank_variable, []).append(loop)
    chains = []
    for r, loops in by_rank.items():
        ks = [loop.tile for loop in loops]
        c = np.array(divisor_chains(workload.rank_sizes[r], len(ks)), dtype=np.int64).reshape(-1, len(ks))
        if allowed and r in allowed:
            c = c[np.isin(c, list(allowed[r])).all(axis=1)]
        alone = np.ones((len(c), n), dtype=np.int64)
        alone[:, ks] = c
        c = c[_spatial_fit(alone, template, workload, arch, ranks={r}) & _fit_capacity(alone, template, workload, arch)]
        if len(c) == 0:
            return
        chains.append((ks, c))
    yield from _chunks(np.ones((1, n), dtype=np.int64), chains, template, workload, arch, max_rows)


def _chunks(prefix: np.ndarray, chains: list, template: Template, workload: Workload, arch: Arch,
            max_rows: int) -> Iterator[np.ndarray]:
    """Cross `prefix` rows with the chains of the remaining ranks, splitting on the first
    rank when the product would exceed `max_rows`."""
    if not chains:
        tiles = prefix[_spatial_fit(prefix, template, workload, arch)]
        if len(tiles):
            yield tiles
        return
    (ks, c), rest = chains[0], chains[1:]
    total = len(prefix) * len(c) * math.prod(len(cc) for _, cc in rest)
    step = len(c) if total <= max_rows else max(1, len(c) * max_rows // total)
    for start in range(0, len(c), step):
        part = c[start:start + step]
        rows = np.repeat(prefix, len(part), axis=0)
        rows[:, ks] = np.tile(part, (len(prefix), 1))
        rows = rows[_fit_capacity(rows, template, workload, arch)]
        if len(rows):
            yield from _chunks(rows, rest, template, workload, arch, max_rows)


def _fit_capacity(tiles: np.ndarray, template: Template, workload: Workload, arch: Arch) -> np.ndarray:
    """Rows whose tiles (undecided ones at 1) fit every finite level (`pmapgen.capacity.fits`)."""
    ok = fits(template.with_tiles([tiles[:, k] for k in range(template.n_slots)]), workload, arch)
    return np.broadcast_to(np.asarray(ok, dtype=bool), len(tiles))


def _spatial_fit(tiles: np.ndarray, template: Template, workload: Workload, arch: Arch,
                 ranks: set[str] | None = None) -> np.ndarray:
    """Rows whose spatial loops fit their dims: per dim, the product of its loops' bounds
    must not exceed the dim's size. With `ranks`, only loops over those rank variables
    count (the others' bounds are at least 1: a necessary condition)."""
    extent: dict[str, np.ndarray] = {}
    used: dict[str, np.ndarray] = {}
    for loop in template.slots():
        r = loop.rank_variable
        if ranks is not None and r not in ranks:
            continue
        t = tiles[:, loop.tile]
        bound = extent.get(r, workload.rank_sizes[r]) // t
        extent[r] = t
        if loop.spatial is not None:
            used[loop.spatial] = used.get(loop.spatial, 1) * bound
    keep = np.ones(len(tiles), dtype=bool)
    for dim, product in used.items():
        keep &= product <= arch.fanout_owner(dim, template.unit).dim(dim).size
    return keep


def tile_shapes(template: Template, workload: Workload, arch: Arch, allowed: dict | None = None) -> np.ndarray:
    """(n_shapes x n_slots) int64 array of every legal tile assignment of `template`;
    `allowed` (rank -> tile sizes) restricts the tiles of that rank's loops."""
    parts = list(tile_shape_chunks(template, workload, arch, allowed, max_rows=1 << 62))
    return np.concatenate(parts) if parts else np.zeros((0, template.n_slots), dtype=np.int64)
