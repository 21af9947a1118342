"""pmapgen within one compatibility group (`Constraints.key`, `pmapgen.fixed_key`): the
prefix search and the per-template enumeration keep exactly the frontier of that group
in the enumeration without the key (itself checked against brute force in
tests/test_pmapgen.py), with and without an energy budget. The same for a part of the
key (`Constraints.tensor_keys`: one shared tensor's c_T): exactly the frontiers of the
groups that give it that c_T, and for sets of c_T per tensor (`Constraints.tensor_key_sets`),
exactly the frontiers of the groups that give each tensor one of its set."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmapgen.constraints import Constraints
from pmapgen.generate import OBJECTIVES, generate
from pmapgen.prefixes import energy_lower_bound, generate_by_prefixes, generate_by_rising_budgets
from tests.test_pmapgen import SETTINGS, frontier, small_problems


def groups_of(w, a, pick: int, objectives=OBJECTIVES):
    """Per Einsum with pmappings: (einsum, the exhaustive table, one of its keys, that group's rows)."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=objectives)[0]
        if full.empty:
            continue
        keys = list(dict.fromkeys(full["compat"]))
        key = keys[pick % len(keys)]
        yield e, full, key, full[[c == key for c in full["compat"]]]


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2), st.integers(0, 1000), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_fixed_key_keeps_exactly_its_group_s_frontier(problem, pick, objectives):
    same_group_frontiers(*problem, pick, objectives)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3), st.integers(0, 1000), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_fixed_key_keeps_exactly_its_group_s_frontier_long(problem, pick, objectives):
    same_group_frontiers(*problem, pick, objectives)


def same_group_frontiers(w, a, pick: int, objectives) -> None:
    for e, _, key, group in groups_of(w, a, pick, objectives):
        fixed = Constraints(key=key)
        by_prefixes = generate_by_prefixes(e, w, a, fixed, objectives=objectives)[0]
        assert all(c == key for c in by_prefixes["compat"])
        assert frontier(by_prefixes, objectives) == frontier(group, objectives)
        assert frontier(generate(e, w, a, fixed, objectives=objectives)[0], objectives) == frontier(group, objectives)


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.integers(0, 1000), st.sampled_from([0.0, 0.5]))
def test_a_fixed_key_within_a_budget_keeps_its_group_s_frontier_under_it(problem, pick, quantile):
    """The energy floor of the narrowed search is at most the group's minimum; a budget
    keeps the group's frontier under it, and rising budgets find the group's minimum."""
    w, a = problem
    for e, full, key, group in groups_of(w, a, pick, ("energy",)):
        fixed = Constraints(key=key)
        least = float(group["energy"].min())
        assert energy_lower_bound(e, w, a, fixed) <= least * (1 + 1e-9)
        budget = float(np.quantile(group["energy"], quantile))
        got = generate_by_prefixes(e, w, a, fixed, objectives=("energy",), budget=budget)[0]
        within = group[group["energy"] <= budget * (1 + 1e-9)]
        assert frontier(got, ("energy",)) == frontier(within, ("energy",))
        rising = generate_by_rising_budgets(e, w, a, float(full["energy"].max()), fixed, ("energy",))[0]
        assert np.isclose(rising["energy"].min(), least)


def test_a_key_naming_other_tensors_is_refused():
    from tests.test_pmapgen import kv_projections
    w, a = kv_projections()
    key = generate("V", w, a, objectives=("energy",))[0]["compat"].iloc[0]  # V's: names V and I, not K
    with pytest.raises(ValueError, match="shared tensors"):
        generate_by_prefixes("K", w, a, Constraints(key=key), objectives=("energy",))


def tensor_key_groups(w, a, pick: int):
    """Per Einsum with a shared tensor: (einsum, {tensor: c_T} of one of its rows, the
    exhaustive table's rows with that c_T)."""
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("energy",))[0]
        if full.empty or not full["compat"].iloc[0][0]:
            continue
        per_tensor = full["compat"].iloc[pick % len(full)][0]
        t, c_t = per_tensor[(pick // len(full)) % len(per_tensor)]
        yield e, {t: c_t}, full[[dict(c[0])[t] == c_t for c in full["compat"]]]


def same_tensor_key_frontiers(w, a, pick: int) -> None:
    for e, tensor_keys, rows in tensor_key_groups(w, a, pick):
        fixed = Constraints(tensor_keys=tensor_keys)
        for got in (generate_by_prefixes(e, w, a, fixed, objectives=("energy",))[0],
                    generate(e, w, a, fixed, objectives=("energy",))[0]):
            assert frontier(got, ("energy",)) == frontier(rows, ("energy",))
        least = float(rows["energy"].min())
        assert energy_lower_bound(e, w, a, fixed) <= least * (1 + 1e-9)
        rising = generate_by_rising_budgets(e, w, a, float(rows["energy"].max()), fixed, ("energy",))[0]
        assert np.isclose(rising["energy"].min(), least)


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2), st.integers(0, 10_000))
def test_a_fixed_c_t_keeps_exactly_the_frontiers_of_its_groups(problem, pick):
    same_tensor_key_frontiers(*problem, pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3), st.integers(0, 10_000))
def test_a_fixed_c_t_keeps_exactly_the_frontiers_of_its_groups_long(problem, pick):
    same_tensor_key_frontiers(*problem, pick)


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=2), st.integers(0, 10_000))
def test_a_keyed_search_after_others_keeps_what_one_in_a_fresh_process_keeps(problem, pick):
    """The moves and energy floors earlier searches of the same space made in this process
    (`pmapgen.prefixes._SHARED_MOVES`, `_SHARED_FLOORS`, which a refinement's thousands of
    keyed searches share) change nothing: a keyed search run after itself and after the
    unkeyed search keeps the same rows as with nothing held."""
    import pmapgen.prefixes as prefixes
    w, a = problem
    for e, tensor_keys, _ in tensor_key_groups(w, a, pick):
        fixed = Constraints(tensor_keys=tensor_keys)
        prefixes._SHARED_MOVES.clear()
        prefixes._SHARED_FLOORS.clear()
        cold = generate_by_prefixes(e, w, a, fixed, objectives=("energy",))[0]
        generate_by_prefixes(e, w, a, objectives=("energy",))
        assert prefixes._SHARED_MOVES and prefixes._SHARED_FLOORS
        warm = generate_by_prefixes(e, w, a, fixed, objectives=("energy",))[0]
        assert len(warm) == len(cold) and frontier(warm, ("energy",)) == frontier(cold, ("energy",))
        assert sum(map(len, prefixes._SHARED_MOVES.values())) <= prefixes.SHARED_MOVES


def test_tensor_keys_naming_a_tensor_the_einsum_does_not_share_are_refused():
    from tests.test_pmapgen import kv_projections
    w, a = kv_projections()
    with pytest.raises(ValueError, match="not one of its shared tensors"):
        generate_by_prefixes("K", w, a, Constraints(tensor_keys={"V": (a.memories[0].name, ())}),
                             objectives=("energy",))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(1, 64), max_size=5), st.lists(st.integers(1, 80), min_size=1,
                                                                         max_size=30)), min_size=1, max_size=3),
       st.booleans())
def test_a_keyed_search_s_tile_checks_keep_exactly_the_tiles_allowed(checks, broadcast):
    """`within_tiles` reads a table per check (`tile_checks`) where `isin` was called per
    batch: each row passes exactly when every column's tile is among its allowed ones,
    tiles past the largest allowed (or no tile allowed) included, and a column held as
    one value (`_compact`'s zero stride) read as that value in every row."""
    from pmapgen.fixed_key import within_tiles
    n = min(len(values) for _, values in checks)
    cols, tables, expected = {"energy": np.zeros(n)}, [], np.ones(n, dtype=bool)
    for i, (allowed, values) in enumerate(checks):
        v = np.array(values[:n], dtype=np.int64)
        if broadcast:
            v = np.broadcast_to(v[:1], (n,))
        cols[f"ft:{i}"] = v
        table = np.zeros(max(allowed, default=0) + 1, dtype=bool)
        table[sorted(allowed)] = True
        tables.append((f"ft:{i}", table))
        expected &= np.isin(v, sorted(allowed))
    assert np.array_equal(within_tiles(tuple(tables), cols), expected)


def key_set_groups(w, a, pick: int, objectives):
    """Per Einsum with a shared tensor: (einsum, {tensor: a subset of the c_T its rows give
    it} for some of its shared tensors (drawn from `pick`), the exhaustive table's rows
    whose c_T are all in those subsets)."""
    import random
    rng = random.Random(pick)
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=objectives)[0]
        if full.empty or not full["compat"].iloc[0][0]:
            continue
        tensors = [t for t, _ in full["compat"].iloc[0][0]]
        chosen = [t for t in tensors if rng.random() < 0.7] or tensors[:1]
        sets = {}
        for t in chosen:
            cts = sorted({dict(c[0])[t] for c in full["compat"]}, key=repr)
            sets[t] = tuple(ct for ct in cts if rng.random() < 0.5) or (cts[rng.randrange(len(cts))],)
        yield e, sets, full[[all(dict(c[0])[t] in cts for t, cts in sets.items()) for c in full["compat"]]]


def same_key_set_frontiers(w, a, pick: int, objectives) -> None:
    for e, sets, rows in key_set_groups(w, a, pick, objectives):
        held = Constraints(tensor_key_sets=sets)
        for got in (generate_by_prefixes(e, w, a, held, objectives=objectives)[0],
                    generate(e, w, a, held, objectives=objectives)[0]):
            assert frontier(got, objectives) == frontier(rows, objectives), (e, sets)


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2), st.integers(0, 10_000), st.sampled_from([("latency",), ("energy",)]))
def test_sets_of_c_t_keep_exactly_the_frontiers_of_their_groups(problem, pick, objectives):
    same_key_set_frontiers(*problem, pick, objectives)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3), st.integers(0, 10_000), st.sampled_from([("latency",), ("energy",)]))
def test_sets_of_c_t_keep_exactly_the_frontiers_of_their_groups_long(problem, pick, objectives):
    same_key_set_frontiers(*problem, pick, objectives)
