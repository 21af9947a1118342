"""What a time-limited run finds: the energy of the best gpt3 mapping on tpuv4i with
pmapgen stopped at --time-limit seconds per Einsum (the template order decides it; see
docs/pmapgen.md, "Anytime order"). Run it at two commits to compare orders."""
from __future__ import annotations

import argparse
import time

import ffm


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--time-limit", type=float, default=15.0)
    args = p.parse_args()
    start = time.perf_counter()
    r = ffm.map("gpt3", "tpuv4i", objective="energy", variables={"batch": args.batch, "seq_len": args.seq_len},
                time_limit=args.time_limit, progress=False)
    best = r.evaluations[0]
    print(f"gpt3 batch {args.batch} / {args.seq_len} tokens, {args.time_limit:g} s per Einsum: "
          f"{best.energy_pJ * 1e-12:.3f} J, {best.latency_s * 1e3:.2f} ms, {time.perf_counter() - start:.0f} s wall")


if __name__ == "__main__":
    main()
