"""The product's main job, measured: gpt3 on tpuv4i at batch 1 / 2048 tokens and at FFM's
batch 64 / 4096 tokens, for the energy objective and the full energy-latency frontier.

    python benchmarks/gpt3_tpuv4i.py [--time-limit 60] [--proof-time 30] [--objectives energy pareto] [--shapes 0 1]
        [--contend N] [--latency-set 600]

Prints wall seconds (pmapgen, join, coordinate descent, energy proof, total), the process's peak memory,
energy, latency, what is fused, whether the result is the proven optimum (pmapgen
exhaustive, or the energy proof of ffm.budgets complete), and what each coordinate descent and
fusion move did. For pareto the row is the lowest-EDP point, then the frontier's size and
ends: its least energy (the proven optimum when the energy proof, which runs first for
pareto too, completed) and its least latency. EDP runs the same flow and says how
far the least energy it found is from the energy optimum. Latency and EDP say whether the result
meets its lower bound (`ffm.latency_bound`: then it is proven optimal) or how far from it
it can be; pareto says the same of its least latency. Latency, EDP and pareto run the
energy proof at the latency floors first (`ffm.latency_proof.prove_at_floors`), EDP
then the EDP proof (`ffm.edp_proof`), and pareto the pareto proof (`ffm.pareto_proof`:
"proven exact" when it closes); each says what it proved and in how long.
`--latency-set` is passed on (the latency set runs only without the floors proof). Target on a 2-core machine: the exact energy optimum at batch 1 / 2048 in under
60 s and 2 GiB, end to end.

`--contend N` runs each measurement beside N processes that do nothing but spin, each
taking a core's worth of CPU from it: a loaded machine, made on purpose and the same every
time, so the margin left under the target is measured instead of waited for (this
machine's slow hours come and go; docs/mapper.md, "Step 35").
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import resource
import time

import ffm
from ffm.latency_proof import LATENCY_SET_TIME
from ffm.report import descent_lines
from pmapgen.allocator import MAIN_THRESHOLD, mmap_threshold

SHAPES = (("batch 1, 2048 tokens", {"batch": 1, "seq_len": 2048}),
          ("batch 64, 4096 tokens (FFM)", {"batch": 64, "seq_len": 4096}))


def peak_mib() -> float:
    """Peak resident memory of this process and its finished children (the pmapgen pool)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def contending(n: int):
    """`n` processes spinning on the CPU while the block runs (`--contend`)."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in spinners:
        p.start()
    try:
        yield
    finally:
        for p in spinners:
            p.terminate()
            p.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="pmapgen seconds per Einsum (0: exhaustive)")
    parser.add_argument("--proof-time", type=float, default=30.0,
                        help="energy proof seconds per Einsum and step (0: no proof)")
    parser.add_argument("--objectives", nargs="*", default=["energy", "pareto"])
    parser.add_argument("--shapes", nargs="*", type=int, default=[0, 1],
                        help="which shapes: 0 = batch 1 / 2048, 1 = batch 64 / 4096")
    parser.add_argument("--contend", type=int, default=0, metavar="N",
                        help="run beside N processes spinning on the CPU (a loaded machine)")
    parser.add_argument("--latency-set", type=float, default=LATENCY_SET_TIME,
                        help="latency: wall seconds for the latency set at the bound, run first (0: not run)")
    args = parser.parse_args()
    if args.contend:
        print(f"each run beside {args.contend} process(es) spinning on the CPU")
    mmap_threshold(MAIN_THRESHOLD)  # as python -m ffm.map does
    print(f"{'shape':<28}{'objective':<10}{'pmapgen s':>10}{'join s':>8}{'descent s':>10}{'proof s':>8}{'total s':>9}"
          f"{'peak MiB':>10}"
          f"{'energy J':>11}{'latency s':>11}  fused / pmapgen")
    for label, variables in (SHAPES[k] for k in args.shapes):
        for objective in args.objectives:
            with contending(args.contend):
                start = time.perf_counter()
                r = ffm.map("gpt3", "tpuv4i", objective=objective, variables=variables, progress=False,
                            time_limit=args.time_limit or None, prove=args.proof_time > 0,
                            proof_time_limit=args.proof_time, latency_set_time=args.latency_set)
                wall = time.perf_counter() - start
            ev = r.evaluation
            proof = r.stats.proof
            edp_proven = r.stats.edp_proof is not None and r.stats.edp_proof.proven
            status = ("exhaustive (optimal)" if r.stats.exhaustive else "proven optimal (energy proof)"
                      if r.stats.complete and objective == "energy" else "proven optimal (the EDP proof)"
                      if edp_proven else "proven optimal (meets its lower bound: "
                      "ffm.latency_bound)" if r.stats.complete else "TIME LIMIT: not provably optimal" +
                      (f"; proof incomplete ({', '.join(proof.cut_short)} cut short), within "
                       f"{proof.bound / proof.lower:.2f}x of the optimum" if proof and proof.lower > 0
                       and not proof.proven else ""))
            if objective in ("latency", "edp") and not r.stats.complete:  # (the lower bound: ffm.latency_bound)
                low = r.stats.latency_lower * (proof.lower if objective == "edp" and proof is not None else 1.0)
                value = ev.latency_s if objective == "latency" else ev.edp
                status += f"; within {value / low:.2f}x of the optimum" if low > 0 else ""
            if (lp := r.stats.latency_proof) is not None:
                status += (f"; latency set {lp.seconds:.1f} s: " + (("met the bound, stopped early" if lp.early else "met the bound") if lp.met else
                           "complete, no mapping within the bound" if lp.above else
                           f"not complete ({', '.join(lp.cut_short)} cut short or not started)"))
            if objective == "edp" and proof is not None:  # (its proof is of the least energy, run first)
                status += (f"; least energy found {proof.bound / 1e12:.4g} J, "
                           + ("proven optimal" if proof.proven else f"within {proof.bound / proof.lower:.2f}x"))
            if objective == "pareto":  # the chosen point is the lowest-EDP one; the frontier's ends:
                low_e, low_t = r.evaluations[0], min(r.evaluations, key=lambda e: e.latency_s)
                end = ("proven optimal" if r.stats.energy_end else
                       f"within {proof.bound / proof.lower:.2f}x of the optimum" if proof and proof.lower > 0 else
                       "not proven")
                status = (f"{('exhaustive' if r.stats.exhaustive else 'proven exact') if r.stats.complete else 'TIME LIMIT'}"
                          f": {len(r.evaluations)} points, "
                          f"least energy {low_e.energy_pJ / 1e12:.4g} J ({end}) at {low_e.latency_s:.4g} s, "
                          f"least latency {low_t.latency_s:.4g} s at {low_t.energy_pJ / 1e12:.4g} J ("
                          + ("the latency optimum" if r.stats.bound_reached else
                             f"within {low_t.latency_s / r.stats.latency_lower:.2f}x of the optimum") + ")")
            if (fp := r.stats.floors) is not None:
                status += (f"; floors proof {fp.seconds:.1f} s: " + (
                    "the least energy at the bound" if fp.least else "a mapping at the bound" if fp.met else
                    "every mapping slower than the bound" if fp.above else "no mapping found"))
            if (pp := r.stats.pareto_proof) is not None:
                status += f"; pareto proof {pp.seconds:.1f} s, {len(pp.runs)} box(es): " + (
                    "the frontier proven exact" if pp.proven else f"not proven ({pp.reason})")
            if (ep := r.stats.edp_proof) is not None:
                status += f"; EDP proof {ep.seconds:.1f} s, {len(ep.steps)} step(s): " + (
                    "proven" if ep.proven else "not proven")
            # (energy: pmapgen and its join run only when the proof, which runs first, did not complete)
            print(f"{label:<28}{objective:<10}{r.stats.seconds.get('pmapgen', 0):>10.1f}"
                  f"{r.stats.seconds.get('join', 0):>8.1f}"
                  f"{r.stats.seconds.get('descent', 0):>10.1f}{r.stats.seconds.get('proof', 0):>8.1f}"
                  f"{wall:>9.1f}{peak_mib():>10.0f}{ev.energy_pJ / 1e12:>11.4g}{ev.latency_s:>11.4g}  "
                  f"{', '.join(ev.fused_tensors) or 'nothing'} / {status}", flush=True)
            if r.stats.descent:  # how each step after the join lowered the energy (the descent: after the proof)
                d = r.stats.descent[0]
                # (the proof's `found`: the seed's join, when the proof asked for one, else none)
                steps = [f"join {proof.found / 1e12:.4g} J"] if proof is not None and proof.found < float("inf") else []
                steps += [f"{'proof' if proof is not None else 'join'} {d.before / 1e12:.4g} J",
                          f"descent {d.after / 1e12:.4g} J"]
                print(f"{'':<38}best found after: " + ", ".join(steps), flush=True)
                print("\n".join(descent_lines(d, "the join" if proof is None else "the energy proof")), flush=True)


if __name__ == "__main__":
    main()
