"""Hand-computed cases from the papers, with the numbers written out."""
import pytest

import arch as arch_specs
import workloads
from looptree import Compute, Loop, Mapping, Pmapping, Storage, evaluate
from looptree.interpreter import interpret
from looptree.model import analyze

SIMPLE = {"name": "simple", "clock": "1 GHz", "levels": [
    {"memory": "DRAM", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "1 pJ/bit", "bandwidth": "inf"},
    {"memory": "GlobalBuffer", "capacity": "512 KiB", "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit",
     "bandwidth": "inf"},
    {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]}


def fusecu_bert(M=1024, K=768, L=768, TM=512):
    """FuseCU §III 'Example': C[m,l] = A[m,k] * B[k,l] with K untiled, T_M, T_L = 1 (Two-NRA).

    Loop nest: DRAM{A,B,C}; for m (tile T_M); GLB{A}; for l (tile 1); GLB{B,C}; MAC.
    """
    w = workloads.load({"name": "bert_mm", "rank_sizes": {"m": M, "k": K, "l": L}, "bits": 8,
                        "einsums": ["C[m,l] = A[m,k] * B[k,l]"]})
    p = Pmapping("C", (Storage("DRAM", ("A", "B", "C")), Loop("m", TM), Storage("GlobalBuffer", ("A",)),
                       Loop("l", 1), Storage("GlobalBuffer", ("B", "C")), Compute("MAC")))
    return w, p


def test_fusecu_bert_two_nra_reads_a_once_b_twice_writes_c_once():
    w, p = fusecu_bert()
    a = arch_specs.load(SIMPLE)
    counts = analyze(p, w, a).counts
    M, K, L = 1024, 768, 768
    assert counts.reads[("DRAM", "A")] == M * K            # A once: 786,432 values
    assert counts.reads[("DRAM", "B")] == 2 * K * L        # B twice (M / T_M = 2): 1,179,648
    assert counts.writes[("DRAM", "C")] == M * L           # C written once
    assert counts.reads.get(("DRAM", "C"), 0) == 0         # no partial sums: K untiled
    ev = evaluate(p, w, a)
    # GLB holds A (512x768) + B (768x1) + C (512x1) = 394,496 B, which fits in 512 KiB (524,288 B)
    assert ev.peak_usage_bits["GlobalBuffer"] == (512 * 768 + 768 + 512) * 8
    assert ev.valid
    # Energy: DRAM (786,432 + 1,179,648 + 786,432) values * 8 bits * 1 pJ/bit, plus GLB traffic:
    # writes of the fills (same values) and per-op reads of A and B + per-op updates of C
    ops = M * K * L
    dram = (M * K + 2 * K * L + M * L) * 8 * 1.0
    glb = ((M * K + 2 * K * L) * 8 + ops * 8 * 2 + ops * 8 + M * L * 8) * 0.1
    assert ev.energy_pJ == pytest.approx(dram + glb + ops * 1.0)


def test_fusecu_bert_scaled_down_agrees_with_interpreter():
    w, p = fusecu_bert(M=4, K=3, L=3, TM=2)
    a = arch_specs.load(SIMPLE)
    truth = interpret(p, w, a)
    assert truth.reads[("DRAM", "A")] == 12 and truth.reads[("DRAM", "B")] == 18
    assert truth.writes[("DRAM", "C")] == 12
    assert analyze(p, w, a).counts.nonzero() == truth.nonzero()


def mvm_chain(nI=6, nA=8, nB=4):
    """FFM Fig. 2: A[nA] = I[nI] * WA[nI,nA]; B[nB] = A[nA] * WB[nA,nB], fused over nA in GLB."""
    return workloads.load({"name": "mvm", "rank_sizes": {"nI": nI, "nA": nA, "nB": nB}, "bits": 8,
                           "einsums": ["A[nA] = I[nI] * WA[nI,nA]", "B[nB] = A[nA] * WB[nA,nB]"]})


def fig2_mapping():
    """FFM Fig. 2(b): nA split in 4 and fused; nI split in 3 under it, so 12 tiles of I.

    Einsum A: DRAM{I,WA}; GLB{WA}; for nA/4; GLB{A}; for nI/3; GLB{I}; MAC
    Einsum B: DRAM{WB,B};          for nA/4; GLB{A}; for nB/2; GLB{B,WB}; MAC
    (B's tile changes under nB, so it lives only in B's branch, as in FFM Fig. 5.)
    """
    pa = Pmapping("A", (Storage("DRAM", ("I", "WA")), Storage("GlobalBuffer", ("WA",)), Loop("nA", 2),
                        Storage("GlobalBuffer", ("A",)), Loop("nI", 2), Storage("GlobalBuffer", ("I",)),
                        Compute("MAC")))
    pb = Pmapping("B", (Storage("DRAM", ("WB", "B")), Loop("nA", 2), Storage("GlobalBuffer", ("A",)),
                        Loop("nB", 2), Storage("GlobalBuffer", ("B", "WB")), Compute("MAC")))
    return Mapping({"A": pa, "B": pb}, ("A", "B"))


def test_reused_tile_persists_across_fused_loop():
    """Without the nB loop, B's tile is reused across the fused nA loop (fetched once, no
    partial sums), so it must stay in the GLB while A runs in the next nA iteration."""
    w, a, m = mvm_chain(), arch_specs.load(SIMPLE), fig2_mapping()
    pb = Pmapping("B", (Storage("DRAM", ("WB", "B")), Loop("nA", 2), Storage("GlobalBuffer", ("A",)),
                        Storage("GlobalBuffer", ("B", "WB")), Compute("MAC")))
    ev = evaluate(Mapping({"A": m["A"], "B": pb}, ("A", "B")), w, a)
    assert ev.accesses["DRAM"]["B"] == {"reads": 0, "writes": 4}
    WA, A, I, B, WB = 48, 2, 2, 4, 2 * 4
    assert ev.usage.during_bits["A"]["GlobalBuffer"] == (WA + A + I + B) * 8
    assert ev.peak_usage_bits["GlobalBuffer"] == (WA + A + B + WB) * 8


def test_ffm_fig2_accesses():
    w, a, m = mvm_chain(), arch_specs.load(SIMPLE), fig2_mapping()
    ev = evaluate(m, w, a)
    acc = ev.accesses
    assert acc["DRAM"]["I"]["reads"] == 12 * 2          # twelve tiles of I, 2 values each
    assert acc["DRAM"]["WA"]["reads"] == 6 * 8          # WA fetched whole once
    assert "A" not in acc["DRAM"]                       # A never leaves the chip: fused
    assert acc["DRAM"]["WB"]["reads"] == 8 * 4          # 8 tiles of 2x2: WB once
    # B's 2 tiles of 2 are each visited in all 4 nA iterations: 8 write-backs of 2 values,
    # and the 6 revisits read their partial sums back
    assert acc["DRAM"]["B"] == {"reads": 6 * 2, "writes": 8 * 2}
    assert ev.fused_tensors == ("A",)
    for name in ("A", "B"):
        assert analyze(m[name], w, a).counts.nonzero() == interpret(m[name], w, a).nonzero()


def test_ffm_fig5_glb_peak_is_wa_plus_max_of_branches():
    w, a, m = mvm_chain(), arch_specs.load(SIMPLE), fig2_mapping()
    ev = evaluate(m, w, a)
    bits = 8
    WA, A, I, B, WB = 6 * 8, 2, 2, 2, 2 * 2  # tiles in values
    assert ev.peak_usage_bits["GlobalBuffer"] == (WA + max(A + I, A + B + WB)) * bits
    # the usage while each Einsum runs: WA and A persist across the split
    assert ev.usage.during_bits["A"]["GlobalBuffer"] == (WA + A + I) * bits
    assert ev.usage.during_bits["B"]["GlobalBuffer"] == (WA + A + B + WB) * bits


def test_overflow_names_level_and_excess():
    w, m = mvm_chain(nI=6, nA=8, nB=4), fig2_mapping()
    small = {**SIMPLE, "levels": [SIMPLE["levels"][0], {**SIMPLE["levels"][1], "capacity": "50 B"},
                                  SIMPLE["levels"][2]]}
    ev = evaluate(m, w, arch_specs.load(small))
    assert not ev.valid
    assert ev.overflows == {"GlobalBuffer": "needs 56 B per instance, has 50 B (over by 6 B)"}
