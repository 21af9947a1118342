"""The energy proof (ffm.budgets) against exhaustive pmapgen, on one workload and arch.

    python benchmarks/proof.py [--workload matmul_chain] [--arch simple]
        [--set length=2 M=512 big=1024 small=256] [--time-limit 0.2] [--proof-time 600] [--exhaustive]
        [--no-descent]

The batch-1 figures of docs/mapper.md ("Step 3: refining the least term"):

    python benchmarks/proof.py --workload gpt3 --arch tpuv4i --set batch=1 seq_len=2048 \
        --time-limit 15 --proof-time 60

(with `--proof-time 120` the batch-1 proof completes: docs/mapper.md, "Step 5").

Runs `ffm.map` for energy with pmapgen cut short at `--time-limit` seconds per Einsum and
the proof after it, and prints the seconds of each phase (`MapStats.seconds`), what each
coordinate descent did (`--no-descent` skips them), the best mapping found before and after the proof, the proof's steps
(seconds, partial pmappings built), its refinements of the bound's terms (`ffm.refine`:
keyed searches, empty, cut short, seconds, closed or not; a retry reruns a standing
term's searches cut short, split by root), the lower bound and the result;
with `--exhaustive`, also the run
without a time limit, to compare times and check the two optima are equal.
"""
from __future__ import annotations

import argparse
import time

import ffm
from workloads import parse_overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="matmul_chain")
    parser.add_argument("--arch", default="simple")
    parser.add_argument("--set", nargs="*", default=["length=2", "M=512", "big=1024", "small=256"])
    parser.add_argument("--time-limit", type=float, default=0.2, help="pmapgen seconds per Einsum before the proof")
    parser.add_argument("--proof-time", type=float, default=600.0, help="proof seconds per Einsum and step")
    parser.add_argument("--exhaustive", action="store_true", help="also run without a time limit")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--no-descent", action="store_true", help="skip coordinate descent (ffm.map's descent=False)")
    args = parser.parse_args()
    variables = parse_overrides(args.set)
    print(f"{args.workload} on {args.arch}, {' '.join(args.set)}")

    start = time.perf_counter()
    r = ffm.map(args.workload, args.arch, variables=variables, progress=False, time_limit=args.time_limit,
                proof_time_limit=args.proof_time, workers=args.workers, descent=not args.no_descent)
    wall = time.perf_counter() - start
    s, proof = r.stats, r.stats.proof
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in s.seconds.items())
    print(f"time-limited + proof: {wall:.1f} s ({phases}), energy {r.evaluation.energy_pJ:.6g} pJ, "
          f"{'exhaustive' if s.exhaustive else 'proven' if s.complete else 'NOT proven'}")
    for d in s.descent:  # only when the proof did not complete (`ffm.map`)
        print(f"  descent after the proof: {d.before:.6g} -> {d.after:.6g} pJ, {len(d.rounds)} rounds, {d.seconds:.1f} s")
    if proof is not None:
        report(proof)
    if args.exhaustive:
        start = time.perf_counter()
        x = ffm.map(args.workload, args.arch, variables=variables, progress=False, workers=args.workers)
        print(f"exhaustive: {time.perf_counter() - start:.1f} s, energy {x.evaluation.energy_pJ:.6g} pJ, "
              f"equal: {abs(x.evaluation.energy_pJ - r.evaluation.energy_pJ) <= 1e-9 * x.evaluation.energy_pJ}")


def report(proof) -> None:
    """The proof's steps, refinements and lower bound (`ffm.budgets.Proof`), one line each."""
    before = f"{proof.found:.6g} pJ" if proof.found < float("inf") else "none (the proof ran first)"
    print(f"  best found before the proof: {before}; after it {proof.bound:.6g} pJ")
    for name, stats in proof.steps:
        searched = {id(st): st for st in stats.values()}.values()  # twins (V, K, Q) share one search's Stats
        rows = sum(st.tile_shapes for st in searched)
        secs = sum(st.seconds for st in searched)
        done = all(st.complete for st in stats.values())
        which = f" ({', '.join(f'{e} {st.seconds:.1f} s' for e, st in stats.items())})"
        print(f"  step {name}: {len(stats)} Einsums{which}, {rows:,} partial rows, {secs:.1f} s of search, "
              f"{'complete' if done else 'INCOMPLETE'}")
    for k, ref in enumerate(proof.refinements, 1):  # ffm.refine, in the order the proof ran them
        state = "closed" if ref.value >= proof.bound * (1 - 1e-9) else f"stands at {ref.value:.6g} pJ"
        what = "retry (searches cut short, split by root)" if ref.retry else "refinement"
        if ref.absorbed:
            what += f" ({', '.join(ref.absorbed)} absorbed: a later wildcard keyed by their rows)"
        print(f"  {what} {k} of ({', '.join(ref.wildcards)}): {ref.keys} keyed searches ({ref.reused} reused, {ref.mirrored} mirrored), "
              f"{ref.empty} empty, "
              f"{ref.cut} cut short or not started ({ref.by_rows} by rows), {ref.rows:,} rows, {ref.seconds:.1f} s; {state}; each "
              f"wildcard costs at least: {', '.join(f'{e} {v:.6g} pJ' for e, v in ref.least)}")
    print(f"  the optimum is at least {proof.lower:.6g} pJ: within {proof.bound / proof.lower:.4f}x"
          if proof.lower > 0 else "  no lower bound")


if __name__ == "__main__":
    main()
