"""The join's optimum equals brute force: every combination of pmapgen rows, validated and
evaluated as a full mapping by looptree (its own validator and reservation semantics)."""
import importlib
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
def dags(draw, n_einsums=(2, 3), sizes=(2, 4), kinds=("mm", "mv", "copy", "scale")) -> dict:
    """A workload spec: a vector copy X[m,a] = I[m,a], then Einsums each reading an earlier
    intermediate (so some tensor may be read twice): `mm` Y[m,b] = X[m,a] * W[a,b],
    `mv` Y[m] = X[m,a] * W[a], `copy` Y[..] = X[..], `scale` Y[m,a] = X[m,a] * S[m]
    (reads the head X and a [m] intermediate: a join in the DAG)."""
    n = draw(st.sampled_from(list(n_einsums)))
    ranks = {"m": draw(st.sampled_from(sizes)), "a": draw(st.sampled_from(sizes)), "b": draw(st.sampled_from(sizes))}
    einsums, shapes = ["X[m,a] = I[m,a]"], {"X": "m,a"}
    for k in range(n - 1):
        src = draw(st.sampled_from(sorted(shapes)))
        other = {"m,a": "m,b", "m,b": "m,a"}.get(shapes[src])
        options = {"copy": shapes[src]}
        if other:
            options.update({"mm": other, "mv": "m"})
        if shapes[src] == "m":
            options["scale"] = "m,a"
        kind = draw(st.sampled_from([x for x in kinds if x in options] or ["copy"]))
        name, w, out = "YZVU"[k], f"W{k}", options.get(kind, shapes[src])
        contracted = shapes[src].split(",")[-1]
        rhs = {"copy": f"{src}[{shapes[src]}]",
               "mm": f"{src}[{shapes[src]}] * {w}[{contracted},{out.split(',')[-1]}]",
               "mv": f"{src}[{shapes[src]}] * {w}[{contracted}]",
               "scale": f"X[m,a] * {src}[m]"}[kind]
        einsums.append(f"{name}[{out}] = {rhs}")
        shapes[name] = out
    return {"name": "dag", "rank_sizes": {r: s for r, s in ranks.items() if any(r in e for e in einsums)},
            "bits": 8, "einsums": einsums}


@st.composite
def chains(draw):
    """2-3 Einsums with matmuls and a vector copy, sometimes a tensor read twice; 2-3 levels."""
    w = workloads.load(draw(dags(kinds=("mm", "copy"))))
    a = arch_specs.load(draw(arch_specs_(max_levels=3, fanouts=False, capacities=["8 B", "16 B", "32 B"])))
    return w, a


def brute_force(w, a, results) -> dict[str, float]:
    """The least energy, latency and EDP over every legal, valid combination of rows."""
    best = {"energy": math.inf, "latency": math.inf, "edp": math.inf}
    names = list(w.einsum_names)
    tables = [results[e] for e in names]
    for combo in itertools.product(*[range(len(t)) for t, _ in tables]):
        pm = {e: rebuild(t.iloc[k], ts) for e, (t, ts), k in zip(names, tables, combo)}
        try:
            ev = evaluate(Mapping(pm, names), w, a)
        except MappingError:
            continue
        if ev.valid:
            for objective, value in (("energy", ev.energy_pJ), ("latency", ev.latency_s), ("edp", ev.edp)):
                best[objective] = min(best[objective], value)
    return best


def check(w, a, max_combinations, time_limit=None):
    """Skips (without asserting) a problem with more than `max_combinations` combinations, or
    one whose pmapgen takes more than `time_limit` seconds for some Einsum (3 memory levels
    with a matmul can take minutes, and those rarely have few enough combinations)."""
    results = {}
    for e in w.einsum_names:
        table, templates, stats = generate(e, w, a, time_limit=time_limit)
        results[e] = (table, templates)
        if not stats.complete or math.prod(len(t) for t, _ in results.values()) > max_combinations:
            return  # too long to enumerate, or too many combinations for brute force
    full = join({e: t for e, (t, _) in results.items()}, w, a)
    truths = brute_force(w, a, results)
    for objective in ("energy", "latency", "edp"):
        truth = truths[objective]
        if full.empty:
            assert truth == math.inf
            continue
        values = {"energy": full["energy"], "latency": full["latency"],
                  "edp": full["energy"] * full["latency"]}[objective].to_numpy()
        assert np.isclose(values.min(), truth, rtol=1e-9), objective


@settings(max_examples=10, **SETTINGS)
@given(chains())
def test_join_optimum_equals_brute_force(problem):
    check(*problem, max_combinations=600, time_limit=5.0)


@pytest.mark.slow
@settings(max_examples=200, **SETTINGS)
@given(chains())
def test_join_optimum_equals_brute_force_long(problem):
    """Up to 20,000 combinations (about 0.2 ms each through looptree) of pmapgen runs of at
    most 20 s per Einsum: without that limit a 3-level matmul's run could take minutes and
    the test never finished in 25 minutes (ninety-first session)."""
    check(*problem, max_combinations=20000, time_limit=20.0)


@settings(max_examples=6, **SETTINGS)
@given(chains(), st.sampled_from([1, 3, 16]))
def test_a_join_built_in_small_batches_equals_one_built_at_once(problem, batch_rows):
    """`join_step` builds a step's pairs in batches of about BATCH_ROWS rows, splitting a
    large pair over its partial rows and pruning as kept rows pile up; the proof's joins
    are mostly one batch. Tiny batches give the same mappings in the same order."""
    join_module = importlib.import_module("ffm.join")  # (`ffm.join` the attribute is the function)
    w, a = problem
    tables = {}
    for e in w.einsum_names:
        table, _, stats = generate(e, w, a, time_limit=5.0)
        if not stats.complete:
            return
        tables[e] = table
    whole = join(tables, w, a)
    real = join_module.BATCH_ROWS
    join_module.BATCH_ROWS = batch_rows
    try:
        batched = join(tables, w, a)
    finally:
        join_module.BATCH_ROWS = real
    assert batched.equals(whole)


def test_held_tables_are_bounded_by_count_and_rows():
    """`ffm.join.hold` (the caches of `_table` and `cut_keys`) drops the least recently used
    past its count or its rows in all, and holds no table larger than all the rows it may
    hold: at batch 64 one table may hold 600 k rows."""
    import pandas as pd
    join_module = importlib.import_module("ffm.join")
    tables = [pd.DataFrame({"x": range(n)}) for n in (3, 4, 5, 20)]
    cache: dict = {}
    for i, t in enumerate(tables[:3]):
        join_module.hold(cache, i, (t, None), most=2, most_rows=10)
    assert list(cache) == [1, 2]  # the count: the first dropped
    join_module.hold(cache, 1, cache.pop(1), most=2, most_rows=10)  # used again: last
    join_module.hold(cache, 0, (tables[0], None), most=3, most_rows=10)
    assert list(cache) == [1, 0]  # the rows: 4 + 5 + 3 > 10 drops table 2, the least recently used
    join_module.hold(cache, 3, (tables[3], None), most=3, most_rows=10)
    assert list(cache) == [1, 0]  # 20 rows alone: not held


@settings(max_examples=6, **SETTINGS)
@given(chains(), st.floats(0.0, 0.999))
def test_a_bound_admits_the_mappings_below_it_of_the_whole_join(problem, fraction):
    """`admit` runs on a batch's objectives before its reservations are built
    (`ffm.join.join_step`); a bound that only rises as Einsums join (the energy so far
    plus the least of those still to come) keeps exactly the whole join's mappings below
    it: a dominated mapping's dominator costs no more, so it is admitted too."""
    w, a = problem
    tables = {}
    for e in w.einsum_names:
        table, _, stats = generate(e, w, a, time_limit=5.0)
        if not stats.complete or table.empty:
            return
        tables[e] = table
    whole = join(tables, w, a, keep_peak=True)  # (every peak kept: several energies where one mapping is best)
    if whole.empty:
        return
    names = list(w.einsum_names)
    least = [float(tables[e]["energy"].min()) for e in names]
    # a bound between two of the whole join's energies, far from both (sums in another order differ by ulps)
    energies = np.unique(whole["energy"].to_numpy())
    k = int(fraction * (len(energies) - 1))
    if len(energies) < 2 or energies[k + 1] - energies[k] < 1e-6 * energies[k + 1]:
        return
    bound = (energies[k] + energies[k + 1]) / 2
    steps = []
    admitted = join(tables, w, a, admit=lambda i, part: np.asarray(part["energy"]) + sum(least[i + 1:]) <= bound,
                    trace=steps, keep_peak=True)
    below = whole[whole["energy"] <= bound]
    # (a tie of equal criteria may keep another mapping: the groups the bound leaves order the rows)
    values = [c for c in whole.columns if c != "rows" and not c.startswith("row:")]
    assert sorted(admitted[values].itertuples(index=False)) == sorted(below[values].itertuples(index=False))
    assert len(below) < len(whole)
    assert all(s.kept <= s.admitted <= s.joined for s in steps)
