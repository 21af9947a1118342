"""The latency proof (`ffm.latency_proof`): the latency set at a bound U proves a mapping
within U exactly when one exists, checked against the exhaustive latency optimum (every
legal pmapping of every Einsum, joined); at `ffm.latency_bound`'s B that is the optimum;
the set cut short (its deadline, or a root cut short) proves nothing; and `ffm.map
--objective latency` without the floors proof (tests/test_floors_proof.py) takes its result,
proven, or falls back to the time-limited flow."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ffm
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import prove_latency
from ffm.report import result_text
from ffm.search import search
from ffm.slack import latency_slack_tables
from pmapgen import all_einsums, generate
from pmapgen.all_einsums import Job
from tests.test_map import ARCH, WORKLOAD
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report  # noqa: F401


def latency_join(workload, arch):
    return lambda tables: search(tables, workload, arch, "latency")


def check_latency_proof(workload, arch, pick: int) -> None:
    """With U the exhaustive latency optimum the set is complete and its join meets U with
    a real mapping of that latency; with U a hair below it, or halfway between B
    (`ffm.latency_bound`) and it, complete and above (no mapping within U), though each
    Einsum's rows are within their budgets (the join may then find a mapping above U);
    with U = B met exactly when the optimum is B. A set met may stop as soon as the roots
    ended join within U; one not met is always complete."""
    tables = {e: generate(e, workload, arch, objectives=("latency",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()) or (truth := search(tables, workload, arch, "latency")).best.empty:
        _bump("no valid mapping")
        return
    optimum = float(truth.best["latency"].iloc[0])
    low = latency_lower_bound(workload, arch)
    assert low <= optimum * (1 + RTOL)
    bound = (optimum, optimum * (1 - 1e-6), low, (low + optimum) / 2)[pick % 4]
    lp = prove_latency(workload, arch, None, 60.0, latency_join(workload, arch), workers=1, bound=bound)
    exists = optimum <= bound * (1 + RTOL)
    assert lp.met == exists and lp.above == (not exists), (bound, optimum)
    assert lp.found is not None and (lp.early or (lp.complete and not lp.cut_short))
    assert not lp.early or exists  # (it stops early only on a mapping within U)
    _bump("stopped early" if lp.early else "complete")
    if exists:
        found = {e: r[0] for e, r in lp.tables.items()}
        ev = chosen(lp.found, found, {e: r[1] for e, r in lp.tables.items()}, workload, arch)
        assert np.isclose(ev.latency_s, optimum, rtol=RTOL)
    if lp.found is not None and not lp.found.best.empty and not exists:
        _bump("the join found a mapping above U")
    _bump(("the optimum", "below the optimum", "B met" if exists else "B not met",
           "halfway" if exists else "halfway, B not met")[pick % 4])


@settings(max_examples=15, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_the_latency_set_proves_a_mapping_within_u_exactly_when_one_exists(problem, pick):
    check_latency_proof(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.integers(0, 10**6))
def test_the_latency_set_proves_a_mapping_within_u_exactly_when_one_exists_long(problem, pick):
    check_latency_proof(*problem, pick=pick)


def mm2():
    import arch as arch_specs
    import workloads
    return workloads.load(WORKLOAD), arch_specs.load(ARCH)


def test_the_set_past_its_deadline_proves_nothing():
    """No root starts after the deadline: every Einsum incomplete with an empty table, no
    join, neither met nor above."""
    w, a = mm2()
    join = mock.Mock(side_effect=AssertionError("joined an incomplete set"))
    lp = prove_latency(w, a, None, 0.0, join, workers=1)
    assert not lp.complete and lp.cut_short == tuple(w.einsum_names)
    assert all(t.empty for t, _, _ in lp.tables.values())
    assert lp.found is None and not lp.met and not lp.above and not join.called


def test_a_root_cut_short_stops_the_set():
    """With `stop_when_incomplete`, no root starts after one is cut short (here by a cap of
    one waiting row): exactly one search runs, and every Einsum is incomplete; without it,
    the roots whose producers ended go on."""
    w, a = mm2()
    bound = latency_lower_bound(w, a)
    ran = []

    def counted(args):
        ran.append(args[0])
        return search_one(args)

    search_one = all_einsums._search
    with mock.patch.object(all_einsums, "_search", counted):
        stopped = latency_slack_tables(w, a, bound, workers=1, max_rows=1, stop_when_incomplete=True)
        assert len(ran) == 1
        ran.clear()
        latency_slack_tables(w, a, bound, workers=1, max_rows=1)
        assert len(ran) > 1
    assert all(not st.complete and t.empty for t, _, st in stopped.results.values())


def test_map_takes_the_set_s_result_when_it_meets_the_bound():
    """tests/test_map.py's mm2 meets its latency bound: `ffm.map --objective latency` with
    a time limit (cut short before pmapgen keeps anything) returns the set's mapping,
    proven, at the exhaustive optimum, with neither the energy proof nor pmapgen run, and
    the report says why; with the set off, the time-limited flow runs as before."""
    w, a = mm2()
    exact = ffm.map(w, a, objective="latency", progress=False, workers=1)
    r = ffm.map(w, a, objective="latency", progress=False, workers=1, time_limit=1e-9, floors_proof=False)
    lp = r.stats.latency_proof
    assert lp.met and r.stats.complete and r.stats.bound_reached and r.evaluation.valid
    assert np.isclose(r.evaluation.latency_s, exact.evaluation.latency_s, rtol=RTOL)
    assert np.isclose(r.evaluation.latency_s, latency_lower_bound(w, a), rtol=RTOL)
    assert r.stats.proof is None and not r.stats.pmapgen and not r.stats.descent
    assert set(r.stats.seconds) == {"latency set", "evaluation"}
    assert r.optimality()["proven"] and r.optimality()["within"] == 1.0
    words = " ".join(result_text(r).split())
    assert "mm2 on fan2: optimal for latency" in words
    assert "pmapgen: not run (the latency set at the bound gave the result, below)" in words
    assert ("Its join found a mapping at the bound, so no mapping is faster" in words) != lp.early
    assert ("as soon as the rows of the roots searched so far joined to a mapping at the bound" in words) == lp.early
    off = ffm.map(w, a, objective="latency", progress=False, workers=1, time_limit=1e-9, latency_set_time=0,
                  proof_time_limit=60.0, floors_proof=False)
    assert off.stats.latency_proof is None and off.stats.proof is not None and "latency set" not in off.stats.seconds


def test_map_falls_back_to_the_flow_when_the_set_proves_the_bound_unmet():
    """A workload whose latency bound no mapping meets (one of the property test's
    problems where the set at B is complete and above): the flow finds the result, the
    report says the set proved every mapping slower than B, and the result is the one the
    run without the set finds."""
    import arch as arch_specs
    import workloads
    slow = {**ARCH, "levels": [{**ARCH["levels"][0], "bandwidth": "2 GB/s"}, {**ARCH["levels"][1], "capacity": "4 B"},
                               ARCH["levels"][2]]}
    w, a = workloads.load(WORKLOAD), arch_specs.load(slow)
    exact = ffm.map(w, a, objective="latency", progress=False, workers=1)
    low = latency_lower_bound(w, a)
    assert exact.evaluation.latency_s > low * (1 + RTOL)  # (20 ns against 16: Y cannot stay on chip)
    kw = dict(objective="latency", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0,
              floors_proof=False)
    r = ffm.map(w, a, **kw)
    off = ffm.map(w, a, latency_set_time=0, **kw)
    lp = r.stats.latency_proof
    assert lp.complete and lp.above and not lp.met and not r.stats.bound_reached
    assert r.stats.proof is not None and "latency set" in r.stats.seconds and "proof" in r.stats.seconds
    assert np.isclose(r.evaluation.latency_s, off.evaluation.latency_s, rtol=RTOL) and r.evaluation.valid
    assert r.evaluation.latency_s >= exact.evaluation.latency_s * (1 - RTOL)
    words = " ".join(result_text(r).split())
    assert "Its join found no mapping within the bound: every mapping takes longer than 16 ns" in words
    # halfway (18 ns) each Einsum's budget is 10 ns, and the tables join to the optimum, above U
    half = prove_latency(w, a, None, 60.0, latency_join(w, a), workers=1, bound=(low + exact.evaluation.latency_s) / 2)
    assert np.isclose(float(half.found.best["latency"].iloc[0]), exact.evaluation.latency_s, rtol=RTOL)
    assert half.complete and half.above and not half.met


def _sleepy(args):
    """A stand-in search (inherited by forked workers): 'fast' returns at once, 'slow'
    sleeps for an hour."""
    import time as _time
    from pmapgen import Stats
    if args[0] == "slow":
        _time.sleep(3600)
    return "table", [], Stats(0, 0, 0)


def test_stop_abandons_the_running_searches():
    """`run_searches`' `more` returning STOP ends the run at once: the job still running
    (an hour's sleep in the other worker) is abandoned, its worker terminated, and missing
    from the result (a regression hangs here instead of failing)."""
    import multiprocessing
    if multiprocessing.get_start_method() != "fork":
        pytest.skip("the stand-in search reaches the workers only when they are forked")
    jobs = [(name, Job(name, None, None, None, None)) for name in ("slow", "fast")]
    with mock.patch.object(all_einsums, "_search", _sleepy):
        got = all_einsums.run_searches(jobs, workers=2, progress=False, more=lambda key, res: all_einsums.STOP)
    assert set(got) == {"fast"} and not multiprocessing.active_children()
