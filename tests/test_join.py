"""The join's optimum equals brute force: every combination of pmapgen rows, validated and
evaluated as a full mapping by looptree (its own validator and reservation semantics)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arch as arch_specs
import workloads
from ffm.join import join
from looptree import Mapping, MappingError, evaluate
from pmapgen import generate, rebuild
from tests.strategies import arch_specs_

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def chains(draw):
    """2-3 Einsums: a chain with matmuls and a vector copy, sometimes a tensor read twice."""
    n = draw(st.sampled_from([2, 4]))
    rank_sizes = {"m": draw(st.sampled_from([2, 4])), "a": n, "b": draw(st.sampled_from([2, 3])), "c": 2}
    einsums = ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W1[a,b]"]
    third = draw(st.sampled_from(["none", "chain", "fanout"]))
    if third == "chain":
        einsums.append("Z[m,c] = Y[m,b] * W2[b,c]")
    elif third == "fanout":
        einsums.append("Z[m,c] = X[m,a] * W2[a,c]")
    w = workloads.load({"name": "chain", "rank_sizes": rank_sizes, "bits": 8, "einsums": einsums})
    a = arch_specs.load(draw(arch_specs_(max_levels=3, fanouts=False, capacities=["8 B", "16 B", "32 B"])))
    return w, a


def brute_force(w, a, results, objective):
    best = math.inf
    names = list(w.einsum_names)
    tables = [results[e] for e in names]
    for combo in itertools.product(*[range(len(t)) for t, _ in tables]):
        pm = {e: rebuild(t.iloc[k], ts) for e, (t, ts), k in zip(names, tables, combo)}
        try:
            ev = evaluate(Mapping(pm, names), w, a)
        except MappingError:
            continue
        if ev.valid:
            best = min(best, {"energy": ev.energy_pJ, "latency": ev.latency_s, "edp": ev.edp}[objective])
    return best


def check(w, a, max_combinations):
    results = {e: generate(e, w, a)[:2] for e in w.einsum_names}
    if math.prod(len(t) for t, _ in results.values()) > max_combinations:
        return  # too many combinations for brute force
    full = join({e: t for e, (t, _) in results.items()}, w, a)
    for objective in ("energy", "latency", "edp"):
        truth = brute_force(w, a, results, objective)
        if full.empty:
            assert truth == math.inf
            continue
        values = {"energy": full["energy"], "latency": full["latency"],
                  "edp": full["energy"] * full["latency"]}[objective].to_numpy()
        assert np.isclose(values.min(), truth, rtol=1e-9), objective


@settings(max_examples=10, **SETTINGS)
@given(chains())
def test_join_optimum_equals_brute_force(problem):
    check(*problem, max_combinations=600)


@pytest.mark.slow
@settings(max_examples=200, **SETTINGS)
@given(chains())
def test_join_optimum_equals_brute_force_long(problem):
    check(*problem, max_combinations=20000)
