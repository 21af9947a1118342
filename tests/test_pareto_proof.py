"""The pareto proof (`ffm.pareto_proof`): from the floors proof's and the energy proof's
tables, complete tables over the boxes no known mapping dominates prove the energy-latency
frontier exact. Checked against the exhaustive frontier (every legal pmapping of every
Einsum, joined): a proven frontier is it, point for point, and each point rebuilds to a
mapping of those totals. The sweep's boxes are checked by hand, and `ffm.map --objective
pareto` takes a proven frontier."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arch as arch_specs
import ffm
import workloads
from ffm.budgets import prove_energy
from ffm.latency_proof import prove_at_floors
from ffm.pareto_proof import (Box, BoxMinima, box_minima, box_tables, frontier_points, joint_steps, next_box,
                               prove_pareto, seed_boxes)
from ffm.report import result_text
from ffm.search import full_mapping, search
from looptree.evaluation import evaluate
from pmapgen import generate
from pmapgen.all_einsums import union
from tests.strategies import two_levels
from tests.test_join import dags
from tests.test_latency_proof import mm2
from tests.test_search import RTOL, SETTINGS, _bump, problems, report  # noqa: F401

# gpt3 batch 1's frontier (mJ, ms; docs/pmapgen.md), by increasing latency
POINTS = [(127.29, 6.768), (126.28, 7.517), (125.78, 9.015), (125.64, 10.513)]


def test_the_boxes_follow_the_known_points():
    """Each box holds the mappings no known point dominates between the latency proven so far
    and the next known point's: energy at most the least known up to there."""
    assert next_box(POINTS, 6.768, 125.64) == Box(127.29, 7.517)
    assert next_box(POINTS, 7.517, 125.64) == Box(126.28, 9.015)
    assert next_box(POINTS, 8.0, 125.64) == Box(126.28, 9.015)
    assert next_box(POINTS, 9.015, 125.64) == Box(125.78, 10.513)
    assert next_box(POINTS, 10.513, 125.64) is None  # (the energy optimum reached)
    assert next_box(POINTS, 10.513, 125.0) == Box(125.64, math.inf)  # (the optimum not known: no point further)
    assert next_box(POINTS + [(125.9, 12.0)], 7.517, 125.64) == Box(126.28, 9.015)  # (a dominated point: skipped)


def test_the_seed_s_boxes_are_the_sweep_s_and_the_joint_run_keeps_those_no_other_holds():
    """The seed's points give the sweep's boxes up to the energy optimum (none if they never
    reach it, or none is at the latency bound). Of gpt3's three, the third has the second's
    minima and a lower cap: the second's budgets hold it, so the joint run covers two, the
    second covering one after it; a box with no mapping within its latency budgets is left out."""
    boxes = seed_boxes(POINTS, 6.768, 125.64)
    assert boxes == [Box(127.29, 7.517), Box(126.28, 9.015), Box(125.78, 10.513)]
    assert seed_boxes(POINTS, 6.768, 125.0) == []  # (a box without end)
    assert seed_boxes(POINTS[1:], 6.768, 125.64) == []  # (no point at the bound)
    first = {"A": 3.0, "B": 2.0}
    rest = {"A": 2.5, "B": 2.0}
    minima = [BoxMinima({}, first, True), BoxMinima({}, rest, True), BoxMinima({}, dict(rest), True)]
    got = joint_steps(boxes, minima)
    assert [(b, covered) for b, _, covered in got] == [(boxes[0], 0), (boxes[1], 1)]
    # the third's minima lower in one Einsum: it stays
    minima[2] = BoxMinima({}, {"A": 2.5, "B": 1.5}, True)
    assert [b for b, _, _ in joint_steps(boxes, minima)] == boxes
    # the first box empty: left out
    minima[0] = BoxMinima({}, None, True)
    assert [b for b, _, _ in joint_steps(boxes, minima)] == boxes[1:]
    # two boxes alike: the first stays, covering the other
    same = [BoxMinima({}, rest, True), BoxMinima({}, dict(rest), True)]
    assert [(b, c) for b, _, c in joint_steps([Box(1.0, 2.0), Box(1.0, 3.0)], same)] == [(Box(1.0, 2.0), 1)]


def pairs(points) -> np.ndarray:
    return np.array(sorted({(round(e, 6), round(lat * 1e9, 6)) for e, lat in points}))


def exhaustive_points(workload, arch) -> list[tuple[float, float]] | None:
    """The exhaustive frontier (every legal pmapping of every Einsum, joined) as points, or
    None where there is no valid mapping (noted)."""
    tables = {e: generate(e, workload, arch) for e in workload.einsum_names}
    if any(t.empty for t, _, _ in tables.values()) or \
            (exact := search({e: t for e, (t, _, _) in tables.items()}, workload, arch, "pareto")).best.empty:
        _bump("no valid mapping")
        return None
    return frontier_points(exact)


def inside(points, box: Box) -> np.ndarray:
    """`pairs` of the points in `box` (below its latency, a rounding's width short)."""
    return pairs([(e, lat) for e, lat in points if e <= box.energy * (1 + RTOL) and lat < box.latency * (1 - 1e-6)])


def check_pareto_proof(workload, arch, at_once: bool = True) -> None:
    """Where the floors proof meets the latency bound and the energy proof completes, a
    proven frontier is the exhaustive one, and each of its points rebuilds to a mapping of
    those totals; the boxes searched in one run (`at_once`) or one after another."""
    if (want := exhaustive_points(workload, arch)) is None:
        return
    fp = prove_at_floors(workload, arch, None, 60.0, workers=1)
    res, _, proof = prove_energy(workload, arch, math.inf, {}, None, 60.0, 1, False)
    if not (fp.met and proof.proven):
        _bump("no floors or energy proof")
        return
    seed = union(res, fp.tables)
    before = frontier_points(search({e: t for e, (t, _, _) in seed.items()}, workload, arch, "pareto"))
    pp = prove_pareto(workload, arch, None, seed, proof.lower, 60.0, workers=1, at_once=at_once)
    got = frontier_points(pp.found)
    if not pp.proven:
        _bump(f"not proven: {pp.reason}")
        return
    assert pairs(got).shape == pairs(want).shape and np.allclose(pairs(got), pairs(want), rtol=RTOL), (got, want)
    for _, row in pp.found.best.iterrows():
        ev = evaluate(full_mapping(row, pp.tables, tuple(workload.einsum_names)), workload, arch)
        assert ev.valid and np.isclose(ev.energy_pJ, float(row["energy"]), rtol=RTOL)
        assert np.isclose(ev.latency_s, float(row["latency"]), rtol=RTOL)
    missed = len(pairs(want)) - len({p for p in map(tuple, pairs(want))} & {p for p in map(tuple, pairs(before))})
    _bump(f"proven, {len(pp.runs)} box(es)" + (" at once" if at_once else "")
          + (", the boxes found points the seed lacked" if missed else "")
          + (", widened" if any(r.widened for r in pp.runs) else ""))


@st.composite
def trade_offs(draw, sizes=(2, 3)):
    """(workload, arch): a random DAG (tests.test_join.dags) on a fast, costly backing level and
    a small buffer that is cheaper and slower (`tests.strategies.two_levels`, its capacity
    and bandwidths drawn): energy and latency pull apart, so the frontier has
    several points more often than on `tests.test_search.problems`' archs (there, 52 of 60
    slow examples had one point)."""
    spec = two_levels(draw(st.sampled_from(["2 GB/s", "4 GB/s", "8 GB/s"])),
                      draw(st.sampled_from(["8 B", "16 B", "32 B"])),
                      draw(st.sampled_from(["0.5 GB/s", "1 GB/s", "2 GB/s"])), "trade")
    return workloads.load(draw(dags(n_einsums=(2, 3, 4), sizes=sizes))), arch_specs.load(spec)


@settings(max_examples=15, **SETTINGS)
@given(st.one_of(problems(max_levels=2), trade_offs()), st.booleans())
def test_a_proven_frontier_is_the_exhaustive_frontier(problem, at_once):
    check_pareto_proof(*problem, at_once=at_once)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(st.one_of(problems(sizes=(2, 3, 4)), trade_offs(sizes=(2, 3, 4))), st.booleans())
def test_a_proven_frontier_is_the_exhaustive_frontier_long(problem, at_once):
    check_pareto_proof(*problem, at_once=at_once)


def check_box(workload, arch, data) -> None:
    """A box cornered at exhaustive frontier points (energy at most point i's, latency below
    point k's, k > i, or beyond the last): the pareto join of its tables (`box_minima`,
    `box_tables`, some Einsums drawn to be searched within their uniform budgets, the rest
    keyed) has, in the box, exactly the exhaustive frontier's points there. The
    corners sit on points, so a cap set low loses point i where its Einsums other than one
    are at their minima, and a box stopping short of point k's latency loses the points
    just below it."""
    if (points := exhaustive_points(workload, arch)) is None:
        return
    i = data.draw(st.integers(0, len(points) - 1), label="point i")
    k = data.draw(st.integers(i + 1, len(points)), label="point k")
    box = Box(points[i][0], points[k][1] if k < len(points) else 2 * points[-1][1])
    minima = box_minima(workload, arch, None, box.latency, 60.0, workers=1)
    # some Einsums searched within their uniform budgets, as the sweep does once a box before
    # completed them so (`prove_pareto`), the rest keyed
    uniform = data.draw(st.none() | st.lists(st.sampled_from(workload.einsum_names), unique=True).map(tuple),
                        label="uniform")
    got = box_tables(workload, arch, box, minima, 60.0, workers=1, uniform=uniform)
    assert got.complete
    found = frontier_points(search({e: t for e, (t, _, _) in got.tables.items()}, workload, arch, "pareto")) \
        if got.tables else []

    want = inside(points, box)
    assert inside(found, box).shape == want.shape and np.allclose(inside(found, box), want, rtol=RTOL), \
        (found, points, box)
    _bump(f"{len(want)} point(s) in the box")


@settings(max_examples=10, **SETTINGS)
@given(st.one_of(problems(max_levels=2), trade_offs()), st.data())
def test_a_box_s_tables_hold_its_frontier(problem, data):
    check_box(*problem, data)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(st.one_of(problems(sizes=(2, 3, 4)), trade_offs(sizes=(2, 3, 4))), st.data())
def test_a_box_s_tables_hold_its_frontier_long(problem, data):
    check_box(*problem, data)


def check_joint_boxes(workload, arch, data) -> None:
    """Two boxes cornered at exhaustive frontier points, the second's cap lower and its
    latency further (energy at most point i's below point k's latency, and at most point
    i2's below point k2's, i < i2, k < k2), searched in one run (`box_tables`' `also`,
    within the second's latency budgets, as `prove_pareto`'s `at_once` does): the pareto
    join of its tables has, in each box, exactly the exhaustive frontier's points there. (On
    problems this small the first box's budgets alone rarely miss a point of the second's;
    `tests/test_slack.py`'s `check_steps` is the check that fails without the second's.)"""
    if (points := exhaustive_points(workload, arch)) is None:
        return
    if len(points) < 2:
        _bump("one point")
        return
    i = data.draw(st.integers(0, len(points) - 2), label="point i")
    i2 = data.draw(st.integers(i + 1, len(points) - 1), label="point i2")
    k = data.draw(st.integers(i + 1, len(points)), label="point k")
    k2 = data.draw(st.integers(max(k, i2 + 1), len(points)), label="point k2")
    end = lambda j: points[j][1] if j < len(points) else (2 + j - len(points)) * points[-1][1]  # noqa: E731
    first, second = Box(points[i][0], end(k)), Box(points[i2][0], end(k2))
    low, wide = (box_minima(workload, arch, None, b.latency, 60.0, workers=1) for b in (first, second))
    if low.lows is None or wide.lows is None:
        _bump("a box with no mapping")
        return
    got = box_tables(workload, arch, first, low, 60.0, workers=1, also=((second, wide),), held=wide.held)
    assert got.complete
    found = frontier_points(search({e: t for e, (t, _, _) in got.tables.items()}, workload, arch, "pareto"))
    for box in (first, second):
        want = inside(points, box)
        assert inside(found, box).shape == want.shape and np.allclose(inside(found, box), want, rtol=RTOL), \
            (found, points, box)
    _bump("checked")


@settings(max_examples=8, **SETTINGS)
@given(st.one_of(problems(max_levels=2), trade_offs()), st.data())
def test_two_boxes_in_one_run_hold_each_box_s_frontier(problem, data):
    check_joint_boxes(*problem, data)


CHAIN = {"name": "chain", "rank_sizes": {"m": 3, "a": 2, "b": 3}, "bits": 8,
         "einsums": ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W0[a,b]", "Z[m,a] = Y[m,b] * W1[b,a]",
                     "V[m] = X[m,a] * W2[a]"]}
TRADE = two_levels("8 GB/s", "8 B", "1 GB/s", "trade")


def test_the_boxes_find_the_points_the_seed_lacks():
    """A case found by search (scratch) whose seed, the floors proof's and the energy proof's
    tables, lacks frontier points, one of them at 0.977 of its box's energy cap. The proof
    finds every one, and the frontier is the exhaustive one, whether its boxes are searched
    in one run (from the seed's points alone) or by the sweep. The sweep's second box is widened
    past the six known points ahead of it, the Einsums' minima staying the same there:
    two boxes, where one per known point took eight. (Boxes capped even 10% low pass here
    since the widening: its points lie in wider boxes, whose slack budgets leave each
    Einsum more room than that. `test_a_box_s_tables_hold_its_frontier`, its corners on
    points, fails at 1% low.)"""
    w, a = workloads.load(CHAIN), arch_specs.load(TRADE)
    check_pareto_proof(w, a, at_once=False)
    check_pareto_proof(w, a, at_once=True)
    fp = prove_at_floors(w, a, None, 60.0, workers=1)
    res, _, proof = prove_energy(w, a, math.inf, {}, None, 60.0, 1, False)
    seed = union(res, fp.tables)
    before = pairs(frontier_points(search({e: t for e, (t, _, _) in seed.items()}, w, a, "pareto")))
    pp = prove_pareto(w, a, None, seed, proof.lower, 60.0, workers=1, at_once=False)
    # the boxes at once: from the seed's points alone, every one in one run, the same frontier
    once = prove_pareto(w, a, None, seed, proof.lower, 60.0, workers=1)
    assert once.proven and once.runs and all(r.joint == len(once.runs) and r.complete for r in once.runs)
    assert np.array_equal(pairs(frontier_points(once.found)), pairs(frontier_points(pp.found)))
    after = pairs(frontier_points(pp.found))
    new = [p for p in map(tuple, after) if p not in set(map(tuple, before))]
    assert pp.proven and new
    caps = [max(r.box.energy for r in pp.runs if lat <= r.box.latency * 1e9 * (1 + RTOL)) for _, lat in new]
    assert max(e / cap for (e, _), cap in zip(new, caps)) > 0.975
    assert [r.widened for r in pp.runs] == [0, 6] and all(r.complete for r in pp.runs)
    # with no time for a box, the seed's frontier, not proven
    for at_once in (False, True):
        cut = prove_pareto(w, a, None, seed, proof.lower, 60.0, workers=1, seconds=0.0, at_once=at_once)
        assert not cut.proven and cut.reason == "out of time after 0 boxes" and not cut.runs
        assert np.array_equal(pairs(frontier_points(cut.found)), before)


def test_map_takes_the_pareto_proof_s_frontier():
    """mm2 for pareto with a time limit (pmapgen would be cut short before keeping anything):
    the frontier is the exhaustive one, proven, with pmapgen not run, and the report and
    the export say so."""
    w, a = mm2()
    exact = ffm.map(w, a, objective="pareto", progress=False, workers=1).evaluations
    r = ffm.map(w, a, objective="pareto", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0)
    assert r.stats.pareto_proof.proven and r.stats.complete and r.optimality()["proven"]
    got, want = (pairs((ev.energy_pJ, ev.latency_s) for ev in x) for x in (r.evaluations, exact))
    assert got.shape == want.shape and np.allclose(got, want, rtol=RTOL) and len(got) == 2
    assert all(ev.valid for ev in r.evaluations)
    assert not r.stats.pmapgen and not r.stats.descent and "pareto proof" in r.stats.seconds
    words = " ".join(result_text(r).split())
    assert "pmapgen: not run (the pareto proof gave the frontier, below)" in words
    assert "up to the energy optimum: the frontier is exact" in words and "; proven exact" in words
    assert "WARNING" not in words
    off = ffm.map(w, a, objective="pareto", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0,
                  pareto_proof=False)
    assert off.stats.pareto_proof is None and not off.stats.complete
