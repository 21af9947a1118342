"""The mapper's answer equals the exhaustive optimum (DESIGN §7), and the dirty pass keeps
its guarantee (docs/search.md).

Truth is independent of pmapgen and the join: every legal pmapping of each Einsum is
enumerated by `tests/oracle.py` (loop budget large enough for every tile chain, so the
enumeration is complete), and every compatible combination is a candidate mapping, judged
by `looptree.evaluate` (its validator and its reservation semantics). To keep that
tractable the brute force
- drops pmappings that overflow a level on their own (their tiles alone are live while their
  Einsum runs, so every mapping holding them is invalid);
- keeps one pmapping per class of pmappings identical in everything `looptree.evaluate`
  reads (compatibility keys, fused loops, energy, latency, and each tile's level, size,
  lifetime depth and shared-backing tensor): swapping them changes no mapping's validity,
  energy, latency or peaks;
- combines only pmappings that agree on every shared tensor's c_T (others are illegal);
- computes every combination's energy and latency as the sums over its Einsums (exactly
  what `evaluate` totals), sorts by the objective and evaluates in that order: the first
  legal and valid one is the optimum, since everything before it was evaluated and rejected.
Examples with more combinations (or more rejections) than a limit are skipped and counted.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import arch as arch_specs
import workloads
from ffm.epsilon import epsilon_mask
from ffm.search import objective_value, search
from looptree import Mapping, MappingError, evaluate
from looptree.model import analyze, cost
from looptree.validate import compatibility, fused_depth, normalize
from pmapgen import generate, pareto_mask, rebuild
from tests.oracle import _loop_sequences, all_pmappings
from tests.strategies import arch_specs_
from tests.test_join import dags

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)
OBJECTIVES = ("energy", "latency", "edp")
RTOL = 1e-9
STATS: dict[str, int] = {}  # what a bounded run checked and skipped (printed after each test with -s)


def _bump(key: str, n: int = 1) -> None:
    STATS[key] = STATS.get(key, 0) + n


# ---------------------------------------------------------------- problems

@st.composite
def problems(draw, n_einsums=(2, 3, 4), sizes=(2, 3), min_levels: int = 2, max_levels: int = 3,
             must_keep: bool = True):
    """(workload, arch): a random DAG (tests.test_join.dags) on 2-3 levels with small
    capacities, random bandwidths (so latency depends on the mapping) and sometimes a level
    that must keep every tensor (so that no valid mapping may exist). On 3 levels the DAG
    has no matmul (3-rank Einsums make the oracle enumeration too long there)."""
    spec = draw(arch_specs_(min_levels=min_levels, max_levels=max_levels, fanouts=False,
                            capacities=["2 B", "4 B", "8 B", "16 B", "32 B"]))
    memories = spec["levels"][:-1]
    for level in memories:
        level["bandwidth"] = draw(st.sampled_from(["1 GB/s", "4 GB/s", "inf"]))
    if must_keep and draw(st.integers(0, 3)) == 0:
        draw(st.sampled_from(memories[1:]))["must_keep"] = ["all"]
    kinds = ("mm", "mv", "copy", "scale") if len(memories) == 2 else ("mv", "copy", "scale")
    w = workloads.load(draw(dags(n_einsums=n_einsums, sizes=sizes, kinds=kinds)))
    return w, arch_specs.load(spec)


# ---------------------------------------------------------------- exhaustive pmappings

_ORACLE: OrderedDict = OrderedDict()  # structural key -> [(pmapping, analysis)], least recent first
_ORACLE_ENTRIES = 12  # ~60 MB per 16k pmappings


def _tile_chain_length(n: int) -> int:
    """Most loops one rank of size n can be split into (tiles strictly decreasing divisors)."""
    k, d = 0, 2
    while n > 1:
        while n % d == 0:
            n, k = n // d, k + 1
        d += 1
    return k


def _oracle_key(workload, arch, einsum: str) -> tuple:
    """What legality and counts depend on: the Einsum, its rank sizes, its tensors and their
    sharing, and the arch's structure (not energies, bandwidths or capacities)."""
    e = workload.einsum(einsum)
    return (e, tuple(workload.rank_sizes[r] for r in e.rank_variables),
            tuple((workload.tensors[t], workload.is_shared(t)) for t in e.tensors),
            tuple((m.name, m.fanout, m.must_keep, m.may_keep) for m in arch.memories), arch.computes)


def _max_loops(workload, einsum: str) -> int:
    return sum(_tile_chain_length(workload.rank_sizes[r]) for r in workload.einsum(einsum).rank_variables)


def oracle_work(workload, arch, einsum: str) -> int:
    """How many candidates `all_pmappings` would build for `einsum` if it built every chain
    (0 if cached): per loop sequence, the product over tensors of their chain placements
    into its gaps. It skips most of them now, but which examples count as too big stays
    as it was."""
    if _oracle_key(workload, arch, einsum) in _ORACLE:
        return 0
    e = workload.einsum(einsum)
    work = 0
    for unit in arch.computes_for(e):
        levels = len(arch.path(unit.name))
        dims = [d.name for m in arch.path(unit.name) for d in m.fanout]
        for loops in _loop_sequences(e, workload, dims, _max_loops(workload, einsum)):
            gaps = len(loops) + 1
            placements = sum(math.comb(levels, k) * math.comb(gaps + k - 1, k) for k in range(1, levels + 1))
            work += placements ** len(e.tensors)
    return work


def oracle(workload, arch, einsum: str) -> list:
    """Every legal pmapping of `einsum` with its analysis (cached across examples)."""
    key = _oracle_key(workload, arch, einsum)
    if key not in _ORACLE:
        ps = all_pmappings(workload, arch, einsum, max_loops=_max_loops(workload, einsum))
        _ORACLE[key] = [(q, analyze(q, workload, arch)) for q in (normalize(p, workload) for p in ps)]
        while len(_ORACLE) > _ORACLE_ENTRIES:
            _ORACLE.popitem(last=False)
    _ORACLE.move_to_end(key)
    return _ORACLE[key]


@dataclass
class Candidates:
    """One Einsum's pmappings that fit on their own, one per class of equivalent ones."""
    pmappings: list
    energy: np.ndarray
    latency: np.ndarray
    groups: dict  # ((shared tensor, c_T), ...) -> indices


def candidates(workload, arch, einsum: str) -> Candidates:
    shared = [t for t in workload.einsum(einsum).tensors if workload.is_shared(t)]
    seen: dict = {}
    for p, a in oracle(workload, arch, einsum):
        bits: dict[str, float] = {}
        values: dict[str, float] = {}
        for t in a.tiles:
            bits[t.level] = bits.get(t.level, 0) + t.values * workload.tensors[t.tensor].bits
            values[t.level] = values.get(t.level, 0) + t.values
        if any(bits[lv] > arch.memory(lv).capacity_bits or values[lv] > arch.memory(lv).capacity_values
               for lv in bits):
            continue
        c = cost(a, workload, arch)
        compat = tuple((t, compatibility(p, t, workload)) for t in shared)
        f = fused_depth(p, workload, arch)
        tiles = tuple(sorted((t.level, t.tensor if t.parent is None and t.tensor in shared else "",
                              int(t.values), workload.tensors[t.tensor].bits, t.lifetime_depth) for t in a.tiles))
        signature = (compat, tuple((lp.rank_variable, lp.tile, lp.spatial) for lp in p.loops[:f]), tiles,
                     float(f"{float(c.energy_pJ):.12e}"), float(f"{float(c.latency_s):.12e}"))
        seen.setdefault(signature, (p, float(c.energy_pJ), float(c.latency_s), compat))
    kept = list(seen.values())
    groups: dict = {}
    for k, (_, _, _, compat) in enumerate(kept):
        groups.setdefault(compat, []).append(k)
    return Candidates([k[0] for k in kept], np.array([k[1] for k in kept]), np.array([k[2] for k in kept]),
                      {g: np.array(ix) for g, ix in groups.items()})


class TooBig(Exception):
    """(what exceeded its limit, how much): the example is skipped and counted."""


def unless_too_big(compute):
    """compute()'s value, or None when the brute force behind it is too big (the example
    is then skipped, and counted as such)."""
    try:
        return compute()
    except TooBig as too_big:
        _bump(f"skipped (too many {too_big.args[0]})")
        return None


class BruteForce:
    """All compatible combinations of the candidates, evaluated lazily in objective order."""

    def __init__(self, workload, arch, max_combinations: int, max_oracle_work: int = 10**9):
        self.w, self.a = workload, arch
        self.names = list(workload.einsum_names)
        work = sum(oracle_work(workload, arch, e) for e in self.names)
        if work > max_oracle_work:
            raise TooBig("oracle candidates", work)
        self.cands = [candidates(workload, arch, e) for e in self.names]
        self.blocks: list[tuple[np.ndarray, ...]] = []  # per compatible choice of groups: indices per Einsum
        self._choose(0, {}, [])
        sizes = [math.prod(len(ix) for ix in b) for b in self.blocks]
        self.count = sum(sizes)
        if self.count > max_combinations:
            raise TooBig("combinations", self.count)
        self.offsets = np.cumsum([0] + sizes)
        self.energy = self._sums("energy")
        self.latency = self._sums("latency")
        self.cache: dict[int, object] = {}
        self.evaluations = 0

    def _choose(self, k: int, fixed: dict, chosen: list) -> None:
        if k == len(self.names):
            self.blocks.append(tuple(chosen))
            return
        for key, ix in self.cands[k].groups.items():
            if all(fixed.get(t, c) == c for t, c in key):
                self._choose(k + 1, {**fixed, **dict(key)}, chosen + [ix])

    def _sums(self, column: str) -> np.ndarray:
        parts = [reduce(np.add.outer, [getattr(c, column)[ix] for c, ix in zip(self.cands, b)]).ravel()
                 for b in self.blocks]
        return np.concatenate(parts) if parts else np.zeros(0)

    def mapping(self, flat: int) -> Mapping:
        b = int(np.searchsorted(self.offsets, flat, side="right")) - 1
        block = self.blocks[b]
        where = np.unravel_index(flat - self.offsets[b], tuple(len(ix) for ix in block))
        return Mapping({e: c.pmappings[ix[i]] for e, c, ix, i in zip(self.names, self.cands, block, where)},
                       tuple(self.names))

    def _evaluate(self, flat: int):
        if flat not in self.cache:
            self.evaluations += 1
            try:
                self.cache[flat] = evaluate(self.mapping(flat), self.w, self.a)
            except MappingError:
                self.cache[flat] = None
        return self.cache[flat]

    def best(self, objective: str, slack: float = 0.0, max_evaluations: int = 5000) -> float:
        """The smallest objective of a legal mapping whose peaks fit capacity / (1+slack)
        at every level (inf if none)."""
        values = objective_value(self.energy, self.latency, objective)
        for flat in np.argsort(values, kind="stable"):
            ev = self._evaluate(int(flat))
            if ev is not None and ev.valid and fits(ev, self.a, slack):
                truth = objective_value(ev.energy_pJ, ev.latency_s, objective)
                assert np.isclose(truth, values[flat], rtol=RTOL), (truth, values[flat])
                return float(truth)
            if self.evaluations > max_evaluations:
                raise TooBig("evaluations", self.evaluations)
        return math.inf


def fits(ev, arch, slack: float) -> bool:
    return all(ev.usage.peak_bits.get(m.name, 0) * (1 + slack) <= m.capacity_bits
               and ev.usage.peak_values.get(m.name, 0) * (1 + slack) <= m.capacity_values
               for m in arch.memories[1:])


# ---------------------------------------------------------------- the checks

def points(front) -> np.ndarray:
    """A frontier's distinct (energy, latency) points, in energy order."""
    return np.unique(front[["energy", "latency"]].to_numpy(dtype=float), axis=0)


def chosen(result, tables, templates, workload, arch):
    """The search's single chosen mapping, re-evaluated by looptree (must be legal and valid)."""
    row = result.best.iloc[0]
    pm = {e: rebuild(tables[e].loc[k], templates[e]) for e, k in zip(workload.einsum_names, row["rows"])}
    ev = evaluate(Mapping(pm, tuple(workload.einsum_names)), workload, arch)
    assert ev.valid, ev.overflows
    assert np.isclose(ev.energy_pJ, row["energy"], rtol=RTOL) and np.isclose(ev.latency_s, row["latency"], rtol=RTOL)
    return ev


def check(workload, arch, epsilon: float, max_combinations: int, max_evaluations: int,
          max_oracle_work: int = 500_000) -> None:
    def truths_and_slack():
        brute = BruteForce(workload, arch, max_combinations, max_oracle_work)
        return (brute, {o: brute.best(o, max_evaluations=max_evaluations) for o in OBJECTIVES},
                {o: brute.best(o, slack=epsilon, max_evaluations=max_evaluations) for o in OBJECTIVES})

    if (got := unless_too_big(truths_and_slack)) is None:
        return
    brute, truths, slack = got
    _bump("checked")
    _bump(f"checked with {len(workload.einsums)} Einsums")
    _bump("combinations", brute.count)
    _bump("evaluations", brute.evaluations)
    generated = {e: generate(e, workload, arch) for e in workload.einsum_names}
    tables = {e: g[0] for e, g in generated.items()}
    templates = {e: g[1] for e, g in generated.items()}
    if math.isinf(truths["energy"]):
        _bump("no valid mapping")
    for objective in OBJECTIVES:
        truth = truths[objective]
        result = search(tables, workload, arch, objective, epsilon=epsilon)
        dirty = search(tables, workload, arch, objective, epsilon=epsilon, dirty_only=True)
        if math.isinf(truth):  # (b) nothing valid: both agree
            assert result.best.empty and dirty.best.empty, objective
            assert search(tables, workload, arch, "pareto").best.empty
            return
        # (a) the two-pass search returns the exact optimum, as a legal valid mapping
        ev = chosen(result, tables, templates, workload, arch)
        assert np.isclose(objective_value(ev.energy_pJ, ev.latency_s, objective), truth, rtol=RTOL), objective
        # (c) the dirty pass: valid, never better than the optimum, and within its guarantee
        assert not dirty.best.empty, objective
        dev = chosen(dirty, tables, templates, workload, arch)
        value = objective_value(dev.energy_pJ, dev.latency_s, objective)
        assert value >= truth * (1 - RTOL), objective
        factor = (1 + epsilon) ** (2 if objective == "edp" else 1)
        if not math.isinf(slack[objective]):
            assert value <= factor * slack[objective] * (1 + RTOL), (objective, value, slack[objective])
            _bump("dirty guarantee checked")
        # (d) told a valid mapping's value (the dirty one's), both passes prune against it
        #     from the start and still return the exact optimum; so does the search
        #     without a scout, and with a scout of width 1
        for kwargs in ({"epsilon": epsilon, "known": value}, {"epsilon": 0.0, "known": value},
                       {"epsilon": epsilon, "scout": 0}, {"epsilon": epsilon, "scout": 1}):
            told = chosen(search(tables, workload, arch, objective, **kwargs), tables, templates, workload, arch)
            assert np.isclose(objective_value(told.energy_pJ, told.latency_s, objective), truth, rtol=RTOL), \
                (objective, kwargs)
        _bump("dirty worse than optimum", int(value > truth * (1 + RTOL)))
        _bump("dirty retried", int(dirty.epsilon < epsilon))
    # the exact frontier's ends are the energy and latency optima
    front = search(tables, workload, arch, "pareto").best
    assert np.isclose(front["energy"].min(), truths["energy"], rtol=RTOL)
    assert np.isclose(front["latency"].min(), truths["latency"], rtol=RTOL)
    # pruned by the scout's frontier (of any width) or not, the same frontier
    for width in (0, 1):
        other = search(tables, workload, arch, "pareto", scout=width).best
        assert points(front).shape == points(other).shape and np.allclose(points(front), points(other), rtol=RTOL), \
            (width, points(front), points(other))


@pytest.fixture(autouse=True)
def report(request):
    STATS.clear()
    yield
    if STATS:
        print(f"\n{request.node.name}: {dict(sorted(STATS.items()))}")


@settings(max_examples=14, **SETTINGS)
@given(problems(max_levels=2), st.sampled_from([0.2, 1.0, 4.0]))
def test_search_equals_exhaustive_optimum(problem, epsilon):
    check(*problem, epsilon=epsilon, max_combinations=3_000_000, max_evaluations=3_000)


@settings(max_examples=3, **SETTINGS)
@given(problems(n_einsums=(2, 3), min_levels=3), st.sampled_from([0.2, 1.0, 4.0]))
def test_search_equals_exhaustive_optimum_three_levels(problem, epsilon):
    check(*problem, epsilon=epsilon, max_combinations=1_000_000, max_evaluations=3_000)


@pytest.mark.slow
@settings(max_examples=24, **SETTINGS)
@given(problems(n_einsums=(2, 3), min_levels=3), st.sampled_from([0.2, 1.0, 4.0]))
def test_search_equals_exhaustive_optimum_three_levels_long(problem, epsilon):
    check(*problem, epsilon=epsilon, max_combinations=1_000_000, max_evaluations=3_000)


@pytest.mark.slow
@settings(max_examples=150, **SETTINGS)
@given(problems(sizes=(2, 3, 4)), st.sampled_from([0.05, 0.2, 1.0, 4.0]))
def test_search_equals_exhaustive_optimum_long(problem, epsilon):
    check(*problem, epsilon=epsilon, max_combinations=10_000_000, max_evaluations=20_000,
          max_oracle_work=3_000_000)


# ---------------------------------------------------------------- fixed cases

def two_levels(capacity: str, read: str, write: str, top_bandwidth: str = "4 GB/s", name: str = "a", **l1):
    """A 2-level arch: L0 (unbounded, 1 / 2 pJ/bit) over L1 (`capacity`, `read` / `write`
    energies, 1 GB/s, and any other L1 fields in `l1`) over a 1 pJ MAC."""
    return arch_specs.load({"name": name, "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "bandwidth": top_bandwidth},
        {"memory": "L1", "capacity": capacity, "read_energy": read, "write_energy": write, "bandwidth": "1 GB/s",
         **l1},
        {"compute": "MAC", "energy": "1 pJ"}]})


def two_einsums(must_keep: bool = False):
    a = two_levels("2 B" if must_keep else "16 B", "0.1 pJ/bit", "0.2 pJ/bit",
                   **({"must_keep": ["all"]} if must_keep else {}))
    w = workloads.load({"name": "w", "rank_sizes": {"m": 2, "a": 2, "b": 3}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W[a,b]"]})
    return w, a


def test_no_valid_mapping_both_agree():
    """(b) a level that must keep all three tensors of the matmul holds only two values."""
    w, a = two_einsums(must_keep=True)
    assert math.isinf(BruteForce(w, a, 10**6).best("energy"))
    tables = {e: generate(e, w, a)[0] for e in w.einsum_names}
    for objective in ("energy", "latency", "edp", "pareto"):
        assert search(tables, w, a, objective).best.empty
        assert search(tables, w, a, objective, dirty_only=True).best.empty


def test_retry_shrinks_epsilon_then_goes_exact(monkeypatch):
    """A dirty pass that finds nothing is retried with ε/4 while ε >= the floor, then exactly;
    the answer is the exact optimum either way. (A valid mapping that keeps every shared
    tensor at the top survives any coarsening, docs/search.md, so failures are forced here.)"""
    import ffm.search as fs
    w, a = two_einsums()
    tables = {e: generate(e, w, a)[0] for e in w.einsum_names}
    exact = search(tables, w, a, "edp", epsilon=0).best
    real = fs.join

    def failing_above(limit):
        def join(*args, delta=0.0, **kwargs):
            full = real(*args, delta=delta, **kwargs)
            return full.iloc[0:0] if delta > limit else full
        return join

    monkeypatch.setattr(fs, "join", failing_above(0.0))
    r = search(tables, w, a, "edp", epsilon=0.2, scout=0)  # (a scout's bound would stop the retries)
    assert [(p.name, p.epsilon) for p in r.passes] == [("dirty", 0.2), ("dirty", 0.05), ("dirty", 0.0125), ("exact", 0)]
    assert r.bound is None and r.epsilon == 0 and r.best["rows"].tolist() == exact["rows"].tolist()
    monkeypatch.setattr(fs, "join", failing_above(0.02))
    r = search(tables, w, a, "edp", epsilon=0.2, scout=0)
    assert [(p.name, p.epsilon) for p in r.passes] == [("dirty", 0.2), ("dirty", 0.05), ("dirty", 0.0125), ("clean", 0)]
    assert r.epsilon == 0.0125 and r.bound is not None
    assert np.isclose(r.best["energy"][0] * r.best["latency"][0], exact["energy"][0] * exact["latency"][0], rtol=RTOL)


def test_search_records_passes_and_bound():
    w, a = two_einsums()
    tables = {e: generate(e, w, a)[0] for e in w.einsum_names}
    steps = []
    r = search(tables, w, a, "energy", on_step=lambda e, k: steps.append((e, k)))
    assert [p.name for p in r.passes] == ["scout", "dirty", "clean"]
    assert r.steps == [(s.einsum, s.kept) for s in r.passes[-1].steps]
    assert steps == [(s.einsum, s.kept) for p in r.passes for s in p.steps]
    assert r.bound >= r.best["energy"][0] * (1 - RTOL)
    assert all(s.kept <= s.admitted <= s.joined for p in r.passes for s in p.steps)


def test_dirty_pass_prunes_more_and_clean_pass_admits_less():
    """On a 3-Einsum chain: ε-pruning keeps fewer partial mappings than exact pruning, the
    bound lets few into the clean pass once partial mappings carry costs (from the second
    step on: the first is a single table, filtered by the bound up front), and the answer
    is the exact one."""
    w = workloads.load({"name": "w", "rank_sizes": {"m": 4, "a": 4, "b": 2, "c": 2}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m,b] = X[m,a] * W1[a,b]", "Z[m,c] = Y[m,b] * W2[b,c]"]})
    a = two_levels("32 B", "0.3 pJ/bit", "0.2 pJ/bit")
    tables = {e: generate(e, w, a)[0] for e in w.einsum_names}
    exact = search(tables, w, a, "energy", epsilon=0, scout=0)
    r = search(tables, w, a, "energy", scout=0)
    dirty, clean = r.passes
    assert sum(s.kept for s in dirty.steps[:-1]) < sum(s.kept for s in exact.passes[0].steps[:-1])
    # (without a bound, `admitted` counts the pairs within capacity, which `joined` counted before
    # the bound ran ahead of the reservations: ninety-first session)
    assert sum(s.admitted for s in clean.steps[1:]) < sum(s.admitted for s in exact.passes[0].steps[1:]) / 10
    assert r.best["energy"][0] == exact.best["energy"][0]


def test_scout_keeps_few_partial_mappings_and_its_bound_prunes_the_dirty_pass():
    """The scout goes on, after each step, with the `scout` partial mappings of least lower
    bound plus the least of every compatibility group; what it finds bounds the dirty pass
    from the start, and the answer stays the exact one."""
    import ffm.search as fs
    tables = {"A": pd.DataFrame({"energy": [0.0], "latency": [0.0]}),
              "B": pd.DataFrame({"energy": [2.0, 4.0], "latency": [1.0, 0.0]})}
    frame = pd.DataFrame({"group": [0, 0, 1, 1, 2, 0], "energy": [5.0, 1.0, 7.0, 3.0, 9.0, 2.0],
                          "latency": [0.0] * 6})
    for width, energies in ((1, [1.0, 3.0, 9.0]), (3, [1.0, 3.0, 9.0, 2.0]), (6, frame["energy"].tolist())):
        columns = {c: frame[c].to_numpy() for c in frame.columns}  # as the join holds a step (`ffm.join.Columns`)
        kept = frame[fs._most_promising(tables, ["A", "B"], "energy", width)(0, columns)]
        assert kept["energy"].tolist() == sorted(energies, key=frame["energy"].tolist().index)
    w, a = two_einsums()
    tables = {e: generate(e, w, a)[0] for e in w.einsum_names}
    exact = search(tables, w, a, "energy", epsilon=0, scout=0)
    plain = search(tables, w, a, "energy", scout=0)
    r = search(tables, w, a, "energy", scout=1)
    scout, dirty, clean = r.passes
    assert scout.name == "scout" and scout.found >= 1
    assert sum(s.admitted for s in dirty.steps) <= sum(s.admitted for s in plain.passes[0].steps)
    assert r.bound >= r.best["energy"][0] * (1 - RTOL)
    assert np.isclose(r.best["energy"][0], exact.best["energy"][0], rtol=RTOL)


# ---------------------------------------------------------------- the ε-filter itself

@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda d: hnp.arrays(np.float64, st.tuples(st.integers(0, 30), st.just(d)),
                                                      elements=st.sampled_from([0.0, 1.0, 1.1, 1.3, 2.0, 3.5, 9.0, np.inf]))),
       st.integers(1, 3), st.sampled_from([0.0, 0.05, 0.2, 1.0]))
def test_epsilon_mask_keeps_a_close_row_for_every_dropped_one(x, n_groups, delta):
    groups = np.arange(len(x)) % n_groups
    keep = epsilon_mask(x, groups, delta)
    if delta == 0:
        assert (keep == pareto_mask(x, groups)).all()
    for i in np.flatnonzero(~keep):
        close = [j for j in np.flatnonzero(keep) if groups[j] == groups[i]
                 and np.all((x[j] <= x[i] * (1 + delta) * (1 + 1e-12)) & ((x[i] != 0) | (x[j] == 0)))]
        assert close, (i, x[i])
    # of rows in equal buckets the best is offered first, so kept rows are on the exact frontier
    assert not (keep & ~pareto_mask(x, groups)).any()


def test_kept_rows_are_one_frame_per_table_and_mask():
    """`_under_bound`'s filter: the rows table[mask] gives, labels included, as the same
    frame for the same table and mask (the join's view of it is built once), the table
    itself when every row is kept, and a new frame for a new table."""
    from ffm.search import _kept
    table = pd.DataFrame({"energy": [3.0, 1.0, 2.0, 5.0]}, index=[7, 3, 9, 4])
    mask = table["energy"].to_numpy() <= 2.5
    first = _kept(table, mask)
    pd.testing.assert_frame_equal(first, table[mask])
    assert _kept(table, mask.copy()) is first
    assert _kept(table, np.ones(4, dtype=bool)) is table
    other = table.copy()
    assert _kept(other, mask) is not first
    pd.testing.assert_frame_equal(_kept(other, ~mask), table[~mask])
