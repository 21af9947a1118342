"""Issue 3's set for energy (`ffm.slack`): with U any mapping's energy at or above the
optimum, the uniform and the keyed slack tables hold every pmapping an energy-optimal
mapping could use, checked against tests/test_search.py's exhaustive tables (every legal
pmapping of every Einsum) and their joins."""
from __future__ import annotations

import random
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads

from ffm.refine import BACKING_GROUP_FROM, outer_levels
from ffm.search import search
from ffm.slack import (RTOL as SLACK_RTOL, latency_slack_budgets, latency_slack_tables, producer_keys, sibling_betas,
                       siblings, slack_budgets, slack_tables, step_limit)
from pmapgen import Constraints, generate, generate_all, prefixes
from pmapgen.prefixes import part_backings
from tests.test_pmapgen import frontier
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report  # noqa: F401
from tests.test_symmetry import mirrored_problems


def exhaustive(workload, arch):
    """(each Einsum's exhaustive energy table, the optimum) or None (no mapping: skipped)."""
    tables = {e: generate(e, workload, arch, objectives=("energy",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()):
        _bump("an Einsum with no pmapping")
        return None
    truth = search(tables, workload, arch, "energy")
    if truth.best.empty:
        _bump("no valid mapping")
        return None
    return tables, float(truth.best["energy"].iloc[0])


def check_slack_budgets(workload, arch, pick: int) -> None:
    """The uniform budgets: each Einsum's pmapping in every optimal mapping costs at most its
    slack budget (the bound minus the others' minima); the tables complete within those
    budgets join to the exhaustive optimum, a real mapping of that energy; and no mapping
    that uses a pmapping above its Einsum's budget is within the bound (so none could be
    optimal)."""
    if (got := exhaustive(workload, arch)) is None:
        return
    tables, optimum = got
    order = tuple(workload.einsum_names)
    truth = search(tables, workload, arch, "energy")
    bound = optimum * (1.0, 1.05, 1.5)[pick % 3]
    minima = {e: float(t["energy"].min()) for e, t in tables.items()}
    budgets = slack_budgets(minima, bound)
    assert all(np.isclose(budgets[e] - minima[e], bound - sum(minima.values()), rtol=RTOL) for e in order)
    for e, i in zip(order, truth.best["rows"].iloc[0]):
        assert tables[e].loc[i, "energy"] <= budgets[e] * (1 + RTOL), e
    slack = generate_all(workload, arch, objectives=("energy",), budgets=budgets, workers=1, progress=False)
    for e, (table, _, stats) in slack.items():
        assert stats.complete and (table["energy"] <= budgets[e] * (1 + RTOL)).all(), e
    found = search({e: r[0] for e, r in slack.items()}, workload, arch, "energy")
    assert not found.best.empty and np.isclose(found.best["energy"].iloc[0], optimum, rtol=RTOL)
    ev = chosen(found, {e: r[0] for e, r in slack.items()}, {e: r[1] for e, r in slack.items()}, workload, arch)
    assert np.isclose(ev.energy_pJ, optimum, rtol=RTOL)
    for e in order:  # a pmapping above its budget: every mapping using it is above the bound
        above = tables[e][tables[e]["energy"] > budgets[e] * (1 + RTOL)]
        if above.empty:
            continue
        _bump("pmappings above a slack budget")
        worse = search({**tables, e: above}, workload, arch, "energy")
        assert worse.best.empty or worse.best["energy"].iloc[0] > bound * (1 - RTOL), e
    _bump("checked")


@settings(max_examples=20, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_tables_within_slack_budgets_hold_every_pmapping_an_optimal_mapping_could_use(problem, pick):
    check_slack_budgets(*problem, pick=pick)


def dominated(row, table, objective: str = "energy") -> bool:
    """Whether a row of `table` in `row`'s compatibility group is at least as good in the
    objective and in every reservation (a reservation a row does not have counts as nothing)."""
    group = table[[k == row["compat"] for k in table["compat"]]] if len(table) else table
    if group.empty:
        return False
    crit = sorted({c for c in (*row.index, *group.columns) if c.startswith("res:")}) + [objective]
    mine = np.nan_to_num(row.reindex(crit).to_numpy(dtype=float), nan=0.0)
    theirs = np.nan_to_num(group.reindex(columns=crit).to_numpy(dtype=float), nan=0.0)
    return bool(np.all(theirs <= mine * (1 + RTOL) + 1e-12, axis=1).any())


def check_keyed_slack(workload, arch, pick: int) -> None:
    """The keyed budgets (`slack_tables`), some Einsums within their uniform budgets first
    (a subset drawn from `pick`, or those the probe completes within a drawn size and
    keys-waiting limit), the others keyed in
    topological order: every pmapping of every mapping within the bound (a pmapping whose
    best mapping is within it) is dominated by a row of its Einsum's table in its
    compatibility group; every row is within its uniform budget; and the tables join to
    the exhaustive optimum, rebuilt and evaluated. For a third of the draws every key is
    searched in its backing group, each key held to its own β there (`pmapgen.key_budgets`)."""
    if (got := exhaustive(workload, arch)) is None:
        return
    tables, optimum = got
    order = tuple(workload.einsum_names)
    bound = optimum * (1.0, 1.05, 1.5)[pick % 3]
    minima = {e: float(t["energy"].min()) for e, t in tables.items()}
    rng = random.Random(pick)
    # () keys every Einsum; None probes them, a random work limit picking the uniform ones
    uniform = (tuple(e for e in order if rng.random() < 0.5) if pick % 4 > 1 else None) if pick % 4 else ()
    probe = rng.choice((4, 16, 64, 256, 1024))
    probe_waiting = rng.choice((None, 1, 4, 16, 64))
    by_backing = 0 if pick // 3 % 3 == 1 else BACKING_GROUP_FROM  # keys searched by backing group, each within its β
    complete = minima_tables(tables, rng) if rng.random() < 0.6 else None
    keyed = slack_tables(workload, arch, bound, minima, workers=1, uniform=uniform, by_backing=by_backing,
                         probe=probe, probe_waiting=probe_waiting, minima_tables=complete)
    budgets = slack_budgets(minima, bound)
    assert not keyed.incomplete and set(keyed.results) == set(order)
    for e, (table, _, _) in keyed.results.items():
        assert (table["energy"] <= budgets[e] * (1 + RTOL)).all(), e
    for e in order:
        for i in range(len(tables[e])):
            row = tables[e].iloc[i]
            if row["energy"] > budgets[e] * (1 + RTOL):
                continue  # in no mapping within the bound (the uniform budgets' test)
            best = search({**tables, e: tables[e].iloc[[i]]}, workload, arch, "energy")
            if best.best.empty or best.best["energy"].iloc[0] > bound * (1 + RTOL):
                _bump("pmappings in no mapping within the bound")
                continue
            _bump("pmappings in a mapping within the bound")
            assert dominated(row, keyed.results[e][0]), (e, row["compat"], row["energy"])
    found = search({e: r[0] for e, r in keyed.results.items()}, workload, arch, "energy")
    assert not found.best.empty and np.isclose(found.best["energy"].iloc[0], optimum, rtol=RTOL)
    ev = chosen(found, {e: r[0] for e, r in keyed.results.items()}, {e: r[1] for e, r in keyed.results.items()},
                workload, arch)
    assert np.isclose(ev.energy_pJ, optimum, rtol=RTOL)
    _bump(f"checked, {len(keyed.uniform)} of {len(order)} uniform" + (" by the probe" if uniform is None else "")
          + (", by backing group" if by_backing == 0 else "")
          + (f", {sum(p is not None for p in keyed.penalties.values())} penalized by readers" if complete else ""))


def minima_tables(tables: dict, rng: random.Random) -> dict:
    """Some Einsums' exhaustive tables cut at a budget drawn from their minimum up to their
    largest energy: each complete within it, as a rising search's table is
    (`ffm.consumers.consumer_penalty`'s input)."""
    out = {}
    for e, table in tables.items():
        if rng.random() < 0.7:
            energy = table["energy"].to_numpy(dtype=float)
            budget = float(np.quantile(energy, rng.choice((0.0, 0.1, 0.3, 0.6, 1.0))))
            out[e] = (table[energy <= budget], budget)
    return out


@settings(max_examples=10, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_keyed_slack_tables_hold_every_pmapping_of_every_mapping_within_the_bound(problem, pick):
    check_keyed_slack(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=80, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.integers(0, 10**6))
def test_keyed_slack_tables_hold_every_pmapping_of_every_mapping_within_the_bound_long(problem, pick):
    check_keyed_slack(*problem, pick=pick)


@st.composite
def sibling_problems(draw):
    """X[m,a] = I[m,a] read by two or three identical Einsums (matmuls Yk[m,b] = X[m,a] *
    Wk[a,b], or copies), maybe joined after (U = Y0 * Y1), on a `problems` arch: gpt3's V, K
    and Q reading I, then QK reading two of them (`ffm.slack.siblings`)."""
    _, a = draw(problems(max_levels=2, must_keep=False))
    n, mm = draw(st.sampled_from([2, 3])), draw(st.booleans())
    out = "m,b" if mm else "m,a"
    einsums = ["X[m,a] = I[m,a]"] + [f"Y{k}[{out}] = X[m,a] * W{k}[a,b]" if mm else f"Y{k}[{out}] = X[m,a]"
                                     for k in range(n)]
    if draw(st.booleans()):
        einsums.append(f"U[{out}] = Y0[{out}] * Y1[{out}]")
    sizes = {"m": draw(st.sampled_from([2, 3])), "a": draw(st.sampled_from([2, 3])), "b": 2}
    return workloads.load({"name": "siblings", "rank_sizes": {r: v for r, v in sizes.items() if mm or r != "b"},
                           "bits": 8, "einsums": einsums}), a


@settings(max_examples=6, **SETTINGS)
@given(sibling_problems(), st.integers(0, 10**6))
def test_keyed_slack_tables_with_identical_readers_hold_every_pmapping_within_the_bound(problem, pick):
    check_keyed_slack(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(sibling_problems(), st.integers(0, 10**6))
def test_keyed_slack_tables_with_identical_readers_hold_every_pmapping_within_the_bound_long(problem, pick):
    check_keyed_slack(*problem, pick=pick)


def check_steps(workload, arch, pick: int) -> None:
    """Two or three regions in one `slack_tables` run (`steps`), each a bound U_j and minima
    drawn at or below the true ones (any lower bounds are sound), in a drawn order: every
    pmapping of every mapping within the largest U_j is dominated by a row of its Einsum's
    table in its compatibility group (the region of that U_j holds it), and the tables join
    to the exhaustive optimum. Holding only the first region's budgets fails this."""
    if (got := exhaustive(workload, arch)) is None:
        return
    tables, optimum = got
    order = tuple(workload.einsum_names)
    rng = random.Random(pick)
    minima = {e: float(t["energy"].min()) for e, t in tables.items()}
    regions = [(optimum * rng.choice((1.0, 1.05, 1.5)), {e: m * rng.choice((1.0, 0.97, 0.9)) for e, m in minima.items()})
               for _ in range(rng.choice((2, 3)))]
    joint = slack_tables(workload, arch, *regions[0], workers=1, steps=tuple(regions[1:]),
                         probe=rng.choice((0, 16, 256)), uniform=() if rng.random() < 0.3 else None)
    assert not joint.incomplete
    top = max(u for u, _ in regions)
    for e in order:
        for i in range(len(tables[e])):
            row = tables[e].iloc[i]
            best = search({**tables, e: tables[e].iloc[[i]]}, workload, arch, "energy")
            if best.best.empty or best.best["energy"].iloc[0] > top * (1 + RTOL):
                continue
            _bump("pmappings in a mapping within the largest bound")
            assert dominated(row, joint.results[e][0]), (e, row["compat"], row["energy"])
    found = search({e: r[0] for e, r in joint.results.items()}, workload, arch, "energy")
    assert not found.best.empty and np.isclose(found.best["energy"].iloc[0], optimum, rtol=RTOL)
    _bump(f"checked, {len(regions)} regions" + (", the first's bound the largest" if regions[0][0] == top else ""))


@settings(max_examples=8, **SETTINGS)
@given(st.one_of(problems(max_levels=2), sibling_problems()), st.integers(0, 10**6))
def test_one_run_over_several_regions_holds_every_pmapping_of_each(problem, pick):
    check_steps(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(st.one_of(problems(sizes=(2, 3, 4)), sibling_problems()), st.integers(0, 10**6))
def test_one_run_over_several_regions_holds_every_pmapping_of_each_long(problem, pick):
    check_steps(*problem, pick=pick)


def test_step_limit_is_the_largest_bound_less_what_the_least_minima_add():
    """By hand: two regions (U 10, minima a 1, b 2, c 3; U 9, minima a 1, b 1, c 2), so the
    least minima are a 1, b 1, c 2. For a, with b and c counted: 10 less (2 - 1) + (3 - 2)
    is 8, 9 less nothing is 9: 9. For c alone: 10. For a with b its sibling, only c's
    difference: 10 - 1 = 9, and 9: 9. One region: its bound."""
    steps = ((10.0, {"a": 1.0, "b": 2.0, "c": 3.0}), (9.0, {"a": 1.0, "b": 1.0, "c": 2.0}))
    least = {"a": 1.0, "b": 1.0, "c": 2.0}
    assert np.isclose(step_limit(steps, least, "a", ("a", "b", "c"), ()), 9.0 * (1 + SLACK_RTOL))
    assert np.isclose(step_limit(steps, least, "c", ("c",), ()), 10.0 * (1 + SLACK_RTOL))
    assert np.isclose(step_limit(steps, least, "a", ("a", "b", "c"), ("b",)), 9.0 * (1 + SLACK_RTOL))
    assert np.isclose(step_limit(steps[1:], least, "a", ("a", "b", "c"), ()), 9.0 * (1 + SLACK_RTOL))
    assert np.isclose(step_limit(steps[:1], {"a": 1.0, "b": 2.0, "c": 3.0}, "a", ("a", "b", "c"), ()),
                      10.0 * (1 + SLACK_RTOL))


def test_the_siblings_of_v_are_k_and_q_and_then_of_k_q():
    """gpt3's V, K and Q read I in the same place and are identical up to names; QK, reading
    Q and K, has none (and no Einsum has any while I, their input's producer, is free)."""
    w = workloads.load("gpt3", batch=1, seq_len=2048)
    free = [e for e in w.einsum_names if e != "I"]
    assert siblings(w, free, "V", None) == ("K", "Q")
    assert siblings(w, [e for e in free if e != "V"], "K", None) == ("Q",)
    assert siblings(w, free, "K", None, among=w.einsum_names) == ("V", "Q")
    assert siblings(w, free, "QK", None) == ()
    assert siblings(w, w.einsum_names, "V", None) == ()


def test_sibling_betas_tighten_by_the_least_per_key_and_drop_keys_with_none_within_the_first_pass():
    """Two siblings of minimum 10: at a key where e's least is 12, each costs 2 more than
    β counted it, so β 40 becomes 36; a key with no row within the first pass's budget
    ((β + 20) / 3), or a cut search's lower bound above it, is left out; a least at the
    minimum leaves β as it was."""
    betas = {"a": 40.0, "b": 40.0, "c": 40.0, "d": 25.0, "e": 40.0}
    first = {k: (b + 20.0) / 3 for k, b in betas.items()}  # a, b, c, e: 20; d: 15
    floors = {"a": (12.0, True), "b": None, "c": (10.0, True), "d": (15.5, False), "e": (19.0, False)}
    assert sibling_betas(betas, first, floors, [10.0, 10.0]) == {"a": 36.0, "c": 40.0, "e": 22.0}


def check_latency_chain(workload, arch, pick: int):
    """The latency set in topological waves (`latency_slack_tables`), each input held to the
    c_T its producer's table gives it: every pmapping of every mapping of latency
    within the bound (exhaustive tables, each row pinned in turn and joined) is dominated
    by a row of its Einsum's table in its compatibility group; every row is within its
    uniform budget; the tables join to the exhaustive latency optimum. Returns the bound and
    the tables (None where the problem has no mapping)."""
    tables = {e: generate(e, workload, arch, objectives=("latency",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()):
        _bump("an Einsum with no pmapping")
        return None
    truth = search(tables, workload, arch, "latency")
    if truth.best.empty:
        _bump("no valid mapping")
        return None
    optimum = float(truth.best["latency"].iloc[0])
    order = tuple(workload.einsum_names)
    bound = optimum * (1.0, 1.05, 1.5)[pick % 3]
    chained = latency_slack_tables(workload, arch, bound, workers=1)
    budgets = latency_slack_budgets(workload, arch, bound)
    assert set(chained.results) == set(order) and all(r[2].complete for r in chained.results.values())
    whole = einsum_at_a_time(workload, arch, budgets)
    for e in order:  # root by root, each held to its levels' c_T: what each Einsum held to all of them keeps
        assert frontier(chained.results[e][0], ("latency",)) == frontier(whole[e], ("latency",)), e
        for i, (_, at) in enumerate(part_backings(e, workload, arch, Constraints(latency_budget=budgets[e]))):
            given = {t: {dict(k[0])[t][0] for k in whole[workload.producer(t)]["compat"]} for t in at
                     if workload.producer(t) is not None and t in {u.tensor for u in workload.einsum(e).inputs}}
            assert (i in chained.skipped[e]) == any(at[t] not in lv for t, lv in given.items()), (e, i)
    _bump("a root no producer gives c_T, not searched" if any(chained.skipped.values()) else "every root searched")
    narrowed = 0
    for e, (table, _, _) in chained.results.items():
        assert (table["latency"] <= budgets[e] * (1 + RTOL)).all(), e
        for t, cts in chained.keys[e].items():
            assert set(cts) == {dict(k[0])[t] for k in chained.results[workload.producer(t)][0]["compat"]}
            assert {dict(k[0])[t] for k in table["compat"]} <= set(cts), (e, t)
            narrowed += len(chained.levels(e)[t]) < len(arch.memories)
    _bump("a producer's table narrows an input's levels" if narrowed else "no input's levels narrowed")
    for e in order:
        for i in range(len(tables[e])):
            row = tables[e].iloc[i]
            if row["latency"] > budgets[e] * (1 + RTOL):
                continue
            best = search({**tables, e: tables[e].iloc[[i]]}, workload, arch, "latency")
            if best.best.empty or best.best["latency"].iloc[0] > bound * (1 + RTOL):
                continue
            _bump("pmappings in a mapping within the latency bound")
            assert dominated(row, chained.results[e][0], "latency"), (e, row["compat"], row["latency"])
    found = search({e: r[0] for e, r in chained.results.items()}, workload, arch, "latency")
    assert not found.best.empty and np.isclose(found.best["latency"].iloc[0], optimum, rtol=RTOL)
    ev = chosen(found, {e: r[0] for e, r in chained.results.items()},
                {e: r[1] for e, r in chained.results.items()}, workload, arch)
    assert np.isclose(ev.latency_s, optimum, rtol=RTOL)
    _bump("checked")
    return bound, chained


def einsum_at_a_time(workload, arch, budgets: dict) -> dict:
    """The latency set the plain way: each Einsum in topological order, whole, its inputs
    held to every c_T of its producers' complete tables (the reference for the roots'
    graph)."""
    tables: dict = {}
    for e in workload.einsum_names:
        sets = producer_keys(workload, tables, e)
        c = Constraints(latency_budget=budgets[e], tensor_key_sets=sets)
        tables[e] = generate_all(workload, arch, {e: c}, objectives=("latency",), workers=1, progress=False,
                                 einsums=(e,), split=False)[e][0]
    return tables


@settings(max_examples=5, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_latency_tables_in_waves_hold_every_pmapping_of_every_mapping_within_the_bound(problem, pick):
    check_latency_chain(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.integers(0, 10**6))
def test_latency_tables_in_waves_hold_every_pmapping_of_every_mapping_within_the_bound_long(problem, pick):
    check_latency_chain(*problem, pick=pick)


def test_no_pmapping_of_i_within_its_latency_floor_backs_i_at_a_level_its_table_leaves_out():
    """gpt3 batch 1: the c_T `producer_keys` gives V's input I from I's table within its
    latency floor are on chip only, and a search of I with I backed at any other level
    within that floor finds nothing (so V's roots with I in DRAM or the Registers hold no
    pmapping of a latency-optimal mapping)."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    from pmapgen.prefixes import generate_by_prefixes

    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    budget = einsum_latency_floor("I", w, a) * (1 + RTOL)
    table = generate_by_prefixes("I", w, a, Constraints(latency_budget=budget), ("latency",))[0]
    levels = {ct[0] for ct in producer_keys(w, {"I": table}, "V")["I"]}
    assert levels and "DRAM" not in levels
    for level in (m.name for m in a.memories if m.name not in levels):
        c = Constraints(backing={"I": (level,)}, latency_budget=budget)
        got, _, stats = generate_by_prefixes("I", w, a, c, ("latency",))
        assert stats.complete and got.empty, level


def check_graph_keeps_the_mirror(workload, arch, pick: int) -> None:
    """QK-like problems (`tests.test_symmetry.mirrored_problems`, A and B each produced):
    the roots' graph holds Z's A and B at both their roots' levels, so each root's search
    keeps the mirror: the latency chain's checks hold, and Z visits fewer prefixes than
    with the mirror turned off."""
    if (checked := check_latency_chain(workload, arch, pick)) is None:
        return
    bound, chained = checked
    got = chained.results["Z"]
    with mock.patch.object(prefixes, "find_mirror", lambda *a, **k: None):
        plain = latency_slack_tables(workload, arch, bound, workers=1).results["Z"]
    assert frontier(got[0], ("latency",)) == frontier(plain[0], ("latency",))
    assert got[2].templates < plain[2].templates, (got[2].templates, plain[2].templates)
    _bump("the graph's Z mirrored")


@settings(max_examples=2, **SETTINGS)
@given(mirrored_problems(produced=True), st.integers(0, 10**6))
def test_the_roots_graph_keeps_the_mirror(problem, pick):
    check_graph_keeps_the_mirror(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=16, **SETTINGS)
@given(mirrored_problems(produced=True), st.integers(0, 10**6))
def test_the_roots_graph_keeps_the_mirror_long(problem, pick):
    check_graph_keeps_the_mirror(*problem, pick=pick)


@settings(max_examples=3, **SETTINGS)
@given(problems(max_levels=2))
def test_the_roots_graph_in_worker_processes_keeps_what_it_keeps_in_one(problem):
    """The roots' graph run by two worker processes (`run_searches`' `more`, jobs handed out
    as others end) keeps every Einsum's frontier and skips the roots it skips in this
    process."""
    workload, arch = problem
    tables = {e: generate(e, workload, arch, objectives=("latency",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()) or (truth := search(tables, workload, arch, "latency")).best.empty:
        return
    bound = float(truth.best["latency"].iloc[0])
    one, two = (latency_slack_tables(workload, arch, bound, workers=n) for n in (1, 2))
    assert one.skipped == two.skipped and one.keys == two.keys
    for e in workload.einsum_names:
        assert frontier(one.results[e][0], ("latency",)) == frontier(two.results[e][0], ("latency",)), e
    _bump("checked in two workers")


@settings(max_examples=4, **SETTINGS)
@given(problems(max_levels=2), st.sampled_from([2, 3]))
def test_the_roots_graph_with_sub_parts_keeps_what_it_keeps_whole(problem, m):
    """Each root's job searched as m sub-parts (`latency_slack_tables`' `sub_parts`; on two
    levels every root is split), merged once all have ended, in this process and in two
    workers: every Einsum's frontier, the c_T each input is held to and the roots skipped
    are those of the whole roots' graph."""
    check_sub_parts_graph(*problem, m, workers=(1, 2))


@settings(max_examples=3, **SETTINGS)
@given(problems(min_levels=3, max_levels=3), st.sampled_from([2, 3]))
def test_the_roots_graph_with_sub_parts_on_three_levels_keeps_what_it_keeps_whole(problem, m):
    """On three levels a root reading a produced input from the innermost is searched whole
    and the others split (`ffm.refine.outer_levels`): the graph mixing both keeps what the
    whole roots' graph keeps."""
    check_sub_parts_graph(*problem, m, workers=(1,))


def check_sub_parts_graph(workload, arch, m: int, workers: tuple[int, ...]) -> None:
    tables = {e: generate(e, workload, arch, objectives=("latency",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()) or (truth := search(tables, workload, arch, "latency")).best.empty:
        return
    bound = float(truth.best["latency"].iloc[0])
    whole = latency_slack_tables(workload, arch, bound, workers=1)
    for n in workers:
        split = latency_slack_tables(workload, arch, bound, workers=n, sub_parts=m)
        assert split.skipped == whole.skipped and split.keys == whole.keys
        for e in workload.einsum_names:
            assert split.results[e][2].complete, e
            assert frontier(split.results[e][0], ("latency",)) == frontier(whole.results[e][0], ("latency",)), e
    budgets = latency_slack_budgets(workload, arch, bound)
    kinds = set()  # whether the roots searched were split, whole, or both
    for e in workload.einsum_names:
        held = [u.tensor for u in workload.einsum(e).inputs if workload.producer(u.tensor) is not None]
        outer = outer_levels(arch, workload.einsum(e))
        for i, (_, at) in enumerate(part_backings(e, workload, arch, Constraints(latency_budget=budgets[e]))):
            if i not in whole.skipped[e]:
                kinds.add("split" if all(at[t] in outer for t in held) else "whole")
    _bump(f"checked with sub-parts, roots {' and '.join(sorted(kinds))}")


def chain(a: int, capacity: str, dram: dict | None = None):
    """(workload, arch): X[m,a] = I[m,a], Y[m,b] = X[m,a] * W0[a,b], Z[m,b] = Y[m,b] (m 4, b
    2) on DRAM (`dram`: more of its fields) and one buffer of `capacity`."""
    import arch as arch_specs
    import workloads

    w = workloads.load({"name": "chain", "rank_sizes": {"m": 4, "a": a, "b": 2}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W0[a,b]", "Z[m,b] = Y[m,b]"]})
    return w, arch_specs.load({"name": "two", "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit", **(dram or {})},
        {"memory": "L1", "capacity": capacity, "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit"},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]})


def test_a_root_reading_its_input_from_dram_starts_after_the_first_producer_root_writing_it_there():
    """X = I, Y = X * W, Z = Y on DRAM and a buffer, no bandwidth limit (every pmapping at its
    compute time, so every root keeps rows): Y has two roots backing Y in DRAM (X in DRAM,
    X in the buffer). Y backed in DRAM has one c_T, (DRAM, ()), so Z's roots reading Y
    from DRAM start as soon as the first of them ends (one process: before the second),
    and the tables are the Einsum-at-a-time reference's."""
    w, a = chain(a=2, capacity="64 B")
    tables = {e: generate(e, w, a, objectives=("latency",))[0] for e in w.einsum_names}
    bound = float(search(tables, w, a, "latency").best["latency"].iloc[0])
    got = latency_slack_tables(w, a, bound, workers=1)
    budgets = latency_slack_budgets(w, a, bound)
    roots = {e: part_backings(e, w, a, Constraints(latency_budget=budgets[e])) for e in w.einsum_names}
    y_dram = [("Y", i) for i, (_, at) in enumerate(roots["Y"]) if at["Y"] == "L0"]
    z_dram = [("Z", i) for i, (_, at) in enumerate(roots["Z"]) if at["Y"] == "L0"]
    assert len(y_dram) == 2 and z_dram and not any(got.skipped.values())
    assert all(len(got.results["Y"][0]) and r in got.order for r in y_dram + z_dram)
    first, second = sorted(y_dram, key=got.order.index)
    assert all(got.order.index(first) < got.order.index(z) < got.order.index(second) for z in z_dram), got.order
    whole = einsum_at_a_time(w, a, budgets)
    for e in w.einsum_names:
        assert frontier(got.results[e][0], ("latency",)) == frontier(whole[e], ("latency",)), e


def check_guesses(workload, arch, pick: int) -> None:
    """With `early` (here never stopping), roots not yet fed are searched first on the c_T
    given so far (a guess) and on the rest once fed: the same tables (frontiers, keys,
    skipped roots) as without guesses, each row of a guess a real pmapping within its
    budget."""
    tables = {e: generate(e, workload, arch, objectives=("latency",))[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()) or (truth := search(tables, workload, arch, "latency")).best.empty:
        return
    bound = float(truth.best["latency"].iloc[0]) * (1.0, 1.05, 1.5)[pick % 3]
    calls = []
    plain = latency_slack_tables(workload, arch, bound, workers=1)
    guessing = latency_slack_tables(workload, arch, bound, workers=1, early=lambda t: calls.append(t) and False)
    assert guessing.early is None and plain.skipped == guessing.skipped and plain.keys == guessing.keys
    assert not plain.guessed and set(guessing.order) == set(plain.order)
    for e in workload.einsum_names:
        assert guessing.results[e][2].complete
        assert frontier(plain.results[e][0], ("latency",)) == frontier(guessing.results[e][0], ("latency",)), e
    budgets = latency_slack_budgets(workload, arch, bound)
    for got in calls:  # the rows so far: each within its budget and as the plain set keeps it
        for e, (table, _, _) in got.items():
            assert (table["latency"] <= budgets[e] * (1 + RTOL)).all()
            assert all(dominated(row, plain.results[e][0], "latency") for _, row in table.iterrows()), e
    _bump("roots guessed" if guessing.guessed else "no root guessed")


@settings(max_examples=8, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_guessed_roots_keep_the_latency_set(problem, pick):
    check_guesses(*problem, pick=pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.integers(0, 10**6))
def test_guessed_roots_keep_the_latency_set_long(problem, pick):
    check_guesses(*problem, pick=pick)


def test_a_guess_that_missed_c_t_searches_the_rest_once_fed():
    """X = I, Y = X * W, Z = Y with a slow DRAM (0.25 GB/s) at 1.5 times the latency
    optimum: Y's root with X in DRAM, which ends first, gives Y in the buffer fewer c_T than
    its root with X in the buffer (re-reading X from DRAM under a loop over b is too slow),
    so Z's root reading Y from the buffer, guessed after the first, misses some; searched
    on the rest once fed, the tables are those without guesses and the Einsum-at-a-time
    reference's."""
    w, a = chain(a=4, capacity="16 B", dram={"bandwidth": "0.25 GB/s"})
    tables = {e: generate(e, w, a, objectives=("latency",))[0] for e in w.einsum_names}
    bound = 1.5 * float(search(tables, w, a, "latency").best["latency"].iloc[0])
    plain = latency_slack_tables(w, a, bound, workers=1)
    got = latency_slack_tables(w, a, bound, workers=1, early=lambda t: False)
    y = got.results["Y"][0]
    c_y = [(dict(k[0])["X"][0], dict(k[0])["Y"]) for k in y["compat"]]
    first = {ct for x, ct in c_y if x == "L0" and ct[0] == "L1"}
    assert got.guessed == (("Z", 1),) and first < {ct for _, ct in c_y if ct[0] == "L1"}
    assert got.order.index(("Z", 1)) > got.order.index(("Y", 3))
    whole = einsum_at_a_time(w, a, latency_slack_budgets(w, a, bound))
    for e in w.einsum_names:
        assert frontier(got.results[e][0], ("latency",)) == frontier(plain.results[e][0], ("latency",)), e
        assert frontier(got.results[e][0], ("latency",)) == frontier(whole[e], ("latency",)), e


@pytest.mark.slow
def test_the_probe_completes_i_qk_softmax_ffa_and_ffb_at_gpt3_batch_1():
    """At gpt3 batch 1, within the energy set's uniform budgets at U = 125.64 mJ (the
    optimum, 125.6392 mJ, rounded up: README's energy-set command), the probe's limits
    (`ffm.slack.PROBE`, `PROBE_WAITING`) let I, QK_softmax, FFA and FFB complete and cut
    the others, by the keys they hold waiting, on any machine (docs/pmapgen.md, "A probe
    by size", "A probe by breadth"). FFA's size is within 10% of the size limit and its
    most keys waiting (398) within 26% of the other: a change that grows either past its
    limit fails here, not in a benchmark."""
    import math

    import arch as arch_specs
    import workloads
    from ffm import slack
    from pmapgen.generate import WAITING_LIMIT
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    minima = generate_all(w, a, objectives=("energy",), budgets={e: math.inf for e in w.einsum_names}, rising=True,
                          progress=False)
    assert all(r[2].complete for r in minima.values())
    budgets = slack_budgets({e: float(r[0]["energy"].min()) for e, r in minima.items()},
                            125.64e9 * (1 + slack.RTOL))
    probed = generate_all(w, a, objectives=("energy",), budgets=budgets, progress=False, split=False,
                          max_size=slack.PROBE, max_waiting=slack.PROBE_WAITING)
    assert {e for e, r in probed.items() if r[2].complete} == {"I", "QK_softmax", "FFA", "FFB"}
    assert all(r[2].stopped_by == WAITING_LIMIT for r in probed.values() if not r[2].complete)
