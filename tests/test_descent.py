"""Coordinate descent (`ffm.descent`): started from the best mapping of a random part of
each Einsum's exhaustive table (what a time-limited pmapgen might have found), a round
gives exactly the join of those rows together with, per Einsum, every pmapping of the
compatibility group the mapping chose for it within the budget its rising search ended
at (at most the chosen pmapping's energy, at least the group's minimum);
rounds only lower the energy, never below the exhaustive optimum, and the result
rebuilds to a valid mapping of that energy. An Einsum is skipped exactly when its chosen
pmapping is within `min_gap` x the mapping's energy of its group's energy floor. (Fusion
moves are off here; tests/test_fusion.py checks them.)"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from ffm.descent import descend
from ffm.search import search
from pmapgen import Constraints, generate
from pmapgen.all_einsums import signature
from pmapgen.prefixes import energy_lower_bound
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report, two_levels  # noqa: F401


def exhaustive_and_part(workload, arch, pick: int, always=None):
    """(generated, tables, truth, some, start): each Einsum's exhaustive pmapgen result and
    table, the exhaustive optimum, a part of each table (a random 30% of its rows, and
    those `always(table)` marks) and the best mapping of the part; None (counted) when
    there is no valid mapping or none in the part."""
    order = tuple(workload.einsum_names)
    generated = {e: generate(e, workload, arch, objectives=("energy",)) for e in order}
    tables = {e: r[0] for e, r in generated.items()}
    if any(t.empty for t in tables.values()):
        return None
    truth = search(tables, workload, arch, "energy")
    if truth.best.empty:
        _bump("no valid mapping")
        return None
    rng = np.random.default_rng(pick)
    some = {e: t[(rng.random(len(t)) < 0.3) | (False if always is None else always(t))].reset_index(drop=True)
            for e, t in tables.items()}
    start = search(some, workload, arch, "energy")
    if start.best.empty:
        _bump("nothing valid in the part")
        return None
    return generated, tables, truth, some, start


def check_descent(workload, arch, pick: int, rounds: int, min_gap: float) -> None:
    order = tuple(workload.einsum_names)
    made = exhaustive_and_part(workload, arch, pick)
    if made is None:
        return
    generated, tables, truth, some, start = made
    energy = float(start.best["energy"].iloc[0])
    found = {e: (some[e], generated[e][1], generated[e][2]) for e in order}
    join_tables = lambda tabs, name, known: search(tabs, workload, arch, "energy", known=known)  # noqa: E731
    results, best, d = descend(workload, arch, found, start, join_tables, workers=1, progress=False,
                               max_rounds=rounds, min_gap=min_gap, fusions=0)
    _bump("checked")
    _bump("lowered", int(d.after < energy * (1 - RTOL)))
    _bump("skipped some", int(bool(d.skipped)))
    assert d.before == energy and (d.rounds or d.skipped)
    assert truth.best["energy"].iloc[0] * (1 - RTOL) <= d.after <= energy
    if rounds == 1:  # one round by hand: each Einsum's group within the budget its rising search ended at
        extra = {}
        rows = {e: some[e].loc[i] for e, i in zip(order, start.best["rows"].iloc[0])}
        sig = {e: signature(e, workload, Constraints(key=r["compat"])) for e, r in rows.items()}
        searched = d.rounds[0].stats if d.rounds else {}
        # the first round's skips (`d.skipped` is the last mapping's: after the round the loop
        # looks at its new mapping once more, skips again, and stops at the round limit)
        skipped = d.rounds[0].skipped if d.rounds else d.skipped
        for e, row in rows.items():
            if e not in searched:  # skipped: its group's floor is within min_gap x the energy of its choice
                assert e in skipped and skipped[e] < min_gap * energy
                assert np.isclose(skipped[e], row["energy"] - energy_lower_bound(e, workload, arch,
                                                                                 Constraints(key=row["compat"])))
                extra[e] = some[e].iloc[:0]
                continue
            floor = energy_lower_bound(e, workload, arch, Constraints(key=row["compat"]))
            assert row["energy"] - floor >= min_gap * energy * (1 - RTOL)
            budget = searched[e].budget
            # Einsums identical up to names (with equal keys) are searched once, at the largest ceiling
            assert budget <= max(rows[o]["energy"] for o in order if sig[o] == sig[e]) * (1 + RTOL)
            t = tables[e]
            group = t[[c == row["compat"] for c in t["compat"]]]
            assert budget >= group["energy"].min() * (1 - RTOL)  # it reached the group's minimum
            extra[e] = group[group["energy"] <= budget * (1 + RTOL)]
        expected = search({e: pd.concat([some[e], extra[e]]) for e in order}, workload, arch, "energy")
        assert np.isclose(d.after, expected.best["energy"].iloc[0], rtol=RTOL), (d.after, expected.best)
    ev = chosen(best, {e: r[0] for e, r in results.items()}, {e: r[1] for e, r in results.items()}, workload, arch)
    assert np.isclose(ev.energy_pJ, d.after, rtol=RTOL)


@settings(max_examples=30, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6), st.sampled_from([1, 4]), st.sampled_from([0.0, 0.05]))
def test_descent_rounds_join_each_einsum_s_group_within_its_energy(problem, pick, rounds, min_gap):
    check_descent(*problem, pick=pick, rounds=rounds, min_gap=min_gap)


@pytest.mark.slow
@settings(max_examples=150, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6), st.sampled_from([1, 4]), st.sampled_from([0.0, 0.05]))
def test_descent_rounds_join_each_einsum_s_group_within_its_energy_long(problem, pick, rounds, min_gap):
    check_descent(*problem, pick=pick, rounds=rounds, min_gap=min_gap)


def test_one_round_checks_its_own_skips_when_the_last_mapping_skips_others():
    """A case hypothesis found (fifteenth session): after its one round the descent looks at
    its new mapping once more and skips other Einsums, so `Descent.skipped` differs from the
    round's own skips (`Round.skipped`), which are those of the mapping it started from."""
    w = workloads.load({"name": "dag", "rank_sizes": {"m": 2, "a": 2, "b": 2}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W0[a,b]", "Z[m] = X[m,a] * W1[a]",
                                    "V[m] = X[m,a] * W2[a]"]})
    a = two_levels("4 B", "0.1 pJ/bit", "0.1 pJ/bit", top_bandwidth="1 GB/s", name="random")
    check_descent(w, a, pick=79199, rounds=1, min_gap=0.05)


@settings(max_examples=25, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_rising_searches_cut_short_by_their_row_cap_leave_the_mapping_as_it_was(problem, pick):
    """The descent's rising searches stop at `PROOF_ROWS` waiting rows (here 0: every one is
    cut short by that cap). A search cut short keeps nothing, so every round ends at the
    energy it started from, and the result is still the valid mapping it started with."""
    from unittest import mock

    import ffm.descent as descent_module
    from pmapgen.generate import ROW_LIMIT
    workload, arch = problem
    made = exhaustive_and_part(workload, arch, pick)
    if made is None:
        return
    generated, _, _, some, start = made
    order = tuple(workload.einsum_names)
    energy = float(start.best["energy"].iloc[0])
    found = {e: (some[e], generated[e][1], generated[e][2]) for e in order}
    join_tables = lambda tabs, name, known: search(tabs, workload, arch, "energy", known=known)  # noqa: E731
    with mock.patch.object(descent_module, "PROOF_ROWS", 0):
        results, best, d = descend(workload, arch, found, start, join_tables, workers=1, progress=False,
                                   max_rounds=2, min_gap=0.0, fusions=0)
    stats = [s for r in d.rounds for s in r.stats.values()]
    _bump("checked")
    _bump("searches cut by rows", len(stats))
    assert all(not s.complete and s.stopped_by == ROW_LIMIT for s in stats), stats
    assert d.after == energy and all(r.energy == energy for r in d.rounds)
    ev = chosen(best, {e: r[0] for e, r in results.items()}, {e: r[1] for e, r in results.items()}, workload, arch)
    assert np.isclose(ev.energy_pJ, energy, rtol=RTOL)
