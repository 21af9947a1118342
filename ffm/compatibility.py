"""Compatibility in the join (DESIGN §6, FFM §5): which group of partial mappings may take
which group of the next Einsum's pmappings, and the group the joined rows fall into.

A partial mapping's group is its `Key`: everything its future depends on besides numbers.
- `live`: c_T of every tensor used both by a joined Einsum and a later one;
- `frontier`: the first s fused loops (rank, tile, spatial) of the last joined Einsum, where
  s is the number of loops the live tensors' on-chip backings sit under: the next Einsum
  must share exactly those loops (docs/semantics.md §4); deeper loops of the last Einsum
  no longer matter, so they are not part of the key (fewer, larger groups prune more);
- `einsum`: whose rank variables `frontier` names.

Matching is a hash join on the c_T of the tensors both sides hold and the frontier loops
(renamed to the next Einsum's rank variables); everything here is per *group* pair, never
per row.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
import numpy as np

from arch.model import Arch
from workloads.model import Workload


@dataclass(frozen=True)
class Key:
    """The group of a partial mapping (see the module docstring)."""
    live: tuple
    frontier: tuple
    einsum: str


START = Key((), (), "")  # the empty partial mapping


def needed_depth(live: dict, top: str) -> int:
    """Loops the next Einsum must share: the most loops above a live on-chip backing."""
    return max((len(c[1]) for c in live.values() if c[0] != top), default=0)


@dataclass(frozen=True)
class Pairs:
    """Compatible (partial group, pmapping group) pairs of one join step, as arrays.

    `s`: loops the pair shares; `fy`: the pmapping's fused loops; `key`: index into `keys`
    of the joined rows' group; `s_next`: the loops the joined rows' next Einsum must share.
    `fresh[:, i]` / `dying[:, i]`: the level index (into the join's tracked levels, -1 for
    none) at which `tensors[i]`'s backing tile becomes live at this Einsum / stops being
    live after it."""
    p: np.ndarray
    y: np.ndarray
    s: np.ndarray
    fy: np.ndarray
    s_next: np.ndarray
    key: np.ndarray
    keys: list[Key]
    tensors: tuple[str, ...]
    fresh: np.ndarray
    dying: np.ndarray


def group_pairs(pkeys: list[Key], present: np.ndarray, ycompat: list[tuple], einsum: str, later: set[str],
                workload: Workload, arch: Arch, levels: list[str]) -> Pairs:
    """Every compatible pair of a partial group (indices `present` into `pkeys`) and a
    pmapping group (`ycompat[g]` = (((tensor, c_T), ...), fused loops), as pmapgen keys
    them) of `einsum`; `later` holds the Einsums joined after it."""
    top = arch.memories[0].name
    ey = workload.einsum(einsum)
    alive = {t for t in workload.tensors if any(u in later for u in workload.users(t))}
    ys = [(dict(ykey), yfused) for ykey, yfused in ycompat]
    tensors = tuple(sorted({t for ykey, _ in ys for t in ykey}))
    level_index = {lv: i for i, lv in enumerate(levels)}
    by_common: dict[tuple, dict[tuple, list[int]]] = {}  # (common tensors, s) -> index
    new_keys: dict[Key, int] = {}
    out = {name: [] for name in ("p", "y", "s", "fy", "s_next", "key")}
    fresh_rows, dying_rows = [], []

    names: dict[tuple, tuple[str, ...]] = {}
    ckeys: dict[tuple, list[tuple]] = {}  # common tensors -> their c_T per pmapping group

    def in_this_einsum(r: str, ex: str) -> tuple[str, ...]:
        """This Einsum's rank variables a loop over r in ex may be the same loop as: the same
        letter, or one indexing the same position of a tensor both use (as the validator)."""
        if (r, ex) not in names:
            x = workload.einsum(ex)
            names[r, ex] = tuple(b for b in ey.rank_variables if b == r or _same_rank(r, b, x, ey))
        return names[r, ex]

    def by(common: tuple, s: int) -> dict[tuple, list[int]]:
        """Pmapping groups with at least s fused loops by (c_T of `common`, first s loops)."""
        if (common, s) not in by_common:
            if common not in ckeys:
                ckeys[common] = [tuple(ykey[t] for t in common) for ykey, _ in ys]
            index: dict[tuple, list[int]] = {}
            for g, (ck, (_, yfused)) in enumerate(zip(ckeys[common], ys)):
                if len(yfused) >= s:
                    index.setdefault((ck, yfused[:s]), []).append(g)
            by_common[common, s] = index
        return by_common[common, s]

    def matching(key: Key, live: dict, s: int) -> list[int]:
        """Hash lookups on everything compatibility needs: the shared tensors' c_T and the
        frontier renamed to this Einsum's rank variables (each renaming it may have)."""
        assert len(key.frontier) == s  # a group keeps exactly the loops the next Einsum must share
        common = tuple(t for t in tensors if t in live)
        index = by(common, s)
        ckey = tuple(live[t] for t in common)
        renamed = product(*[[(b, tile, spatial) for b in in_this_einsum(r, key.einsum)]
                            for r, tile, spatial in key.frontier])
        return [g for frontier in renamed for g in index.get((ckey, frontier), [])]

    for pg in present.tolist():
        key = pkeys[pg]
        live = dict(key.live)
        s = needed_depth(live, top)
        for yg in matching(key, live, s):
            ykey, yfused = ys[yg]
            new_live = {t: c for t, c in live.items() if t in alive}
            new_live.update((t, c) for t, c in ykey.items() if t in alive)
            s_next = needed_depth(new_live, top)
            nk = Key(tuple(sorted(new_live.items())), yfused[:s_next], einsum if s_next else "")
            out["p"].append(pg)
            out["y"].append(yg)
            out["s"].append(s)
            out["fy"].append(len(yfused))
            out["s_next"].append(s_next)
            out["key"].append(new_keys.setdefault(nk, len(new_keys)))
            onchip = {t: level_index.get(ykey[t][0], -1) for t in tensors if ykey[t][0] != top}
            fresh_rows.append([onchip.get(t, -1) if t not in live else -1 for t in tensors])
            dying_rows.append([onchip.get(t, -1) if t in live and t not in new_live else -1 for t in tensors])
    arrays = {name: np.asarray(v, dtype=np.int64) for name, v in out.items()}
    shape = (len(arrays["p"]), len(tensors))
    return Pairs(keys=list(new_keys), tensors=tensors,
                 fresh=np.asarray(fresh_rows, dtype=np.int64).reshape(shape),
                 dying=np.asarray(dying_rows, dtype=np.int64).reshape(shape), **arrays)


def _same_rank(ra: str, rb: str, x, y) -> bool:
    """Rank variable ra of Einsum x and rb of Einsum y index the same position of a tensor
    both use."""
    return any(ra in x.use(t).ranks and rb in y.use(t).ranks and x.use(t).ranks.index(ra) == y.use(t).ranks.index(rb)
               for t in set(x.tensors) & set(y.tensors))
