"""Refining the wildcard bound's terms (`ffm.refine`): the rest's least energy per key a
wildcard's inputs can take equals the joins over tables cut to that key, computed
separately; the proof that refines terms is checked end to end against brute force in
tests/test_budgets.py (every raise cut short)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ffm.refine import _join_energy, rest_by_key, tagged_tensors
from pmapgen import generate
from tests.test_search import RTOL, SETTINGS, _bump, problems, report  # noqa: F401


def check_rest_by_key(workload, arch, pick: int) -> None:
    order = list(workload.einsum_names)
    readers = [e for e in order if tagged_tensors(workload, (e,), e)]
    if not readers:
        _bump("no Einsum reads a produced tensor")
        return
    e = readers[pick % len(readers)]
    tables = {x: generate(x, workload, arch, objectives=("energy",))[0] for x in order}
    got = rest_by_key(workload, arch, tables, (e,), e, math.inf)
    tagged = sorted(tagged_tensors(workload, (e,), e).items())
    rest = [x for x in order if x != e]
    last = max(rest.index(user) for _, user in tagged)
    first, after = rest[:last + 1], rest[last + 1:]
    tail = _join_energy(tables, workload, arch, after)
    # every key the producers' tables hold, joined with those tables cut to rows giving it
    keys = {()}
    for t, user in tagged:
        values = {dict(k[0])[t] for k in tables[user]["compat"]}
        keys = {key + ((t, v),) for key in keys for v in values}
    want = {}
    for key in keys:
        cut = dict(tables)
        for t, v in key:
            user = dict(tagged)[t]
            cut[user] = cut[user][[dict(k[0])[t] == v for k in cut[user]["compat"]]]
        energy = _join_energy(cut, workload, arch, first) + tail
        if math.isfinite(energy):
            want[key] = energy
    _bump("checked")
    _bump("keys", len(want))
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, energy in want.items():
        assert np.isclose(got[key], energy, rtol=RTOL), (key, got[key], energy)
    # a limit keeps exactly the keys below it
    if want:
        limit = float(np.median(list(want.values())))
        assert set(rest_by_key(workload, arch, tables, (e,), e, limit)) == {k for k, v in want.items() if v < limit}


@settings(max_examples=15, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_the_rest_by_key_is_the_join_over_tables_cut_to_each_key(problem, pick):
    check_rest_by_key(*problem, pick=pick)
