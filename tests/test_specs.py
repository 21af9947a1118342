"""Shipped workload and architecture specs load, and mean what DESIGN §3 says."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

import arch
import workloads

MiB_BITS = 2**20 * 8
GBps = 8e9  # bits/s per GB/s

GPT3_ORDER = ["I", "V", "K", "Q", "QK", "QK_softmax", "AV", "Z", "FFA", "FFB"]


@pytest.mark.parametrize("name", workloads.available())
def test_every_shipped_workload_loads(name):
    w = workloads.load(name)
    assert w.name == name and w.einsums
    assert Path(w.source).name == f"{name}.yaml"
    text = Path(w.source).read_text()
    assert text.startswith("#"), "each shipped spec starts with a comment citing its sources"
    for e in w.einsums:
        for u in e.tensor_uses:
            assert w.tensors[u.tensor].shape == tuple(w.rank_sizes[r] for r in u.ranks)


@pytest.mark.parametrize("name", arch.available())
def test_every_shipped_arch_loads(name):
    a = arch.load(name)
    assert a.name == name and a.memories and a.computes
    assert Path(a.source).read_text().startswith("#")
    assert math.isinf(a.top.capacity_bits)


def test_shipped_lists_are_complete():
    assert {"gpt3", "gpt3_exact", "llama3_8b", "bert_base", "t5_small", "xlm", "trxl", "attention",
            "fusemax_attention", "matmul_chain", "mvm_chain"} <= set(workloads.available())
    assert {"tpuv4i", "ffm_edge", "transfusion_cloud", "transfusion_edge", "mas_edge",
            "simple"} <= set(arch.available())


def test_gpt3_einsums_and_shapes():
    w = workloads.load("gpt3")
    assert list(w.einsum_names) == GPT3_ORDER
    assert [e.kind for e in w.einsums] == ["vector"] + ["mac"] * 4 + ["vector"] + ["mac"] * 4
    shapes = {t: x.shape for t, x in w.tensors.items()}
    assert shapes["I_in"] == shapes["I"] == (64, 4096, 4096)
    assert shapes["WQ"] == shapes["WK"] == shapes["WV"] == (32, 128, 4096)
    assert shapes["Q"] == shapes["K"] == shapes["V"] == shapes["AV"] == (64, 4096, 32, 128)
    assert shapes["QK"] == shapes["QK_softmax"] == (64, 4096, 4096, 32)
    assert shapes["WZ"] == (32, 128, 4096) and shapes["Z"] == (64, 4096, 4096)
    assert shapes["WFFA"] == (4096, 16384) and shapes["FFA"] == (64, 4096, 16384)
    assert shapes["WFFB"] == (16384, 4096) and shapes["FFB"] == (64, 4096, 4096)
    assert str(w.einsum("QK")) == "QK[b,m,p,h] = Q[b,m,h,e] * K[b,p,h,e]"
    assert w.einsum("QK").reduced == {"e"} and w.einsum("AV").reduced == {"p"}
    assert w.ops("QK") == 64 * 4096 * 4096 * 32 * 128


def test_gpt3_roles_producers_consumers():
    w = workloads.load("gpt3")
    roles = {t: x.role for t, x in w.tensors.items()}
    assert {t for t, r in roles.items() if r == "input"} == {"I_in", "WV", "WK", "WQ", "WZ", "WFFA", "WFFB"}
    assert {t for t, r in roles.items() if r == "output"} == {"FFB"}
    assert roles["QK"] == roles["I"] == roles["V"] == "intermediate"
    assert {t for t, x in w.tensors.items() if x.weight} == {"WV", "WK", "WQ", "WZ", "WFFA", "WFFB"}
    assert w.producer("QK") == "QK" and w.producer("I_in") is None
    assert w.consumers("I") == ("V", "K", "Q")
    assert w.consumers("V") == ("AV",) and w.consumers("FFB") == ()
    assert w.users("K") == ("K", "QK") and w.is_shared("K") and not w.is_shared("WQ")


def test_gpt3_overrides_and_bits():
    w = workloads.load("gpt3", seq_len=2048, batch=1)
    assert w.variables["seq_len"] == 2048 and w.variables["batch"] == 1
    assert w.tensors["QK"].shape == (1, 2048, 2048, 32)
    assert w.tensors["I_in"].shape == (1, 2048, 4096)
    assert {x.bits for x in workloads.load("gpt3").tensors.values()} == {16}
    assert {x.bits for x in workloads.load("gpt3", bits=8).tensors.values()} == {8}


def test_bits_per_tensor_and_default():
    spec = {"name": "w", "variables": {"q": 16}, "rank_sizes": {"a": 4},
            "bits": {"default": 8, "Y": "q"}, "einsums": ["Y[a] = X[a]"]}
    w = workloads.load(spec)
    assert w.tensors["X"].bits == 8 and w.tensors["Y"].bits == 16
    no_bits = {k: v for k, v in spec.items() if k != "bits"}
    assert workloads.load(no_bits).tensors["X"].bits == 8  # the documented default


def test_gpt3_exact_reduces_the_softmax_row():
    w = workloads.load("gpt3_exact")
    names = list(w.einsum_names)
    assert len(names) == 11 and names[5:7] == ["QK_rowstat", "QK_softmax"]
    assert w.einsum("QK_rowstat").reduced == {"p"} and w.tensors["QK_rowstat"].shape == (64, 4096, 32)
    assert w.consumers("QK") == ("QK_rowstat", "QK_softmax")
    assert w.einsum("QK_softmax").kind == "vector"


def test_fusemax_cascade():
    w = workloads.load("fusemax_attention")
    assert list(w.einsum_names) == ["BQK", "LM", "RM", "SLN", "SLD", "SLNV", "PRM", "RD", "RNV", "AV"]
    assert [e.name for e in w.einsums if e.kind == "mac"] == ["BQK", "SLNV"]
    assert "m1" in w.einsum("RM").output.ranks and w.einsum("RM").reduced == frozenset()
    assert w.einsum("LM").reduced == {"m0"} and w.einsum("RD").reduced == {"m1"}
    assert {t for t, x in w.tensors.items() if x.role == "input"} == {"Q", "BK", "BV"}
    assert w.tensors["BK"].shape == (64, 32, 128, 16, 256)


def test_llama3_gqa_and_swiglu():
    w = workloads.load("llama3_8b", seq_len=1024, batch=1)
    assert len(w.einsums) == 12
    assert w.tensors["K"].shape == w.tensors["V"].shape == (1, 1024, 8, 128)
    assert w.tensors["Q"].shape == (1, 1024, 8, 4, 128)
    assert w.tensors["FFG"].shape == (1, 1024, 14336) and w.einsum("FFG").kind == "vector"
    assert w.consumers("Z") == ("FFA", "FFU")


@pytest.mark.parametrize("name,d_model,heads,head_dim,d_ff", [
    ("bert_base", 768, 12, 64, 3072), ("t5_small", 512, 8, 64, 2048),
    ("xlm", 1024, 8, 128, 4096), ("trxl", 1024, 16, 64, 4096)])
def test_transformer_shapes(name, d_model, heads, head_dim, d_ff):
    w = workloads.load(name, seq_len=512)
    assert list(w.einsum_names) == GPT3_ORDER
    assert w.tensors["WQ"].shape == (heads, head_dim, d_model)
    assert w.tensors["WFFA"].shape == (d_model, d_ff)
    assert w.tensors["QK"].shape == (64, 512, 512, heads)


def test_attention_and_mvm_chain():
    w = workloads.load("attention")
    assert list(w.einsum_names) == ["QK", "QK_softmax", "AV"]
    assert {t for t, x in w.tensors.items() if x.role == "input"} == {"Q", "K", "V"}
    m = workloads.load("mvm_chain", n_A=3)
    assert [str(e) for e in m.einsums] == ["A[nA] = I[nI] * WA[nI,nA]", "B[nB] = A[nA] * WB[nA,nB]",
                                           "C[nC] = B[nB] * WC[nB,nC]"]
    assert m.tensors["WB"].shape == (3, 4) and m.tensors["C"].role == "output"


def test_matmul_chain_length_and_ffm_shapes():
    w = workloads.load("matmul_chain")
    assert list(w.einsum_names) == ["T1", "T2", "T3", "T4"]
    # (N; K) per Einsum, FFM §7.5: (16384;16384) -> (4096;16384) -> (4096;4096) -> (16384;4096)
    nk = [(w.tensors[f"W{i}"].shape[1], w.tensors[f"W{i}"].shape[0]) for i in range(1, 5)]
    assert nk == [(16384, 16384), (4096, 16384), (4096, 4096), (16384, 4096)]
    assert all(w.tensors[f"T{i}"].shape[0] == 8192 for i in range(5))
    long = workloads.load("matmul_chain", length=9)
    assert len(long.einsums) == 9 and long.tensors["W5"].shape == (16384, 16384)
    assert long.tensors["T9"].role == "output" and long.tensors["T0"].role == "input"
    assert {t for t, x in long.tensors.items() if x.weight} == {f"W{i}" for i in range(1, 10)}
    assert len(workloads.load("matmul_chain", length=1).einsums) == 1


def test_tpuv4i_matches_design():
    a = arch.load("tpuv4i")
    assert a.clock_hz == pytest.approx(1.05e9)
    assert [m.name for m in a.memories] == ["DRAM", "GlobalBuffer", "LocalBuffer", "Register"]
    dram, glb, lb, reg = a.memories
    assert math.isinf(dram.capacity_bits) and dram.bandwidth == pytest.approx(614 * GBps)
    assert dram.read_energy == dram.write_energy == pytest.approx(7.03)
    assert dram.must_keep == ("input", "output")
    assert glb.capacity_bits == 128 * MiB_BITS
    assert (glb.read_energy, glb.write_energy) == pytest.approx((1.88, 2.36))
    assert glb.read_bandwidth == pytest.approx(2048 * GBps) and glb.write_bandwidth == pytest.approx(1024 * GBps)
    assert lb.capacity_bits == 4 * MiB_BITS and (lb.read_energy, lb.write_energy) == pytest.approx((0.249, 0.293))
    assert lb.fanout == (arch.FanoutDim("core", 4, multicast=False, reduce=False),)
    assert lb.may_keep == ("activation",) and math.isinf(lb.bandwidth)
    assert reg.capacity_values == 1 and math.isinf(reg.capacity_bits) and reg.may_keep == ("read",)
    # DESIGN §3: "one dim reuses the input by multicast, the other reduces the output"
    assert reg.fanout == (arch.FanoutDim("X", 128, multicast=True, reduce=False, iterates="multicast"),
                          arch.FanoutDim("Y", 128, multicast=False, reduce=True, iterates="reduced"))
    mac, vec = a.computes
    assert (mac.name, mac.energy, mac.throughput, mac.einsums) == ("MAC", pytest.approx(0.084), 1, ("mac",))
    assert (vec.name, vec.energy, vec.throughput, vec.below) == ("Vector", 0, 128, "LocalBuffer")
    assert [m.name for m in a.path("Vector")] == ["DRAM", "GlobalBuffer", "LocalBuffer"]
    assert [m.name for m in a.path("MAC")] == ["DRAM", "GlobalBuffer", "LocalBuffer", "Register"]
    w = workloads.load("gpt3")
    assert [c.name for c in a.computes_for(w.einsum("QK_softmax"))] == ["Vector"]
    assert [c.name for c in a.computes_for(w.einsum("QK"))] == ["MAC"]
    assert not a.may_keep("LocalBuffer", w.tensors["WQ"], w.einsum("Q"))
    assert a.must_keep("DRAM", w.tensors["WQ"], w.einsum("Q"))


def test_simple_is_the_design_example():
    a = arch.load("simple")
    assert a.clock_hz == 1e9 and [m.name for m in a.memories] == ["DRAM", "GlobalBuffer"]
    assert a.memories[1].capacity_bits == 512 * 1024 * 8
    assert a.memories[0].read_energy == 1 and a.memories[1].write_energy == pytest.approx(0.1)
    assert a.computes == (arch.ComputeUnit("MAC", energy=1.0, throughput=1.0),)


def test_edge_archs_numbers():
    e = arch.load("ffm_edge")
    assert e.memories[0].bandwidth == pytest.approx(30 * GBps) and e.memories[0].read_energy == 8
    assert e.memories[1].capacity_bits == 5e6 * 8 and e.memories[1].bandwidth == pytest.approx(512 * GBps)
    assert e.compute("Vector").throughput == 256 and e.clock_hz == 1e9
    assert e.memory("Register").instances_per_parent == 128 * 128
    c, t = arch.load("transfusion_cloud"), arch.load("transfusion_edge")
    assert c.memory("Register").instances_per_parent == 256 * 256 and c.memories[1].capacity_bits == 16e6 * 8
    assert c.memories[0].bandwidth == pytest.approx(400 * GBps)
    assert t.memory("Register").instances_per_parent == 16 * 16 and t.memories[1].capacity_bits == 5e6 * 8
    m = arch.load("mas_edge")
    assert m.clock_hz == pytest.approx(3.75e9) and m.memory("L0").fanout[0].size == 2
    assert m.compute("VEC").below == "L0" and m.memory("L1").capacity_bits == 5e6 * 8


def test_load_from_path_and_dict(tmp_path):
    spec = {"name": "tiny", "rank_sizes": {"a": 2, "b": 3},
            "einsums": ["Y[a,b] = X[a] * W[a,b]", {"expr": "Z[b] = Y[a,b]", "unit": "vector"}]}
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(spec))
    w = workloads.load(str(p))
    assert w.source == str(p) and w.tensors["Y"].role == "intermediate"
    assert workloads.load(spec).source == "<workload dict>"
    ap = tmp_path / "a.yaml"
    ap.write_text(Path(arch.load("simple").source).read_text())
    assert arch.load(ap).source == str(ap)


def test_fanout_int_and_keep_string_forms():
    a = arch.load({"name": "a", "clock": "1 GHz", "levels": [
        {"memory": "DRAM", "capacity": "inf"},
        {"memory": "Buf", "capacity": "8 values", "fanout": 4, "may_keep": "weight"},
        {"compute": "PE", "einsums": "all"}]})
    assert a.memory("Buf").fanout == (arch.FanoutDim("Buf", 4, multicast=False, reduce=False),)
    assert a.memory("Buf").may_keep == ("weight",) and a.memory("Buf").capacity_values == 8
    assert a.memory("DRAM").read_energy == 0 and math.isinf(a.memory("DRAM").bandwidth)


def test_parse_overrides():
    assert workloads.parse_overrides(["seq_len=65536", "batch = 1"]) == {"seq_len": 65536, "batch": 1}
    assert workloads.load("gpt3", **workloads.parse_overrides(["seq_len=1024"])).rank_sizes["p"] == 1024
