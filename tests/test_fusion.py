"""Fusion moves (`ffm.fusion`, `ffm.descent`): the window of a tensor the mapping sends
through the top level, its constraints, and the move itself.

- By hand, on GPT-3's layer with the batch-64 result's choices (I and QK on chip): the
  windows and their constraints.
- On random small DAGs, started from the best mapping of a part of each Einsum's
  exhaustive table (its unfused rows and a random 30% of the rest): for every shared tensor at the top, the window holds its users and
  is connected by tensors on chip, and everything crossing its edge is at the top; the
  join of the part together with the window's constrained pmapgen tables equals the join
  of the part together with the rows of the exhaustive tables that keep the tensor on
  chip and the crossing tensors at the top (filtered by key, not generated). A descent of
  one fusion move fuses the tensor of most top-level energy and reaches exactly that.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arch as arch_specs
import workloads
from ffm.descent import _chain, descend
from ffm.fusion import chain_constraints, clusters, window, window_constraints
from ffm.search import search
from pmapgen import Constraints, generate
from tests.test_descent import exhaustive_and_part
from tests.test_search import RTOL, SETTINGS, _bump, chosen, problems, report, two_levels  # noqa: F401


def _rows(workload, onchip: dict[str, str], top: str) -> dict[str, pd.Series]:
    """Fake chosen rows: every shared tensor at the top but those in `onchip` (tensor -> level)."""
    return {e: pd.Series({"compat": (tuple((t, (onchip.get(t, top), ())) for t in workload.einsum(e).tensors
                                           if workload.is_shared(t)), ())})
            for e in workload.einsum_names}


def test_windows_of_gpt3_s_batch_64_result_by_hand():
    w = workloads.load("gpt3", batch=1, seq_len=64)
    a = arch_specs.load("tpuv4i")
    rows = _rows(w, {"I": "GlobalBuffer", "QK": "LocalBuffer"}, "DRAM")
    assert sorted(map(sorted, clusters(rows, w, a))) == [
        ["AV"], ["FFA"], ["FFB"], ["I", "K", "Q", "V"], ["QK", "QK_softmax"], ["Z"]]
    assert window("QK_softmax", rows, w, a) == ("QK", "QK_softmax", "AV")
    assert window("V", rows, w, a) == ("I", "V", "K", "Q", "AV")
    assert window("AV", rows, w, a) == ("AV", "Z")
    c = window_constraints("QK_softmax", ("QK", "QK_softmax", "AV"), w, a)
    on_gb = ("GlobalBuffer", ((0, 1, None), (3, 2, None)))  # AV's best row at batch 64: under b (tile 1), h (2)
    av = pd.Series({"compat": ((("AV", ("DRAM", ())), ("QK_softmax", on_gb), ("V", ("DRAM", ()))), ())})
    first = chain_constraints({"AV": av}, ("QK", "QK_softmax", "AV"), w, c)
    assert list(first) == ["QK_softmax"]  # QK shares nothing with AV
    assert first["QK_softmax"].tensor_keys == {"QK_softmax": on_gb}
    assert first["QK_softmax"].backing == c["QK_softmax"].backing
    on_lb = ("LocalBuffer", ((0, 1, None), (3, 2, None), (1, 256, None)))
    sm = pd.Series({"compat": ((("QK", on_lb), ("QK_softmax", on_gb)), ())})
    then = chain_constraints({"AV": av, "QK_softmax": sm}, ("QK", "QK_softmax", "AV"), w, c)
    assert list(then) == ["QK"] and then["QK"].tensor_keys == {"QK": on_lb}
    assert chain_constraints({"AV": av, "QK_softmax": None}, ("QK", "QK_softmax", "AV"), w, c) == {}
    onchip = ("GlobalBuffer", "LocalBuffer", "Register")
    assert c["QK"].backing == {"Q": ("DRAM",), "K": ("DRAM",)}  # QK stays free: both its users are inside
    assert c["QK_softmax"].backing == {"QK_softmax": onchip}
    assert c["AV"].backing == {"QK_softmax": onchip, "V": ("DRAM",), "AV": ("DRAM",)}
    mine = {"AV": Constraints(backing={"QK_softmax": ("LocalBuffer", "DRAM")})}
    assert window_constraints("QK_softmax", ("QK", "QK_softmax", "AV"), w, a, mine)["AV"].backing["QK_softmax"] \
        == ("LocalBuffer",)
    assert window_constraints("QK_softmax", ("QK", "QK_softmax", "AV"), w, a,
                              {"AV": Constraints(backing={"QK_softmax": ("DRAM",)})}) is None


def _best_energy(result, otherwise: float) -> float:
    return otherwise if result.best.empty else float(result.best["energy"].iloc[0])


def check_chain(t, einsums, constraints, found, rows, ceiling, tables, fits, workload, arch) -> None:
    """A move's chain from the window tables `found`: it starts at the user of t costing
    the most in the mapping, with a least-energy row of the window's rows keeping t on
    chip (searched again: it is given only the costliest such row); each Einsum it then
    searches shares a tensor with one fixed before it, its c_T fixed to that one's lowest
    row's, and finds exactly the least energy of the exhaustive rows that fit the window
    and give those c_T (if at most the mapping's energy); it reaches every Einsum linked
    to the anchor by tensors shared with rows it found."""
    top = arch.memories[0].name
    def worst(table):  # a poor sample: the window's costliest row with t on chip only
        on = table[[dict(c[0]).get(t, (top,))[0] != top for c in table["compat"]]]
        return on.loc[[on["energy"].idxmax()]] if len(on) else on
    sampled = {e: (worst(r[0]), r[1], r[2]) for e, r in found.items()}
    start, row, chained, keys = _chain(workload, arch, t, einsums, constraints, sampled, rows, ceiling, None, 1,
                                       False, "test")
    users = [e for e in einsums if t in workload.einsum(e).tensors]
    costliest = max(float(rows[u]["energy"]) for u in users)
    if start is None:
        assert all(all(dict(c[0])[t][0] == top for c in found[u][0]["compat"])
                   for u in users if float(rows[u]["energy"]) == costliest)
        return
    _bump("chains")
    assert float(rows[start]["energy"]) == costliest
    anchor_rows = found[start][0][[dict(c[0])[t][0] != top for c in found[start][0]["compat"]]]
    assert np.isclose(row["energy"], anchor_rows["energy"].min(), rtol=RTOL) and dict(row["compat"][0])[t][0] != top
    assert fits(row["compat"]) and next(iter(chained)) == start and start not in keys
    lowest = {start: row}
    for e in list(chained)[1:]:
        tensors = set(workload.einsum(e).tensors)
        assert keys[e] and set(keys[e]) <= tensors
        for u, c in keys[e].items():
            assert any(row is not None and dict(row["compat"][0]).get(u) == c for row in lowest.values())
        want = tables[e][[fits(c) and all(dict(c[0])[u] == ct for u, ct in keys[e].items())
                          for c in tables[e]["compat"]]]
        want = want[want["energy"] <= ceiling * (1 + RTOL)]
        table = chained[e][0]
        if want.empty:
            assert table.empty
            lowest[e] = None
            continue
        _bump("chain searches finding rows")
        assert np.isclose(table["energy"].min(), want["energy"].min(), rtol=RTOL)
        assert all(fits(c) and all(dict(c[0])[u] == ct for u, ct in keys[e].items()) for c in table["compat"])
        lowest[e] = table.loc[table["energy"].idxmin()]
    reached, todo = {start}, [start]
    while todo:
        f = todo.pop()
        if lowest.get(f) is None:
            continue
        for e in einsums:
            if e not in reached and set(workload.einsum(e).tensors) & set(workload.einsum(f).tensors):
                reached.add(e)
                todo.append(e)
    assert reached == set(chained)


def check_fusion(workload, arch, pick: int, rounds: int) -> None:
    order = tuple(workload.einsum_names)
    top = arch.memories[0].name
    made = exhaustive_and_part(workload, arch, pick,  # the unfused rows, and a random 30% of the rest
                               lambda t: np.array([all(lv == top for _, (lv, _) in c[0]) for c in t["compat"]]))
    if made is None:
        return
    generated, tables, truth, some, start = made
    energy = float(start.best["energy"].iloc[0])
    rows = {e: some[e].loc[i] for e, i in zip(order, start.best["rows"].iloc[0])}
    level = {t: lv for r in rows.values() for t, (lv, _) in r["compat"][0]}
    expected, trial = {}, {}
    for t in (t for t, lv in level.items() if lv == top):
        w_ = window(t, rows, workload, arch)
        inside = set(w_)
        assert set(workload.users(t)) <= inside
        crossing = {u for u in level if inside & set(workload.users(u)) and set(workload.users(u)) - inside}
        assert all(level[u] == top for u in crossing)
        reached, frontier = set(workload.users(t)), list(workload.users(t))
        while frontier:  # every Einsum of the window is linked to a user of t by tensors on chip
            e = frontier.pop()
            for u in workload.einsum(e).tensors:
                if level.get(u, top) != top:
                    new = set(workload.users(u)) - reached
                    reached |= new
                    frontier += list(new)
        assert reached == inside
        constraints = window_constraints(t, w_, workload, arch)

        def fits(compat) -> bool:
            per = dict(compat[0])
            return (t not in per or per[t][0] != top) and all(per[u][0] == top for u in crossing if u in per)
        by_hand = {e: pd.concat([some[e], tables[e][[fits(c) for c in tables[e]["compat"]]]]) if e in inside
                   else some[e] for e in order}
        window_found = {e: generate(e, workload, arch, constraints[e], objectives=("energy",)) for e in w_}
        generated_w = {e: pd.concat([some[e], window_found[e][0]]) if e in inside else some[e] for e in order}
        check_chain(t, w_, constraints, window_found, rows, energy, tables, fits, workload, arch)
        expected[t] = _best_energy(search(by_hand, workload, arch, "energy", known=energy), energy)
        with_it = {e: tab[[dict(c[0]).get(t, ("",))[0] != top for c in tab["compat"]]] for e, tab in by_hand.items()}
        trial[t] = search(with_it, workload, arch, "energy")
        got = _best_energy(search(generated_w, workload, arch, "energy", known=energy), energy)
        assert np.isclose(got, expected[t], rtol=RTOL), (t, got, expected[t])
        _bump("windows checked")
        _bump("windows lowering", int(expected[t] < energy * (1 - RTOL)))
    found = {e: (some[e], generated[e][1], generated[e][2]) for e in order}
    join_tables = lambda tabs, name, known: search(tabs, workload, arch, "energy", known=known)  # noqa: E731
    results, best, d = descend(workload, arch, found, start, join_tables, workers=1, progress=False,
                               max_rounds=rounds, min_gap=0.0, fusions=1)
    moves = [r for r in d.rounds if r.fused is not None]
    _bump("fusion moves", len(moves))
    _bump("fusion moves lowering", int(d.after < energy * (1 - RTOL)))
    previous = energy
    for r in d.rounds:  # a move's on-chip mapping is valid, and the join after it takes it if lower
        if r.trial is not None:
            assert r.trial >= truth.best["energy"].iloc[0] * (1 - RTOL)
            assert r.energy <= min(previous, r.trial) * (1 + RTOL)
            _bump("moves with inner rounds", int(bool(r.inner.rounds)))
        previous = r.energy
    if rounds == 0:  # the move alone, from the start
        assert len(d.rounds) == int(bool(expected))
    if rounds == 0 and d.rounds:
        start_ev = chosen(start, some, {e: generated[e][1] for e in order}, workload, arch)
        cost = {t: start_ev.energy_by_access_pJ.get(top, {}).get(t, 0.0) for t in expected}
        fused = d.rounds[0].fused
        assert cost[fused] == max(cost.values())
        assert np.isclose(d.after, expected[fused], rtol=RTOL)
        assert d.rounds[0].inner is None or d.rounds[0].inner.rounds == ()  # no rounds within keys
        if trial[fused].best.empty:
            assert d.rounds[0].trial is None
        else:
            assert np.isclose(d.rounds[0].trial, trial[fused].best["energy"].iloc[0], rtol=RTOL)
            _bump("trials above the start", int(d.rounds[0].trial > energy * (1 + RTOL)))
    assert truth.best["energy"].iloc[0] * (1 - RTOL) <= d.after <= energy
    ev = chosen(best, {e: r[0] for e, r in results.items()}, {e: r[1] for e, r in results.items()}, workload, arch)
    assert np.isclose(ev.energy_pJ, d.after, rtol=RTOL)
    check_later_moves(workload, arch, found, start, join_tables, rounds, d, truth, (0.05, 1.0)[pick % 2])


def check_later_moves(workload, arch, found, start, join_tables, rounds, one, truth, share) -> None:
    """Up to three moves, later ones costing at least `share` of the energy at the top (1.0:
    none, no tensor costs all of it):
    the same path as the one-move descent `one` up to its first move, then a move only
    after one that lowered the energy, on a tensor costing at least `share` x the energy.
    With joins that never find better (each returns the start), one move at most."""
    stuck = lambda tabs, name, known: start  # noqa: E731
    _, _, d = descend(workload, arch, found, start, stuck, workers=1, progress=False, max_rounds=0, min_gap=0.0,
                      fusions=3, later_share=0.0)
    assert sum(r.fused is not None for r in d.rounds) <= 1
    _bump("descents whose move did not pay", len(d.rounds))
    results, best, d = descend(workload, arch, found, start, join_tables, workers=1, progress=False,
                               max_rounds=rounds, min_gap=0.0, fusions=3, later_share=share)
    first = [r.fused for r in one.rounds if r.fused is not None]
    moves = [(i, r) for i, r in enumerate(d.rounds) if r.fused is not None]
    assert [r.fused for _, r in moves[:1]] == first
    energy = float(start.best["energy"].iloc[0])
    for k, (i, r) in enumerate(moves):
        before = d.rounds[i - 1].energy if i else energy
        if k:
            j, last = moves[k - 1]
            assert last.energy < (d.rounds[j - 1].energy if j else energy)  # the move before paid
            assert r.top >= share * before
    _bump("later fusion moves", len(moves[1:]))
    assert truth.best["energy"].iloc[0] * (1 - RTOL) <= d.after <= one.after * (1 + RTOL)
    ev = chosen(best, {e: r[0] for e, r in results.items()}, {e: r[1] for e, r in results.items()}, workload, arch)
    assert np.isclose(ev.energy_pJ, d.after, rtol=RTOL)


@settings(max_examples=12, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6), st.sampled_from([0, 2]))
def test_fusion_move_joins_the_window_s_pmappings_with_the_tensor_on_chip(problem, pick, rounds):
    check_fusion(*problem, pick=pick, rounds=rounds)


@pytest.mark.slow
@settings(max_examples=150, **SETTINGS)
@given(problems(max_levels=3), st.integers(0, 10**6), st.sampled_from([0, 2]))
def test_fusion_move_joins_the_window_s_pmappings_with_the_tensor_on_chip_long(problem, pick, rounds):
    check_fusion(*problem, pick=pick, rounds=rounds)


def test_a_later_move_needs_its_share_of_the_energy_at_the_top():
    """A case hypothesis found (sixteenth session): the first move lowers 269.2 pJ to
    184.4 pJ and leaves a tensor costing 48 pJ at the top; with a share of 1.0
    (`check_later_moves`, odd pick) no later move may take it."""
    w = workloads.load({"name": "dag", "rank_sizes": {"m": 2, "a": 2}, "bits": 8,
                        "einsums": ["X[m,a] = I[m,a]", "Y[m] = X[m,a] * W0[a]", "Z[m] = Y[m]"]})
    a = two_levels("4 B", "0.1 pJ/bit", "0.1 pJ/bit", top_bandwidth="8 GB/s", name="random", must_keep=["all"])
    check_fusion(w, a, pick=187, rounds=0)


def test_report_says_what_a_fusion_move_found():
    from ffm.descent import Descent, Round
    from ffm.report import descent_lines
    from pmapgen.generate import Stats
    window_ = {"QK": Stats(1, 1, 1, False), "QK_softmax": Stats(1, 1, 1, False), "AV": Stats(1, 1, 1, True)}
    tuned = Descent(30.7e12, 28.0e12, (Round({"QK": Stats(1, 1, 1, False)}, 28.0e12),), 1.0)
    chain = {"AV": Stats(1, 1, 1, True), "QK_softmax": Stats(1, 1, 1, True), "QK": Stats(1, 1, 1, False)}
    d = Descent(46.8e12, 28.0e12, (Round({"V": Stats(1, 1, 1)}, 40.0e12),
                                   Round(window_, 28.0e12, "QK_softmax", 28.0e12, tuned, "AV", chain,
                                         top=7.73e12)), 300.0)
    text = " ".join(line.strip() for line in descent_lines(d, "the join"))
    assert "(1 round, 1 search of an Einsum within its compatibility group;" in text
    assert ("a fusion move searched QK, QK_softmax, AV with QK_softmax on chip (its accesses at the top cost "
            "7.73 J; 2 cut short), then searched AV for "
            "its least energy with it on chip and chained from there through QK_softmax, QK (the c_T they share "
            "fixed) (1 of these cut short): the best mapping with it on chip was 28 J after 1 round within its "
            "groups; the best mapping then became 28 J") in text
    assert text.endswith("lowered the best mapping from 46.8 J to 28 J.")
    untuned = Descent(30.7e12, 30.7e12, (), 1.0, {"QK": 0.0, "AV": -2.4e-4})  # a floor a rounding above its row
    d = Descent(29.6e12, 29.6e12, (Round(window_, 29.6e12, "QK_softmax", 30.7e12, untuned),), 300.0)
    text = " ".join(line.strip() for line in descent_lines(d, "the join"))
    assert ("was 30.7 J (no round within its groups: 2 of its Einsums were near their groups' floors, the others' "
            "groups searched before); nothing lower") in text
    assert text.endswith("found nothing below 29.6 J.")
    text = " ".join(line.strip() for line in descent_lines(untuned, "the join"))
    assert "2 skipped, whose groups could lower it by at most 0 J in all" in text


def test_report_says_which_limit_cut_the_descent_s_searches_short():
    """The descent's searches stop at their time limit or at their waiting rows (`PROOF_ROWS`):
    the report counts each (`Stats.stopped_by`), in a round and in a fusion move and its chain."""
    from ffm.descent import Descent, Round
    from ffm.report import descent_lines
    from pmapgen.generate import ROW_LIMIT, TIME_LIMIT, Stats
    timed, rows, done = Stats(1, 1, 0, False, stopped_by=TIME_LIMIT), Stats(1, 1, 0, False, stopped_by=ROW_LIMIT), \
        Stats(1, 1, 1, True)
    d = Descent(46.8e12, 28.0e12, (Round({"V": rows, "K": done}, 40.0e12),
                                   Round({"QK": timed, "QK_softmax": rows, "AV": timed}, 28.0e12, "QK_softmax", 28.0e12,
                                         Descent(28.0e12, 28.0e12, (), 1.0), "AV", {"AV": rows, "QK": done})), 300.0)
    text = " ".join(line.strip() for line in descent_lines(d, "the join"))
    assert "(1 round, 2 searches of an Einsum within its compatibility group, 1 cut short by the row limit;" in text
    assert "with QK_softmax on chip (3 cut short, 2 by the time limit and 1 by the row limit)" in text
    assert "through QK (the c_T they share fixed) (1 of these cut short by the row limit)" in text
