"""How much of a search within a latency floor leads anywhere: of the partial rows one root
part keeps (gpt3 / tpuv4i at batch 1, latency budget the Einsum's floor), the share that
leads to a pmapping within the budget, and the largest subtrees that lead to none, with
the best pmapping each reached and the term that bounds its latency.

    python benchmarks/latency_waste.py [--einsum V] [--part 3] [--top 12]

A kept row (a row a processed prefix kept, `_Search.records`) leads somewhere if some done
row within the budget descends from it. A row that leads nowhere under a parent that does
(or at a root) roots a wasted subtree: a latency floor tight enough would have cut it, with
everything below it. For each of the largest, the best done row below it (the least
latency, over the budget) and its largest term (`_Search.latency_breakdown`: compute or a
port) say which part of the floor fell short. Rows that prefixes dropped as dominated, or
as beaten by a finished row, are not counted (they are not kept). Seventieth session: at
V's part 3, 0.32% of the kept rows lead to a pmapping within the budget.
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
from pmapgen.prefixes import Key, _Search


class _Traced(_Search):
    """The prefix search, noting each processed prefix's done rows' latency and largest term."""

    def run(self, deadline, root=None):
        self.terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # record -> (latency, largest term's name)
        self._now = None
        return super().run(deadline, root)

    def _process(self, key: Key) -> None:
        self._now = key
        super()._process(key)

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
    useful = sum(int(m.sum()) for rid, m in marked.items() if search.records[rid].key is not None)
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
    for _, rid, final in search.done:
        latency, names = search.terms[rid]
        for j, r in enumerate(np.asarray(final["row"])):
            x, at, row = float(final["latency"][j]), rid, int(r)
            while at >= 0:
                if (at, row) in top and x < best.get((at, row), (np.inf,))[0]:
                    best[at, row] = (x, str(names[r]))
                parent, rows = parents(search, at)
                at, row = int(parent[row]), int(rows[row])
    print(f"the {len(top)} largest: rows, the best done row below (x the budget), its largest term, the prefix")
    terms = Counter()
    for (rid, i), n in sorted(top.items(), key=lambda kv: -kv[1]):
        x, name = best.get((rid, i), (np.inf, "none below"))
        terms[name] += n
        p = search.records[rid].key.prefix
        print(f"{n:>9,} {x / budget:>9.4f}  {name:<20} last {p.last}, depth {p.depth}, inner {dict(p.inner)}")
    print("their rows by term: " + ", ".join(f"{k} {n:,}" for k, n in terms.most_common()))


if __name__ == "__main__":
    main()
