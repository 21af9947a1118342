"""The text report of a MapResult: looptree's evaluation report of the chosen mapping (totals,
what stays on chip, per-Einsum and per-level/tensor energy, peak usage, the LoopTree), the
pareto frontier when asked for, and what the mapper did."""
from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from ffm.budgets import Proof
from ffm.descent import Descent
from ffm.edp_proof import EdpProof
from ffm.pareto_proof import BoxRun, ParetoProof
from ffm.latency_proof import FloorsProof, LatencyProof
from ffm.mapper import MapResult, MapStats
from looptree.render import edp_text, energy_text, report_text, time_text


def frontier_text(result: MapResult) -> str:
    """One line per frontier point (by increasing energy); * marks the lowest EDP."""
    top = result.arch.memories[0].name
    end = ("; proven exact" if result.stats.complete else
           "; point 0 is the proven energy optimum" if result.stats.energy_end else "")
    lines = [f"Energy-latency frontier ({len(result.evaluations)} points; * = lowest EDP, reported below{end}):",
             f"  {'#':>3} {'energy':>12}{'latency':>12}{'EDP':>14}  kept on chip"]
    for k, ev in enumerate(result.evaluations):
        mark = "*" if k == result.best_index else " "
        fused = ", ".join(ev.fused_tensors) or f"nothing (all through {top})"
        lines.append(f"{mark} {k:>3} {energy_text(ev.energy_pJ):>12}{time_text(ev.latency_s):>12}"
                     f"{edp_text(ev.edp):>14}  {fused}")
    return "\n".join(lines)


def statistics_text(stats: MapStats, bounds: Sequence[str] = ()) -> str:
    """pmapgen per Einsum, partial mappings kept per join step, seconds per phase, then the
    energy proof, the `bounds` lines (`bound_lines`) and whether the result is exact."""
    lines = ["Mapper statistics:"]
    kept_after = dict(stats.join_steps)
    if stats.pmapgen:
        lines.append(f"  {'Einsum':<14}{'templates':>11}{'tile shapes':>13}{'pmappings kept':>16}{'seconds':>9}"
                     f"{'kept after join':>17}")
    else:
        lines.append("  pmapgen: not run (" + ("the latency set at the bound gave the result, below)"
                                               if stats.latency_proof is not None and stats.latency_proof.met else
                                               "the energy proof at the latency floors gave the result, below)"
                                               if stats.objective == "latency" and stats.floors is not None
                                               and stats.floors.met else
                                               "the EDP proof gave the result, below)"
                                               if stats.edp_proof is not None and stats.edp_proof.proven else
                                               "the pareto proof gave the frontier, below)"
                                               if stats.pareto_proof is not None and stats.pareto_proof.proven else
                                               "the energy proof ran first and completed; its searches are below)"))
        lines.append("  partial mappings kept after each join step: "
                     + ", ".join(f"{e} {k:,}" for e, k in stats.join_steps))
    for e, s in stats.pmapgen.items():
        joined = f"{kept_after[e]:,}" if e in kept_after else "-"
        note = "" if s.complete else f"  ({s.stopped_by}: not exhaustive)"  # the proof may still complete
        lines.append(f"  {e:<14}{s.templates:>11,}{s.tile_shapes:>13,}{s.kept:>16,}{s.seconds:>9.2f}"
                     f"{joined:>17}{note}")
    lines.append("  time: " + ", ".join(f"{phase} {sec:.2f} s" for phase, sec in stats.seconds.items()))
    edp_proven = stats.edp_proof is not None and stats.edp_proof.proven
    if stats.objective != "energy" and (stats.proof is not None or stats.descent) and not edp_proven:
        join = {"pareto": "the frontier's join"}.get(stats.objective, f"the {stats.objective} join")
        lines += textwrap.wrap(f"The energy objective's flow ran first: what the energy proof and coordinate descent "
                               f"below say is about the least energy found, not this result; {join} then searched "
                               f"every table they found (docs/mapper.md, \"Time limit\").", 100,
                               initial_indent="  ", subsequent_indent="    ")
    if stats.floors is not None:
        lines += floors_proof_lines(stats.floors, stats.objective, stats.edp_proof is not None)
    if stats.edp_proof is not None:
        lines += edp_proof_lines(stats.edp_proof)
    if stats.pareto_proof is not None:
        lines += pareto_proof_lines(stats.pareto_proof)
    if stats.latency_proof is not None:
        lines += latency_proof_lines(stats.latency_proof)
    for d in stats.descent:  # after the proof, when it ran and could not complete (`ffm.map`)
        lines += descent_lines(d, "the join" if stats.proof is None else "the energy proof")
    if stats.proof is not None:
        # a descent after the proof lowered `Proof.bound` further (`ffm.map`): the proof's own
        # best is where that descent started
        lines += proof_lines(stats.proof, stats.descent[0].before if stats.descent else None,
                             {"pareto": "the frontier's lowest-energy point",
                              "edp": "the least energy found",
                              "latency": "the least energy found"}.get(stats.objective, "the result"))
    lines += bounds
    if not stats.complete and stats.objective == "pareto":
        lines += textwrap.wrap("WARNING: pmapgen was cut short; the frontier is exact over the pmappings found, not "
                               "over the mapspace" + ("" if not stats.energy_end else
                                                      " (its lowest-energy point is the energy optimum: the energy "
                                                      "proof completed)"),
                               100, initial_indent="  ", subsequent_indent="    ")
    elif not stats.complete:
        lines.append("  WARNING: pmapgen was cut short; the result is the best found, not provably optimal")
    return "\n".join(lines)


def cut_text(stats, what: str = "") -> str:
    """How many of these searches' Stats were cut short, and by which limit (time, or their
    waiting rows: `Stats.stopped_by`), as "N{what} cut short by the time limit"; "" if
    none was."""
    by: dict[str, int] = {}
    for s in stats:
        if not s.complete:
            by[s.stopped_by] = by.get(s.stopped_by, 0) + 1
    n = sum(by.values())
    if not n:
        return ""
    if len(by) == 1:
        (limit,) = by
        return f"{n}{what} cut short" + (f" by the {limit}" if limit else "")
    return f"{n}{what} cut short, " + " and ".join(f"{k} by the {limit or 'deadline'}" for limit, k in by.items())


def floors_proof_lines(fp: FloorsProof, objective: str, edp_proof: bool = False) -> list[str]:
    """What the energy proof at the latency floors (`ffm.latency_proof.prove_at_floors`, run
    first for latency, EDP and pareto) gave: the least energy at the latency bound, a
    mapping at the bound, no mapping at it, or nothing found."""
    what = (f"Energy proof at the latency floors (every Einsum held to its own latency floor, so every mapping "
            f"found takes the bound, {time_text(fp.bound)})")
    used = {"latency": "it is the result, and nothing else ran",
            "pareto": "it is the frontier's least-latency point",
            "edp": "the EDP proof below started from it" if edp_proof else
            "the EDP join took its tables too"}[objective]
    if fp.least:
        text = (f"{what}: complete in {fp.seconds:.1f} s. Its least-energy mapping, "
                f"{energy_text(float(fp.found.best['energy'].iloc[0]))}, is the least energy of every mapping "
                f"at the bound, which no mapping beats for latency: {used}.")
    elif fp.met:
        text = (f"{what}: not complete after {fp.seconds:.1f} s, but it found a mapping at the bound "
                f"({energy_text(float(fp.found.best['energy'].iloc[0]))}, perhaps not the least energy there): "
                f"{used}.")
    elif fp.above:
        why = (f"{', '.join(fp.proof.incomplete)} has no pmapping within its floor" if fp.proof.incomplete else
               "its tables, complete, join to no mapping")
        text = f"{what}: {why}, so every mapping takes longer than {time_text(fp.bound)} ({fp.seconds:.1f} s)."
    else:
        text = f"{what}: found no mapping in {fp.seconds:.1f} s; not proven that none exists."
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def edp_proof_lines(ep: EdpProof) -> list[str]:
    """What the EDP proof (`ffm.edp_proof`, run for EDP after the energy proof) gave: each
    energy proof of its sweep, and whether it proves the candidate optimal."""
    what = (f"EDP proof (a mapping beating the candidate's {edp_text(ep.value)} takes less than "
            f"{time_text(ep.latency_max)}, that over the energy bound {energy_text(ep.energy_low)}; the energy "
            f"proof with every Einsum within its latency floor plus the slack up to h bounds the energy of every "
            f"mapping of latency at most h)")
    steps = "; ".join(f"at most {time_text(s.high)}: at least {energy_text(s.energy)}, so no better EDP from "
                      f"{time_text(min(s.closed(ep.value), s.high))}" for s in ep.steps)
    done = f"{len(ep.steps)} step(s) in {ep.seconds:.1f} s" + (f" ({steps})" if steps else "")
    text = (f"{what}: {done}, down to the latency bound: no mapping has a lower EDP, so the result is optimal."
            if ep.proven else f"{what}: {done}; it stopped short of the latency bound: not proven.")
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def box_text(run: BoxRun) -> str:
    """One box of the pareto proof: its corner, how many known points it was widened past,
    and the frontier points found inside it with its seconds (or that it was cut short)."""
    widened = f" (widened past {run.widened} known point{'' if run.widened == 1 else 's'})" if run.widened else ""
    joint = f" in one run with {run.joint - 1} other box{'' if run.joint == 2 else 'es'}" if run.joint > 1 else ""
    done = (f"{run.points} point{'' if run.points == 1 else 's'}, {run.seconds:.1f} s{joint}" if run.complete
            else f"cut short after {run.seconds:.1f} s{joint}")
    return f"at most {energy_text(run.box.energy)} and below {time_text(run.box.latency)}{widened}: {done}"


def pareto_proof_lines(pp: ParetoProof) -> list[str]:
    """What the pareto proof (`ffm.pareto_proof`, run for pareto after the energy proof) gave:
    each box it searched, and whether the frontier is proven exact."""
    what = ("Pareto proof (from the least-latency end, every mapping no known point dominates lies in a box "
            "{energy at most the last known point's, latency below the next's, or a later one's while the Einsums' minima "
            "within it stay the same}; complete tables over each box, joined, hold every Pareto-optimal mapping in it)")
    boxes = "; ".join(box_text(r) for r in pp.runs)
    done = f"{len(pp.runs)} box{'' if len(pp.runs) == 1 else 'es'} in {pp.seconds:.1f} s" + (f" ({boxes})" if boxes else "")
    text = (f"{what}: {done}, up to the energy optimum: the frontier is exact." if pp.proven else
            f"{what}: {done}; stopped ({pp.reason}): the frontier is not proven.")
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def latency_proof_lines(lp: LatencyProof) -> list[str]:
    """What the latency set at the bound (`ffm.latency_proof`, run first for latency) gave:
    the result proven, every mapping proven slower than the bound, or the set cut short."""
    what = (f"Latency set at the bound (each Einsum's pmappings within {time_text(lp.bound)} minus the other "
            f"Einsums' floors, each input held to the c_T its producer's table gives it)")
    kept = "; pmappings kept: " + ", ".join(f"{e} {st.kept:,}" for e, (_, _, st) in lp.tables.items())
    if lp.met and lp.early:
        text = (f"{what}: stopped after {lp.seconds:.1f} s, as soon as the rows of the roots searched so far "
                f"joined to a mapping at the bound{kept.replace('kept', 'kept by then')}. No mapping is faster: the "
                f"result is optimal, and the time-limited flow did not run.")
    elif lp.met:
        text = (f"{what}: complete in {lp.seconds:.1f} s{kept}. Its join found a mapping at the bound, so no "
                f"mapping is faster: the result is optimal, and the time-limited flow did not run.")
    elif lp.above:
        text = (f"{what}: complete in {lp.seconds:.1f} s{kept}. Its join found no mapping within the bound: "
                f"every mapping takes longer than {time_text(lp.bound)}. The time-limited flow found the result.")
    else:
        cut = cut_text((st for _, _, st in lp.tables.values()), " Einsums")
        text = (f"{what}: not complete after {lp.seconds:.1f} s ({cut or 'none cut short'}: "
                f"{', '.join(lp.cut_short)}). The time-limited flow found the result.")
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def descent_lines(d: Descent, when: str) -> list[str]:
    """What coordinate descent (ffm.descent) after `when` did: the energy before and after."""
    within = [r for r in d.rounds if r.fused is None]
    searched = sum(len(r.stats) for r in within)
    cut = cut_text(s for r in within for s in r.stats.values())
    rounds = f"{len(within)} round{'s' if len(within) != 1 else ''}"
    head = (f"  Coordinate descent after {when} ({rounds}, {searched} search{'es' if searched != 1 else ''} of an "
            f"Einsum within its "
            f"compatibility group" + (f", {cut}" if cut else "")
            + (f"; {len(d.skipped)} skipped, whose groups could lower it by at most "
               f"{energy_text(max(0.0, sum(d.skipped.values())))} in all" if d.skipped else ""))
    previous = d.before
    for r in d.rounds:
        if r.fused is not None:
            cut = cut_text(r.stats.values())
            chain_cut = cut_text(r.chain.values(), " of these")
            notes = ([f"its accesses at the top cost {energy_text(r.top)}"] if r.top is not None else []) \
                + ([cut] if cut else [])
            head += (f"; a fusion move searched {', '.join(r.stats)} with {r.fused} on chip"
                     + (f" ({'; '.join(notes)})" if notes else "")
                     + (f", then searched {r.anchor} for its least energy with it on chip and chained from there"
                        + (f" through {', '.join(e for e in r.chain if e != r.anchor)} (the c_T they share fixed)"
                           if len(r.chain) > 1 else "")
                        + (f" ({chain_cut})" if chain_cut else "")
                        if r.chain else "") + ": "
                     + ("no valid mapping had it on chip" if r.trial is None else
                        f"the best mapping with it on chip was {energy_text(r.trial)}"
                        + (f" after {len(r.inner.rounds)} round{'s' if len(r.inner.rounds) != 1 else ''} "
                           f"within its groups" if r.inner.rounds else
                           f" (no round within its groups: {len(r.inner.skipped)} of its Einsums were near their "
                           f"groups' floors, the others' groups searched before)"))
                     + (f"; the best mapping then became {energy_text(r.energy)}" if r.energy < previous else
                        "; nothing lower"))
        previous = r.energy
    head += (f", {d.seconds:.1f} s): " + (f"lowered the best mapping from {energy_text(d.before)} to "
                                         f"{energy_text(d.after)}." if d.after < d.before else
                                         f"found nothing below {energy_text(d.before)}."))
    return textwrap.wrap(head, 100, initial_indent="  ", subsequent_indent="    ")


def _least_term_text(proof: Proof) -> str:
    """What holds the bound down: the least term's wildcards count at their budgets, and
    the other Einsums' tables join without their constraints; raises alone close that
    term only once the wildcards' budgets reach the best mapping minus that join."""
    if not proof.least_term or not proof.least_term[0] or not proof.budgets:
        return ""
    wild, rest = proof.least_term
    need = proof.bound - rest
    done = [r for r in proof.refinements if r.wildcards == wild]
    if done:
        r = done[-1]
        return (f" Its least term, with {', '.join(wild)} above {'its' if len(wild) == 1 else 'their'} budget"
                f"{'s' * (len(wild) > 1)}, was refined by searching {'it' if len(wild) == 1 else 'them'} on demand "
                f"to {energy_text(rest + sum(proof.budgets[e] for e in wild))}, but {r.cut} of its {r.keys} keyed "
                f"searches were cut short{' even when retried with the time left' if r.retry else ''}.")
    if len(wild) == 1:
        (e,) = wild
        times = f" ({need / proof.minima[e]:.2f} times its minimum)" if proof.minima.get(e) else ""
        return (f" Its least term counts {e} at its budget, {energy_text(proof.budgets[e])}, and joins the other "
                f"Einsums' tables, free of {e}'s constraints, at {energy_text(rest)}: raising budgets closes that "
                f"term only once {e}'s reaches {energy_text(need)}{times}.")
    have = sum(proof.budgets[e] for e in wild)
    return (f" Its least term counts {', '.join(wild)} at their budgets "
            f"({', '.join(energy_text(proof.budgets[e]) for e in wild)}) and joins the other Einsums' tables, free "
            f"of their constraints, at {energy_text(rest)}: raising budgets closes that term only once theirs add "
            f"up to {energy_text(need)} (now {energy_text(have)}).")


def proof_lines(proof: Proof, reached: float | None = None, subject: str = "the result") -> list[str]:
    """What the energy proof (ffm.budgets) established: per Einsum its minimum, the budget
    its table reached, and the partial pmappings its searches built and their seconds, for
    the minima and all raises together. `reached`: the best mapping the proof itself found,
    when a descent after it lowered `proof.bound` further (default `proof.bound`).
    `subject`: what `proof.bound` is the energy of, for the closing "within" line."""
    raises = proof.steps[1:]
    if proof.proven:
        head = (f"  Energy proof: complete. Each Einsum's table holds every pmapping within its budget, and the "
                f"wildcard bound over them (ffm.wildcards: the least, over sets of Einsums above their budgets, of "
                f"those budgets plus the joins of the others' tables) reached the best mapping's energy, "
                f"{energy_text(proof.bound)}, after {len(raises)} raise{'s' * (len(raises) != 1)} of budgets: no "
                f"mapping is better.")
    else:
        skipped = [e for e in proof.incomplete if e not in proof.cut_short]
        last = proof.steps[-1][1] if proof.steps else {}
        by_limit: dict[str, list[str]] = {}
        for e in proof.cut_short:
            by_limit.setdefault(last[e].stopped_by, []).append(e)
        what = ("; ".join(f"the budgeted search{'es' * (len(es) > 1)} of {', '.join(es)} "
                          f"{'were' if len(es) > 1 else 'was'} cut short by {'their' if len(es) > 1 else 'its'} {limit}"
                          for limit, es in by_limit.items())
                if proof.cut_short else "the raises ran out of time")
        last_refined = proof.refinements[-1] if proof.refinements else None
        if last_refined and proof.least_term and last_refined.wildcards == proof.least_term[0]:
            what = (f"the keyed searches refining the bound's least term ({', '.join(last_refined.wildcards)} above "
                    f"budget) were cut short or ran out of time ({last_refined.cut} of {last_refined.keys})")
        elif last_refined:  # with refinements, the only other stop is the deadline
            what = "the raises and refinements ran out of time"
        basis = ("the wildcard bound over the tables complete within the budgets reached" if proof.budgets else
                 "the sum of each Einsum's minimum where found, else a lower bound on it")
        head = (f"  Energy proof: incomplete. {what[0].upper() + what[1:]}"
                + (f" ({', '.join(skipped)} not started)" if skipped else "")
                + f"; the best mapping found is {energy_text(proof.bound)}. The optimum is at "
                f"least {energy_text(proof.lower)} ({basis}).")
        head += _least_term_text(proof)
    if proof.refinements:
        rs = proof.refinements
        n = len(rs)
        head += (f" {n} term{'s' * (n > 1)} of the bound {'were' if n > 1 else 'was'} refined by searching "
                 f"{'their' if n > 1 else 'its'} wildcards on demand, within the keys the other Einsums' tables give "
                 f"them (ffm.refine): {sum(r.keys for r in rs)} keyed searches"
                 + (f" ({reused} answered by earlier refinements' searches)" if (reused := sum(r.reused for r in rs))
                    else "")
                 + f", {sum(r.empty for r in rs)} of them "
                 f"with no pmapping, {sum(r.cut for r in rs)} cut short or not started"
                 + (f" ({by_rows} by their row limit)" if (by_rows := sum(r.by_rows for r in rs)) else "")
                 + f", {sum(r.seconds for r in rs):.1f} s"
                 + (f"; {retries} of these refinements retried a standing term's searches cut short, split by root"
                    if (retries := sum(r.retry for r in rs)) else "")
                 + (f"; in {keyed} a wildcard was keyed by the rows of another it reads" if (keyed := sum(
                     bool(r.absorbed) for r in rs)) else "") + ".")
    own = proof.bound if reached is None else reached
    if math.isfinite(proof.found) and proof.found > own:  # (infinite: the proof ran first, `ffm.map`)
        head += (f" The proof lowered the best mapping from {energy_text(proof.found)} to "
                 f"{energy_text(own)} (its first join, of each Einsum's least-energy pmappings together with "
                 f"those found before; or a join over the raised tables or a refinement's keyed rows).")
    lines = textwrap.wrap(head.strip(), 100, initial_indent="  ", subsequent_indent="    ")
    if not proof.proven and proof.lower > 0:
        lines.append(f"    So {subject} is within {proof.bound / proof.lower:.2f}x of the optimum.")
    lines.append(f"    {'Einsum':<14}{'minimum':>12}{'budget':>12}{'minima: rows':>18}{'s':>8}"
                 f"{'raises':>8}{'rows':>14}{'s':>8}")
    for e in dict.fromkeys(e for _, stats in proof.steps for e in stats):
        low = energy_text(proof.minima[e]) if e in proof.minima else "-"
        budget = energy_text(proof.budgets[e]) if e in proof.budgets else "-"
        line = f"    {e:<14}{low:>12}{budget:>12}"
        first = proof.steps[0][1].get(e) if proof.steps else None
        line += f"{first.tile_shapes:>18,}{first.seconds:>8.2f}" if first else f"{'-':>18}{'-':>8}"
        mine = [stats[e] for _, stats in raises if e in stats]
        line += (f"{len(mine):>8}{sum(s.tile_shapes for s in mine):>14,}{sum(s.seconds for s in mine):>8.2f}"
                 if mine else f"{'-':>8}{'-':>14}{'-':>8}")
        searches = ([first] if first else []) + mine
        # a raise cut short is tried again, smaller, or the proof goes on by refining terms;
        # only an incomplete proof's last search cut short is what stopped it
        final = not proof.proven and not proof.refinements and bool(searches) and not searches[-1].complete
        retried = sum(not s.complete for s in (searches[:-1] if final else searches))
        again = ", retried smaller" if not proof.refinements else ""
        note = ([f"{retried} raise{'s' * (retried > 1)} cut short{again}"] if retried else []) + \
            ([f"cut short: {searches[-1].stopped_by}"] if final else [])
        lines.append(line + (f" ({'; '.join(note)})" if note else ""))
    return lines


BOUND_BASIS = ("each Einsum's operations at the full rate of every compute instance its unit has, or its "
               "workload inputs' and outputs' traffic through the top level at its bandwidth, whichever is "
               "longer, summed: ffm.latency_bound")


def bound_lines(result: MapResult) -> list[str]:
    """Latency, EDP and pareto results not known exact: how far from the optimum the latency
    lower bound (`MapStats.latency_lower`), times the energy proof's for EDP, puts them."""
    stats = result.stats
    if stats.latency_lower is None or stats.exhaustive or stats.latency_lower <= 0:
        return []
    low = stats.latency_lower
    at_least = f"Latency bound: no mapping takes less than {time_text(low)} ({BOUND_BASIS})"
    if stats.objective == "latency":
        text = (f"{at_least}. The result's latency meets it: the result is optimal." if stats.bound_reached else
                f"{at_least}. So the result is within {result.evaluation.latency_s / low:.2f}x of the optimum.")
    elif stats.objective == "pareto":
        least = min(ev.latency_s for ev in result.evaluations)
        text = (f"{at_least}. The frontier's least latency, {time_text(least)}, "
                + ("meets it: that point is the latency optimum." if stats.bound_reached else
                   f"is within {least / low:.2f}x of the latency optimum."))
    else:
        proof, edp = stats.proof, result.evaluation.edp
        text = f"{at_least}." if proof is None or proof.lower <= 0 else (
            f"{at_least}. EDP bound: no mapping's EDP is below {edp_text(proof.lower * low)} (the energy "
            f"proof's bound, {energy_text(proof.lower)}, times that latency bound): "
            + ("the result meets it: it is optimal." if stats.bound_reached else
               f"the result is within {edp / (proof.lower * low):.3f}x of it, and the EDP proof above shows it "
               f"optimal." if stats.complete else
               f"the result is within {edp / (proof.lower * low):.2f}x of the optimum."))
    return textwrap.wrap(text, 100, initial_indent="  ", subsequent_indent="    ")


def result_text(result: MapResult) -> str:
    """The whole report: frontier (pareto only), the chosen mapping's report, statistics."""
    w, a = result.workload, result.arch
    parts = []
    if result.objective == "pareto":
        parts += [frontier_text(result), ""]
        title = f"{w.name} on {a.name}: lowest-EDP point of the energy-latency frontier (mapspace {result.mapspace})"
    else:
        found = "optimal" if result.stats.complete else "best found (not provably optimal)"
        title = f"{w.name} on {a.name}: {found} for {result.objective} (mapspace {result.mapspace})"
    parts += [report_text(result.evaluation, w, a, title), "", statistics_text(result.stats, bound_lines(result))]
    return "\n".join(parts)
