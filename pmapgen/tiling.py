"""A lower bound on an Einsum's energy from nested residency boxes (docs/mapper.md, "Step 20"
and "Step 21"): what capacity forces two tensors to pay together, which no per-tensor term
of `pmapgen.bounds` sees while no loop is placed.

The model's counts, read as boxes. A storage node x of tensor t moves `fills x instances x
tile` values into its level; that is ops / vol(B_x), where x's residency box B_x holds, for
each rank variable t lacks, its per-instance extent at x times the temporal loops over it
between t's last indexing temporal loop above x and x (tested against the interpreter:
`tests/test_model_vs_interpreter.py`). The parent reads those values divided by the
multicast (or reduction) of the spatial loops between them, so both ends of the link are
at least ops / vol(B'_x), with B'_x the box times those spatial loops.

The coupling. x's span is the loops below t's last indexing temporal loop above x; spans
are suffixes of one loop nest, so of two nodes one's span lies within the other's. If x's
span lies within y's (y a node of tensor u), every temporal loop of x's span over a rank
variable r in u but not t lies below y (one between y's own last indexing loop and y
would index u), so B'_x[r] is at most y's per-instance extent of r, times the spatial
loops over r that the mapspace's rules (`looptree.validate`) may put in B'_x but not
below y: those of fanouts between the two levels, and those that multicast between x's
parent and x above y's level. With the tiles of each level's nodes fitting its capacity
together, the least over every order of spans and every tile of the nodes at levels too
small for every tensor whole is a lower bound. Spans of equal depth satisfy both orders;
nodes at levels that hold everything, and every further constraint the rules impose, are
left out, which only lowers the bound. The chains are every subset of each tensor's
allowed levels below each backing it may use (a superset of what the rules allow), and
each link's other end and the leaf take their least (`looptree.model.link_counts`,
`leaf_counts`: the model stays the one source of counts).

Each link also moves every value at least once. The enumeration is exhaustive over the
divisors of each class of rank variables (those indexing the same tensors merged: a
divisor of their product covers every product of their divisors; those indexing every
tensor drop out, since no box lacks them and their tiles only take capacity), so it is
bounded by `max_evaluations`; past it the bound is not computed (None).

Used where a search starts (`pmapgen.prefixes`): `energy_lower_bound` and `part_floor`
take the higher of this and the per-tensor floor, and a budgeted search whose budget is
below it on a compute unit returns at once, complete, with nothing there (a keyed
search of the energy proof whose key cannot get under its budget, `ffm.refine`).
"""
from __future__ import annotations

import math
from functools import lru_cache
from itertools import permutations, product

import numpy as np

from arch.model import Arch
from looptree.model import leaf_counts, link_counts
from pmapgen.capacity import capacity_unit
from pmapgen.constraints import Constraints
from pmapgen.templates import space
from workloads.model import Einsum, Workload

MAX_EVALUATIONS = 5_000_000  # a few hundred MB of grids at most


def _divisors(n: int) -> np.ndarray:
    return np.array([d for d in range(1, n + 1) if n % d == 0], dtype=np.int64)


def tiling_lower_bound(einsum: str, workload: Workload, arch: Arch, unit: str,
                       constraints: Constraints | None = None,
                       max_evaluations: int = MAX_EVALUATIONS) -> float | None:
    """A lower bound (pJ) on the energy of every pmapping of `einsum` on `unit` within
    `constraints` (module docstring; of the constraints only the backing levels they allow,
    including those a compatibility key fixes, narrow it), or None when its enumeration
    would exceed `max_evaluations`. Cached: keyed searches ask it thousands of times."""
    e = workload.einsum(einsum)
    c = constraints or Constraints()
    sp = space(e, workload, unit, arch, c)
    path = arch.path(unit)
    fixed = {t: level for t, (level, _) in c.key[0]} if c.key is not None else {}
    fixed.update({t: level for t, (level, _) in c.tensor_keys.items()})
    backings = tuple(tuple(k for k in sp.backings[t] if t not in fixed or path[k].name == fixed[t])
                     for t in e.tensors)
    return _bound(e, tuple(workload.rank_sizes[r] for r in e.rank_variables),
                  tuple(workload.tensors[t].bits for t in e.tensors), arch, unit,
                  tuple(sp.allowed[t] for t in e.tensors), backings, max_evaluations)


@lru_cache(maxsize=4096)
def _bound(e: Einsum, sizes: tuple, bits_: tuple, arch: Arch, unit: str, allowed_: tuple, backings_: tuple,
           max_evaluations: int) -> float | None:
    path = arch.path(unit)
    tensors = list(e.tensors)
    size = dict(zip(e.rank_variables, sizes))
    allowed = dict(zip(tensors, allowed_))
    backings = dict(zip(tensors, backings_))
    ops = math.prod(size[r] for r in e.rank_variables)
    bits = dict(zip(tensors, bits_))
    volume = {t: math.prod(size[r] for r in e.use(t).ranks) for t in tensors}
    pj = {(kind, m.name): (m.read_energy if kind == "read" else m.write_energy) for m in path
          for kind in ("read", "write")}

    def energy(t: str, accesses) -> float:
        return sum(pj[kind, level] * n * bits[t] for kind, level, n in accesses)

    def weight(k: int, t: str) -> int:  # what one value of t takes of level k's capacity
        return 1 if capacity_unit(arch, path[k].name)[0] == "values" else bits[t]

    capacity = {k: capacity_unit(arch, m.name)[1] for k, m in enumerate(path)}
    binding = {k for k in range(1, len(path))
               if sum(volume[t] * weight(k, t) for t in tensors if k in allowed[t]) > capacity[k]}

    # rank classes: rank variables (of size > 1) indexing the same tensors, unless every tensor
    classes: dict[frozenset, list[str]] = {}
    for r in e.rank_variables:
        owners = frozenset(t for t in tensors if e.indexes(r, t))
        if size[r] > 1 and len(owners) < len(tensors):
            classes.setdefault(owners, []).append(r)
    keys = list(classes)
    class_size = [math.prod(size[r] for r in classes[c]) for c in keys]

    def spread(t: str, k: int) -> int:
        """The most multicast (inputs) or reduction (outputs) of t by level k's dims."""
        return math.prod(d.size for d in path[k].fanout if (d.reduce if e.is_output(t) else d.multicast))

    def factor(t: str, kx: int, ky: int, c: int) -> int:
        """How far B'_x may exceed y's extent over class c (x of t at level kx, y at ky): the
        dims that may run loops over c's rank variables below x but not below y, and those
        multicasting (reducing) x's link above y. A dim splits the class by its size at most."""
        ranks = classes[keys[c]]
        out = 1
        for k in range(1, max(kx, ky) + 1):
            for d in path[k].fanout:
                if not any(d.allows(e, [r]) for r in ranks):
                    continue
                if kx < k <= ky or (k <= min(kx, ky) and (d.reduce if e.is_output(t) else d.multicast)):
                    out *= d.size
        return out

    # each tensor's chains: per set of its binding-level nodes, (those levels, per node the
    # energy per value it moves, the rest's least energy)
    ways: dict[str, dict[tuple, list[tuple[np.ndarray, float]]]] = {t: {} for t in tensors}
    for t in tensors:
        out = e.is_output(t)
        for b in backings[t]:
            below = [k for k in allowed[t] if k > b]
            for chosen in product((False, True), repeat=len(below)):
                chain = [b] + [k for k, c in zip(below, chosen) if c]
                coupled = tuple(k for k in chain if k in binding)
                coef = np.zeros(len(coupled))
                const = 0.0
                for parent, child in zip(chain, chain[1:]):
                    per_value = energy(t, link_counts(out, path[child].name, path[parent].name, 1, 1, 1, 1, 1))
                    if child in binding:
                        coef[coupled.index(child)] += per_value
                    else:
                        const += per_value * volume[t]
                last = chain[-1]
                below_last = math.prod(spread(t, k) for k in range(last + 1, len(path)))
                const += energy(t, [leaf_counts(out, path[last].name, ops, 1)]) / below_last
                ways[t].setdefault(coupled, []).append((coef, const))
    compute = ops * arch.compute(unit).energy

    def domains_of(z) -> tuple[list, list]:
        """The coupled nodes of a choice z (per tensor, its binding-level nodes), and per node
        and class the extents its tile may have (alone within its level)."""
        nodes = [(t, k) for t, levels in zip(tensors, z) for k in levels]
        domains = []
        for t, k in nodes:
            most = capacity[k] // weight(k, t)
            domains.append([divisors[c][divisors[c] <= most] if t in keys[c] else np.ones(1, np.int64)
                            for c in range(len(keys))])
        return nodes, domains

    divisors = [_divisors(n) for n in class_size]
    choices = list(product(*(list(ways[t]) for t in tensors)))
    if sum(math.prod(len(d) for doms in domains_of(z)[1] for d in doms) * math.factorial(len(domains_of(z)[0]))
           for z in choices) > max_evaluations:
        return None
    best = math.inf
    for z in choices:
        nodes, domains = domains_of(z)
        shape = [len(d) for doms in domains for d in doms]
        grids = np.meshgrid(*[d for doms in domains for d in doms], indexing="ij") if nodes else []
        ext = [[grids[i * len(keys) + c].ravel() for c in range(len(keys))] for i in range(len(nodes))]
        fits = np.ones(math.prod(shape), dtype=bool)
        for k in {k for _, k in nodes}:
            used = sum(math.prod(ext[i], start=np.ones(len(fits), np.int64)) * weight(k, t)
                       for i, (t, kk) in enumerate(nodes) if kk == k)
            fits &= used <= capacity[k]
        if nodes and not fits.any():
            continue
        ext = [[x[fits] for x in row] for row in ext]
        n_rows = int(fits.sum()) if nodes else 1
        for order in permutations(range(len(nodes))):
            moved = []
            for pos, i in enumerate(order):
                t, kx = nodes[i]
                vol = np.ones(n_rows)
                for c in range(len(keys)):
                    if t in keys[c]:
                        continue
                    box = np.full(n_rows, float(class_size[c]))
                    for j in order[:pos]:
                        u, ky = nodes[j]
                        if u != t and u in keys[c]:
                            box = np.minimum(box, ext[j][c] * factor(t, kx, ky, c))
                    vol = vol * box
                moved.append((i, ops / vol))
            by_node = dict(moved)
            total = np.full(n_rows, compute)
            for t, levels in zip(tensors, z):
                idx = [nodes.index((t, k)) for k in levels]
                least = np.full(n_rows, np.inf)
                for coef, const in ways[t][levels]:
                    cost = np.full(n_rows, const)
                    for a, i in zip(coef, idx):
                        cost = cost + a * np.maximum(by_node[i], volume[t])
                    least = np.minimum(least, cost)
                total = total + least
            best = min(best, float(total.min()))
    return best
