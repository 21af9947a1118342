"""Regenerate the shipped example mappings in looptree/examples/ (hand-written, not mapped).

    python benchmarks/examples.py [--force]

- ffm_fig2_fused.json: FFM Fig. 2 on `mvm_chain` / `simple`: A and B fused over nA in the
  global buffer, C unfused.
- gpt3_tpuv4i_unfused.json: `gpt3` at batch 1, 2048 tokens on `tpuv4i`, every Einsum
  unfused (intermediates through DRAM) with a plain weight-stationary dataflow: a weight
  tile in the GlobalBuffer, tokens split over the 4 cores, activations in the LocalBuffer,
  one weight per PE with outputs on X and the reduction on Y. A baseline to compare the
  mapper against, not an optimum.
"""
from __future__ import annotations

import argparse

import arch as arch_specs
import workloads
from looptree import Compute, Loop, Mapping, Pmapping, Storage, evaluate, export, save_json

HERE = "looptree/examples"


def fig2():
    w, a = workloads.load("mvm_chain"), arch_specs.load("simple")
    S, L = Storage, Loop
    m = Mapping({
        "A": Pmapping("A", (S("DRAM", ("I", "WA")), S("GlobalBuffer", ("WA",)), L("nA", 2),
                            S("GlobalBuffer", ("A",)), L("nI", 2), S("GlobalBuffer", ("I",)), Compute("MAC"))),
        "B": Pmapping("B", (S("DRAM", ("WB", "B")), L("nA", 2), S("GlobalBuffer", ("A",)), L("nB", 2),
                            S("GlobalBuffer", ("B", "WB")), Compute("MAC"))),
        "C": Pmapping("C", (S("DRAM", ("B", "WC", "C")), S("GlobalBuffer", ("B", "C")), L("nC", 2),
                            S("GlobalBuffer", ("WC",)), Compute("MAC"))),
    }, ("A", "B", "C"))
    return "ffm_fig2_fused.json", "mvm_chain", "simple", w, a, m


def weight_stationary(einsum, inputs, weight, out, outer, m_tile, reduce_rank, reduce_tile, x_rank):
    """DRAM; outer weight loop; GLB weight tile; tokens over cores; LB activations; reduction
    blocks of 128; X over an output rank, Y over the reduced rank; one weight per PE."""
    S, L = Storage, Loop
    nodes = [S("DRAM", (*inputs, weight, out))]
    nodes += [L(r, t) for r, t in outer]
    nodes += [S("GlobalBuffer", (weight,)), L("m", 512, "core"), L("m", m_tile),
              S("LocalBuffer", (*inputs, out)), L(reduce_rank, reduce_tile),
              L(x_rank, 1, "X"), L(reduce_rank, 1, "Y"), S("Register", (weight,)), Compute("MAC")]
    return Pmapping(einsum, tuple(nodes))


def vector(einsum, src, dst, m_tile):
    S, L = Storage, Loop
    return Pmapping(einsum, (S("DRAM", (src, dst)), L("m", 512, "core"), L("m", m_tile),
                             S("LocalBuffer", (src, dst)), Compute("Vector")))


def gpt3():
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    p = {
        "I": vector("I", "I_in", "I", 64),
        "V": weight_stationary("V", ("I",), "WV", "V", [("h", 1)], 128, "d", 128, "f"),
        "K": weight_stationary("K", ("I",), "WK", "K", [("h", 1)], 128, "d", 128, "e"),
        "Q": weight_stationary("Q", ("I",), "WQ", "Q", [("h", 1)], 128, "d", 128, "e"),
        "QK": Pmapping("QK", (Storage("DRAM", ("Q", "K", "QK")), Loop("h", 1), Storage("GlobalBuffer", ("K",)),
                              Loop("m", 512, "core"), Loop("m", 128), Storage("LocalBuffer", ("Q", "QK")),
                              Loop("p", 128), Loop("p", 1, "X"), Loop("e", 1, "Y"), Storage("Register", ("K",)),
                              Compute("MAC"))),
        "QK_softmax": Pmapping("QK_softmax", (Storage("DRAM", ("QK", "QK_softmax")), Loop("h", 1),
                                              Loop("m", 512, "core"), Loop("m", 64),
                                              Storage("LocalBuffer", ("QK", "QK_softmax")), Compute("Vector"))),
        "AV": Pmapping("AV", (Storage("DRAM", ("QK_softmax", "V", "AV")), Loop("h", 1), Storage("GlobalBuffer", ("V",)),
                              Loop("m", 512, "core"), Loop("m", 128), Storage("LocalBuffer", ("QK_softmax", "AV")),
                              Loop("p", 128), Loop("f", 1, "X"), Loop("p", 1, "Y"), Storage("Register", ("V",)),
                              Compute("MAC"))),
        "Z": Pmapping("Z", (Storage("DRAM", ("AV", "WZ", "Z")), Loop("g", 128), Storage("GlobalBuffer", ("WZ",)),
                            Loop("m", 512, "core"), Loop("m", 128), Storage("LocalBuffer", ("AV", "Z")),
                            Loop("h", 1), Loop("g", 1, "X"), Loop("f", 1, "Y"), Storage("Register", ("WZ",)),
                            Compute("MAC"))),
        "FFA": weight_stationary("FFA", ("Z",), "WFFA", "FFA", [("c", 128)], 128, "g", 128, "c"),
        "FFB": weight_stationary("FFB", ("FFA",), "WFFB", "FFB", [("j", 128)], 32, "c", 128, "j"),
    }
    return "gpt3_tpuv4i_unfused.json", "gpt3", "tpuv4i", w, a, Mapping(p, w.einsum_names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    args = parser.parse_args()
    for make in (fig2, gpt3):
        name, wname, aname, w, a, m = make()
        ev = evaluate(m, w, a)
        save_json(export(ev, wname, aname, dict(w.variables)), f"{HERE}/{name}", force=args.force)
        print(f"{HERE}/{name}: energy {ev.energy_pJ:.4g} pJ, latency {ev.latency_s:.4g} s, valid {ev.valid}")


if __name__ == "__main__":
    main()
