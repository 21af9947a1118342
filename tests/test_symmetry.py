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
from tests.strategies import arch_specs_
from tests.test_pmapgen import OBJECTIVES, frontier

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def mirrored_problems(draw, max_levels: int = 2):
    """Z[m,p(,h)] = A[m(,h)(,k)] * B[p(,h)(,k)] (or B first) with m and p of one size; A and B each
    maybe produced by a copy (so shared, or one shared and the other not: no mirror), Z
    maybe consumed; 2 levels (or up to `max_levels`) with small capacities."""
    size = draw(st.sampled_from([2, 4]))
    h, k = draw(st.booleans()), draw(st.booleans())
    extra = (["h"] if h else []) + (["k"] if k else [])
    a, b = ",".join(["m"] + extra), ",".join(["p"] + extra)
    out = ",".join(["m", "p"] + (["h"] if h else []))
    first, second = draw(st.sampled_from([("A", "B"), ("B", "A")]))  # name order decides which image is searched
    einsums = [f"Z[{out}] = {first}[{a}] * {second}[{b}]"]
    if draw(st.booleans()):
        einsums.insert(0, f"{first}[{a}] = X{first}[{a}]")
    if draw(st.booleans()):
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


@settings(max_examples=8, **SETTINGS)
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
        return _Search(e, w, a, a.computes_for(w.einsum(e))[0].name, constraints, ("energy",)).mirror

    qk = mirror("QK")
    assert (qk.tensors, qk.ranks) == ({"Q": "K", "K": "Q"}, {"m": "p", "p": "m"})
    assert all(mirror(e) is None for e in w.einsum_names if e != "QK")
    assert mirror("QK", Constraints(backing={"Q": ("GlobalBuffer",)})) is None  # a constraint may tell Q from K
