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
(renamed to the next Einsum's rank variables). It works on groups, never on rows, and is
vectorised over them: every c_T and loop becomes an integer code, so Python only reads each
key and builds each new one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

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


@dataclass(frozen=True, eq=False)
class PmappingGroups:
    """One Einsum's pmapping groups ((((tensor, c_T), ...), fused loops) each, as pmapgen
    keys them) as codes, computed once per table: the energy proof joins the same tables
    hundreds of times (`ffm.join._table`). `names`: every group's tensors, concatenated
    (`lengths` per group); `cts`: their c_T as codes (`_Codes`); `fused_code`/`fused`:
    each group's fused loops as a code, and the distinct ones; `loops`: every loop of
    `fused`, concatenated, as codes."""
    names: list
    lengths: np.ndarray
    cts: "_Codes"
    fused_code: np.ndarray
    fused: np.ndarray
    loops: "_Codes"
    # (top level, levels): (each c_T's loops above an on-chip backing, its level's index): `_ct_columns`
    by_levels: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class _Codes:
    """Codes of values by first appearance (`code`), the distinct values (`seen`) and the
    code of each (`index`), so that codes of more values extend them (`_more_codes`)."""
    code: np.ndarray
    seen: list
    index: dict


def pmapping_groups(ycompat: list[tuple]) -> PmappingGroups:
    """`PmappingGroups` of `ycompat`."""
    ykeys = [ykey for ykey, _ in ycompat]
    names, cts = _items(ykeys)
    fused_code, fused = _factorize([yfused for _, yfused in ycompat])
    return PmappingGroups(names, _lengths(ykeys), _codes(cts), fused_code, fused,
                          _codes([lp for f in fused for lp in f]))


def _codes(values: list) -> _Codes:
    code, seen = _factorize(values)
    seen = list(seen)
    return _Codes(code, seen, {v: i for i, v in enumerate(seen)})


def _more_codes(known: _Codes, values: list) -> tuple[np.ndarray, list]:
    """(codes of `values`, the distinct values of both): what `_factorize` of the values
    `known` was made of followed by `values` gives, hashing only `values`' distinct ones
    against `known`."""
    code, seen = _factorize(values)
    new = {v: len(known.seen) + i for i, v in enumerate(v for v in seen if v not in known.index)}
    remap = np.fromiter((known.index[v] if v in known.index else new[v] for v in seen), dtype=np.int64,
                        count=len(seen))
    return remap[code], known.seen + list(new)


def group_pairs(pkeys: list[Key], present: np.ndarray, ycompat: list[tuple] | PmappingGroups, einsum: str,
                later: set[str], workload: Workload, arch: Arch, levels: list[str]) -> Pairs:
    """Every compatible pair of a partial group (indices `present` into `pkeys`) and a
    pmapping group (`ycompat[g]` = (((tensor, c_T), ...), fused loops), as pmapgen keys
    them, or their `PmappingGroups`) of `einsum`; `later` holds the Einsums joined after it.

    Pairs come ordered by partial group (as in `present`), then by renaming of its frontier
    (`itertools.product` order over each loop's candidates), then by pmapping group; new
    keys are numbered by first appearance in that order. A step can have hundreds of
    thousands of groups on either side, hence integer codes and numpy throughout."""
    ys = ycompat if isinstance(ycompat, PmappingGroups) else pmapping_groups(ycompat)
    top = arch.memories[0].name
    ey = workload.einsum(einsum)
    alive = {t for t in workload.tensors if any(u in later for u in workload.users(t))}
    level_index = {lv: i for i, lv in enumerate(levels)}
    keys = [pkeys[i] for i in present.tolist()]

    # c_T as codes, one per distinct c_T of either side: live[i, j] / yct[g, j] is partial
    # keys[i]'s / pmapping group g's c_T of names[j], -1 if it holds none (code -1 reads the
    # sentinel at the end of depth and onchip).
    p_names, p_ct = _items([k.live for k in keys])
    tensors = tuple(sorted(set(ys.names)))
    names = tuple(sorted(set(tensors) | set(p_names)))
    col = {t: j for j, t in enumerate(names)}
    p_code, ct = _more_codes(ys.cts, p_ct)
    yct = _padded(ys.lengths, ys.cts.code, len(names), _lookup(col, ys.names))
    live = _padded(_lengths([k.live for k in keys]), p_code, len(names), _lookup(col, p_names))
    tcols = [col[t] for t in tensors]
    assert (yct[:, tcols] >= 0).all(), "every pmapping group keys every shared tensor of its Einsum"
    depth, onchip = _ct_columns(ys, ct, top, level_index)
    s_p = depth[live].max(axis=1, initial=0)

    # Fused loops as codes: each pmapping group's (yloops[g, :fy[g]]) and each renaming of
    # each partial group's frontier to this Einsum's rank variables (renamed[i], of partial
    # keys[part[i]]). A loop over r in Einsum ex may be the same loop as one over this
    # Einsum's b if b == r or b indexes the same position of a tensor both use.
    yf_code, yf = ys.fused_code, ys.fused
    f_len = _lengths([k.frontier for k in keys])
    assert (f_len == s_p).all(), "a group keeps exactly the loops the next Einsum must share"
    ex_code, exs = _factorize([k.einsum for k in keys])
    fl_code, fl = _factorize([lp for k in keys for lp in k.frontier])
    fl_ex = np.repeat(ex_code, f_len)
    lx = _row_codes(np.column_stack([fl_code, fl_ex]))  # (loop, its Einsum)
    lx_loops = list(zip(fl[fl_code[_first(lx)]], exs[fl_ex[_first(lx)]]))
    same = {(r, ex): [b for b in ey.rank_variables if b == r or _same_rank(r, b, workload.einsum(ex), ey)]
            for r, ex in {(lp[0], ex) for lp, ex in lx_loops}}
    cands = [[(b, tile, sp) for b in same[r, ex]] for (r, tile, sp), ex in lx_loops]
    cand_code, _ = _more_codes(ys.loops, [c for cs in cands for c in cs])
    yf_len = _lengths(yf)
    fy = yf_len[yf_code]
    yloops = _padded(yf_len, ys.loops.code, int(yf_len.max(initial=0)))[yf_code]
    c_count = _lengths(cands)
    n_renamed, renamed = _renamings(f_len, (np.cumsum(c_count) - c_count)[lx], c_count[lx], cand_code)
    part = np.repeat(np.arange(len(keys)), n_renamed)

    row, y = _match(live[part][:, tcols], s_p[part], renamed, yct[:, tcols], yloops, fy, len(ct))
    pos = part[row]

    # The joined rows' group: the alive tensors' c_T (the pmapping's, for those it holds)
    # and the first s_next loops of this Einsum.
    alive_col = np.array([t in alive for t in names], dtype=bool)
    new_live = np.where(alive_col & (yct[y] >= 0), yct[y], np.where(alive_col, live[pos], -1))
    s_next = depth[new_live].max(axis=1, initial=0)
    key = _row_codes(np.column_stack([new_live, np.where(np.arange(yloops.shape[1]) < s_next[:, None], yloops[y], -1)]))
    first = _first(key)
    live_code = _row_codes(new_live[first])
    lives = _held_items(new_live[first[_first(live_code)]], names, ct)
    fused = list(yf)  # (a list reads faster by index than an object array)
    new_keys = [Key(lives[lv], fused[f][:sn], einsum if sn else "")
                for lv, f, sn in zip(live_code.tolist(), yf_code[y[first]].tolist(), s_next[first].tolist())]

    in_live = live[pos][:, tcols] >= 0
    at = onchip[yct[y][:, tcols]]
    dies = in_live & ~np.array([t in alive for t in tensors], dtype=bool)
    return Pairs(p=present[pos].astype(np.int64), y=y, s=s_p[pos], fy=fy[y], s_next=s_next, key=key,
                 keys=new_keys, tensors=tensors, fresh=np.where(in_live, -1, at), dying=np.where(dies, at, -1))


def _ct_columns(ys: PmappingGroups, ct: list, top: str, level_index: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per c_T of `ct` (`ys`' own first, then the partial side's new ones), and a final
    sentinel: the loops above it when backed on chip (`needed_depth`'s terms, 0 at the
    top level) and its level's index (-1 at the top level). `ys`' part is computed once
    per levels (a table is joined hundreds of times)."""
    def columns(cts) -> tuple[list, list]:
        return ([len(c[1]) if c[0] != top else 0 for c in cts],
                [level_index.get(c[0], -1) if c[0] != top else -1 for c in cts])
    key = (top, tuple(level_index.items()))
    if key not in ys.by_levels:
        ys.by_levels[key] = columns(ys.cts.seen)
    (depth, onchip), (more_depth, more_onchip) = ys.by_levels[key], columns(ct[len(ys.cts.seen):])
    return (np.array(depth + more_depth + [0], dtype=np.int64), np.array(onchip + more_onchip + [-1], dtype=np.int64))


def _held_items(codes: np.ndarray, names: tuple, values: list) -> list[tuple]:
    """Per row of `codes` (a column per name, -1 for none): ((name, values[code]), ...)
    over the names it holds, in column order. Read entry by entry only where held."""
    row, col = np.nonzero(codes >= 0)
    items = list(zip(map(names.__getitem__, col.tolist()), map(values.__getitem__, codes[row, col].tolist())))
    out, at = [], 0
    for n in np.bincount(row, minlength=len(codes)).tolist():
        out.append(tuple(items[at:at + n]))
        at += n
    return out


def _match(pct: np.ndarray, s: np.ndarray, renamed: np.ndarray, yct: np.ndarray, yloops: np.ndarray,
           fy: np.ndarray, n_ct: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (row, pmapping group g) that agree on the c_T of each tensor the row holds
    (pct[row], yct[g]: codes < n_ct, -1 for none) and on the first s[row] loops (renamed[row],
    yloops[g]; g has fy[g] >= s[row] loops), by row and then g. A hash join per (tensors
    held, s), each first narrowed to the pmapping groups holding a wanted c_T."""
    held = pct >= 0
    kind = _row_codes(np.column_stack([held, s]))
    found_row, found_y = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for k in np.unique(kind).tolist():
        rows = np.flatnonzero(kind == k)
        common, depth = np.flatnonzero(held[rows[0]]), int(s[rows[0]])
        ys = np.flatnonzero(fy >= depth)
        for c in common:
            wanted = np.zeros(n_ct + 1, dtype=bool)
            wanted[pct[rows, c]] = True
            ys = ys[wanted[yct[ys, c]]]
        if not len(ys):
            continue
        codes = _row_codes(np.concatenate([np.column_stack([pct[rows][:, common], renamed[rows, :depth]]),
                                           np.column_stack([yct[ys][:, common], yloops[ys, :depth]])]))
        a, b = _hash_join(codes[:len(rows)], codes[len(rows):])
        found_row.append(rows[a])
        found_y.append(ys[b])
    order = np.argsort(np.concatenate(found_row), kind="stable")
    return np.concatenate(found_row)[order], np.concatenate(found_y)[order]


def _factorize(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(code of each value, distinct values by first appearance), hashing in C: values may
    be tuples (pandas would read a list of equal-length tuples as a 2-D array)."""
    codes, uniques = pd.factorize(np.fromiter(values, dtype=object, count=len(values)), use_na_sentinel=False)
    return codes.astype(np.int64), uniques


def factorize_keys(values) -> tuple[np.ndarray, np.ndarray]:
    """`pd.factorize` of a column of compatibility keys (codes by first appearance, the
    distinct keys), hashing each distinct object once: the rows of a group share one key
    object (`pmapgen.generate._compat_keys`, kept so through pickling and concatenation),
    and hashing a nested tuple walks all of it (at batch 1, half of building a join's
    view of a table; forty-seventh session)."""
    if not isinstance(values, np.ndarray):  # (a list of equal-length tuples would become 2-D)
        values = np.fromiter(values, dtype=object, count=len(values))
    by_object, _ = pd.factorize(np.fromiter(map(id, values), dtype=np.int64, count=len(values)))
    first = np.unique(by_object, return_index=True)[1]
    codes, uniques = pd.factorize(values[first], use_na_sentinel=False)
    return codes[by_object].astype(np.int64), uniques


def _items(mappings: list[tuple]) -> tuple[list, list]:
    """The keys and the values of sorted (key, value) tuples, all concatenated."""
    flat = [item for m in mappings for item in m]
    return [k for k, _ in flat], [v for _, v in flat]


def _lengths(seqs: list) -> np.ndarray:
    """len of each."""
    return np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))


def _lookup(d: dict, keys: list) -> np.ndarray:
    """d[k] for each k, as integers."""
    return np.fromiter(map(d.__getitem__, keys), dtype=np.int64, count=len(keys))


def _row_codes(m: np.ndarray) -> np.ndarray:
    """A code per distinct row of an integer matrix with entries >= -1, numbered by first
    appearance (a matrix of no columns: all rows equal)."""
    code, span = np.zeros(len(m), dtype=np.int64), 1  # code < span
    for c in m.T:  # a mixed radix, hashed only when the next column would overflow it
        v = c.astype(np.int64) + 1
        width = int(v.max(initial=0)) + 1
        if span * width >= 1 << 62:
            code, seen = pd.factorize(code)
            code, span = code.astype(np.int64), len(seen)
        code, span = code * width + v, span * width
    return pd.factorize(code)[0].astype(np.int64)


def _first(codes: np.ndarray) -> np.ndarray:
    """Where each code 0, 1, ... first occurs (codes numbered by first appearance)."""
    return np.unique(codes, return_index=True)[1]


def _positions(counts: np.ndarray) -> np.ndarray:
    """0..n-1 for each n in `counts`, concatenated."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)


def _padded(lengths: np.ndarray, values: np.ndarray, width: int, cols: np.ndarray | None = None) -> np.ndarray:
    """`values` cut into rows of `lengths` as a matrix, missing entries -1; a value goes to
    column cols[i] if given, else to its position in its row."""
    out = np.full((len(lengths), width), -1, dtype=np.int64)
    out[np.repeat(np.arange(len(lengths)), lengths), _positions(lengths) if cols is None else cols] = values
    return out


def _renamings(lengths: np.ndarray, start: np.ndarray, count: np.ndarray,
               codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every choice of one candidate per loop, for sequences u of lengths[u] loops, the
    i-th loop overall having candidates codes[start[i]:start[i] + count[i]]: (the number of
    choices per sequence, the choices as rows, by sequence and then in `itertools.product`
    order, -1 past a sequence's end)."""
    width = int(lengths.max(initial=0))
    n = _padded(lengths, count, width)
    n[n < 0] = 1  # past a sequence's end: one choice, start -1 + 0: the sentinel code -1
    stride = np.ones_like(n)  # choices of the later loops: the last loop varies fastest
    stride[:, :-1] = np.cumprod(n[:, :0:-1], axis=1)[:, ::-1]
    per = n.prod(axis=1)  # 0 if some loop has no candidate
    owner = np.repeat(np.arange(len(lengths)), per)
    choice = _positions(per)[:, None] // stride[owner] % n[owner]
    return per, np.append(codes, -1)[_padded(lengths, start, width)[owner] + choice]


def _hash_join(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j) with left[i] == right[j], by i and then j."""
    order = np.argsort(right, kind="stable")
    lo = np.searchsorted(right[order], left, "left")
    n = np.searchsorted(right[order], left, "right") - lo
    return np.repeat(np.arange(len(left)), n), order[np.repeat(lo, n) + _positions(n)]


def _same_rank(ra: str, rb: str, x, y) -> bool:
    """Rank variable ra of Einsum x and rb of Einsum y index the same position of a tensor
    both use."""
    return any(ra in x.use(t).ranks and rb in y.use(t).ranks and x.use(t).ranks.index(ra) == y.use(t).ranks.index(rb)
               for t in set(x.tensors) & set(y.tensors))
