"""What a processed key costs: one root part of an Einsum within its latency floor (gpt3 /
tpuv4i, batch 1), each `_Search._process` timed, and its seconds (and each named part's
within it) fitted by least squares as a fixed cost per key plus a cost per row the key
keeps plus a cost per row pushed from it.

    python benchmarks/key_cost.py [--einsum V] [--part 3] [--parts _extend _push ...]

A part is a `_Search` method; its time is counted once per outermost call (a part that
calls itself or is called within another part still counts in that one). The timers add
their own cost, so the parts' fits are read against each other, and against the fit of
the run without them (`--parts` with no names). Seventy-first session, V's part 3 (`--parts`,
67.4 s): 2.44 ms per key + 1.61 us per kept row + 2.00 us per row built, so 43% of the time
is the 11,888 keys' fixed cost and a cut that drops rows but not keys saves little; with
the parts timed, `_extend` 1.20 ms per key and `_push` 1.05 ms (docs/pmapgen.md, "Room a
completion within the budget needs").
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

import arch as arch_specs
import workloads
from ffm.latency_bound import einsum_latency_floor
from pmapgen import Constraints
from pmapgen.prefixes import Key, _Search

PARTS = ("_merged", "_finish", "_beaten", "_prune_narrower", "_moves", "_fits", "_extend", "_emit_storage",
         "_push", "_prune", "_over_latency_cut", "_latency_floor", "_continues")


def timed(parts: tuple) -> type:
    """A `_Search` whose `_process` records (kept rows, rows built, seconds, seconds per part)."""
    spent: dict = defaultdict(float)
    depth: dict = defaultdict(int)

    def wrap(name: str):
        inner = getattr(_Search, name)

        def method(self, *args, **kwargs):
            depth[name] += 1
            start = time.perf_counter()
            try:
                return inner(self, *args, **kwargs)
            finally:
                depth[name] -= 1
                if not depth[name]:
                    spent[name] += time.perf_counter() - start
        return method

    def process(self, key: Key) -> None:
        rows, kept = self.stats.rows, self.stats.kept
        spent.clear()
        start = time.perf_counter()
        _Search._process(self, key)
        self.keys.append((self.stats.kept - kept, self.stats.rows - rows, time.perf_counter() - start, dict(spent)))

    return type("Timed", (_Search,), {"_process": process, **{name: wrap(name) for name in parts}})


def fit(kept: np.ndarray, built: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Least squares of seconds = a + b * kept + c * built: (a, b, c)."""
    return np.linalg.lstsq(np.column_stack([np.ones(len(kept)), kept, built]), seconds, rcond=None)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--einsum", default="V")
    parser.add_argument("--part", type=int, default=3, help="the root part (`pmapgen.prefixes.search_part`)")
    parser.add_argument("--parts", nargs="*", default=list(PARTS), help="`_Search` methods to time within a key")
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    budget = einsum_latency_floor(args.einsum, w, a) * (1 + 1e-9)
    unit = a.computes_for(w.einsum(args.einsum))[0].name
    search = timed(tuple(args.parts))(args.einsum, w, a, unit, Constraints(latency_budget=budget), ("latency",),
                                     None, 1 << 22)
    search.keys = []
    start = time.perf_counter()
    stop = search.run(None, args.part)
    seconds = time.perf_counter() - start
    kept, built, total = (np.array([k[i] for k in search.keys], dtype=float) for i in range(3))
    print(f"{args.einsum} part {args.part} within its latency floor{' (stopped: ' + stop + ')' if stop else ''}: "
          f"{seconds:.1f} s, {len(search.keys):,} keys, {int(built.sum()):,} rows built, {int(kept.sum()):,} kept")
    print(f"  {'':18s} {'seconds':>8s} {'per key':>10s} {'per kept row':>13s} {'per row built':>14s}")
    for name in ["all"] + [p for p in args.parts if any(p in k[3] for k in search.keys)]:
        y = total if name == "all" else np.array([k[3].get(name, 0.0) for k in search.keys])
        a0, b, c = fit(kept, built, y)
        print(f"  {name:18s} {y.sum():8.1f} {a0 * 1e3:7.3f} ms {b * 1e6:10.2f} us {c * 1e6:11.2f} us")
    for low, high in ((0, 10), (10, 100), (100, 1000), (1000, 10000), (10000, np.inf)):
        at = (kept >= low) & (kept < high)
        print(f"  keys keeping {low:,} to {high:,} rows (less): {int(at.sum()):,} keys, "
              f"{total[at].sum() / total.sum():.1%} of the time")

if __name__ == "__main__":
    main()
