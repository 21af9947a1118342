"""The latency floor of a partial pmapping (`pmapgen.latency_floor`) and the latency budget it
cuts with (`Constraints.latency_budget`): the floor is at most the latency of every pmapping
completed from the row, and a search within a latency budget keeps exactly the exhaustive
enumeration's frontier among the pmappings within it, alone or with an energy budget. The
archs limit their ports' bandwidths (`tests.strategies.port_limits`), so port times decide
some pmappings' latency and compute decides others'."""
import contextlib
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pmapgen import generate, generate_all
from pmapgen.constraints import Constraints
import pmapgen.prefixes as prefixes
from pmapgen.prefixes import generate_by_prefixes
from tests.test_pmapgen import (SETTINGS, array_problems, floors_below_completions, frontier, same_frontiers,
                                small_problems)

RTOL = 1e-9


@settings(max_examples=12, **SETTINGS)
@given(small_problems(max_levels=2, bandwidths=True))  # 3 levels: the slow version below
def test_every_partial_pmapping_s_latency_floor_is_at_most_its_completions_latency(problem):
    assert floors_below_completions(problem, "latency") > 0


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3, bandwidths=True))
def test_every_partial_pmapping_s_latency_floor_is_at_most_its_completions_latency_long(problem):
    assert floors_below_completions(problem, "latency") > 0


@settings(max_examples=5, **SETTINGS)
@given(array_problems(bandwidths=True))
def test_every_partial_pmapping_s_latency_floor_is_at_most_its_completions_latency_under_an_array(problem):
    """As above, where the instances still to come are capped by the extents left."""
    assert floors_below_completions(problem, "latency") > 0


@pytest.mark.slow
@settings(max_examples=30, **SETTINGS)
@given(array_problems(bandwidths=True))
def test_every_partial_pmapping_s_latency_floor_is_at_most_its_completions_latency_under_an_array_long(problem):
    assert floors_below_completions(problem, "latency") > 0


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2, bandwidths=True))  # 3 levels: the slow version below
def test_every_partial_pmapping_s_floor_with_sets_of_ports_is_at_most_its_completions_latency(problem):
    """With floors of sets of ports summed (`pmapgen.latency_floor.port_sets`) as well."""
    with mock.patch.object(prefixes, "PORT_SETS", 3):
        assert floors_below_completions(problem, "latency") > 0


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(small_problems(max_levels=3, bandwidths=True))
def test_every_partial_pmapping_s_floor_with_sets_of_ports_is_at_most_its_completions_latency_long(problem):
    with mock.patch.object(prefixes, "PORT_SETS", 3):
        assert floors_below_completions(problem, "latency") > 0


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=2, bandwidths=True), st.sampled_from([("latency",), ("energy", "latency")]))
def test_prefix_search_with_limited_ports_equals_template_enumeration(problem, objectives):
    """With no budget, under ports that decide some pmappings' latency: the prune compares
    a closed port's time as at least the least latency (`_Search._closed_ports`), and
    still keeps exactly the frontier of every template's every tile shape."""
    same_frontiers(*problem, objectives)


def same_frontiers_within_latency_budget(w, a, quantile: float, objectives, energy_quantile: float | None,
                                         reference=generate) -> int:
    """Per Einsum, the prefix search within a latency budget (the least latency, or a
    quantile of the enumeration's), and within an energy budget too if `energy_quantile`,
    keeps exactly the enumeration's frontier among the pmappings within them; so does the
    enumeration given the same constraint. Returns how many rows the exhaustive tables hold
    over the latency budget (0 everywhere would test no cut). `reference`: the exhaustive
    table's generator (the prefix search with no budget is tested equal to `generate` in
    tests/test_pmapgen.py, and is far faster under an array). Latency is a criterion, so
    the frontier of the rows within the budget is the full frontier's rows within it."""
    over = 0
    for e in w.einsum_names:
        full = reference(e, w, a, objectives=objectives)[0]
        if full.empty:
            continue
        beta = float(np.quantile(full["latency"], quantile))
        within = full[full["latency"] <= beta * (1 + RTOL)]
        energy = None
        if energy_quantile is not None:
            energy = float(np.quantile(within["energy"], energy_quantile))
            within = within[within["energy"] <= energy * (1 + RTOL)]
        over += int((full["latency"] > beta * (1 + RTOL)).sum())
        c = Constraints(latency_budget=beta)
        got = generate_by_prefixes(e, w, a, c, objectives=objectives, budget=energy)[0]
        assert frontier(got, objectives) == frontier(within, objectives), e
        assert (got["latency"] <= beta * (1 + RTOL)).all(), e
        if energy is None and reference is generate:
            assert frontier(generate(e, w, a, c, objectives=objectives)[0], objectives) \
                == frontier(within, objectives), e
    return over


@settings(max_examples=8, **SETTINGS)
@given(small_problems(max_levels=3, bandwidths=True), st.sampled_from([1.0, 1.5, math.inf]), st.sampled_from([1, 3]))
def test_ports_floors_computed_together_equal_each_port_set_s_floor_in_turn(problem, factor, port_sets):
    """`pmapgen.bounds.child_port_floors` (every port set's floor of a child in one pass over
    its inputs) gives exactly what each port set's `child_floors` (its plan alone) gives,
    over that set's spread, raising the compute and port terms in turn for the children
    still within the budget: a search within `factor` times each Einsum's latency floor
    (`ffm.latency_bound`), on every call."""
    from ffm.latency_bound import einsum_latency_floor
    from pmapgen.bounds import child_floors
    from pmapgen.latency_floor import ports, reach
    from pmapgen.prefixes import _Search
    w, a = problem
    units = {e: [u.name for u in a.computes_for(w.einsum(e))] for e in w.einsum_names}
    assume(any(ports(tuple(a.path(u))) for us in units.values() for u in us))  # some port floor to check
    seen = {"calls": 0, "children": 0}

    class Checked(_Search):
        def _latency_floors(self, prefix, parent, child, parents, bounds, step, inputs, threshold):
            got = super()._latency_floors(prefix, parent, child, parents, bounds, step, inputs, threshold)
            ports, self.port_floors = self.port_floors, []
            want = super()._latency_floors(prefix, parent, child, parents, bounds, step, inputs, threshold)
            self.port_floors = ports
            spread = reach(self.latency_terms, child, self._latency_tops(prefix)[0])[1]
            ints, _, free = inputs
            for ps, f in ports:
                at = np.flatnonzero(want <= threshold)
                bits = child_floors(f, ints, ps.seconds(parent), free, parents[at], bounds[at], step,
                                    self._plan(prefix, f))
                want[at] = np.maximum(want[at], bits / ps.spread(spread)[at])
            assert np.array_equal(got, want)
            seen["calls"] += bool(ports)
            seen["children"] += len(got) if ports else 0
            return got

    with mock.patch.object(prefixes, "PORT_SETS", port_sets):
        for e, us in units.items():
            budget = einsum_latency_floor(e, w, a) * factor
            for unit in us:
                Checked(e, w, a, unit, Constraints(latency_budget=budget), ("latency",)).run(None)
    assert seen["calls"] and seen["children"]


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2, bandwidths=True), st.sampled_from([0.0, 0.3, 0.7]),
       st.sampled_from([("latency",), ("energy", "latency")]), st.sampled_from([None, None, 0.5]),
       st.sampled_from([1, 3]))
def test_prefix_search_within_a_latency_budget_keeps_the_frontier_under_it(problem, quantile, objectives,
                                                                           energy_quantile, port_sets):
    """`port_sets`: the most ports one floor sums (`prefixes.PORT_SETS`)."""
    if energy_quantile is not None and objectives == ("latency",):
        objectives = ("energy", "latency")  # an energy budget keeps the frontier on energy too
    with mock.patch.object(prefixes, "PORT_SETS", port_sets):
        same_frontiers_within_latency_budget(*problem, quantile, objectives, energy_quantile)


@settings(max_examples=6, **SETTINGS)
@given(array_problems(bandwidths=True), st.sampled_from([0.0, 0.3]))
def test_prefix_search_within_a_latency_budget_under_an_array(problem, quantile):
    """Under an array, where the floor's compute term depends on the instances still open."""
    same_frontiers_within_latency_budget(*problem, quantile, ("latency",), None, reference=generate_by_prefixes)


def test_the_latency_budget_cuts_partial_pmappings():
    """The floor cuts before completion: on a matmul under a 4 x 4 array, a budget of the
    least latency builds fewer partial rows than no budget, and keeps the same frontier."""
    import arch as arch_specs
    import workloads
    from pmapgen.prefixes import search_part
    w = workloads.load({"name": "array", "rank_sizes": {"m": 8, "k": 8, "n": 8}, "bits": 8,
                        "einsums": ["Z[m,n] = A[m,k] * B[k,n]"]})
    a = arch_specs.load({"name": "a", "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "bandwidth": "4 GB/s"},
        {"memory": "L1", "capacity": "64 B", "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit",
         "fanout": {"X": {"size": 4, "multicast": True, "reduce": False},
                    "Y": {"size": 4, "multicast": False, "reduce": True}}},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]})
    full = generate_by_prefixes("Z", w, a, objectives=("latency",))[0]
    beta = float(full["latency"].min())
    free = search_part("Z", w, a, Constraints(), ("latency",))[1]
    cut = search_part("Z", w, a, Constraints(latency_budget=beta), ("latency",))[1]
    assert cut.tile_shapes < free.tile_shapes / 2, (cut.tile_shapes, free.tile_shapes)
    got = generate_by_prefixes("Z", w, a, Constraints(latency_budget=beta), ("latency",))[0]
    assert frontier(got, ("latency",)) == frontier(full[full["latency"] <= beta * (1 + RTOL)], ("latency",))


def test_a_latency_budget_without_latency_among_the_objectives_is_refused():
    """Pruned on energy alone, a row over the latency budget could drop one within it."""
    import workloads
    from tests.test_map import ARCH
    import arch as arch_specs
    w = workloads.load({"name": "one", "rank_sizes": {"m": 4, "k": 4}, "bits": 8, "einsums": ["Z[m] = A[m,k] * B[k]"]})
    a = arch_specs.load(ARCH)
    for run in (lambda: generate("Z", w, a, Constraints(latency_budget=1.0), objectives=("energy",)),
                lambda: generate_by_prefixes("Z", w, a, Constraints(latency_budget=1.0), objectives=("energy",))):
        with pytest.raises(ValueError, match="latency_budget needs 'latency'"):
            run()


@settings(max_examples=3, **SETTINGS)
@given(small_problems(max_levels=2, bandwidths=True), st.sampled_from([0.0, 0.5]))
def test_generate_all_searches_latency_budgets_by_prefixes_split_or_whole(problem, quantile):
    """`generate_all` runs an Einsum with a latency budget and no energy budget by the prefix
    search (whole in one worker, and split by root across two), with the same frontier."""
    w, a = problem
    betas = {}
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("latency",))[0]
        betas[e] = math.inf if full.empty else float(np.quantile(full["latency"], quantile))
    c = {e: Constraints(latency_budget=b) for e, b in betas.items()}
    whole = generate_all(w, a, c, objectives=("latency",), workers=1, progress=False)
    split = generate_all(w, a, c, objectives=("latency",), workers=2, progress=False)
    for e in w.einsum_names:
        full = generate(e, w, a, objectives=("latency",))[0]
        want = frontier(full[full["latency"] <= betas[e] * (1 + RTOL)], ("latency",)) if not full.empty else set()
        assert frontier(whole[e][0], ("latency",)) == want, e
        assert frontier(split[e][0], ("latency",)) == want, e


def test_a_spatial_group_reaches_a_divisor_of_the_extents_its_dims_may_run():
    """Hand-computed on gpt3's V (I[b,m,d] x WV[h,f,d]) under tpuv4i's 128 x 128 array, whose
    Y dim runs reduced rank variables only (d): with 192 reductions left (3 x 64) Y reaches
    96, the largest divisor of 192 at most 128, and X (m, h or f, one rank variable or two
    that leave a read operand unindexed) 128; with 96 left, 96; the 4 cores (any rank
    variable the cores need not reduce: not d) 4, or 3 where m, h and f leave 6. The old
    bound (the fanout size, capped by all extents left) said 128 x 128 and 4."""
    import arch as arch_specs
    import workloads
    from pmapgen.latency_floor import group_reach
    from pmapgen.prefixes import _Search
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    f = _Search("V", w, a, "MAC", Constraints(), ("latency",)).latency_terms
    assert f.ranks == ("b", "m", "h", "f", "d")
    array, cores = 3, 2  # the Register's and the LocalBuffer's fanout levels
    extents = [np.array(v) for v in ([1, 1, 1], [2048, 2048, 6], [32, 32, 1], [128, 128, 1], [192, 96, 4096])]
    assert group_reach(f, array, extents).tolist() == [128 * 96, 128 * 96, 6 * 128]
    assert group_reach(f, cores, extents).tolist() == [4, 4, 3]
    assert group_reach(f, cores, [np.array([1])] * 4 + [np.array([6])]).tolist() == [1]  # d: only a Y dim's


def test_a_level_s_ports_close_once_no_continuation_can_access_it():
    """Hand-read on gpt3's V under tpuv4i (DRAM 0, GlobalBuffer 1, LocalBuffer 2, Register 3):
    with every tensor in DRAM and nothing below, every level is open; once each has a
    GlobalBuffer node, DRAM's traffic is final (each node's fills come from the loops
    above it, all placed); once I and V have LocalBuffer nodes and WV its registers
    (weights bypass the LocalBuffer), the GlobalBuffer's is too (it holds nothing). And the
    least latency the closed ports are compared against is V's latency floor (`ffm.latency_bound`)."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    from looptree.nodes import Storage
    from pmapgen.prefixes import _Search
    from pmapgen.templates import moves, roots
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    s = _Search("V", w, a, "MAC", Constraints(), ("latency",))
    root = next(p for p, _ in roots(s.sp, w) if not p.backing)
    after = {tuple((n.level, n.tensors) for n in mv.nodes): p for mv, p in moves(s.sp, root)
             if isinstance(mv.nodes[0], Storage)}
    assert s._closed_ports(root) == frozenset()
    assert s._closed_ports(after[("GlobalBuffer", ("I", "V", "WV")),]) == {0}
    assert s._closed_ports(after[("LocalBuffer", ("I", "V")), ("Register", ("WV",))]) == {0, 1}
    assert s._closed_ports(after[("GlobalBuffer", ("I", "V")), ("Register", ("WV",))]) == {0}  # I, V still read
    assert s.latency_terms.least == pytest.approx(einsum_latency_floor("V", w, a), rel=1e-12)


def open_ports_case():
    """Z of a three-Einsum chain on a three-level arch whose write ports are slow: the case
    `test_open_ports_are_compared_as_they_are` runs."""
    import arch as arch_specs
    import workloads
    w = workloads.load({"name": "ports", "rank_sizes": {"a": 2, "b": 2, "c": 4}, "bits": 8,
                        "einsums": ["T0[a,b,c] = X[a,b,c]", "Z[a] = T0[a,b,c] * T1[c,a]", "Y[a] = Z[a]"]})
    a = arch_specs.load({"name": "ports", "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "read_bandwidth": "4 GB/s", "write_bandwidth": "0.25 GB/s", "bandwidth": "0.25 GB/s"},
        {"memory": "L1", "capacity": "inf", "read_energy": "0.5 pJ/bit", "write_energy": "0.2 pJ/bit",
         "read_bandwidth": "4 GB/s", "write_bandwidth": "0.25 GB/s", "bandwidth": "1 GB/s",
         "fanout": {"D1": {"size": 4, "multicast": True, "reduce": False}}},
        {"memory": "L2", "capacity": "64 B", "read_energy": "0.5 pJ/bit", "write_energy": "0.6 pJ/bit",
         "write_bandwidth": "0.25 GB/s", "bandwidth": "0.25 GB/s",
         "fanout": {"D2": {"size": 3, "multicast": True, "reduce": True, "iterates": "multicast"}}},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]})
    return w, a


# the compatibility key (T0 tiled in L2 under c, a and a spatial b; Z in L0) whose one
# frontier row (40 ns) the mutation below loses
OPEN_PORTS_KEY = ((("T0", ("L2", ((2, 2, None), (0, 1, None), (1, 1, "D2")))), ("Z", ("L0", ()))),
                  (("c", 2, None), ("a", 1, None), ("b", 1, "D2")))


def test_open_ports_are_compared_as_they_are():
    """A port still open may still bind: compared as at least the least latency too (as
    closed ones are), the prefix search loses a pmapping of Z's latency frontier here (40
    ns, at `OPEN_PORTS_KEY`) and shows one of 56 ns it dominates instead. Found by
    hypothesis against that mutation (no other test fails on it), so `_closed_ports` must
    leave such a port out. By default the search is held to that key (`Constraints.key`:
    the exhaustive table has that one row); the long version compares the whole frontier."""
    w, a = open_ports_case()
    c = Constraints(key=OPEN_PORTS_KEY)
    want = frontier(generate("Z", w, a, c, objectives=("latency",))[0], ("latency",))
    assert len(want) == 1 and next(iter(want))[-1] == pytest.approx(40e-9)
    assert frontier(generate_by_prefixes("Z", w, a, c, objectives=("latency",))[0], ("latency",)) == want


@pytest.mark.slow
def test_open_ports_are_compared_as_they_are_long():
    """The whole frontier of `open_ports_case` (351 rows; the mutation loses two of 40 ns
    and shows three of 52 and 56 ns instead)."""
    w, a = open_ports_case()
    want = frontier(generate("Z", w, a, objectives=("latency",))[0], ("latency",))
    assert len(want) == 351
    assert frontier(generate_by_prefixes("Z", w, a, objectives=("latency",))[0], ("latency",)) == want


def v_within_its_floor(count_done: bool = False, **flags):
    """gpt3's V at batch 1 within its latency floor, root 7 (`search_part`), with these
    `prefixes` flags set: its frontier, Stats, and (`count_done`) the done rows a search of
    that root holds at the end."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    from pmapgen.prefixes import _Search
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    c = Constraints(latency_budget=einsum_latency_floor("V", w, a) * (1 + RTOL))
    with contextlib.ExitStack() as flagged:
        for name, value in flags.items():
            flagged.enter_context(mock.patch.object(prefixes, name, value))
        table, _, st = generate_by_prefixes("V", w, a, c, ("latency",), part=7)
        assert st.complete
        if not count_done:
            return frontier(table, ("latency",)), st, None
        s = _Search("V", w, a, a.computes_for(w.einsum("V"))[0].name, c, ("latency",))
        assert s.run(None, root=7) == ""
    return frontier(table, ("latency",)), st, sum(len(f["row"]) for *_, f in s.done)


def test_rows_with_no_continuation_are_dropped_when_pushed():
    """V within its floor, one root (`v_within_its_floor`): rows pushed to a prefix whose
    moves none of them can take (storage runs that do not fit, loops over rank variables
    they have run out of) are dropped at once (`_Search._continues`), so fewer keys are
    processed, and the table is the same."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(DEAD_CUT=dead, BLOCK_CUT=False) for dead in (True, False))
    assert cut == kept and len(cut) > 0
    assert cut_st.templates < kept_st.templates, (cut_st.templates, kept_st.templates)


def test_rows_in_a_block_must_fit_a_storage_run_with_its_rank_variables_frozen():
    """In a block of temporal loops below the fused region, the next cut is a storage run
    and the block's rank variables loop no more before it (`templates.moves`), so a row
    whose every storage run overflows with those at their extents and the rest at 1 is
    dropped when pushed (`prefixes.BLOCK_CUT`). V within its floor, one root: fewer rows
    built, the same table. Freezing every rank variable instead fails two frontier tests;
    freezing them in the fused region too, one."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(BLOCK_CUT=frozen) for frozen in (True, False))
    assert cut == kept and len(cut) > 0
    assert cut_st.tile_shapes < kept_st.tile_shapes, (cut_st.tile_shapes, kept_st.tile_shapes)


def test_a_loop_move_s_children_need_no_second_floor_when_pushed():
    """A loop move cuts its children by a floor computed from their parents' columns and
    the loops' bounds (`_Search._over_latency_cut`), and their push does not compute one
    again (`_push`'s `checked`). That loses no cut: V within its floor, one root, every
    child so pushed is within the budget by its own floor (`_Search._latency_floor`)."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    from pmapgen.prefixes import LATENCY_RTOL, _Search
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    c = Constraints(latency_budget=einsum_latency_floor("V", w, a) * (1 + RTOL))
    seen = {"rows": 0, "over": 0}

    class Checking(_Search):
        def _push(self, key, parent, move, cols, tiles, checked=False):
            if checked and len(tiles):
                threshold = self.latency_budget * (1 + LATENCY_RTOL)
                seen["rows"] += len(tiles)
                seen["over"] += int((self._latency_floor(key.prefix, cols) > threshold).sum())
            super()._push(key, parent, move, cols, tiles, checked)

    s = Checking("V", w, a, a.computes_for(w.einsum("V"))[0].name, c, ("latency",))
    assert s.run(None, root=7) == ""
    assert seen["rows"] > 10_000 and seen["over"] == 0, seen


def test_the_compute_cut_before_the_gather_cuts_only_what_the_floor_cuts():
    """A loop move's choices whose compute term is over the budget with the instances to
    come at most the open fanouts' sizes are cut before their columns are gathered
    (`prefixes.COMPUTE_CUT`, `_Search._compute_cut`). That floor is at most the full one,
    so V within its floor, one root, builds the same rows and keeps the same table."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(COMPUTE_CUT=on) for on in (True, False))
    assert cut == kept and len(cut) > 0
    assert (cut_st.tile_shapes, cut_st.templates) == (kept_st.tile_shapes, kept_st.templates)


def test_a_spatial_group_s_choices_that_cannot_reach_the_needed_instances_are_not_enumerated():
    """A spatial group's bounds are enumerated loop by loop, and a partial choice is dropped
    once its bounds times the most the loops still to come may add leave the compute term
    over the budget (`prefixes.REACH_CUT`, `_Search._reach_cut`): the compute cut would cut
    each of its completions. So V within its floor, one root, builds the same rows and
    keeps the same table with it and without it."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(REACH_CUT=on) for on in (True, False))
    assert cut == kept and len(cut) > 0
    assert (cut_st.tile_shapes, cut_st.templates) == (kept_st.tile_shapes, kept_st.templates)


def test_rows_whose_blocks_differ_only_in_order_wait_together():
    """A key holds a block's loops but the last as a set (`prefixes.BLOCK_SETS`), so rows
    that placed the same loops in another order wait and are pruned together. V within
    its floor, one root: the same table from fewer rows."""
    (merged, merged_st, _), (apart, apart_st, _) = (v_within_its_floor(BLOCK_SETS=on) for on in (True, False))
    assert merged == apart and len(merged) > 0
    assert merged_st.tile_shapes < apart_st.tile_shapes, (merged_st.tile_shapes, apart_st.tile_shapes)


def test_rows_a_wider_key_dominates_are_dropped_while_they_wait():
    """The rows a key keeps prune those waiting at keys that allow a subset of its moves
    (`prefixes.CROSS_KEYS`, `_Search._prune_narrower`). V within its floor, one root: the
    same table from fewer rows, and some rows so dropped."""
    (crossed, crossed_st, _), (apart, apart_st, _) = (v_within_its_floor(CROSS_KEYS=on) for on in (True, False))
    assert crossed == apart and len(crossed) > 0
    assert crossed_st.tile_shapes < apart_st.tile_shapes, (crossed_st.tile_shapes, apart_st.tile_shapes)


def test_rows_a_finished_row_dominates_are_not_extended():
    """A partial row whose compatibility group is settled (F known) is dropped before it is
    extended once a finished row of that group has at most its reservations to F and
    latency at most `least` (`prefixes.INCUMBENT_CUT`, `_Search._beaten`): every
    completion of the row is at least as bad. V within its floor, one root: the same
    table, fewer rows built. Its mutations fail the frontier tests: incumbents of any
    latency (12 tests), energy left out of the comparison (7)."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(INCUMBENT_CUT=on) for on in (True, False))
    assert cut == kept and len(cut) > 0
    assert cut_st.tile_shapes < kept_st.tile_shapes * 0.8, (cut_st.tile_shapes, kept_st.tile_shapes)


def test_rows_pushed_to_a_done_key_are_held_at_once():
    """Rows pushed to a done key are finished and held as incumbents at the push
    (`prefixes.HOLD_AT_PUSH`), not when the key is processed, which waits for every key
    that may still reach it: each is a pmapping the search reaches, so the table holds it
    or one at least as good. V within its floor, one root: the same table, fewer rows
    built (123,739 against 147,999 when written)."""
    (early, early_st, _), (late, late_st, _) = (v_within_its_floor(HOLD_AT_PUSH=on) for on in (True, False))
    assert early == late and len(early) > 0
    assert early_st.tile_shapes < late_st.tile_shapes * 0.9, (early_st.tile_shapes, late_st.tile_shapes)


def test_lineage_marks_the_ancestors_of_done_rows_within_the_floor():
    """`pmapgen.lineage` (benchmarks/latency_waste.py) on V within its floor, one root: the
    kept rows `leading` marks are exactly those met walking up from each done row within
    the budget; the root rows' `subtree_sizes` add up to every kept row; and each done
    row's largest term (`_Search.latency_breakdown`) is its latency."""
    import arch as arch_specs
    import workloads
    from ffm.latency_bound import einsum_latency_floor
    from pmapgen.lineage import leading, parents, subtree_sizes
    from pmapgen.prefixes import _Search

    class Checked(_Search):
        def _finish(self, key, cols):
            final = super()._finish(key, cols)
            terms = self.latency_breakdown(key, cols)
            assert set(terms) == {"compute", "DRAM shared", "GlobalBuffer read", "GlobalBuffer write"}
            most = np.max(np.column_stack([np.broadcast_to(x, final["latency"].shape) for x in terms.values()]), axis=1)
            np.testing.assert_array_equal(most, final["latency"])
            return final

    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    budget = einsum_latency_floor("V", w, a) * (1 + RTOL)
    s = Checked("V", w, a, a.computes_for(w.einsum("V"))[0].name, Constraints(latency_budget=budget), ("latency",))
    assert s.run(None, root=7) == ""
    walked = set()
    for _, rid, final in s.done:
        for r in np.asarray(final["row"])[final["latency"] <= budget * (1 + RTOL)]:
            at, row = rid, int(r)
            while at >= 0:
                walked.add((at, row))
                parent, rows = parents(s, at)
                at, row = int(parent[row]), int(rows[row])
    marked = leading(s, budget * (1 + RTOL))
    assert {(rid, int(i)) for rid, m in enumerate(marked) for i in np.flatnonzero(m)} == walked
    assert 0 < len(walked) < sum(len(r.batch) for r in s.records) / 10  # (when written: 967 of 47,694 kept rows)
    size = subtree_sizes(s)
    at_roots = sum(int(size[rid][parents(s, rid)[0] < 0].sum()) for rid in size)
    assert at_roots == sum(len(r.batch) for r in s.records)


def test_done_rows_are_held_on_their_keys_final_frontiers():
    """V within its floor, one root: a done key's finished rows are pruned on reservations
    and latency when it is processed (`prefixes.DONE_PRUNE`, `_Search._final_frontier`),
    so fewer are held until the search ends, and the table is the same; every row the key
    kept is still extended (the same partial rows are built)."""
    (cut, cut_st, cut_done), (kept, kept_st, kept_done) = (v_within_its_floor(True, DONE_PRUNE=p)
                                                              for p in (True, False))
    assert cut == kept and len(cut) > 0
    assert cut_st.tile_shapes == kept_st.tile_shapes
    assert cut_done < kept_done, (cut_done, kept_done)


def test_loop_orders_are_kept_per_class_of_the_bound_tensors_they_index():
    """With latency the only objective, a block's loops follow one order per class of the
    tensors they index that still reach a finite port (`_Search._ordered`). Here L0's port
    is the only finite one: a tensor whose next nodes can only go to L1 or L2 is unbound.
    Ignoring the bound tensors too (one order for every block) loses a 36 ns pmapping of
    the enumeration's 9; no other test fails on that (found by hypothesis against that
    mutation)."""
    import arch as arch_specs
    import workloads
    from pmapgen.prefixes import _Search
    w = workloads.load({"name": "order", "rank_sizes": {"m": 2, "k": 8, "n": 4}, "bits": 8,
                        "einsums": ["Z[m,n] = A[m,k] * B[k,n]"]})
    a = arch_specs.load({"name": "order", "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "bandwidth": "2 GB/s"},
        {"memory": "L1", "capacity": "16 B", "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit"},
        {"memory": "L2", "capacity": "1 values", "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit",
         "fanout": {"X": {"size": 2, "multicast": True, "reduce": False, "iterates": "multicast"},
                    "Y": {"size": 2, "multicast": False, "reduce": True, "iterates": "reduced"}}},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]})
    objectives = ("latency",)
    want = frontier(generate("Z", w, a, objectives=objectives)[0], objectives)
    assert len(want) == 9
    assert frontier(generate_by_prefixes("Z", w, a, objectives=objectives)[0], objectives) == want

    def every_block_one_order(self, prefix, move):
        loop = move.nodes[0]
        key = lambda r: (tuple(sorted(self.sp.relevance[r])), r)
        return loop.spatial is not None or key(loop.rank_variable) > key(prefix.block[-1])
    with mock.patch.object(_Search, "_ordered", every_block_one_order):
        lost = frontier(generate_by_prefixes("Z", w, a, objectives=objectives)[0], objectives)
    assert len(lost) == 8 and lost != want


def test_one_loop_order_per_class_of_bound_tensors_keeps_v_s_table():
    """V within its floor, one root: with the loop orders of `_Search._ordered`
    (`prefixes.UNBOUND_ORDER`) fewer partial rows are built, and the table is the same."""
    (cut, cut_st, _), (kept, kept_st, _) = (v_within_its_floor(UNBOUND_ORDER=o) for o in (True, False))
    assert cut == kept and len(cut) > 0
    assert cut_st.tile_shapes < kept_st.tile_shapes, (cut_st.tile_shapes, kept_st.tile_shapes)


def test_the_packed_plan_s_names_are_the_kernels_arguments():
    """`pmapgen.bounds._PACKED` (which of `_Plan.packed`'s arrays hold costs, `_COSTS`) names
    the compiled kernels' plan arguments in their order."""
    import inspect

    from pmapgen import bounds
    for kernel in (bounds._floor, bounds._box_floor):
        names = list(inspect.signature(kernel.py_func).parameters)
        assert tuple(names[names.index("ranks") + 1:]) == bounds._PACKED
