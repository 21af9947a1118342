"""Energy budgets: proving a time-limited energy result optimal (docs/mapper.md, "Energy proof").

A valid mapping of energy U bounds the optimum, and energy is a sum over Einsums of
non-negative terms. So in any mapping of energy at most U, Einsum e's pmapping has energy
at most U - sum over the other Einsums o of min_o, where min_o is the lowest energy any
pmapping of o has. Budgeted prefix searches (`pmapgen.prefixes.generate_by_prefixes`,
which keeps the frontier of the pmappings within a budget) turn that into tables the
join can search exactly:

1. **minima**: each Einsum is searched with budgets rising from its energy floor until
   one keeps a pmapping, at most the lowest energy t_e of the pmappings found for it so
   far (a real pmapping's, so t_e >= min_e: the frontier within it holds a lowest-energy
   pmapping; `pmapgen.prefixes.generate_by_rising_budgets`; no ceiling when the proof
   runs first, from no mapping: `ffm.map`, forty-fifth session). The join over these tables
   together with the pmappings found before is the best mapping made of either; it may
   lower U, and it is kept as the result even if the proof then cannot complete. Every
   Einsum runs even when one hits the time limit: a search cut short still bounds its
   minimum from below (`Stats.lower_bound`), and the sum of the minima and those bounds
   bounds the optimum (`Proof.lower`).
2. **raises** (seventeenth session): step 1's tables are complete within their budgets
   b_e, so the wildcard bound (`ffm.wildcards`) bounds the optimum from below: the least,
   over sets W of Einsums allowed above their budgets, of their budgets plus the joins of
   the rest's tables. Its least term's W names the budgets to raise; each raise searches
   those Einsums again within a larger budget (`raise_step`), until the bound reaches U.
   The join over all tables is one of the terms, so a better mapping found on the way
   lowers U and becomes the result. A raise's searches run split by root across the
   cores (`pmapgen.all_einsums.split_searches`; twenty-seventh session): a raise is
   often one long search.

3. **refinements** (twenty-third session, `ffm.refine`): a term of the bound counts its
   wildcards at their budgets and lets them join anything; refining it searches each
   wildcard on demand, per key the other Einsums' tables give its inputs, within what U
   leaves there. Most keys no pmapping can give, and the search that shows it is quick,
   so this closes terms no raise can reach (at batch 1, QK's: raises would need its
   budget at 1.66 times its minimum). A refinement is tried when the least term is
   within NEAR_U of U (`near_u`, thirty-third session), when it is one wildcard that
   the largest raise would not close in one step while U is within FAR_GAP of its
   budget above it (`far_from_raises`), when the last raise of
   one of its wildcards took more than SLOW_RAISE of the time limit (twenty-eighth
   session: a search's cost grows steeply with its budget, and at such budgets the
   terms have few keys left) while U is within FAR_GAP of its least wildcard budget
   above it (`slow_raise`), and for every least term once the raises stop (one cut
   short with no smaller raise to try, or their time, the Einsums' time limits
   together, spent; refinements may go on REFINE_SHARE of that longer). A least term
   refined before, whose keyed searches were cut short, is raised instead while raises
   go on; once they stopped it is refined once more (twenty-ninth session): the searches
   that completed before answer from `searched`, and those cut short run again split by
   root across the cores (`refine`'s `retry`) with all the time left before the
   deadline. A term still standing after that ends the proof incomplete. The
   refinements share their
   complete keyed searches (`searched`):
   a term refined again after a raise searches only the keys whose budget rose
   (twenty-fourth session). Up to OVERLAP terms are refined at once, the next least term
   beside those running (forty-eighth session, docs/mapper.md "Step 28").

When the bound reaches U, no mapping is below U: the U mapping is the exact optimum. A
raise cut short (its time limit, or PROOF_ROWS waiting rows) is tried again at half its
share (nineteenth session: a search's cost grows steeply with its budget, so a smaller
raise may complete where a larger one did not); the Einsums of that step that completed
keep their raised tables. Once a raise at less than MIN_RAISE would be needed, or the
step's own limit (the Einsums' time limits together) is reached, the proof stops
incomplete with the bound reached as `Proof.lower`. The
uniform budgets of the sixth session (every Einsum within U minus the other Einsums'
minima) are what the raises reach at worst; raising only the budgets that stand in the
way is what lets the proof complete at batch 1 (docs/mapper.md, "Energy proof").
"""
from __future__ import annotations

import math
import time
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.search import SearchResult, search
from ffm.refine import Refinement, refine
from ffm.wildcards import WildcardBound
from pmapgen import Constraints, Stats, generate_all
from pmapgen.all_einsums import Workers, union
from pmapgen.constraints import with_latency
from pmapgen.generate import held_within
from pmapgen.prefixes import energy_lower_bound
from pmapgen.turn import TURN
from workloads.model import Workload

RTOL = 1e-9  # budgets equal up to summation order
MIN_RAISE = 0.01  # a raised budget grows by at least this share (`raise_step`) ...
# ... and at most this one. A search's cost grows steeply with its budget (at batch 1 the
# first raise took 9.3, 22.7 and 108.3 s at 5, 10 and 20%), but 10% reaches tables whose
# join holds the optimum sooner, and refinements (`near_u`) close the terms from there:
# the batch-1 proof replayed from one start, 239 s at 10% against 499 s at 5%
MAX_RAISE = 0.1
REFINE_SHARE = 0.5  # refinements may go on past the raises' time by this share of it
# a single wildcard is refined before raises close it only while U is at most this share
# of its budget above its term: at batch 1, QK's at 0.30 closed in 34 s; at over 8 (U 150 mJ,
# the optimum 125.6) 7,418 of its 9,216 keyed searches were cut short after 825 s
FAR_GAP = 0.5
# any term is refined before it is raised once U is within this share of U above it: at
# batch 1 with 10% raises, (I, QK) and (QK_softmax, AV) at 0.55% and 0.38% were raised,
# each cut short after 60 s, then refined in 2.3 and 0.6 s
NEAR_U = 0.01
# terms refined at once (`prove_energy`'s `overlap`): the refinements left a core idle while
# one long keyed search ran, and the main process's joins between them left both idle
OVERLAP = 2
SLOW_RAISE = 0.5  # a raise this share of its time limit long: refine the next term holding its Einsums (`slow_raise`)
# a raise's or a refinement's keyed search stops (cut short) once this many partial rows wait
# (about 1 GB at batch 1); without it, a keyed search at batch 64 reached 7.50 GB (38th session)
PROOF_ROWS = 1 << 22


@dataclass(frozen=True)
class Proof:
    """What the energy proof did. `bound` is U (the best found, or the step-1 join's if
    lower; `ffm.map` lowers it to what its coordinate descent after an incomplete proof
    finds) and `lower` a lower bound on the optimum, so the best found is within
    bound / lower of it; `minima` (per Einsum, pJ) holds the exact minima found, `budgets`
    the budgets step 2 reached (set once every minimum is known); `incomplete` names the
    Einsums whose search was cut short (its time limit, or PROOF_ROWS) or
    whose raise did not start (the step's time was up); `steps` holds each step run as
    (name, {einsum: Stats})."""
    bound: float
    lower: float = 0.0  # a lower bound on the optimum: each Einsum's minimum where known, else a bound on it
    minima: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)
    incomplete: tuple[str, ...] = ()
    steps: tuple[tuple[str, dict[str, Stats]], ...] = ()
    seconds: float = 0.0
    # the best mapping's energy before the proof (`bound` is lower if the proof found better); inf when
    # it ran first, from no mapping (`ffm.map`), until its seed was asked for one
    found: float = 0.0
    # the last wildcard bound's least term: its wildcards and the joins of the other
    # Einsums' tables (pJ; `ffm.wildcards.Bound.rest`); None: step 2 did not run
    least_term: tuple[tuple[str, ...], float] | None = None
    refinements: tuple[Refinement, ...] = ()  # the terms refined by on-demand searches (`ffm.refine`), in order

    @property
    def proven(self) -> bool:
        return bool(self.budgets) and not self.incomplete

    @property
    def cut_short(self) -> tuple[str, ...]:
        """The Einsums whose last budgeted search a limit stopped (its `Stats.stopped_by`;
        the rest of `incomplete` did not start)."""
        last = self.steps[-1][1] if self.steps else {}
        return tuple(e for e in self.incomplete if e in last and not last[e].complete)


def raise_step(budget: float, gap: float, most: float = MAX_RAISE) -> float:
    """How much a wildcard's budget rises: `gap` (U minus its term's value: enough for
    that term to reach U), but at least MIN_RAISE and at most `most` (MAX_RAISE, or half
    the Einsum's last raise cut short) of the budget (a search costs more, steeply, the
    looser its budget)."""
    return min(budget * most, max(gap, budget * MIN_RAISE))


def raise_to(asked: float, held: float, gap: float, most: float) -> float:
    """The budget a raise searches at: `raise_step` above the budget the Einsum's last search
    was run at (`asked`), enough to close `gap` (U minus its term, which counts the Einsum at
    `held`: what that search's table is complete within, `generate.held_within`), and at
    least MIN_RAISE past `held`. Raising from `held` instead made larger, costlier raises
    wherever the search proved a little more than it was asked: at batch 64, whose raises
    are cut short by the time limit, more of them were (docs/mapper.md, "Step 31")."""
    return max(asked + raise_step(asked, held + gap - asked, most), held * (1 + MIN_RAISE))


def prove_energy(workload: Workload, arch: Arch, bound: float, found: dict[str, tuple],
                 constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
                 workers: int | None = None, progress: bool = True,
                 join_tables: Callable[[dict[str, pd.DataFrame], str, float | None], SearchResult] | None = None,
                 seed: Callable[[], tuple[dict[str, tuple], float]] | None = None, overlap: int = OVERLAP,
                 raise_after_cut: bool = True):
    """(results, best, Proof): `best` is the best mapping the proof's tables gave (a
    SearchResult over `results`, `generate_all`-style): the exact energy optimum when
    `Proof.proven`; otherwise the join of step 1's tables together with `found`'s when it
    beats `bound`; else both are None. `found` holds the pmappings found so far
    (`generate_all`-style, per Einsum (table, templates, stats)), `bound` the energy of a
    valid mapping made of their rows. `join_tables(tables, name, known)` runs a join (default:
    `ffm.search.search` for energy with `known`: the energy of a mapping the tables hold,
    None for none), so a caller can show progress.

    `found` may be empty and `bound` infinite (`ffm.map` proves first: docs/mapper.md,
    "Step 25"): the minima's searches then rise without a ceiling, and the raises go on
    without U (a raise's size does not depend on it while U is far) until a join of the
    proof's tables finds a mapping. If the raises stop before one does, `seed()` gives
    (found, bound) as above (`ffm.map`: its time-limited pmapgen and the join of its
    tables), once, to refine against. An Einsum with no pmapping at all ends the proof at
    once, incomplete, with an infinite lower bound.

    Up to `overlap` terms are refined at once (docs/mapper.md, "Step 28"): while one
    refinement waits on its keyed searches, the next least term (the bound without the
    terms being refined) is refined beside it. Every other step waits for them first.

    `raise_after_cut` False: while no mapping is known (U infinite), the first raise cut
    short ends the raises, and so, without `seed`, the proof (`ffm.latency_proof.
    prove_at_floors`: at gpt3 batch 64 its raises after the first one cut short found no
    mapping in 250 s; docs/mapper.md, "Step 61")."""
    start, given = time.perf_counter(), bound
    order = tuple(workload.einsum_names)
    steps = []
    join_tables = join_tables or (lambda tabs, name, known: search(tabs, workload, arch, "energy", known=known))

    costs: dict[str, tuple[int, ...]] = {}  # each Einsum's last search: prefixes per part (`Stats.parts`)
    objectives = with_latency(("energy",), *(constraints or {}).values())  # (latency budgets: `ffm.latency_proof`)

    def run(budgets: dict[str, float], name: str, stop: bool, rising: bool = False, einsums: tuple = order,
            max_rows: int | None = None):
        # each Einsum's parts in a raise start most costly first, by its last search (`split_searches`)
        res = generate_all(workload, arch, constraints, objectives=objectives, workers=workers, progress=progress,
                           time_limit=time_limit, budgets=budgets, stop_when_incomplete=stop, desc=f"proof: {name}",
                           rising=rising, einsums=einsums, max_rows=max_rows, costs=costs)
        steps.append((name, {e: r[2] for e, r in res.items()}))
        costs.update({e: r[2].parts for e, r in res.items() if r[2].parts})
        return res, tuple(e for e in einsums if e not in res or not res[e][2].complete)

    def proof(minima: dict[str, float], bound: float, lower: float | None = None, **kwargs) -> Proof:
        first = steps[0][1] if steps else {}
        # a rising search's bound already includes the energy floor it started from
        if lower is None:
            lower = sum(minima[e] if e in minima else first[e].lower_bound if e in first else
                        energy_lower_bound(e, workload, arch, (constraints or {}).get(e)) for e in order)
        return Proof(bound, lower, minima, steps=tuple(steps), seconds=time.perf_counter() - start, found=given,
                     **kwargs)

    # each minimum's ceiling: the least energy found (a real pmapping's), none if nothing was
    lowest = {e: float(found[e][0]["energy"].min()) if e in found and len(found[e][0]) else math.inf
              for e in order}
    res, incomplete = run(lowest, "minima", stop=False, rising=True)
    done = [e for e in order if e not in incomplete]
    none = tuple(e for e in done if res[e][0].empty)  # only without a ceiling: no pmapping at all
    if none:
        return None, None, proof({}, bound, math.inf, incomplete=none)
    minima = {e: float(res[e][0]["energy"].min()) for e in done}

    def join_found(found: dict, bound: float, tables: dict, name: str):
        # the best mapping of pmappings found so far or by the proof's searches (at first each
        # Einsum's least-energy ones): it may lower U even when the proof cannot complete
        both = union(found, tables) if found else tables
        joined = join_tables({e: r[0] for e, r in both.items()}, name,
                             None if math.isinf(bound) else bound)  # found's U mapping
        if not joined.best.empty and float(joined.best["energy"].iloc[0]) < bound:
            return float(joined.best["energy"].iloc[0]), (both, joined)
        return bound, None

    bound, best = join_found(found, bound, res, "join (proof: minima)")
    if incomplete:
        return *(best or (None, None)), proof(minima, bound, incomplete=incomplete)
    # step 2: raise the budgets the wildcard bound points at until it reaches U
    tables = dict(res)
    budgets = {e: held_within(res[e][2]) for e in order}  # step 1's tables: the frontiers within these
    asked = {e: res[e][2].budget for e in order}  # what each Einsum's last search was run at (`raise_to`)
    wild = WildcardBound(workload, arch, progress=progress)
    # the raises may take every Einsum's time limit, the refinements (`ffm.refine`) a share more
    raises_until = None if time_limit is None else time.perf_counter() + len(order) * time_limit
    deadline = None if time_limit is None else raises_until + len(order) * time_limit * REFINE_SHARE
    most = {e: MAX_RAISE for e in order}  # the largest share a raise may add: half the last one cut short
    refinements: list[Refinement] = []
    searched: dict = {}  # the refinements' complete keyed searches, which later ones reuse (`ffm.refine.refine`)
    closers: set[str] = set()  # wildcards whose keys alone closed a term: later terms search them first
    raising = True  # False once a raise was cut short with no smaller one to try
    raise_seconds: dict[str, float] = {}  # each Einsum's last raise: its step's wall seconds, at most its search's
    retried: set[tuple[str, ...]] = set()  # terms refined again once raises stopped (`refine`'s `retry`)

    def stop(b, **kwargs):
        # the bound's terms speak of the mappings below U (a refined or ceiling-cut term at
        # U or more says only that none is there), so the optimum is at least min(lower, U)
        return *(best or (None, None)), proof(minima, bound, min(b.lower, bound), budgets=budgets,
                                              least_term=(b.wildcards, b.rest), refinements=tuple(refinements),
                                              **kwargs)

    # the refinements' keyed searches run in workers kept from one refinement to the next (their
    # caches warm), closed before each raise: a raise's long searches get fresh ones. Up to
    # `overlap` terms are refined at once, each in a thread taking the turn (`pmapgen.turn`)
    pending: dict[tuple[str, ...], Future] = {}  # wildcards: the refinement of their term running now

    def took(r: Refinement, better) -> None:
        nonlocal bound, best
        refinements.append(r)
        wild.refine(r.wildcards, r.value)
        if better is not None and float(better[1].best["energy"].iloc[0]) < bound:  # (U may have fallen since)
            bound, best = float(better[1].best["energy"].iloc[0]), better

    def settle(until: str | None = FIRST_COMPLETED) -> None:
        """Take in the refinements done, after waiting for one of those running
        (FIRST_COMPLETED) or all (ALL_COMPLETED); None: without waiting."""
        if pending and until is not None:
            with TURN.away():
                wait(list(pending.values()), return_when=until)
        for w in [w for w, f in pending.items() if f.done()]:
            took(*pending.pop(w).result())

    def refining(*args, **kwargs):
        with TURN.take():
            return refine(*args, **kwargs)

    with Workers(workers) as kept, ThreadPoolExecutor(max(1, overlap)) as threads, TURN.take():
        while True:
            settle(None)
            b = wild.bound({e: tables[e][0] for e in order}, budgets, bound, skip=frozenset(pending))
            full = None if b.full is None or b.full.best.empty else float(b.full.best["energy"].iloc[0])
            if full is not None and full < bound * (1 - RTOL):
                bound, best = full, (dict(tables), b.full)
            # every path below but a refinement's start needs the terms running settled first
            if b.lower >= bound * (1 - RTOL):
                if pending:
                    settle()
                    continue
                return stop(b)
            late = deadline is not None and time.perf_counter() > deadline
            if not b.wildcards or late:
                if pending:
                    settle(ALL_COMPLETED)
                    continue
                return stop(b, incomplete=b.wildcards or order)
            if raises_until is not None and time.perf_counter() > raises_until:
                raising = False
            if math.isinf(bound) and not raising:  # no mapping yet to refine against: the seed's, once
                if pending:
                    settle(ALL_COMPLETED)
                    continue
                if seed is None:
                    return stop(b, incomplete=b.wildcards or order)
                found, given = seed()
                seed = None
                # U: the seed's mapping, or a better one joined from its rows and the proof's tables
                bound, joined = join_found(found, given, tables, "join (proof: seed)")
                best = joined or best
                if math.isinf(bound):
                    return stop(b, incomplete=b.wildcards or order)
                continue
            slow = slow_raise(b, bound, budgets, raise_seconds, time_limit)
            if not raising or slow or near_u(b, bound) or far_from_raises(b, bound, budgets, most):
                fresh = not wild.refined(b.wildcards)
                # a term refined before stands once raises stopped (its searches were cut short),
                # unless it was not yet retried: those searches again, split, with the time left
                retry = not fresh and not raising and b.wildcards not in retried and deadline is not None \
                    and time.perf_counter() < deadline
                if fresh or retry:
                    if len(pending) >= overlap:
                        settle()
                        continue
                    if retry:
                        retried.add(b.wildcards)
                    limit = deadline - time.perf_counter() if retry else time_limit
                    args = (workload, arch, tables, budgets, b.wildcards, bound, constraints, limit, deadline, workers,
                            progress, searched)
                    kwargs = dict(retry=retry, max_rows=PROOF_ROWS, kept=kept, closers=closers)
                    if overlap > 1:
                        pending[b.wildcards] = TURN.let(lambda: threads.submit(refining, *args, **kwargs))
                    else:
                        took(*refine(*args, **kwargs))
                    continue
                if not raising:  # refined (and retried) with searches cut short, and no raise left: it stands
                    if pending:
                        settle(ALL_COMPLETED)
                        continue
                    return stop(b, incomplete=b.wildcards)
            if pending:  # a raise changes the tables the refinements running read
                settle(ALL_COMPLETED)
                continue
            raised = {e: raise_to(asked[e], budgets[e], bound - b.term, most[e]) for e in b.wildcards}
            began = time.perf_counter()
            kept.close()
            got, incomplete = run(raised, f"raise {len(steps)}", stop=True, einsums=b.wildcards,
                                  max_rows=PROOF_ROWS)
            wall = time.perf_counter() - began  # a step's Einsums share it: each is charged at most its own search's
            raise_seconds.update({e: min(wall, got[e][2].seconds) if e in got else wall for e in b.wildcards})
            for e in b.wildcards:
                if e not in incomplete:  # complete within its raised budget, whatever the others did
                    wild.forget(e, budgets[e])
                    # (at least the raised budget: up to the least floor its search cut, `held_within`)
                    tables[e], budgets[e], asked[e] = got[e], held_within(got[e][2]), got[e][2].budget
            cut = [e for e in incomplete if e in got]  # (the rest did not start: stop_when_incomplete)
            for e in cut:  # half the share that was cut short (not of the cap: a gap-sized raise would repeat)
                # (of the held budget: a raise held at MIN_RAISE past it, cut short, ends the raising)
                most[e] = (raised[e] - budgets[e]) / budgets[e] / 2
            if incomplete and (not cut or any(most[e] < MIN_RAISE for e in cut)):  # no smaller raise to try
                raising = False
            if cut and not raise_after_cut and math.isinf(bound):
                raising = False


def near_u(b, bound: float) -> bool:
    """Is U within NEAR_U of the bound's least term? Then the term is refined before it is
    raised, whatever its wildcards: each keyed search runs within its wildcard's budget
    plus that gap, narrow once U is near, and a refinement of a term whose wildcards'
    keys were searched before answers from them, where a raise searches every key again
    within a wider budget (thirty-third session)."""
    return bool(b.wildcards) and math.isfinite(bound) and bound - b.term <= bound * NEAR_U


def slow_raise(b, bound: float, budgets: dict[str, float], seconds: dict[str, float],
               time_limit: float | None) -> bool:
    """Did the last raise of one of the bound's least term's wildcards take more than
    SLOW_RAISE of the time limit (`seconds`: its step's wall time, at most its own
    search's)? Then the term is refined instead of raised again (twenty-eighth session),
    but only while U is at most FAR_GAP of its least wildcard budget above the term: each
    keyed search of a wildcard runs within its budget plus that gap, and with a loose U
    (1.8 times the optimum, thirty-fourth session) a term of four wildcards made 9,330
    keyed searches, 7,626 of them cut short, in 866 s and 5.4 GB."""
    if time_limit is None or not any(seconds.get(e, 0.0) > SLOW_RAISE * time_limit for e in b.wildcards):
        return False
    return bound - b.term <= FAR_GAP * min(budgets[e] for e in b.wildcards)


def far_from_raises(b, bound: float, budgets: dict[str, float], most: dict[str, float]) -> bool:
    """Is the bound's least term one wildcard that raises would close only after several
    steps (its gap to U over the largest raise)? Then refining it (`ffm.refine`) is tried
    first: its keyed searches are far more constrained than a raise's. But not while the
    gap is more than FAR_GAP of its budget: U is then far above the bound (a loose U,
    before the tables hold a good mapping), and keyed searches within budgets that wide
    cost more than the raises they would replace (thirty-third session)."""
    if len(b.wildcards) != 1:
        return False
    (e,) = b.wildcards
    return budgets[e] * most[e] < bound - b.term <= budgets[e] * FAR_GAP
