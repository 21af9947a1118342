"""FFM phase 2 (FFM §6.2): join the pmappings of one Einsum at a time, grouping by
compatibility, pruning dominated partial mappings and consolidating reservations.

A partial mapping (Einsums 0..i joined) is a row of numbers, held as `Columns` ({column:
array}: a step builds, filters and prunes whole columns, and a pandas frame per step cost
more than the numpy work at the proof's sizes):
- `group`: its compatibility group, an index into the step's list of `Key`s
  (`ffm.compatibility`: live tensors' c_T and the loops the next Einsum must share);
- `row:<einsum>`: the pmapping table row chosen for each joined Einsum;
- `energy`, `latency` (sums over Einsums);
- the consolidated reservation columns of `ffm.reservations` (their number depends only
  on the deepest fusion, never on the number of Einsums).

A step matches groups (`ffm.compatibility.group_pairs`, vectorised over groups) and then
builds and evaluates every row pair of all matched groups at once with numpy, in batches of
about BATCH_ROWS rows.

Pruning is exact by default; `join(..., delta=δ)` ε-prunes every step but the last
(`ffm.epsilon`), `admit` drops partial mappings that cannot beat a known bound (the
clean pass of `ffm.search`), and `narrow` may cut each step's result further (the scout
pass of `ffm.search` keeps only the most promising few: a heuristic, not exact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from arch.model import Arch
from ffm import reservations
from ffm.compatibility import START, Key, Pairs, factorize_keys, group_pairs, pmapping_groups
from ffm.epsilon import epsilon_mask
from pmapgen.capacity import capacity_unit, finite_levels
from pmapgen.pareto import group_labels
from workloads.model import Workload

BATCH_ROWS = 1 << 19  # joined rows built at once; memory stays bounded however large a step
# `_Table`s of recent tables: the energy proof joins the same tables again and again (its
# wildcard bound, 288 joins of parts at batch 1; each refinement's rests). Held up to
# TABLES_HELD tables and TABLE_ROWS_HELD rows in all: at batch 64 one table may hold
# 600 k rows, and the descent joins many
TABLES_HELD = 48
TABLE_ROWS_HELD = 1 << 20
_TABLES: dict[tuple, tuple[pd.DataFrame, "_Table"]] = {}


Columns = dict  # {column: numpy array}, every array one value per partial mapping


def rows_in(cols: Columns) -> int:
    """How many partial mappings `cols` holds."""
    return len(cols["group"])


def _take(cols: Columns, index: np.ndarray) -> Columns:
    """The partial mappings at `index` (positions or a mask)."""
    return {c: v[index] for c, v in cols.items()}


def _concat(parts: list[Columns]) -> Columns:
    return parts[0] if len(parts) == 1 else {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}


@dataclass(frozen=True)
class Partial:
    """Partial mappings (`frame`, one row each) and the groups its `group` column indexes."""
    frame: Columns
    keys: list[Key]


def initial(arch: Arch, depth: int) -> Partial:
    cols = {"group": np.zeros(1, dtype=np.int64), "energy": np.zeros(1), "latency": np.zeros(1)}
    cols.update({c: np.zeros(1) for c in reservations.columns(finite_levels(arch), depth)})
    return Partial(cols, [START])


class _Table:
    """One Einsum's pmapping table, as numpy: groups, objectives, Y's reservation per level
    and lifetime depth k (k = 0..depth, capped at each row's F), backing tiles."""

    def __init__(self, table: pd.DataFrame, levels: list[str], depth: int, tensors: tuple[str, ...]):
        self.groups, uniques = factorize_keys(table["compat"].to_numpy())
        self.compat = pmapping_groups(list(uniques))
        self.order, self.start = _sorted_groups(self.groups, len(uniques))  # rows by group
        self.labels = table.index.to_numpy()
        self.energy = table["energy"].to_numpy(dtype=float)
        self.latency = table["latency"].to_numpy(dtype=float)
        self.res = {}
        for lv in levels:
            have = [c for c in (f"res:{lv}:{k}" for k in range(depth + 1)) if c in table.columns]
            if not have:
                self.res[lv] = np.zeros((len(table), depth + 1))
                continue
            r = table[have].ffill(axis=1).fillna(0.0).to_numpy(dtype=float)  # k > F: the value at F
            self.res[lv] = np.concatenate([r, np.repeat(r[:, -1:], depth + 1 - len(have), axis=1)], axis=1)
        self.backing = np.column_stack([table[f"backing:{t}"].fillna(0.0).to_numpy(dtype=float)
                                        if f"backing:{t}" in table.columns else np.zeros(len(table))
                                        for t in tensors]) if tensors else np.zeros((len(table), 0))


def _table(table: pd.DataFrame, levels: list[str], depth: int, tensors: tuple[str, ...]) -> _Table:
    """`_Table(...)`, built once per table (by identity: tables are never written in place)
    for the last TABLES_HELD tables joined."""
    key = (id(table), tuple(levels), depth, tensors)
    held = _TABLES.pop(key, None)
    if held is None or held[0] is not table:
        held = (table, _Table(table, levels, depth, tensors))
    hold(_TABLES, key, held, TABLES_HELD, TABLE_ROWS_HELD)
    return held[1]


def hold(cache: dict, key, held: tuple, most: int, most_rows: int) -> None:
    """Put `held` ((table, what was made of it)) last in `cache` (least recently used first),
    dropping the least recently used past `most` entries or `most_rows` tables' rows in
    all; a table of more rows than that alone is not held."""
    if len(held[0]) > most_rows:
        return
    cache[key] = held
    while len(cache) > most or sum(len(t) for t, _ in cache.values()) > most_rows:
        del cache[next(iter(cache))]


def _sorted_groups(groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows ordered by group, start of each group in that order; one extra end)."""
    order = np.argsort(groups, kind="stable")
    starts = np.zeros(n_groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(groups, minlength=n_groups), out=starts[1:])
    return order, starts


def _work(pairs: Pairs, p_count: np.ndarray, y_count: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Batches of (pair index, first partial row offset, partial rows, pmapping rows), each
    about BATCH_ROWS joined rows; a pair larger than that is split over its partial rows."""
    rows_p, rows_y = p_count[pairs.p].astype(np.int64), y_count[pairs.y].astype(np.int64)
    if int((rows_p * rows_y).sum()) <= BATCH_ROWS:  # one batch of whole pairs (most steps of the proof's joins)
        n = len(rows_p)
        return [(np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64), rows_p, rows_y)] if n else []
    items, pending, size = [], [], 0
    for i, (n_p, n_y) in enumerate(zip(rows_p.tolist(), rows_y.tolist())):
        step = max(1, BATCH_ROWS // max(1, n_y))
        for lo in range(0, n_p, step):
            n = min(step, n_p - lo)
            if size and size + n * n_y > BATCH_ROWS:
                items.append(pending)
                pending, size = [], 0
            pending.append((i, lo, n, n_y))
            size += n * n_y
    if pending:
        items.append(pending)
    return [tuple(np.asarray(col, dtype=np.int64) for col in zip(*batch)) for batch in items]


def join_step(partial: Partial, table: pd.DataFrame, einsum: str, later: set[str],
              workload: Workload, arch: Arch, depth: int,
              admit: Callable[[Columns], np.ndarray] | None = None,
              merge: Callable[[Columns], Columns] | None = None,
              counted: list[tuple[int, int]] | None = None) -> Partial:
    """Every compatible (partial mapping, pmapping of `einsum`) pair, with consolidated
    reservations, within capacity; `later` holds the Einsums not yet joined after this one.

    The pairs are built in batches of about BATCH_ROWS rows. `admit` masks each batch on
    its objectives and `row:` columns alone, before the reservations are built: a bound
    admits a fifth of the pairs a proof's join builds at batch 1 (AV's rest, ninety-first
    session), and the reservations are most of a pair's cost. `merge` (e.g. exact
    pruning, which commutes with taking unions) is applied to the kept rows whenever they
    exceed a batch, so a large step never holds all its pairs at once. `counted` receives,
    batch by batch, (pairs built, pairs admitted and within capacity)."""
    levels = finite_levels(arch)
    pcols = dict(partial.frame)
    pgroups = pcols.pop("group")
    tensors = tuple(sorted(t for t in workload.einsum(einsum).tensors if workload.is_shared(t)))
    y = _table(table, levels, depth, tensors)
    pairs = group_pairs(partial.keys, np.unique(pgroups), y.compat, einsum, later, workload, arch, levels)
    assert pairs.tensors == tensors or not len(pairs.p)
    p_order, p_start = _sorted_groups(pgroups, len(partial.keys))
    y_order, y_start = y.order, y.start
    out: list[Columns] = []
    kept_rows = 0
    for pair, lo, n_p, n_y in _work(pairs, np.diff(p_start), np.diff(y_start)):
        sizes = n_p * n_y
        item = np.repeat(np.arange(len(pair)), sizes)
        local = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        g = pair[item]
        ip = p_order[p_start[pairs.p[g]] + lo[item] + local // n_y[item]]
        iy = y_order[y_start[pairs.y[g]] + local % n_y[item]]
        df = _objectives(pcols, ip, y, iy, pairs, g, einsum)
        built = rows_in(df)
        if admit is not None and built:
            ok = admit(df)
            df, ip, iy, g = _take(df, ok), ip[ok], iy[ok], g[ok]
        df = _reserve(df, pcols, ip, y, iy, pairs, g, levels, depth, arch)
        if counted is not None:
            counted.append((built, rows_in(df)))
        out.append(df)
        kept_rows += rows_in(df)
        if merge is not None and kept_rows > BATCH_ROWS and len(out) > 1:
            out = [merge(_concat(out))]
            kept_rows = rows_in(out[0])
    if not out:
        columns = ["group", *(c for c in partial.frame if c.startswith("row:")), f"row:{einsum}", "energy",
                   "latency", *reservations.columns(levels, depth)]
        out = [{c: np.zeros(0, dtype=np.int64 if c == "group" or c.startswith("row:") else float) for c in columns}]
    return Partial(_concat(out), pairs.keys)


def _objectives(p: dict[str, np.ndarray], ip: np.ndarray, y: _Table, iy: np.ndarray, pairs: Pairs, g: np.ndarray,
                einsum: str) -> Columns:
    """The joined rows' (partial row ip[i] with pmapping row iy[i], of group pair g[i])
    group, `row:` columns and objectives: what a bound reads."""
    cols = {"group": pairs.key[g]}
    cols.update({c: v[ip] for c, v in p.items() if c.startswith("row:")})
    cols[f"row:{einsum}"] = y.labels[iy]
    cols["energy"] = p["energy"][ip] + y.energy[iy]
    cols["latency"] = p["latency"][ip] + y.latency[iy]
    return cols


def _reserve(cols: Columns, p: dict[str, np.ndarray], ip: np.ndarray, y: _Table, iy: np.ndarray, pairs: Pairs,
             g: np.ndarray, levels: list[str], depth: int, arch: Arch) -> Columns:
    """`cols` (`_objectives`' rows) with their reservation columns, those that fit every
    level."""
    ok = np.ones(len(ip), dtype=bool)
    s, fy, s_next = pairs.s[g], pairs.fy[g], pairs.s_next[g]
    backing = y.backing[iy]
    fresh_at, dying_at = pairs.fresh[g], pairs.dying[g]
    for li, lv in enumerate(levels):
        pr = {c: v[ip] for c, v in p.items() if c[:2] in ("B:", "U:", "R:") and c.split(":")[1] == lv}
        fresh = (backing * (fresh_at == li)).sum(axis=1)
        dying = (backing * (dying_at == li)).sum(axis=1)
        res_cols, fits = reservations.join_level(pr, lv, depth, y.res[lv][iy], fresh, dying, s, fy, s_next,
                                                 capacity_unit(arch, lv)[1])
        cols.update(res_cols)
        ok &= fits
    return cols if ok.all() else _take(cols, ok)


def criteria_columns(columns, objectives: tuple[str, ...], keep_peak: bool = False) -> list[str]:
    """What pruning compares: the objectives and every reservation column the future can
    still add to. `U:<level>:0` (Einsums sharing no loop with the frontier) never grows
    again and was checked against capacity when written, so it only matters if the peak
    itself is wanted (`keep_peak`: e.g. to find the smallest capacity that works)."""
    return list(objectives) + [c for c in columns if c[:2] in ("R:", "B:")
                               or (c[:2] == "U:" and (keep_peak or c.rsplit(":", 1)[1] != "0"))]


def prune_partial(partial: Columns, objectives: tuple[str, ...], delta: float = 0.0,
                  keep_peak: bool = False, tag: Callable[[Columns], np.ndarray] | None = None) -> Columns:
    """Drop partial mappings dominated within their group (on `criteria_columns`); with
    δ > 0, ε-dominated ones too (within 1+δ in every criterion, `ffm.epsilon`). `tag(frame)`
    (an integer per row) splits groups further: rows of different tags are not compared."""
    if not rows_in(partial):
        return partial
    crit = criteria_columns(list(partial), objectives, keep_peak)
    groups = partial["group"]
    if tag is not None:
        groups = group_labels(np.column_stack([groups, tag(partial)]))
    return _take(partial, epsilon_mask(np.column_stack([partial[c] for c in crit]), groups, delta))


@dataclass(frozen=True)
class Step:
    """What one join step produced: pairs of compatible groups built (`joined`), of those
    admitted by the bound and within capacity (`admitted`; without a bound, all those
    within capacity), kept by pruning."""
    einsum: str
    joined: int
    admitted: int
    kept: int


def join(tables: dict[str, pd.DataFrame], workload: Workload, arch: Arch,
         objectives: tuple[str, ...] = ("energy", "latency"), on_step=None, delta: float = 0.0,
         admit: Callable[[int, Columns], np.ndarray] | None = None,
         trace: list[Step] | None = None, keep_peak: bool = False,
         narrow: Callable[[int, Columns], np.ndarray] | None = None,
         tag: Callable[[Columns], np.ndarray] | None = None) -> pd.DataFrame:
    """All non-dominated full mappings, one row each: `rows` holds each Einsum's table index
    label (also as `row:<einsum>` columns), then the objectives and reservation columns.

    `delta` > 0 ε-prunes every step but the last (the last prunes exactly: coarsening it
    would only lose precision). The callbacks read a step's partial mappings as `Columns`:
    `admit(i, partial)` (after joining the i-th Einsum) masks the rows that may still be
    part of a wanted mapping, reading only their `group`, `row:` columns and objectives
    (it runs before their reservations are built, `join_step`); `narrow(i, frame)` masks
    (or indexes) the rows of a step's pruned result to go on with (default: all).
    `on_step(einsum, kept)` is called after every step; `trace` collects a `Step` per step.
    `keep_peak` keeps every mapping whose peak usage of some level is not matched by a
    mapping at least as good (otherwise a mapping's peak is reported, not optimised).
    `tag(frame)` (an integer per row, from its `row:` columns) keeps the best mappings of
    every tag, not only of every group (`prune_partial`; e.g. the least rest per key of a
    wildcard, `ffm.refine`).
    """
    order = list(workload.einsum_names)
    depth = max([int(t["fused_depth"].max()) for t in tables.values() if len(t)] + [0])
    partial = initial(arch, depth)
    for i, e in enumerate(order):
        counted: list[tuple[int, int]] = []
        step_admit = None if admit is None else (lambda df, i=i: admit(i, df))
        partial = join_step(partial, tables[e], e, set(order[i + 1:]), workload, arch, depth, step_admit,
                            lambda df: prune_partial(df, objectives, keep_peak=keep_peak, tag=tag), counted)
        frame = prune_partial(partial.frame, objectives, delta if i < len(order) - 1 else 0.0, keep_peak, tag)
        if narrow is not None:
            frame = _take(frame, narrow(i, frame))
        partial = Partial(frame, partial.keys)
        if trace is not None:
            trace.append(Step(e, sum(b for b, _ in counted), sum(a for _, a in counted), rows_in(frame)))
        if on_step:
            on_step(e, rows_in(frame))
        if not rows_in(frame):
            break
    full = pd.DataFrame({c: v for c, v in partial.frame.items() if c != "group"})
    rows = np.column_stack([full[f"row:{e}"].to_numpy(dtype=np.int64) for e in order if f"row:{e}" in full.columns])
    full.insert(0, "rows", [tuple(r) for r in rows.tolist()])
    return full


def peak(row: pd.Series, arch: Arch) -> dict[str, float]:
    """Peak usage per finite level of a full mapping row."""
    return {lv: max(v for c, v in row.items() if c.startswith(f"U:{lv}:")) for lv in finite_levels(arch)}
