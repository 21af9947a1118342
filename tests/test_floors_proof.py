"""The energy proof at the latency floors (`ffm.latency_proof.prove_at_floors`): with every
Einsum held to its own latency floor it finds a mapping exactly when one meets the latency
bound B, and when it completes that mapping has the least energy of every mapping at B,
checked against the exhaustive energy-latency frontier (every legal pmapping of every
Einsum, joined); an Einsum with no pmapping within its floor proves B unmet. And `ffm.map`
takes its result for latency, and joins its tables for pareto and EDP."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ffm
from ffm.latency_bound import latency_lower_bound
from ffm.latency_proof import prove_at_floors
from ffm.report import result_text
from ffm.search import search
from pmapgen import generate
from tests.test_latency_proof import mm2
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report  # noqa: F401


def check_floors_proof(workload, arch) -> None:
    """met exactly when the exhaustive frontier's least latency is B; then, the proof
    complete, the mapping found is at B with the frontier's least energy there."""
    generated = {e: generate(e, workload, arch) for e in workload.einsum_names}
    tables = {e: g[0] for e, g in generated.items()}
    if any(t.empty for t in tables.values()) or (frontier := search(tables, workload, arch, "pareto").best).empty:
        _bump("no valid mapping")
        return
    fastest = frontier.loc[frontier["latency"].idxmin()]
    low = latency_lower_bound(workload, arch)
    exists = float(fastest["latency"]) <= low * (1 + RTOL)
    fp = prove_at_floors(workload, arch, None, 60.0, workers=1)
    assert fp.met == exists, (float(fastest["latency"]), low)
    assert not (fp.above and exists)
    if not exists:
        _bump("B above: Einsum with none within its floor" if fp.above else "B above: no join")
        return
    assert fp.proof.proven and fp.least
    ev = chosen(fp.found, {e: r[0] for e, r in fp.tables.items()}, {e: r[1] for e, r in fp.tables.items()},
                workload, arch)
    assert np.isclose(ev.latency_s, low, rtol=RTOL)
    assert np.isclose(ev.energy_pJ, float(fastest["energy"]), rtol=RTOL), (ev.energy_pJ, float(fastest["energy"]))
    _bump("B met, least energy there")


@settings(max_examples=15, **SETTINGS)
@given(problems(max_levels=2))
def test_the_floors_proof_finds_the_least_energy_at_the_latency_bound(problem):
    check_floors_proof(*problem)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(sizes=(2, 3, 4)))
def test_the_floors_proof_finds_the_least_energy_at_the_latency_bound_long(problem):
    check_floors_proof(*problem)


def test_map_takes_the_floors_proof_s_result_for_latency():
    """tests/test_map.py's mm2 meets its latency bound: `ffm.map --objective latency` with a
    time limit (pmapgen would be cut short before keeping anything) returns the floors
    proof's mapping: at the bound, with the exhaustive frontier's least energy there (the
    exhaustive latency join, which breaks no ties, returns a costlier one), proven, with
    nothing else run, and the report says why."""
    w, a = mm2()
    frontier = ffm.map(w, a, objective="pareto", progress=False, workers=1).evaluations
    fastest = min(frontier, key=lambda ev: (ev.latency_s, ev.energy_pJ))
    r = ffm.map(w, a, objective="latency", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0)
    fp = r.stats.floors
    assert fp.least and r.stats.complete and r.stats.bound_reached and r.evaluation.valid
    assert np.isclose(r.evaluation.latency_s, latency_lower_bound(w, a), rtol=RTOL)
    assert np.isclose(r.evaluation.latency_s, fastest.latency_s, rtol=RTOL)
    assert np.isclose(r.evaluation.energy_pJ, fastest.energy_pJ, rtol=RTOL)
    assert r.stats.latency_proof is None and r.stats.proof is None and not r.stats.pmapgen and not r.stats.descent
    assert set(r.stats.seconds) == {"floors proof", "evaluation"}
    assert r.optimality()["proven"] and r.optimality()["within"] == 1.0
    words = " ".join(result_text(r).split())
    assert "mm2 on fan2: optimal for latency" in words
    assert "pmapgen: not run (the energy proof at the latency floors gave the result, below)" in words
    assert "is the least energy of every mapping at the bound, which no mapping beats for latency: it is the " \
           "result, and nothing else ran" in words


def test_pareto_and_edp_join_the_floors_proof_s_tables():
    """With pmapgen cut short, pareto's least-latency point is the exhaustive frontier's
    (latency and energy) once the floors proof's tables join, and the export says so; EDP
    starts its proof from the floors proof's mapping and ends at the exhaustive EDP
    optimum, which here is that point."""
    w, a = mm2()
    kw = dict(progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0)
    exact = ffm.map(w, a, objective="pareto", progress=False, workers=1).evaluations
    fastest = min(exact, key=lambda ev: (ev.latency_s, ev.energy_pJ))
    pareto = ffm.map(w, a, objective="pareto", **kw)
    got = min(pareto.evaluations, key=lambda ev: (ev.latency_s, ev.energy_pJ))
    assert pareto.stats.floors.least and pareto.stats.latency_end and got.valid
    assert np.isclose(got.latency_s, fastest.latency_s, rtol=RTOL) and np.isclose(got.energy_pJ, fastest.energy_pJ,
                                                                                   rtol=RTOL)
    assert pareto.optimality()["latency_end_least_energy"] and pareto.optimality()["latency_end_proven"]
    assert "it is the frontier's least-latency point" in " ".join(result_text(pareto).split())
    exact_edp = ffm.map(w, a, objective="edp", progress=False, workers=1).evaluation
    edp = ffm.map(w, a, objective="edp", **kw)
    assert np.isclose(edp.evaluation.edp, exact_edp.edp, rtol=RTOL) and edp.evaluation.valid
    assert np.isclose(edp.evaluation.edp, fastest.edp, rtol=RTOL)
    assert edp.stats.edp_proof.proven  # (from the floors proof's mapping: tests/test_edp_proof.py)
    assert "the EDP proof below started from it" in " ".join(result_text(edp).split())


def test_an_einsum_with_no_pmapping_within_its_floor_proves_the_bound_unmet():
    """tests/test_latency_proof.py's slow arch (Z cannot reach its floor: 20 ns against a
    16 ns bound): the floors proof says every mapping is slower than B, the latency set is
    not run, and the time-limited flow finds the same result as without the floors proof."""
    import arch as arch_specs
    import workloads
    from tests.test_map import ARCH, WORKLOAD
    slow = {**ARCH, "levels": [{**ARCH["levels"][0], "bandwidth": "2 GB/s"}, {**ARCH["levels"][1], "capacity": "4 B"},
                               ARCH["levels"][2]]}
    w, a = workloads.load(WORKLOAD), arch_specs.load(slow)
    kw = dict(objective="latency", progress=False, workers=1, time_limit=1e-9, proof_time_limit=60.0)
    r = ffm.map(w, a, **kw)
    off = ffm.map(w, a, floors_proof=False, latency_set_time=0, **kw)
    fp = r.stats.floors
    assert fp.above and not fp.met and fp.proof.incomplete == ("Z",) and r.stats.latency_proof is None
    assert not r.stats.bound_reached and r.evaluation.valid
    assert np.isclose(r.evaluation.latency_s, off.evaluation.latency_s, rtol=RTOL)
    words = " ".join(result_text(r).split())
    assert "Z has no pmapping within its floor, so every mapping takes longer than 16 ns" in words


def check_floors_slack(workload, arch, pick: int) -> None:
    """`ffm.slack.slack_tables` with every Einsum held to its floor, at U the least energy at
    B (or 5% or 50% above it): its tables hold only pmappings within the floors, and every
    pmapping of every mapping at B within U (each Einsum's exhaustive pmappings within its
    floor, joined) is dominated in its Einsum's table, within its compatibility group, on
    energy and reservations; the tables join to the least energy at B."""
    from ffm.latency_bound import einsum_latency_floor
    from ffm.latency_proof import floor_constraints
    from ffm.slack import slack_tables
    from tests.test_slack import dominated
    floors = {e: einsum_latency_floor(e, workload, arch) * (1 + RTOL) for e in workload.einsum_names}
    full = {e: generate(e, workload, arch)[0] for e in workload.einsum_names}
    tables = {e: t[t["latency"] <= floors[e]] if len(t) else t for e, t in full.items()}
    if any(t.empty for t in tables.values()) or (truth := search(tables, workload, arch, "energy").best).empty:
        _bump("no mapping at B")
        return
    least = float(truth["energy"].iloc[0])
    bound = least * (1.0, 1.05, 1.5)[pick % 3]
    minima = {e: float(t["energy"].min()) for e, t in tables.items()}
    got = slack_tables(workload, arch, bound, minima, floor_constraints(workload, arch), workers=1)
    assert not got.incomplete
    for e, (table, _, _) in got.results.items():  # (only pmappings within the floors)
        assert (table["latency"] <= floors[e] * (1 + RTOL)).all(), e
    for e, table in tables.items():
        for i in range(len(table)):
            best = search({**tables, e: table.iloc[[i]]}, workload, arch, "energy").best
            if best.empty or float(best["energy"].iloc[0]) > bound * (1 + RTOL):
                continue
            _bump("pmappings of a mapping at B within U")
            assert dominated(table.iloc[i], got.results[e][0]), (e, table.iloc[i]["compat"])
    found = search({e: r[0] for e, r in got.results.items()}, workload, arch, "energy").best
    assert np.isclose(float(found["energy"].iloc[0]), least, rtol=RTOL)
    assert float(found["latency"].iloc[0]) <= latency_lower_bound(workload, arch) * (1 + RTOL)
    _bump("checked")


@settings(max_examples=10, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_slack_tables_at_the_floors_hold_every_pmapping_of_every_mapping_at_the_bound_within_u(problem, pick):
    check_floors_slack(*problem, pick=pick)


def test_the_floors_proof_ends_at_the_first_raise_cut_short_while_nothing_joins(monkeypatch):
    """A copy and two matrix-vector products on two levels (a case drawn as `problems` draws
    them) where, with `PROOF_ROWS` at 1, every raise is cut short and the minima's tables
    join to nothing. The energy proof at the floors raises again after the first raise cut
    short, and finds nothing; the floors proof (`raise_after_cut=False`) ends there, with
    the same answer. A mapping does meet B here (the exhaustive frontier's least latency):
    a proof cut short says only that it found none, never that none exists (`above`)."""
    import math

    import arch as arch_specs
    import ffm.budgets as budgets
    import workloads
    from ffm.latency_proof import floor_constraints
    w = workloads.load({"name": "dag", "rank_sizes": {"m": 4, "a": 3}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m] = X[m,a] * W0[a]", "Z[m] = X[m,a] * W1[a]"]})
    a = arch_specs.load({"name": "random", "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "bandwidth": "4 GB/s"},
        {"memory": "L1", "capacity": "2 B", "read_energy": "0.5 pJ/bit", "write_energy": "0.2 pJ/bit",
         "bandwidth": "4 GB/s"},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]})
    frontier = search({e: generate(e, w, a)[0] for e in w.einsum_names}, w, a, "pareto").best
    assert np.isclose(float(frontier["latency"].min()), latency_lower_bound(w, a), rtol=RTOL)
    monkeypatch.setattr(budgets, "PROOF_ROWS", 1)

    def raises(steps) -> list[bool]:  # per raise: was it cut short
        return [not all(s.complete for s in got.values()) for name, got in steps if name.startswith("raise")]

    _, found, proof = budgets.prove_energy(w, a, math.inf, {}, floor_constraints(w, a), 60.0, 1, False)
    assert found is None and len(raises(proof.steps)) > 1 and raises(proof.steps)[0]
    fp = prove_at_floors(w, a, None, 60.0, workers=1)
    assert [name for name, _ in fp.proof.steps] == ["minima", "raise 1"] and raises(fp.proof.steps) == [True]
    assert not fp.met and fp.found is None and not fp.above
