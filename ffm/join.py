"""FFM phase 2 (FFM §6.2): join the pmappings of one Einsum at a time, grouping by
compatibility, pruning dominated partial mappings and consolidating reservations.

A partial mapping (Einsums 0..i joined) keeps:
- `live`: c_T of every tensor used both by a joined Einsum and a later one;
- `frontier`: the last Einsum's fused loops (rank, tile, spatial), which the next Einsum
  must share as far as the live tensors require (docs/semantics.md §4);
- energy and latency (sums);
- per finite level, reservations consolidated by lifetime class (FFM §5.2): joined Einsums
  are grouped by j, the loops they share with the frontier (0..D). `U:<level>:<j>` is the
  largest usage seen while an Einsum of class j ran; `R:<level>:<j>:<k>` sums, over class
  j, the reservations with lifetime depth <= k (k < j), which stay live while a later
  Einsum sharing more than k loops runs; `B:<level>` sums the backing tiles of live shared
  tensors. Joining Y at shared depth s adds Y's live part to every class, merges classes
  deeper than s into s, and adds Y as class F_Y. The number of columns depends only on
  the deepest fusion D, never on the number of Einsums.

Pruning is exact by default; `join(..., delta=δ)` ε-prunes every step but the last
(`ffm.epsilon`), and `admit` drops partial mappings that cannot beat a known bound (the
clean pass of `ffm.search`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from arch.model import Arch
from pmapgen.generate import capacity_unit
from ffm.epsilon import epsilon_mask
from workloads.model import Workload


def _levels(arch: Arch) -> list[str]:
    return [m.name for m in arch.memories[1:] if capacity_unit(arch, m.name)[1] != float("inf")]


def _same_loop(a, b, ex, ey) -> bool:
    """Loop a of Einsum ex and loop b of Einsum ey are the same fused loop."""
    if a[1:] != b[1:]:
        return False
    if a[0] == b[0]:
        return True
    return any(a[0] in ex.use(t).ranks and b[0] in ey.use(t).ranks
               and ex.use(t).ranks.index(a[0]) == ey.use(t).ranks.index(b[0])
               for t in set(ex.tensors) & set(ey.tensors))


def initial(arch: Arch, depth: int) -> pd.DataFrame:
    cols = {"rows": [()], "live": [()], "frontier": [()], "frontier_einsum": [""], "frontier_depth": [0],
            "energy": [0.0], "latency": [0.0]}
    for lv in _levels(arch):
        cols[f"B:{lv}"] = [0.0]
        for j in range(depth + 1):
            cols[f"U:{lv}:{j}"] = [0.0]
            for k in range(j):
                cols[f"R:{lv}:{j}:{k}"] = [0.0]
    return pd.DataFrame(cols)


BATCH_ROWS = 1 << 20  # joined rows built at once; memory stays bounded however large a step


def join_step(partial: pd.DataFrame, table: pd.DataFrame, einsum: str, later: set[str],
              workload: Workload, arch: Arch, depth: int,
              fresh: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
              merge: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
              counted: list[int] | None = None) -> pd.DataFrame:
    """Every compatible (partial mapping, pmapping of `einsum`) pair, with consolidated
    reservations; `later` holds the Einsums not yet joined after this one.

    The pairs are built in batches of about BATCH_ROWS rows; `fresh` is applied to each new
    batch and `merge` (e.g. exact pruning, which commutes with taking unions) to the kept
    rows whenever they exceed a batch, so a large step never holds all its pairs at once.
    `counted` receives the number of pairs within capacity, batch by batch."""
    fresh = fresh or (lambda df: df)
    kept_rows = [0]

    def add(df: pd.DataFrame) -> None:
        if counted is not None:
            counted.append(len(df))
        out.append(fresh(df))
        kept_rows[0] += len(out[-1])
        if merge is not None and kept_rows[0] > BATCH_ROWS and len(out) > 1:
            out[:] = [merge(pd.concat(out, ignore_index=True))]
            kept_rows[0] = len(out[0])

    top = arch.memories[0].name
    ey = workload.einsum(einsum)
    levels = _levels(arch)
    out = []
    pgroups = partial.groupby(["live", "frontier", "frontier_einsum", "frontier_depth"], sort=False,
                              dropna=False).indices
    ygroups = table.groupby("compat", sort=False, dropna=False).indices
    by_shared: dict[tuple, dict[tuple, list]] = {}  # hash join on the c_T of tensors both sides have

    def matching(live_d: dict) -> list:
        ytensors = {t for (ykey, _) in ygroups for t, _ in ykey}
        common = tuple(sorted(ytensors & set(live_d)))
        if common not in by_shared:
            index: dict[tuple, list] = {}
            for (ykey, yfused), yi in ygroups.items():
                ykey_d = dict(ykey)
                index.setdefault(tuple(ykey_d.get(t) for t in common), []).append((ykey, yfused, yi))
            by_shared[common] = index
        return by_shared[common].get(tuple(live_d[t] for t in common), [])

    pcols = {c: partial[c].to_numpy() for c in partial.columns}  # numpy once, sliced per pair below
    ycols = {c: table[c].to_numpy() for c in table.columns if c in ("energy", "latency") or c[:4] in ("res:", "back")}
    ycols["__index__"] = table.index.to_numpy()
    for (live, frontier, fe, fdepth), pi in pgroups.items():
        live_d = dict(live)
        for ykey, yfused, yi in matching(live_d):
            ykey_d = dict(ykey)
            s = max((len(c[1]) for t, c in live_d.items() if c[0] != top), default=0)
            fy = len(yfused)
            if s > fy or s > fdepth:
                continue
            if s and not all(_same_loop(a, b, workload.einsum(fe), ey) for a, b in zip(frontier[:s], yfused[:s])):
                continue
            # tensors live after this Einsum: used so far and by a later Einsum
            new_live = {**live_d, **ykey_d}
            new_live = {t: c for t, c in new_live.items() if any(u in later for u in workload.users(t))}
            step = max(1, BATCH_ROWS // max(1, len(yi)))
            for start in range(0, len(pi), step):
                chunk = pi[start:start + step]
                add(_combine({c: v[chunk] for c, v in pcols.items()}, {c: v[yi] for c, v in ycols.items()}, s, fy, live_d, ykey_d, new_live,
                             tuple(sorted(new_live.items())), yfused, einsum, levels, depth, arch, top))
    if not out:
        return partial.iloc[0:0]
    return pd.concat(out, ignore_index=True)


def _combine(p: dict[str, np.ndarray], y: dict[str, np.ndarray], s: int, fy: int, live: dict, ykey: dict, new_live: dict,
             new_live_key, yfused, einsum: str, levels: list[str], depth: int, arch: Arch, top: str) -> pd.DataFrame:
    """The joined rows of every pair from p and y (columns as numpy arrays; y["__index__"]
    holds the table's row labels), within capacity."""
    n_p, n_y = len(p["energy"]), len(y["energy"])
    ip, iy = np.repeat(np.arange(n_p), n_y), np.tile(np.arange(n_y), n_p)
    cols = {
        "rows": [r + (int(k),) for r, k in zip(p["rows"][ip], y["__index__"][iy])],
        "live": [new_live_key] * len(ip), "frontier": [yfused] * len(ip),
        "frontier_einsum": [einsum] * len(ip), "frontier_depth": [fy] * len(ip),
        "energy": p["energy"][ip] + y["energy"][iy],
        "latency": p["latency"][ip] + y["latency"][iy],
    }
    ok = np.ones(len(ip), dtype=bool)
    for lv in levels:
        capacity = capacity_unit(arch, lv)[1]

        def res(k):  # Y's reservation with lifetime depth <= k
            name = f"res:{lv}:{min(k, fy)}"
            return y[name][iy] if name in y else np.zeros(len(ip))

        def backing(tensors):
            total = np.zeros(len(ip))
            for t in tensors:
                if ykey[t][0] == lv:
                    total = total + y[f"backing:{t}"][iy]
            return total

        fresh = [t for t in ykey if ykey[t][0] != top and t not in live]
        dying = [t for t in ykey if ykey[t][0] != top and t in live and t not in new_live]
        B = p[f"B:{lv}"][ip]
        usage_y = res(fy) + B + backing(fresh)
        U = {j: p[f"U:{lv}:{j}"][ip].copy() for j in range(depth + 1)}
        R = {(j, k): p[f"R:{lv}:{j}:{k}"][ip].copy() for j in range(depth + 1) for k in range(j)}
        for j in range(1, depth + 1):
            m = min(j, s)
            if m >= 1:
                U[j] += res(m - 1)  # Y's part that lives while class-j Einsums run
                usage_y = usage_y + R[(j, m - 1)]  # their part that lives while Y runs
        for j in range(s + 1, depth + 1):  # classes deeper than s now share only s loops
            U[s] = np.maximum(U[s], U[j])
            U[j] = np.zeros(len(ip))
            for k in range(s):
                R[(s, k)] += R[(j, k)]
            for k in range(j):
                R[(j, k)] = np.zeros(len(ip))
        U[fy] = np.maximum(U[fy], usage_y)
        for k in range(fy):
            R[(fy, k)] += res(k)
        cols[f"B:{lv}"] = B + backing(fresh) - backing(dying)
        for j in range(depth + 1):
            cols[f"U:{lv}:{j}"] = U[j]
            ok &= U[j] <= capacity
            for k in range(j):
                cols[f"R:{lv}:{j}:{k}"] = R[(j, k)]
    return pd.DataFrame(cols)[ok]


def prune_partial(partial: pd.DataFrame, objectives: tuple[str, ...], delta: float = 0.0) -> pd.DataFrame:
    """Drop partial mappings dominated within their group (same live tensors and frontier);
    with δ > 0, ε-dominated ones too (within 1+δ in every criterion, `ffm.epsilon`)."""
    if partial.empty:
        return partial
    crit = list(objectives) + [c for c in partial.columns if c[:2] in ("U:", "R:", "B:")]
    groups = pd.factorize(pd.Series(list(zip(partial["live"], partial["frontier"], partial["frontier_einsum"],
                                                 partial["frontier_depth"]))))[0]
    return partial[epsilon_mask(partial[crit].to_numpy(dtype=float), groups, delta)].reset_index(drop=True)


@dataclass(frozen=True)
class Step:
    """What one join step produced: rows joined (within capacity), admitted by the bound,
    kept by pruning."""
    einsum: str
    joined: int
    admitted: int
    kept: int


def join(tables: dict[str, pd.DataFrame], workload: Workload, arch: Arch,
         objectives: tuple[str, ...] = ("energy", "latency"), on_step=None, delta: float = 0.0,
         admit: Callable[[int, pd.DataFrame], np.ndarray] | None = None,
         trace: list[Step] | None = None) -> pd.DataFrame:
    """All non-dominated full mappings (one row each; `rows` holds each Einsum's table
    index label).

    `delta` > 0 ε-prunes every step but the last (the last prunes exactly: coarsening it
    would only lose precision). `admit(i, partial)` (after joining the i-th Einsum) masks
    the rows that may still be part of a wanted mapping. `on_step(einsum, kept)` is called
    after every step; `trace` collects a `Step` per step.
    """
    order = list(workload.einsum_names)
    depth = max([int(t["fused_depth"].max()) for t in tables.values() if len(t)] + [0])
    partial = initial(arch, depth)
    for i, e in enumerate(order):
        joined_parts: list[int] = []
        admitted_parts: list[int] = []

        def fresh(df: pd.DataFrame, i=i) -> pd.DataFrame:  # admit batch by batch; prune when they pile up
            if admit is not None and len(df):
                df = df[admit(i, df)].reset_index(drop=True)
            admitted_parts.append(len(df))
            return df

        partial = join_step(partial, tables[e], e, set(order[i + 1:]), workload, arch, depth, fresh,
                            lambda df: prune_partial(df, objectives), joined_parts)
        joined = sum(joined_parts)
        admitted = sum(admitted_parts)
        partial = prune_partial(partial, objectives, delta if i < len(order) - 1 else 0.0)
        if trace is not None:
            trace.append(Step(e, joined, admitted, len(partial)))
        if on_step:
            on_step(e, len(partial))
        if partial.empty:
            break
    return partial


def peak(row: pd.Series, arch: Arch) -> dict[str, float]:
    """Peak usage per finite level of a full mapping row."""
    return {lv: max(v for c, v in row.items() if c.startswith(f"U:{lv}:")) for lv in _levels(arch)}
