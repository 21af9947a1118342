"""The energy proof's refinements (`ffm.refine.refine`) captured in a run, and one replayed alone.

    python benchmarks/refine_replay.py capture DIR -- --workload gpt3 --arch tpuv4i \
        --set batch=1 seq_len=2048 --time-limit 15 --proof-time 60
    python benchmarks/refine_replay.py replay DIR N [--time-limit 60] [--fresh] [--retry] [--workers 2]
        [--cut-back EINSUM FACTOR]
    python benchmarks/refine_replay.py keys DIR N [--wildcard EINSUM] [--top 15]
    python benchmarks/refine_replay.py prove DIR [--bound PJ] [--phases]

`capture` runs `benchmarks/proof.py` with the flags after `--`, pickling each call's
arguments and result to DIR/refineNN.pkl (about 20 MB each at batch 1). `replay` runs call
N again and prints, per wildcard in the order searched, its keys, searches reused, cut
short and seconds, then the refinement; `--fresh` drops the searches earlier refinements
kept, so every key is searched; `--cut-back E F` first cuts Einsum E's budget and table
back to its budget over F (E as it was before its last raises: docs/mapper.md, "Step 10").
`capture` also pickles what the proof starts from (DIR/proof.pkl: U and the tables
found), and `prove` runs the whole proof again from it, so two policies of `ffm.budgets`
are compared from one start (the time-limited search before a proof reaches other
pmappings from run to run: docs/mapper.md, "Step 11"); `--phases` also prints the wall
seconds of each search step (`generate_all`), wildcard bound and refinement, in order,
and their totals (docs/mapper.md, "Step 15").
`keys` runs each keyed search of one wildcard of call N (default its first) alone in this
process, fresh, and prints their total, the share of the costliest, the keys by partial
rows built (time and how many came back empty) and the costliest keys. Replaying one capture from a checkout of another commit (`git worktree`) compares
two versions on the same term: docs/mapper.md, "Step 9".
"""
from __future__ import annotations

import argparse
import math
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

import ffm.budgets as budgets
import ffm.mapper as mapper
import ffm.refine as refine_module
from pmapgen import Constraints
from pmapgen.prefixes import generate_by_prefixes


def capture(out: Path, flags: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    real, calls = budgets.refine, [0]
    real_prove = mapper.prove_energy

    def prove_energy(*args, **kwargs):
        with open(out / "proof.pkl", "wb") as f:  # what the proof starts from (`prove`)
            pickle.dump(args[:7], f)
        return real_prove(*args, **kwargs)

    mapper.prove_energy = prove_energy

    def refine(*args, **kwargs):
        r = real(*args, **kwargs)
        calls[0] += 1
        with open(out / f"refine{calls[0]:02d}.pkl", "wb") as f:
            pickle.dump((args, {k: v for k, v in kwargs.items() if k not in ("deadline", "kept")}, r[0]), f)
        return r

    budgets.refine = refine
    sys.path.insert(0, str(Path(__file__).parent))
    import proof
    sys.argv = ["proof.py", *flags]
    proof.main()


def replay(path: Path, time_limit: float, fresh: bool, retry: bool, workers: int,
           cut_back: tuple[str, float] | None = None) -> None:
    args, _, before = pickle.load(open(path, "rb"))
    workload, arch, results, budgets_, wildcards, bound, constraints = args[:7]
    if cut_back is not None:
        e, factor = cut_back
        budgets_ = {**budgets_, e: budgets_[e] / factor}
        table, templates, stats = results[e]
        results = {**results, e: (table[table["energy"] <= budgets_[e]], templates, stats)}
        print(f"{e}'s budget cut back to {budgets_[e]:.6g} pJ ({len(results[e][0])} pmappings)")
    searched = {} if fresh else args[11]
    print(f"captured: {before}")
    real = refine_module.search_keys

    def search_keys(e, betas, budget, *a, **kw):
        start = time.perf_counter()
        ks = real(e, betas, budget, *a, **kw)
        print(f"  {e}: {len(betas)} keys, {ks.searches} searches, {ks.reused} reused, {ks.mirrored} mirrored, {ks.cut} cut short, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        return ks

    refine_module.search_keys = search_keys
    start = time.perf_counter()
    r, _ = refine_module.refine(workload, arch, results, budgets_, wildcards, bound, constraints, time_limit, None,
                                workers, False, searched, retry=retry)
    closed = "closed" if r.value >= bound * (1 - refine_module.RTOL) else f"stands at {r.value:.6g} pJ"
    print(f"replayed: {', '.join(wildcards)}: {time.perf_counter() - start:.1f} s, {r.keys} keyed searches, "
          f"{r.cut} cut short, {closed}")


def timed_phases() -> list[tuple[str, str, float, float]]:
    """Wraps the proof's phases (search steps, wildcard bounds, refinements) with wall
    timers; the list fills with (phase, what, start, seconds) as the proof runs."""
    log: list[tuple[str, str, float, float]] = []
    begin = time.perf_counter()

    def timed(phase, f, what):
        def run(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            log.append((phase, what(args, kwargs), t - begin, time.perf_counter() - t))
            return out
        return run

    budgets.generate_all = timed("search", budgets.generate_all, lambda a, k: k.get("desc", ""))
    budgets.refine = timed("refine", budgets.refine, lambda a, k: ", ".join(a[4]))
    budgets.WildcardBound.bound = timed("bound", budgets.WildcardBound.bound, lambda a, k: "")
    return log


def _at_least(known: float | None, captured: float) -> float | None:
    """The join's `known`: a mapping the tables hold, at least the captured U's energy
    (none when the proof starts from nothing: U inf, as `ffm.map` runs it since Step 25)."""
    if known is None or math.isinf(captured):
        return known
    return max(known, captured)


def prove(path: Path, bound: float | None = None, phases: bool = False) -> None:
    """The captured proof run again from what it started from (the same U and tables), as
    `ffm.map` runs it: policies of `ffm.budgets` compared on one start.
    `bound` (pJ) replaces the captured U: what the proof would cost from a better start
    (a what-if: no mapping of that energy need be in the tables)."""
    from ffm.search import search
    from proof import report

    workload, arch, captured, results, constraints, time_limit, workers = pickle.load(open(path, "rb"))
    bound = captured if bound is None else bound
    # `known` is the energy of a mapping the tables hold: the captured U's, not a what-if's
    join_tables = lambda tabs, name, known: search(tabs, workload, arch, "energy",  # noqa: E731
                                                   known=_at_least(known, captured))

    print(f"captured proof: U {bound:.6g} pJ, {time_limit} s per Einsum")
    log = timed_phases() if phases else None
    start = time.perf_counter()
    _, _, p = budgets.prove_energy(workload, arch, bound, results, constraints, time_limit, workers, False,
                                   join_tables)
    print(f"replayed proof: {time.perf_counter() - start:.1f} s, {'proven' if p.proven else 'NOT proven'}, "
          f"{p.bound:.6g} pJ")
    report(p)
    if log is not None:
        totals: dict[str, float] = {}
        for phase, what, at, seconds in log:
            print(f"  {at:7.1f} s  {seconds:6.2f} s  {phase} {what}")
            totals[phase] = totals.get(phase, 0.0) + seconds
        print("  wall by phase: " + ", ".join(f"{k} {v:.1f} s" for k, v in totals.items()))


def keys(path: Path, wildcard: str | None, top: int) -> None:
    """Each keyed search of `wildcard` in the captured refinement, alone and fresh."""
    args, _, _ = pickle.load(open(path, "rb"))
    workload, arch, results, budgets_, wildcards, bound, constraints = args[:7]
    e = wildcard or wildcards[0]
    tables = {x: r[0] for x, r in results.items()}
    others = sum(budgets_[w] for w in wildcards if w != e)
    rest = refine_module.rest_by_key(workload, arch, tables, wildcards, e,
                                     bound * (1 - refine_module.RTOL) - sum(budgets_[w] for w in wildcards))
    betas = {k: bound - r - others for k, r in rest.items() if bound - r - others > budgets_[e]}
    base = (constraints or {}).get(e) or Constraints()
    runs = []
    for k, beta in betas.items():
        start = time.perf_counter()
        table, _, stats = generate_by_prefixes(e, workload, arch, replace(base, tensor_keys=dict(k)), ("energy",),
                                               None, beta)
        runs.append((time.perf_counter() - start, k, beta, len(table), stats.tile_shapes))
    runs.sort(key=lambda x: -x[0])
    total = sum(x[0] for x in runs)
    print(f"{e}: {len(runs)} keys, {total:.1f} s one by one; the costliest 10 {sum(x[0] for x in runs[:10]):.1f} s, "
          f"50 {sum(x[0] for x in runs[:50]):.1f} s; the others {total - sum(x[0] for x in runs[:50]):.1f} s")
    for low, high in ((0, 100), (100, 10_000), (10_000, None)):  # where the time is: a few heavy keys, or many light
        some = [x for x in runs if x[4] >= low and (high is None or x[4] < high)]
        print(f"  building {low:,}{f' to {high:,}' if high else ' or more'} partial rows: {len(some)} keys, "
              f"{sum(x[0] for x in some):.1f} s, {sum(x[3] == 0 for x in some)} empty")
    for sec, k, beta, n, built in runs[:top]:
        print(f"  {sec:.2f} s, beta {beta / budgets_[e]:.3f} x budget, {n} kept, {built:,} partial rows: {k}")


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
    r.add_argument("--cut-back", nargs=2, metavar=("EINSUM", "FACTOR"))
    p = sub.add_parser("prove")
    p.add_argument("dir", type=Path)
    p.add_argument("--bound", type=float, help="U in pJ instead of the captured one (a what-if)")
    p.add_argument("--phases", action="store_true", help="wall seconds per search step, bound and refinement")
    k = sub.add_parser("keys")
    k.add_argument("dir", type=Path)
    k.add_argument("n", type=int)
    k.add_argument("--wildcard")
    k.add_argument("--top", type=int, default=15)
    a = parser.parse_args()
    if a.what == "capture":
        capture(a.dir, [f for f in a.flags if f != "--"])
    elif a.what == "prove":
        sys.path.insert(0, str(Path(__file__).parent))
        prove(a.dir / "proof.pkl", a.bound, a.phases)
    elif a.what == "keys":
        keys(a.dir / f"refine{a.n:02d}.pkl", a.wildcard, a.top)
    else:
        cut = None if a.cut_back is None else (a.cut_back[0], float(a.cut_back[1]))
        replay(a.dir / f"refine{a.n:02d}.pkl", a.time_limit, a.fresh, a.retry, a.workers, cut)


if __name__ == "__main__":
    main()
