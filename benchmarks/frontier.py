"""A batch's compatibility groups and Pareto frontier (the prefix search's prune), in one
compiled call (`pmapgen.pareto.state_frontier`) against the two calls it replaced
(`group_labels`, then `pareto_mask`): every batch one budgeted search passes to it is
recorded, then both are timed over all of them and their masks compared.

    python benchmarks/frontier.py [--einsum V] [--budget-mj 10.0] [--repeats 3]

Ninetieth session (docs/pmapgen.md, "A batch's per-call costs"): a batch holds a dozen
rows at the median, so the two calls' numpy steps cost more than the filter.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import arch as arch_specs
import pmapgen.prefixes as prefixes
import workloads
from pmapgen.pareto import group_labels, pareto_mask, state_frontier
from pmapgen.prefixes import search_part


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--einsum", default="V")
    parser.add_argument("--budget-mj", type=float, default=10.0, help="the search's energy budget (mJ)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    batches = []

    def recording(state: np.ndarray, criteria: np.ndarray) -> np.ndarray:
        batches.append((state, criteria))
        return state_frontier(state, criteria)

    prefixes.state_frontier = recording
    start = time.perf_counter()
    _, stats = search_part(args.einsum, w, a, None, ("energy",), None, args.budget_mj * 1e9)
    prefixes.state_frontier = state_frontier
    print(f"{args.einsum} within {args.budget_mj} mJ: {stats.templates} prefixes, {time.perf_counter() - start:.1f} s; "
          f"{len(batches)} batches, median {np.median([len(x) for _, x in batches]):.0f} rows, "
          f"{np.median([s.shape[1] for s, _ in batches]):.0f} state and "
          f"{np.median([x.shape[1] for _, x in batches]):.0f} criteria columns")
    differ = sum(not np.array_equal(state_frontier(s, x), pareto_mask(x, group_labels(s))) for s, x in batches)
    print(f"masks that differ: {differ}")
    for _ in range(args.repeats):
        t = time.perf_counter()
        for s, x in batches:
            pareto_mask(x, group_labels(s))
        two = time.perf_counter() - t
        t = time.perf_counter()
        for s, x in batches:
            state_frontier(s, x)
        one = time.perf_counter() - t
        print(f"group_labels + pareto_mask {two:.3f} s, state_frontier {one:.3f} s ({two / one:.1f}x)")


if __name__ == "__main__":
    main()
