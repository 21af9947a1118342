"""Per-key budgets within one prefix search (`pmapgen.key_budgets`): a search whose rows are
each held to the budget of the keys (c_T of chosen input tensors) they may still end at
keeps, of every key, every pmapping within that key's budget or one dominating it,
checked against the exhaustive table (tests/test_search.py's oracle through
`pmapgen.generate`) and against the same search within the largest budget alone."""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ffm.refine import within_betas
from pmapgen import Constraints, generate
from pmapgen.key_budgets import KeyBudgets, OutputPenalty, _key_repr
from pmapgen.prefixes import generate_by_prefixes
from tests.test_search import RTOL, SETTINGS, _bump, problems, report  # noqa: F401
from tests.test_slack import dominated


def _values(table, columns: list[str]) -> list:
    """A table's rows as sortable (compat, energy, reservations) values (a reservation a row
    does not have counts as nothing, as in `dominated`)."""
    cols = [np.round(np.nan_to_num(table.reindex(columns=[c])[c].to_numpy(dtype=float), nan=0.0), 3)
            for c in ["energy", *columns]]
    return sorted(zip(map(repr, table["compat"]), *cols))


def check_key_budgets(workload, arch, pick: int) -> None:
    """For an Einsum with inputs other Einsums produce: keys drawn from the c_T its
    pmappings give those inputs (and one no pmapping gives), each with a β drawn between
    the least and the largest energy there. The search within those key budgets keeps a
    row dominating every exhaustive pmapping at a key within its β, in its compatibility
    group, and its rows within their key's β are those of the same search within the
    largest β alone."""
    rng = random.Random(pick)
    users = [e for e in workload.einsum_names
             if any(workload.producer(u.tensor) is not None for u in workload.einsum(e).inputs)]
    if not users:
        _bump("no Einsum reads another's output")
        return
    read = [e for e in users if workload.is_shared(workload.einsum(e).output.tensor)]
    e = rng.choice(read if read and pick % 3 else users)  # (an output others read, for `output_penalty`)
    tagged = sorted(u.tensor for u in workload.einsum(e).inputs if workload.producer(u.tensor) is not None)
    truth = generate(e, workload, arch, objectives=("energy",))[0]
    if truth.empty:
        _bump("an Einsum with no pmapping")
        return
    at = [tuple((t, dict(k[0])[t]) for t in tagged) for k in truth["compat"]]
    energy = truth["energy"].to_numpy(dtype=float)
    betas = {}
    for key in sorted(set(at), key=repr):
        if rng.random() < 0.7:
            here = energy[[k == key for k in at]]
            betas[key] = float(rng.uniform(here.min(), here.max()))
    if not betas:
        _bump("no key drawn")
        return
    first = next(iter(betas))
    (t0, (level, _)), rest = first[0], first[1:]
    betas[((t0, (level, ((0, 10**6, None),))),) + rest] = float(energy.max())  # a key no pmapping gives
    top = max(betas.values())
    backing = {t: (ct[0],) for t, ct in first} if pick % 2 else {}  # a backing group's levels, or any
    penalty = output_penalty(workload, e, truth, rng) if pick % 3 else None
    plain = Constraints(backing=backing)
    keyed = replace(plain, key_budgets=KeyBudgets.of(betas, penalty))
    got, _, stats = generate_by_prefixes(e, workload, arch, keyed, ("energy",), None, top)
    whole, _, _ = generate_by_prefixes(e, workload, arch, plain, ("energy",), None, top)
    assert stats.complete
    res = sorted({c for c in (*got.columns, *whole.columns) if c.startswith(("res:", "backing:"))})
    assert _values(got[within_betas(got, betas, penalty)], res) == _values(whole[within_betas(whole, betas, penalty)],
                                                                          res)
    if penalty is not None:
        energy = energy + np.array([penalty.at(dict(k[0])[penalty.tensor]) for k in truth["compat"]])
        _bump("with an output penalty")
    for i in range(len(truth)):
        if at[i] not in betas or energy[i] > betas[at[i]] * (1 + RTOL):
            continue
        if backing and any(ct[0] != backing[t][0] for t, ct in at[i]):
            continue
        _bump("pmappings within their key's budget")
        assert dominated(truth.iloc[i], got), (e, truth.iloc[i]["compat"], energy[i])
    _bump("checked")


def output_penalty(workload, e: str, truth, rng: random.Random) -> OutputPenalty | None:
    """A penalty on `e`'s output's c_T (None if no other Einsum reads it): some of the c_T
    its pmappings give it, each drawn up to the spread of its energies, one no pmapping
    gives, and a default at least each."""
    out = workload.einsum(e).output.tensor
    if not workload.is_shared(out):
        return None
    energy = truth["energy"].to_numpy(dtype=float)
    spread = float(energy.max() - energy.min()) or float(energy.max())
    cts = sorted({dict(k[0])[out] for k in truth["compat"]}, key=repr)
    named = {ct: rng.uniform(0, spread) for ct in cts if rng.random() < 0.6}
    level, _ = cts[0]
    named[(level, ((0, 10**6, None),))] = 0.0
    return OutputPenalty.of(out, named, max([rng.uniform(0, spread), *named.values()]))


@settings(max_examples=25, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6))
def test_a_search_within_key_budgets_keeps_every_pmapping_within_its_key_s_budget(problem, pick):
    check_key_budgets(*problem, pick=pick)


_C_T = st.tuples(st.sampled_from(["DRAM", "GlobalBuffer", "LocalBuffer"]),
                 st.one_of(st.none(), st.integers(0, 10**6)), st.one_of(st.none(), st.integers(0, 99)))
_KEYS = st.lists(st.tuples(st.sampled_from(["I", "Q", "K", "QK"]), _C_T), min_size=1, max_size=3).map(tuple)


@given(st.dictionaries(_KEYS, st.floats(0, 1e12, allow_nan=False), max_size=30))
@settings(max_examples=200, deadline=None)
def test_key_budgets_hold_their_items_in_the_order_of_the_items_reprs(betas):
    """`KeyBudgets.of` orders by the keys' reprs alone, which is the order of the (key, β)
    items' reprs (what its repr digests, and so a search's signature): no key's repr starts
    another's. Each key's repr is built from its parts' reprs, cached: the same string."""
    assert all(_key_repr(item) == repr(item[0]) for item in betas.items())
    assert KeyBudgets.of(betas).items == tuple(sorted(betas.items(), key=repr))
