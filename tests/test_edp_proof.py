"""The EDP proof (`ffm.edp_proof`): from a candidate mapping and a lower bound on every
mapping's energy, energy proofs over intervals of latency prove no mapping has a lower
EDP. Checked against the exhaustive EDP optimum (every legal pmapping of every Einsum,
joined): a proven candidate is the optimum, and any candidate it ends with is a real
mapping no better than it. And `ffm.map --objective edp` takes a proven result."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

import ffm
from ffm.edp_proof import edp_of, prove_edp
from ffm.latency_proof import prove_at_floors
from ffm.report import result_text
from ffm.search import search
from pmapgen import generate
from tests.test_latency_proof import mm2
from tests.strategies import two_levels
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report  # noqa: F401


def check_edp_proof(workload, arch) -> None:
    """Candidates: the floors proof's mapping where it meets the latency bound, else the
    least-energy mapping; the energy bound: the exhaustive energy optimum."""
    tables = {e: generate(e, workload, arch)[0] for e in workload.einsum_names}
    if any(t.empty for t in tables.values()) or (best := search(tables, workload, arch, "edp").best).empty:
        _bump("no valid mapping")
        return
    optimum = float(best["energy"].iloc[0]) * float(best["latency"].iloc[0])
    least = float(search(tables, workload, arch, "energy").best["energy"].iloc[0])
    fp = prove_at_floors(workload, arch, None, 60.0, workers=1)
    if fp.met:
        candidate = (fp.tables, fp.found)
    else:
        from ffm.budgets import prove_energy
        res, found, _ = prove_energy(workload, arch, math.inf, {}, None, 60.0, 1, False)
        candidate = (res, found)
    ep = prove_edp(workload, arch, None, candidate, least, 60.0, workers=1)
    ev = chosen(ep.found, {e: r[0] for e, r in ep.tables.items()}, {e: r[1] for e, r in ep.tables.items()},
                workload, arch)
    assert np.isclose(ev.edp, ep.value, rtol=RTOL) and ep.value >= optimum * (1 - RTOL)
    assert ep.value <= edp_of(candidate[1]) * (1 + RTOL)
    if ep.proven:
        assert np.isclose(ep.value, optimum, rtol=RTOL), (ep.value, optimum)
        _bump(f"proven, {len(ep.steps)} step(s)" + (", candidate at B" if fp.met else ""))
        if ep.value > edp_of(candidate[1]) * (1 - RTOL) and not np.isclose(optimum, least * fp.bound, rtol=RTOL):
            _bump("proven above the plain EDP bound")
    else:
        _bump("not proven" + (", candidate at B" if fp.met else ""))


@settings(max_examples=15, **SETTINGS)
@given(problems(max_levels=2))
def test_the_edp_proof_proves_only_the_exhaustive_edp_optimum(problem):
    check_edp_proof(*problem)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(sizes=(2, 3, 4)))
def test_the_edp_proof_proves_only_the_exhaustive_edp_optimum_long(problem):
    check_edp_proof(*problem)


def test_map_takes_the_edp_proof_s_result():
    """mm2: EDP with a time limit (pmapgen would be cut short before keeping anything) is
    proven optimal from the floors proof's mapping, above the EDP bound (the energy bound
    times the latency bound), with pmapgen not run, and the report says so."""
    w, a = mm2()
    exact = ffm.map(w, a, objective="edp", progress=False, workers=1).evaluation
    r = ffm.map(w, a, objective="edp", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0)
    assert r.stats.edp_proof.proven and r.stats.complete and not r.stats.bound_reached and r.evaluation.valid
    assert np.isclose(r.evaluation.edp, exact.edp, rtol=RTOL)
    assert r.optimality()["proven"] and r.optimality()["within"] == 1.0
    assert r.optimality()["lower_bounds"]["edp"] < r.evaluation.edp * (1 - 1e-3)  # (the plain bound falls short)
    assert not r.stats.pmapgen and not r.stats.descent and "edp proof" in r.stats.seconds
    words = " ".join(result_text(r).split())
    assert "mm2 on fan2: optimal for edp" in words
    assert "pmapgen: not run (the EDP proof gave the result, below)" in words
    assert "no mapping has a lower EDP, so the result is optimal" in words


DAG = {"name": "dag", "rank_sizes": {"m": 3, "a": 3}, "bits": 8,
       "einsums": ["X[m,a] = I[m,a]", "Y[m] = X[m,a] * W0[a]", "Z[m,a] = X[m,a] * Y[m]", "V[m] = Z[m,a] * W2[a]"]}
TWO_LEVELS = two_levels("4 GB/s", "32 B", "1 GB/s")


def test_a_candidate_at_the_bound_that_is_not_the_edp_optimum_is_not_proven():
    """A case found by search where the floors proof's mapping (at B = 36 ns, 849.6 pJ) is
    not the EDP optimum (360 pJ at 75 ns): the proof must not claim it, whatever it
    finds; an EDP proof whose energy proofs ignored the slack up to h (held every Einsum
    to its floor alone) proved a mapping of 30.59 fJ*s against the optimum's 27 fJ*s."""
    import arch as arch_specs
    import workloads
    w, a = workloads.load(DAG), arch_specs.load(TWO_LEVELS)
    check_edp_proof(w, a)
    fp = prove_at_floors(w, a, None, 60.0, workers=1)
    assert fp.least and np.isclose(float(fp.found.best["energy"].iloc[0]), 849.6, rtol=RTOL)
    ep = prove_edp(w, a, None, (fp.tables, fp.found), 283.2, 60.0, workers=1)
    assert not ep.proven or np.isclose(ep.value, 360.0 * 75e-9, rtol=RTOL)
    assert np.isclose(edp_of(fp.found), 849.6 * 36e-9, rtol=RTOL)
    assert ep.value < edp_of(fp.found) * (1 - 1e-3)  # (the sweep's first proof found a better mapping)
