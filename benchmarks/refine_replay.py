"""The energy proof's refinements (`ffm.refine.refine`) captured in a run, and one replayed alone.

    python benchmarks/refine_replay.py capture DIR -- --workload gpt3 --arch tpuv4i \
        --set batch=1 seq_len=2048 --time-limit 15 --proof-time 60
    python benchmarks/refine_replay.py replay DIR N [--time-limit 60] [--fresh] [--retry] [--workers 2]

`capture` runs `benchmarks/proof.py` with the flags after `--`, pickling each call's
arguments and result to DIR/refineNN.pkl (about 20 MB each at batch 1). `replay` runs call
N again and prints, per wildcard in the order searched, its keys, searches reused, cut
short and seconds, then the refinement; `--fresh` drops the searches earlier refinements
kept, so every key is searched. Replaying one capture from a checkout of another commit
(`git worktree`) compares two versions on the same term: docs/mapper.md, "Step 9".
"""
from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import ffm.budgets as budgets
import ffm.refine as refine_module


def capture(out: Path, flags: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    real, calls = budgets.refine, [0]

    def refine(*args, **kwargs):
        r = real(*args, **kwargs)
        calls[0] += 1
        with open(out / f"refine{calls[0]:02d}.pkl", "wb") as f:
            pickle.dump((args, {k: v for k, v in kwargs.items() if k != "deadline"}, r[0]), f)
        return r

    budgets.refine = refine
    sys.path.insert(0, str(Path(__file__).parent))
    import proof
    sys.argv = ["proof.py", *flags]
    proof.main()


def replay(path: Path, time_limit: float, fresh: bool, retry: bool, workers: int) -> None:
    args, _, before = pickle.load(open(path, "rb"))
    workload, arch, results, budgets_, wildcards, bound, constraints = args[:7]
    searched = {} if fresh else args[11]
    print(f"captured: {before}")
    real = refine_module.search_keys

    def search_keys(e, betas, budget, *a, **kw):
        start = time.perf_counter()
        ks = real(e, betas, budget, *a, **kw)
        print(f"  {e}: {len(betas)} keys, {ks.searches} searches, {ks.reused} reused, {ks.cut} cut short, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        return ks

    refine_module.search_keys = search_keys
    start = time.perf_counter()
    r, _ = refine_module.refine(workload, arch, results, budgets_, wildcards, bound, constraints, time_limit, None,
                                workers, False, searched, retry=retry)
    closed = "closed" if r.value >= bound * (1 - refine_module.RTOL) else f"stands at {r.value:.6g} pJ"
    print(f"replayed: {', '.join(wildcards)}: {time.perf_counter() - start:.1f} s, {r.keys} keyed searches, "
          f"{r.cut} cut short, {closed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("capture")
    c.add_argument("dir", type=Path)
    c.add_argument("flags", nargs=argparse.REMAINDER)
    r = sub.add_parser("replay")
    r.add_argument("dir", type=Path)
    r.add_argument("n", type=int)
    r.add_argument("--time-limit", type=float, default=60.0)
    r.add_argument("--fresh", action="store_true")
    r.add_argument("--retry", action="store_true")
    r.add_argument("--workers", type=int, default=2)
    a = parser.parse_args()
    if a.what == "capture":
        capture(a.dir, [f for f in a.flags if f != "--"])
    else:
        replay(a.dir / f"refine{a.n:02d}.pkl", a.time_limit, a.fresh, a.retry, a.workers)


if __name__ == "__main__":
    main()
