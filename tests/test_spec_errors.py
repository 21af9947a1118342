"""Bad specs are reported as one-line SpecErrors naming the file, the field and what was expected."""
from __future__ import annotations

import copy

import pytest
import yaml

import arch
import workloads
from specio import SpecError

W = {"name": "w", "variables": {"n": 4, "batch": 2}, "rank_sizes": {"a": "n", "b": 3, "c": 5},
     "einsums": ["Y[a,b] = X[a,c] * W[c,b]", {"expr": "Z[a,b] = Y[a,b]", "unit": "vector"}]}


def assert_one_line_error(load, spec, source: str, field: str, fragments) -> None:
    """`load(spec)` raises one SpecError line `source: field: ...` containing every fragment."""
    with pytest.raises(SpecError) as err:
        load(spec)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{source}: {field}: "), msg
    assert err.value.field == field
    for fragment in fragments:
        assert fragment in msg, msg


def wl(**changes):
    spec = copy.deepcopy(W)
    spec.update(changes)
    return spec


def without(spec, key):
    return {k: v for k, v in spec.items() if k != key}


# (id, spec, field, fragments the message must contain)
WORKLOAD_CASES = [
    ("einsum syntax", wl(einsums=["Y[a,b] = X[a,c"]), "einsums[0]",
     ["cannot read tensor 'X[a,c'", "expected NAME[r,...]"]),
    ("einsum no equals", wl(einsums=["Y[a,b] X[a,b]"]), "einsums[0]",
     ["expected an Einsum like \"OUT[r,...] = IN[r,...] * IN[r,...]\""]),
    ("unknown rank variable", wl(einsums=["Y[a,z] = X[a]"]), "einsums[0]",
     ["rank variable 'z' has no size", "expected it in rank_sizes (known: a, b, c)"]),
    ("rank size zero", wl(rank_sizes={"a": 0}), "rank_sizes.a",
     ["expected a positive integer or a variable name, got 0"]),
    ("rank size float", wl(rank_sizes={"a": 2.5}), "rank_sizes.a",
     ["expected a positive integer or a variable name, got 2.5"]),
    ("unknown variable", wl(rank_sizes={"a": "seq"}), "rank_sizes.a",
     ["unknown variable 'seq'", "expected a positive integer or one of the variables: batch, n"]),
    ("inconsistent size", wl(einsums=["Y[a,b] = X[a,c]", "Z[a] = Y[a,c]"]), "einsums[1]",
     ["Y[a,c] gives position 1 (c) size 5 but einsums[0] (Y[a,b]) gives it size 3",
      "expected every use to give each position the same size"]),
    ("inconsistent rank count", wl(einsums=["Y[a,b] = X[a,c]", "Z[a] = Y[a]"]), "einsums[1]",
     ["Y[a] has 1 rank(s) but 2 in einsums[0] (Y[a,b])", "expected every use of a tensor to have the same ranks"]),
    ("duplicate producer", wl(einsums=["Y[a] = X[a]", "Y[a] = W[a]"]), "einsums[1]",
     ["Y is already produced by einsums[0]", "expected each tensor to have one producer"]),
    ("out of order", wl(einsums=["Z[a] = Y[a]", "Y[a] = X[a]"]), "einsums[0]",
     ["Z consumes Y, which is produced later by einsums[1]", "expected Einsums in a topological order"]),
    ("cycle", wl(einsums=["P[a] = R[a] * X[a]", "Q[a] = P[a]", "R[a] = Q[a]"]), "einsums[0]",
     ["cycle in the Einsum DAG (data flows P -> Q -> R -> P)", "expected an acyclic DAG"]),
    ("repeated rank", wl(einsums=["Y[a,a] = X[a]"]), "einsums[0]",
     ["rank variable 'a' appears twice in 'Y[a,a]'", "expected each position of a tensor to have its own"]),
    ("unknown unit", wl(einsums=[{"expr": "Y[a] = X[a]", "unit": 3}]), "einsums[0].unit",
     ["unknown unit 3", "expected vector, mac or a compute unit's name"]),
    ("unknown einsum key", wl(einsums=[{"expr": "Y[a] = X[a]", "unti": "vector"}]), "einsums[0]",
     ["unknown key 'unti'", "expected `expr` and optionally `unit`"]),
    ("weight not an input", wl(weights=["Y"]), "weights[0]",
     ["Y is produced by an Einsum", "expected a workload input"]),
    ("weight unknown", wl(weights=["WQ"]), "weights[0]", ["no tensor named 'WQ'", "one of: W, X"]),
    ("bits zero", wl(bits=0), "bits", ["expected a positive integer or a variable name, got 0"]),
    ("bits per tensor bad", wl(bits={"default": 8, "Y": -4}), "bits.Y",
     ["expected a positive integer or a variable name, got -4"]),
    ("bits unknown tensor", wl(bits={"default": 8, "QK": 8}), "bits.QK",
     ["no tensor named 'QK'", "expected default or a tensor name"]),
    ("bits no default", wl(bits={"Y": 8}), "bits", ["expected a `default` entry"]),
    ("missing einsums", without(W, "einsums"), "einsums", ["missing; expected a list of Einsums"]),
    ("empty einsums", wl(einsums=[]), "einsums", ["expected a non-empty list of Einsums"]),
    ("missing name", without(W, "name"), "name", ["missing; expected the workload's name"]),
    ("output is input", wl(einsums=["Y[a] = Y[a] * X[a]"]), "einsums[0]",
     ["Y is both the output and an input", "expected an Einsum to write a new tensor"]),
    ("variable not positive", wl(variables={"n": -1}), "variables.n", ["expected a positive integer, got -1"]),
    ("unknown top-level field", wl(einsum=[]), "einsum", ["unknown field; expected one of: name"]),
    ("chain and einsums", wl(chain={"length": 2, "widths": [3]}), "chain",
     ["expected either `einsums` or `chain`, not both"]),
    ("chain bad length", {**without(W, "einsums"), "chain": {"length": "len", "widths": [3]}}, "chain.length",
     ["unknown variable 'len'"]),
    ("chain unknown key", {**without(W, "einsums"), "chain": {"length": 2, "widths": [3], "dims": []}},
     "chain.dims", ["unknown field; expected one of: length, ranks, widths"]),
]


@pytest.mark.parametrize("spec,field,fragments", [c[1:] for c in WORKLOAD_CASES],
                         ids=[c[0] for c in WORKLOAD_CASES])
def test_workload_dict_errors(spec, field, fragments):
    assert_one_line_error(workloads.load, spec, "<workload dict>", field, fragments)


@pytest.mark.parametrize("spec,field,fragments", [c[1:] for c in WORKLOAD_CASES[:12]],
                         ids=[c[0] for c in WORKLOAD_CASES[:12]])
def test_workload_file_errors_name_the_file(tmp_path, spec, field, fragments):
    path = tmp_path / "bad_workload.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert_one_line_error(workloads.load, str(path), str(path), field, fragments)


@pytest.mark.parametrize("overrides,field,fragments", [
    ({"seqlen": 4}, "variables.seqlen", ["cannot set unknown variable 'seqlen'", "expected one of: batch, n"]),
    ({"n": 0}, "variables.n", ["expected a positive integer to set n to, got 0"]),
    ({"n": 2.5}, "variables.n", ["expected a positive integer to set n to, got 2.5"]),
])
def test_bad_variable_overrides(overrides, field, fragments):
    with pytest.raises(SpecError) as err:
        workloads.load(W, **overrides)
    assert str(err.value).startswith(f"<workload dict>: {field}: ")
    assert all(f in str(err.value) for f in fragments)


def test_shipped_workload_override_errors_name_the_shipped_file():
    with pytest.raises(SpecError) as err:
        workloads.load("gpt3", seqlen=10)
    msg = str(err.value)
    assert msg.endswith("variables.seqlen: cannot set unknown variable 'seqlen'; expected one of: "
                        "batch, bits, d_ff, d_model, head_dim, heads, seq_len")
    assert "workloads/specs/gpt3.yaml: " in msg


@pytest.mark.parametrize("item,message", [
    ("seq_len", "expected NAME=INTEGER, e.g. seq_len=65536"),
    ("seq_len=abc", "expected NAME=INTEGER, e.g. seq_len=65536"),
    ("=4", "expected NAME=INTEGER, e.g. seq_len=65536"),
    ("seq len=4", "expected NAME=INTEGER, e.g. seq_len=65536"),
    ("seq_len=1.5", "expected NAME=INTEGER, e.g. seq_len=65536"),
    ("batch=0", "expected a positive integer for batch, got 0"),
])
def test_bad_set_strings(item, message):
    with pytest.raises(SpecError) as err:
        workloads.parse_overrides(["bits=8", item])
    assert str(err.value) == f"--set: {item}: {message}"


def test_unknown_shipped_name_and_bad_yaml(tmp_path):
    with pytest.raises(SpecError, match=r"^gtp3: no shipped workload of that name .*gpt3"):
        workloads.load("gtp3")
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError) as err:
        workloads.load(str(bad))
    assert str(err.value).startswith(f"{bad}: line ") and "not valid YAML" in str(err.value)


# -- architectures ---------------------------------------------------------------------
DRAM = {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "1 pJ/bit",
        "bandwidth": "inf"}
BUF = {"memory": "Buf", "capacity": "512 KiB", "read_energy": "0.1 pJ/bit"}
MAC = {"compute": "MAC", "energy": "1 pJ", "throughput": 1}


def ar(*levels, **top):
    return {"name": "a", "clock": "1 GHz", "levels": list(levels), **top}


ARCH_CASES = [
    ("memory without capacity", ar(DRAM, {"memory": "Buf"}, MAC), "levels[1].capacity",
     ["missing for memory 'Buf'", "expected a size such as '512 KiB', 'N values' or inf"]),
    ("capacity not a size", ar(DRAM, {**BUF, "capacity": "lots"}, MAC), "levels[1].capacity",
     ["expected a capacity such as '512 KiB', got 'lots'"]),
    ("capacity wrong unit", ar(DRAM, {**BUF, "capacity": "512 GB/s"}, MAC), "levels[1].capacity",
     ["unknown unit 'GB/s'", "expected a capacity such as '512 KiB'"]),
    ("capacity missing unit", ar(DRAM, {**BUF, "capacity": 512}, MAC), "levels[1].capacity",
     ["missing unit in 512", "expected a capacity such as '512 KiB'"]),
    ("capacity zero", ar(DRAM, {**BUF, "capacity": "0 KiB"}, MAC), "levels[1].capacity",
     ["expected a positive capacity"]),
    ("bad values capacity", ar(DRAM, {**BUF, "capacity": "two values"}, MAC), "levels[1].capacity",
     ["expected 'N values' with N a positive integer"]),
    ("bad energy unit", ar(DRAM, {**BUF, "read_energy": "1 pJ/furlong"}, MAC), "levels[1].read_energy",
     ["unknown unit 'pJ/furlong'", "'1.88 pJ/bit'"]),
    ("bad bandwidth unit", ar(DRAM, {**BUF, "bandwidth": "5 GHz"}, MAC), "levels[1].bandwidth",
     ["unknown unit 'GHz'", "expected a bandwidth such as '614 GB/s'"]),
    ("unknown below", ar(DRAM, BUF, {**MAC, "below": "L9"}), "levels[2].below",
     ["unknown memory 'L9'", "expected one of the memories listed above it: DRAM, Buf"]),
    ("duplicate names", ar(DRAM, {**BUF, "memory": "DRAM"}, MAC), "levels[1].memory",
     ["duplicate level name 'DRAM' (also levels[0])", "expected unique names"]),
    ("no compute", ar(DRAM, BUF), "levels",
     ["no compute unit", "expected at least one `compute:` level"]),
    ("no memory", ar(MAC), "levels[0]",
     ["compute unit 'MAC' comes before any memory", "expected at least one memory"]),
    ("memory after compute", ar(DRAM, MAC, BUF), "levels[2]",
     ["memory 'Buf' is listed after compute unit 'MAC'", "expected memories first"]),
    ("fanout zero", ar(DRAM, {**BUF, "fanout": 0}, MAC), "levels[1].fanout",
     ["expected a positive integer, got 0"]),
    ("fanout dim not int", ar(DRAM, {**BUF, "fanout": {"X": {"size": 2.5}}}, MAC), "levels[1].fanout.X.size",
     ["expected a positive integer, got 2.5"]),
    ("fanout flag not bool", ar(DRAM, {**BUF, "fanout": {"X": {"size": 4, "multicast": "yes"}}}, MAC),
     "levels[1].fanout.X.multicast", ["expected true or false, got 'yes'"]),
    ("fanout iterates value", ar(DRAM, {**BUF, "fanout": {"X": {"size": 4, "iterates": "rows"}}}, MAC),
     "levels[1].fanout.X.iterates", ["expected one of any, multicast, reduced, got 'rows'"]),
    ("fanout iterates needs flag", ar(DRAM, {**BUF, "fanout": {"X": {"size": 4, "iterates": "reduced"}}}, MAC),
     "levels[1].fanout.X.iterates", ["'reduced' needs reduce: true on the same dim"]),
    ("fanout typo", ar(DRAM, {**BUF, "fanout": {"X": {"size": 4, "mutlicast": True}}}, MAC),
     "levels[1].fanout.X.mutlicast", ["unknown field; did you mean 'multicast'?"]),
    ("level key typo", ar(DRAM, {**BUF, "capcity": "1 MiB"}, MAC), "levels[1].capcity",
     ["unknown field; did you mean 'capacity'?", "expected one of: memory, capacity"]),
    ("keep selector typo", ar(DRAM, {**BUF, "may_keep": ["actvation"]}, MAC), "levels[1].may_keep[0]",
     ["unknown selector 'actvation'; did you mean 'activation'?"]),
    ("einsums selector typo", ar(DRAM, BUF, {**MAC, "einsums": ["vectr"]}), "levels[2].einsums[0]",
     ["unknown selector 'vectr'; did you mean 'vector'?"]),
    ("throughput zero", ar(DRAM, BUF, {**MAC, "throughput": 0}), "levels[2].throughput",
     ["expected a positive number of ops per cycle per instance, got 0"]),
    ("clock missing unit", ar(DRAM, BUF, MAC, clock=1e9), "clock",
     ["missing unit in 1000000000.0", "expected a frequency such as '1.05 GHz'"]),
    ("clock missing", without(ar(DRAM, BUF, MAC), "clock"), "clock", ["missing; expected a frequency"]),
    ("level neither kind", ar(DRAM, {"capacity": "1 KiB"}, MAC), "levels[1]",
     ["expected a mapping with either `memory: NAME` or `compute: NAME`"]),
    ("duplicate fanout dim", ar(DRAM, {**BUF, "fanout": {"core": 2}},
                                {"memory": "L0", "capacity": "1 KiB", "fanout": {"core": 2}}, MAC),
     "levels[2].fanout.core", ["spatial dim 'core' is also a fanout dim of Buf", "expected unique dim names"]),
    ("unknown top-level field", ar(DRAM, BUF, MAC, level=[]), "level",
     ["unknown field; did you mean 'levels'?"]),
]


@pytest.mark.parametrize("spec,field,fragments", [c[1:] for c in ARCH_CASES], ids=[c[0] for c in ARCH_CASES])
def test_arch_dict_errors(spec, field, fragments):
    assert_one_line_error(arch.load, spec, "<arch dict>", field, fragments)


@pytest.mark.parametrize("spec,field,fragments", [c[1:] for c in ARCH_CASES[:10]],
                         ids=[c[0] for c in ARCH_CASES[:10]])
def test_arch_file_errors_name_the_file(tmp_path, spec, field, fragments):
    path = tmp_path / "bad_arch.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert_one_line_error(arch.load, path, str(path), field, fragments)
