"""The latency lower bound (`ffm.latency_bound`) is at most the latency of every pmapping and
mapping (random pmappings, brute force, the exhaustive mapper), equals hand-computed figures,
and the mapper calls a result optimal exactly when it meets the bound."""
import copy
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings

import arch as arch_specs
import ffm
import workloads
from ffm.latency_bound import einsum_latency_floor, latency_lower_bound
from ffm.report import result_text
from looptree.model import analyze, cost
from tests.oracle import all_pmappings
from tests.strategies import problems
from tests.test_map import ARCH, WORKLOAD
from tests.test_pmapgen import SETTINGS, small_problems

RTOL = 1e-9


def _cut_short(result):
    """The result as if every Einsum's pmapgen had been cut short (the bound then speaks)."""
    return replace(result, stats=replace(result.stats, pmapgen={e: replace(s, complete=False)
                                                                for e, s in result.stats.pmapgen.items()}))


def _below_every_random_pmapping(problem) -> None:
    w, a, p = problem
    latency = cost(analyze(p, w, a), w, a).latency_s
    assert einsum_latency_floor(p.einsum, w, a) <= latency * (1 + RTOL)


@settings(max_examples=300, **SETTINGS)
@given(problems())
def test_the_floor_is_at_most_every_random_pmapping_s_latency(problem):
    _below_every_random_pmapping(problem)


@pytest.mark.slow
@settings(max_examples=5000, **SETTINGS)
@given(problems())
def test_the_floor_is_at_most_every_random_pmapping_s_latency_long(problem):
    _below_every_random_pmapping(problem)


@settings(max_examples=6, **SETTINGS)
@given(small_problems(max_levels=2))
def test_the_floor_is_at_most_every_pmapping_by_brute_force_and_the_mapper_s_optimum(problem):
    """Every legal pmapping of each Einsum (a vector copy before and after the main one:
    intermediates, whose traffic the bound leaves out) takes at least its floor, and the
    exhaustive latency optimum at least their sum."""
    w, a = problem
    for e in w.einsum_names:
        floor = einsum_latency_floor(e, w, a)
        least = min(cost(analyze(p, w, a), w, a).latency_s for p in all_pmappings(w, a, e, max_loops=2))
        assert floor <= least * (1 + RTOL), e
    r = ffm.map(w, a, objective="latency", progress=False, workers=1)
    assert r.stats.exhaustive and latency_lower_bound(w, a) <= r.evaluation.latency_s * (1 + RTOL)


def test_gpt3_batch_1_on_tpuv4i_by_hand():
    """tpuv4i: 4 cores of 128 x 128 MACs (one op a cycle each) and of 128 vector lanes,
    1.05 GHz, DRAM 4.912e12 bits/s; gpt3 (16 bits) at batch 1, 2048 tokens, d_model 4096,
    32 heads of 128, d_ff 16384. The MAC Einsums and QK_softmax are compute bound; I, a
    copy of the 2048 x 4096 input, is bound by reading it from DRAM."""
    w = workloads.load("gpt3", batch=1, seq_len=2048)
    a = arch_specs.load("tpuv4i")
    clock = 1.05e9
    projection = 2048 * 4096 * 4096  # V, K, Q, Z
    attention = 2048 * 2048 * 32 * 128  # QK, AV
    feed_forward = 2048 * 4096 * 16384  # FFA, FFB
    mac = (4 * projection + 2 * attention + 2 * feed_forward) / (4 * 128 * 128) / clock
    softmax = 2048 * 2048 * 32 / (4 * 128) / clock
    copy_in = max(2048 * 4096 / (4 * 128) / clock, 2048 * 4096 * 16 / 4.912e12)
    assert np.isclose(einsum_latency_floor("I", w, a), copy_in, rtol=1e-12)
    assert np.isclose(einsum_latency_floor("FFA", w, a), feed_forward / (4 * 128 * 128) / clock, rtol=1e-12)
    assert np.isclose(latency_lower_bound(w, a), mac + softmax + copy_in, rtol=1e-12)
    assert np.isclose(latency_lower_bound(w, a), 6.76817e-3, rtol=1e-6)


def test_a_result_that_meets_the_bound_is_optimal_and_one_that_does_not_says_how_far():
    """mm2 (two 4 x 2 x 2 matmuls, 16 operations each) on two instances is compute bound:
    the bound, 2 x 16 / 2 ns, is the optimum, so a run is called optimal for latency
    whether or not pmapgen completed (EDP meeting its bound: test_map's matmul_chain). With three
    instances the bound counts 16 / 3 ns per Einsum, but spatial loops must divide the
    rank sizes (2 and 4), so two are used: the optimum is 1.5 times the bound."""
    w = workloads.load(WORKLOAD)
    assert np.isclose(latency_lower_bound(w, arch_specs.load(ARCH)), 2 * 16 / 2 * 1e-9, rtol=1e-12)
    r = ffm.map(WORKLOAD, ARCH, objective="latency", progress=False, workers=1)
    assert r.stats.bound_reached and np.isclose(r.evaluation.latency_s, 16e-9, rtol=1e-9)
    cut = _cut_short(r)
    assert cut.stats.complete and not cut.stats.exhaustive
    words = " ".join(result_text(cut).split())
    assert "optimal for latency" in words and "The result's latency meets it: the result is optimal." in words
    assert "WARNING" not in words
    assert cut.export()["optimality"] == {"proven": True, "within": 1.0, "lower_bounds": {
        "energy_pJ": None, "latency_s": cut.stats.latency_lower, "edp": None}}
    edp = ffm.map(WORKLOAD, ARCH, objective="edp", progress=False, workers=1, time_limit=1.0, proof_time_limit=math.inf,
                  floors_proof=False)
    cut = _cut_short(edp)
    # mm2's EDP optimum is neither its energy optimum nor its latency optimum (test_map): the
    # product of the two bounds is below it, and the report says by how much (without the
    # floors proof, whose EDP proof proves it: tests/test_edp_proof.py)
    low = edp.stats.proof.lower * edp.stats.latency_lower
    assert edp.stats.proof.proven and not cut.stats.bound_reached and not cut.stats.complete
    assert edp.evaluation.edp > low * (1 + RTOL)
    assert f"the result is within {edp.evaluation.edp / low:.2f}x of the optimum" in " ".join(result_text(cut).split())
    optimality = cut.export()["optimality"]
    assert optimality["lower_bounds"]["edp"] == low and np.isclose(optimality["within"], edp.evaluation.edp / low)

    three = copy.deepcopy(ARCH)
    three["name"] = "fan3"
    three["levels"][1]["fanout"]["X"]["size"] = 3
    assert np.isclose(latency_lower_bound(w, arch_specs.load(three)), 2 * 16 / 3 * 1e-9, rtol=1e-12)
    r = ffm.map(WORKLOAD, three, objective="latency", progress=False, workers=1)
    assert r.stats.exhaustive and not r.stats.bound_reached and np.isclose(r.evaluation.latency_s, 16e-9, rtol=1e-9)
    cut = _cut_short(r)
    assert not cut.stats.complete
    words = " ".join(result_text(cut).split())
    assert "no mapping takes less than 10.67 ns" in words and "within 1.50x of the optimum" in words
    assert "best found (not provably optimal) for latency" in words and "WARNING" in words
    optimality = cut.export()["optimality"]
    assert not optimality["proven"] and np.isclose(optimality["within"], 1.5, rtol=1e-9)
    pareto = ffm.map(WORKLOAD, three, objective="pareto", progress=False, workers=1)
    cut = _cut_short(pareto)
    least = min(ev.latency_s for ev in pareto.evaluations)
    assert f"The frontier's least latency, 16 ns, is within {least / (32e-9 / 3):.2f}x" in " ".join(
        result_text(cut).split())
    optimality = cut.export()["optimality"]
    assert not optimality["proven"] and not optimality["latency_end_proven"] and "within" not in optimality
