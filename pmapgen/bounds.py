"""Lower bounds on the energy a partial pmapping's continuations can reach (branch and
bound in the prefix search; docs/pmapgen.md, "Energy budgets").

A pmapping whose energy exceeds a budget B cannot be part of any mapping better than one
of total energy B (energy is a sum over Einsums of non-negative terms, ffm.search), so
the prefix search may drop a partial pmapping once a lower bound on every completion's
energy exceeds B. The bound is what it has accumulated, plus the compute's energy, plus
for each tensor the cheapest way down from its innermost node to the compute: a chain of
further nodes at increasing levels it may use (none skipping a level it must use), each
paying its link, ending in the leaf accesses at the last node.

- A link is the model's `looptree.model.link_counts` with this point's tile, fills and
  instances and no partial sums. Loops placed below split the tile by at least as much
  as they add fills or instances (fills grow with every indexing temporal loop,
  instances with every spatial one), and a spatial loop that multicasts (reduces) the
  tensor adds as much to the instances as to the spread, so neither the moved values nor
  the parent's accesses can fall below these. The first link divides by the spread since
  the innermost node; later ones (their parent is not placed yet) by nothing.
- The output's first link also moves its partial sums, (F - D) x instances x values
  over the spread (F fills, D distinct tiles: `link_counts`), read from the innermost
  node and written into the next (forty-third session). That count does not fall as
  loops are placed: a temporal loop over a rank variable the output has multiplies F and
  D by its bound and divides the tile by it, one over a rank it lacks leaves D and may
  only raise F (it counts in F once an indexing loop follows), and a spatial loop adds to
  the instances what it adds to the spread, or more. Where the next node's level forces
  a temporal loop over a rank variable the output has (the refetch below), the count is
  at least (time - D) x instances x values over the spread: just below that loop F is
  the whole time above it, and the loops between scale time, D, the tile and the
  instances as above. Later links' partial sums are left out (their fills are not known
  yet).
- The leaf is `looptree.model.leaf_counts`: once per operation divided by the spread
  below the last node, at most the spread since the innermost node (if it is the last)
  times what the fanouts below the last node's level that may still get spatial loops
  offer. A dim of such a fanout spreads a tensor only by loops over rank variables the
  tensor lacks (`looptree.model._spreads`) that the dim may run, and the spatial loops
  still to come over a rank variable split at most the extent a partial pmapping has
  left of it: each dim offers at most the least of its size and the product of those
  extents (forty-second session; at batch 1, Q's keyed search with I in DRAM within 1.1x
  its minimum kept 1.29 M rows before and 0.19 M after, the same 14,984 leading to a
  pmapping within it: docs/mapper.md, "Step 22").
- A tensor with no node yet starts at its on-chip backing (no link: its backing).
- Refetch a tile forces (eleventh session): a node at level c holds at most what c holds
  per instance, and the spatial loops still possible above c split a tile by at most the
  instances their fanouts offer. A point whose tile of t exceeds that product (its
  `_limit`) must reach c through a temporal loop indexing t, and every node after such a
  loop moves at least `time` x instances x values of the point: the loop's fills are the
  whole `time` above it, temporal loops indexing t cancel their bound out of the tile,
  and the others (those over ranks t lacks, already placed or to come) only add. So a
  link into a node at or after the first node past its limit counts those values
  (`refetched`) instead of fills x instances x values (`moved`): a weight whose
  register holds one value, under a loop over tokens, is read again per token tile.
  For the first link the room at c is also the row's own (forty-third session): what its
  nodes placed at c leave of the capacity (`floor_inputs`), since they hold their tiles
  while the new node holds its own.
- Capacity couples the tensors at levels too small for one tile of each (a 1-value
  register): every storage node holds at least one value while the compute runs, so the
  tensors with nodes there fit the capacity together. The bound is the least sum over
  the sets of tensors that fit of the cheapest ways down with the others kept out.

Every term is a lower bound of a non-negative term of every completion, so their sum is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, product

import numba
import numpy as np
# at import, not in `loop_step`: worker processes fork from a parent that has it, where each
# imported it again on its first loop step (0.6 s of every fresh worker's first search)
import sympy

from arch.model import Arch
from looptree.model import Above, _spreads, after_loop, leaf_counts, link_counts
from pmapgen.capacity import capacity_unit
from pmapgen.templates import Space
from workloads.model import Einsum, Workload


@dataclass(frozen=True, eq=False)  # hashed by identity: `_tails` caches per floor
class EnergyFloor:
    """What the bound of one Einsum on one compute unit needs besides a partial pmapping."""
    space: Space
    bits: dict  # tensor -> bits per value
    ops: int
    compute_pJ: float  # the compute's energy (every completion pays it)
    spread: dict  # fanout level index -> tensor -> most multicast (inputs) or reduction (output) it offers
    energy: dict  # (kind, level) -> pJ per bit
    tight: tuple  # (level index, capacity, {tensor: least tile}) of levels too small for one tile of each
    fanout: dict  # fanout level index -> instances it offers (the product of its dims' sizes)
    room: dict  # (level index, tensor) -> the most values of the tensor one instance of the level holds
    ranks: np.ndarray  # (tensor, rank variable) -> how often the rank variable indexes it (`_floor`)
    fan_levels: tuple  # the fanout levels' indices, in order: axis 0 of the two below
    dim_spread: np.ndarray  # (fanout level, dim, tensor) -> the dim's size if it multicasts (reduces) t, else 1
    dim_ranks: np.ndarray  # (fanout level, dim, tensor, rank variable) -> whether the dim may run a loop over
    #   it that multicasts (reduces) t: t lacks it. A spread is at most the extents left of those (`_floor`)
    held: tuple  # (level index, name, capacity in its unit) of each finite level below the top (`floor_inputs`)
    per_unit: dict  # (level index, tensor) -> the units of the level's capacity one value of t takes


def energy_floor_of(sp: Space, workload: Workload, arch: Arch) -> EnergyFloor:
    einsum, path = sp.einsum, arch.path(sp.unit)
    ops = math.prod(workload.rank_sizes[r] for r in einsum.rank_variables)
    spread = {k: {t: math.prod(d.size for d in m.fanout if (d.reduce if einsum.is_output(t) else d.multicast))
                  for t in einsum.tensors} for k, m in enumerate(path) if m.fanout}
    energy = {(kind, m.name): (m.read_energy if kind == "read" else m.write_energy)
              for m in path for kind in ("read", "write")}
    bits = {t: workload.tensors[t].bits for t in einsum.tensors}
    tight, room, held, per_unit = [], {}, [], {}
    for k, m in enumerate(path):
        unit, capacity = capacity_unit(arch, m.name)
        if k and capacity != math.inf:
            held.append((k, m.name, capacity))
        least = {t: (1 if unit == "values" else bits[t]) for t in einsum.tensors if k in sp.allowed[t]}
        if sum(least.values()) > capacity:
            tight.append((k, capacity, least))
        for t in einsum.tensors:
            room[k, t] = capacity if unit == "values" or capacity == math.inf else capacity // bits[t]
            per_unit[k, t] = 1 if unit == "values" else bits[t]
    fanout = {k: math.prod(d.size for d in m.fanout) for k, m in enumerate(path) if m.fanout}
    ranks = np.array([[einsum.use(t).ranks.count(r) for r in einsum.rank_variables] for t in einsum.tensors],
                     dtype=np.int64)
    fan_levels = tuple(sorted(fanout))
    n_dims = max((len(path[k].fanout) for k in fan_levels), default=1)
    dim_spread = np.ones((max(len(fan_levels), 1), n_dims, len(einsum.tensors)), np.int64)
    dim_ranks = np.zeros(dim_spread.shape + (len(einsum.rank_variables),), np.bool_)
    for a, k in enumerate(fan_levels):
        for b, d in enumerate(path[k].fanout):
            for c, t in enumerate(einsum.tensors):
                if d.reduce if einsum.is_output(t) else d.multicast:
                    dim_spread[a, b, c] = d.size
                    for r_i, r in enumerate(einsum.rank_variables):
                        dim_ranks[a, b, c, r_i] = _spreads(einsum, t, r, d) and d.allows(einsum, [r])
    return EnergyFloor(sp, bits, ops, ops * arch.compute(sp.unit).energy, spread, energy, tuple(tight), fanout,
                       room, ranks, fan_levels, dim_spread, dim_ranks, tuple(held), per_unit)


def floor_plan(f: EnergyFloor, inner: dict, candidates: dict, placed: frozenset) -> "_Plan":
    """What the floor of one prefix context needs besides the rows' columns, computed once
    per context. `inner`: tensor -> level index of its last node, for tensors that have
    one; `candidates`: tensor -> level indices its next node may use (a tensor with no
    node: its backing); `placed`: fanout levels that can get no more spatial loops (not
    in `pmapgen.templates.open_groups`: placed, at or above a storage node, or no longer
    reachable by the moves)."""
    return _plan(f, tuple(sorted(inner.items())), tuple(sorted((t, tuple(c)) for t, c in candidates.items())),
                 placed)


def floor_inputs(f: EnergyFloor, cols: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The columns a floor reads, per row: (integers: each rank variable's extent, each
    tensor's fills, each tensor's spread `between`, each tensor's distinct tiles (the
    product of the temporal bounds of its ranks: `looptree.model.storage_tile`'s D),
    instances, time; the energy so far; per finite level (`EnergyFloor.held`), the room
    its nodes so far leave in it, in its capacity's unit: loops do not change it, so a
    child's is its parent's)."""
    n = len(cols["energy"])
    names, products, held = _input_names(f)
    ints = np.empty((n, len(names)), dtype=np.int64)
    for j, name in enumerate(names):
        ints[:, j] = cols[name] if name else 0  # (an input's distinct tiles are not read: its partial sums are none)
    for j, ranks in products:
        d = cols[ranks[0]]
        for name in ranks[1:]:
            d = d * cols[name]
        ints[:, j] = d
    free = np.zeros((n, max(len(held), 1)))  # (one unread column when no level is finite)
    for i, (capacity, res, backing) in enumerate(held):
        np.subtract(capacity, cols[res], out=free[:, i])
        free[:, i] -= cols[backing]
    return ints, np.ascontiguousarray(cols["energy"], dtype=np.float64), free


@lru_cache(maxsize=256)
def _input_names(f: EnergyFloor) -> tuple:
    """`floor_inputs`' columns: per integer input its column's name ("" for 0, and for an
    output's distinct tiles, filled from `products`: (input, its rank variables' `t:`
    columns)); per finite level (`EnergyFloor.held`: capacity, the columns of what the row holds there:
    its deepest reservation, every node's tile, as `_Search._fits` reads it, and its
    backing tiles)."""
    e = f.space.einsum
    names = ([f"e:{r}" for r in e.rank_variables] + [f"f:{t}" for t in e.tensors] + [f"b:{t}" for t in e.tensors]
             + [""] * len(e.tensors) + ["inst", "time"])
    first = len(e.rank_variables) + 2 * len(e.tensors)
    products = tuple((first + i, tuple(f"t:{r}" for r in e.use(t).ranks)) for i, t in enumerate(e.tensors)
                     if e.is_output(t))
    last = len(e.rank_variables)
    held = tuple((capacity, f"res:{name}:{last}", f"backing:{name}") for _, name, capacity in f.held)
    return tuple(names), products, held


@dataclass(frozen=True)
class Step:
    """How the floor's integer inputs (`floor_inputs`) of a child follow from its parent's
    under a move's loops: input q of the child is the parent's input `source[q]` (-1: zero)
    times the product over loops l of bound_l ** `powers[q, l]` (negative: exact division).
    `terms`: the nonzero powers as (input, loop, power) rows, multiplications first (what
    the kernel applies: most inputs are the parent's as they are)."""
    source: np.ndarray
    powers: np.ndarray
    terms: np.ndarray


def _step(source: np.ndarray, powers: np.ndarray) -> Step:
    j, l = np.nonzero(powers)
    p = powers[j, l]
    order = np.argsort(p < 0, kind="stable")
    return Step(source, powers, np.column_stack([j, l, p])[order].astype(np.int64).reshape(-1, 3))


@lru_cache(maxsize=None)
def _identity_step(n: int) -> Step:
    return _step(np.arange(n, dtype=np.int64), np.zeros((n, 0), np.int64))


def identity_step(f: EnergyFloor) -> Step:
    return _identity_step(len(f.space.einsum.rank_variables) + 3 * len(f.space.einsum.tensors) + 2)


@lru_cache(maxsize=1 << 12)
def loop_step(e: Einsum, loops: tuple, closed: frozenset) -> Step:
    """The `Step` of loops ((rank variable, fanout dim or None), ...) placed in turn, with
    the fills of the tensors in `closed` (no node left to place) zeroed: read off
    `looptree.model.after_loop` run on symbols, so the model stays the one source of
    counts. Every input is one parent input times a monomial in the bounds. Cached per
    Einsum (not per floor): the keyed searches of a refinement are thousands, each small."""
    ranks, tensors = e.rank_variables, e.tensors
    sym = lambda name: sympy.Symbol(name, positive=True, integer=True)
    parent = ([sym(f"e_{r}") for r in ranks] + [sym(f"f_{t}") for t in tensors] + [sym(f"b_{t}") for t in tensors]
              + [sym(f"d_{t}") for t in tensors] + [sym("inst"), sym("time")])
    temporal = {r: sym(f"t_{r}") for r in ranks}
    above = Above(extents=dict(zip(ranks, parent)), temporal=temporal,
                  time=parent[-1], fills=dict(zip(tensors, parent[len(ranks):])),
                  instances=parent[-2], between=dict(zip(tensors, parent[len(ranks) + len(tensors):])),
                  depth=0, lifetime={t: 0 for t in tensors})
    bounds = [sym(f"bound_{i}") for i in range(len(loops))]
    for (rank, dim), b in zip(loops, bounds):
        above = after_loop(above, e, rank, b, dim)
    # a tensor's distinct tiles grow by the temporal bounds over its ranks: its parent input times those
    grown = [sympy.Mul(*(above.temporal[r] / temporal[r] for r in e.use(t).ranks)) for t in tensors]
    child = ([above.extents[r] for r in ranks] + [0 if t in closed else above.fills[t] for t in tensors]
             + [above.between[t] for t in tensors] + [sym(f"d_{t}") * g for t, g in zip(tensors, grown)]
             + [above.instances, above.time])
    source = np.full(len(child), -1, dtype=np.int64)
    powers = np.zeros((len(child), len(loops)), dtype=np.int64)
    for q, x in enumerate(child):
        if x == 0:
            continue
        factors = sympy.sympify(x).as_powers_dict()
        inputs = [s for s in factors if s in parent]
        assert len(inputs) == 1 and factors[inputs[0]] == 1, x  # one parent input times bounds
        source[q] = parent.index(inputs[0])
        for s, k in factors.items():
            if s in bounds:
                powers[q, bounds.index(s)] = int(k)
            else:
                assert s == inputs[0], x
    return _step(source, powers)


def energy_floor(f: EnergyFloor, cols: dict, plan: "_Plan") -> np.ndarray:
    """Per row of `cols` (the prefix search's columns), a lower bound on the energy of every
    completion of a prefix whose context gave `plan` (`floor_plan`)."""
    ints, energy, free = floor_inputs(f, cols)
    return child_floors(f, ints, energy, free, np.arange(len(energy), dtype=np.int64),
                        np.zeros((len(energy), 0), np.int64), identity_step(f), plan)


def child_floors(f: EnergyFloor, ints: np.ndarray, energy: np.ndarray, free: np.ndarray, rows: np.ndarray,
                 bounds: np.ndarray, step: Step, plan: "_Plan", threshold: float = np.inf,
                 monotone: bool = False) -> np.ndarray:
    """The floor (`energy_floor`) of each child a move's loops would build: parent row
    `rows[i]` (of `floor_inputs`' `ints` and `energy`) with loop bounds `bounds[i]`,
    under `step` (`loop_step`), without building the children's columns.

    `monotone`: the rows come in runs per parent, each with its bounds ascending, and the
    floor does not fall as the bound grows (one temporal loop over a rank variable that
    indexes each tensor at most once: for the tensors it indexes the bound cancels out of
    the values moved, and for the others it only raises the `time` a refetch moves). Then
    once a child's floor exceeds `threshold` the rest of its run are not computed: inf."""
    return _floor(np.full(len(rows), -np.inf), threshold, monotone, energy[None], _NO_SPREAD, f.compute_pJ,
                  ints, free, rows, bounds, step.source, step.terms, np.int64(f.ops), f.ranks, *plan.packed)


_NO_SPREAD = np.ones((1, 0))  # `_floor`'s spread when the floor is not spread over instances


# `_Plan.packed`'s arrays, in `_pack`'s order (`_floor`'s arguments after `ranks`), and the
# positions of those that hold costs: the rest is the ways' structure, the same for every
# set of per-bit costs on one prefix (`stacked_plans`)
_PACKED = ("way_tensor", "n_pieces", "coef_sum", "coef", "limit", "parent", "parent_limit", "const", "has_leaf",
           "leaf_pj", "leaf_spread", "choices", "const_open", "leaf_open", "dim_spread", "dim_ranks", "psum",
           "first_level", "first_unit", "first_fan")
_COSTS = tuple(_PACKED.index(name) for name in ("coef_sum", "coef", "parent", "const", "leaf_pj", "psum"))


def stacked_plans(plans: list) -> tuple:
    """One prefix's plans under several floors of the same space that differ only in their
    per-bit costs (`pmapgen.latency_floor.port_sets`), as `child_port_floors` takes them:
    each cost array with a leading axis per plan, the structure once (the first plan's: a
    plan's ways come from the space and the prefix, not from its costs, `_plan`)."""
    return tuple(np.concatenate([p.packed[i] for p in plans]) if i in _COSTS else a
                 for i, a in enumerate(plans[0].packed))


def child_port_floors(f: EnergyFloor, packed: tuple, ints: np.ndarray, seconds: np.ndarray, free: np.ndarray,
                      rows: np.ndarray, bounds: np.ndarray, step: Step, spread: np.ndarray, floor: np.ndarray,
                      threshold: float) -> np.ndarray:
    """`floor` raised, per child (as `child_floors`' are), to each port set's bits still to
    come over its spread: port set p's floor (its per-bit costs in `packed`, from
    `stacked_plans`, no compute energy, `seconds[p]` the parents' seconds so far) over
    `spread[p, i]`, in turn, for the children still at most `threshold` (the others keep
    a floor above it). The same values as `child_floors` per port set on those children;
    a child's inputs are computed once for all of them."""
    return _floor(floor.copy(), threshold, False, seconds, spread, 0.0, ints, free, rows, bounds, step.source,
                  step.terms, np.int64(f.ops), f.ranks, *packed)


@numba.njit(cache=True)
def _floor(out, threshold, monotone, energy, spread, compute_pJ, ints, free, rows, bounds, source, terms, ops, ranks,
           way_tensor, n_pieces, coef_sum, coef, limit, parent, parent_limit, const, has_leaf, leaf_pj, leaf_spread,
           choices, const_open, leaf_open, dim_spread, dim_ranks, psum, first_level, first_unit, first_fan):
    """`child_floors` and `child_port_floors` per child: its inputs from its parent's
    (`Step`), then per plan p (the cost arrays' first axis) each way down's cost
    (`_Plan`), the least over capacity choices of their sums, plus the energy so far
    `energy[p]` and the compute's, over `spread[p, i]` (none: 1): `out[i]` raised to it,
    the plans taken in turn while `out[i]` is at most `threshold`. A leaf's spread at a
    fanout level still open is at most, per dim, the least of its size and the extents
    left of the rank variables it may spread the tensor over (spatial loops below split
    what is left). A first link of the output also moves its partial sums: (fills -
    distinct) x instances x values over the spread, times `psum`, with `time` for the
    fills where the next node forces a temporal loop (module docstring)."""
    n, n_tensors, n_ways, n_ranks = rows.shape[0], ranks.shape[0], way_tensor.shape[0], ranks.shape[1]
    n_inputs, n_plans = source.shape[0], energy.shape[0]
    q = np.empty(n_inputs, dtype=np.int64)
    values = np.empty(n_tensors, dtype=np.int64)
    moved = np.empty(n_tensors, dtype=np.int64)
    refetched = np.empty(n_tensors, dtype=np.int64)
    ways = np.empty(n_ways)
    n_fan, n_dims = dim_spread.shape[0], dim_spread.shape[1]
    partial = np.empty(n_tensors, dtype=np.int64)  # the partial sums a first link moves, before the spread
    partial_refetched = np.empty(n_tensors, dtype=np.int64)  # and those once a temporal loop is forced
    capped = np.ones((n_tensors, n_fan), dtype=np.int64)  # per tensor and fanout level: the most spread left
    ratio = np.ones((n_tensors, n_fan))  # the dims' sizes over it
    # the (tensor, fanout level) pairs some way reads them at (an open level): a tenth of
    # them in V's searches at batch 1, so the rest are not computed row by row
    needed = np.zeros((n_tensors, n_fan), dtype=np.bool_)
    for w in range(n_ways):
        for a in range(n_fan):
            if has_leaf[w] and leaf_open[w, a]:
                needed[way_tensor[w], a] = True
            for j in range(n_pieces[w]):
                if const_open[w, j, a]:
                    needed[way_tensor[w], a] = True
    dead = False
    for i in range(n):
        r = rows[i]
        if monotone:
            if i == 0 or rows[i - 1] != r:
                dead = False
            elif dead:
                out[i] = np.inf
                continue
        if out[i] > threshold:
            continue
        for j in range(n_inputs):
            q[j] = np.int64(0) if source[j] < 0 else ints[r, source[j]]
        for k in range(terms.shape[0]):  # multiplications first: each division is then exact
            j, l, p = terms[k, 0], terms[k, 1], terms[k, 2]
            for _ in range(p):
                q[j] *= bounds[i, l]
            for _ in range(-p):
                q[j] //= bounds[i, l]
        inst, time = q[n_inputs - 2], q[n_inputs - 1]
        for t in range(n_tensors):
            v = np.int64(1)
            for k in range(n_ranks):
                for _ in range(ranks[t, k]):
                    v *= q[k]
            flat = inst * v
            values[t], moved[t], refetched[t] = v, q[n_ranks + t] * flat, time * flat
            partial[t] = max(q[n_ranks + t] - q[n_ranks + 2 * n_tensors + t], 0) * flat
            partial_refetched[t] = (time - q[n_ranks + 2 * n_tensors + t]) * flat
            for a in range(n_fan):
                if not needed[t, a]:
                    continue
                full, most = np.int64(1), np.int64(1)
                for b in range(n_dims):
                    size = dim_spread[a, b, t]
                    if size > 1:
                        left = np.int64(1)
                        for k in range(n_ranks):
                            if dim_ranks[a, b, t, k]:
                                left *= q[k]
                        full *= size
                        most *= min(size, left)
                capped[t, a], ratio[t, a] = most, full / most
        for pl in range(n_plans):
            for w in range(n_ways):
                t = way_tensor[w]
                between = q[n_ranks + n_tensors + t]
                v, m = values[t], moved[t]
                more = refetched[t] - m
                best = np.inf
                for j in range(n_pieces[w]):
                    over = 0.0
                    for k in range(coef.shape[3]):
                        if v > limit[w, j, k]:  # the link's node forces a temporal loop: refetched, not moved
                            over += coef[pl, w, j, k]
                    forced = v > parent_limit[w, j]
                    c = first_level[w, j]
                    if c >= 0 and not forced:  # the room the row's nodes leave at that level (c indexes `held`)
                        forced = v > (free[r, c] // first_unit[w, j]) * first_fan[w, j]
                    first = refetched[t] if forced else m
                    sums = partial_refetched[t] if forced else partial[t]
                    leaf = const[pl, w, j]
                    for a in range(n_fan):
                        if const_open[w, j, a]:
                            leaf *= ratio[t, a]
                    x = (m * coef_sum[pl, w, j] + more * over + (first // between) * parent[pl, w, j] + leaf
                         + (sums // between) * psum[pl, w, j])
                    if x < best:
                        best = x
                if has_leaf[w]:
                    spread_ = np.int64(1)
                    for a in range(n_fan):
                        if leaf_open[w, a]:
                            spread_ *= capped[t, a]
                    x = leaf_pj[pl, w] * (ops // (between * spread_))
                    if x < best:
                        best = x
                ways[w] = best
            x = energy[pl, r] + compute_pJ + _least_choice(ways, choices)
            if spread.shape[1]:
                x = x / spread[pl, i]
            if x > out[i]:
                out[i] = x
            if out[i] > threshold:
                break
        if monotone and out[i] > threshold:
            dead = True
    return out


# (beside `_floor` and `_box_floor`, which it calls: numba caches compiled code per source
# file, and a kernel in another file would keep a stale copy of them when only this one changed)
@numba.njit(cache=True)
def _cut_choices(ints, energy, free, rows, kb, threshold, factor, box_factor, box, monotone, rank_of, dim_of,
                 dim_size, divisors, n_divisors, counts, starts, flat, source, powers, terms, compute_pJ, ops, ranks,
                 way_tensor, n_pieces, coef_sum, coef, limit, parent, parent_limit, const, has_leaf, leaf_pj,
                 leaf_spread, choices, const_open, leaf_open, dim_spread, dim_ranks, psum, first_level, first_unit,
                 first_fan):
    """`pmapgen.loop_choices.cut_choices`: (kept rows, their bounds, the least floor
    computed, rows the box dropped, the least of their bounds times `box_factor`, choices
    the floor dropped, the least of their floors)."""
    n_loops = rank_of.shape[0]
    n_box, box_low = 0, np.inf
    if box:
        high = np.empty((rows.shape[0], n_loops))
        for i in range(rows.shape[0]):
            for l in range(n_loops):
                high[i, l] = min(ints[rows[i], rank_of[l]], dim_size[l])
        low = np.full(n_loops, 2.0)
        bound = _box_floor(ints, energy, rows, low, high, source, powers, compute_pJ, ops, ranks, way_tensor,
                           n_pieces, coef_sum[0], coef[0], limit, parent[0], parent_limit, const[0], has_leaf,
                           leaf_pj[0], leaf_spread, choices, const_open, leaf_open, dim_spread, dim_ranks, psum[0],
                           first_level, first_unit, first_fan)
        keep = np.empty(rows.shape[0], np.bool_)
        for i in range(rows.shape[0]):
            x = bound[i] * box_factor
            keep[i] = x <= (kb[rows[i]] * factor if kb.shape[0] else threshold)
            if not keep[i]:
                n_box += 1
                box_low = min(box_low, x)
        rows = rows[keep]
    # each loop's choices in turn, as `prefixes._divisor_choices` gives them: rows in order,
    # each row's bounds in its table's order, a spatial dim's loops at most its size
    cur_rows, cur = rows, np.empty((rows.shape[0], 0), np.int64)
    for l in range(n_loops):
        m = cur_rows.shape[0]
        at = np.empty(m, np.int64)
        total = 0
        for i in range(m):
            extent = ints[cur_rows[i], rank_of[l]]
            for k in range(l):
                if rank_of[k] == rank_of[l]:
                    extent //= cur[i, k]
            at[i] = np.searchsorted(divisors[l, :n_divisors[l]], extent)
            total += counts[l, at[i]]
        new_rows = np.empty(total, np.int64)
        new = np.empty((total, l + 1), np.int64)
        k = 0
        for i in range(m):
            s = starts[l, at[i]]
            for j in range(counts[l, at[i]]):
                b = flat[l, s + j]
                if dim_of[l] >= 0:
                    used = b
                    for kk in range(l):
                        if dim_of[kk] == dim_of[l]:
                            used *= cur[i, kk]
                    if used > dim_size[l]:
                        continue
                new_rows[k] = cur_rows[i]
                new[k, :l] = cur[i]
                new[k, l] = b
                k += 1
        cur_rows, cur = new_rows[:k], new[:k]
    n = cur_rows.shape[0]
    floor = _floor(np.full(n, -np.inf), threshold, monotone, energy.reshape((1, energy.shape[0])), np.ones((1, 0)),
                   compute_pJ, ints, free, cur_rows, cur, source, terms, ops, ranks, way_tensor, n_pieces, coef_sum,
                   coef, limit, parent, parent_limit, const, has_leaf, leaf_pj, leaf_spread, choices, const_open,
                   leaf_open, dim_spread, dim_ranks, psum, first_level, first_unit, first_fan)
    lowest = np.inf
    n_floor, floor_low = 0, np.inf
    keep = np.empty(n, np.bool_)
    for i in range(n):
        x = floor[i]
        lowest = min(lowest, x)
        keep[i] = x <= (kb[cur_rows[i]] * factor if kb.shape[0] else threshold)
        if not keep[i]:
            n_floor += 1
            floor_low = min(floor_low, x)
    return cur_rows[keep], cur[keep], lowest, n_box, box_low, n_floor, floor_low


@numba.njit(cache=True)
def _ends(a, b, p, low, high):
    """(a, b) times bound ** p at the ends of [low, high] where it is least, and most."""
    if p > 0:
        return a * low ** p, b * high ** p
    if p < 0:
        return a * high ** p, b * low ** p
    return a, b


@numba.njit(cache=True)
def _least_choice(ways, choices) -> float:
    """The least over capacity choices (rows of `choices`) of the sum of their ways' costs."""
    best = np.inf
    for c in range(choices.shape[0]):
        total = 0.0
        for k in range(choices.shape[1]):
            total = total + ways[choices[c, k]]
        if total < best:
            best = total
    return best


def box_floors(f: EnergyFloor, ints: np.ndarray, energy: np.ndarray, rows: np.ndarray, low: np.ndarray,
               high: np.ndarray, step: Step, plan: "_Plan") -> np.ndarray:
    """Per parent row `rows[i]`, at most the floor (`child_floors`) of every child a move's
    spatial loops can build from it with bounds b, low[l] <= b[l] <= high[i, l].

    Each input of a child is the parent's times a monomial in the bounds (`Step`); the
    floor does not fall as the extents, fills, instances or `time` grow, nor rise as the
    spreads (`between`) grow (every coefficient is an energy, at least 0). So each term
    is taken at its better end of the box, with the values a tensor moves (instances x
    tile) as one monomial: a spatial loop over a rank the tensor's tile has cancels out of
    them, which would be lost if the instances and the tile went to opposite ends. A row
    whose bound is over the budget needs none of its choices computed (most of a spatial
    group's are over: docs/pmapgen.md, "Fused events in any order at one key").
    Spatial loops only: `time` and the fills are the parent's."""
    return _box_floor(ints, energy, rows, np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64),
                      step.source, step.powers, f.compute_pJ, np.int64(f.ops), f.ranks,
                      *(x[0] if i in _COSTS else x for i, x in enumerate(plan.packed)))


@numba.njit(cache=True)
def _box_floor(ints, energy, rows, low, high, source, powers, compute_pJ, ops, ranks, way_tensor, n_pieces, coef_sum,
               coef, limit, parent, parent_limit, const, has_leaf, leaf_pj, leaf_spread, choices, const_open,
               leaf_open, dim_spread, dim_ranks, psum, first_level, first_unit, first_fan):
    """`box_floors` per row: `_floor`'s terms at their better ends of the box (the spreads
    left uncapped by the extents and the partial sums `psum` left out: a lower bound still)."""
    n, n_tensors, n_ways, n_ranks = rows.shape[0], ranks.shape[0], way_tensor.shape[0], ranks.shape[1]
    n_inputs, n_loops = source.shape[0], powers.shape[1]
    base = np.empty(n_inputs)
    lo = np.empty(n_inputs)  # each input at its least over the box
    hi = np.empty(n_inputs)  # and at its most
    flat_lo = np.empty(n_tensors)
    flat_hi = np.empty(n_tensors)
    v_lo = np.empty(n_tensors)
    ways = np.empty(n_ways)
    out = np.empty(n)
    inst = n_inputs - 2
    for i in range(n):
        r = rows[i]
        for j in range(n_inputs):
            base[j] = 0.0 if source[j] < 0 else float(ints[r, source[j]])
            a, b = base[j], base[j]
            for l in range(n_loops):
                a, b = _ends(a, b, powers[j, l], low[l], high[i, l])
            lo[j], hi[j] = a, b
        time = base[n_inputs - 1]
        for t in range(n_tensors):
            v, flat = 1.0, base[inst]
            for k in range(n_ranks):
                for _ in range(ranks[t, k]):
                    v *= lo[k]
                    flat *= base[k]
            a, b = flat, flat
            for l in range(n_loops):  # instances x tile: one monomial per loop
                e = powers[inst, l]
                for k in range(n_ranks):
                    e += ranks[t, k] * powers[k, l]
                a, b = _ends(a, b, e, low[l], high[i, l])
            v_lo[t], flat_lo[t], flat_hi[t] = v, a, b
        for w in range(n_ways):
            t = way_tensor[w]
            fills = lo[n_ranks + t]
            between = hi[n_ranks + n_tensors + t]
            best = np.inf
            for j in range(n_pieces[w]):
                over = 0.0
                for k in range(coef.shape[2]):
                    if v_lo[t] > limit[w, j, k]:
                        over += coef[w, j, k]
                if time >= fills:
                    more = (time - fills) * flat_lo[t] * over
                else:  # (fills never exceed time; kept a bound either way)
                    more = (time - fills) * flat_hi[t] * coef_sum[w, j]
                first = (time if v_lo[t] > parent_limit[w, j] else min(time, fills)) * flat_lo[t]
                x = fills * flat_lo[t] * coef_sum[w, j] + more + np.floor(first / between) * parent[w, j] + const[w, j]
                if x < best:
                    best = x
            if has_leaf[w]:
                x = leaf_pj[w] * np.floor(ops / (between * leaf_spread[w]))
                if x < best:
                    best = x
            ways[w] = best
        out[i] = energy[r] + compute_pJ + _least_choice(ways, choices)
    return out


@dataclass(frozen=True)
class _Plan:
    """The floor of one prefix context as coefficients. `ways`: per tensor and set of
    levels kept out that some capacity choice needs, (tensor, (pieces, leaf)); `choices`:
    per capacity choice, the index into `ways` of each tensor's way down.

    A way down costs the least of its leaf, if `leaf` = (d, s) is set: d * (ops //
    (between * s)), and its pieces. Piece j (a chain of nodes) costs, with M(x) the values
    moved into a node whose threshold is x (`refetched` if values > x, else `moved`):
    sum over its links i of coef[j, i] * M(limit[j, i]), plus parent[j] * (M(parent_limit[j])
    // between) (the parent's side of a first link from the innermost node), plus const[j]
    (its leaf), plus psum[j] * (partial sums // between) (the output's, on a first link).
    `pieces` = (coef's row sums, coef, limit, parent, parent_limit, const, open fanouts
    below its leaf, psum).
    `packed`: the same as arrays for the compiled `_floor` (`_pack`), the costs with a
    first axis of one plan (`stacked_plans` puts several plans' costs along it)."""
    ways: tuple
    choices: tuple
    packed: tuple


@lru_cache(maxsize=1 << 14)
def _plan(f: EnergyFloor, inner: tuple, candidates: tuple, placed: frozenset) -> _Plan:
    inner, candidates = dict(inner), dict(candidates)
    options = []  # per tight level: the sets of tensors that may have nodes there
    for k, capacity, least in f.tight:
        there = frozenset(t for t in least if inner.get(t) == k)
        free = [t for t in least if t not in there]
        options.append([(k, there | set(s)) for n in range(len(free) + 1) for s in combinations(free, n)
                        if sum(least[t] for t in there | set(s)) <= capacity])
    index: dict = {}  # (tensor, levels kept out) -> its index in `ways`
    choices = []
    for choice in product(*options):
        row = []
        for t in f.space.einsum.tensors:
            kept_out = frozenset(k for k, s in choice if t not in s)
            if (t, kept_out) not in index:
                index[t, kept_out] = len(index)
            row.append(index[t, kept_out])
        choices.append(tuple(row))
    ways = tuple((t, _way_down(f, t, inner.get(t), candidates.get(t, ()), placed, kept_out))
                 for (t, kept_out) in index)  # dicts keep insertion order: index i is the i-th
    return _Plan(ways, tuple(choices), _pack(f, ways, choices))


def _pack(f: EnergyFloor, ways: tuple, choices: list) -> tuple:
    """`_floor`'s plan arguments: per way its tensor's index, its number of pieces, their
    coefficients padded to the most pieces and links (limit inf: never exceeded), its leaf;
    per capacity choice its ways."""
    tensors = list(f.space.einsum.tensors)
    pieces = [p for _, (p, _) in ways if p is not None]
    n_p = max((len(p[0]) for p in pieces), default=1)
    n_l = max((p[1].shape[1] for p in pieces), default=1)
    w = len(ways)
    coef_sum, parent, parent_limit, const = (np.zeros((w, n_p)) for _ in range(4))
    coef, limit = np.zeros((w, n_p, n_l)), np.full((w, n_p, n_l), np.inf)
    n_pieces, has_leaf = np.zeros(w, np.int64), np.zeros(w, np.bool_)
    leaf_pj, leaf_spread, psum = np.zeros(w), np.ones(w, np.int64), np.zeros((w, n_p))
    first_level, first_unit, first_fan = (np.full((w, n_p), -1, np.int64), np.ones((w, n_p), np.int64),
                                          np.ones((w, n_p), np.int64))
    n_fan = max(len(f.fan_levels), 1)
    const_open, leaf_open = np.zeros((w, n_p, n_fan), np.bool_), np.zeros((w, n_fan), np.bool_)
    for i, (_, (p, leaf)) in enumerate(ways):
        if p is not None:
            k, links = p[1].shape
            n_pieces[i] = k
            coef_sum[i, :k], coef[i, :k, :links], limit[i, :k, :links] = p[0], p[1], p[2]
            parent[i, :k], parent_limit[i, :k], const[i, :k], const_open[i, :k] = p[3], p[4], p[5], p[6]
            psum[i, :k], first_level[i, :k], first_unit[i, :k], first_fan[i, :k] = p[7], *p[8].T
        if leaf is not None:
            has_leaf[i], leaf_pj[i], leaf_spread[i], leaf_open[i] = True, leaf[0], leaf[1], leaf[2]
    # (the costs with a first axis of one plan: `_floor` takes several, `stacked_plans`)
    return (np.array([tensors.index(t) for t, _ in ways], dtype=np.int64), n_pieces, coef_sum[None], coef[None],
            limit, parent[None], parent_limit, const[None], has_leaf, leaf_pj[None], leaf_spread,
            np.array(choices, dtype=np.int64), const_open, leaf_open, f.dim_spread, f.dim_ranks, psum[None],
            first_level, first_unit, first_fan)


def _way_down(f: EnergyFloor, t: str, k: int | None, candidates, placed: frozenset, kept_out: frozenset) -> tuple:
    """The cheapest chain of further nodes of tensor t from its innermost node at level k
    (None: no node yet; its first node is one of `candidates`, its backing) to the leaf,
    using no level in `kept_out` (module docstring), as `_Plan` pieces and leaf."""
    sp = f.space
    out_t = sp.einsum.is_output(t)
    if k is None and not candidates:
        return None, (0.0, 1, _open_below(f, len(sp.path), placed))
    tails = _tails(f, t, placed, kept_out)
    pieces = []  # (links as (coef, threshold), parent coef, parent threshold, leaf, partial sums' coef)
    if k is None:
        pieces = [(links, 0.0, math.inf, b, 0.0, -1, 1, 1) for c in candidates if c in tails
                  for links, b in tails[c]]
        leaf = None
    else:
        leaf = None if _skips(sp.must[t], k, None) else \
            (_pj(f, t, [leaf_counts(out_t, sp.path[k], 1, 1)]), _spread_below(f, t, k, placed),
             _open_below(f, k, placed))
        for c in candidates:
            if c in tails and not _skips(sp.must[t], k, c):
                # the link is linear in the values moved into c (its side) and those over between (the parent's)
                counts = link_counts(out_t, sp.path[c], sp.path[k], 1, 1, 1, 1, 1)
                child = _pj(f, t, [x for x in counts if x[1] == sp.path[c]])
                parent = _pj(f, t, [x for x in counts if x[1] == sp.path[k]])
                # per partial sum (fills one more than distinct tiles); 0 for an input
                psum = (_pj(f, t, link_counts(out_t, sp.path[c], sp.path[k], 1, 2, 1, 1, 1))
                        - _pj(f, t, link_counts(out_t, sp.path[c], sp.path[k], 1, 2, 2, 1, 1)))
                x = _limit(f, t, c, placed)
                fan = math.prod(n for j, n in f.fanout.items() if j <= c and j not in placed)  # as in `_limit`
                held = [h for h, (k2, _, _) in enumerate(f.held) if k2 == c]
                pieces += [(((child, x),) + tuple((a, min(x, y)) for a, y in links), parent, x, b, psum,
                            held[0] if held else -1, f.per_unit[c, t], fan) for links, b in tails[c]]
    if not pieces:
        return None, leaf
    width = max(len(links) for links, *_ in pieces) or 1
    coef, limit = np.zeros((len(pieces), width)), np.full((len(pieces), width), np.inf)
    for j, (links, *_) in enumerate(pieces):
        for i, (a, x) in enumerate(links):
            coef[j, i], limit[j, i] = a, x
    return (coef.sum(axis=1), coef, limit, np.array([p[1] for p in pieces], dtype=np.float64),
            np.array([p[2] for p in pieces], dtype=np.float64), np.array([p[3][0] for p in pieces], dtype=np.float64),
            np.array([_open_below(f, p[3][1], placed) for p in pieces], dtype=np.bool_).reshape(len(pieces), -1),
            np.array([p[4] for p in pieces], dtype=np.float64),
            np.array([p[5:8] for p in pieces], dtype=np.int64).reshape(len(pieces), 3)), leaf


def _limit(f: EnergyFloor, t: str, c: int, placed: frozenset) -> float:
    """The most values of t a point may hold per instance and still reach a node at level c
    without a temporal loop that indexes t: what c holds times the instances the fanouts
    above it that may still get spatial loops offer. Past it, t's tile must shrink by a
    temporal loop, and every node after that loop moves at least `time` x instances x
    values of the point (module docstring)."""
    return f.room[c, t] * math.prod(n for j, n in f.fanout.items() if j <= c and j not in placed)


@lru_cache(maxsize=1 << 14)
def _tails(f: EnergyFloor, t: str, placed: frozenset, kept_out: frozenset) -> dict:
    """Per level c tensor t may use: the ways down from a node placed at c later, each as
    (links, leaf): the links as (coef, threshold) per node after c, costing coef times the
    values moved into it (`energy_floor`), where a node's threshold is the least `_limit`
    of c and the nodes before it (a temporal loop before any of them comes before it too),
    and the leaf as (its constant, the last node's level). A later node's links have no parent placed yet (spread 1) and
    no partial sums, so each is linear in the values it moves."""
    sp = f.space
    out_t = sp.einsum.is_output(t)
    levels = [c for c in sp.allowed[t] if c not in kept_out]
    tails: dict = {}
    for c in sorted(levels, reverse=True):
        ways = [] if _skips(sp.must[t], c, None) else \
            [((), (_pj(f, t, [leaf_counts(out_t, sp.path[c], f.ops, _spread_below(f, t, c, placed))]), c))]
        x = _limit(f, t, c, placed)
        for c2 in (y for y in levels if y > c and not _skips(sp.must[t], c, y)):
            a = _pj(f, t, link_counts(out_t, sp.path[c2], sp.path[c], 1, 1, 1, 1, 1))
            ways += [(((a, min(x, _limit(f, t, c2, placed))),) + tuple((a2, min(x, y)) for a2, y in links), b)
                     for links, b in tails[c2]]
        tails[c] = tuple(ways)
    return tails


def _pj(f: EnergyFloor, t: str, counts) -> np.ndarray | float:
    return sum(amount * (f.bits[t] * f.energy[(kind, lv)]) for kind, lv, amount in counts)


def _skips(must, a: int, b: int | None) -> bool:
    """Whether a node at level a followed by one at b (None: the leaf) skips a level in `must`."""
    return any(a < m and (b is None or m < b) for m in must)


def _open_below(f: EnergyFloor, c: int, placed: frozenset) -> np.ndarray:
    """Per fanout level (`EnergyFloor.fan_levels`), whether it is below level c and may
    still get spatial loops: the levels `_spread_below` multiplies."""
    return np.array([j > c and j not in placed for j in f.fan_levels] or [False], dtype=np.bool_)


def _spread_below(f: EnergyFloor, t: str, c: int, placed: frozenset) -> int:
    """The most spread the fanouts below level c that may still get spatial loops offer t."""
    return math.prod(by[t] for j, by in f.spread.items() if j > c and j not in placed)
