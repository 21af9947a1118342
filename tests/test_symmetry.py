"""Mirror symmetry (`pmapgen.symmetry`): an Einsum like QK, unchanged by swapping two alike
inputs and their own rank variables, is searched over one of each pair of mirrored fused
structures, and the other's pmappings are the mirror images of its survivors."""
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arch as arch_specs
import workloads
import pmapgen.prefixes as prefixes
from pmapgen.constraints import Constraints
from pmapgen.prefixes import _Search, generate_by_prefixes
from pmapgen.symmetry import key_mirror, mirror_result
from ffm.refine import mirror_key
from tests.strategies import arch_specs_
from tests.test_pmapgen import OBJECTIVES, frontier
from tests.test_search import _bump

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))
# the keyed `_long` checks skip a problem whose search without the mirror takes longer than
# this (seconds): on 3 levels one may take many minutes, and one check took 33 minutes
# (ninety-fourth session), as `test_join_optimum_equals_brute_force_long` bounds its runs
LONG_LIMIT = 20.0


@st.composite
def mirrored_problems(draw, max_levels: int = 2, produced: bool = False):
    """Z[m,p(,h)] = A[m(,h)(,k)] * B[p(,h)(,k)] (or B first) with m and p of one size; A and B each
    maybe produced by a copy (so shared, or one shared and the other not: no mirror), Z
    maybe consumed; 2 levels (or up to `max_levels`) with small capacities. `produced`:
    A and B both produced (both shared)."""
    size = draw(st.sampled_from([2, 4]))
    h, k = draw(st.booleans()), draw(st.booleans())
    extra = (["h"] if h else []) + (["k"] if k else [])
    a, b = ",".join(["m"] + extra), ",".join(["p"] + extra)
    out = ",".join(["m", "p"] + (["h"] if h else []))
    first, second = draw(st.sampled_from([("A", "B"), ("B", "A")]))  # name order decides which image is searched
    einsums = [f"Z[{out}] = {first}[{a}] * {second}[{b}]"]
    if produced or draw(st.booleans()):
        einsums.insert(0, f"{first}[{a}] = X{first}[{a}]")
    if produced or draw(st.booleans()):
        einsums.insert(0, f"{second}[{b}] = X{second}[{b}]")
    if draw(st.booleans()):
        einsums.append(f"Y[{out}] = Z[{out}]")
    sizes = {"m": size, "p": size, "h": 2, "k": 2}
    w = workloads.load({"name": "mirrored", "rank_sizes": {r: sizes[r] for r in "mp" + "h" * h + "k" * k},
                        "bits": 8, "einsums": einsums})
    a = arch_specs.load(draw(arch_specs_(max_levels=max_levels, capacities=["16 B", "64 B", "inf"])))
    return w, a


def without_mirror(*args, **kwargs):
    with mock.patch.object(prefixes, "find_mirror", lambda *a, **k: None):
        return generate_by_prefixes(*args, **kwargs)


def same_frontier_with_and_without_mirror(w, a, quantile, objectives):
    """The same frontier in every compatibility group (the mirror images rebuilt and
    evaluated by the model), within a budget too; fewer prefixes whenever the mirror
    applies (A and B alike: both shared or neither) and some structure is not its own image."""
    full = without_mirror("Z", w, a, objectives=objectives)
    budget = None if quantile is None or full[0].empty else float(np.quantile(full[0]["energy"], quantile))
    plain = full if budget is None else without_mirror("Z", w, a, objectives=objectives, budget=budget)
    got = generate_by_prefixes("Z", w, a, objectives=objectives, budget=budget)
    assert frontier(got[0], objectives) == frontier(plain[0], objectives)
    assert got[2].templates <= plain[2].templates
    if w.is_shared("A") and w.is_shared("B"):
        assert got[2].templates < plain[2].templates


@settings(max_examples=4, **SETTINGS)
@given(mirrored_problems(), st.sampled_from([None, 0.5]), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_mirrored_search_keeps_the_same_frontier_in_fewer_prefixes(problem, quantile, objectives):
    same_frontier_with_and_without_mirror(*problem, quantile, objectives)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3), st.sampled_from([None, 0.5]), st.sampled_from([OBJECTIVES, ("energy",)]))
def test_a_mirrored_search_keeps_the_same_frontier_in_fewer_prefixes_long(problem, quantile, objectives):
    same_frontier_with_and_without_mirror(*problem, quantile, objectives)


def test_qk_of_gpt3_is_mirrored_and_its_neighbours_are_not():
    a, w = arch_specs.load("tpuv4i"), workloads.load("gpt3", batch=1, seq_len=2048)

    def mirror(e, constraints=Constraints()):
        objectives = ("energy",) if constraints.latency_budget is None else ("latency",)
        return _Search(e, w, a, a.computes_for(w.einsum(e))[0].name, constraints, objectives).mirror

    qk = mirror("QK")
    assert (qk.tensors, qk.ranks) == ({"Q": "K", "K": "Q"}, {"m": "p", "p": "m"})
    assert all(mirror(e) is None for e in w.einsum_names if e != "QK")
    assert mirror("QK", Constraints(backing={"Q": ("GlobalBuffer",)})) is None  # a constraint may tell Q from K
    latency = Constraints(latency_budget=1.0)
    assert mirror("QK", latency) is not None and all(mirror(e, latency) is None for e in w.einsum_names if e != "QK")


def mirrored_key_search_is_the_mirror_image(w, a, quantile, pick, time_limit: float | None = None):
    """A search with A's and B's c_T fixed (`Constraints.tensor_keys`, as the energy
    proof's keyed searches) gives, mirrored (`mirror_result`), the frontier of the search
    at the mirror image of those c_T, in every compatibility group, within a budget too.
    A problem whose search without the mirror takes longer than `time_limit` is skipped."""
    full = without_mirror("Z", w, a, objectives=("energy",), time_limit=time_limit)
    if not full[2].complete:
        _bump("skipped: too long")
        return
    mirror = key_mirror("Z", w, a, Constraints(tensor_keys={}))
    assert (mirror.tensors, mirror.ranks) == ({"A": "B", "B": "A"}, {"m": "p", "p": "m"})
    assert not full[0].empty and mirror is not None
    c_t = dict(full[0]["compat"].iloc[pick % len(full[0])][0])
    keys = {t: c_t[t] for t in ("A", "B")}
    budget = None if quantile is None else float(np.quantile(full[0]["energy"], quantile))
    here = generate_by_prefixes("Z", w, a, Constraints(tensor_keys=keys), ("energy",), budget=budget)
    image = mirror.tensor_keys(w.einsum("Z"), keys)
    there = generate_by_prefixes("Z", w, a, Constraints(tensor_keys=image), ("energy",), budget=budget)
    got = mirror_result(here, mirror, "Z", w, a, ("energy",), Constraints(tensor_keys=keys))
    assert frontier(got[0], ("energy",)) == frontier(there[0], ("energy",))
    assert all(dict(k[0])["A"] == image["A"] and dict(k[0])["B"] == image["B"] for k in got[0]["compat"])
    assert got[2].complete and got[2].lower_bound == here[2].lower_bound


def mirrored_backing_search_is_the_mirror_image(w, a, quantile, pick):
    """A search with only A's and B's backing levels fixed (a backing group of the energy
    proof's keyed searches, `ffm.refine.backing_group`) gives, mirrored, the frontier of the
    search at the mirrored levels, in every compatibility group, within a budget too; and
    `ffm.refine.mirror_key` names that group as the image."""
    full = without_mirror("Z", w, a, objectives=("energy",))
    mirror = key_mirror("Z", w, a, Constraints())
    assert not full[0].empty and mirror is not None
    c_t = dict(full[0]["compat"].iloc[pick % len(full[0])][0])
    levels = {"A": c_t["A"][0], "B": c_t["B"][0]}
    if pick % 2:  # levels no single row gives, as often as not
        names = [m.name for m in a.memories]
        levels["B"] = names[(names.index(levels["B"]) + 1) % len(names)]
    here_c = Constraints(backing={t: (lv,) for t, lv in levels.items()})
    there_c = Constraints(backing={"A": (levels["B"],), "B": (levels["A"],)})
    group = tuple(sorted((t, (lv, None)) for t, lv in levels.items()))
    image = tuple(sorted((t, (lv, None)) for t, lv in {"A": levels["B"], "B": levels["A"]}.items()))
    assert mirror_key(mirror, w.einsum("Z"), group, ["members"]) == (None if image == group else image)
    budget = None if quantile is None else float(np.quantile(full[0]["energy"], quantile))
    here = generate_by_prefixes("Z", w, a, here_c, ("energy",), budget=budget)
    there = generate_by_prefixes("Z", w, a, there_c, ("energy",), budget=budget)
    got = mirror_result(here, mirror, "Z", w, a, ("energy",), here_c)
    assert frontier(got[0], ("energy",)) == frontier(there[0], ("energy",))
    assert got[2].complete


@settings(max_examples=5, **SETTINGS)
@given(mirrored_problems(produced=True), st.sampled_from([None, 0.5]), st.integers(0, 1000))
def test_a_backing_group_search_mirrored_is_the_search_at_the_mirrored_levels(problem, quantile, pick):
    mirrored_backing_search_is_the_mirror_image(*problem, quantile, pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3, produced=True), st.sampled_from([None, 0.5]), st.integers(0, 1000))
def test_a_backing_group_search_mirrored_is_the_search_at_the_mirrored_levels_long(problem, quantile, pick):
    mirrored_backing_search_is_the_mirror_image(*problem, quantile, pick)


@settings(max_examples=5, **SETTINGS)
@given(mirrored_problems(produced=True), st.sampled_from([None, 0.5]), st.integers(0, 1000))
def test_a_keyed_search_mirrored_is_the_search_at_the_mirror_key(problem, quantile, pick):
    mirrored_key_search_is_the_mirror_image(*problem, quantile, pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3, produced=True), st.sampled_from([None, 0.5]), st.integers(0, 1000))
def test_a_keyed_search_mirrored_is_the_search_at_the_mirror_key_long(problem, quantile, pick):
    mirrored_key_search_is_the_mirror_image(*problem, quantile, pick, time_limit=LONG_LIMIT)


def self_mirrored_key_search_keeps_what_it_keeps_without(w, a, quantile, time_limit: float | None = None):
    """A keyed search whose c_T are their own mirror image (`self_mirror`: A's and B's
    alike) uses the mirror within itself and keeps the frontier the search without it
    keeps, in every compatibility group, within a budget too, from fewer prefixes when
    some structure is not its own image. Every such key of the exhaustive table. A
    problem whose search without the mirror takes longer than `time_limit` is skipped."""
    full = without_mirror("Z", w, a, objectives=("energy",), time_limit=time_limit)
    if not full[2].complete:
        _bump("skipped: too long")
        return 0
    mirror = key_mirror("Z", w, a, Constraints(tensor_keys={}))
    assert not full[0].empty and mirror is not None
    keys = {tuple(sorted((t, c) for t, c in dict(k[0]).items() if t in ("A", "B"))) for k in full[0]["compat"]}
    alike = [dict(k) for k in keys if mirror.tensor_keys(w.einsum("Z"), dict(k)) == dict(k)]
    budget = None if quantile is None else float(np.quantile(full[0]["energy"], quantile))
    for k in alike:
        c = Constraints(tensor_keys=k)
        search = _Search("Z", w, a, a.computes_for(w.einsum("Z"))[0].name, c, ("energy",))
        assert search.mirror is not None, k
        got = generate_by_prefixes("Z", w, a, c, ("energy",), budget=budget)
        plain = without_mirror("Z", w, a, c, ("energy",), budget=budget)
        assert frontier(got[0], ("energy",)) == frontier(plain[0], ("energy",)), k
        assert got[2].templates <= plain[2].templates and got[2].complete
        assert got[2].lower_bound == pytest.approx(plain[2].lower_bound, rel=1e-9), k
    return len(alike)


@settings(max_examples=5, **SETTINGS)
@given(mirrored_problems(produced=True), st.sampled_from([None, 0.5]))
def test_a_keyed_search_at_a_key_its_own_mirror_image_uses_the_mirror_and_keeps_the_same_frontier(problem, quantile):
    self_mirrored_key_search_keeps_what_it_keeps_without(*problem, quantile)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3, produced=True), st.sampled_from([None, 0.5]))
def test_a_keyed_search_at_a_key_its_own_mirror_image_uses_the_mirror_and_keeps_the_same_frontier_long(problem,
                                                                                                   quantile):
    self_mirrored_key_search_keeps_what_it_keeps_without(*problem, quantile, time_limit=LONG_LIMIT)


def test_key_mirror_of_gpt3_is_qks_and_a_constraint_drops_it():
    a, w = arch_specs.load("tpuv4i"), workloads.load("gpt3", batch=1, seq_len=2048)
    qk = key_mirror("QK", w, a, Constraints(tensor_keys={"Q": ("GlobalBuffer", ())}))
    assert (qk.tensors, qk.ranks) == ({"Q": "K", "K": "Q"}, {"m": "p", "p": "m"})
    assert qk.tensor_keys(w.einsum("QK"), {"Q": ("GlobalBuffer", ((2, 1, None), (1, 128, None)))}) \
        == {"K": ("GlobalBuffer", ((2, 1, None), (1, 128, None)))}  # Q[b,m,h,e] and K[b,p,h,e]: m and p at 1
    assert key_mirror("QK", w, a, Constraints(backing={"Q": ("GlobalBuffer",)})) is None
    assert all(key_mirror(e, w, a, None) is None for e in w.einsum_names if e != "QK")


def same_frontier_with_and_without_mirror_within_a_latency_budget(w, a, quantile, pick):
    """Within a latency budget (a pmapping and its mirror image take as long), and with
    c_T sets that are each other's mirror image (`Constraints.tensor_key_sets`, as
    `ffm.slack.latency_slack_tables` holds QK to Q's and K's producers' c_T), the search
    uses the mirror where A and B are alike (both shared or neither) and keeps the frontier
    it keeps without; with sets that are not each other's image (though at the same
    levels) it uses none, and keeps that frontier too."""
    import random

    full = without_mirror("Z", w, a, objectives=("latency",))[0]
    if full.empty:
        return
    budget = float(np.quantile(full["latency"], quantile))
    cases = [(Constraints(latency_budget=budget), w.is_shared("A") == w.is_shared("B"))]
    if pick % 2 and w.is_shared("A") and w.is_shared("B"):
        mirror = key_mirror("Z", w, a, Constraints(tensor_keys={}))
        image = lambda cts: tuple(sorted({mirror.c_t(w.einsum("Z"), "A", ct) for ct in cts}, key=repr))
        rng = random.Random(pick)
        cts = sorted({dict(k[0])["A"] for k in full["compat"]}, key=repr)
        mine = tuple(ct for ct in cts if rng.random() < 0.6) or tuple(cts[:1])
        cases.append((Constraints(latency_budget=budget, tensor_key_sets={"A": mine, "B": image(mine)}), True))
        # one c_T fewer for A than B's image has, at the same levels: no longer its own image
        fewer = [ct for ct in mine if sum(x[0] == ct[0] for x in mine) > 1]
        if fewer:
            less = tuple(ct for ct in mine if ct != fewer[0])
            cases.append((Constraints(latency_budget=budget, tensor_key_sets={"A": less, "B": image(mine)}), False))
    unit = a.computes_for(w.einsum("Z"))[0].name
    for c, mirrored in cases:
        assert (_Search("Z", w, a, unit, c, ("latency",)).mirror is not None) == mirrored
        plain = without_mirror("Z", w, a, c, objectives=("latency",))
        got = generate_by_prefixes("Z", w, a, c, objectives=("latency",))
        assert frontier(got[0], ("latency",)) == frontier(plain[0], ("latency",))
        assert got[2].templates <= plain[2].templates


@settings(max_examples=5, **SETTINGS)
@given(mirrored_problems(produced=True), st.sampled_from([0.3, 0.7]), st.integers(0, 10_000))
def test_a_mirrored_search_within_a_latency_budget_keeps_the_same_frontier(problem, quantile, pick):
    same_frontier_with_and_without_mirror_within_a_latency_budget(*problem, quantile, pick)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(mirrored_problems(max_levels=3), st.sampled_from([0.3, 0.7]), st.integers(0, 10_000))
def test_a_mirrored_search_within_a_latency_budget_keeps_the_same_frontier_long(problem, quantile, pick):
    same_frontier_with_and_without_mirror_within_a_latency_budget(*problem, quantile, pick)
