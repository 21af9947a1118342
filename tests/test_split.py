"""A budgeted prefix search split by root (`pmapgen.prefixes.search_part`, run in parallel by
`pmapgen.all_einsums.split_searches`): its parts together keep exactly what the search keeps
whole, mirrored Einsums included, and parts cut short or not started leave the Einsum
incomplete with a lower bound at most its minimum. A part split further into sub-parts by
fused structure (`pmapgen.prefixes._Search.run`'s `sub`, merged by
`pmapgen.all_einsums.merge_subparts`) keeps what it keeps whole too."""
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pmapgen.all_einsums as all_einsums
import pmapgen.prefixes as prefixes
from pmapgen import Constraints
from pmapgen.all_einsums import Job, generate_all, merge_parts, merge_subparts
from pmapgen.generate import TIME_LIMIT, generate
from pmapgen.prefixes import generate_by_prefixes, part_count
from tests.test_pmapgen import OBJECTIVES, TickingClock, frontier, kv_projections, small_problems
from tests.test_symmetry import mirrored_problems

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


def args(e, w, a, objectives, budget, time_limit=None):
    """A job's arguments as `generate_all` builds them (`run_searches`)."""
    return Job(e, w, a, None, objectives, time_limit, budget)


def pmappings(table, templates) -> list:
    """Each row's pmapping (template and tiles), key and energy, sorted: a table's rows in any order."""
    return sorted((repr(templates[i]), tuple(t), repr(c), float(x))
                  for i, t, c, x in zip(table["template"], table["tiles"], table["compat"], table["energy"]))


def parts_equal_whole(w, a, quantile, objectives):
    """Searched root by root and merged, each Einsum keeps the frontier it keeps whole (the
    enumeration's within the budget: `tests/test_pmapgen.py`), from the same structural
    prefixes, with the same lower bound."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=objectives)[0]
        if full.empty:
            continue
        budget = float(np.quantile(full["energy"], quantile))
        whole = generate_by_prefixes(e, w, a, objectives=objectives, budget=budget)
        # each part as a worker runs it (`_search` with a part index)
        got = [all_einsums._search(args(e, w, a, objectives, budget)._replace(part=i)) for i in range(part_count(e, w, a))]
        table, templates, stats = merge_parts(args(e, w, a, objectives, budget), got)
        assert stats.complete and frontier(table, objectives) == frontier(whole[0], objectives), e
        assert pmappings(table, templates) == pmappings(*whole[:2]), e  # the same rows, not only the same frontier
        assert stats.templates == whole[2].templates, e
        assert stats.lower_bound == pytest.approx(whole[2].lower_bound, rel=1e-9), e
        # the whole search counts each root's prefixes as its part does alone (`Stats.parts`)
        assert whole[2].parts == stats.parts == tuple(g[2].templates for g in got), e


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.0, 0.3, 1.0]), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_search_split_by_root_keeps_what_it_keeps_whole(problem, quantile, objectives):
    parts_equal_whole(*problem, quantile, objectives)


@settings(max_examples=8, **SETTINGS)
@given(mirrored_problems(), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_mirrored_search_split_by_root_keeps_what_it_keeps_whole(problem, quantile, objectives):
    """A part adds the mirror images of its survivors; the part of their root searches
    nothing of those structures, so nothing is lost or doubled."""
    parts_equal_whole(*problem, quantile, objectives)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_mirrored_search_split_by_root_keeps_what_it_keeps_whole_long(problem, quantile, objectives):
    parts_equal_whole(*problem, quantile, objectives)


def by_fate(fate: str, job: Job, steps: int):
    """A job as a worker ends it: not started (None) for "none", cut by a time limit of
    `steps` clock readings (`TickingClock`) for "cut", or run to the end for "run"."""
    if fate == "none":
        return None
    real = prefixes.time
    prefixes.time = TickingClock()
    try:
        return all_einsums._search(job._replace(time_limit=steps if fate == "cut" else None))
    finally:
        prefixes.time = real


def subparts_equal_whole(w, a, quantile, objectives, m):
    """Each root searched as m sub-parts and merged keeps the rows it keeps searched whole
    (the enumeration's frontier within the budget), from the same lower bound; every
    sub-part keeps only rows of its own fused structures, so the merge keeps no row twice."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=objectives)[0]
        if full.empty:
            continue
        budget = float(np.quantile(full["energy"], quantile))
        job = args(e, w, a, objectives, budget)
        for i in range(part_count(e, w, a)):
            whole = all_einsums._search(job._replace(part=i))
            subs = [all_einsums._search(job._replace(part=i, sub=(j, m))) for j in range(m)]
            table, templates, stats = merge_subparts(job, i, subs)
            assert stats.complete and frontier(table, objectives) == frontier(whole[0], objectives), (e, i)
            assert pmappings(table, templates) == pmappings(*whole[:2]), (e, i)
            assert sum(len(t) for t, _, _ in subs) == len(table), (e, i)
            assert stats.lower_bound == pytest.approx(whole[2].lower_bound, rel=1e-9), (e, i)


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([OBJECTIVES, ("energy",)]),
       st.sampled_from([2, 3, 8]))
def test_a_part_split_into_sub_parts_keeps_what_it_keeps_whole(problem, quantile, objectives, m):
    subparts_equal_whole(*problem, quantile, objectives, m)


@settings(max_examples=6, **SETTINGS)
@given(mirrored_problems(), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([2, 8]))
def test_a_mirrored_part_split_into_sub_parts_keeps_what_it_keeps_whole(problem, quantile, m):
    """A sub-part adds the mirror images of its own structures' survivors, and no sub-part
    searches an image: nothing is lost or doubled."""
    subparts_equal_whole(*problem, quantile, ("energy",), m)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(st.one_of(small_problems(max_levels=3), mirrored_problems(max_levels=3)), st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from([OBJECTIVES, ("energy",)]), st.sampled_from([2, 3, 8]))
def test_a_part_split_into_sub_parts_keeps_what_it_keeps_whole_long(problem, quantile, objectives, m):
    subparts_equal_whole(*problem, quantile, objectives, m)


def latency_subparts_equal_whole(w, a, quantile, m):
    """Within a latency budget (the latency set's searches, `ffm.slack.latency_slack_tables`'
    `sub_parts`) each root searched as m sub-parts and merged keeps the frontier it keeps
    whole. Latency alone is the objective, so rows tied on every criterion may differ in
    energy and either may stand for the tie: the frontier, not the rows, is compared."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("latency",))[0]
        if full.empty:
            continue
        c = Constraints(latency_budget=float(np.quantile(full["latency"], quantile)))
        job = Job(e, w, a, c, ("latency",))
        for i in range(part_count(e, w, a, c)):
            whole = all_einsums._search(job._replace(part=i))
            subs = [all_einsums._search(job._replace(part=i, sub=(j, m))) for j in range(m)]
            table, _, stats = merge_subparts(job, i, subs)
            assert stats.complete and frontier(table, ("latency",)) == frontier(whole[0], ("latency",)), (e, i)


@settings(max_examples=8, **SETTINGS)
@given(st.one_of(small_problems(max_levels=3), mirrored_problems()), st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from([2, 3, 8]))
def test_a_part_split_into_sub_parts_within_a_latency_budget_keeps_its_frontier(problem, quantile, m):
    latency_subparts_equal_whole(*problem, quantile, m)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(st.one_of(small_problems(max_levels=3), mirrored_problems(max_levels=3)), st.sampled_from([0.0, 0.5, 1.0]),
       st.sampled_from([2, 3, 8]))
def test_a_part_split_into_sub_parts_within_a_latency_budget_keeps_its_frontier_long(problem, quantile, m):
    latency_subparts_equal_whole(*problem, quantile, m)


@settings(max_examples=5, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.3, 1.0]), st.integers(0, 40), st.data())
def test_sub_parts_cut_short_or_not_started_bound_the_minimum(problem, quantile, steps, data):
    """Some sub-parts of a root cut by the time limit, some not started (None): the part is
    empty and incomplete, bounded below by at most the least energy of its root's pmappings."""
    w, a = problem
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        if full.empty:
            continue
        budget = float(np.quantile(full["energy"], quantile))
        job = args(e, w, a, ("energy",), budget)
        for i in range(part_count(e, w, a)):
            whole = all_einsums._search(job._replace(part=i))
            least = float(whole[0]["energy"].min()) if len(whole[0]) else np.inf
            fates = data.draw(st.lists(st.sampled_from(["run", "cut", "none"]), min_size=3, max_size=3),
                              label=f"{e} {i}")
            got = [by_fate(fate, job._replace(part=i, sub=(j, 3)), steps) for j, fate in enumerate(fates)]
            merged = merge_subparts(job, i, got)
            if all(f == "none" for f in fates):
                assert merged is None
                continue
            table, _, stats = merged
            if all(g is not None and g[2].complete for g in got):
                assert stats.complete and frontier(table, ("energy",)) == frontier(whole[0], ("energy",)), (e, i)
                continue
            assert not stats.complete and table.empty and stats.stopped_by, (e, i)
            assert stats.lower_bound <= least * (1 + 1e-9), (e, i)


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.3, 1.0]), st.integers(0, 40), st.data())
def test_parts_cut_short_or_not_started_bound_the_minimum(problem, quantile, steps, data):
    """Some parts cut by the time limit, some not started (None): the merged table is empty
    and incomplete, and its lower bound is at most the Einsum's minimum."""
    w, a = problem
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        n = part_count(e, w, a)
        if full.empty or n < 2:
            continue
        budget = float(np.quantile(full["energy"], quantile))
        fates = data.draw(st.lists(st.sampled_from(["run", "cut", "none"]), min_size=n, max_size=n), label=e)
        job = args(e, w, a, ("energy",), budget)
        got = [by_fate(fate, job._replace(part=i), steps) for i, fate in enumerate(fates)]
        table, _, stats = merge_parts(args(e, w, a, ("energy",), budget), got)
        if all(g is not None and g[2].complete for g in got):
            continue
        assert not stats.complete and table.empty and stats.stopped_by, e
        assert stats.lower_bound <= float(full["energy"].min()) * (1 + 1e-9), e


def test_generate_all_splits_a_budgeted_search_across_workers_and_leaves_out_einsums_not_started():
    """Through `generate_all` (two worker processes): the split search keeps the whole
    search's frontier. With parts left out by the run (as a deadline or a stop leaves
    them), an Einsum with a part cut short is incomplete, and one whose parts merely did
    not all start is left out of the result, as an unsplit search that did not start is."""
    w, a = kv_projections()
    budgets = {}
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        budgets[e] = float(np.quantile(full["energy"], 0.5))
    got = generate_all(w, a, objectives=("energy",), workers=2, progress=False, budgets=budgets)
    for e in w.einsum_names:
        whole = generate_by_prefixes(e, w, a, objectives=("energy",), budget=budgets[e])
        assert got[e][2].complete and frontier(got[e][0], ("energy",)) == frontier(whole[0], ("energy",)), e

    real = all_einsums.run_searches

    def partial(jobs, *a_, **k):  # Einsum "K": its first part cut, its last not run; "S": its last part not run
        ran = real(jobs, 1, False)
        last = {e: max(i for f, i in ran if f == e) for e, _ in ran}
        out = {key: r for key, r in ran.items() if key[1] != last[key[0]] or key[0] not in ("K", "S")}
        first = min(i for f, i in out if f == "K")
        table, _, stats = out["K", first]  # as a part cut short gives it: no row, no template
        out["K", first] = (table.iloc[:0], [], replace(stats, complete=False, stopped_by=TIME_LIMIT))
        return out

    with mock.patch.object(all_einsums, "run_searches", partial):
        cut = generate_all(w, a, objectives=("energy",), workers=2, progress=False, budgets=budgets)
    for e in "KV":  # V is K's search renamed (identical Einsums)
        assert e in cut and not cut[e][2].complete and cut[e][0].empty and cut[e][2].stopped_by == TIME_LIMIT
    assert "S" not in cut and "T" not in cut
    assert sorted(cut) == ["K", "V"]


def test_a_row_cap_the_whole_search_completes_within_lets_the_split_search_complete():
    """`max_rows` is a per-process cap: the least cap under which the whole search completes
    (found by bisection) lets every part complete too. A share of it per part (the
    twenty-seventh session's) cut these short, as it cut AV's raise at batch 1."""
    w, a = kv_projections()
    for e in "KS":
        full = generate(e, w, a, objectives=("energy",))[0]
        budget = float(full["energy"].max())

        def whole_completes(cap):
            return generate_by_prefixes(e, w, a, objectives=("energy",), budget=budget, max_rows=cap)[2].complete

        low, high = 0, 1
        while not whole_completes(high):
            low, high = high, high * 2
        while low + 1 < high:
            mid = (low + high) // 2
            low, high = (low, mid) if whole_completes(mid) else (mid, high)
        got = generate_all(w, a, objectives=("energy",), workers=2, progress=False, budgets={e: budget},
                           einsums=(e,), max_rows=high)[e]
        whole = generate_by_prefixes(e, w, a, objectives=("energy",), budget=budget)
        assert got[2].complete and frontier(got[0], ("energy",)) == frontier(whole[0], ("energy",)), (e, high)


def split_kv(**kwargs) -> tuple[dict, list]:
    """`split_searches` over `kv_projections`' Einsums, each within its median energy, with
    `kwargs`: (its result, the keys of the jobs it ran), after checking that every Einsum
    keeps the rows its whole search keeps."""
    w, a = kv_projections()
    jobs = []
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        jobs.append((e, args(e, w, a, ("energy",), float(np.quantile(full["energy"], 0.5)))))
    ran_keys = []
    real = all_einsums.run_searches

    def run_searches(parts, *rest, **kw):
        ran_keys.extend(key for key, _ in parts)
        return real(parts, *rest, **kw)

    with mock.patch.object(all_einsums, "run_searches", run_searches):
        got = all_einsums.split_searches(jobs, 1, False, "test", **kwargs)
    for e, job in jobs:
        whole = generate_by_prefixes(e, w, a, objectives=("energy",), budget=job[6])
        assert got[e][2].complete and pmappings(got[e][0], got[e][1]) == pmappings(*whole[:2]), e
    return got, ran_keys


def test_only_the_searches_picked_are_split_and_every_one_keeps_what_it_keeps_whole():
    """`split_searches(..., split=...)` splits the jobs picked (the refinements' keyed searches
    fixing no loop) and runs the others whole among their parts: the same tables either way."""
    _, ran_keys = split_kv(split=lambda key: key == "K")
    assert "K" not in ran_keys and ("K", 0) in ran_keys and "V" in ran_keys and ("V", 0) not in ran_keys


def test_split_searches_splits_the_parts_of_the_jobs_picked_into_sub_parts_and_merges_them():
    """`split_searches(..., sub_parts=...)`: the parts of K become three sub-parts each, V's
    stay whole, and both keep the rows the whole search keeps."""
    _, ran_keys = split_kv(sub_parts=lambda key: 3 if key == "K" else 1)
    assert ("K", 0, 2) in ran_keys and ("K", 0) not in ran_keys and ("V", 0) in ran_keys
    assert not any(len(key) == 3 and key[0] != "K" for key in ran_keys if isinstance(key, tuple))


def _pid(*_args) -> int:
    import os
    return os.getpid()


def test_kept_workers_run_several_calls_in_the_same_processes_and_keep_what_fresh_ones_keep():
    """`Workers` (the energy proof's refinements: many calls of short searches) answers each
    `split_searches` call as fresh workers do, from the same worker processes until it is
    closed; with one worker it runs them in this process, as `workers=1` does."""
    w, a = kv_projections()
    jobs = []
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        jobs.append((e, args(e, w, a, ("energy",), float(np.quantile(full["energy"], 0.5)))))
    fresh = all_einsums.split_searches(jobs, 2, False, "test")
    with all_einsums.Workers(2) as kept:
        first = all_einsums.split_searches(jobs, None, False, "test", kept=kept)
        pool = kept.pool()
        # the pool's worker processes (by pid); a few tiny jobs may all land on one of them,
        # so which ran them is checked against this set, not against each other
        pids = set(pool._processes)
        assert {f.result() for f in [pool.submit(_pid) for _ in range(8)]} <= pids and len(pids) <= 2
        again = all_einsums.split_searches(jobs, None, False, "test", split=lambda key: False, kept=kept)
        assert kept.pool() is pool and set(pool._processes) == pids
        assert {f.result() for f in [pool.submit(_pid) for _ in range(8)]} <= pids
    assert kept._pool is None  # closed with the block
    for got in (first, again):
        for e, _ in jobs:
            assert got[e][2].complete and pmappings(got[e][0], got[e][1]) == pmappings(*fresh[e][:2]), e
    with all_einsums.Workers(1) as alone:
        here = all_einsums.run_searches([("pid", args("V", w, a, ("energy",), None))], None, False, kept=alone)
        assert alone._pool is None and here["pid"][2].complete  # ran here: no pool was started


def test_workers_start_with_the_search_kernels_already_loaded():
    """`Workers` loads the compiled kernels of the searches in the parent before it forks
    (`warm_kernels`), so a worker's first search does not load them again, and freezes the
    parent's heap out of its collector. Run in a fresh
    interpreter: this one may have loaded them already, for other reasons."""
    import subprocess
    import sys
    code = (
        "import multiprocessing\n"
        "from pmapgen.all_einsums import Workers\n"
        "from pmapgen import bounds, pareto\n"
        "def counts():\n"
        "    return [len(f.overloads) for f in (bounds._floor, bounds._cut_choices, pareto._pareto_sorted,\n"
        "                                        pareto._state_frontier)]\n"
        "print(counts(), multiprocessing.get_start_method())\n"
        "with Workers(2) as w:\n"
        "    print(w.pool().submit(counts).result())\n"
        "import gc\n"
        "print(gc.get_freeze_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    if not out[0].endswith(" fork"):
        pytest.skip("workers are spawned here, not forked: they load their kernels themselves")
    assert out[0] == "[0, 0, 0, 0] fork", out  # nothing loaded at import
    # the floor, a loop move's choices and cuts (`pmapgen.loop_choices`, which holds the box bound),
    # the Pareto filter's C layout (the tables' prunes), and both layouts of a batch's
    # frontier (`pareto.state_frontier`: stacked by the prefix search's prune, or column by column)
    assert out[1] == "[1, 1, 1, 2]", out
    # the parent's heap as it was then (modules, numba's registries: over 100,000 objects) frozen
    # out of its own collector too (`warm_kernels`)
    assert int(out[2]) > 10_000, out


def _collector():
    import gc
    return gc.get_freeze_count(), gc.get_threshold()


def test_a_worker_s_collector_leaves_out_what_it_inherited_and_defers_full_collections():
    """A worker freezes what it inherited (the parent's heap, forked) out of its collector's
    view and runs full collections after WORKER_GC[2] younger ones: at batch 1 the proof's
    workers spent 5.5 s of CPU in full collections walking that heap (fiftieth session)."""
    import gc
    import multiprocessing
    keep = [[i] for i in range(50_000)]  # tracked objects of the parent's
    with all_einsums.Workers(2) as w:
        frozen, threshold = w.pool().submit(_collector).result()
    if multiprocessing.get_start_method() == "fork":  # (a spawned worker inherits nothing)
        assert frozen >= len(keep)
    assert threshold == all_einsums.WORKER_GC and threshold[2] > gc.get_threshold()[2]


def test_parts_start_most_costly_first_within_each_job_when_costs_are_given(monkeypatch):
    """`split_searches`' `costs` (an earlier search's `Stats.parts`) orders each job's parts
    most costly first, and those of a job without costs (or with the wrong number) in part
    order; the jobs keep their order, so a part cut short under `stop_when_incomplete`
    stops no part of an earlier job. Each Einsum's result is the same either way."""
    w, a = kv_projections()
    names = list(w.einsum_names)
    jobs = [(e, args(e, w, a, ("energy",), None)) for e in names]
    jobs = [(e, j._replace(budget=float(generate(e, w, a, objectives=("energy",))[0]["energy"].max())))
            for e, j in jobs]
    counts = {e: part_count(e, w, a) for e in names}
    started = []
    real = all_einsums._job
    monkeypatch.setattr(all_einsums, "_job", lambda item: started.append(item[0]) or real(item))
    plain = all_einsums.split_searches(jobs, 1, False, "test")
    assert started == [(e, i) for e in names for i in range(counts[e])]
    costs = {names[0]: tuple(range(counts[names[0]])), names[1]: (5,) * (counts[names[1]] + 1)}
    started.clear()
    costed = all_einsums.split_searches(jobs, 1, False, "test", costs=costs)
    unknown = [(e, i) for e in names[1:] for i in range(counts[e])]
    assert started == [(names[0], i) for i in reversed(range(counts[names[0]]))] + unknown
    for e in names:
        assert pmappings(*costed[e][:2]) == pmappings(*plain[e][:2]), e
