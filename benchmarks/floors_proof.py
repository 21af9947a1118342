"""The floors proof (`ffm.latency_proof.prove_at_floors`) step by step, on gpt3 / tpuv4i.

    python benchmarks/floors_proof.py [--set batch=64 seq_len=4096] [--proof-time 30] [--both]

Runs the energy proof with every Einsum held to its own latency floor, as `ffm.map` does
before the latency, EDP and pareto flows, and prints its wall seconds, peak memory of this
process, whether it found a mapping at the latency bound B, and each step's Einsums
(seconds, complete or cut short). With `--both` it runs first as `ffm.map` does (the first
raise cut short ends the proof while no mapping is known: docs/mapper.md, "Step 61"), then
raising on after that (`ffm.budgets.prove_energy`'s `raise_after_cut`), one after the
other in one run: compare their times there, this machine is noisy. Eighty-first session,
batch 64, 30 s: 134.2 s against 346.4 s (scratch runs of the same calls), no mapping
either way; at batch 1 both run the same steps and meet B.
"""
from __future__ import annotations

import argparse
import math
import resource
import time

import arch as arch_specs
import workloads
from ffm.budgets import prove_energy
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import floor_constraints
from ffm.search import BOUND_RTOL
from workloads import parse_overrides


def run(w, a, proof_time: float, raise_after_cut: bool) -> None:
    start = time.perf_counter()
    _, found, proof = prove_energy(w, a, math.inf, {}, floor_constraints(w, a), proof_time, None, False,
                                   raise_after_cut=raise_after_cut)
    wall = time.perf_counter() - start
    bound = latency_lower_bound(w, a)
    met = found is not None and not found.best.empty and \
        float(found.best["latency"].iloc[0]) <= bound * (1 + BOUND_RTOL)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"raise after a cut {raise_after_cut}: {wall:.1f} s, peak {peak:.0f} MiB (this process), "
          f"B {bound * 1e3:.4f} ms {'met' if met else 'not met'}, proven {proof.proven}")
    for name, steps in proof.steps:
        print(f"  {name:<10}" + ", ".join(f"{e} {s.seconds:.1f} s{'' if s.complete else ' (cut short)'}"
                                          for e, s in steps.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", nargs="*", default=["batch=64", "seq_len=4096"], metavar="NAME=VALUE")
    parser.add_argument("--proof-time", type=float, default=30.0, help="seconds per Einsum and step (ffm.map's)")
    parser.add_argument("--both", action="store_true", help="also run with raises after the first cut short")
    args = parser.parse_args()
    w, a = workloads.load("gpt3", **parse_overrides(args.set)), arch_specs.load("tpuv4i")
    for raise_after_cut in (False, True) if args.both else (False,):
        run(w, a, args.proof_time, raise_after_cut)


if __name__ == "__main__":
    main()
