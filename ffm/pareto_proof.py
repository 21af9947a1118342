"""The pareto proof: an energy-latency frontier proven exact from complete tables over the
boxes no known mapping dominates (docs/mapper.md, "Step 57").

Take known mappings (points (E, L)) whose frontier starts at the latency bound B (the
floors proof's least-energy mapping there, `ffm.latency_proof.prove_at_floors`) and ends at
the energy optimum E_low (the energy proof's). Sweep up in latency. Once every
Pareto-optimal mapping faster than `proven_to` is known (at first B: none is faster),
let `cap` be the least energy among the known points of latency at most `proven_to` and
L' the least latency of a known point ahead of it (lower energy, more latency). A
Pareto-optimal mapping of latency in [proven_to, L') costs less than `cap` (else the point
at `cap` dominates it), so it lies in the box {E <= cap, L < L'}. A mapping in that box
keeps each Einsum below its latency floor plus L' - B (`ffm.latency_proof.floor_constraints`:
the others take at least their floors), and within its energy budget for U = cap
(`ffm.slack.slack_tables`, its searches on energy and latency). Those tables, complete,
hold a row dominating each pmapping of each such mapping in its compatibility group, so
the pareto join over them finds every Pareto-optimal mapping in the box: `proven_to`
becomes L', and `cap` the least energy now known up to it. The sweep ends once `cap` is
E_low: no mapping costs less, so none slower is Pareto-optimal. The frontier is then
exact, up to latencies within `STRICT` of a known point's: the box stops that far short of
L', since the point at L' (whose Einsums fill the latency budgets exactly) belongs to the
next box, whose energy cap it sets. At gpt3 batch 1 the first box's minima within the
strict budgets rise by 0.94 mJ of its 3.92 mJ slack, and it takes 41 to 53 s where it
took 84 to 86.

A box may end at any latency beyond `proven_to`, not only at the next known point's: the
same argument holds, with `cap` still the bound on energy. A box's cost grows mostly with
its energy slack, `cap` minus the Einsums' minima within its latency budgets; so a box is
widened over the known points ahead as long as those minima stay the same, up to the
energy optimum's point (past it the minima stay too, but the sweep is over, and the
latency slack alone doubled a box's time in one run). At gpt3 batch 1 the second and
third boxes, whose minima are the same (123.02 mJ), become one: 87.9 s with its minima,
where they took 80.8 and 68.5 s. The first box (minima 124.31 mJ, 1.29 mJ above the
second's) stays apart; checking that cost 7 s.

The boxes need not be searched one after another (`prove_pareto`'s `at_once`, the
default). The seed's points alone give boxes that hold every Pareto-optimal mapping: a point
a box finds lowers only the caps of the boxes after it, so caps from the seed are at least
the sweep's. Every box's minima, then one `ffm.slack.slack_tables` run whose budgets are,
per Einsum, the largest any box gives it (`slack_tables`' `steps`, `ffm.slack.step_limit`),
within the latest box's latency budgets, hold them all; a box whose cap is at most
another's and whose minima are at least its is held by that one's budgets and adds none
(`joint_steps`). At gpt3 batch 1 the first box's budgets are the larger for QK, AV and Z
(0.19, 0.66 and 1.01 mJ: its minima are 0.47, 0.47 and 0.35 mJ higher there) and the
second's for the others, so V's search, the longest, is the second box's alone: the boxes
took 70.5 and 69.9 s against 77.8 and 77.0 s for the sweep, alternated (docs/pmapgen.md,
"The Pareto set measured again").

A box's `ffm.slack.slack_tables` first probes every Einsum within its uniform budget up to
a search size (`ffm.slack.PROBE`), keeping the tables that complete (at gpt3 batch 1 I,
QK_softmax, FFA and FFB) and keying the rest. Each box after the first searches within their uniform budgets the
Einsums the box before completed so, and keys the rest at once: the probes that would
only fail again are not run (`box_tables`' `uniform`). Either way the tables hold what the
box needs, so this changes only the time.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from arch.model import Arch
from ffm.budgets import PROOF_ROWS
from ffm.consumers import complete_within
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import floor_constraints
from ffm.search import BOUND_RTOL, SearchResult, search
from ffm.slack import slack_tables
from pmapgen import Constraints
from pmapgen.all_einsums import generate_all, union
from workloads.model import Workload


# `ffm.map` gives the pareto proof this many times one box's own deadline (its search time
# limit per Einsum) of wall: a frontier of many points has as many boxes. At gpt3 batch 1
# with the CLI's 30 s, 600 s for the 143 s its two boxes take (Step 58)
WALL_BOXES = 2.0
# a box stops this far (relative) short of the next known point's latency, beyond the
# budgets' own rounding slack (`BOUND_RTOL` in `floor_constraints`, `LATENCY_RTOL` in pmapgen)
STRICT = 4 * BOUND_RTOL


@dataclass(frozen=True)
class Box:
    """Every mapping of energy at most `energy` (pJ) and latency below `latency` (s)."""
    energy: float
    latency: float


@dataclass(frozen=True)
class BoxRun:
    """One box of the sweep: whether its tables completed, the frontier points its join
    found in it, its wall seconds (minima and tables), and how many known points it was
    widened past (`prove_pareto`). `joint`: how many boxes were searched in the one run
    this box's tables came from (`prove_pareto`'s `at_once`; `seconds` is that run's)."""
    box: Box
    complete: bool
    points: int
    seconds: float
    widened: int = 0
    joint: int = 1


@dataclass(frozen=True, eq=False)
class ParetoProof:
    """What the pareto proof gave: the union of the seed's and the boxes' tables, their pareto
    join (a SearchResult over them), the boxes searched in order, whether the frontier is
    proven exact, why not (`reason`, "" when proven), and its wall seconds."""
    tables: dict[str, tuple]
    found: SearchResult
    runs: tuple[BoxRun, ...]
    proven: bool
    reason: str
    seconds: float


def frontier_points(found: SearchResult) -> list[tuple[float, float]]:
    """A pareto join's frontier as (energy pJ, latency s), by increasing latency."""
    return sorted(zip(found.best["energy"].astype(float), found.best["latency"].astype(float)),
                  key=lambda p: (p[1], p[0]))


def next_box(points: list[tuple[float, float]], proven_to: float, energy_low: float) -> Box | None:
    """The sweep's next box (module docstring) once every Pareto-optimal mapping faster than
    `proven_to` is among `points`, or None when the least energy known there is
    `energy_low` (the energy optimum: nothing slower is Pareto-optimal). Its latency is
    inf when no known point costs less further on."""
    cap = min(e for e, lat in points if lat <= proven_to * (1 + BOUND_RTOL))
    if cap <= energy_low * (1 + BOUND_RTOL):
        return None
    ahead = [lat for e, lat in points if lat > proven_to * (1 + BOUND_RTOL) and e < cap * (1 - BOUND_RTOL)]
    return Box(cap, min(ahead, default=math.inf))


@dataclass(frozen=True)
class BoxMinima:
    """Each Einsum's constraints held below its latency floor plus a box's slack (`STRICT`
    short of it: `held`), and its least energy there (`lows`, pJ, `generate_all`'s rising
    budgets; None when some Einsum has none: no mapping is that fast). `complete` is False
    when a search was cut short. `tables`: those searches' tables, each complete within its
    budget (`ffm.consumers.complete_within`: what an output costs its readers)."""
    held: dict[str, Constraints]
    lows: dict[str, float] | None
    complete: bool
    tables: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        """The lows' sum (inf when None): U minus it is the box's energy slack."""
        return math.inf if self.lows is None else sum(self.lows.values())


def box_minima(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None, latency: float,
               time_limit: float | None, workers: int | None = None, progress: bool = False) -> BoxMinima:
    """`BoxMinima` for a box of latency below `latency` (s)."""
    bound = latency_lower_bound(workload, arch)
    held = floor_constraints(workload, arch, constraints, slack=latency * (1 - STRICT) - bound)
    minima = generate_all(workload, arch, held, objectives=("energy", "latency"),
                          budgets={e: math.inf for e in workload.einsum_names}, rising=True, workers=workers,
                          progress=progress, time_limit=time_limit, desc="pareto proof: minima")
    complete = all(s.complete for _, _, s in minima.values())
    lows = {e: float(t["energy"].min()) for e, (t, _, _) in minima.items()} \
        if complete and all(len(t) for t, _, _ in minima.values()) else None
    return BoxMinima(held, lows, complete, complete_within(minima))


@dataclass(frozen=True, eq=False)
class BoxTables:
    """`box_tables`' result: per Einsum (table, templates, Stats), whether every table is
    complete, and the Einsums whose tables came from their uniform budgets (complete in
    `slack_tables`' probe, or named by `uniform`; None when nothing was searched)."""
    tables: dict[str, tuple]
    complete: bool
    uniform: tuple[str, ...] | None = None


def box_tables(workload: Workload, arch: Arch, box: Box, minima: BoxMinima, time_limit: float | None,
               workers: int | None = None, progress: bool = False, deadline: float | None = None,
               uniform: tuple[str, ...] | None = None, also: tuple[tuple[Box, BoxMinima], ...] = (),
               held: dict[str, Constraints] | None = None) -> BoxTables:
    """Tables holding every pmapping of every mapping in `box` (module docstring), and whether
    they are complete: `ffm.slack.slack_tables` for U = the box's energy under the latency
    budgets and with the minima of `minima` (`box_minima` for the box's latency). The box
    has `time_limit` per Einsum of wall from the keyed searches' start, and any one keyed
    search may take all of it: no keyed search starts after that, nor after `deadline` (a
    `time.perf_counter()` value). (With `time_limit` per search, the widened box at gpt3
    batch 1 was cut short in one product run of two: V's table had 317 rows there, where
    K's and Q's, the same Einsum searched again, had 1,892.) `uniform` names the Einsums to
    search within their uniform budgets, the rest keyed with no probe (`slack_tables`'
    `uniform`; `prove_pareto` passes those the box before completed so). An Einsum with no
    pmapping within its budget leaves the box empty: no tables, complete.

    `also` ((box, its minima), ...) are more boxes the same run holds (`slack_tables`'
    `steps`), and `held` the latency budgets of the run (default the minima's): they must
    hold every box's. The minima's tables bound readers (`slack_tables`' `minima_tables`)
    only for one box within its own budgets."""
    if not minima.complete or minima.lows is None:
        return BoxTables({}, minima.complete)
    wall = None if time_limit is None else time_limit * len(minima.lows)
    own = None if wall is None else time.perf_counter() + wall
    alone = not also and held is None
    st = slack_tables(workload, arch, box.energy, minima.lows, minima.held if held is None else held,
                      time_limit=wall, workers=workers, progress=progress, max_rows=PROOF_ROWS, uniform=uniform,
                      minima_tables=minima.tables if alone else None,
                      deadline=min((d for d in (own, deadline) if d is not None), default=None),
                      steps=tuple((b.energy, m.lows) for b, m in also))
    return BoxTables(dict(st.results), not st.incomplete, st.uniform)


def points_in(points: list[tuple[float, float]], box: Box) -> int:
    """How many of `points` (energy, latency) lie in `box`, short of its latency by `STRICT`."""
    return sum(e <= box.energy * (1 + BOUND_RTOL) and lat < box.latency * (1 - STRICT) for e, lat in points)


def seed_boxes(points: list[tuple[float, float]], bound: float, energy_low: float) -> list[Box]:
    """The boxes the sweep would search if no box found a point the seed's `points` lack:
    `next_box` from the latency bound `bound` on, each box's latency the next one's start,
    until the energy optimum `energy_low`; [] if the points never reach it (a box without
    end) or none is at the bound."""
    if not any(lat <= bound * (1 + BOUND_RTOL) for _, lat in points):
        return []
    boxes: list[Box] = []
    proven_to = bound
    while (box := next_box(points, proven_to, energy_low)) is not None:
        if math.isinf(box.latency):
            return []
        boxes.append(box)
        proven_to = box.latency
    return boxes


def joint_steps(boxes: list[Box], minima: list[BoxMinima]) -> list[tuple[Box, BoxMinima, int]]:
    """The boxes one `slack_tables` run must cover (`prove_pareto`'s `at_once`), each with
    its minima and how many of the boxes after it it covers: a box with no mapping within
    its latency budgets (no lows) is left out, and so is one whose cap is at most another's
    and whose minima are at least its (that one's budgets hold it, as the sweep's widening
    does; of two alike, the first stays)."""
    live = [(b, m) for b, m in zip(boxes, minima) if m.lows is not None]

    def covers(j: int, i: int) -> bool:
        (o, n), (b, m) = live[j], live[i]
        return o.energy >= b.energy and all(n.lows[e] <= m.lows[e] for e in m.lows)

    dropped = {i for i in range(len(live)) if any(j != i and covers(j, i) and (j < i or not covers(i, j))
                                                  for j in range(len(live)))}
    return [(*live[i], sum(1 for k in dropped if k > i and covers(i, k)))
            for i in range(len(live)) if i not in dropped]


def prove_pareto(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None,
                 seed: dict[str, tuple], energy_low: float, time_limit: float | None,
                 workers: int | None = None, progress: bool = False,
                 join_pareto: Callable[[dict[str, pd.DataFrame]], SearchResult] | None = None,
                 seconds: float | None = None, at_once: bool = True) -> ParetoProof:
    """The pareto proof (module docstring) from the `seed` tables (`generate_all`-style; the
    floors proof's and the energy proof's), `energy_low` the proven energy optimum (pJ);
    the seed's mapping at the latency bound need not be the least energy there (the first
    box holds any less). Each box has `time_limit` seconds per Einsum (`box_tables`);
    `join_pareto` is the pareto join (default `ffm.search.search`). With `seconds`, no box
    (nor keyed search) starts that many seconds after the start: a frontier of many points
    has up to as many boxes (not proven then).

    `at_once` (the default) searches every box the seed's points give (`seed_boxes`) in one
    run: the boxes' minima, then one `slack_tables` run holding them all (`joint_steps`,
    `slack_tables`' `steps`), instead of the sweep's box after box. The seed's boxes hold
    every Pareto-optimal mapping the sweep's do: a point a box finds only lowers the caps
    of the boxes after it, and the seed's caps stay sound. Without a seed point at the
    latency bound and one at `energy_low`, or with `at_once` False, the sweep."""
    start = time.perf_counter()
    deadline = None if seconds is None else start + seconds
    join = join_pareto or (lambda tabs: search(tabs, workload, arch, "pareto"))
    bound = latency_lower_bound(workload, arch)
    tables = seed
    found = join({e: t for e, (t, _, _) in tables.items()})
    runs: list[BoxRun] = []
    proven_to = bound
    reason = ""
    known: dict[float, BoxMinima] = {}
    # the Einsums the last box's probe completed within their uniform budgets: the next box
    # searches them so and keys the rest at once, not probing those again (None: probe all)
    uniform: tuple[str, ...] | None = None

    def minima_at(latency: float) -> BoxMinima:  # (a check that did not widen a box starts the next)
        if latency not in known:
            known[latency] = box_minima(workload, arch, constraints, latency, time_limit, workers, progress)
        return known[latency]

    boxes = seed_boxes(frontier_points(found), bound, energy_low) if at_once else []
    if boxes:  # every box the seed's points give, in one run (module docstring)
        for box in boxes:
            if deadline is not None and time.perf_counter() > deadline:
                return ParetoProof(tables, found, (), False, "out of time after 0 boxes", time.perf_counter() - start)
            if not minima_at(box.latency).complete:
                return ParetoProof(tables, found, (), False, "a box's searches were cut short",
                                   time.perf_counter() - start)
        minima = [known[b.latency] for b in boxes]
        steps = joint_steps(boxes, minima)
        complete = True
        if steps:
            (box, low, _), also = steps[0], tuple((b, m) for b, m, _ in steps[1:])
            widest = minima[-1]  # (the latest box's latency budgets hold every box's)
            got = box_tables(workload, arch, box, low, time_limit, workers, progress, deadline, also=also,
                             held=None if low is widest and not also else widest.held)
            complete = got.complete
            if got.tables:
                tables = union(tables, got.tables)
                found = join({e: t for e, (t, _, _) in tables.items()})
        points = frontier_points(found)
        seconds_run = time.perf_counter() - start
        runs = [BoxRun(b, complete, points_in(points, b), seconds_run, covered, len(steps)) for b, _, covered in steps]
        return ParetoProof(tables, found, tuple(runs), complete, "" if complete else "a box's searches were cut short",
                           time.perf_counter() - start)

    while True:
        points = frontier_points(found)
        if not any(lat <= bound * (1 + BOUND_RTOL) for _, lat in points):
            reason = "no known mapping at the latency bound"
            break
        box = next_box(points, proven_to, energy_low)
        if box is None:
            break
        if math.isinf(box.latency):
            reason = "no known mapping reaches the energy optimum"
            break
        began = time.perf_counter()
        if deadline is not None and began > deadline:
            reason = f"out of time after {len(runs)} box{'' if len(runs) == 1 else 'es'}"
            break
        minima = minima_at(box.latency)
        end = min((lat for e, lat in points if e <= energy_low * (1 + BOUND_RTOL)), default=math.inf)
        widened = 0
        # a box may end at any latency: widened over the known points ahead while the minima
        # stay (the same energy slack), one box searches what would take two. Not past a point
        # at the energy optimum (there the sweep ends; the join may hold more, equal up to rounding)
        for _, lat in points:
            if lat <= box.latency * (1 + BOUND_RTOL):  # (behind, or the box's own: points may repeat)
                continue
            if not minima.complete or box.latency >= end or (deadline is not None and time.perf_counter() > deadline):
                break
            wider = minima_at(lat)
            if not wider.complete or wider.total < minima.total * (1 - BOUND_RTOL):
                break
            box, minima, widened = Box(box.energy, lat), wider, widened + 1
        got = box_tables(workload, arch, box, minima, time_limit, workers, progress, deadline, uniform)
        complete, uniform = got.complete, uniform if got.uniform is None else got.uniform
        if got.tables:
            tables = union(tables, got.tables)
            found = join({e: t for e, (t, _, _) in tables.items()})
        inside = points_in(frontier_points(found), box)
        runs.append(BoxRun(box, complete, inside, time.perf_counter() - began, widened))
        if not complete:
            reason = "a box's searches were cut short"
            break
        proven_to = box.latency
    return ParetoProof(tables, found, tuple(runs), not reason, reason, time.perf_counter() - start)
