"""pmapgen within one compatibility group (`Constraints.key`): only the pmappings whose
compatibility key (the table's `compat` column: c_T per shared tensor and the fused loops,
DESIGN §6) equals a given one. Coordinate descent (`ffm.descent`) searches an Einsum this
way with its neighbours' choices fixed: whatever it finds joins them.

The prefix search cuts a partial pmapping as soon as its fused part cannot grow into the
key (`FixedKey.structure_ok`, `FixedKey.tiles_ok`): these are necessary conditions (fused
loops over the key's ranks and dims, no more of each than the key has, with the key's
tiles; each on-chip backing under as many loops indexing its tensor as its c_T has; as
many fused loops as the key once the fused region closes). The key itself is checked on
every row at the end (`has_key`), which also serves the per-template enumeration.

`Constraints.tensor_keys` fixes a part of the key: the c_T of chosen shared tensors only
(a fusion move proposes a neighbour's c_T this way, `ffm.fusion`). It is checked the same
way (`FixedTensors`, `tensors_ok`, `tensor_tiles_ok`), on the loops above each such
tensor's backing that index it, then exactly by `has_key`. Pruning is per compatibility
group and every group holds one c_T per tensor, so the search keeps exactly the rows of
the unconstrained search that give those c_T. `Constraints.tensor_key_sets` allows a set
of c_T per tensor (`KeySets`: a structure while some c_T of each set may still be
reached, a row while its fused loops' tiles are those of such a c_T), then exactly by
`has_key`; `ffm.slack.latency_slack_tables` holds a consumer to its producers' c_T so."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from itertools import product

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


@dataclass(frozen=True)
class FixedTensors:
    """`Constraints.tensor_keys` as the prefix search checks them."""
    backing: dict  # tensor -> backing level index
    loops: dict  # tensor -> Counter of (rank, spatial dim) over the loops indexing it above its backing
    tiles: dict  # (tensor, rank, spatial dim) -> the tiles c_T has for such loops


def fixed_tensors(tensor_keys: dict, einsum: str, workload: Workload, arch: Arch, unit: str) -> FixedTensors:
    """`tensor_keys` for `einsum` on compute `unit`; ValueError if one cannot be a c_T of it."""
    e = workload.einsum(einsum)
    index = {m.name: k for k, m in enumerate(arch.path(unit))}
    backing, loops, tiles = {}, {}, {}
    for t, (level, above) in tensor_keys.items():
        if t not in e.tensors or not workload.is_shared(t):
            raise ValueError(f"tensor_keys of {einsum} name {t!r}, not one of its shared tensors")
        if level not in index:
            raise ValueError(f"tensor_keys of {einsum} back {t} at {level!r}, not on {unit}'s path")
        ranks = e.use(t).ranks
        backing[t] = index[level]
        loops[t] = Counter((ranks[pos], sp) for pos, _, sp in above)
        for pos, tile, sp in above:
            tiles.setdefault((t, ranks[pos], sp), set()).add(int(tile))
    return FixedTensors(backing, loops, {k: frozenset(v) for k, v in tiles.items()})


def _fixed_events(ft: FixedTensors, fused: tuple, workload: Workload, einsum: str):
    """The fused events after the backing levels, each as (event, its loop's `ft:` index
    (None for a backing), the fixed tensors not yet placed that a loop indexes)."""
    e = workload.einsum(einsum)
    placed = {t for t, k in ft.backing.items() if k == 0}  # the top's backings precede every loop
    i = 0
    for ev in fused[sum(workload.is_shared(t) for t in e.tensors):]:
        if ev[0] == "backing":
            yield ev, None, ()
            placed.add(ev[1])
        else:
            yield ev, i, tuple(t for t in ft.backing if t not in placed and ev[1] in e.use(t).ranks)
            i += 1


def tensors_ok(ft: FixedTensors, fused: tuple, depth_f: int | None, workload: Workload, einsum: str) -> bool:
    """Whether a partial pmapping with fused structure `fused` (as `structure_ok` reads it)
    may still give the fixed tensors their c_T: each backed at its level, under no more
    loops indexing it (per rank and dim) than its c_T has, exactly as many once placed."""
    e = workload.einsum(einsum)
    levels = dict(fused[:sum(workload.is_shared(t) for t in e.tensors)])
    if any(levels.get(t) != k for t, k in ft.backing.items()):
        return False
    seen = {t: Counter() for t in ft.backing}
    placed = {t for t, k in ft.backing.items() if k == 0}
    for ev, _, indexed in _fixed_events(ft, fused, workload, einsum):
        for t in indexed:
            seen[t][ev[1], ev[2]] += 1
            if seen[t][ev[1], ev[2]] > ft.loops[t].get((ev[1], ev[2]), 0):
                return False
        if ev[0] == "backing" and ev[1] in seen:
            if sum(seen[ev[1]].values()) != sum(ft.loops[ev[1]].values()):
                return False
            placed.add(ev[1])
    # once the fused region closes, every on-chip shared backing has been placed
    return depth_f is None or placed >= set(ft.backing)


def tensor_tiles_ok(ft: FixedTensors, fused: tuple, cols: dict, workload: Workload, einsum: str) -> np.ndarray:
    """Per row of `cols`, whether each fused loop indexing a fixed tensor above its backing
    has a tile its c_T has for that rank and dim."""
    return within_tiles(tile_checks(ft, fused, workload, einsum), cols)


def tile_checks(ft: FixedTensors, fused: tuple, workload: Workload, einsum: str) -> tuple[tuple[str, np.ndarray], ...]:
    """What `tensor_tiles_ok` checks for rows of fused structure `fused`, computed once per
    structure (a keyed search checks every batch it pushes): per fused loop indexing a
    fixed tensor above its backing, its tile column and a table of the tiles allowed
    (table[v]: v is a tile the tensor's c_T has for that rank and dim)."""
    out = []
    for ev, i, indexed in _fixed_events(ft, fused, workload, einsum):
        for t in indexed:
            allowed = sorted(ft.tiles.get((t, ev[1], ev[2]), ()))
            table = np.zeros((allowed[-1] if allowed else 0) + 1, dtype=bool)
            table[allowed] = True
            out.append((f"ft:{i}", table))
    return tuple(out)


def within_tiles(checks: tuple[tuple[str, np.ndarray], ...], cols: dict) -> np.ndarray:
    """Per row of `cols`, whether every check of `tile_checks` holds."""
    ok = np.ones(len(cols["energy"]), dtype=bool)
    for column, table in checks:
        v = cols[column]
        ok &= (v < len(table)) & table[np.minimum(v, len(table) - 1)]
    return ok


@dataclass(frozen=True)
class KeySets:
    """`Constraints.tensor_key_sets` as the prefix search checks them: per tensor, its c_T
    grouped by backing level and loops (what `tensors_ok` reads), each group as the
    `FixedTensors` of that tensor alone and, per c_T in it, its tiles (`FixedTensors.tiles`).
    A group is checked once per fused structure, however many c_T it holds (QK's 904 per
    input at gpt3 batch 1)."""
    alternatives: dict  # tensor -> ((FixedTensors, (tiles of each c_T, ...)), ...)


def key_sets(tensor_key_sets: dict, einsum: str, workload: Workload, arch: Arch, unit: str) -> KeySets:
    """`tensor_key_sets` for `einsum` on compute `unit` (the c_T not on `unit`'s path
    dropped: no pmapping on it gives them)."""
    index = {m.name for m in arch.path(unit)}
    out = {}
    for t, cts in tensor_key_sets.items():
        groups: dict = {}
        for ct in cts:
            if ct[0] in index:
                ft = fixed_tensors({t: ct}, einsum, workload, arch, unit)
                sig = (ft.backing[t], tuple(sorted(ft.loops[t].items(), key=repr)))
                groups.setdefault(sig, (ft, []))[1].append(ft.tiles)
        out[t] = tuple((ft, tuple(tiles)) for ft, tiles in groups.values())
    return KeySets(out)


def sets_ok(ks: KeySets, fused: tuple, depth_f: int | None, workload: Workload, einsum: str) -> bool:
    """Whether a partial pmapping of fused structure `fused` may still give each tensor one
    of its c_T (`tensors_ok` for some group of each)."""
    return all(any(tensors_ok(ft, fused, depth_f, workload, einsum) for ft, _ in groups)
               for groups in ks.alternatives.values())


def set_checks(ks: KeySets, fused: tuple, depth_f: int | None, workload: Workload,
               einsum: str) -> tuple[tuple[tuple[str, ...], int, np.ndarray], ...]:
    """What `within_sets` checks for rows of fused structure `fused`, computed once per
    structure: per tensor whose placed fused loops index it above its backing, those loops'
    tile columns, a radix, and the codes of the tile tuples some c_T that the structure may
    still grow into allows (each loop's tile one its c_T has for that rank and dim, as
    `tile_checks` asks of one c_T)."""
    out = []
    for t, groups in ks.alternatives.items():
        ok = [(ft, tiles) for ft, tiles in groups if tensors_ok(ft, fused, depth_f, workload, einsum)]
        if not ok:
            continue
        loops = [(f"ft:{i}", ev[1], ev[2]) for ev, i, indexed in _fixed_events(ok[0][0], fused, workload, einsum)
                 if t in indexed]
        if not loops:
            continue
        tuples = set()
        for _, per_ct in ok:
            for tiles in per_ct:
                tuples.update(product(*(sorted(tiles.get((t, r, sp), ())) for _, r, sp in loops)))
        radix = max((max(x) for x in tuples), default=0) + 1
        codes = np.array(sorted(sum(v * radix ** k for k, v in enumerate(x)) for x in tuples), dtype=np.int64)
        out.append((tuple(c for c, _, _ in loops), radix, codes))
    return tuple(out)


def within_sets(checks: tuple, cols: dict) -> np.ndarray:
    """Per row of `cols`, whether every check of `set_checks` holds."""
    ok = np.ones(len(cols["energy"]), dtype=bool)
    for columns, radix, codes in checks:
        code = np.zeros(len(ok), dtype=np.int64)
        for k, c in enumerate(columns):
            v = np.asarray(cols[c], dtype=np.int64)
            ok &= v < radix
            code += np.minimum(v, radix - 1) * radix ** k
        ok &= np.isin(code, codes)
    return ok


def narrowed(constraints: Constraints | None) -> Constraints:
    """`constraints` with what their `key`, `tensor_keys` and `tensor_key_sets` imply in
    their own terms added (each fixed tensor's backing level, or its set's levels; the
    ranks that may be fused), so the enumeration starts narrow."""
    c = constraints or Constraints()
    if c.tensor_key_sets:
        c = replace(c, backing={**c.backing, **{t: tuple(sorted({level for level, _ in cts}
                                                                 if t not in c.backing else
                                                                 {level for level, _ in cts} & set(c.backing[t])))
                                                for t, cts in c.tensor_key_sets.items()}})
    if c.tensor_keys:
        c = replace(c, backing={**c.backing, **{t: (level,) for t, (level, _) in c.tensor_keys.items()}})
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


def has_key(table: pd.DataFrame, key: tuple | None, tensor_keys: dict | None = None,
            tensor_key_sets: dict | None = None) -> pd.DataFrame:
    """The rows of a pmapgen table whose compatibility key is `key` (any if None), whose
    c_T are those of `tensor_keys` and among those of `tensor_key_sets`."""
    if table.empty:
        return table
    if key is not None:
        table = table[[c == key for c in table["compat"]]]
    if tensor_keys:
        wanted = tuple(tensor_keys.items())
        table = table[[all(dict(c[0]).get(t) == ct for t, ct in wanted) for c in table["compat"]]]
    if tensor_key_sets and not table.empty:
        sets = {t: set(cts) for t, cts in tensor_key_sets.items()}
        table = table[[all(dict(c[0]).get(t) in cts for t, cts in sets.items()) for c in table["compat"]]]
    return table
