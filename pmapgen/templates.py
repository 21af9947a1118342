"""Templates: the structure of a pmapping (storage nodes, loop order, spatial loops) with
its tiles left open, enumerated once per Einsum and evaluated for all tile shapes at once.

Only provably equivalent or dominated structures are skipped (docs/pmapgen.md gives the
arguments; tests/test_pmapgen.py checks them against brute force). Inside the fused region
(above a shared tensor's on-chip backing) the loop order is part of the compatibility key,
so there only legality prunes; the rules marked * apply below it:

- storage nodes with no loop between them are one set (order is irrelevant);
- a storage node (other than a shared tensor's on-chip backing, which may not move below a
  loop that does not index it) is never directly above a temporal loop over a rank variable
  that does not index its tensor (moving it below changes no count, tile or lifetime),
  nor directly above one that does unless the temporal loop just above the node does not
  index its tensor (otherwise moving it below keeps its traffic, shrinks its tile and
  shortens its lifetime);
- * between two cuts (storage runs or spatial groups) a rank variable has at most one
  temporal loop;
- * loops of a block with the same relevance class (the set of
  tensors they index) are contiguous and in name order; across classes every order is kept;
- a fanout's spatial loops form one group between the levels above and below it, *never
  directly below a temporal loop (spatial loops do not iterate in time, so that loop is
  equivalent to one directly below the group);
- a temporal loop with no storage node below it is never placed (it changes nothing);
- loops above the on-chip backing node of a shared tensor index that tensor (DESIGN §6).
"""
from __future__ import annotations

import math
import operator
import random
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, product
from typing import Iterator

from arch.model import Arch
from looptree.nodes import Compute, Loop, Pmapping, Storage
from pmapgen.capacity import fits
from pmapgen.constraints import Constraints
from workloads.model import Einsum, Workload


@dataclass(frozen=True)
class Template:
    """A pmapping whose loop tiles are slot numbers (`Loop.tile` = slot index)."""
    einsum: str
    unit: str
    nodes: tuple
    n_slots: int

    def with_tiles(self, tiles) -> Pmapping:
        """The pmapping with slot k's tile set to tiles[k] (ints or arrays)."""
        return Pmapping(self.einsum, tuple(Loop(n.rank_variable, tiles[n.tile], n.spatial)
                                           if isinstance(n, Loop) else n for n in self.nodes))

    def slots(self) -> list[Loop]:
        return [n for n in self.nodes if isinstance(n, Loop)]


def _subsets(items: list) -> Iterator[tuple]:
    for k in range(len(items) + 1):
        yield from combinations(items, k)


def _levels(einsum: Einsum, workload: Workload, arch: Arch, unit: str, constraints: Constraints, t: str):
    """(levels that may keep tensor t, levels that must, levels its backing may use)."""
    path = arch.path(unit)
    tensor = workload.tensors[t]
    allowed = tuple(k for k, m in enumerate(path) if arch.may_keep(m.name, tensor, einsum))
    must = frozenset(k for k, m in enumerate(path) if arch.must_keep(m.name, tensor, einsum))
    if tensor.role == "intermediate":
        backings = tuple(k for k in allowed if constraints.backing_allowed(t, path[k].name))
    else:
        backings = (0,) if 0 in allowed else ()
    return allowed, must, backings


def spatial_groups(einsum: Einsum, workload: Workload, arch: Arch, unit: str,
                   constraints: Constraints) -> dict[int, list[tuple[tuple[str, str], ...]]]:
    """For each level with a fanout, the non-empty groups of (dim, rank variable) spatial
    loops it may run."""
    sizes = tuple(workload.rank_sizes[r] for r in einsum.rank_variables)
    spatial = tuple(sorted(constraints.spatial.items()))
    return {k: list(groups) for k, groups in
            _spatial_groups(einsum, sizes, arch, unit, spatial, constraints.max_spatial_per_level).items()}


@lru_cache(maxsize=256)  # the keyed searches of a refinement are thousands, each in a fresh space
def _spatial_groups(einsum: Einsum, sizes: tuple, arch: Arch, unit: str, spatial: tuple,
                    most: int) -> dict[int, list[tuple[tuple[str, str], ...]]]:
    constraints = Constraints(spatial=dict(spatial), max_spatial_per_level=most)
    size = dict(zip(einsum.rank_variables, sizes))
    out = {}
    for k, m in enumerate(arch.path(unit)):
        slots = [(d.name, r) for d in m.fanout for r in einsum.rank_variables
                 if size[r] > 1 and (r not in einsum.reduced or d.reduce)
                 and constraints.spatial_allowed(r, d.name)]
        groups = [s for s in _subsets(slots) if s and len(s) <= most
                  and all(d.allows(einsum, [r for dd, r in s if dd == d.name]) for d in m.fanout)]
        if groups:
            out[k] = groups
    return out


@dataclass(frozen=True)
class Space:
    """What the moves of one Einsum on one compute unit depend on besides the prefix."""
    einsum: Einsum
    unit: str
    path: tuple[str, ...]
    relevance: dict  # rank variable -> the tensors it indexes
    max_loops: dict  # rank variable -> most loops it may have
    constraints: Constraints
    allowed: dict  # tensor -> levels that may keep it
    must: dict  # tensor -> levels that must keep it
    backings: dict  # tensor -> levels its backing may use
    groups: dict  # fanout level -> its possible spatial groups
    # what the space gives each storage state, which thousands of prefixes of one search share
    # (`storage_state`, `_indexing_groups`, the prefix search's capacity plans); a search
    # may hand it on to the next of its space
    memo: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Prefix:
    """The structure of a partial pmapping (its nodes from the root down), reduced to what
    its possible continuations depend on: two prefixes with equal `Prefix` have the same
    moves. Storage levels and spatial groups are chosen as the prefix grows, so prefixes
    of different storage and spatial choices meet in one `Prefix`."""
    inner: tuple  # (tensor, level index) of each tensor's last placed node
    backing: frozenset  # (tensor, level index): on-chip backings of shared tensors still to place
    shared_onchip: frozenset  # (tensor, backing level index) of shared tensors backed on chip
    groups_placed: frozenset  # fanout levels whose spatial group is placed
    floor: int  # storage nodes go at this level or below (the deepest spatial group placed)
    deepest: int  # the deepest level with a storage node (-1: none below the root)
    loose: bool  # a temporal loop was placed since the last storage run
    last: str  # "root", "storage", "spatial" or "temporal": the kind of the last move
    last_run: tuple  # tensors of the storage run just placed that may move (last == "storage")
    last_temporal: str | None  # the rank variable of the last temporal loop (spatial ones skipped)
    block: tuple  # rank variables of the temporal loops since the last cut
    loops: tuple  # loops per rank variable, in `Space.relevance` order
    fused_ranks: frozenset  # rank variables of the loops placed while above a shared backing
    depth: int  # loops placed

    def but(self, **changes) -> "Prefix":
        """`dataclasses.replace` without its per-field work: `moves` builds one Prefix per
        move (74 k in one of V's keyed searches at batch 1)."""
        assert changes.keys() <= self.__dataclass_fields__.keys(), changes.keys()
        new = object.__new__(Prefix)
        new.__dict__.update(self.__dict__, **changes)
        new.__dict__.pop("_hash", None)
        return new

    def __hash__(self) -> int:
        # computed once: a prefix is looked up many times (floor plans, loop steps, moves, merge keys)
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(_prefix_fields(self.__dict__))
        return h

    def __eq__(self, other) -> bool:
        # (the generated one builds two tuples attribute by attribute: prefixes are compared
        # whenever a search interns one a move built again, `_Search._interned`)
        if self is other:
            return True
        if other.__class__ is not Prefix:
            return NotImplemented
        return _prefix_fields(self.__dict__) == _prefix_fields(other.__dict__)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # (hashes are per process)

    @property
    def fused(self) -> bool:
        """Still above some shared tensor's on-chip backing node."""
        return bool(self.backing)

    def candidates(self, sp: Space, t: str) -> list[int]:
        """Levels the next node of tensor t may use."""
        inner = dict(self.inner)
        if t not in inner:
            return [k for tt, k in self.backing if tt == t and k >= self.floor]
        return [k for k in sp.allowed[t] if k > inner[t] and k >= self.floor]

    def unplaced_must(self, sp: Space) -> set[int]:
        """Levels some tensor must still get a node at (shared backings included)."""
        inner = dict(self.inner)
        pending = dict(self.backing)
        return {k for t, must in sp.must.items() for k in must
                if (t in inner and k > inner[t]) or (t in pending and k >= pending[t])} | set(pending.values())

    def done(self, sp: Space) -> bool:
        return not self.loose and not storage_state(sp, self).unplaced_must

    @property
    def progress(self) -> int:
        """Grows with every move: storage runs deepen `inner`, groups are placed once,
        loops of one block (or of the fused region) are bounded."""
        return (1000 * (sum(k + 1 for _, k in self.inner) + 2 * len(self.groups_placed))
                + 10 * len(self.fused_ranks) + len(self.block))


# a prefix's fields, in order, from its __dict__ (one C call: `Prefix.__hash__`, `__eq__`)
_prefix_fields = operator.itemgetter(*Prefix.__dataclass_fields__)


@dataclass(frozen=True)
class Move:
    """Nodes appended to a prefix: a storage run, a spatial group, or one temporal loop
    (`Loop.tile` is the loop's position among the move's loops)."""
    nodes: tuple

    def __hash__(self) -> int:
        # computed once, as `Prefix`'s: a move is looked up at every key it extends (loop steps, storage adds)
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(self.nodes)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # (hashes are per process)


def space(einsum: Einsum, workload: Workload, unit: str, arch: Arch, constraints: Constraints) -> Space:
    ranks = [r for r in einsum.rank_variables if workload.rank_sizes[r] > 1]
    levels = {t: _levels(einsum, workload, arch, unit, constraints, t) for t in einsum.tensors}
    return Space(einsum, unit, tuple(m.name for m in arch.path(unit)),
                 {r: frozenset(t for t in einsum.tensors if r in einsum.use(t).ranks) for r in ranks},
                 {r: min(constraints.max_loops_per_rank, _prime_factors(workload.rank_sizes[r])) for r in ranks},
                 constraints, {t: v[0] for t, v in levels.items()}, {t: v[1] for t, v in levels.items()},
                 {t: v[2] for t, v in levels.items()}, spatial_groups(einsum, workload, arch, unit, constraints))


def roots(sp: Space, workload: Workload) -> Iterator[tuple[Prefix, Move]]:
    """For each choice of backing levels: the empty prefix and the root storage run.
    Shared tensors' on-chip backings are chosen here (loops above them must index them);
    every other node is chosen as the prefix grows."""
    per_tensor = [[(t, b) for b in sp.backings[t]] for t in sp.einsum.tensors]
    for combo in product(*per_tensor):
        root = tuple(sorted(t for t, b in combo if b == 0))
        later = frozenset((t, b) for t, b in combo if b != 0)
        if any(not workload.is_shared(t) for t, _ in later) or any(k < b for t, b in combo for k in sp.must[t]):
            continue  # only shared intermediates have on-chip backings; none skips a level it must use
        yield (Prefix(tuple((t, 0) for t in root), later, later, frozenset(), 0, -1, False, "root", (), None, (),
                      tuple(0 for _ in sp.relevance), frozenset(), 0),
               Move((Storage(sp.path[0], root),) if root else ()))


def _chains(p: Prefix, sp: Space, t: str) -> list[tuple[int, ...]]:
    """The next nodes tensor t may get in one storage run: increasing levels among its
    candidates, skipping no level it must use (possibly none); a tensor whose on-chip
    backing is still to place starts with it."""
    inner = dict(p.inner)
    if t in inner:
        top, first, must = inner[t], (), sp.must[t]
        cands = p.candidates(sp, t)
    else:
        out = [()]
        for top in p.candidates(sp, t):  # its backing level
            below = [k for k in sp.allowed[t] if k > top]
            out += [(top, *levels) for levels in _subsets(below)
                    if all(k in levels for k in sp.must[t] if top < k < (levels or (top,))[-1])]
        return out
    return [()] + [levels for levels in _subsets(cands)
                   if levels and all(k in levels for k in must if top < k < levels[-1])]


@dataclass(frozen=True)
class StorageState:
    """What follows from a prefix's storage state (`Prefix.inner`, `backing`,
    `shared_onchip`, `floor`) alone: its storage runs as (move, `last_run`, `inner`,
    `backing` after it, its deepest node below the root or -1), the levels each
    tensor's next node may use, the tensors that may get one, and `Prefix.unplaced_must`."""
    runs: tuple
    candidates: dict
    open: frozenset
    unplaced_must: frozenset


def storage_state(sp: Space, p: Prefix) -> StorageState:
    """p's `StorageState`, computed once per storage state of the space (`Space.memo`)."""
    key = ("state", p.inner, p.backing, p.shared_onchip, p.floor)
    out = sp.memo.get(key)
    if out is None:
        backing = dict(p.shared_onchip)
        runs = []
        for combo in product(*[[(t, c) for c in _chains(p, sp, t)] for t in sp.einsum.tensors]):
            run = [(t, k) for t, levels in combo for k in levels]
            if not run:
                continue
            run_nodes = tuple(Storage(sp.path[k], tuple(sorted(t for t, kk in run if kk == k)))
                              for k in sorted({k for _, k in run}))
            inner = dict(p.inner)
            inner.update((t, levels[-1]) for t, levels in combo if levels)
            runs.append((Move(run_nodes), tuple(sorted({t for t, k in run if backing.get(t) != k})),
                         tuple(sorted(inner.items())), p.backing - set(run),
                         max((k for _, k in run if k != 0), default=-1)))
        candidates = {t: p.candidates(sp, t) for t in sp.einsum.tensors}
        out = sp.memo[key] = StorageState(tuple(runs), candidates, frozenset(t for t, c in candidates.items() if c),
                                           frozenset(p.unplaced_must(sp)))
    return out


def _indexing_groups(sp: Space, k: int, pending: frozenset, need_index: set) -> list:
    """The spatial groups of fanout level k whose every loop indexes the tensors of the
    on-chip backings still to place (`pending`)."""
    key = ("groups", k, pending)
    out = sp.memo.get(key)
    if out is None:
        out = sp.memo[key] = [g for g in sp.groups[k] if all(need_index <= sp.relevance[r] for _, r in g)]
    return out


def moves(sp: Space, p: Prefix) -> Iterator[tuple[Move, Prefix]]:
    """Every move the rules of the module docstring allow after prefix `p`, with the
    prefix it leads to: the storage runs first, in `storage_state(sp, p).runs` order."""
    e, relevance, constraints = sp.einsum, sp.relevance, sp.constraints
    state = storage_state(sp, p)
    need_index = {t for t, _ in p.backing}  # loops placed now are above their backing
    fused = bool(need_index)
    rank_index = {r: i for i, r in enumerate(relevance)}
    # (a) a storage run: for each tensor, its next nodes (possibly none)
    if p.last != "storage":
        for move, movable, inner, rest, deepest in state.runs:
            yield move, p.but(inner=inner, backing=rest, deepest=max(p.deepest, deepest), loose=False,
                              last="storage", last_run=movable, block=())
    # (b) a spatial group
    for k in sp.groups:
        if k in p.groups_placed or (p.last == "temporal" and not fused) or p.deepest >= k:
            continue
        if any(kk < k for kk in state.unplaced_must):
            continue  # nodes above the fanout could no longer be placed
        for group in _indexing_groups(sp, k, p.backing, need_index):
            group_ranks = [r for _, r in group]
            if fused and (len(set(group_ranks)) < len(group_ranks) or p.fused_ranks & set(group_ranks)):
                continue  # fused loops: each rank variable at most once
            loops = list(p.loops)
            for r in group_ranks:
                loops[rank_index[r]] += 1
            if any(loops[rank_index[r]] > sp.max_loops[r] for r in group_ranks):
                continue  # every loop needs a bound >= 2
            yield Move(tuple(Loop(r, i, dim) for i, (dim, r) in enumerate(group))), p.but(
                groups_placed=p.groups_placed | {k}, floor=max(p.floor, k), last="spatial", last_run=(),
                block=(), loops=tuple(loops),
                fused_ranks=p.fused_ranks | set(group_ranks) if fused else p.fused_ranks,
                depth=p.depth + len(group))
    # (c) a temporal loop; one with no storage node below it changes nothing (the leaf iterates
    # whatever extent is left), so loops only go where a storage node can still follow
    if not state.open:
        return
    for r in relevance:
        if (r in p.block and not fused) or p.loops[rank_index[r]] >= sp.max_loops[r] \
                or not need_index <= relevance[r]:
            continue
        if fused and r in p.fused_ranks:
            continue  # a rank variable is at most once among the fused loops (semantics §2)
        if p.last == "storage" and not set(p.last_run) <= relevance[r]:
            continue  # those nodes of the run above would be moved below this loop
        if p.last == "storage" and p.last_run:
            if p.last_temporal is None or any(t in relevance[p.last_temporal] for t in p.last_run):
                continue  # no reuse run above them: moving them below this loop dominates
        if not fused and p.block:
            prev = p.block[-1]
            if relevance[prev] == relevance[r]:
                if r < prev:
                    continue
            elif any(relevance[b] == relevance[r] for b in p.block):
                continue
        if not constraints.loop_allowed(r, fused) or not constraints.order_allowed(p.block, r):
            continue
        loops = list(p.loops)
        loops[rank_index[r]] += 1
        yield Move((Loop(r, 0),)), p.but(
            loose=True, last="temporal", last_run=(), last_temporal=r, block=p.block + (r,), loops=tuple(loops),
            fused_ranks=p.fused_ranks | {r} if fused else p.fused_ranks, depth=p.depth + 1)


def open_groups(sp: Space, p: Prefix) -> frozenset[int]:
    """Fanout levels whose spatial group some continuation of `p` may still place (`moves`
    (b)): not placed, below every storage node, and, after a temporal loop below the
    fused region, above some level a tensor's next node may use. A group never follows a
    temporal loop there, and the storage run that must come between closes every fanout
    at or above its deepest node (the energy floor counts no spread, `pmapgen.bounds`, of
    a closed one: after a temporal loop under QK's LocalBuffer nodes the 128 x 128 array
    can no longer be used)."""
    lowest = -math.inf  # the shallowest level a tensor's next node may use, if it matters
    if p.last == "temporal" and not p.fused:
        lowest = min((c for cs in storage_state(sp, p).candidates.values() for c in cs), default=math.inf)
    return frozenset(k for k in sp.groups if k not in p.groups_placed and k > p.deepest and k > lowest)


def templates(einsum: Einsum, workload: Workload, arch: Arch, unit: str,
              constraints: Constraints | None = None) -> Iterator[Template]:
    """Every template of `einsum` on compute `unit`: every path of `moves` from a root to
    a done prefix (see the module docstring). Branches whose storage nodes overflow a level
    with every loop tile at 1 end early (loops placed later cannot shrink them)."""
    sp = space(einsum, workload, unit, arch, constraints or Constraints())
    rng = random.Random(0)  # the same order every run

    def fit(nodes) -> bool:
        smallest = [Loop(n.rank_variable, 1, n.spatial) if isinstance(n, Loop) else n for n in nodes]
        return bool(fits(Pmapping(einsum.name, (*smallest, Compute(unit))), workload, arch))

    def walk(p: Prefix, nodes: list) -> Iterator[Template]:
        if p.done(sp):
            yield _template(einsum.name, unit, nodes)
        options = list(moves(sp, p))
        rng.shuffle(options)  # a stopped walk has sampled random corners, not the first one
        for move, q in options:
            if isinstance(move.nodes[0], Storage) and not fit(nodes + list(move.nodes)):
                continue
            yield from walk(q, nodes + list(move.nodes))

    # round robin over the subtrees below the first two moves, each walked in a shuffled
    # (seeded) order, so a time-limited (anytime) run samples every choice near the root
    # and random corners below it instead of each subtree's first corner
    frontier = [(p, list(m.nodes)) for p, m in roots(sp, workload)]
    for _ in range(ANYTIME_DEPTH):
        nxt = []
        for p, nodes in frontier:
            if p.done(sp):
                yield _template(einsum.name, unit, nodes)  # only its children go on
            for move, q in moves(sp, p):
                if not (isinstance(move.nodes[0], Storage) and not fit(nodes + list(move.nodes))):
                    nxt.append((q, nodes + list(move.nodes)))
        frontier = nxt
    streams = [walk(p, nodes) for p, nodes in frontier]
    while streams:
        alive = []
        for stream in streams:
            template = next(stream, None)
            if template is not None:
                yield template
                alive.append(stream)
        streams = alive


ANYTIME_DEPTH = 2  # moves expanded breadth-first before the round robin


def relabeled(nodes, tensors: dict, ranks: dict) -> tuple:
    """Nodes with tensors and rank variables renamed (a storage node's tensors sorted, as
    templates hold them)."""
    def node(n):
        if isinstance(n, Storage):
            return Storage(n.level, tuple(sorted(tensors.get(t, t) for t in n.tensors)))
        if isinstance(n, Loop):
            return Loop(ranks.get(n.rank_variable, n.rank_variable), n.tile, n.spatial)
        return n
    return tuple(node(n) for n in nodes)


def _template(einsum: str, unit: str, nodes: list) -> Template:
    """The template of a node sequence: loop tiles become slot numbers, top-down."""
    slots = iter(range(len(nodes)))
    out = tuple(Loop(n.rank_variable, next(slots), n.spatial) if isinstance(n, Loop) else n for n in nodes)
    return Template(einsum, unit, out + (Compute(unit),), sum(isinstance(n, Loop) for n in nodes))


def _prime_factors(n: int) -> int:
    count, p = 0, 2
    while p * p <= n:
        while n % p == 0:
            n //= p
            count += 1
        p += 1
    return count + (n > 1)
