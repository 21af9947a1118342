"""`ffm.map` and `python -m ffm.map`: the chosen mapping is what the join computed, is
optimal in the ways optimality can be observed, round-trips through the export, and nothing
fitting is explained exactly. Small problems only (a few seconds of pmapgen each)."""
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest
import yaml

import ffm
from ffm.map import main
from looptree import evaluate, load_mapping
from looptree.render import report_text
from pmapgen.all_einsums import Workers
from specio import SpecError, cli

# Two chained matmuls on a 2-instance buffer with limited DRAM bandwidth: the energy,
# latency and EDP optima all differ, and the energy-latency frontier has two points.
WORKLOAD = {"name": "mm2", "variables": {"M": 4}, "rank_sizes": {"m": "M", "a": 2, "b": 2, "c": 2}, "bits": 8,
            "einsums": ["Y[m,b] = X[m,a] * W1[a,b]", "Z[m,c] = Y[m,b] * W2[b,c]"]}
ARCH = {"name": "fan2", "clock": "1 GHz", "levels": [
    {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "1 pJ/bit",
     "bandwidth": "8 GB/s"},
    {"memory": "GlobalBuffer", "capacity": "64 B", "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit",
     "bandwidth": "inf", "fanout": {"X": {"size": 2, "multicast": True, "reduce": False}}},
    {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]}
OBJECTIVES = ("energy", "latency", "edp", "pareto")


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("specs")
    (d / "mm2.yaml").write_text(yaml.safe_dump(WORKLOAD))
    (d / "fan2.yaml").write_text(yaml.safe_dump(ARCH))
    return str(d / "mm2.yaml"), str(d / "fan2.yaml")


@pytest.fixture(scope="module")
def results(specs):
    return {obj: ffm.map(*specs, objective=obj, progress=False) for obj in OBJECTIVES}


def test_map_equals_the_joined_rows(results):
    for obj, r in results.items():
        assert len(r.evaluations) == len(r.joined) >= 1
        for ev, (_, row) in zip(r.evaluations, r.joined.iterrows()):
            assert ev.valid
            assert np.isclose(ev.energy_pJ, row["energy"], rtol=1e-9), obj
            assert np.isclose(ev.latency_s, row["latency"], rtol=1e-9), obj


def test_objectives_are_optimal_against_each_other(results):
    energy, latency, edp = (results[o].evaluation for o in ("energy", "latency", "edp"))
    assert edp.edp <= energy.edp * (1 + 1e-9) and edp.edp <= latency.edp * (1 + 1e-9)
    assert energy.energy_pJ <= edp.energy_pJ * (1 + 1e-9) and energy.energy_pJ <= latency.energy_pJ * (1 + 1e-9)
    assert latency.latency_s <= edp.latency_s * (1 + 1e-9) and latency.latency_s <= energy.latency_s * (1 + 1e-9)
    assert edp.edp < energy.edp and edp.energy_pJ > energy.energy_pJ  # the case distinguishes them


def test_pareto_frontier_is_non_dominated_and_spans_the_optima(results):
    front = [(ev.energy_pJ, ev.latency_s) for ev in results["pareto"].evaluations]
    assert len(front) >= 2
    for i, a in enumerate(front):
        for j, b in enumerate(front):
            assert i == j or not (b[0] <= a[0] and b[1] <= a[1]), (a, b)
    assert np.isclose(min(e for e, _ in front), results["energy"].evaluation.energy_pJ, rtol=1e-9)
    assert np.isclose(min(t for _, t in front), results["latency"].evaluation.latency_s, rtol=1e-9)
    r = results["pareto"]
    assert r.evaluation.edp == min(ev.edp for ev in r.evaluations)
    assert [p["energy_pJ"] for p in r.export()["pareto"]] == [e for e, _ in front]


def test_statistics(results):
    s = results["energy"].stats
    assert set(s.pmapgen) == {"Y", "Z"} and all(st.kept >= 1 and st.complete for st in s.pmapgen.values())
    assert [e for e, _ in s.join_steps] == ["Y", "Z"] and all(k >= 1 for _, k in s.join_steps)
    assert set(s.seconds) == {"pmapgen", "join", "evaluation"}


def test_export_re_evaluates_to_identical_totals(results, tmp_path):
    r = results["energy"]
    out = tmp_path / "m.json"
    out.write_text(json.dumps(r.export()))
    doc = load_mapping(out)
    ev = evaluate(doc.mapping, r.workload, r.arch)
    assert (ev.energy_pJ, ev.latency_s, ev.accesses) == (r.evaluation.energy_pJ, r.evaluation.latency_s,
                                                          r.evaluation.accesses)
    run = subprocess.run([sys.executable, "-m", "looptree.evaluate", str(out), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    totals = report_text(r.evaluation, r.workload, r.arch).splitlines()[0]
    assert totals.startswith("Energy ") and totals in run.stdout
    assert "Recorded totals match this evaluation." in run.stdout
    assert "Y: agrees" in run.stdout and "Z: agrees" in run.stdout


def test_cli_report_and_out_overwrite_rules(specs, tmp_path, capsys):
    out = tmp_path / "result.json"
    args = ["--workload", specs[0], "--arch", specs[1], "--set", "M=4", "--no-progress", "--out", str(out)]
    assert main(args + ["--objective", "pareto"]) == 0
    text = capsys.readouterr().out
    for piece in ("Energy-latency frontier (2 points", "lowest-EDP point", "Energy ", "Latency ", "EDP ",
                  "Kept on chip (fused):", "Energy by level and tensor:", "LoopTree:", "- (MAC) Y[m,b] = X[m,a] * W1[a,b]",
                  "Mapper statistics:", "time: floors proof", " s, proof ", " s, pareto proof ",
                  "; proven exact):", "Energy proof at the latency floors", "the frontier is exact"):
        assert piece in text, piece
    first = out.read_text()
    assert json.loads(first)["objective"] == "pareto" and len(json.loads(first)["pareto"]) == 2

    assert main(args + ["--objective", "energy"]) == 2  # refused before mapping
    err = capsys.readouterr().err
    assert "already exists; pass --force" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == first

    assert main(args + ["--objective", "energy", "--force"]) == 0
    assert json.loads(out.read_text())["objective"] == "energy"


@pytest.mark.parametrize("extra,message", [
    (["--workload", "mm2", "--arch", "simple", "--set", "M"], "--set: M: expected NAME=INTEGER"),
    (["--workload", "matmul_chain", "--arch", "simple", "--set", "nope=3"], "nope"),
    (["--workload", "no_such_workload", "--arch", "simple"], "no shipped workload of that name"),
    (["--workload", "matmul_chain", "--arch", "simple", "--objective", "speed"],
     "objective: speed: expected one of energy, latency, edp, pareto"),
    (["--workload", "matmul_chain", "--arch", "simple", "--mapspace", "flat"], "mapspace: flat: not yet available"),
    (["--arch", "simple"], "the following arguments are required: --workload"),
    (["--workload", "matmul_chain", "--arch", "simple", "--proof-time", "-1"],
     "argument --proof-time: expected a number of seconds >= 0, got '-1'"),
    (["--workload", "matmul_chain", "--arch", "simple", "--latency-set", "abc"],
     "argument --latency-set: expected a number of seconds >= 0, got 'abc'"),
])
def test_cli_bad_input_is_one_line_exit_2(extra, message):
    run = subprocess.run([sys.executable, "-m", "ffm.map", "--no-progress", *extra], capture_output=True, text=True)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_api_rejects_unknown_mapspace_and_objective():
    with pytest.raises(ValueError, match="not yet available.*planned: unfused, flat, fusemax"):
        ffm.map("matmul_chain", "simple", mapspace="flat")
    with pytest.raises(SpecError, match="expected one of energy, latency, edp, pareto"):
        ffm.map("matmul_chain", "simple", objective="speed")


# Two copies through a buffer that must keep every tensor: capacities in bits and values,
# so the stated need can be checked to the unit.
COPIES = {"name": "copy2", "rank_sizes": {"m": 4, "a": 4}, "bits": 8, "einsums": ["Y[m,a] = X[m,a]", "Z[m,a] = Y[m,a]"]}


def tiny(buffer: str, register: str | None = None) -> dict:
    levels = [{"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "1 pJ/bit"},
              {"memory": "GlobalBuffer", "capacity": buffer, "read_energy": "0.1 pJ/bit",
               "write_energy": "0.1 pJ/bit", "must_keep": ["all"]}]
    if register:
        levels.append({"memory": "Register", "capacity": register, "read_energy": "0 pJ/bit",
                       "write_energy": "0 pJ/bit", "must_keep": ["all"]})
    return {"name": "tiny", "clock": "1 GHz", "levels": levels + [{"compute": "MAC", "energy": "1 pJ"}]}


def test_no_valid_mapping_states_the_exact_capacity_needed():
    import ffm.map  # noqa: F401  -- ffm.map is now the CLI module; it must still be callable
    with pytest.raises(ffm.NoValidMapping) as info:
        ffm.map(COPIES, tiny("8 bits"), progress=False)
    need = info.value.needs["GlobalBuffer"]
    assert str(info.value) == ("copy2 on tiny: no valid mapping: GlobalBuffer needs at least "
                               f"{need / 8:g} B ({need:.0f} bits) per instance, has 1 B (8 bits)")
    assert ffm.map(COPIES, tiny(f"{need:.0f} bits"), progress=False).evaluation.valid
    with pytest.raises(ffm.NoValidMapping):
        ffm.map(COPIES, tiny(f"{need - 1:.0f} bits"), progress=False)


def test_no_valid_mapping_per_level_in_values():
    with pytest.raises(ffm.NoValidMapping) as info:
        ffm.map(COPIES, tiny("1 KiB", "1 values"), progress=False)
    e = info.value
    need = e.needs["Register"]
    assert e.units["Register"] == "values" and f"Register needs at least {need:g} values per instance, has 1 value" in str(e)
    assert ffm.map(COPIES, tiny("1 KiB", f"{need:g} values"), progress=False).evaluation.valid
    with pytest.raises(ffm.NoValidMapping):
        ffm.map(COPIES, tiny("1 KiB", f"{need - 1:g} values"), progress=False)


def test_cli_no_valid_mapping_is_one_line_exit_1(tmp_path):
    a, w = tmp_path / "tiny.yaml", tmp_path / "copy2.yaml"
    a.write_text(yaml.safe_dump(tiny("8 bits", "1 values")))
    w.write_text(yaml.safe_dump(COPIES))
    run = subprocess.run([sys.executable, "-m", "ffm.map", "--workload", str(w), "--arch", str(a), "--no-progress"],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip() == ("error: copy2 on tiny: no valid mapping: even an unlimited GlobalBuffer alone "
                                  "would not suffice; or even an unlimited Register alone would not suffice")


def test_report_says_which_intermediates_go_through_dram():
    import arch as arch_specs
    import workloads
    doc = load_mapping("looptree/examples/ffm_fig2_fused.json")
    w, a = workloads.load(doc.workload, **doc.variables), arch_specs.load(doc.arch)
    text = report_text(evaluate(doc.mapping, w, a), w, a)
    assert "Kept on chip (fused): A in GlobalBuffer\nThrough DRAM (unfused): B\n" in text


def test_report_title_says_optimal_only_when_pmapgen_was_exhaustive(results):
    from dataclasses import replace

    from ffm.report import result_text
    r = results["energy"]
    assert r.stats.complete
    assert "mm2 on fan2: optimal for energy (mapspace ffm)" in result_text(r)
    cut = replace(r.stats, pmapgen={e: replace(s, complete=False) for e, s in r.stats.pmapgen.items()})
    text = result_text(replace(r, stats=cut))
    assert "mm2 on fan2: best found (not provably optimal) for energy (mapspace ffm)" in text
    assert "optimal for energy" not in text.replace("not provably optimal) for energy", "")


def test_energy_proof_makes_a_time_limited_result_optimal():
    """With a time limit, the energy proof (ffm.budgets) runs first, from no mapping, and
    makes the result the exhaustive run's optimum without pmapgen's time-limited tables;
    the report says so. A proof cut short is followed by pmapgen and coordinate descent."""
    import math

    from ffm.report import result_text
    variables = {"length": 2, "M": 64, "big": 128, "small": 32}
    exact = ffm.map("matmul_chain", "simple", variables=variables, progress=False, workers=1)
    assert exact.stats.exhaustive and exact.stats.proof is None
    r = ffm.map("matmul_chain", "simple", variables=variables, progress=False, workers=1, time_limit=0.05,
                proof_time_limit=math.inf)
    assert r.stats.complete and not r.stats.exhaustive and r.stats.pmapgen == {}
    assert np.isclose(r.evaluation.energy_pJ, exact.evaluation.energy_pJ, rtol=1e-9)
    proof = r.stats.proof
    assert proof.proven and proof.bound >= r.evaluation.energy_pJ * (1 - 1e-9)
    assert proof.found == math.inf  # it ran first: no mapping before it
    text = result_text(r)
    assert "optimal for energy" in text and "Energy proof: complete" in text and "WARNING" not in text
    assert "pmapgen: not run" in text and "The proof lowered" not in text and "tile shapes" not in text
    assert "partial mappings kept after each join step: " + ", ".join(f"{e} {k:,}" for e, k in r.stats.join_steps) \
        in text
    # the proof completed: no pmapgen, no coordinate descent after it
    assert r.stats.descent == () and "Coordinate descent" not in text and "pmapgen" not in r.stats.seconds
    # a proof cut short at once still bounds the optimum from below (energy floors)
    cut = ffm.map("matmul_chain", "simple", variables=variables, progress=False, workers=1, time_limit=0.05,
                  proof_time_limit=0.0)
    proof = cut.stats.proof
    assert not cut.stats.complete and not proof.proven and proof.cut_short
    assert cut.stats.pmapgen and "pmapgen" in cut.stats.seconds  # pmapgen ran after the proof
    assert 0 < proof.lower <= exact.evaluation.energy_pJ * (1 + 1e-9) <= proof.bound * (1 + 1e-9)
    # the result is the best mapping known: the join of pmapgen's tables (and the proof's), or a
    # better one the coordinate descent after them found
    assert np.isclose(cut.evaluation.energy_pJ, proof.bound, rtol=1e-9) and proof.found == math.inf
    descent = cut.stats.descent[0]
    assert descent.after <= descent.before
    assert np.isclose(descent.after, proof.bound, rtol=1e-9)
    text = result_text(cut)
    assert "Coordinate descent after the energy proof" in text
    assert f"within {proof.bound / proof.lower:.2f}x" in text
    optimality = cut.export()["optimality"]  # (and the proven run's: within 1.0)
    assert not optimality["proven"] and np.isclose(optimality["within"], proof.bound / proof.lower, rtol=1e-9)
    assert optimality["lower_bounds"]["energy_pJ"] == proof.lower
    assert r.export()["optimality"] == {"proven": True, "within": 1.0, "lower_bounds": {
        "energy_pJ": r.stats.proof.lower, "latency_s": None, "edp": None}}
    words = " ".join(text.split())  # (the report wraps its lines)
    assert "The proof lowered" not in words  # it found no mapping: pmapgen's join did
    cut_short = ", ".join(proof.cut_short)
    assert (f"The budgeted search of {cut_short} was cut short by its time limit" in words
            if len(proof.cut_short) == 1 else
            f"The budgeted searches of {cut_short} were cut short by their time limit" in words)


def test_pareto_with_the_energy_proof_has_the_exact_energy_end(specs, results):
    """For pareto the energy proof runs first too and its tables join pmapgen's: with
    pmapgen cut short before it keeps anything, the frontier's lowest-energy point is still
    the exhaustive energy optimum, every point is a real mapping the exhaustive frontier
    weakly dominates, and the report says which end is proven. (The pareto proof, which
    proves the whole frontier where the floors proof and the energy proof complete, is
    turned off: this checks the flow it falls back to; the end checks the default.)"""
    import math

    from ffm.capacity import NothingFoundInTime
    from ffm.report import result_text
    r = ffm.map(*specs, objective="pareto", progress=False, workers=1, time_limit=1e-9, proof_time_limit=math.inf,
                pareto_proof=False)
    assert r.stats.pmapgen and all(s.kept == 0 and not s.complete for s in r.stats.pmapgen.values())  # gave nothing
    assert r.stats.proof.proven and r.stats.energy_end and not r.stats.complete
    optimum = results["energy"].evaluation.energy_pJ
    assert np.isclose(min(ev.energy_pJ for ev in r.evaluations), optimum, rtol=1e-9)
    exact = [(ev.energy_pJ, ev.latency_s) for ev in results["pareto"].evaluations]
    for ev, (_, row) in zip(r.evaluations, r.joined.iterrows()):
        assert ev.valid and np.isclose(ev.energy_pJ, row["energy"], rtol=1e-9)
        assert np.isclose(ev.latency_s, row["latency"], rtol=1e-9)
        assert any(e <= ev.energy_pJ * (1 + 1e-9) and t <= ev.latency_s * (1 + 1e-9) for e, t in exact)
    text = " ".join(result_text(r).split())
    assert "point 0 is the proven energy optimum" in text and "Energy proof: complete" in text
    assert ("WARNING: pmapgen was cut short; the frontier is exact over the pmappings found, not over the mapspace "
            "(its lowest-energy point is the energy optimum: the energy proof completed)") in text
    with pytest.raises(NothingFoundInTime):  # the proof's tables are what held the frontier
        ffm.map(*specs, objective="pareto", progress=False, workers=1, time_limit=1e-9, prove=False)
    # EDP without the floors proof runs the same flow and joins the same tables: the
    # frontier's lowest-EDP point; the energy proof proves nothing of EDP
    kw = dict(progress=False, workers=1, time_limit=1e-9, proof_time_limit=math.inf, floors_proof=False)
    edp = ffm.map(*specs, objective="edp", **kw)
    plain = ffm.map(*specs, objective="pareto", **kw)
    assert np.isclose(edp.evaluation.edp, plain.evaluation.edp, rtol=1e-9) and edp.evaluation.valid
    assert edp.stats.proof.proven and not edp.stats.complete
    assert "mm2 on fan2: best found (not provably optimal) for edp" in result_text(edp)
    # with it (the default), the EDP proof proves the frontier's lowest-EDP point optimal
    # (tests/test_edp_proof.py)
    proven = ffm.map(*specs, objective="edp", progress=False, workers=1, time_limit=1e-9, proof_time_limit=math.inf)
    assert np.isclose(proven.evaluation.edp, r.evaluation.edp, rtol=1e-9) and proven.stats.complete
    # and with the pareto proof (the default) the frontier is the exhaustive one, proven,
    # pmapgen not run (tests/test_pareto_proof.py)
    whole = ffm.map(*specs, objective="pareto", progress=False, workers=1, time_limit=1e-9, proof_time_limit=math.inf)
    assert whole.stats.complete and not whole.stats.pmapgen and whole.stats.pareto_proof.proven
    assert np.allclose(sorted((ev.energy_pJ, ev.latency_s) for ev in whole.evaluations), sorted(exact), rtol=1e-9)


def test_latency_with_a_time_limit_joins_the_energy_flow_s_tables(specs, results):
    """Latency with a time limit runs the energy flow too, then its own join of every table
    found: with pmapgen cut short before it keeps anything, the result is the least latency
    over the proof's tables, exactly the pareto frontier's least latency over the same
    tables, no slower than the EDP result, no faster than the exhaustive latency optimum,
    and a real mapping of that latency. (The floors proof and the latency set at the bound,
    which run first, are turned off: this checks the flow they fall back to;
    tests/test_floors_proof.py and tests/test_latency_proof.py check them.)"""
    import math

    from ffm.capacity import NothingFoundInTime
    from ffm.report import result_text
    kw = dict(progress=False, workers=1, time_limit=1e-9, proof_time_limit=math.inf, latency_set_time=0,
              floors_proof=False)
    r = ffm.map(*specs, objective="latency", **kw)
    assert all(s.kept == 0 and not s.complete for s in r.stats.pmapgen.values())  # pmapgen gave nothing
    assert r.stats.proof.proven and r.stats.complete == r.stats.bound_reached
    pareto = ffm.map(*specs, objective="pareto", **kw)
    edp = ffm.map(*specs, objective="edp", **kw)
    least = min(ev.latency_s for ev in pareto.evaluations)
    assert np.isclose(r.evaluation.latency_s, least, rtol=1e-9) and r.evaluation.valid
    assert np.isclose(r.evaluation.latency_s, r.joined["latency"].iloc[0], rtol=1e-9)
    assert results["latency"].evaluation.latency_s * (1 - 1e-9) <= r.evaluation.latency_s \
        <= edp.evaluation.latency_s * (1 + 1e-9)
    words = " ".join(result_text(r).split())
    assert "Energy proof: complete" in words and ("The energy objective's flow ran first: what the energy proof and "
                                                   "coordinate descent below say is about the least energy found, not "
                                                   "this result; the latency join then searched every table") in words
    with pytest.raises(NothingFoundInTime):  # the proof's tables are what held it
        ffm.map(*specs, objective="latency", progress=False, workers=1, time_limit=1e-9, prove=False,
                latency_set_time=0)


def test_pareto_with_the_proof_cut_short_takes_the_descents_energy_end():
    """A time-limited pareto run whose proof does not complete runs the energy flow's
    coordinate descent too: the frontier's lowest-energy point is the descent's mapping,
    and the report bounds how far it can be from the energy optimum."""
    from ffm.report import result_text
    variables = {"length": 2, "M": 64, "big": 128, "small": 32}
    cut = ffm.map("matmul_chain", "simple", objective="pareto", variables=variables, progress=False, workers=1,
                  time_limit=0.05, proof_time_limit=0.0)
    proof = cut.stats.proof
    assert not proof.proven and not cut.stats.energy_end and not cut.stats.complete
    assert cut.stats.pmapgen and not cut.stats.exhaustive  # (as in the energy test above, 0.05 s cuts it short)
    least = min(ev.energy_pJ for ev in cut.evaluations)
    assert np.isclose(least, cut.stats.descent[0].after, rtol=1e-9) and np.isclose(proof.bound, least, rtol=1e-9)
    energy = ffm.map("matmul_chain", "simple", variables=variables, progress=False, workers=1)
    assert 0 < proof.lower <= energy.evaluation.energy_pJ * (1 + 1e-9) <= least * (1 + 1e-9)
    words = " ".join(result_text(cut).split())
    assert f"So the frontier's lowest-energy point is within {proof.bound / proof.lower:.2f}x of the optimum" in words
    assert "point 0 is the proven energy optimum" not in words
    assert "WARNING: pmapgen was cut short; the frontier is exact over the pmappings found, not over the mapspace" \
        in words and "energy proof completed" not in words
    edp = ffm.map("matmul_chain", "simple", objective="edp", variables=variables, progress=False, workers=1,
                  time_limit=0.05, proof_time_limit=0.0)
    assert edp.stats.descent  # (the EDP join ran over the descent's tables too)
    # complete only where the result meets its bound, the energy proof's times the latency
    # bound (`ffm.latency_bound`): here the floors reach the optimum's energy and latency both
    low = edp.stats.proof.lower * edp.stats.latency_lower
    assert edp.stats.complete == edp.stats.bound_reached == (edp.evaluation.edp <= low * (1 + 1e-9))
    words = " ".join(result_text(edp).split())
    assert f"So the least energy found is within {edp.stats.proof.bound / edp.stats.proof.lower:.2f}x" in words


def test_cli_no_descent_skips_the_coordinate_descent(capsys):
    """A time-limited energy run reports its coordinate descent; --no-descent skips it."""
    from ffm.map import main
    args = ["--workload", "matmul_chain", "--arch", "simple", "--set", "length=2", "M=64", "big=128", "small=32",
            "--time-limit", "0.05", "--proof-time", "0", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    if "time limit: not exhaustive" in out:  # (a machine fast enough for the limit has nothing to improve)
        assert "Coordinate descent after the join" in out
    assert main(args + ["--no-descent"]) == 0
    assert "Coordinate descent" not in capsys.readouterr().out


def test_time_limit_that_finds_nothing_is_one_line_exit_1():
    # (the energy proof, which runs first, has its own time: with 30 s it finds the optimum)
    run = subprocess.run([sys.executable, "-m", "ffm.map", "--workload", "matmul_chain", "--arch", "simple",
                          "--time-limit", "1e-9", "--proof-time", "1e-9", "--no-progress"],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip() == ("error: matmul_chain on simple: time limit: no valid mapping found with pmapgen "
                                  "cut short at 1e-09 s per Einsum; allow more time (0: no limit, exhaustive)")


def test_ctrl_c_is_one_line_exit_130_and_workers_end_without_a_traceback(capfd):
    def interrupted():
        raise KeyboardInterrupt
    assert cli.run(interrupted) == 130
    assert capfd.readouterr().err == "interrupted\n"
    with Workers(1) as workers:  # a worker of the pmapgen pool, Ctrl-C reaching it mid-job
        pool = workers.pool()
        pid = pool.submit(os.getpid).result()
        job = pool.submit(time.sleep, 60)
        time.sleep(0.2)
        os.kill(pid, signal.SIGINT)
        assert isinstance(job.exception(timeout=60), BrokenProcessPool)
    assert "Traceback" not in capfd.readouterr().err


def test_the_proof_names_the_limit_that_cut_each_search_short():
    """The report groups the Einsums whose last search was cut short by the limit that did
    (`Stats.stopped_by`), notes raises that were cut short and retried smaller, and says
    what the bound's least term needs of raises alone."""
    from dataclasses import replace

    from ffm.budgets import Proof
    from ffm.report import proof_lines
    from pmapgen import Stats
    minima = {e: Stats(1, 1, 1, True, budget=1.0) for e in ("V", "K", "QK")}
    raise_1 = {"V": Stats(1, 1, 1, False, stopped_by="time limit"), "QK": Stats(1, 1, 1, False, stopped_by="row limit")}
    raise_2 = {"V": Stats(1, 1, 1, True), "QK": Stats(1, 1, 1, False, stopped_by="row limit")}
    proof = Proof(10.0, 8.0, {e: 1.0 for e in minima}, {e: 1.0 for e in minima}, incomplete=("QK",),
                  steps=(("minima", minima), ("raise 1", raise_1), ("raise 2", raise_2)))
    lines = proof_lines(proof)
    words = " ".join(" ".join(lines).split())
    assert proof.cut_short == ("QK",)
    assert "The budgeted search of QK was cut short by its row limit; the best mapping found is 10 pJ" in words
    row = {e: next(line for line in lines if line.strip().startswith(e + " ")) for e in minima}
    assert row["QK"].endswith("(1 raise cut short, retried smaller; cut short: row limit)")
    assert row["V"].endswith("(1 raise cut short, retried smaller)")
    assert "cut short" not in row["K"]
    assert "least term" not in words  # no least term recorded
    held = replace(proof, least_term=(("QK",), 7.0))
    assert ("Its least term counts QK at its budget, 1 pJ, and joins the other Einsums' tables, free of QK's "
            "constraints, at 7 pJ: raising budgets closes that term only once QK's reaches 3 pJ (3.00 times its "
            "minimum).") in " ".join(" ".join(proof_lines(held)).split())
    both = replace(proof, least_term=(("V", "QK"), 6.5))
    assert ("Its least term counts V, QK at their budgets (1 pJ, 1 pJ) and joins the other Einsums' tables, free "
            "of their constraints, at 6.5 pJ: raising budgets closes that term only once theirs add up to 3.5 pJ "
            "(now 2 pJ).") in " ".join(" ".join(proof_lines(both)).split())
    assert "least term" not in " ".join(proof_lines(replace(proof, least_term=((), 10.0))))
    # a proof that went on to refine the least term (ffm.refine), and stopped there
    from ffm.refine import Refinement
    refined = replace(proof, least_term=(("QK",), 8.0),
                      refinements=(Refinement(("V", "QK"), 10.0, 4, 4, 0, 0, 1.0),
                                   Refinement(("QK",), 9.0, keys=10, empty=7, cut=1, rows=5, seconds=2.0)))
    lines = proof_lines(refined)
    words = " ".join(" ".join(lines).split())
    assert ("The keyed searches refining the bound's least term (QK above budget) were cut short or ran out of time "
            "(1 of 10)") in words
    assert ("Its least term, with QK above its budget, was refined by searching it on demand to 9 pJ, but 1 of its "
            "10 keyed searches were cut short.") in words
    assert ("2 terms of the bound were refined by searching their wildcards on demand, within the keys the other "
            "Einsums' tables give them (ffm.refine): 14 keyed searches, 11 of them with no pmapping, 1 cut short or not "
            "started, 3.0 s.") in words
    again = replace(refined, refinements=refined.refinements + (Refinement(("QK",), 9.5, keys=10, empty=7, reused=8),))
    assert ("3 terms of the bound were refined by searching their wildcards on demand, within the keys the other "
            "Einsums' tables give them (ffm.refine): 24 keyed searches (8 answered by earlier refinements' searches), "
            "18 of them with no pmapping") in " ".join(" ".join(proof_lines(again)).split())
    # the least term retried once raises stopped (its searches cut short, split by root), and still cut short
    retried = replace(refined, refinements=refined.refinements + (Refinement(("QK",), 9.2, keys=1, cut=1,
                                                                             retry=True),))
    words = " ".join(" ".join(proof_lines(retried)).split())
    assert ("Its least term, with QK above its budget, was refined by searching it on demand to 9 pJ, but 1 of its "
            "1 keyed searches were cut short even when retried with the time left.") in words
    assert ("15 keyed searches, 11 of them with no pmapping, 2 cut short or not started, 3.0 s; 1 of these "
            "refinements retried a standing term's searches cut short, split by root.") in words
    by_rows = replace(refined, refinements=refined.refinements + (Refinement(("QK",), 9.2, keys=3, cut=2,
                                                                             by_rows=1),))
    assert ("17 keyed searches, 11 of them with no pmapping, 3 cut short or not started (1 by their row limit), "
            "3.0 s.") in " ".join(" ".join(proof_lines(by_rows)).split())
    keyed = replace(refined, refinements=refined.refinements + (Refinement(("V", "QK"), 10.0, keys=2,
                                                                         absorbed=("V",)),))
    assert ("16 keyed searches, 11 of them with no pmapping, 1 cut short or not started, 3.0 s; in 1 a wildcard "
            "was keyed by the rows of another it reads.") in " ".join(" ".join(proof_lines(keyed)).split())
    stopped = replace(refined, least_term=(("V", "QK"), 6.5))  # a least term not refined: the deadline stopped it
    assert "The raises and refinements ran out of time; the best mapping found is 10 pJ" in \
        " ".join(" ".join(proof_lines(stopped)).split())
    row = {e: next(line for line in lines if line.strip().startswith(e + " ")) for e in minima}
    assert row["QK"].endswith("(2 raises cut short)")  # the raises did not stop the proof
    two = Proof(10.0, 8.0, {"V": 1.0}, {"V": 1.0}, incomplete=("V", "K"),
                steps=(("minima", {"V": raise_1["V"], "K": raise_1["V"]}),))
    assert "The budgeted searches of V, K were cut short by their time limit;" in " ".join(" ".join(proof_lines(two)).split())
