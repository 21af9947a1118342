"""Mapper time per Einsum as the workload grows (FFM §7.5): matmul chains of 1, 2, 4, ...,
64 Einsums on tpuv4i, M = 8192, (N, K) cycling (16384, 16384), (4096, 16384), (4096, 4096),
(16384, 4096).

    python benchmarks/scaling.py [--lengths 1 2 4 8 16 32 64] [--time-limit 20] [--objective energy]

Runs pmapgen and the join alone (no energy proof, no coordinate descent: `ffm.map`'s
`prove=False, descent=False`). Prints, per chain length: seconds in pmapgen and in the join/search, seconds per Einsum,
partial mappings kept at the largest join step, energy, what is fused, and whether pmapgen
was exhaustive. The goal is a flat per-Einsum time (64-chain within 1.5x of the 8-chain);
the ratio is printed. pmapgen generates each distinct Einsum once (the chain has four), so
its time stays nearly constant and the join's share is what scales.
"""
from __future__ import annotations

import argparse
import resource

import ffm


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--time-limit", type=float, default=20.0,
                        help="pmapgen seconds per distinct Einsum (0: exhaustive)")
    parser.add_argument("--objective", default="energy")
    parser.add_argument("--arch", default="tpuv4i")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="override matmul_chain variables (e.g. M=64 big=128 small=32 for a quick run)")
    args = parser.parse_args()
    from workloads import parse_overrides
    variables = parse_overrides(args.set)
    print(f"matmul_chain on {args.arch}, objective {args.objective}, pmapgen limit {args.time_limit:g} s per Einsum")
    print(f"{'length':>6}{'pmapgen s':>11}{'join s':>9}{'s/Einsum':>10}{'join s/Einsum':>15}{'max kept':>10}"
          f"{'energy':>12}{'fused':>7}{'peak MiB':>10}  pmapgen")
    per_einsum, join_per_einsum = {}, {}
    for n in args.lengths:
        # pmapgen and the join, as in the fifth session's figure: not the energy proof (which would
        # run first for energy, and may leave pmapgen and the join nothing to do) nor the descent
        r = ffm.map("matmul_chain", args.arch, objective=args.objective, variables={**variables, "length": n},
                    progress=False, time_limit=args.time_limit or None, prove=False, descent=False)
        s = r.stats.seconds
        total = sum(s.values())
        per_einsum[n] = total / n
        join_per_einsum[n] = s["join"] / n
        kept = max((k for _, k in r.stats.join_steps), default=0)
        status = "exhaustive" if r.stats.complete else "TIME LIMIT (not exhaustive)"
        print(f"{n:>6}{s['pmapgen']:>11.1f}{s['join']:>9.1f}{per_einsum[n]:>10.2f}{join_per_einsum[n]:>15.3f}{kept:>10,}"
              f"{r.evaluation.energy_pJ / 1e9:>10.3g}mJ{len(r.evaluation.fused_tensors):>7}{peak_mib():>10.0f}  {status}",
              flush=True)
    if 8 in per_einsum and 64 in per_einsum:
        print(f"per-Einsum time, 64-chain / 8-chain: {per_einsum[64] / per_einsum[8]:.2f} (goal <= 1.5); "
              f"join alone: {join_per_einsum[64] / max(join_per_einsum[8], 1e-9):.2f}")


if __name__ == "__main__":
    main()
