"""A budgeted prefix search (an energy proof's raise) whole in one worker against split by
root across the workers (`pmapgen.all_einsums.split_searches`), side by side on gpt3 / tpuv4i.

    python benchmarks/split.py [--einsums QK:1.2 AV:1.25 QK:1.35] [--batch 1 --seq-len 2048]
        [--time-limit 300] [--workers 2]

Each EINSUM:FACTOR searches EINSUM within FACTOR times its minimum energy (found first by
rising budgets, in this process): once as one job in a worker (what a raise of one
Einsum did before the split), once through `generate_all` (split into one part per
root). It prints both wall times, their ratio, and whether the two tables hold the same
rows (compatibility key, energy, latency, reservations; template numbering aside).
Ratios are what to compare: this machine is noisy.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd

import arch as arch_specs
import workloads
from pmapgen import generate_all
from pmapgen.all_einsums import Job, run_searches
from pmapgen.prefixes import generate_by_rising_budgets, part_count


def rows(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rows as values, in one order: what must match."""
    cols = sorted(c for c in table.columns if c not in ("template", "tiles"))
    out = table[cols].assign(compat=table["compat"].map(repr)).fillna(-1)
    return out.sort_values(cols).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--einsums", nargs="*", default=["QK:1.2", "AV:1.25", "QK:1.35"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per search")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    w = workloads.load("gpt3", batch=args.batch, seq_len=args.seq_len)
    a = arch_specs.load("tpuv4i")
    print(f"gpt3 on tpuv4i, batch {args.batch}, {args.seq_len} tokens; {args.workers} workers")
    for spec in args.einsums:
        e, factor = spec.split(":")[0], float(spec.split(":")[1])
        least, _, _ = generate_by_rising_budgets(e, w, a, float("inf"), None, ("energy",), args.time_limit)
        budget = float(least["energy"].min()) * factor
        start = time.perf_counter()
        job = (e, Job(e, w, a, None, ("energy",), args.time_limit, budget))
        whole = run_searches([job], args.workers, progress=False)[e]
        mid = time.perf_counter()
        split = generate_all(w, a, objectives=("energy",), workers=args.workers, progress=False,
                             time_limit=args.time_limit, budgets={e: budget}, einsums=(e,))[e]
        end = time.perf_counter()
        same = whole[2].complete and split[2].complete and rows(whole[0]).equals(rows(split[0]))
        print(f"{e} within {factor}x its minimum ({budget / 1e9:.4g} mJ), {part_count(e, w, a)} roots: "
              f"whole {mid - start:.1f} s, split {end - mid:.1f} s ({(mid - start) / (end - mid):.2f}x), "
              f"{len(split[0])} pmappings, {'the same rows' if same else 'DIFFERENT or incomplete'}", flush=True)


if __name__ == "__main__":
    main()
