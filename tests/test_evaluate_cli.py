"""`python -m looptree.evaluate` and the JSON export round trip."""
import json
import subprocess
import sys

import pytest

import arch as arch_specs
import workloads
from looptree import evaluate, export, load_mapping, save_json
from looptree.evaluate import main
from specio import SpecError

EXAMPLE = "looptree/examples/ffm_fig2_fused.json"


def test_export_round_trip_gives_identical_totals(tmp_path):
    doc = load_mapping(EXAMPLE)
    w, a = workloads.load(doc.workload, **doc.variables), arch_specs.load(doc.arch)
    ev = evaluate(doc.mapping, w, a)
    out = tmp_path / "again.json"
    save_json(export(ev, doc.workload, doc.arch, doc.variables), out)
    again = load_mapping(out)
    assert again.mapping == doc.mapping
    ev2 = evaluate(again.mapping, w, a)
    assert (ev2.energy_pJ, ev2.latency_s, ev2.accesses) == (ev.energy_pJ, ev.latency_s, ev.accesses)
    assert again.totals["energy_pJ"] == ev.energy_pJ


def test_save_refuses_to_overwrite(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("{}")
    with pytest.raises(SpecError, match="already exists; pass --force"):
        save_json({}, target)
    save_json({"a": 1}, target, force=True)
    assert json.loads(target.read_text()) == {"a": 1}


def test_cli_prints_report_and_check(capsys):
    assert main([EXAMPLE, "--check"]) == 0
    out = capsys.readouterr().out
    for text in ("Energy 1.814 nJ", "Kept on chip (fused): A in GlobalBuffer", "LoopTree:",
                 "Recorded totals match", "A: agrees", "B: agrees", "C: agrees"):
        assert text in out


def test_cli_reports_overflow_level_and_amount(tmp_path, capsys):
    data = json.loads(open(EXAMPLE).read())
    spec = tmp_path / "tiny.yaml"
    spec.write_text(open("arch/specs/simple.yaml").read().replace("512 KiB", "40 B"))
    data["arch"] = str(spec)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "INVALID: GlobalBuffer needs 56 B per instance, has 40 B (over by 16 B)" in out


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.pop("pmappings"), "pmappings: missing"),
    (lambda d: d["pmappings"]["A"].__setitem__(2, {"loop": "nA", "tile": 0}), "pmappings.A[2].tile: expected a positive integer"),
    (lambda d: d["pmappings"]["A"].__setitem__(2, {"loop": "nA", "tile": 3}), "tile 3 of nA does not divide"),
    (lambda d: d["pmappings"]["A"].__setitem__(0, {"storage": "DRAM"}), 'pmappings.A[0]: expected {"storage"'),
    (lambda d: d.__setitem__("arch", "nope"), "no shipped arch of that name"),
])
def test_cli_bad_input_is_one_line_without_traceback(tmp_path, edit, message):
    data = json.loads(open(EXAMPLE).read())
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    run = subprocess.run([sys.executable, "-m", "looptree.evaluate", str(path)], capture_output=True, text=True)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_shipped_gpt3_unfused_example_is_valid_on_tpuv4i(capsys):
    """The hand-written weight-stationary GPT-3 mapping exercises the real TPUv4i spec: core,
    X and Y fanouts, the one-value register, the vector unit under the local buffer."""
    doc = load_mapping("looptree/examples/gpt3_tpuv4i_unfused.json")
    w, a = workloads.load(doc.workload, **doc.variables), arch_specs.load(doc.arch)
    assert (w.rank_sizes["m"], w.rank_sizes["b"]) == (2048, 1)
    ev = evaluate(doc.mapping, w, a)
    assert ev.valid and ev.fused_tensors == ()
    assert ev.usage.peak_values["Register"] == 1
    assert ev.energy_pJ == doc.totals["energy_pJ"]
    # weights are read from DRAM exactly once each (their GLB tile is refilled per outer loop)
    for weight in ("WV", "WK", "WQ", "WZ", "WFFA", "WFFB"):
        assert ev.accesses["DRAM"][weight]["reads"] == w.tensors[weight].values
    assert main(["looptree/examples/gpt3_tpuv4i_unfused.json"]) == 0
    out = capsys.readouterr().out
    assert "S-for (Y) d: 128 tiles of 1" in out
    # the register costs 0 pJ per access: its line names what it holds instead of nothing
    register = next(line for line in out.splitlines() if line.strip().startswith("Register") and " J " in line)
    held = sorted(t for t, v in ev.accesses["Register"].items())
    assert register.split(" J ")[1].strip() == ", ".join(held) + " (accesses cost 0 pJ here)"
