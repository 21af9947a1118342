"""How much of a budgeted prefix search an exact floor would save: of the partial rows the
search kept (and so extended), the share that lead to a pmapping within the budget.

    python benchmarks/headroom.py --einsum Q --backing I=DRAM [--slack 1.02 1.1]
        [--set batch=1 seq_len=2048] [--by-prefix]

The Einsum of `gpt3` on `tpuv4i` is searched with each backing fixed as given (a keyed
search of the energy proof fixes some this way), first by rising budgets for its least
energy, then once per slack at a budget of slack x that least. For each it prints the
seconds, the rows kept at processed prefixes and how many of them lead to a done row
within the budget (`_Search.leading`: what a floor equal to each row's least completion
would have kept; the rest were extended for nothing), and the same for prefixes.
`--by-prefix` splits the last slack's figures by the deepest level with a storage node,
the kind of the last move (storage, spatial or temporal loop) and whether the rows are
past their fused part (F, the last shared on-chip backing placed): where the floor is
loose (docs/mapper.md, "Step 22").
"""
from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict

import arch as arch_specs
import workloads
from pmapgen.constraints import Constraints
from pmapgen.prefixes import _Search, energy_lower_bound, generate_by_rising_budgets


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
        kept = leading = prefixes = useful = 0
        by.clear()
        for unit in a.computes_for(w.einsum(args.einsum)):
            search = _Search(args.einsum, w, a, unit.name, c, ("energy",), budget)
            search.run(None)
            for rec, mark in zip(search.records, search.leading(budget)):
                n, m = len(mark), int(mark.sum())
                kept, leading, prefixes, useful = kept + n, leading + m, prefixes + 1, useful + bool(m)
                if rec.key is not None:
                    p = rec.key.prefix
                    cell = by[unit.name, p.deepest, p.last, "F" if rec.key.depth_f is not None else "-"]
                    cell[0], cell[1], cell[2], cell[3] = cell[0] + n, cell[1] + m, cell[2] + 1, cell[3] + bool(m)
        print(f"  within {slack}x ({budget / 1e9:.4f} mJ): {time.perf_counter() - start:.1f} s; rows kept {kept}, "
              f"leading within the budget {leading} ({leading / max(kept, 1):.1%}); prefixes {prefixes}, "
              f"leading {useful} ({useful / max(prefixes, 1):.1%})", flush=True)
    if args.by_prefix:
        path = {u.name: [m.name for m in a.path(u.name)] for u in a.computes_for(w.einsum(args.einsum))}
        print(f"  by prefix at {args.slack[-1]}x: unit, deepest level with a node, last move, F: "
              "rows kept, leading; prefixes, leading")
        for (unit, deepest, last, f), (n, m, p, u) in sorted(by.items()):
            level = path[unit][deepest] if deepest >= 0 else "(none)"
            print(f"    {unit:7s} {level:13s} {last:8s} {f}  {n:9d} {m:7d} ({m / max(n, 1):6.1%})  {p:6d} {u:5d}")


if __name__ == "__main__":
    main()
