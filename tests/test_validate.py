"""Illegal pmappings and mappings are rejected with an error naming the offending node."""
import pytest

import arch as arch_specs
import workloads
from looptree import Compute, Loop, Mapping, MappingError, Pmapping, Storage, evaluate, normalize
from looptree.validate import validate_pmapping
from tests.test_paper_cases import SIMPLE, fig2_mapping, mvm_chain

TPU_LIKE = {"name": "t", "clock": "1 GHz", "levels": [
    {"memory": "DRAM", "capacity": "inf", "must_keep": ["input", "output"]},
    {"memory": "GLB", "capacity": "1 MiB"},
    {"memory": "LB", "capacity": "64 KiB", "fanout": {"core": {"size": 2}}, "may_keep": ["activation"]},
    {"memory": "Reg", "capacity": "1 values", "may_keep": ["read"],
     "fanout": {"X": {"size": 4, "multicast": True}, "Y": {"size": 4, "reduce": True}}},
    {"compute": "MAC", "energy": "1 pJ", "einsums": ["mac"]},
    {"compute": "Vec", "energy": "0 pJ", "throughput": 4, "einsums": ["vector"], "below": "LB"}]}
MM = {"name": "mm", "rank_sizes": {"m": 8, "k": 4, "n": 4}, "weights": ["W"],
      "einsums": ["Z[m,n] = A[m,k] * W[k,n]", {"expr": "Y[m,n] = Z[m,n]", "unit": "vector"}]}

S, L, C = Storage, Loop, Compute
GOOD_Z = (S("DRAM", ("A", "W", "Z")), L("m", 4), S("GLB", ("W",)), L("n", 1, "X"), L("k", 1, "Y"),
          S("Reg", ("W",)), C("MAC"))

BAD = [
    ("leaf", (S("DRAM", ("A", "W", "Z")), S("GLB", ("A",))), "[1]", "must end in one compute node"),
    ("unit", (S("DRAM", ("A", "W", "Z")), C("Vec")), "[1]", "does not run mac Einsum"),
    ("level", (S("DRAM", ("A", "W", "Z")), S("SRAM", ("A",)), C("MAC")), "[1]", "not on the path"),
    ("tensor", (S("DRAM", ("A", "W", "Z", "Q")), C("MAC")), "[0]", "'Q' is not used"),
    ("keep", (S("DRAM", ("A", "W", "Z")), S("LB", ("W",)), C("MAC")), "[1]", "LB may not keep W"),
    ("order", (S("DRAM", ("A", "W", "Z")), S("LB", ("A",)), S("GLB", ("A",)), C("MAC")), "[2]",
     "not in level order"),
    ("nowhere", (S("DRAM", ("A", "W")), C("MAC")), "pmappings.Z:", "Z is kept nowhere"),
    ("backing", (S("DRAM", ("A", "Z")), S("GLB", ("W",)), C("MAC")), "[1]", "workload input W must be backed at DRAM"),
    ("top after loop", (S("DRAM", ("A", "W")), L("m", 4), S("DRAM", ("Z",)), C("MAC")), "[2]",
     "must come before the first loop"),
    ("rank", (S("DRAM", ("A", "W", "Z")), L("q", 2), C("MAC")), "[1]", "does not have"),
    ("spatial dim", (S("DRAM", ("A", "W", "Z")), L("m", 4, "Z"), C("MAC")), "[1]", "not a fanout"),
    ("spatial above", (S("DRAM", ("A", "W", "Z")), L("n", 1, "X"), S("GLB", ("W",)), C("MAC")), "[1]",
     "must be below GLB storage"),
    ("spatial size", (S("DRAM", ("A", "W", "Z")), L("m", 1, "X"), C("MAC")), "[1]", "use 8 instances"),
    ("spatial reduce", (S("DRAM", ("A", "W", "Z")), L("k", 1, "X"), C("MAC")), "[1]", "cannot reduce"),
]


@pytest.mark.parametrize("label,nodes,where,message", BAD, ids=[b[0] for b in BAD])
def test_illegal_pmapping_names_the_node(label, nodes, where, message):
    w, a = workloads.load(MM), arch_specs.load(TPU_LIKE)
    with pytest.raises(MappingError) as err:
        validate_pmapping(Pmapping("Z", nodes), w, a)
    assert where in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)


SYSTOLIC = {**TPU_LIKE, "levels": [*TPU_LIKE["levels"][:3],
                                   {**TPU_LIKE["levels"][3], "fanout": {
                                       "X": {"size": 4, "multicast": True, "iterates": "multicast"},
                                       "Y": {"size": 4, "reduce": True, "iterates": "reduced"}}},
                                   *TPU_LIKE["levels"][4:]]}


@pytest.mark.parametrize("loops,legal", [
    ((L("n", 1, "X"), L("k", 1, "Y")), True),  # X leaves A unindexed (broadcast), Y reduces k
    ((L("m", 2, "X"),), True),  # m leaves W unindexed: W is the broadcast operand
    ((L("m", 4, "X"), L("n", 2, "X")), False),  # no read tensor is left unindexed on X
    ((L("n", 1, "Y"),), False),  # n is not reduced: a reduce-only dim cannot run it
])
def test_systolic_dims_run_only_their_loops(loops, legal):
    w, a = workloads.load(MM), arch_specs.load(SYSTOLIC)
    p = Pmapping("Z", (S("DRAM", ("A", "W", "Z")), *loops, C("MAC")))
    if legal:
        validate_pmapping(normalize(p, w), w, a)
    else:
        with pytest.raises(MappingError, match="iterates only"):
            validate_pmapping(normalize(p, w), w, a)


def test_legal_pmapping_passes():
    w, a = workloads.load(MM), arch_specs.load(TPU_LIKE)
    validate_pmapping(normalize(Pmapping("Z", GOOD_Z), w), w, a)


def test_tiles_must_divide_and_bound_one_loops_are_dropped():
    w = workloads.load(MM)
    with pytest.raises(MappingError, match=r"pmappings.Z\[1\]: tile 3 of m does not divide its extent 8"):
        normalize(Pmapping("Z", (S("DRAM", ("A",)), L("m", 3), C("MAC"))), w)
    p = normalize(Pmapping("Z", (S("DRAM", ("A",)), L("m", 8), L("n", 2), C("MAC"))), w)
    assert p.loops == (L("n", 2),)


def test_fused_loops_must_index_the_shared_tensor():
    """A reduced loop above the producer's on-chip backing of Z would mean partial sums."""
    w, a = workloads.load(MM), arch_specs.load(TPU_LIKE)
    bad = Pmapping("Z", (S("DRAM", ("A", "W")), L("k", 2), S("GLB", ("Z",)), C("MAC")))
    with pytest.raises(MappingError, match=r"Z\[2\]: loop over k above the backing of shared tensor Z"):
        validate_pmapping(bad, w, a)
    ok = Pmapping("Z", (S("DRAM", ("A", "W")), L("m", 2), S("GLB", ("Z",)), C("MAC")))
    validate_pmapping(ok, w, a)


def test_mapping_with_incompatible_shared_tensor_is_rejected():
    w, a, m = mvm_chain(), arch_specs.load(SIMPLE), fig2_mapping()
    pb = Pmapping("B", (S("DRAM", ("WB", "B")), L("nA", 4), S("GlobalBuffer", ("A",)),
                        S("GlobalBuffer", ("B", "WB")), C("MAC")))
    with pytest.raises(MappingError, match="incompatible with A on shared tensor A"):
        evaluate(Mapping({"A": m["A"], "B": pb}, ("A", "B")), w, a)


def test_mapping_order_must_be_topological():
    w, a, m = mvm_chain(), arch_specs.load(SIMPLE), fig2_mapping()
    with pytest.raises(MappingError, match="A runs before|B runs before"):
        evaluate(Mapping(m.pmappings, ("B", "A")), w, a)


def test_pmapping_of_a_consumer_evaluates_alone():
    """One pmapping evaluated on its own: an intermediate it reads is fused iff its backing
    in that pmapping is below the top (no producer pmapping to ask)."""
    w, a = workloads.load("matmul_chain", length=2, M=8, big=16, small=8), arch_specs.load("simple")
    unfused = Pmapping("T2", (S("DRAM", ("T1", "T2", "W2")), C("MAC")))
    fused = Pmapping("T2", (S("DRAM", ("T2", "W2")), S("GlobalBuffer", ("T1",)), C("MAC")))
    assert evaluate(unfused, w, a).fused_tensors == ()
    assert evaluate(fused, w, a).fused_tensors == ("T1",)
