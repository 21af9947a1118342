"""How much of a search within a latency floor leads anywhere: of the partial rows one root
part keeps (gpt3 / tpuv4i at batch 1, latency budget the Einsum's floor), the share that
leads to a pmapping the table keeps, and the largest subtrees that lead to none, with the
best pmapping each reached and the term that bounds its latency; with `--alone K`, the K
largest such subtrees searched again from their root row alone.

    python benchmarks/latency_waste.py [--einsum V] [--part 3] [--top 12] [--alone 0]

A kept row (a row a processed prefix kept, `_Search.records`) leads somewhere if some done
row within the budget that the search kept descends from it (`pmapgen.lineage`). A row
that leads nowhere under a parent that does (or at a root) roots a wasted subtree. Either
no completion of it is within the budget, and a tighter latency floor could have cut it,
or its completions within the budget were dropped on the way, as dominated by rows other
paths brought to the same prefix, beaten by finished rows (`_Search._beaten`) or dropped
by a wider prefix's rows (`_Search._prune_narrower`). The best done row under it (its
least latency, over the budget) and that row's largest term (`_Search.latency_breakdown`:
compute or a port) are what the full search kept there. `--alone` tells the two apart: a
search from the root row only, with no other path's rows, keeps what the row can reach.
Seventieth session, V's part 3: 0.32% of the kept rows lead to a pmapping kept, and each of
the 12 largest wasted subtrees, searched alone, reaches pmappings at the budget (so did 11
more down the 200 largest, and Z's part 1's 3 largest): the waste is rows other paths' rows
dominate later, not a loose floor (docs/pmapgen.md, "Where the kept rows lead").
"""
from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

import arch as arch_specs
import workloads
from ffm.latency_bound import einsum_latency_floor
from pmapgen import Constraints
from pmapgen.lineage import leading, parents, subtree_sizes
from pmapgen.prefixes import Key, Move, Record, _Search


class _Traced(_Search):
    """The prefix search, noting each processed prefix's done rows' latency and largest term."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.args = args  # (for `alone` and a second run)
        self.terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # record -> (latency, largest term's name)
        self._now = None
        self.capture: dict = {}  # keys whose kept rows a second run takes (`alone`), into `captured`
        self.captured: dict = {}

    def _process(self, key: Key) -> None:
        self._now = key
        if key in self.capture:
            self.captured[key] = (len(self.records), self._merged(key, self.incoming[key]))
        super()._process(key)

    def alone(self, key: Key, cols: dict, row: int, root: int) -> "_Traced":
        """A search of the same space from row `row` of `cols` (the rows `key` kept) only."""
        t = _Traced(*self.args)
        one = {c: v[row:row + 1] if v.ndim and len(v) > 1 else v for c, v in cols.items() if c not in ("batch", "tiles")}
        sid = np.asarray(cols["sid"]).reshape(-1)  # (one value if the column was held as one: `_compact`)
        one["sid"] = np.array([t._sid(self._structures[int(sid[row if len(sid) > 1 else 0])])])
        one["row"] = np.zeros(1, dtype=np.int64)
        t.records.append(Record([(None, Move(()))], np.zeros(1, np.int64), np.zeros(1, np.int64),
                                np.zeros((1, 0), np.int64)))
        t._root = root
        t.stats.roots += [0] * (root + 1)
        t._push(key, 0, Move(()), one, np.zeros((1, 0), np.int64), checked=True)
        while t.order:
            for k in t.order.pop():
                t._process(k)
        return t

    def _finish(self, key: Key, cols: dict) -> dict:
        final = super()._finish(key, cols)
        if key is self._now:  # (not a push's: `HOLD_AT_PUSH` finishes pushed rows too)
            terms = self.latency_breakdown(key, cols)
            names = list(terms)
            stacked = np.column_stack([np.broadcast_to(terms[t], final["latency"].shape) for t in names])
            self.terms[len(self.records) - 1] = (final["latency"], np.array(names)[stacked.argmax(axis=1)])
        return final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--einsum", default="V")
    parser.add_argument("--part", type=int, default=3, help="the root part (`pmapgen.prefixes.search_part`)")
    parser.add_argument("--top", type=int, default=12, help="the largest wasted subtrees to show")
    parser.add_argument("--alone", type=int, default=0,
                        help="search the K largest wasted subtrees again from their root row alone (default 0)")
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    floor = einsum_latency_floor(args.einsum, w, a)
    budget = floor * (1 + 1e-9)
    unit = a.computes_for(w.einsum(args.einsum))[0].name
    search = _Traced(args.einsum, w, a, unit, Constraints(latency_budget=budget), ("latency",), None, 1 << 22)
    start = time.perf_counter()
    stop = search.run(None, args.part)
    seconds = time.perf_counter() - start
    kept = sum(len(rec.batch) for rec in search.records if rec.key is not None)
    print(f"{args.einsum} part {args.part} within its latency floor {floor * 1e3:.6g} ms: {seconds:.1f} s, "
          f"{search.stats.rows:,} rows built, {kept:,} kept at {search.stats.prefixes:,} prefixes"
          + (f" (stopped: {stop})" if stop else ""))
    threshold = search.latency_budget * (1 + 1e-9)
    done = np.concatenate([f["latency"] for *_, f in search.done]) if search.done else np.zeros(0)
    print(f"done rows {len(done):,}, within the budget {int((done <= threshold).sum()):,}")
    marked, size = leading(search, threshold), subtree_sizes(search)
    useful = sum(int(m.sum()) for rid, m in enumerate(marked) if search.records[rid].key is not None)
    print(f"kept rows leading to a pmapping within the budget: {useful:,} ({useful / max(kept, 1):.2%})")
    roots, by_move = [], Counter()
    for rid, rec in enumerate(search.records):
        if rec.key is None:
            continue
        parent, row = parents(search, rid)
        above = np.array([p < 0 or marked[int(p)][r] for p, r in zip(parent, row)], dtype=bool)
        for i in np.flatnonzero(~marked[rid] & above):
            node = rec.batches[int(rec.batch[i])][1].nodes[0]
            kind = type(node).__name__.lower() if getattr(node, "spatial", None) is None else "spatial"
            by_move[kind] += int(size[rid][i])
            roots.append((int(size[rid][i]), rid, int(i)))
    print(f"wasted subtrees: {len(roots):,}, {sum(n for n, *_ in roots):,} rows; by the move at their root: "
          + ", ".join(f"{k} {n:,}" for k, n in by_move.most_common()))
    roots.sort(reverse=True)
    top = {(rid, i): n for n, rid, i in roots[:args.top]}
    best: dict = {}
    up: dict = {}  # record -> `parents`, read once
    for _, rid, final in search.done:
        latency, names = search.terms[rid]
        for j, r in enumerate(np.asarray(final["row"])):
            x, at, row = float(final["latency"][j]), rid, int(r)
            while at >= 0:
                if (at, row) in top and x < best.get((at, row), (np.inf,))[0]:
                    best[at, row] = (x, str(names[r]))
                if at not in up:
                    up[at] = parents(search, at)
                at, row = int(up[at][0][row]), int(up[at][1][row])
    print(f"the {len(top)} largest: rows, the best done row below (x the budget), its largest term, the prefix")
    terms = Counter()
    for (rid, i), n in sorted(top.items(), key=lambda kv: -kv[1]):
        x, name = best.get((rid, i), (np.inf, "none below"))
        terms[name] += n
        p = search.records[rid].key.prefix
        print(f"{n:>9,} {x / budget:>9.4f}  {name:<20} last {p.last}, depth {p.depth}, inner {dict(p.inner)}")
    print("their rows by term: " + ", ".join(f"{k} {n:,}" for k, n in terms.most_common()))
    if args.alone:
        alone(search, roots[:args.alone], args.part, budget, threshold)


def alone(search: _Traced, roots: list, part: int, budget: float, threshold: float) -> None:
    """Search the space again to take the rows the wasted subtrees' roots' prefixes kept,
    then each root row's subtree alone (`_Traced.alone`)."""
    keys = {search.records[rid].key: (rid, n) for n, rid, _ in roots}
    again = _Traced(*search.args)
    again.capture = keys
    again.run(None, part)
    print(f"searched alone from their root row (the {len(roots)} largest): rows under it in the search; alone: "
          "seconds, rows built, rows kept, the best done row (x the budget), done rows within the budget")
    for n, rid, i in roots:
        at, cols = again.captured[search.records[rid].key]
        assert at == rid, (at, rid)  # (the same search again: the same records)
        start = time.perf_counter()
        t = search.alone(search.records[rid].key, cols, i, part)
        latency = np.concatenate([f["latency"] for *_, f in t.done]) if t.done else np.array([np.inf])
        print(f"{n:>9,} {time.perf_counter() - start:>7.1f} s {t.stats.rows:>11,} "
              f"{sum(len(r.batch) for r in t.records):>10,} {latency.min() / budget:>9.4f} "
              f"{int((latency <= threshold).sum()):>6,}", flush=True)


if __name__ == "__main__":
    main()