"""The energy proof (`ffm.budgets`): started from any valid mapping, the budgeted prefix
searches find each Einsum's exact minimum energy, and the join over their tables returns
the exhaustive optimum of tests/test_search.py's brute force (every legal pmapping of every
Einsum, every compatible combination, judged by `looptree.evaluate`)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ffm.budgets import einsum_budgets, prove_energy
from ffm.join import join
from pmapgen import generate
from pmapgen.all_einsums import signature
from tests.test_search import RTOL, SETTINGS, BruteForce, TooBig, _bump, chosen, problems, report  # noqa: F401


def check_proof(workload, arch, pick: int, max_combinations: int, max_oracle_work: int = 500_000) -> None:
    """The proof started from a valid mapping joined from a random part of the pmappings."""
    try:
        truth = BruteForce(workload, arch, max_combinations, max_oracle_work).best("energy", max_evaluations=3_000)
    except TooBig as too_big:
        _bump(f"skipped (too many {too_big.args[0]})")
        return
    if math.isinf(truth):
        _bump("no valid mapping")
        return
    order = tuple(workload.einsum_names)
    generated = {e: generate(e, workload, arch, objectives=("energy",)) for e in order}
    tables = {e: r[0] for e, r in generated.items()}
    # what a time-limited pmapgen might have found: a random part of each table, and a
    # valid mapping joined from it
    rng = np.random.default_rng(pick)
    some = {e: t[rng.random(len(t)) < 0.3] for e, t in tables.items()}
    full = join(some, workload, arch, ("energy",))
    if full.empty:
        some, full = tables, join(tables, workload, arch, ("energy",))
    start = float(full["energy"].iloc[pick % len(full)])
    _bump("checked")
    _bump("started above the optimum", int(start > truth * (1 + RTOL)))

    found = {e: (some[e], generated[e][1], generated[e][2]) for e in order}
    results, best, proof = prove_energy(workload, arch, start, found, workers=1, progress=False)
    assert proof.proven and results is not None and best is not None
    assert truth * (1 - RTOL) <= proof.bound <= start and proof.found == start
    assert proof.lower <= truth * (1 + RTOL)
    _bump("budgets step run", int(len(proof.steps) == 2))
    same = {e: [o for o in order if signature(o, workload, None) == signature(e, workload, None)] for e in order}
    for e in order:  # the minima are exact: the enumeration's lowest energy, whatever was found
        assert np.isclose(proof.minima[e], tables[e]["energy"].min(), rtol=RTOL), e
        if len(proof.steps) == 2:  # step 2's tables: Einsums generated once get the largest budget among them
            limit = max(max(proof.budgets[o], some[o]["energy"].min()) for o in same[e])
            assert (results[e][0]["energy"] <= limit * (1 + RTOL)).all(), e
    ev = chosen(best, {e: r[0] for e, r in results.items()}, {e: r[1] for e, r in results.items()},
                workload, arch)
    assert np.isclose(ev.energy_pJ, truth, rtol=RTOL), (ev.energy_pJ, truth)


@settings(max_examples=20, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_proof_from_any_valid_mapping_finds_the_exhaustive_optimum(problem, pick):
    check_proof(*problem, pick=pick, max_combinations=3_000_000)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.integers(0, 10**6))
def test_proof_from_any_valid_mapping_finds_the_exhaustive_optimum_long(problem, pick):
    check_proof(*problem, pick=pick, max_combinations=10_000_000, max_oracle_work=3_000_000)


def test_budgets_add_the_slack_to_each_minimum():
    """U = 10 with minima 2 and 5: each Einsum may spend its minimum plus the 3 the others
    leave unused, and a mapping spending more on one must spend less than the minimum on
    another."""
    assert einsum_budgets(10.0, {"A": 2.0, "B": 5.0}) == {"A": 5.0, "B": 8.0}
