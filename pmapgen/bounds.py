"""Lower bounds on the energy a partial pmapping's continuations can reach (branch and
bound in the prefix search; docs/pmapgen.md, "Energy budgets").

A pmapping whose energy exceeds a budget B cannot be part of any mapping better than one
of total energy B (energy is a sum over Einsums of non-negative terms, ffm.search), so
the prefix search may drop a partial pmapping once a lower bound on every completion's
energy exceeds B. The bound is what it has accumulated, plus the compute's energy, plus
for each tensor the cheaper of:

- no further node: the compute reads (writes) it at its innermost node, once per
  operation divided by its spread so far times the most the fanouts that may still get
  spatial loops can add (`looptree.model.leaf_counts`; a fanout's spatial loops are placed
  as one group);
- a further node at a candidate level: its link moves at least this point's tile, once
  per fill, per instance (`looptree.model.link_counts` with this point's values and no
  partial sums). Loops placed below split the tile by at least as much as they add fills
  or instances (fills grow with every indexing temporal loop, instances with every
  spatial one), and a spatial loop that multicasts (reduces) the tensor adds as much to
  the instances as to the spread, so neither the moved values nor the parent's accesses
  can fall below these.

Later nodes of the chain add non-negative terms, so dropping them keeps a lower bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from arch.model import Arch
from looptree.model import leaf_counts, link_counts
from workloads.model import Einsum, Workload


@dataclass(frozen=True)
class EnergyFloor:
    """What the bound of one Einsum on one compute unit needs besides a partial pmapping."""
    einsum: Einsum
    bits: dict  # tensor -> bits per value
    ops: int
    compute_pJ: float  # the compute's energy (every completion pays it)
    spread: dict  # fanout level index -> tensor -> most multicast (inputs) or reduction (output) it offers
    energy: dict  # (kind, level) -> pJ per bit


def energy_floor_of(einsum: Einsum, workload: Workload, arch: Arch, unit: str) -> EnergyFloor:
    path = arch.path(unit)
    ops = math.prod(workload.rank_sizes[r] for r in einsum.rank_variables)
    spread = {k: {t: math.prod(d.size for d in m.fanout if (d.reduce if einsum.is_output(t) else d.multicast))
                  for t in einsum.tensors} for k, m in enumerate(path) if m.fanout}
    energy = {(kind, m.name): (m.read_energy if kind == "read" else m.write_energy)
              for m in path for kind in ("read", "write")}
    return EnergyFloor(einsum, {t: workload.tensors[t].bits for t in einsum.tensors}, ops,
                       ops * arch.compute(unit).energy, spread, energy)


def energy_floor(f: EnergyFloor, cols: dict, inner: dict, candidates: dict, path: tuple[str, ...],
                 placed: frozenset) -> np.ndarray:
    """Per row of `cols` (the prefix search's columns), a lower bound on the energy of every
    completion. `inner`: tensor -> level index of its last node, for tensors that have
    one; `candidates`: tensor -> level indices its next node may use;
    `placed`: fanout levels that can get no more spatial loops (their group is placed,
    or a storage node sits at or below them). A tensor with no node yet adds its leaf
    accesses at the cheapest level at or below its first candidate (its innermost node
    will be at one of them)."""
    e = f.einsum
    spread = {t: math.prod(by[t] for k, by in f.spread.items() if k not in placed) for t in e.tensors}
    out = cols["energy"] + f.compute_pJ
    for t in e.tensors:
        out_t = e.is_output(t)
        pj = lambda counts: sum(amount * f.bits[t] * f.energy[(kind, lv)] for kind, lv, amount in counts)
        between = cols[f"b:{t}"]
        if t not in inner:
            if candidates.get(t):
                out = out + reduce(np.minimum, [pj([leaf_counts(out_t, path[k], f.ops, between * spread[t])])
                                                for k in range(min(candidates[t]), len(path))])
            continue
        k = inner[t]
        best = pj([leaf_counts(out_t, path[k], f.ops, between * spread[t])])
        if candidates.get(t):
            values = math.prod(cols[f"e:{r}"] for r in e.use(t).ranks)
            fills = cols[f"f:{t}"]
            for c in candidates[t]:
                best = np.minimum(best, pj(link_counts(out_t, path[c], path[k], values, fills, fills,
                                                       cols["inst"], between)))
        out = out + best
    return out
