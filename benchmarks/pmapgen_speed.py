"""pmapgen speed on gpt3 / tpuv4i: per Einsum, templates, tile shapes evaluated, pmappings
kept, seconds and peak memory, at batch 1 / 2048 tokens and at FFM's batch 64 / 4096.

    python benchmarks/pmapgen_speed.py [--time-limit 60] [--einsums Q QK ...]

Each Einsum runs in this process, one after another (peak memory is the process's peak
so far). An Einsum stopped by the time limit is reported as INCOMPLETE: its table is not
exhaustive. Identical Einsums (K and V) are generated once and renamed in `generate_all`;
here every Einsum is timed on its own.
"""
from __future__ import annotations

import argparse
import resource
import time

import arch as arch_specs
import workloads
from pmapgen import generate

SHAPES = (("batch 1, 2048 tokens", {"batch": 1, "seq_len": 2048}),
          ("batch 64, 4096 tokens (FFM)", {"batch": 64, "seq_len": 4096}))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per Einsum (default 60)")
    parser.add_argument("--einsums", nargs="*", help="only these Einsums")
    args = parser.parse_args()
    a = arch_specs.load("tpuv4i")
    for label, variables in SHAPES:
        w = workloads.load("gpt3", **variables)
        print(f"\ngpt3 on tpuv4i, {label}; time limit {args.time_limit:g} s per Einsum")
        print(f"{'Einsum':<12}{'templates':>11}{'tile shapes':>13}{'kept':>8}{'seconds':>9}{'peak MiB':>10}  status")
        total = time.perf_counter()
        for e in args.einsums or w.einsum_names:
            _, _, st = generate(e, w, a, time_limit=args.time_limit)
            status = "complete" if st.complete else "INCOMPLETE (time limit)"
            print(f"{e:<12}{st.templates:>11}{st.tile_shapes:>13}{st.kept:>8}{st.seconds:>9.1f}{peak_mib():>10.0f}  {status}",
                  flush=True)
        print(f"total wall {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
