"""Hypothesis strategies: random small Einsums, archs and legal pmappings.

A legal pmapping is drawn as a random linear extension of the placement constraints of
docs/semantics.md §2 (top-level storage first, each tensor's storage in level order,
a fanout's spatial loops between the levels above and below it, each rank's loops in
tile-chain order), so every pmapping of the mapspace can be drawn.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

import arch as arch_specs
import workloads
from looptree.nodes import Compute, Loop, Pmapping, Storage

SIZES = (1, 2, 3, 4, 6, 8)
LETTERS = "abcd"


def two_levels(l0_bandwidth: str, l1_capacity: str, l1_bandwidth: str, name: str = "two") -> dict:
    """An arch spec where energy and latency pull apart: a fast, costly backing level L0
    over a small buffer L1 that is cheaper (a tenth per bit) and, as drawn, slower."""
    return {"name": name, "clock": "1 GHz", "levels": [
        {"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
         "bandwidth": l0_bandwidth},
        {"memory": "L1", "capacity": l1_capacity, "read_energy": "0.1 pJ/bit", "write_energy": "0.1 pJ/bit",
         "bandwidth": l1_bandwidth},
        {"compute": "MAC", "energy": "1 pJ", "throughput": 1}]}


@st.composite
def einsum_specs(draw, max_inputs: int = 3, max_ranks: int = 4, name: str = "Z",
                 sizes=SIZES, input_prefix: str = "T", reduced: bool = False) -> dict:
    """A one-Einsum workload spec dict: 1-3 inputs, 2-4 rank variables, sizes up to 8;
    `reduced=True` makes the last rank variable a reduced one (partial sums)."""
    n_ranks = draw(st.integers(2, max_ranks))
    ranks = list(LETTERS[:n_ranks])
    n_inputs = draw(st.integers(1, max_inputs))
    subsets = st.lists(st.sampled_from(ranks), min_size=1, max_size=n_ranks, unique=True)
    out = draw(subsets)
    ins = [draw(subsets) for _ in range(n_inputs)]
    if reduced:
        out = [r for r in out if r != ranks[-1]] or [ranks[0]]
        ins[0] = ins[0] if ranks[-1] in ins[0] else ins[0] + [ranks[-1]]
    missing = [r for r in ranks if r not in out and not any(r in i for i in ins)]
    ins[0] = ins[0] + missing
    rank_sizes = {r: draw(st.sampled_from(sizes)) for r in ranks}
    rhs = " * ".join(f"{input_prefix}{k}[{','.join(i)}]" for k, i in enumerate(ins))
    return {"name": "random", "rank_sizes": rank_sizes, "bits": draw(st.sampled_from([1, 8])),
            "einsums": [f"{name}[{','.join(out)}] = {rhs}"]}


@st.composite
def arch_specs_(draw, min_levels: int = 2, max_levels: int = 4, fanouts: bool = True,
                capacities=None, bandwidths: bool = False) -> dict:
    """An arch spec dict: 2-4 memory levels, fanouts up to 4 with multicast/reduce on or off;
    `bandwidths`: each level's ports (shared, read, write) limited or not, at rates that
    make port times and compute times of small Einsums comparable (`port_limits`)."""
    n = draw(st.integers(min_levels, max_levels))
    levels = [{"memory": "L0", "capacity": "inf", "read_energy": "1 pJ/bit", "write_energy": "2 pJ/bit",
               **(draw(port_limits()) if bandwidths else {})}]
    for k in range(1, n):
        level = {"memory": f"L{k}",
                 "capacity": draw(st.sampled_from(capacities)) if capacities else "inf",
                 "read_energy": f"{draw(st.sampled_from([0.1, 0.3, 0.5]))} pJ/bit",
                 "write_energy": f"{draw(st.sampled_from([0.1, 0.2, 0.6]))} pJ/bit",
                 **(draw(port_limits()) if bandwidths else {})}
        if fanouts == "always" or (fanouts and draw(st.booleans())):
            dim = {"size": draw(st.integers(2, 4)), "multicast": draw(st.booleans()), "reduce": draw(st.booleans())}
            iterates = draw(st.sampled_from(["any", "any"] + ["multicast"] * dim["multicast"]
                                            + ["reduced"] * dim["reduce"]))
            if iterates != "any":
                dim["iterates"] = iterates
            level["fanout"] = {f"D{k}": dim}
        levels.append(level)
    levels.append({"compute": "MAC", "energy": "1 pJ", "throughput": 1})
    return {"name": "random", "clock": "1 GHz", "levels": levels}


@st.composite
def port_limits(draw) -> dict:
    """Some of a level's port bandwidths (at 8 bits a value, 1 GB/s moves a value a ns, as
    fast as one MAC at 1 GHz works)."""
    rates = [None, None, "0.25 GB/s", "1 GB/s", "4 GB/s"]
    got = {key: draw(st.sampled_from(rates)) for key in ("bandwidth", "read_bandwidth", "write_bandwidth")}
    return {k: v for k, v in got.items() if v is not None}


def _divisor_chain(draw, size: int, max_loops: int) -> list[int]:
    """A strictly decreasing chain of tiles, each dividing the previous extent."""
    chain, extent = [], size
    for _ in range(max_loops):
        proper = [d for d in range(1, extent) if extent % d == 0]
        if not proper or draw(st.integers(0, 2)) == 0:  # continue with probability 2/3
            break
        extent = draw(st.sampled_from(proper))
        chain.append(extent)
    return chain


@st.composite
def pmappings(draw, workload, arch, einsum: str | None = None, unit: str = "MAC",
              max_loops_per_rank: int = 2) -> Pmapping:
    """A random legal pmapping of one Einsum (as a linear extension of the constraints)."""
    e = workload.einsum(einsum or workload.einsums[0].name)
    path = [m.name for m in arch.path(unit)]
    top = path[0]
    items: list[tuple] = []  # ("S", tensor, level_index) | ("L", rank, tile, dim_or_None, chain_pos)
    for t in e.tensors:
        items.append(("S", t, 0))
        for k in range(1, len(path)):
            if draw(st.booleans()):
                items.append(("S", t, k))
    dims = [(k, d) for k, m in enumerate(arch.path(unit)) for d in m.fanout]
    room = {d.name: d.size for _, d in dims}
    for r in e.rank_variables:
        for pos, tile in enumerate(_divisor_chain(draw, workload.rank_sizes[r], max_loops_per_rank)):
            items.append(("L", r, tile, None, pos))
    # make some loops spatial, respecting fanout sizes and reduction legality
    # (a rank's chain must not go up the hierarchy, or no order satisfies the constraints)
    extents: dict[str, int] = dict(workload.rank_sizes)
    deepest: dict[str, int] = {}
    on_dim: dict[str, list[str]] = {}
    for idx, it in enumerate(items):
        if it[0] != "L":
            continue
        r, tile = it[1], it[2]
        bound = extents[r] // tile
        extents[r] = tile
        options = [(k, d) for k, d in dims if room[d.name] >= bound and k >= deepest.get(r, 0)
                   and d.allows(e, on_dim.get(d.name, []) + [r])]
        if options and draw(st.booleans()):
            k, d = draw(st.sampled_from(options))
            room[d.name] //= bound
            on_dim.setdefault(d.name, []).append(r)
            deepest[r] = k
            items[idx] = ("L", r, tile, (k, d.name), it[4])

    def before(a, b) -> bool:
        """Must item a precede item b?"""
        if a[0] == "S" and a[2] == 0:
            return not (b[0] == "S" and b[2] == 0)
        if a[0] == "S" and b[0] == "S":
            return a[1] == b[1] and a[2] < b[2]
        if a[0] == "L" and b[0] == "L":
            return a[1] == b[1] and a[4] < b[4]
        if a[0] == "S" and b[0] == "L" and b[3] is not None:
            return a[2] < b[3][0]
        if a[0] == "L" and a[3] is not None and b[0] == "S":
            return b[2] >= a[3][0]
        return False

    placed: list[tuple] = []
    remaining = list(items)
    while remaining:
        ready = [it for it in remaining if not any(before(o, it) for o in remaining if o is not it)]
        pick = ready[draw(st.integers(0, len(ready) - 1))]
        placed.append(pick)
        remaining.remove(pick)
    nodes = []
    for it in placed:
        if it[0] == "S":
            nodes.append(Storage(path[it[2]], (it[1],)))
        else:
            nodes.append(Loop(it[1], it[2], it[3][1] if it[3] else None))
    nodes.append(Compute(unit))
    return Pmapping(e.name, tuple(nodes))


@st.composite
def problems(draw, fanouts: bool | str = True, reduced: bool = False):
    """(workload, arch, pmapping) with a legal random pmapping; `fanouts="always"` gives every
    level below the top a fanout, `reduced=True` forces a reduced rank variable (partial sums)."""
    spec = draw(einsum_specs(reduced=reduced))
    w = workloads.load(spec)
    a = arch_specs.load(draw(arch_specs_(fanouts=fanouts)))
    p = draw(pmappings(w, a))
    return w, a, p


def iteration_points(workload, einsum: str) -> int:
    return math.prod(workload.rank_sizes[r] for r in workload.einsum(einsum).rank_variables)
