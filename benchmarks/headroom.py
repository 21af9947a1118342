"""How much of a budgeted prefix search an exact floor would save: of the prefixes (and
partial rows) the search processes, the share with a completion within the budget.

    python benchmarks/headroom.py --einsum Q --backing I=DRAM [--slack 1.02 1.1]
        [--set batch=1 seq_len=2048] [--by-prefix]

The Einsum of `gpt3` on `tpuv4i` is searched with each backing fixed as given (a keyed
search of the energy proof fixes some this way), first by rising budgets for its least
energy, then once per slack at a budget of slack x that least. For each it prints the
search's seconds, prefixes processed and partial rows kept, and then, from the same
search run without the Pareto prune (`Unpruned`), how many of those prefixes and rows
have a completion within the budget (`pmapgen.lineage.leading`): what a floor equal to each
row's least completion would keep. (Measured on the pruned search itself, `leading`
also drops the rows whose completions a merge later prunes as dominated, which no
floor could: the forty-second session read it so and overstated the headroom tenfold,
docs/mapper.md "Step 23".) `--by-prefix` splits the last slack's figures by the
deepest level with a storage node, the kind of the last move (storage, spatial or
temporal loop) and whether the rows are past their fused part (F, the last shared
on-chip backing placed): where the floor is loose.
"""
from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict

import numpy as np

import arch as arch_specs
import workloads
from pmapgen.constraints import Constraints
from pmapgen.lineage import leading
from pmapgen.prefixes import BUDGET_RTOL, _Search, energy_lower_bound, generate_by_rising_budgets


class Unpruned(_Search):
    """The search without the Pareto prune within keys, nor of done rows: every row it
    keeps has each of its completions built (those the floor lets through), so `leading`
    marks exactly the rows with a completion within the limit."""

    def _frontier(self, key, cols) -> np.ndarray:
        return np.ones(len(cols["energy"]), dtype=bool)

    def _final_frontier(self, final) -> np.ndarray:
        return np.ones(len(final["energy"]), dtype=bool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="gpt3")
    parser.add_argument("--arch", default="tpuv4i")
    parser.add_argument("--set", nargs="*", default=["batch=1", "seq_len=2048"], metavar="NAME=VALUE")
    parser.add_argument("--einsum", default="Q")
    parser.add_argument("--backing", nargs="*", default=["I=DRAM"], metavar="TENSOR=LEVEL")
    parser.add_argument("--slack", nargs="*", type=float, default=[1.02, 1.1])
    parser.add_argument("--by-prefix", action="store_true")
    args = parser.parse_args()
    w = workloads.load(args.workload, **workloads.parse_overrides(args.set))
    a = arch_specs.load(args.arch)
    backing = dict(b.split("=") for b in args.backing)
    c = Constraints(backing={t: (level,) for t, level in backing.items()})
    begin = time.perf_counter()
    table, _, _ = generate_by_rising_budgets(args.einsum, w, a, math.inf, c, objectives=("energy",))
    least = float(table["energy"].min())
    print(f"{args.einsum} of {args.workload} on {args.arch} ({' '.join(args.set)}), backings {backing}: "
          f"least {least / 1e9:.4f} mJ (found in {time.perf_counter() - begin:.1f} s), "
          f"root bound {energy_lower_bound(args.einsum, w, a, c) / 1e9:.4f} mJ")
    by = defaultdict(lambda: [0, 0, 0, 0])
    for slack in args.slack:
        budget, start = least * slack, time.perf_counter()
        searches = [_Search(args.einsum, w, a, unit.name, c, ("energy",), budget)
                    for unit in a.computes_for(w.einsum(args.einsum))]
        for search in searches:
            search.run(None)
        seconds = time.perf_counter() - start
        prefixes = sum(s.stats.prefixes for s in searches)
        kept = sum(s.stats.kept for s in searches)
        rows = led = useful = exact_prefixes = 0
        by.clear()
        for unit in a.computes_for(w.einsum(args.einsum)):
            search = Unpruned(args.einsum, w, a, unit.name, c, ("energy",), budget)
            search.run(None)
            for rec, mark in zip(search.records, leading(search, budget * (1 + BUDGET_RTOL), "energy")):
                n, m = len(mark), int(mark.sum())
                rows, led, exact_prefixes, useful = rows + n, led + m, exact_prefixes + 1, useful + bool(m)
                if rec.key is not None:
                    p = rec.key.prefix
                    cell = by[unit.name, p.deepest, p.last, "F" if rec.key.depth_f is not None else "-"]
                    cell[0], cell[1], cell[2], cell[3] = cell[0] + n, cell[1] + m, cell[2] + 1, cell[3] + bool(m)
        print(f"  within {slack}x ({budget / 1e9:.4f} mJ): {seconds:.1f} s, {prefixes} prefixes, {kept} rows kept; "
              f"unpruned: {exact_prefixes} prefixes, {useful} ({useful / max(exact_prefixes, 1):.1%}) with a "
              f"completion within the budget; {rows} rows, {led} ({led / max(rows, 1):.1%})", flush=True)
    if args.by_prefix:
        path = {u.name: [m.name for m in a.path(u.name)] for u in a.computes_for(w.einsum(args.einsum))}
        print(f"  by prefix at {args.slack[-1]}x, unpruned: unit, deepest level with a node, last move, F: "
              "rows, with a completion within the budget; prefixes, with one")
        for (unit, deepest, last, f), (n, m, p, u) in sorted(by.items()):
            level = path[unit][deepest] if deepest >= 0 else "(none)"
            print(f"    {unit:7s} {level:13s} {last:8s} {f}  {n:9d} {m:7d} ({m / max(n, 1):6.1%})  {p:6d} {u:5d}")


if __name__ == "__main__":
    main()
