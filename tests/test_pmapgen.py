"""pmapgen keeps everything that could be optimal: every legal pmapping found by brute
force is weakly dominated by a pmapgen row with the same compatibility key, and every
pmapgen row rebuilds to a legal pmapping whose evaluation equals the row."""
import math
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arch as arch_specs
import workloads
from looptree.model import analyze, cost
from looptree.nodes import Loop
from looptree.validate import canonical_loops, compatibility, fused_depth, normalize, validate_pmapping
from pmapgen.generate import (OBJECTIVES, evaluate_template, generate, held_within, prune_across_templates, prune_rows,
                              rebuild, template_rows, to_frame)
from pmapgen.constraints import Constraints
from pmapgen.pareto import pareto_mask
import pmapgen.prefixes as prefixes
from pmapgen.prefixes import COMPACT_ROWS, _compact, _concat, _widened, energy_lower_bound, generate_by_prefixes
from pmapgen.templates import Template, templates
from pmapgen.tiles import tile_shape_chunks
from tests.oracle import all_pmappings
from tests.strategies import arch_specs_, einsum_specs

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def small_problems(draw, max_levels: int = 3, bandwidths: bool = False):
    """A main Einsum whose output feeds a vector copy and whose first input is produced by
    one, so both may be fused; 2-3 levels with small capacities (`bandwidths`: ports
    limited, `tests.strategies.port_limits`)."""
    spec = draw(einsum_specs(max_inputs=2, max_ranks=3, sizes=(2, 3, 4)))
    main = spec["einsums"][0]
    out, rhs = main.split(" = ")
    first = rhs.split(" * ")[0]
    extra = []
    if draw(st.booleans()):
        extra.append(("pre", f"{first} = X{first[first.index('['):]}"))
    if draw(st.booleans()):
        extra.append(("post", f"Y{out[out.index('['):]} = {out}"))
    spec["einsums"] = [e for where, e in extra if where == "pre"] + [main] + [e for where, e in extra if where == "post"]
    w = workloads.load(spec)
    a = arch_specs.load(draw(arch_specs_(max_levels=max_levels, capacities=["1 values", "16 B", "64 B", "inf"],
                                         bandwidths=bandwidths)))
    return w, a


def structure(p):
    """The template of a pmapping (tiles replaced by slot numbers) and its tiles."""
    slots = iter(range(100))
    nodes = tuple(Loop(n.rank_variable, next(slots), n.spatial) if isinstance(n, Loop) else n for n in p.nodes)
    return Template(p.einsum, p.compute.unit, nodes, sum(isinstance(n, Loop) for n in nodes)), \
        tuple(lp.tile for lp in p.loops)


def check(workload, arch, max_loops=2, generator=generate):
    table, templates, _ = generator("Z", workload, arch)
    by_key = {k: g for k, g in table.groupby("compat", sort=False)}
    shapes: dict = {}
    for p in all_pmappings(workload, arch, "Z", max_loops=max_loops):
        t, tiles = structure(normalize(p, workload))
        shapes.setdefault(t, []).append(tiles)
    checked = 0
    for t, tiles in shapes.items():
        rows = evaluate_template(t, np.array(tiles, dtype=np.int64).reshape(len(tiles), -1), workload, arch)
        crit = [c for c in rows.columns if c.startswith("res:")] + list(OBJECTIVES)
        for k in range(len(rows)):
            row = rows.iloc[k]
            checked += 1
            assert row["compat"] in by_key, f"no pmapgen group {row['compat']} for {t.with_tiles(row['tiles'])}"
            group = by_key[row["compat"]]
            mine = row[crit].to_numpy(dtype=float)
            ok = np.all(group[crit].to_numpy(dtype=float) <= mine * (1 + 1e-9) + 1e-12, axis=1)
            assert ok.any(), f"not dominated: {t.with_tiles(row['tiles'])}\n{row[crit]}\n{group[crit]}"
    # every row rebuilds to a legal pmapping whose evaluation equals the row
    for _, r in table.iterrows():
        p = normalize(rebuild(r, templates), workload)
        validate_pmapping(p, workload, arch)
        c = cost(analyze(p, workload, arch), workload, arch)
        assert np.isclose(c.energy_pJ, r["energy"]) and np.isclose(c.latency_s, r["latency"])
    return checked


@settings(max_examples=6, **SETTINGS)
@given(small_problems(max_levels=2))
def test_every_row_s_compatibility_key_is_the_model_s_of_the_pmapping_it_rebuilds_to(problem):
    """A table's `compat` (built part by part per row, `generate._compat_keys`) is, for every
    row of both generators, each shared tensor's c_T (`looptree.validate.compatibility`)
    and the fused loops (`canonical_loops` above `fused_depth`) of the pmapping it rebuilds to."""
    w, a = problem
    shared = sorted(t for t in w.einsum("Z").tensors if w.is_shared(t))
    for generator in (generate, generate_by_prefixes):
        table, templates_, _ = generator("Z", w, a)
        for _, row in table.iterrows():
            p = rebuild(row, templates_)
            loops = canonical_loops(p.loops[:fused_depth(p, w, a)])
            assert row["compat"] == (tuple((t, compatibility(p, t, w)) for t in shared),
                                     tuple((lp.rank_variable, lp.tile, lp.spatial) for lp in loops)), p


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2))
def test_pmapgen_dominates_brute_force(problem):
    check(*problem, max_loops=2)


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=2))
def test_prefix_search_dominates_brute_force(problem):
    check(*problem, max_loops=2, generator=generate_by_prefixes)


def frontier(table, objectives=OBJECTIVES):
    """Each compatibility group's frontier as a set of (key, criteria), taken after rounding
    to 9 decimals: two exhaustive generators sum energies in different orders, and a
    last-bit difference must not decide whether a tie is dominated. A reservation column
    no row uses is left out: a table has the columns of the templates its rows came from."""
    if table.empty:
        return set()
    crit = sorted(c for c in table.columns if c.startswith("res:") and table[c].notna().any()) + list(objectives)
    x = np.round(table[crit].to_numpy(dtype=float), 9)
    keys = [repr(k) for k in table["compat"]]
    keep = pareto_mask(np.nan_to_num(x, nan=np.inf), pd.factorize(pd.Series(keys))[0])  # no reservation: inf, as pmapgen does
    return {(k, *np.nan_to_num(row, nan=-1.0)) for k, row, kept in zip(keys, x, keep) if kept}


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2))  # 3 levels: the slow version below (about 15 s a case here)
def test_prefix_search_equals_template_enumeration(problem):
    """Pruning partial pmappings loses nothing: per compatibility group, the prefix search
    keeps exactly the frontier that evaluating every template's every tile shape keeps."""
    same_frontiers(*problem)


@settings(max_examples=6, **SETTINGS)
@given(small_problems(max_levels=2))
def test_prefix_search_with_every_waiting_part_compacted_equals_template_enumeration(problem):
    """Small problems' waiting parts stay under COMPACT_ROWS; with the threshold at 2,
    every part's constant columns are held once (read-only), and the frontiers are the same."""
    with mock.patch.object(prefixes, "COMPACT_ROWS", 2):
        same_frontiers(*problem)


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([OBJECTIVES, ("energy",)]))  # 3 levels: up to a minute a case
def test_pruning_across_templates_on_numbers_equals_pruning_the_table(problem, objectives):
    """`prune_across_templates` (groups from numbers) keeps exactly the rows the Pareto filter
    keeps of the table of every template's rows grouped by their compatibility keys."""
    w, a = problem
    for e in w.einsum_names:
        kept = [prune_rows(template_rows(t, tiles, w, a), objectives)
                for unit in a.computes_for(w.einsum(e)) for t in templates(w.einsum(e), w, a, unit.name)
                for tiles in tile_shape_chunks(t, w, a)]
        kept = [r for r in kept if len(r.tiles)]
        if not kept:
            continue
        table = to_frame(kept, w, a, list(range(len(kept))))
        crit = [c for c in table.columns if c.startswith("res:")] + list(objectives)
        x = table[crit].to_numpy(dtype=np.float64, na_value=np.inf)  # a reservation a template lacks: inf
        table = table[pareto_mask(x, pd.factorize(table["compat"])[0])].reset_index(drop=True)
        cut = prune_across_templates(kept, w, a, objectives)
        ids = [i for i, r in enumerate(cut) if len(r.tiles)]
        assert sum(len(r.tiles) for r in cut) == len(table)
        pd.testing.assert_frame_equal(to_frame([cut[i] for i in ids], w, a, ids).reset_index(drop=True),
                                      table[[c for c in table.columns if table[c].notna().any()]], check_like=True)


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=2))
def test_prefix_search_equals_template_enumeration_for_energy_alone(problem):
    """With energy the only objective, port times are no criterion and instances become
    one (more rows meet and are pruned): still exactly the enumeration's frontier."""
    same_frontiers(*problem, objectives=("energy",))


def same_frontiers(w, a, objectives=OBJECTIVES):
    for e in w.einsum_names:
        assert frontier(generate_by_prefixes(e, w, a, objectives=objectives)[0], objectives) \
            == frontier(generate(e, w, a, objectives=objectives)[0], objectives)


def same_frontiers_within_budget(w, a, quantile: float, objectives=OBJECTIVES):
    """With an energy budget (the lowest energy, or a quantile of the enumeration's), the
    prefix search keeps exactly the enumeration's frontier among pmappings within it: the
    energy floor of pmapgen.bounds never cuts a partial pmapping that could get under it,
    and its least value at the search's first partial pmappings is at most the minimum.
    No pmapping costs more than the budget and less than the least floor the search cut
    (`held_within`): the table is the frontier below that too."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=objectives)[0]
        if full.empty:
            continue
        assert energy_lower_bound(e, w, a) <= full["energy"].min() * (1 + 1e-9), e
        budget = float(np.quantile(full["energy"], quantile))
        within = full[full["energy"] <= budget * (1 + 1e-9)]
        got, _, stats = generate_by_prefixes(e, w, a, objectives=objectives, budget=budget)
        assert frontier(got, objectives) == frontier(within, objectives)
        held = held_within(stats)
        assert held >= budget, e
        above = full["energy"][full["energy"] > budget * (1 + 1e-9)]
        assert above.empty or above.min() >= held, e  # nothing between the budget and the least floor cut
        assert frontier(full[full["energy"] <= held], objectives) == frontier(got, objectives), e


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.0, 0.2, 0.6]))
def test_prefix_search_within_an_energy_budget_keeps_the_frontier_under_it(problem, quantile):
    same_frontiers_within_budget(*problem, quantile)


def rows_of(result) -> list:
    """A search result's rows (template, tiles, key, energy), sorted: its rows in any order."""
    table, templates = result[:2]
    return sorted((repr(templates[i]), tuple(t), repr(c), float(x))
                  for i, t, c, x in zip(table["template"], table["tiles"], table["compat"], table["energy"]))


@settings(max_examples=4, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([0.0, 0.5, 1.0]))
def test_a_search_after_others_keeps_what_a_fresh_one_keeps(problem, quantile):
    search_after_others(problem, quantile)


@pytest.mark.slow
@settings(max_examples=30, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([0.0, 0.5, 1.0]))
def test_a_search_after_others_keeps_what_a_fresh_one_keeps_long(problem, quantile):
    search_after_others(problem, quantile)


def search_after_others(problem, quantile) -> None:
    """What earlier searches left in this process (each space's storage states,
    `templates.storage_state`, and moves) changes nothing: after every Einsum's search, a
    budgeted search of each keeps the same rows from the same prefixes as one with every
    shared cache empty."""
    w, a = problem
    warm, budgets = {}, {}
    with mock.patch.dict(prefixes._SHARED_MEMOS, clear=True), mock.patch.dict(prefixes._SHARED_MOVES, clear=True):
        for e in w.einsum_names:
            table = generate_by_prefixes(e, w, a, objectives=("energy",))[0]  # fills its space's memo
            if not table.empty:
                budgets[e] = float(np.quantile(table["energy"], quantile))
        assert any(prefixes._SHARED_MEMOS.values())
        for e, budget in budgets.items():
            warm[e] = generate_by_prefixes(e, w, a, objectives=("energy",), budget=budget)
    for e, budget in budgets.items():
        with mock.patch.dict(prefixes._SHARED_MEMOS, clear=True), mock.patch.dict(prefixes._SHARED_MOVES, clear=True):
            cold = generate_by_prefixes(e, w, a, objectives=("energy",), budget=budget)
        assert rows_of(warm[e]) == rows_of(cold), e
        assert warm[e][2].templates == cold[2].templates and warm[e][2].tile_shapes == cold[2].tile_shapes, e


class TickingClock:
    """A clock that advances one second per reading: a time limit of n seconds stops the
    prefix search after a fixed number of steps, the same on every machine."""
    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([None, 0.5]))  # 2 levels rarely merge paths of two structures
def test_prefix_search_deepest_structure_first_processes_every_key_once_and_equals_level_order(problem, quantile):
    """With keys processed deepest fused structure first from the start (SUBTREE_ROWS below
    zero), every key is still processed once, after every row that can reach it: the same
    prefixes, rows and frontier as level by level (which the tests above compare with the
    enumeration), without and within a budget."""
    w, a = problem
    for e in w.einsum_names:
        with mock.patch.object(prefixes, "REACH_ORDER", False):  # (without a budget it would decide the order)
            level = generate_by_prefixes(e, w, a)
            budget = None if quantile is None or level[0].empty else float(np.quantile(level[0]["energy"], quantile))
            if budget is not None:
                level = generate_by_prefixes(e, w, a, budget=budget)
            with mock.patch.object(prefixes, "SUBTREE_ROWS", -1):
                deepest = generate_by_prefixes(e, w, a, budget=budget)
        assert (deepest[2].templates, deepest[2].tile_shapes) == (level[2].templates, level[2].tile_shapes), e
        assert frontier(deepest[0]) == frontier(level[0]), e


# three levels with ports limited, searched with latency among the objectives or alone
KEY_ORDER_CASES = (small_problems(max_levels=3, bandwidths=True), st.sampled_from([("energy", "latency"), ("latency",)]))


def watched(e: str, w, a, objectives, **kwargs) -> tuple:
    """`generate_by_prefixes`' result, and each `_Search` it ran with the keys it processed
    in order: the searches checked are the ones whose table is compared, run once."""
    runs: list = []
    run, process = prefixes._Search.run, prefixes._Search._process

    def watched_run(search, *args, **kw):
        runs.append((search, []))
        return run(search, *args, **kw)

    def watched_process(search, key):
        next(keys for s, keys in runs if s is search).append(key)
        return process(search, key)

    with mock.patch.object(prefixes._Search, "run", watched_run), \
            mock.patch.object(prefixes._Search, "_process", watched_process):
        out = generate_by_prefixes(e, w, a, objectives=objectives, **kwargs)
    return out, runs


def keys_reached_first(problem, objectives) -> None:
    """Without a budget, keys are handed out one at a time, the highest progress no waiting
    key may reach first (`key_order.Reached`): every key is still processed once, after
    every row that reaches it (a key processed before its last rows came would be pushed
    to again and processed twice), and the frontier is level order's. The rows built may
    differ: finished rows drop the partial rows they dominate as they come."""
    w, a = problem
    for e in w.einsum_names:
        reached, runs = watched(e, w, a, objectives)
        assert reached[2].complete and len(runs) == len(a.computes_for(w.einsum(e))), e
        for search, processed in runs:
            assert search.order.reached is not None
            assert len(processed) == len(set(processed)) == search.stats.prefixes, e
        with mock.patch.object(prefixes, "REACH_ORDER", False):
            level = generate_by_prefixes(e, w, a, objectives=objectives)
        assert frontier(reached[0], objectives) == frontier(level[0], objectives), e


@settings(max_examples=5, **SETTINGS)
@given(*KEY_ORDER_CASES)
def test_keys_reached_first_are_each_processed_once_and_keep_the_frontier(problem, objectives):
    keys_reached_first(problem, objectives)


@pytest.mark.slow
@settings(max_examples=30, **SETTINGS)
@given(*KEY_ORDER_CASES)
def test_keys_reached_first_are_each_processed_once_and_keep_the_frontier_long(problem, objectives):
    keys_reached_first(problem, objectives)


def keys_spilled(problem, objectives) -> None:
    """Past `SPILL_AT` of its waiting rows, the search takes the highest-progress key
    whether or not rows may still come to it; rows that come later wait there again and
    are processed again. With the share at 0 every key is taken so, the most out of order a
    search can go: every row is still extended once, so the frontier is level order's, and
    the keys processed again are counted (`Stats.spilled`)."""
    w, a = problem
    for e in w.einsum_names:
        with mock.patch.object(prefixes, "REACH_ORDER", False):
            level = generate_by_prefixes(e, w, a, objectives=objectives)
        with mock.patch.object(prefixes, "SPILL_AT", 0.0):
            spilled, runs = watched(e, w, a, objectives, max_rows=1 << 40)
        assert spilled[2].complete and len(runs) == len(a.computes_for(w.einsum(e))), e
        for search, processed in runs:
            assert search.stats.spilled == search.stats.prefixes == len(processed), e
        assert frontier(spilled[0], objectives) == frontier(level[0], objectives), e


@settings(max_examples=3, **SETTINGS)
@given(*KEY_ORDER_CASES)
def test_keys_spilled_before_all_their_rows_came_keep_the_frontier(problem, objectives):
    keys_spilled(problem, objectives)


@pytest.mark.slow
@settings(max_examples=30, **SETTINGS)
@given(*KEY_ORDER_CASES)
def test_keys_spilled_before_all_their_rows_came_keep_the_frontier_long(problem, objectives):
    keys_spilled(problem, objectives)


def reordered_blocks_move_alike(search, limit: int) -> int:
    """Walks the prefixes `search`'s moves (`_Search._moves`: `templates.moves` and the
    search's own order rule) reach from its roots, depth first, at most `limit` of them.
    Asserts that wherever a block holds two or more loops, the prefix with the block as a
    key holds it (`prefixes.block_set`: the loops but the last in name order, then the
    last) has the same moves, leading to prefixes keyed alike. Returns how many blocks
    that reordered."""
    from pmapgen.templates import roots
    normal = lambda p: p.but(block=prefixes.block_set(p.block))
    todo = [p for p, _ in roots(search.sp, search.w)]
    seen, reordered = set(todo), 0
    while todo and len(seen) < limit:
        p = todo.pop()
        options = search._moves(p)[0]
        if len(p.block) >= 2:
            q = normal(p)
            reordered += q != p
            assert [(m, normal(c), a is None) for m, c, a in options] == \
                [(m, normal(c), a is None) for m, c, a in search._moves(q)[0]], p
        for _, c, _ in options:
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return reordered


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3, bandwidths=True), st.sampled_from([("energy",), ("latency",)]),
       st.booleans())
def test_a_block_s_loops_before_its_last_may_come_in_any_order(problem, objectives, ordered):
    """Rows whose blocks hold the same loops and end with the same one wait at one key
    (`prefixes.BLOCK_SETS`): every rule on the next move reads the block as a set and its
    last loop. Checked on the moves themselves, with and without a loop order imposed
    (`ordered`: the rank variables' reverse name order, `Constraints.loop_order`)."""
    for search in move_searches(problem, objectives, ordered):
        reordered_blocks_move_alike(search, 20_000)


def move_searches(problem, objectives, ordered: bool):
    """A prefix search per Einsum and compute unit of `problem`, for checks on its moves:
    within an infinite latency budget if latency is an objective, and (`ordered`) with
    the rank variables' reverse name order imposed (`Constraints.loop_order`)."""
    w, a = problem
    for e in w.einsum_names:
        ranks = tuple(sorted(w.einsum(e).rank_variables, reverse=True)) if ordered else ()
        c = Constraints(loop_order=ranks, latency_budget=math.inf if "latency" in objectives else None)
        for unit in a.computes_for(w.einsum(e)):
            yield prefixes._Search(e, w, a, unit.name, c, objectives)


def gpt3_v_searches():
    """gpt3's V on tpuv4i at batch 1 (four rank variables in three classes): a prefix
    search within its latency floor (the search's own order rule on) and one for energy."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    unit = a.computes_for(w.einsum("V"))[0].name
    for c, objectives in ((Constraints(latency_budget=einsum_latency_floor("V", w, a)), ("latency",)),
                          (Constraints(), ("energy",))):
        yield prefixes._Search("V", w, a, unit, c, objectives)


def test_gpt3_v_s_blocks_before_their_last_loop_may_come_in_any_order():
    """As above on gpt3's V (`gpt3_v_searches`). Sorting the whole block instead (its last
    loop too) fails it."""
    for search in gpt3_v_searches():
        assert reordered_blocks_move_alike(search, 20_000) > 100


def wider_keys_allow_every_move_of_narrower_ones(search, limit: int) -> int:
    """Walks the prefixes `search`'s moves reach from its roots, depth first, at most
    `limit`, as keys hold them (`prefixes.block_set`). For every two of them equal but for
    the bookkeeping of which moves may come next, where the first covers the second
    (`_Search._wider`, or equal but for a last temporal loop indexing only tensors the
    other's does, or none for the other), asserts that the second may end only if the
    first may, and that each of its moves is one of the first's, to a child the first's
    child covers. Returns how many `_wider` pairs were checked."""
    from pmapgen.templates import roots
    relevance = search.sp.relevance
    normal = lambda p: p.but(block=prefixes.block_set(p.block))
    masked = lambda p: p.but(last="", last_run=(), last_temporal=None, block=(), loose=False)

    def covers(w, n) -> bool:
        if w == n or search._wider(w, n):
            return True
        return w == n.but(last_temporal=w.last_temporal) and (
            n.last_temporal is None or (w.last_temporal is not None
                                        and relevance[w.last_temporal] <= relevance[n.last_temporal]))

    todo = [normal(p) for p, _ in roots(search.sp, search.w)]
    seen = set(todo)
    while todo and len(seen) < limit:
        for _, c, _ in search._moves(todo.pop())[0]:
            if (c := normal(c)) not in seen:
                seen.add(c)
                todo.append(c)
    groups: dict = {}
    for p in seen:
        groups.setdefault(masked(p), []).append(p)
    checked = 0
    for group in groups.values():
        for w in group:
            for n in group:
                if w == n or not covers(w, n):
                    continue
                checked += search._wider(w, n)
                assert w.done(search.sp) or not n.done(search.sp), (w, n)
                wide = {}
                for m, c, _ in search._moves(w)[0]:
                    wide.setdefault(m, []).append(normal(c))
                for m, c, _ in search._moves(n)[0]:
                    assert any(covers(cw, normal(c)) for cw in wide.get(m, ())), (w, n, m)
    return checked


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3, bandwidths=True), st.sampled_from([("energy",), ("latency",)]),
       st.booleans())
def test_a_wider_key_allows_every_move_of_a_narrower_one(problem, objectives, ordered):
    """The rows a key keeps prune those waiting at narrower keys (`prefixes.CROSS_KEYS`,
    `_Search._prune_narrower`), which is sound if every continuation of a narrower key is
    one of the wider's: checked on the moves themselves, with and without a loop order
    imposed."""
    for search in move_searches(problem, objectives, ordered):
        wider_keys_allow_every_move_of_narrower_ones(search, 3_000)


def test_gpt3_v_s_wider_keys_allow_every_move_of_narrower_ones():
    """As above on gpt3's V (`gpt3_v_searches`), where many pairs of keys are so related."""
    for search in gpt3_v_searches():
        assert wider_keys_allow_every_move_of_narrower_ones(search, 6_000) > 100


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.0, 0.3, 1.0]), st.integers(0, 60), st.booleans())
def test_a_budgeted_search_cut_short_bounds_the_minimum_from_below(problem, quantile, steps, deepest):
    """Wherever the time limit stops a budgeted prefix search, `Stats.lower_bound` (the
    least floor of the rows still waiting and energy of the rows done) is at most the
    enumeration's minimum energy; when the search completes, it is that minimum (the
    budget being at least it). In either order of keys (`deepest`: deepest structure
    first from the start)."""
    import pmapgen.prefixes as prefixes
    w, a = problem
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        if full.empty:
            continue
        least = float(full["energy"].min())
        budget = float(np.quantile(full["energy"], quantile))
        real = prefixes.time
        prefixes.time = TickingClock()
        try:
            with mock.patch.object(prefixes, "SUBTREE_ROWS", -1 if deepest else prefixes.SUBTREE_ROWS):
                stats = generate_by_prefixes(e, w, a, objectives=("energy",), time_limit=steps, budget=budget)[2]
        finally:
            prefixes.time = real
        assert stats.lower_bound <= least * (1 + 1e-9), e
        if stats.complete:
            assert stats.lower_bound == pytest.approx(least, rel=1e-9), e


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([0.0, 0.5, 1.0]))
def test_rising_budgets_find_the_minimum(problem, quantile):
    """Budgets rising from the energy floor stop at the first that keeps a pmapping, at
    most the ceiling (an enumerated pmapping's energy): its least energy is the
    enumeration's minimum, and the table is the enumeration's frontier within it."""
    from pmapgen.prefixes import generate_by_rising_budgets
    w, a = problem
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        if full.empty:
            continue
        ceiling = float(np.quantile(full["energy"], quantile))
        table, _, stats = generate_by_rising_budgets(e, w, a, ceiling, objectives=("energy",))
        assert stats.complete and stats.budget <= ceiling
        assert float(table["energy"].min()) == pytest.approx(float(full["energy"].min()), rel=1e-9), e
        assert stats.lower_bound == pytest.approx(float(full["energy"].min()), rel=1e-9), e
        within = full[full["energy"] <= stats.budget * (1 + 1e-9)]
        assert frontier(table, ("energy",)) == frontier(within, ("energy",)), e


def test_a_waiting_part_holds_a_constant_column_once_and_the_others_narrow_with_the_same_values():
    """`_compact`: a column equal on every row becomes one broadcast value (no memory per
    row, read-only); the others are held in the narrowest type that holds them exactly
    (non-negative integers unsigned, floats as float32 where each value is one), and
    `_widened` and `_concat` give back every value at int64 or float64. A small part is
    kept as it is."""
    small = {"a": np.full(COMPACT_ROWS - 1, 7.5), "tiles": np.zeros((COMPACT_ROWS - 1, 0), np.int64)}
    assert _compact(dict(small))["a"].strides[0] != 0
    n = 1000
    part = {"a": np.full(n, 7.5), "b": np.arange(n) * 2.0 ** 40, "c": np.arange(n) / 10, "d": np.arange(n) * 70,
            "neg": np.arange(n) - 3, "big": np.arange(n) * 2 ** 33, "tiles": np.tile([2, 300], (n, 1))}
    before = {c: v.copy() for c, v in part.items()}
    out = _compact(part)
    assert out["a"].strides == (0,) and out["a"].base.size == 1
    assert np.array_equal(out["a"][[1, 5]], [7.5, 7.5]) and out["a"][[1, 5]].flags.writeable
    with pytest.raises(ValueError):
        out["a"][0] = 1.0
    assert {c: out[c].dtype.name for c in "bcd"} == {"b": "float32", "c": "float64", "d": "uint32"}
    assert {c: out[c].dtype.name for c in ("neg", "big", "tiles")} == {"neg": "int64", "big": "int64",
                                                                       "tiles": "uint16"}
    for wide in (_widened(out), _concat([out, _compact({c: v[:300].copy() for c, v in before.items()})])):
        for c, v in before.items():
            got = wide[c][:n]
            assert got.dtype == v.dtype and np.array_equal(got, v), c


@settings(max_examples=50, **SETTINGS)
@given(st.sampled_from([12, 64, 96, 2048, 3 * 5 * 7]), st.data())
def test_divisor_choices_are_each_row_s_bounds_in_order(size, data):
    """`_divisor_choices` (compiled): per row, every loop bound >= 2 dividing its extent with
    the tile in `allowed`, rows in order and each row's bounds in `_bounds` order."""
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    extent = np.array(data.draw(st.lists(st.sampled_from(divisors), max_size=8)), dtype=np.int64)
    allowed = data.draw(st.none() | st.frozensets(st.sampled_from(divisors), min_size=1))
    rows, bounds = prefixes._divisor_choices(extent, size, allowed)
    expected = [(i, x // t) for i, x in enumerate(extent.tolist()) for t in reversed(divisors)
                if t < x and x % t == 0 and (not allowed or t in allowed)]
    assert list(zip(rows.tolist(), bounds.tolist())) == expected
    assert rows.dtype == bounds.dtype == np.int64


def test_a_prefix_s_kept_hash_is_dropped_by_but_and_by_pickling():
    """`Prefix` keeps its hash once computed: `but` must not copy it to a changed prefix,
    and a pickled prefix must not carry it into another process (string hashes differ)."""
    import pickle
    from pmapgen.templates import roots, space
    w = workloads.load("matmul_chain", length=2, M=8, big=16, small=8)
    a = arch_specs.load("simple")
    e = w.einsums[0]
    sp = space(e, w, a.computes_for(e)[0].name, a, Constraints())
    prefix, _ = next(iter(roots(sp, w)))
    h = hash(prefix)
    other = prefix.but(depth=prefix.depth + 1)
    assert other != prefix and "_hash" not in other.__dict__
    assert prefix.but(depth=prefix.depth) == prefix and hash(prefix.but(depth=prefix.depth)) == h
    again = pickle.loads(pickle.dumps(prefix))
    assert "_hash" not in again.__dict__ and again == prefix and hash(again) == h


def built_children_floors(search, key, move, prefix, cols, rows, bounds) -> np.ndarray:
    """The energy floor of each child of a loop move, built in full by `after_loop` on
    columns (with the fills of the tensors the child can place no more node of zeroed)."""
    from looptree.model import after_loop
    child = {c: v[rows] for c, v in cols.items()}
    above = search._above(child, key.prefix.depth, dict(key.lifetimes))
    for lp, b in zip(move.nodes, bounds):
        above = after_loop(above, search.e, lp.rank_variable, b, search._dim(lp))
    search._store(child, above)
    for t in set(search.e.tensors) - search._open(prefix):
        child[f"f:{t}"] = np.zeros_like(child[f"f:{t}"])
    return search._floor(prefix, child)


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.sampled_from([1.0, 1.2, 1.5, 3.0]))
def test_loop_children_are_cut_as_their_own_energy_floors_would_cut_them(problem, factor):
    """A loop move's budget cut is decided before its children are built (for one temporal
    loop, a row's larger bounds are not tried once one is over). Each decision equals the
    one the floor of the fully built child gives."""
    from pmapgen.prefixes import BUDGET_RTOL, _Search
    checked = []

    class Checked(_Search):
        def _over_budget_cut(self, key, move, prefix, cols, rows, bounds):
            got_rows, got_bounds = super()._over_budget_cut(key, move, prefix, cols, rows, bounds)
            ok = built_children_floors(self, key, move, prefix, cols, rows, bounds) <= self.budget * (1 + BUDGET_RTOL)
            assert np.array_equal(got_rows, rows[ok])
            assert all(np.array_equal(g, b[ok]) for g, b in zip(got_bounds, bounds))
            checked.append((len(rows), int(ok.sum())))
            return got_rows, got_bounds

    w, a = problem
    with mock.patch.object(prefixes, "LOOP_KERNEL", False):  # (the numpy path: the kernel's, below)
        for e in w.einsum_names:
            budget = energy_lower_bound(e, w, a) * factor
            for unit in a.computes_for(w.einsum(e)):
                Checked(e, w, a, unit.name, Constraints(), ("energy",), budget).run(None)
    assert checked


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3))
def test_child_floors_from_the_parent_equal_the_built_children_s(problem):
    """`pmapgen.bounds.child_floors`, from the parent rows' inputs and the bounds through
    `loop_step` (the model's `after_loop` run on symbols), gives exactly the floor of each
    child built on columns; and for one temporal loop over a rank variable that indexes
    each tensor at most once, a parent's children's floors do not fall as the bound grows
    (what lets the budget cut stop at a row's first bound over)."""
    from pmapgen.bounds import child_floors, floor_inputs, loop_step
    from pmapgen.prefixes import _Search
    seen = {"moves": 0, "runs": 0}

    class Checked(_Search):
        def _over_budget_cut(self, key, move, prefix, cols, rows, bounds):
            built = built_children_floors(self, key, move, prefix, cols, rows, bounds)
            loops = tuple((lp.rank_variable, self._dim(lp)) for lp in move.nodes)
            step = loop_step(self.e, loops, frozenset(self.e.tensors) - self._open(prefix))
            got = child_floors(self.floor, *floor_inputs(self.floor, cols), rows, np.column_stack(bounds), step,
                               self._plan(prefix))
            assert np.array_equal(got, built)
            seen["moves"] += 1
            if len(loops) == 1 and loops[0][1] is None and self._monotone[loops[0][0]]:
                for r in np.unique(rows):
                    run = built[rows == r]  # (inf where nothing fits: inf >= inf holds, np.diff would give nan)
                    assert np.all(run[1:] >= run[:-1]) and np.all(np.diff(bounds[0][rows == r]) > 0)
                    seen["runs"] += 1
            return super()._over_budget_cut(key, move, prefix, cols, rows, bounds)

    w, a = problem
    with mock.patch.object(prefixes, "LOOP_KERNEL", False):  # (the numpy path: the kernel's, below)
        for e in w.einsum_names:
            for unit in a.computes_for(w.einsum(e)):
                Checked(e, w, a, unit.name, Constraints(), ("energy",), math.inf).run(None)
    assert seen["moves"]


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3))
def test_a_spatial_group_s_box_bound_is_at_most_each_child_s_floor(problem):
    """`pmapgen.bounds.box_floors`: for every spatial group of prefix searches on random
    small problems, a parent row's bound over its box of bounds is at most the floor of
    each child the group builds from it (so `_box_cut` drops no row with a child within
    the budget)."""
    check_box_bound(problem)


def check_box_bound(problem) -> None:
    from pmapgen.prefixes import _Search

    class Checked(_Search):
        def _box_cut(self, move, prefix, cols, rows):
            self.box = dict(zip(rows.tolist(), self._box_floors(move, prefix, cols, rows)))
            return rows

        def _over_budget_cut(self, key, move, prefix, cols, rows, bounds):
            if all(lp.spatial is not None for lp in move.nodes):
                built = built_children_floors(self, key, move, prefix, cols, rows, bounds)
                box = np.array([self.box[r] for r in rows.tolist()])
                assert np.all(box <= built * (1 + 1e-12) + 1e-9), (move, box, built)
            return super()._over_budget_cut(key, move, prefix, cols, rows, bounds)

    w, a = problem
    with mock.patch.object(prefixes, "LOOP_KERNEL", False):  # (the numpy path: the kernel's, below)
        for e in w.einsum_names:
            for unit in a.computes_for(w.einsum(e)):
                Checked(e, w, a, unit.name, Constraints(), ("energy",), math.inf).run(None)


def test_the_box_bound_drops_spatial_rows_and_changes_no_result():
    """gpt3's QK at 64 tokens on tpuv4i within 1.3 times its energy floor: the spatial
    groups' box bound (`_box_cut`) drops most parent rows before their choices are
    enumerated, and the search builds the same children and keeps the same table as
    with every row's choices computed. (Until the floor capped the array's spreads by the
    extents left, 41,779 parent rows reached it and it kept 25, under 1 in 100; the
    capped floor now cuts all but 121 of them first, and it keeps 24 of those.)"""
    from pmapgen.prefixes import _Search
    w, a = workloads.load("gpt3", batch=1, seq_len=64), arch_specs.load("tpuv4i")
    budget = 1.3 * energy_lower_bound("QK", w, a)
    counts = {"in": 0, "out": 0}
    real = _Search._box_cut

    def counted(self, move, prefix, cols, rows):
        out = real(self, move, prefix, cols, rows)
        counts["in"], counts["out"] = counts["in"] + len(rows), counts["out"] + len(out)
        return out

    with mock.patch.object(prefixes, "LOOP_KERNEL", False):  # (the numpy path: the kernel's, below)
        with mock.patch.object(_Search, "_box_cut", counted):
            cut = generate_by_prefixes("QK", w, a, objectives=("energy",), budget=budget)
        with mock.patch.object(_Search, "_box_cut", lambda self, move, prefix, cols, rows: rows):
            whole = generate_by_prefixes("QK", w, a, objectives=("energy",), budget=budget)
    kernel = generate_by_prefixes("QK", w, a, objectives=("energy",), budget=budget)
    assert counts["out"] < counts["in"] / 4
    assert (cut[2].templates, cut[2].tile_shapes) == (whole[2].templates, whole[2].tile_shapes)
    assert len(cut[0]) and frontier(cut[0], ("energy",)) == frontier(whole[0], ("energy",))
    assert (kernel[2].templates, kernel[2].tile_shapes, kernel[2].cut_floor) == \
        (cut[2].templates, cut[2].tile_shapes, cut[2].cut_floor)
    assert frontier(kernel[0], ("energy",)) == frontier(cut[0], ("energy",))


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([1.0, 1.1, 1.5, 3.0]), st.integers(0, 2 ** 16))
def test_the_loop_kernel_gives_the_numpy_path_s_choices_and_cuts(problem, factor, seed):
    """`pmapgen.loop_choices` (`prefixes.LOOP_KERNEL`): for every loop move of prefix
    searches on random small problems within a budget, the kernel keeps the same (row,
    bounds) choices in the same order as the numpy path (`_Search._loop_choices`: the
    box, the divisor choices, the floor cut), and notes the same cuts (`cut_floor`,
    `budget_cut`, `lowest_floor`); so too with a budget per row (`kb`, as key budgets
    give), drawn around the search's."""
    check_loop_kernel(problem, factor, seed)


@pytest.mark.slow
@settings(max_examples=80, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([1.0, 1.1, 1.5, 3.0]), st.integers(0, 2 ** 16))
def test_the_loop_kernel_gives_the_numpy_path_s_choices_and_cuts_long(problem, factor, seed):
    check_loop_kernel(problem, factor, seed)


def check_loop_kernel(problem, factor: float, seed: int) -> None:
    from pmapgen.prefixes import _Search
    rng = np.random.default_rng(seed)
    seen = {"moves": 0, "kept": 0, "spatial": 0}

    class Both(_Search):
        def _noted(self) -> tuple:
            return self.cut_floor, self.budget_cut, self.lowest_floor

        def _within_budget(self, move, prefix, cols, rows):
            per_row = {**cols, "kb": self.budget * rng.uniform(0.9, 1.1, len(cols["row"]))}
            for here in (per_row, cols):  # (the search's own last: what it notes stays)
                before = self._noted()
                got = super()._within_budget(move, prefix, here, rows)
                noted = self._noted()
                self.cut_floor, self.budget_cut, self.lowest_floor = before
                want = self._loop_choices(None, move, prefix, here, rows)
                assert np.array_equal(got[0], want[0]) and len(got[1]) == len(move.nodes)
                assert all(np.array_equal(g, b) for g, b in zip(got[1], want[1]))
                assert self._noted() == noted
                if here is per_row:
                    self.cut_floor, self.budget_cut, self.lowest_floor = before
            seen["moves"] += 1
            seen["kept"] += len(got[0])
            seen["spatial"] += all(lp.spatial is not None for lp in move.nodes)
            return got

    w, a = problem
    for e in w.einsum_names:
        budget = energy_lower_bound(e, w, a) * factor
        for unit in a.computes_for(w.einsum(e)):
            Both(e, w, a, unit.name, Constraints(), ("energy",), budget).run(None)
    assert seen["moves"]


def floors_below_completions(problem, column: str = "energy") -> int:
    """Runs the prefix search with an infinite budget (every floor computed, nothing cut)
    and checks each surviving partial pmapping's energy floor against the final energy of
    every pmapping the search completes from it. Returns how many pairs it checked.
    `column="latency"`: the latency floor (`pmapgen.latency_floor`, with its ports' floors)
    against the final latency, within an infinite latency budget. Done rows are not pruned
    (`prefixes.DONE_PRUNE` off), nor partial rows by them (`prefixes.INCUMBENT_CUT` off):
    every completion the search could reach is checked."""
    import math
    from unittest import mock

    from pmapgen import prefixes
    from pmapgen.constraints import Constraints
    from pmapgen.prefixes import _Search
    floors: dict = {}  # (parent record, parent row, move, tiles) -> the child's floor

    class Recorded(_Search):
        def _push(self, key, parent, move, cols, tiles, checked=False):
            if len(tiles):
                got = self._floor(key.prefix, cols) if column == "energy" else self._latency_floor(key.prefix, cols)
                for j, f in enumerate(got):
                    floors[parent, int(cols["row"][j]) if "row" in cols else 0, move, tuple(tiles[j])] = f
            super()._push(key, parent, move, cols, tiles, checked)

    w, a = problem
    checked = 0
    for e in w.einsum_names:
        for unit in a.computes_for(w.einsum(e)):
            s = Recorded(e, w, a, unit.name, Constraints() if column == "energy" else Constraints(latency_budget=math.inf),
                         (column,), math.inf if column == "energy" else None)
            with mock.patch.object(prefixes, "DONE_PRUNE", False), mock.patch.object(prefixes, "INCUMBENT_CUT", False):
                s.run(None)
            for _, rid, done in s.done:
                for j, energy in zip(done["row"], done[column]):
                    r, i = rid, int(j)
                    while s.records[r].batches[0][0] is not None:
                        rec = s.records[r]
                        parent, move = rec.batches[rec.batch[i]]
                        width = sum(isinstance(n, Loop) for n in move.nodes)
                        f = floors[parent, int(rec.parent[i]), move, tuple(rec.tiles[i][:width])]
                        assert f <= energy * (1 + 1e-9), (e, move, f, energy)
                        checked += 1
                        r, i = parent, int(rec.parent[i])
    return checked


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=3))
def test_every_partial_pmapping_s_floor_is_at_most_its_completions_energy(problem):
    """The energy floor (pmapgen.bounds) of every partial pmapping the prefix search keeps is
    at most the energy of each pmapping completed from it: the floor is a lower bound
    along every path, not only where a budget happens to test it."""
    floors_below_completions(problem)


def groups_continuations_place(sp, p, memo) -> frozenset:
    """Every fanout level whose spatial group some continuation of prefix p places (the
    moves walked exhaustively, memoised per prefix)."""
    from pmapgen.templates import moves
    if p not in memo:
        memo[p] = frozenset()  # prefixes only grow: no cycle, but keep the walk safe
        out = set()
        for move, q in moves(sp, p):
            out |= set(q.groups_placed - p.groups_placed) | groups_continuations_place(sp, q, memo)
        memo[p] = frozenset(out)
    return memo[p]


@settings(max_examples=25, **SETTINGS)
@given(small_problems(max_levels=3).filter(lambda wa: any(m.fanout for m in wa[1].memories)))
def test_open_groups_hold_every_group_a_continuation_places(problem):
    """`open_groups` (the fanouts the energy floor still counts spread from) leaves out
    only fanouts whose group no continuation of the prefix places, checked on every
    prefix the moves reach (the hand case below shows one it closes)."""
    from pmapgen.templates import open_groups, roots, space
    w, a = problem
    for e in w.einsum_names:
        for unit in a.computes_for(w.einsum(e)):
            sp = space(w.einsum(e), w, unit.name, a, Constraints())
            memo: dict = {}
            for root, _ in roots(sp, w):
                groups_continuations_place(sp, root, memo)
            for p, reached in memo.items():
                assert reached <= open_groups(sp, p), (e, p, reached)


def test_open_groups_close_the_array_after_a_temporal_loop_under_local_buffer_nodes():
    """Hand case (gpt3 batch 1 on tpuv4i, QK): once every tensor's last node is in the
    LocalBuffer and a temporal loop follows, no storage run can come before the
    Register's 128 x 128 array, so its group is closed; before that loop it is open."""
    from dataclasses import replace
    from pmapgen.templates import Prefix, open_groups, space
    w = workloads.load("gpt3", batch=1, seq_len=2048)
    a = arch_specs.load("tpuv4i")
    sp = space(w.einsum("QK"), w, "MAC", a, Constraints())
    local, register = (a.memory_index[x] for x in ("LocalBuffer", "Register"))
    assert set(sp.groups) == {local, register}  # the cores above the LocalBuffer, the array above the Register
    p = Prefix(inner=(("K", local), ("Q", local), ("QK", local)), backing=frozenset(),
               shared_onchip=frozenset(), groups_placed=frozenset(), floor=0, deepest=local, loose=False,
               last="storage", last_run=(), last_temporal=None, block=(), loops=(0, 0, 0, 0), fused_ranks=frozenset(),
               depth=0)
    assert open_groups(sp, p) == {register}
    assert open_groups(sp, replace(p, last="temporal", loose=True, last_temporal="m", block=("m",))) == frozenset()
    assert open_groups(sp, replace(p, inner=(("K", 1), ("Q", local), ("QK", local)), last="temporal")) == {register}


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3), st.sampled_from([0.0, 0.1, 0.3, 0.6]))
def test_prefix_search_within_an_energy_budget_long(problem, quantile):
    same_frontiers_within_budget(*problem, quantile, objectives=("energy",))


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(small_problems(max_levels=3))
def test_prefix_search_equals_template_enumeration_long(problem):
    same_frontiers(*problem)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(small_problems(max_levels=3))
def test_pmapgen_dominates_brute_force_long(problem):
    check(*problem, max_loops=2)  # 3 loops on 3 levels: the oracle runs for many minutes per case


def kv_projections():
    """K and V projections, identical up to names, each read by a copy."""
    w = workloads.load({"name": "kv", "rank_sizes": {"m": 4, "d": 2, "e": 2, "f": 2},
                        "einsums": ["K[m,e] = I[m,d] * WK[d,e]", "V[m,f] = I[m,d] * WV[d,f]",
                                    "S[m,e] = K[m,e]", "T[m,f] = V[m,f]"]})
    a = arch_specs.load({"name": "a", "clock": "1 GHz", "levels": [
        {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit"},
        {"memory": "GLB", "capacity": "16 B", "read_energy": "0.1 pJ/bit"}, {"compute": "MAC", "energy": "1 pJ"}]})
    return w, a


def test_generate_all_with_budgets_and_stop_when_incomplete():
    """Budgets switch to the prefix search within them (identical Einsums get the larger
    budget of the two); `stop_when_incomplete` returns only what ran once one Einsum hits
    its time limit."""
    from pmapgen import generate_all
    w, a = kv_projections()
    full = {e: generate(e, w, a)[0] for e in w.einsum_names}
    budgets = {e: float(np.quantile(full[e]["energy"], 0.3)) for e in w.einsum_names}
    budgets["K"] = float(np.quantile(full["K"]["energy"], 0.6))
    results = generate_all(w, a, workers=2, progress=False, budgets=budgets)
    for e, group in (("K", "KV"), ("V", "KV"), ("S", "ST"), ("T", "ST")):
        budget = max(budgets[x] for x in group)
        within = full[e][full[e]["energy"] <= budget * (1 + 1e-9)]
        assert results[e][2].complete and frontier(results[e][0], OBJECTIVES) == frontier(within, OBJECTIVES), e
    cut = generate_all(w, a, workers=1, progress=False, budgets=budgets, time_limit=0.0, stop_when_incomplete=True)
    assert 0 < len(cut) < 4 and all(not s.complete and s.stopped_by == "time limit" for _, _, s in cut.values())


def test_generate_all_reuses_identical_einsums_and_matches_direct_generation():
    """K and V projections are identical up to names: generated once, renamed, and equal to
    generating the second directly (run in two worker processes)."""
    w, a = kv_projections()
    from pmapgen import generate_all
    from pmapgen.all_einsums import signature
    assert signature("K", w, None) == signature("V", w, None)
    results = generate_all(w, a, workers=2, progress=False)
    direct, templates, _ = generate("V", w, a)
    renamed, renamed_templates, _ = results["V"]
    assert sorted(map(repr, renamed["compat"])) == sorted(map(repr, direct["compat"]))
    # equal up to float summation order (tensor names differ, so sums run in another order)
    assert np.allclose(sorted(renamed["energy"]), sorted(direct["energy"]), rtol=1e-12)
    assert {t.nodes for t in renamed_templates} >= {templates[i].nodes for i in direct["template"]}


def test_constraints_equal_up_to_names_are_one_search():
    """K and V within keys (and c_T) equal up to names have one signature; the renamed
    result equals V's own keyed generation. A key that differs in more than names does not."""
    from pmapgen import generate_all
    from pmapgen.all_einsums import signature
    w, a = kv_projections()
    k_rows = generate("K", w, a, objectives=("energy",))[0]
    for k_key in dict.fromkeys(k_rows["compat"]):
        (i_k, k_k), fused = k_key[0], k_key[1]
        v_key = ((i_k, ("V", k_k[1])), tuple(("f" if r == "e" else r, tile, sp) for r, tile, sp in fused))
        for ck, cv in ((Constraints(key=k_key), Constraints(key=v_key)),
                       (Constraints(tensor_keys={"K": k_k[1]}, backing={"WK": ("DRAM",)}),
                        Constraints(tensor_keys={"V": k_k[1]}, backing={"WV": ("DRAM",)}))):
            assert signature("K", w, ck) == signature("V", w, cv)
            got = generate_all(w, a, {"K": ck, "V": cv}, objectives=("energy",), workers=1, progress=False,
                               einsums=("K", "V"))
            assert got["V"][2] is got["K"][2]  # one search, renamed
            assert frontier(got["V"][0], ("energy",)) == frontier(generate("V", w, a, cv, objectives=("energy",))[0],
                                                                  ("energy",))
    assert signature("K", w, Constraints(backing={"WK": ("DRAM",)})) != signature(
        "V", w, Constraints(backing={"WV": ("GLB",)}))


def test_union_of_two_results_rebuilds_every_row_as_before():
    """`union` puts two results' rows in one table; each row still rebuilds to the same
    pmapping (its template index moved past the first result's templates)."""
    from pmapgen.all_einsums import union
    w, a = kv_projections()
    first = {e: generate(e, w, a, objectives=("energy",)) for e in w.einsum_names}
    second = {e: generate(e, w, a, objectives=("energy", "latency")) for e in ("K", "S")}
    both = union(first, second)
    for e, (table, templates, _) in both.items():
        parts = [first[e]] + ([second[e]] if e in second else [])
        assert len(table) == sum(len(p[0]) for p in parts)
        expected = [rebuild(row, p[1]) for p in parts for _, row in p[0].iterrows()]
        assert [rebuild(row, templates) for _, row in table.iterrows()] == expected, e
    # a result with no rows, perhaps no columns (a keyed search with no key within its
    # budgets: `ffm.slack.slack_tables`), leaves the first's table as it is
    empty = union(first, {"K": (pd.DataFrame(), [], None)})
    assert empty["K"][0] is first["K"][0] and empty["K"][1] == first["K"][1]


def test_constraints_restrict_backing_fusion_order_and_tiles():
    """Each constraint removes exactly what it names: every row of a constrained run obeys
    it, and the unconstrained run has rows that do not."""
    from pmapgen import Constraints
    w = workloads.load({"name": "c", "rank_sizes": {"m": 4, "k": 2, "n": 4},
                        "einsums": ["Z[m,n] = A[m,k] * B[k,n]", "Y[m,n] = Z[m,n]"]})
    a = arch_specs.load({"name": "a", "clock": "1 GHz", "levels": [
        {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit"},
        {"memory": "GLB", "capacity": "64 B", "read_energy": "0.1 pJ/bit"}, {"compute": "MAC", "energy": "1 pJ"}]})

    def rows(c):
        table, templates, _ = generate("Z", w, a, c)
        return [normalize(rebuild(r, templates), w) for _, r in table.iterrows()]

    def backing(p):
        return p.backing("Z")[1]

    def fused(p):
        return [lp.rank_variable for lp in p.loops_above(p.backing("Z")[0])] if backing(p) == "GLB" else []

    free = rows(None)
    assert {backing(p) for p in free} == {"DRAM", "GLB"}
    assert all(backing(p) == "DRAM" for p in rows(Constraints(backing={"Z": ("DRAM",)})))
    assert any("n" in fused(p) for p in free)
    assert all("n" not in fused(p) for p in rows(Constraints(fusable_ranks=frozenset({"m"}))))
    def m_right_above_n(p):  # adjacent temporal loops m then n: one block, m outside n
        return any(isinstance(x, Loop) and isinstance(y, Loop) and not x.spatial and not y.spatial
                   and (x.rank_variable, y.rank_variable) == ("m", "n") for x, y in zip(p.nodes, p.nodes[1:]))

    assert any(m_right_above_n(p) for p in free)
    assert not any(m_right_above_n(p) for p in rows(Constraints(loop_order=("n", "m"))))
    assert any(lp.tile == 2 for p in free for lp in p.loops if lp.rank_variable == "m")
    assert all(lp.tile != 2 for p in rows(Constraints(tiles={"m": frozenset({1})}))
               for lp in p.loops if lp.rank_variable == "m")


def test_structures_with_the_same_fused_events_in_another_order_share_a_key_and_stay_apart():
    """A shared tensor backed above or below a fused loop (A's backing, then the loop over
    m, or the loop, then A's backing) leaves the same moves and costs ahead: their rows
    wait at one key (`Key.fused`, the events sorted) and are extended together, each row's
    own structure in its `sid` column. The search still keeps exactly the enumeration's
    frontier per compatibility group (which that order is part of: A's c_T)."""
    from pmapgen.prefixes import _Search
    w = workloads.load({"name": "c", "rank_sizes": {"m": 4, "k": 2, "n": 4},
                        "einsums": ["A[m,k] = X[m,k]", "Z[m,n] = A[m,k] * B[k,n]", "Y[m,n] = Z[m,n]"]})
    a = arch_specs.load({"name": "a", "clock": "1 GHz", "levels": [
        {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit"},
        {"memory": "GLB", "capacity": "64 B", "read_energy": "0.1 pJ/bit"}, {"compute": "MAC", "energy": "1 pJ"}]})
    shared = []

    class Recorded(_Search):
        def _process(self, key):
            sids = {int(s) for p in self.incoming[key].parts for s in np.unique(p["sid"])}
            if len(sids) > 1:
                assert {self._multisets[s] for s in sids} == {key.fused}
                shared.append({self._structures[s] for s in sids})
            super()._process(key)

    Recorded("Z", w, a, "MAC", Constraints(), ("energy", "latency")).run(None)
    assert any(len(orders) > 1 for orders in shared)
    same_frontiers(w, a)


@st.composite
def array_problems(draw, bandwidths: bool = False):
    """A matmul on three levels whose last holds one value and sits under a small systolic
    array (a dim that multicasts inputs over rank variables some input lacks, one that
    reduces the output over reduced ones; tpuv4i's shape in small): the spreads the floor
    caps by the extents a partial pmapping has left."""
    m, k, n = (draw(st.sampled_from([2, 4, 8])) for _ in range(3))
    w = workloads.load({"name": "array", "rank_sizes": {"m": m, "k": k, "n": n}, "bits": 8,
                        "einsums": ["Z[m,n] = A[m,k] * B[k,n]"]})
    spec = draw(arch_specs_(min_levels=3, max_levels=3, fanouts=False, capacities=["16 B", "32 B", "64 B", "inf"],
                            bandwidths=bandwidths))
    spec["levels"][2]["capacity"] = "1 values"
    spec["levels"][2]["fanout"] = {
        "X": {"size": draw(st.sampled_from([2, 4])), "multicast": True, "reduce": False, "iterates": "multicast"},
        "Y": {"size": draw(st.sampled_from([2, 4])), "multicast": False, "reduce": True, "iterates": "reduced"}}
    return w, arch_specs.load(spec)


@settings(max_examples=10, **SETTINGS)
@given(array_problems())
def test_every_partial_pmapping_s_floor_is_at_most_its_completions_energy_under_an_array(problem):
    """As above, where the spreads left to a partial pmapping are capped by its extents."""
    assert floors_below_completions(problem) > 0


@settings(max_examples=6, **SETTINGS)
@given(array_problems())
def test_a_spatial_group_s_box_bound_is_at_most_each_child_s_floor_under_an_array(problem):
    """`test_a_spatial_group_s_box_bound_is_at_most_each_child_s_floor` where the spreads are capped."""
    check_box_bound(problem)
