"""pmapgen speed on gpt3 / tpuv4i: per Einsum, templates, tile shapes evaluated, pmappings
kept, seconds and peak memory, at batch 1 / 2048 tokens and at FFM's batch 64 / 4096.

    python benchmarks/pmapgen_speed.py [--time-limit 60] [--einsums Q QK ...] [--shapes 1]
    python benchmarks/pmapgen_speed.py --prefixes [--budget-factor 1.0 [--rising]] [--objectives energy]
    python benchmarks/pmapgen_speed.py --prefixes --slack-of 125.64 --objectives energy --shapes 0 [--uniform-slack]
    python benchmarks/pmapgen_speed.py --prefixes --slack-of 6.768170170311773 --objectives latency --shapes 0 [--uniform-slack]

`--prefixes` runs the exact prefix search (`pmapgen.prefixes`) instead of the template
enumeration: its "templates" column counts structural prefixes processed and "tile
shapes" the partial rows built. `--budget-factor F` first runs the enumeration (same time
limit) for the lowest energy E it finds, then the prefix search keeping only pmappings
within F x E (`pmapgen.bounds`; the table then holds the frontier under that budget).
`--rising` makes F x E a ceiling: budgets rise from the Einsum's energy floor by 10% until
one keeps a pmapping (`generate_by_rising_budgets`); the status then gives the minimum
found (or the lower bound proven when the time limit stops it) and the final budget.
`--rising` alone (no `--budget-factor`) rises with no ceiling, as the energy proof's
first step does, and skips the enumeration: each Einsum's exact minimum in seconds,
`--prefixes --rising --objectives energy --shapes 0`.
`--budget-mj B` gives the prefix search a fixed budget of B mJ instead (no enumeration
first): e.g. the energy proof's raises, whose memory is the partial rows waiting at once,
`--prefixes --budget-mj 3.33 --objectives energy --shapes 0 --einsums QK --time-limit 45`
(QK at 1.26 times its minimum, docs/pmapgen.md, "Waiting rows' constant columns").

`--slack-of U` (with `--prefixes` and `--objectives energy`; U in mJ, at least the energy of
a valid mapping, e.g. 125.64 at batch 1, where the proven optimum is 125.63920) prints
issue 3's set for energy: tables holding every pmapping that could be part of a mapping of
energy at most U, so every pmapping an energy-optimal mapping could use (`ffm.slack`). It
first finds every minimum (as `--rising`), then runs `ffm.slack.slack_tables`: each Einsum
within its uniform budget (U minus the other Einsums' minima) up to a search size (the
probe: `--probe`, default `ffm.slack.PROBE`), then those the probe did not complete per key
their producers' tables give their inputs, in topological order. `--uniform-slack` runs every Einsum within its uniform budget instead
(`ffm.slack.slack_budgets`; far slower). The searches run in worker processes, identical
Einsums once: the peak memory column is the largest worker's so far, and the total wall
is both steps'. E.g. `--prefixes --slack-of 125.64 --objectives energy --shapes 0`.
`--slack-of auto` takes U from `ffm.map`'s energy result first (at batch 1, its proven
optimum in about 35 s), and prints how long that took.

`--slack-of U --objectives energy --at-floors` holds every Einsum to its latency floor
throughout: at batch 1, where the latency optimum is the bound (the floors' sum), every
pmapping of every latency-optimal mapping of energy at most U, so with U the least energy
there (127.29 mJ; `auto` takes it from `ffm.map --objective latency`) every pmapping a
least-energy latency optimum could use (docs/pmapgen.md, "The latency floors and the
Pareto set at batch 1"). E.g. `--prefixes --slack-of 127.2904 --objectives energy
--at-floors --shapes 0`.

`--pareto-set` (with `--prefixes`) prints the set for the energy-latency frontier: every
pmapping of every Pareto-optimal mapping, up to dominance within compatibility groups. It
runs the energy proof at the latency floors and the energy proof (`ffm.latency_proof`,
`ffm.budgets`; the frontier's two ends), then the pareto proof (`ffm.pareto_proof`),
whose boxes' tables, complete, are that set: each box's line, then each Einsum's rows
over all the boxes (docs/pmapgen.md, "The Pareto set as boxes"), and the searches'
occupancy of the ends' and of the boxes' wall. E.g. `--prefixes --pareto-set --shapes 0`.
The boxes are searched in one run (`prove_pareto`'s `at_once`); `--sweep` searches them one
after another, as before the hundred-and-first session.

`--slack-of U --objectives latency` (U in ms, the latency of a valid mapping) prints the
same set for latency: every Einsum within U minus the other Einsums' latency floors
(`ffm.slack.latency_slack_budgets`, `Constraints.latency_budget`; docs/pmapgen.md,
"Latency budgets"). At batch 1 the latency optimum is the bound, 6.768170170311773 ms
(docs/mapper.md, "Step 35"), so every Einsum's budget is its floor: give U in full.
Each input is held to the c_T its producer's table gives it, root by root: a root starts
once its producers' roots at its levels have ended (`ffm.slack.latency_slack_tables`;
docs/pmapgen.md, "Producers' keys" and "Roots as a graph"), the time limit per root;
`--sub-parts M` searches each root backing every held input at the top or the outermost on-chip
level as M sub-parts by fused structure (`latency_slack_tables`' `sub_parts`; default
`ffm.slack.LATENCY_SUB_PARTS`, 1: every root whole).
`--uniform-slack` runs every Einsum at once without (the sixty-ninth session's runs),
split by root across the workers, and no root starts once the time limit times the
Einsums per worker has passed (an Einsum none of whose roots started prints as not
started); with `--whole` each Einsum's search runs in one worker, the time limit per
Einsum (the sixty-fourth session's runs).

Otherwise each Einsum runs in this process, one after another (peak memory is the process's peak
so far). An Einsum stopped by the time limit is reported as INCOMPLETE: its table is not
exhaustive. Identical Einsums (K and V) are generated once and renamed in `generate_all`;
here every Einsum is timed on its own.
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import time

import arch as arch_specs
import ffm
import workloads
from ffm.budgets import PROOF_ROWS, prove_energy
from ffm.latency_bound import einsum_latency_floor
from ffm.latency_proof import floor_constraints, prove_at_floors
from ffm.pareto_proof import frontier_points, prove_pareto
from ffm.report import box_text
from ffm.consumers import complete_within
from ffm.slack import (LATENCY_SUB_PARTS, PROBE, PROBE_WAITING, latency_slack_budgets, latency_slack_tables,
                       slack_budgets, slack_tables)
from pmapgen import Constraints, generate, generate_all
from pmapgen.all_einsums import union
from pmapgen.constraints import with_latency
from pmapgen.prefixes import generate_by_prefixes, generate_by_rising_budgets
from pmapgen.timeline import idle, occupancy, recording

SHAPES = (("batch 1, 2048 tokens", {"batch": 1, "seq_len": 2048}),
          ("batch 64, 4096 tokens (FFM)", {"batch": 64, "seq_len": 4096}))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def mapper_bound(w, a, objective: str = "energy") -> float:
    """`--slack-of auto`: U (pJ) is the energy of `ffm.map`'s result, run as `python -m ffm.map`
    runs it (60 s per Einsum, its energy proof first; with `--at-floors`, the latency
    objective's result: the least energy at the latency bound, from the floors proof)."""
    start = time.perf_counter()
    got = ffm.map(w, a, objective=objective, progress=False, time_limit=60.0)
    energy = got.evaluation.energy_pJ
    print(f"U from ffm.map: {energy / 1e9:.6f} mJ ({'proven optimal' if got.stats.complete else 'not proven'}) "
          f"in {time.perf_counter() - start:.1f} s, this process {peak_mib():.0f} MiB")
    return energy


def occupancy_line(o) -> None:
    """Where the wall time of a run of searches went (`pmapgen.timeline.occupancy`): the
    searches' seconds over the cores, and the stretches with no search, or one, running."""
    cores = os.cpu_count() or 1
    print(f"searches {o.busy:.1f} s of {cores} x {o.wall:.1f} s wall ({o.busy / (cores * o.wall):.0%}); "
          f"no search running {o.none:.1f} s, one {o.one:.1f} s, more {o.more:.1f} s")


IDLE_SHOWN = 0.1  # seconds: the stretches with no search running that `idle_line` names


def search_einsum(label, names) -> str | None:
    """The Einsum of `names` a `run_searches` job's label is of: the label itself, or its
    first item's (keyed searches: ((Einsum, key), part, sub-part)); None if it names none
    (the latency set's jobs are labelled by their searches' name-free signatures)."""
    while isinstance(label, tuple) and label:
        label = label[0]
    return label if label in names else None


def idle_line(spans, start: float, end: float, names) -> None:
    """The stretches of at least IDLE_SHOWN seconds with no search running
    (`pmapgen.timeline.idle`), each named by the Einsum whose search came next where its
    label says: the main process's work between Einsums (rests, key budgets) that the
    occupancy line sums."""
    def before(s) -> str:
        e = None if s.next is None else search_einsum(s.next, names)
        return "the end" if s.next is None else f"{e}'s search" if e else "a search"
    shown = [f"{s.end - s.start:.2f} s before {before(s)} (at {s.start - start:.1f} s)"
             for s in idle(spans, start, end, IDLE_SHOWN)]
    print(f"no search running for {IDLE_SHOWN:g} s or more: {'; '.join(shown) or 'never'}")


def slack_run(w, a, bound: float, einsums, objectives, time_limit: float, uniform: bool,
              floors: bool = False, probe: int = PROBE, probe_waiting: int | None = PROBE_WAITING) -> None:
    """`--slack-of`: every minimum, then every Einsum's table within its slack budgets:
    keyed (`ffm.slack.slack_tables`), or uniform (`--uniform-slack`); with `floors`
    (`--at-floors`), every Einsum held to its latency floor throughout."""
    start = time.perf_counter()
    constraints = floor_constraints(w, a) if floors else None
    objectives = with_latency(objectives, *(constraints or {}).values())
    minima = generate_all(w, a, constraints, objectives=objectives, budgets={e: math.inf for e in w.einsum_names},
                          rising=True, progress=False, time_limit=time_limit)
    lows = {e: float(r[0]["energy"].min()) if len(r[0]) and r[2].complete else None for e, r in minima.items()}
    took = time.perf_counter() - start
    print(f"minima: {took:.1f} s wall, sum {sum(x or 0 for x in lows.values()) / 1e9:.4f} mJ")
    if None in lows.values():
        print("a minimum was not found within the time limit: no slack budgets")
        return
    budgets = slack_budgets(lows, bound)
    start = time.perf_counter()
    if uniform:
        found = generate_all(w, a, constraints, objectives=objectives, budgets=budgets, progress=False,
                             time_limit=time_limit, einsums=tuple(einsums))
        how = {e: "" for e in found}
    else:
        keyed = slack_tables(w, a, bound, lows, constraints, time_limit=time_limit, max_rows=PROOF_ROWS, probe=probe,
                             probe_waiting=probe_waiting, minima_tables=complete_within(minima),
                             deadline=start + time_limit * len(w.einsum_names))  # the Einsums' limits together
        found = {e: r for e, r in keyed.results.items() if e in einsums}
        how = {e: "; uniform budget" if e in keyed.uniform else
               f"; {keyed.keys[e]} keys, {keyed.searches[e]} searches (rest {keyed.rest_seconds[e]:.1f} s)"
               for e in found}
    wall = time.perf_counter() - start
    if not uniform:
        print(f"uniform budgets first (the probe, {keyed.probe_seconds:.1f} s wall): complete for "
              f"{', '.join(keyed.uniform) or 'none'}; the others keyed")
    for e, (_, _, st) in found.items():
        slack_row(e, st, "a keyed search cut short", f"minimum {lows[e] / 1e9:.4g} mJ, uniform budget "
                  f"{budgets[e] / 1e9:.4g} mJ ({budgets[e] / lows[e]:.3f}x){how[e]}")
    print(f"slack searches {wall:.1f} s wall; minima and slack searches {took + wall:.1f} s, largest worker "
          f"{children_peak_mib():.0f} MiB, this process {peak_mib():.0f} MiB")


def slack_row(e: str, st, cut: str, budget: str) -> None:
    """One Einsum's line of a `--slack-of` run: the columns, its status (`cut`: what to call a
    search cut short by no limit), then what it was held to."""
    status = "complete" if st.complete else f"INCOMPLETE ({st.stopped_by or cut})"
    print(f"{e:<12}{st.templates:>11}{st.tile_shapes:>13}{st.kept:>8}{st.seconds:>9.1f}{children_peak_mib():>10.0f}  "
          f"{status}; {budget}", flush=True)


def latency_slack_run(w, a, bound: float, einsums, time_limit: float, whole: bool = False,
                      uniform: bool = False, sub_parts: int = LATENCY_SUB_PARTS) -> None:
    """`--slack-of` with `--objectives latency`: every Einsum's table within its latency
    budget (`ffm.slack.latency_slack_budgets`: U minus the others' latency floors), with
    the proof's cap on waiting rows, each input held to the c_T its producer's table
    gives it, root by root as a graph (`ffm.slack.latency_slack_tables`), or with
    `uniform` all at once without: each search split by root across the workers with the
    time limit per root (`pmapgen.all_einsums.split_searches`), or with `whole` each in
    one worker with the time limit per Einsum."""
    budgets = latency_slack_budgets(w, a, bound)
    start = time.perf_counter()
    if uniform:
        found = generate_all(w, a, {e: Constraints(latency_budget=b) for e, b in budgets.items()},
                             objectives=("latency",), progress=False, time_limit=time_limit, einsums=tuple(einsums),
                             max_rows=PROOF_ROWS, split=not whole)
        keys: dict = {}
        skipped: dict = {}
    else:
        chained = latency_slack_tables(w, a, bound, time_limit=time_limit, max_rows=PROOF_ROWS,
                                       einsums=tuple(einsums), progress=True, sub_parts=sub_parts)
        found, keys, skipped = chained.results, chained.keys, chained.skipped
    wall = time.perf_counter() - start
    for e in einsums:
        floor = einsum_latency_floor(e, w, a)
        held = f"latency floor {floor * 1e3:.6g} ms, budget {budgets[e] * 1e3:.6g} ms ({budgets[e] / floor:.3f}x)"
        if keys.get(e):
            held += "; inputs held to their producers' c_T: " + "; ".join(
                f"{t} {len(cts)} ({', '.join(sorted({ct[0] for ct in cts})) or 'none'})" for t, cts in keys[e].items())
        if skipped.get(e):
            n = len(skipped[e])
            held += f"; {n} root{'s' if n > 1 else ''} given no c_T, not searched"
        if e not in found:  # (split: no part started before the set's deadline, `split_searches`)
            print(f"{e:<12}{'-':>11}{'-':>13}{'-':>8}{'-':>9}{'-':>10}  INCOMPLETE (not started); {held}")
            continue
        slack_row(e, found[e][2], "cut short", held)
    print(f"latency slack searches {wall:.1f} s wall, largest worker {children_peak_mib():.0f} MiB, "
          f"this process {peak_mib():.0f} MiB")


def pareto_set_run(w, a, time_limit: float, sweep: bool = False) -> None:
    """`--pareto-set`: the frontier's ends (the floors proof, the energy proof), then the
    pareto proof's boxes, each a `slack_tables` run within its latency budgets; the rows
    every box kept, per Einsum; where the ends' and the boxes' wall went (`occupancy_line`)."""
    start = time.perf_counter()
    with recording() as timeline:
        floors = prove_at_floors(w, a, None, time_limit)
        tables, _, proof = prove_energy(w, a, math.inf, {}, None, time_limit, None, False)
        ends = time.perf_counter() - start
        print(f"ends: floors proof {floors.seconds:.1f} s ({'complete' if floors.least else 'NOT complete'}), energy "
              f"proof {ends - floors.seconds:.1f} s ({'complete' if proof.proven else 'NOT complete'})")
        print("ends: ", end="")
        occupancy_line(occupancy(timeline.spans, start, start + ends))
        if not (floors.met and proof.proven):
            print("an end is not proven: no pareto proof")
            return
        seed = union(tables, floors.tables)
        pp = prove_pareto(w, a, None, seed, proof.lower, time_limit, at_once=not sweep)
    boxes = occupancy(timeline.spans, start + ends, time.perf_counter())
    for r in pp.runs:
        print(f"box: {box_text(r)}")
    print("boxes: ", end="")
    occupancy_line(boxes)
    seeded = {e: len(t) for e, (t, _, _) in seed.items()}
    for e, (t, _, _) in pp.tables.items():
        print(f"{e:<12}{'-':>11}{'-':>13}{len(t) - seeded[e]:>8}{'-':>9}{children_peak_mib():>10.0f}  "
              f"{'complete' if pp.proven else 'INCOMPLETE'}; rows over every box (the ends' tables apart)")
    points = ", ".join(f"{e / 1e9:.6g} mJ at {lat * 1e3:.6g} ms" for e, lat in frontier_points(pp.found))
    print(f"frontier {'proven exact' if pp.proven else 'NOT proven (' + pp.reason + ')'}: {points}")
    print(f"pareto set {pp.seconds:.1f} s wall (boxes), {time.perf_counter() - start:.1f} s with the ends; "
          f"largest worker {children_peak_mib():.0f} MiB, this process {peak_mib():.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per Einsum (default 60)")
    parser.add_argument("--einsums", nargs="*", help="only these Einsums")
    parser.add_argument("--shapes", nargs="*", type=int, choices=range(len(SHAPES)), default=range(len(SHAPES)),
                        help="which shapes: 0 batch 1 / 2048, 1 batch 64 / 4096 (default both)")
    parser.add_argument("--prefixes", action="store_true", help="run the exact prefix search")
    parser.add_argument("--budget-factor", type=float, help="with --prefixes: energy budget, times the enumeration's best")
    parser.add_argument("--rising", action="store_true",
                        help="with --prefixes: budgets rise from the floor (to --budget-factor's ceiling, if given)")
    parser.add_argument("--budget-mj", type=float, help="with --prefixes: a fixed energy budget in mJ")
    parser.add_argument("--objectives", default="energy,latency", help="comma-separated (default energy,latency)")
    parser.add_argument("--slack-of", metavar="U",
                        help="with --prefixes: every pmapping of every mapping of energy at most U (mJ, or 'auto': "
                             "the energy of ffm.map's result), or, with --objectives latency, of latency at most "
                             "U (ms); see above")
    parser.add_argument("--whole", action="store_true",
                        help="with --uniform-slack and --objectives latency: each Einsum's search whole in one "
                             "worker, the time limit per Einsum (default: split by root, the time limit per root)")
    parser.add_argument("--sub-parts", type=int, default=LATENCY_SUB_PARTS,
                        help="with --slack-of and --objectives latency: each root backing every held input at the "
                             "top or the outermost on-chip level searched as this many sub-parts by fused structure "
                             f"(ffm.slack.LATENCY_SUB_PARTS, default {LATENCY_SUB_PARTS}; 1: every root whole)")
    parser.add_argument("--at-floors", action="store_true",
                        help="with --slack-of and --objectives energy: every Einsum held to its latency floor, so "
                             "every pmapping of every mapping at the latency bound within U ('auto': the least "
                             "energy there, from ffm.map --objective latency)")
    parser.add_argument("--sweep", action="store_true",
                        help="with --pareto-set: the pareto proof's boxes one after another, not in one run "
                             "(`prove_pareto`'s at_once False)")
    parser.add_argument("--pareto-set", action="store_true",
                        help="with --prefixes: every pmapping of every Pareto-optimal mapping (energy and latency), "
                             "from the frontier's ends and the pareto proof's boxes; see above")
    parser.add_argument("--probe", type=int, default=PROBE,
                        help=f"with --slack-of and --objectives energy: the probe's search size (ffm.slack.PROBE, "
                             f"default {PROBE}; 0: every Einsum keyed)")
    parser.add_argument("--probe-waiting", type=int, default=PROBE_WAITING,
                        help=f"with --slack-of and --objectives energy: the most keys a probe search may hold waiting "
                             f"(ffm.slack.PROBE_WAITING, default {PROBE_WAITING}; 0: no such limit)")
    parser.add_argument("--uniform-slack", action="store_true",
                        help="with --slack-of: every Einsum within its uniform budget (energy: no keys; "
                             "latency: no producers' c_T)")
    args = parser.parse_args()
    if args.pareto_set and (not args.prefixes or args.slack_of is not None):
        parser.error("--pareto-set needs --prefixes, and no --slack-of")
    if args.slack_of is not None and not args.prefixes:
        parser.error("--slack-of needs --prefixes")
    if args.whole and (not args.uniform_slack or args.objectives != "latency"):
        parser.error("--whole is for --uniform-slack with --objectives latency")
    if args.uniform_slack and args.slack_of is None:
        parser.error("--uniform-slack needs --slack-of")
    if args.slack_of is not None and args.objectives not in ("energy", "latency"):
        parser.error("--slack-of is for one objective: give --objectives energy or --objectives latency")
    if args.at_floors and (args.slack_of is None or args.objectives != "energy"):
        parser.error("--at-floors is for --slack-of with --objectives energy")
    if args.slack_of == "auto" and args.objectives != "energy":
        parser.error("--slack-of auto takes U from ffm.map's energy result: give U in ms for latency")
    objectives = tuple(args.objectives.split(","))
    a = arch_specs.load("tpuv4i")
    for label, variables in (SHAPES[k] for k in args.shapes):
        w = workloads.load("gpt3", **variables)
        how = "prefix search" if args.prefixes else "template enumeration"
        per = "root" if args.slack_of is not None and objectives == ("latency",) and not args.whole else "Einsum"
        floors = ", every Einsum at its latency floor" if args.at_floors else ""
        print(f"\ngpt3 on tpuv4i, {label}; {how}, objectives {args.objectives}{floors}; time limit "
              f"{args.time_limit:g} s per {per}")
        print(f"{'Einsum':<12}{'templates':>11}{'tile shapes':>13}{'kept':>8}{'seconds':>9}{'peak MiB':>10}  status")
        if args.pareto_set:
            pareto_set_run(w, a, args.time_limit, args.sweep)
            continue
        if args.slack_of is not None:
            if objectives == ("latency",):
                with recording() as timeline:
                    start = time.perf_counter()
                    latency_slack_run(w, a, float(args.slack_of) * 1e-3, args.einsums or w.einsum_names,
                                      args.time_limit, args.whole, args.uniform_slack, args.sub_parts)
                end = time.perf_counter()
                occupancy_line(occupancy(timeline.spans, start, end))
                idle_line(timeline.spans, start, end, w.einsum_names)
            else:
                bound = (mapper_bound(w, a, "latency" if args.at_floors else "energy") if args.slack_of == "auto"
                         else float(args.slack_of) * 1e9)
                with recording() as timeline:
                    start = time.perf_counter()
                    slack_run(w, a, bound, args.einsums or w.einsum_names, objectives, args.time_limit,
                              args.uniform_slack, args.at_floors, args.probe, args.probe_waiting or None)
                end = time.perf_counter()
                occupancy_line(occupancy(timeline.spans, start, end))
                idle_line(timeline.spans, start, end, w.einsum_names)
            continue
        total = time.perf_counter()
        for e in args.einsums or w.einsum_names:
            budget = note = None
            if args.prefixes and args.budget_mj is not None:
                budget, note = args.budget_mj * 1e9, f"budget {args.budget_mj:g} mJ"
            if args.prefixes and args.budget_factor is not None:
                table, _, _ = generate(e, w, a, objectives=objectives, time_limit=args.time_limit)
                if len(table):  # (nothing found: no budget)
                    budget = args.budget_factor * float(table["energy"].min())
                    note = f"budget {budget / 1e9:.4g} mJ"
            if args.prefixes and args.rising and args.budget_factor is None:
                budget = math.inf  # (no ceiling: the rising ends at the first budget that keeps a pmapping)
            if args.prefixes and args.rising and budget is not None:
                table, _, st = generate_by_rising_budgets(e, w, a, budget, objectives=objectives,
                                                          time_limit=args.time_limit)
                note = (f"minimum {float(table['energy'].min()) / 1e9:.4g} mJ" if len(table)
                        else f"minimum >= {st.lower_bound / 1e9:.4g} mJ") + f", last budget {st.budget / 1e9:.4g} mJ"
            elif args.prefixes:
                _, _, st = generate_by_prefixes(e, w, a, objectives=objectives, time_limit=args.time_limit,
                                                budget=budget)
            else:
                _, _, st = generate(e, w, a, objectives=objectives, time_limit=args.time_limit)
            status = "complete" if st.complete else f"INCOMPLETE ({st.stopped_by})"
            print(f"{e:<12}{st.templates:>11}{st.tile_shapes:>13}{st.kept:>8}{st.seconds:>9.1f}{peak_mib():>10.0f}  "
                  f"{status}{'; ' + note if note else ''}", flush=True)
        print(f"total wall {time.perf_counter() - total:.1f} s")


if __name__ == "__main__":
    main()
