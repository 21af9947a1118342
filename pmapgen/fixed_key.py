"""pmapgen within one compatibility group (`Constraints.key`): only the pmappings whose
compatibility key (the table's `compat` column: c_T per shared tensor and the fused loops,
DESIGN §6) equals a given one. Coordinate descent (`ffm.descent`) searches an Einsum this
way with its neighbours' choices fixed: whatever it finds joins them.

The prefix search cuts a partial pmapping as soon as its fused part cannot grow into the
key (`FixedKey.structure_ok`, `FixedKey.tiles_ok`): these are necessary conditions (fused
loops over the key's ranks and dims, no more of each than the key has, with the key's
tiles; each on-chip backing under as many loops indexing its tensor as its c_T has; as
many fused loops as the key once the fused region closes). The key itself is checked on
every row at the end (`has_key`), which also serves the per-template enumeration."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from arch.model import Arch
from pmapgen.constraints import Constraints
from workloads.model import Workload


@dataclass(frozen=True)
class FixedKey:
    """A compatibility key as the prefix search checks it."""
    backing: tuple  # (shared tensor, backing level index), sorted as the search's Key holds them
    counts: tuple  # ((rank, spatial dim), how many fused loops the key has of it)
    tiles: dict  # (rank, spatial dim) -> the tiles the key's loops of it have
    above: dict  # on-chip shared tensor -> fused loops indexing it above its backing
    depth: int  # fused loops in the key


def fixed_key(key: tuple, einsum: str, workload: Workload, arch: Arch, unit: str) -> FixedKey:
    """`key` (a `compat` value) for `einsum` on compute `unit`; ValueError if it cannot be one of its keys."""
    per_tensor, fused = key
    e = workload.einsum(einsum)
    shared = sorted(t for t in e.tensors if workload.is_shared(t))
    if sorted(t for t, _ in per_tensor) != shared:
        raise ValueError(f"a key of {einsum} names its shared tensors {shared}, not {sorted(t for t, _ in per_tensor)}")
    index = {m.name: k for k, m in enumerate(arch.path(unit))}
    levels = {t: level for t, (level, _) in per_tensor}
    if any(level not in index for level in levels.values()):
        raise ValueError(f"a key of {einsum} names a level not on {unit}'s path: {levels}")
    tiles: dict = {}
    for r, tile, sp in fused:
        tiles.setdefault((r, sp), set()).add(int(tile))
    top = arch.memories[0].name
    return FixedKey(tuple((t, index[levels[t]]) for t in e.tensors if t in levels),
                    tuple(Counter((r, sp) for r, _, sp in fused).items()),
                    {k: frozenset(v) for k, v in tiles.items()},
                    {t: len(loops) for t, (level, loops) in per_tensor if level != top}, len(fused))


def narrowed(constraints: Constraints | None) -> Constraints:
    """`constraints` with what their `key` implies in their own terms added (each shared
    tensor's backing level, the ranks that may be fused), so the enumeration starts narrow."""
    c = constraints or Constraints()
    if c.key is None:
        return c
    per_tensor, fused = c.key
    backing = {**c.backing, **{t: (level,) for t, (level, _) in per_tensor}}
    ranks = frozenset(r for r, _, _ in fused)
    fusable = ranks if c.fusable_ranks is None else ranks & c.fusable_ranks
    return replace(c, backing=backing, fusable_ranks=fusable)


def structure_ok(fk: FixedKey, fused: tuple, depth_f: int | None, workload: Workload, einsum: str) -> bool:
    """Whether a partial pmapping whose fused structure is `fused` (the prefix search's
    `Key.fused`: backing levels, then ("loop", rank, dim) and ("backing", tensor, level)
    events) and fused depth `depth_f` (None: still open) may end with the key."""
    n = len(fk.backing)
    if tuple(fused[:n]) != fk.backing:
        return False
    most = dict(fk.counts)
    seen: Counter = Counter()
    e = workload.einsum(einsum)
    for ev in fused[n:]:
        if ev[0] == "loop":
            seen[ev[1], ev[2]] += 1
            if seen[ev[1], ev[2]] > most.get((ev[1], ev[2]), 0):
                return False
        elif sum(c for (r, _), c in seen.items() if r in e.use(ev[1]).ranks) != fk.above.get(ev[1], -1):
            return False
    return depth_f is None or sum(seen.values()) == fk.depth


def tiles_ok(fk: FixedKey, fused: tuple, cols: dict) -> np.ndarray:
    """Per row of `cols`, whether each fused loop's tile (`ft:<i>`) is one the key has for
    its rank and dim."""
    loops = [(ev[1], ev[2]) for ev in fused[len(fk.backing):] if ev[0] == "loop"]
    ok = np.ones(len(cols["energy"]), dtype=bool)
    for i, rs in enumerate(loops):
        ok &= np.isin(cols[f"ft:{i}"], list(fk.tiles[rs]))
    return ok


def has_key(table: pd.DataFrame, key: tuple | None) -> pd.DataFrame:
    """The rows of a pmapgen table whose compatibility key is `key` (all if None)."""
    if key is None or table.empty:
        return table
    return table[[c == key for c in table["compat"]]]
