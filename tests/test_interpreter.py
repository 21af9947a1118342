"""Hand-computed access counts for the reference interpreter (docs/semantics.md §3).

Every expected number is derived in a comment. Notation: `for r/t` is a temporal loop over
rank variable r with tile t; `S-for r/t @X` a spatial loop on fanout dim X. Loops not
written down are the implicit tile-1 loops above the compute leaf.
"""
from __future__ import annotations

import pytest

from arch.model import Arch, ComputeUnit, FanoutDim, Memory
from looptree.counts import AccessCounts
from looptree.interpreter import interpret
from looptree.nodes import Compute, Loop, Pmapping, Storage
from workloads.model import Einsum, Tensor, TensorUse, Workload


# --------------------------------------------------------------------------- builders


def workload(expr: dict[str, tuple[str, ...]], output: str, sizes: dict[str, int],
             unit: str | None = None) -> Workload:
    """One-Einsum workload; `expr` maps tensor -> rank variables, `output` names the output."""
    uses = {t: TensorUse(t, ranks) for t, ranks in expr.items()}
    inputs = tuple(u for t, u in uses.items() if t != output)
    einsum = Einsum(output, uses[output], inputs, unit)
    tensors = {t: Tensor(t, tuple(sizes[r] for r in ranks), 8,
                         "output" if t == output else "input")
               for t, ranks in expr.items()}
    return Workload("test", (einsum,), tensors, sizes)


def matmul(m: int, k: int, n: int) -> Workload:
    """Z[m,n] = A[m,k] * B[k,n]."""
    return workload({"A": ("m", "k"), "B": ("k", "n"), "Z": ("m", "n")}, "Z",
                    {"m": m, "k": k, "n": n})


def arch(fanout: tuple[FanoutDim, ...] = ()) -> Arch:
    """DRAM + Buffer (with `fanout`) + a MAC and a vector unit under the buffer."""
    return Arch("test", 1e9, (Memory("DRAM"), Memory("Buffer", fanout=fanout)),
                (ComputeUnit("MAC", einsums=("mac",)), ComputeUnit("VEC", einsums=("vector",))))


def pm(einsum: str, *nodes) -> Pmapping:
    return Pmapping(einsum, tuple(nodes))


def counts(c: AccessCounts) -> dict[tuple[str, str, str], int]:
    return c.nonzero()


def R(level: str, tensor: str) -> tuple[str, str, str]:
    return (level, tensor, "reads")


def W(level: str, tensor: str) -> tuple[str, str, str]:
    return (level, tensor, "writes")


DRAM_ALL = Storage("DRAM", ("A", "B", "Z"))
MAC = Compute("MAC")


# --------------------------------------------------------------------------- (a)


def test_matmul_a_reused_b_refetched():
    # M=4, K=3, N=2.  DRAM[A,B,Z]; for m/2; for n/1; Buffer[A,B,Z]; (k 3, m 2 implicit)
    # A at Buffer: tile id (m), tile 2x3=6 values. Refilled when m changes: 2 fills
    #   -> DRAM reads A 12 (= M*K, A read once), Buffer writes A 12.
    # B at Buffer: tile id (n), tile 3x1=3. n changes at every (m,n): 2*2=4 fills
    #   -> DRAM reads B 12 (= 2*K*N: B re-fetched once per m tile), Buffer writes B 12.
    # Z at Buffer: tile id (m,n), tile 2x1=2, 4 distinct tiles, never revisited:
    #   4 write-backs (3 on refill, 1 at the end): Buffer reads Z 8, DRAM writes Z 8; no psum.
    # Leaf: ops = 4*3*2 = 24; reads A, B at Buffer 24 each; 24 updates of Z at Buffer.
    p = pm("Z", DRAM_ALL, Loop("m", 2), Loop("n", 1), Storage("Buffer", ("A", "B", "Z")), MAC)
    c = interpret(p, matmul(4, 3, 2), arch())
    assert c.ops == 24
    assert counts(c) == {
        R("DRAM", "A"): 12, W("Buffer", "A"): 12, R("Buffer", "A"): 24,
        R("DRAM", "B"): 12, W("Buffer", "B"): 12, R("Buffer", "B"): 24,
        W("Buffer", "Z"): 24, R("Buffer", "Z"): 8, W("DRAM", "Z"): 8,
    }


def test_backing_only_tensor_read_by_leaf_every_op():
    # M=2, K=2, N=2. DRAM[A,B,Z]; Buffer[B,Z]: A is kept only in DRAM, so the leaf reads A
    # there at every op (no implicit register): DRAM reads A = ops = 8.
    # B: tile id () at Buffer, tile 4 -> one fill: DRAM reads 4, Buffer writes 4.
    # Z: one tile of 4, written back once at the end: Buffer reads 4, DRAM writes 4.
    p = pm("Z", DRAM_ALL, Storage("Buffer", ("B", "Z")), MAC)
    c = interpret(p, matmul(2, 2, 2), arch())
    assert counts(c) == {
        R("DRAM", "A"): 8,
        R("DRAM", "B"): 4, W("Buffer", "B"): 4, R("Buffer", "B"): 8,
        W("Buffer", "Z"): 8, R("Buffer", "Z"): 4, W("DRAM", "Z"): 4,
    }


# --------------------------------------------------------------------------- (b)


def test_output_partial_sums():
    # M=2, K=3, N=2. DRAM[A,B,Z]; for k/1; for m/1; Buffer[A,B,Z]; (n 2 implicit)
    # Z at Buffer: tile id (m), tile 1x2=2. Visit order m0 m1 | m0 m1 | m0 m1 (k=0,1,2):
    #   6 fills, the first 2 fresh (start at zero), 4 revisits -> psum reads:
    #   DRAM reads Z 4*2=8, Buffer writes Z 8 (psum) ; write-backs: 5 on refill + 1 at the
    #   end = 6 -> Buffer reads Z 12, DRAM writes Z 12.
    # A: tile id (k,m), tile 1 -> 6 fills: DRAM reads 6, Buffer writes 6.
    # B: tile id (k), tile 1x2=2 -> 3 fills: DRAM reads 6, Buffer writes 6.
    # Leaf: ops 12 -> Buffer reads A 12, B 12; Buffer writes Z 12 (+8 psum = 20).
    p = pm("Z", DRAM_ALL, Loop("k", 1), Loop("m", 1), Storage("Buffer", ("A", "B", "Z")), MAC)
    c = interpret(p, matmul(2, 3, 2), arch())
    assert c.ops == 12
    assert counts(c) == {
        R("DRAM", "A"): 6, W("Buffer", "A"): 6, R("Buffer", "A"): 12,
        R("DRAM", "B"): 6, W("Buffer", "B"): 6, R("Buffer", "B"): 12,
        R("DRAM", "Z"): 8, W("Buffer", "Z"): 20, R("Buffer", "Z"): 12, W("DRAM", "Z"): 12,
    }


def test_reduced_loop_below_output_node_no_psum():
    # Same shape, k moved below the buffer: DRAM[A,B,Z]; for m/1; Buffer[A,B,Z]; for k/1.
    # Z tile id (m): 2 fresh fills, 2 write-backs of 2 values: Buffer reads 4, DRAM writes 4.
    # A: tile id (m), tile 1x3: 2 fills -> 6. B: tile id (), tile 3x2=6: 1 fill -> 6.
    p = pm("Z", DRAM_ALL, Loop("m", 1), Storage("Buffer", ("A", "B", "Z")), Loop("k", 1), MAC)
    c = interpret(p, matmul(2, 3, 2), arch())
    assert counts(c) == {
        R("DRAM", "A"): 6, W("Buffer", "A"): 6, R("Buffer", "A"): 12,
        R("DRAM", "B"): 6, W("Buffer", "B"): 6, R("Buffer", "B"): 12,
        W("Buffer", "Z"): 12, R("Buffer", "Z"): 4, W("DRAM", "Z"): 4,
    }


# --------------------------------------------------------------------------- (c)


@pytest.mark.parametrize("multicast, dram_a", [(True, 4), (False, 8)])
def test_multicast_into_buffer(multicast: bool, dram_a: int):
    # M=K=N=2, Buffer fanout X=2. DRAM[A,B,Z]; S-for n/1 @X; Buffer[A,B,Z]; (m, k implicit)
    # Two Buffer instances (n=0, n=1), each filled once.
    # A (does not depend on n): tile 2x2=4 per instance -> Buffer writes 2*4=8; DRAM reads
    #   4 with multicast (both instances ask for the same tile at the same moment), 8 without.
    # B: tile id (n), tile 2x1=2: DRAM reads 4, Buffer writes 4 (different tiles: no merge).
    # Z: tile id (n), tile 2: written back at the end per instance: Buffer reads 4, DRAM 4.
    # Leaf: ops 8, no spatial loop between Buffer and leaf: Buffer reads A 8, B 8, writes Z 8.
    a = arch((FanoutDim("X", 2, multicast=multicast, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("n", 1, spatial="X"), Storage("Buffer", ("A", "B", "Z")), MAC)
    c = interpret(p, matmul(2, 2, 2), a)
    assert counts(c) == {
        R("DRAM", "A"): dram_a, W("Buffer", "A"): 8, R("Buffer", "A"): 8,
        R("DRAM", "B"): 4, W("Buffer", "B"): 4, R("Buffer", "B"): 8,
        W("Buffer", "Z"): 8, R("Buffer", "Z"): 4, W("DRAM", "Z"): 4,
    }


@pytest.mark.parametrize("multicast, dram_a", [(True, 4), (False, 8)])
def test_multicast_at_compute_leaf(multicast: bool, dram_a: int):
    # M=K=N=2. DRAM[A,B,Z]; S-for n/1 @X; Buffer[B,Z]; A stays in DRAM, so the spatial loop
    # lies between A's innermost node and the leaf. Each of the 4 temporal points (m,k)
    # has 2 ops (n=0,1) reading the same A[m,k]: one DRAM read with multicast (4 total),
    # two without (8 total). B and Z as in the previous test.
    a = arch((FanoutDim("X", 2, multicast=multicast, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("n", 1, spatial="X"), Storage("Buffer", ("B", "Z")), MAC)
    c = interpret(p, matmul(2, 2, 2), a)
    assert counts(c) == {
        R("DRAM", "A"): dram_a,
        R("DRAM", "B"): 4, W("Buffer", "B"): 4, R("Buffer", "B"): 8,
        W("Buffer", "Z"): 8, R("Buffer", "Z"): 4, W("DRAM", "Z"): 4,
    }


def test_multicast_does_not_merge_different_tiles():
    # M=K=N=2, fanout X=2 with multicast. DRAM[A,B,Z]; S-for m/1 @X; Buffer[A,B,Z].
    # A is indexed by m: the two instances want different rows -> DRAM reads A 2*2=4 (one
    # row of 2 each), B (not indexed by m) tile 4 multicast -> DRAM reads B 4, writes 8.
    a = arch((FanoutDim("X", 2, multicast=True, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("m", 1, spatial="X"), Storage("Buffer", ("A", "B", "Z")), MAC)
    c = counts(interpret(p, matmul(2, 2, 2), a))
    assert (c[R("DRAM", "A")], c[W("Buffer", "A")]) == (4, 4)
    assert (c[R("DRAM", "B")], c[W("Buffer", "B")]) == (4, 8)


# --------------------------------------------------------------------------- (d)


def test_spatial_reduction_with_partial_sums():
    # M=2, K=4, N=2, fanout X=2 (reduce). DRAM[A,B,Z]; for k/2; for m/1; S-for k/1 @X;
    # Buffer[A,B,Z]; (n implicit).
    # Z at Buffer: 2 instances (spatial k), tile id (m), tile 1x2=2. Per instance: 4 fills
    #   (k0=0: m0 m1 fresh; k0=1: m0 m1 revisited).
    #   Write-backs: 4 per instance -> Buffer reads 4*2*2=16; DRAM writes reduced across
    #   the 2 instances: 4*2=8.
    #   Psum reads: 2 revisits, once per reduction group: DRAM reads 2*2=4, Buffer writes 4.
    # A: tile id (k0, m, k_s), tile 1: 4 fills per instance, no merge (k indexes A):
    #   DRAM reads 8, Buffer writes 8.
    # B: tile id (k0, k_s), tile 1x2=2: 2 fills per instance: DRAM reads 8, Buffer writes 8.
    # Leaf: ops 16; Buffer reads A 16, B 16; Buffer writes Z 16 (+4 psum = 20).
    a = arch((FanoutDim("X", 2, multicast=True, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("k", 2), Loop("m", 1), Loop("k", 1, spatial="X"),
           Storage("Buffer", ("A", "B", "Z")), MAC)
    c = interpret(p, matmul(2, 4, 2), a)
    assert c.ops == 16
    assert counts(c) == {
        R("DRAM", "A"): 8, W("Buffer", "A"): 8, R("Buffer", "A"): 16,
        R("DRAM", "B"): 8, W("Buffer", "B"): 8, R("Buffer", "B"): 16,
        R("DRAM", "Z"): 4, W("Buffer", "Z"): 20, R("Buffer", "Z"): 16, W("DRAM", "Z"): 8,
    }


def test_spatial_reduction_at_compute_leaf():
    # M=K=N=2. DRAM[A,B,Z]; S-for k/1 @X; Buffer[A,B]; Z stays in DRAM, so the spatial
    # loop over the reduced k lies between Z's innermost node and the leaf.
    # 8 ops over 4 temporal points (m,n); at each, the 2 instances update the same Z[m,n]:
    # reduced on the way -> DRAM writes Z 4.
    # A: tile id (k), tile 2x1=2 per instance: DRAM reads 4 (k indexes A: no multicast).
    a = arch((FanoutDim("X", 2, multicast=True, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("k", 1, spatial="X"), Storage("Buffer", ("A", "B")), MAC)
    c = interpret(p, matmul(2, 2, 2), a)
    assert counts(c) == {
        R("DRAM", "A"): 4, W("Buffer", "A"): 4, R("Buffer", "A"): 8,
        R("DRAM", "B"): 4, W("Buffer", "B"): 4, R("Buffer", "B"): 8,
        W("DRAM", "Z"): 4,
    }


# --------------------------------------------------------------------------- (e)


def fusecu_bert(m: int = 4, k: int = 3, l: int = 3) -> Workload:
    """FuseCU's BERT matmul C[m,l] = A[m,k] * B[k,l], scaled down from 1024 x 768 x 768."""
    return workload({"A": ("m", "k"), "B": ("k", "l"), "C": ("m", "l")}, "C",
                    {"m": m, "k": k, "l": l})


@pytest.mark.parametrize("nodes", [
    # FuseCU Fig. 3 / Two-NRA: the A tile sits in the buffer while l iterates
    (Storage("DRAM", ("A", "B", "C")), Loop("m", 2), Storage("Buffer", ("A",)),
     Loop("l", 1), Storage("Buffer", ("B", "C")), Compute("MAC")),
    # the same counts with all three tiles kept under both loops
    (Storage("DRAM", ("A", "B", "C")), Loop("m", 2), Loop("l", 1),
     Storage("Buffer", ("A", "B", "C")), Compute("MAC")),
])
def test_fusecu_bert_two_nra(nodes):
    # M=4, K=3 (untiled), L=3, T_M=2, T_L=1: for m/2 (bound 2); for l/1 (bound 3).
    # A: tile id (m), tile T_M x K = 6, 2 fills -> DRAM reads 12 = M*K (once).
    # B: tile id (l), tile K x T_L = 3, refilled at every (m,l): 6 fills -> DRAM reads
    #   18 = 2*K*L (twice, M/T_M = 2).
    # C: tile id (m,l), tile 2, 6 distinct tiles, no psum -> DRAM writes 12 = M*L (once).
    # FuseCU eq. 3: MA = MKL/T_M + MK + ML = 18 + 12 + 12 = 42.
    # Leaf: ops 36 -> Buffer reads A 36, B 36, writes C 36; write-backs read C 12 at Buffer.
    c = interpret(pm("C", *nodes), fusecu_bert(), arch())
    assert counts(c) == {
        R("DRAM", "A"): 12, W("Buffer", "A"): 12, R("Buffer", "A"): 36,
        R("DRAM", "B"): 18, W("Buffer", "B"): 18, R("Buffer", "B"): 36,
        W("Buffer", "C"): 36, R("Buffer", "C"): 12, W("DRAM", "C"): 12,
    }
    dram = sum(n for (lv, _, _), n in counts(c).items() if lv == "DRAM")
    assert dram == 42


# --------------------------------------------------------------------------- (f)


def test_vector_copy():
    # Y[m,n] = X[m,n], M=2, N=3, on the vector unit. DRAM[X,Y]; for m/1; Buffer[X,Y].
    # X: tile 1x3=3, 2 fills -> DRAM reads 6, Buffer writes 6. Y: tile 3, 2 tiles written
    # back -> Buffer reads 6, DRAM writes 6. Leaf: 6 ops, Buffer reads X 6, writes Y 6.
    w = workload({"X": ("m", "n"), "Y": ("m", "n")}, "Y", {"m": 2, "n": 3})
    p = pm("Y", Storage("DRAM", ("X", "Y")), Loop("m", 1), Storage("Buffer", ("X", "Y")),
           Compute("VEC"))
    c = interpret(p, w, arch())
    assert c.ops == 6
    assert counts(c) == {
        R("DRAM", "X"): 6, W("Buffer", "X"): 6, R("Buffer", "X"): 6,
        W("Buffer", "Y"): 6, R("Buffer", "Y"): 6, W("DRAM", "Y"): 6,
    }


def test_vector_row_sum_partial_sums():
    # Y[m] = X[m,n], M=2, N=3. DRAM[X,Y]; for n/1; for m/1; Buffer[X,Y].
    # Y: tile id (m), tile 1: 6 fills (n outer), 2 fresh + 4 revisits -> DRAM reads 4,
    #   Buffer writes 4 (psum) + 6 (updates) = 10; write-backs 6 -> Buffer reads 6, DRAM 6.
    # X: tile id (n,m), tile 1: 6 fills -> DRAM reads 6, Buffer writes 6; leaf reads 6.
    w = workload({"X": ("m", "n"), "Y": ("m",)}, "Y", {"m": 2, "n": 3})
    p = pm("Y", Storage("DRAM", ("X", "Y")), Loop("n", 1), Loop("m", 1),
           Storage("Buffer", ("X", "Y")), Compute("VEC"))
    c = interpret(p, w, arch())
    assert counts(c) == {
        R("DRAM", "X"): 6, W("Buffer", "X"): 6, R("Buffer", "X"): 6,
        R("DRAM", "Y"): 4, W("Buffer", "Y"): 10, R("Buffer", "Y"): 6, W("DRAM", "Y"): 6,
    }


# --------------------------------------------------------------------------- others


def test_three_levels_intermediate_chain():
    # M=2, K=2, N=2; DRAM, GB, Reg. DRAM[A,B,Z]; GB[A,B,Z]; for m/1; for k/1; Reg[Z].
    # Z at GB: tile id (), tile 4, held throughout: one write-back at the end: GB reads 4,
    #   DRAM writes 4.
    # Z at Reg: tile id (m), tile 1x2=2, visit m0 m0 m1 m1 (k inner): 2 fresh fills, no
    #   psum; 2 write-backs into GB: Reg reads 4, GB writes 4 (+ 8 leaf updates at Reg).
    # A, B at GB: one fill of 4 each from DRAM; the leaf reads them at GB: 8 each.
    a = Arch("t3", 1e9, (Memory("DRAM"), Memory("GB"), Memory("Reg")), (ComputeUnit("MAC"),))
    p = pm("Z", DRAM_ALL, Storage("GB", ("A", "B", "Z")), Loop("m", 1), Loop("k", 1),
           Storage("Reg", ("Z",)), MAC)
    c = interpret(p, matmul(2, 2, 2), a)
    assert counts(c) == {
        R("DRAM", "A"): 4, W("GB", "A"): 4, R("GB", "A"): 8,
        R("DRAM", "B"): 4, W("GB", "B"): 4, R("GB", "B"): 8,
        W("Reg", "Z"): 8, R("Reg", "Z"): 4, W("GB", "Z"): 4, R("GB", "Z"): 4,
        W("DRAM", "Z"): 4,
    }


def test_spatial_loop_outside_temporal_loop():
    # M=K=N=2, fanout X=2 (multicast). DRAM[A,B,Z]; S-for n/1 @X; for m/1; Buffer[A,B,Z].
    # Instances run in lockstep: at temporal point m, both ask for A row m (tile 1x2=2):
    # multicast -> DRAM reads A 2 fills * 2 = 4, Buffer writes A 2 inst * 2 fills * 2 = 8.
    # B: tile id (n), tile 2, one fill per instance: 4 / 4.
    # Z: tile id (n, m), tile 1: 2 per instance -> 4 write-backs of 1: Buffer reads 4.
    a = arch((FanoutDim("X", 2, multicast=True, reduce=True),))
    p = pm("Z", DRAM_ALL, Loop("n", 1, spatial="X"), Loop("m", 1),
           Storage("Buffer", ("A", "B", "Z")), MAC)
    c = interpret(p, matmul(2, 2, 2), a)
    assert counts(c) == {
        R("DRAM", "A"): 4, W("Buffer", "A"): 8, R("Buffer", "A"): 8,
        R("DRAM", "B"): 4, W("Buffer", "B"): 4, R("Buffer", "B"): 8,
        W("Buffer", "Z"): 8, R("Buffer", "Z"): 4, W("DRAM", "Z"): 4,
    }


def test_ops_cover_full_iteration_space():
    # Loops that stop above tile 1 leave implicit tile-1 loops at the leaf: ops = M*K*N.
    p = pm("Z", DRAM_ALL, Loop("k", 2), MAC)
    assert interpret(p, matmul(3, 4, 5), arch()).ops == 60


# --------------------------------------------------------------------------- (g)


def test_max_points_guard():
    # 200^3 = 8e6 iteration points > 2e6 default: refused before stepping through anything.
    p = pm("Z", DRAM_ALL, Storage("Buffer", ("A", "B", "Z")), MAC)
    with pytest.raises(ValueError, match="max_points"):
        interpret(p, matmul(200, 200, 200), arch())
    with pytest.raises(ValueError, match="max_points=7"):
        interpret(p, matmul(2, 2, 2), arch(), max_points=7)
    assert interpret(p, matmul(2, 2, 2), arch(), max_points=8).ops == 8


def test_bad_tile_is_reported():
    p = pm("Z", DRAM_ALL, Loop("m", 3), MAC)
    with pytest.raises(ValueError, match="tile 3"):
        interpret(p, matmul(4, 2, 2), arch())
