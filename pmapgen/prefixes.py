"""Exhaustive pmapgen by dynamic programming over prefixes (docs/pmapgen.md, "Pruning
partial pmappings").

A partial pmapping (its nodes from the root down) is a structural `templates.Prefix` and,
per tile choice, a row of numbers. Everything its continuations add depends only on:

- its `Prefix` (which moves follow), its fused structure (its compatibility group),
  its fused depth F once known and the lifetime depth of tensors with nodes to place;
- the `looptree.model.Above` of its bottom point: extents and temporal products per rank
  variable, fills of tensors with nodes to place, spatial factors since each tensor's
  last node, and the spatial product of each fanout level placed;
- the tiles of its fused loops (the numbers of its compatibility key).

A `Key` holds the fused structure's events as a multiset: rows whose structures differ
only in their order have the same futures and wait together, each row's own structure in
its `sid` column. Rows of one `Key` with equal extents (which tile choices divide), fused
structure and fused tiles (and, when latency is an objective, equal spatial factors) are
compared. Every continuation
adds costs that grow with the temporal iterations above (`time`, fills), with the
instances (energy) and shrink with the spatial reuse factors and the output's distinct
tiles; so a row at least as good in those and in what it has accumulated (energy, each
level's port times if latency counts, reservations by lifetime depth) ends at least as
good, and the others are dropped before they multiply; a key's kept rows also drop such
rows waiting at keys that allow a subset of its moves (`_Search._prune_narrower`). The
counts are the steps of
`looptree.model` run on columns; the rows that survive to the end are rebuilt as
templates and evaluated by the model itself (`generate.template_rows`).

Keys are processed in the order of `pmapgen.key_order` (deepest fused structure first
once many rows wait; without an energy budget, reached first), and an Einsum with a
mirror symmetry (`pmapgen.symmetry`: QK) is searched over one of each pair of mirrored
fused structures.
"""
from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import lru_cache

import numba
import numpy as np

from arch.model import Arch
from looptree.model import (Above, after_loop, after_storage, leaf_counts, link_counts, port_times, start, storage_tile,
                            tile_size)
from looptree.nodes import Loop, Storage
from pmapgen.bounds import (box_floors, child_floors, child_port_floors, energy_floor, energy_floor_of, floor_inputs,
                            floor_plan, identity_step, loop_step, stacked_plans)
from pmapgen.capacity import capacity_unit, tracked_levels
from pmapgen.columns import full
from pmapgen.constraints import Constraints, check_latency_budget
from pmapgen.fixed_key import (fixed_key, fixed_tensors, key_sets, narrowed, set_checks, sets_ok, structure_ok,
                               tile_checks, tensors_ok, tiles_ok, within_sets, within_tiles)
from pmapgen.generate import LATENCY_RTOL, ROW_LIMIT, SIZE_LIMIT, TIME_LIMIT, WAITING_LIMIT
from pmapgen.key_budgets import KeyLookup
from pmapgen.key_order import KeyOrder
from pmapgen.latency_floor import (latency, latency_floor, latency_floor_of, latency_terms, port_sets, reach,
                                   used_instances)
from pmapgen.loop_choices import LoopTables, cut_choices
from pmapgen.pareto import dominated, group_labels, pareto_mask, state_frontier
from pmapgen.symmetry import find_mirror, self_mirror
from pmapgen.templates import (Move, Prefix, Space, Template, _prime_factors, _template, moves, open_groups, roots,
                               space, storage_state)
from pmapgen.tiling import tiling_lower_bound
from pmapgen.tiles import divisor_chains
from workloads.model import Workload


@dataclass(frozen=True)
class Key:
    """What makes two prefixes' futures (and compatibility groups) structurally equal."""
    prefix: Prefix
    fused: tuple  # the events of its rows' fused structures, sorted (a multiset: see `_Search._sid`)
    depth_f: int | None  # F, once the last shared on-chip backing is placed
    lifetimes: tuple  # lifetime depth (capped at F) of each tensor with nodes still to place

    @property
    def progress(self) -> int:
        """Grows with every move (`Prefix.progress`)."""
        return self.prefix.progress

    def __hash__(self) -> int:
        # computed once, as `Prefix`'s: a key is looked up at every push, and its events are nested tuples
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.prefix, self.fused, self.depth_f, self.lifetimes))
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # (hashes are per process)


@dataclass
class Record:
    """The surviving rows of one processed prefix: where each came from (for rebuilding)."""
    batches: list  # (parent record index, Move) per incoming batch; root: (None, Move)
    batch: np.ndarray  # per row: its batch
    parent: np.ndarray  # per row: its row in the parent record
    tiles: np.ndarray  # per row: the tiles of the move's loops
    key: "Key | None" = None  # the key processed (None: a root's record)


@dataclass
class _Waiting:
    """Rows that reached a prefix not processed yet: the moves they came by, and parts of
    columns (`batch` indexes `batches`, `row` the parent record, `tiles` the move's loops)."""
    batches: list
    parts: list
    raw: bool = False  # some part was not pruned at its push (fewer than `PUSH_PRUNE_ROWS` rows)


SUBTREE_ROWS = 1 << 20  # past this many waiting rows, keys are processed deepest structure first
MERGE_ROWS = 1 << 18  # rows waiting at one prefix before they are merged and pruned
NARROW_ROWS = 1 << 19  # past this many waiting rows, waiting parts are held narrow (`_compact`)
COMPACT_ROWS = 256  # smaller waiting parts keep every column (`_compact`: its checks would cost more than they save)
# within an energy budget alone, a loop move's choices and cuts are one compiled call (`_Search._within_budget`,
# `pmapgen.loop_choices`); False: `_Search._loop_choices`' numpy calls (the same choices and cuts)
LOOP_KERNEL = True
# a batch of fewer rows pushed to a key not done waits unpruned, and is pruned with the others when the key
# is processed (`_Search._merged`): one prune instead of one per batch (`_Search._push`)
PUSH_PRUNE_ROWS = 256
# a latency budget also cuts by each finite port's bits still to come (`pmapgen.latency_floor`);
# False: by what the ports moved so far alone (`benchmarks/latency_floor.py` compares the two)
PORT_FLOORS = True
# the prune compares a closed port's time (`_Search._closed_ports`) as at least the least latency;
# False: as it is (`benchmarks/latency_floor.py` compares the two)
CLOSED_PORTS = True
# rows pushed to a prefix (not done) whose moves none of them can take are dropped at once
# (`_Search._continues`); False: they wait, and processing their key gives them no children
DEAD_CUT = True
# with it, a row in a block below the fused region must fit some storage run with the block's rank
# variables at their extents and the others at 1 (`_Search._continues`); False: with its extents
BLOCK_CUT = True
# with latency the only objective, the prune leaves out the state columns of tensors whose accesses
# to come reach no finite port (`_Search._unbound`); False: it compares them
UNBOUND_TENSORS = True
# with latency the only objective, a block's temporal loops follow one order per class of the tensors
# they index that reach a finite port (`_Search._ordered`); False: per class of every tensor they index
UNBOUND_ORDER = True
# a loop move's choices whose compute term alone is over the latency budget, with the instances to come
# at most the open fanouts' sizes, are cut before their columns are gathered (`_Search._compute_cut`);
# False: by the full floor alone (it cuts them too)
COMPUTE_CUT = True
# a spatial group's bounds are enumerated loop by loop, keeping only partial choices whose bounds, with
# the most the loops still to enumerate may add, can reach the instances the compute term needs within
# the latency budget (`_Search._reach_cut`); False: every choice is enumerated, then cut
REACH_CUT = True
# a key's block of temporal loops is held as its loops but the last in name order, then the last: what
# follows a block depends only on which rank variables it holds and its last loop (`_Search._key`);
# False: in the order placed
BLOCK_SETS = True
# the rows a key keeps prune the rows waiting at keys whose allowed moves are a subset of its own
# (`_Search._prune_narrower`); False: each key's rows are compared only among themselves
CROSS_KEYS = True
# a done prefix's finished rows (`_Search.done`) are pruned on their final criteria when it is
# processed (`_Search._final_frontier`), and only those are held; False: every row its prune kept
DONE_PRUNE = True
# a partial row (F known) is dropped once a finished row of its compatibility group is at most its least
# completion in every final criterion (`_Search._beaten`: reservations to F, energy, latency); False: kept
INCUMBENT_CUT = True
# with INCUMBENT_CUT: rows pushed to a done key are finished and held at once (`_push`)
HOLD_AT_PUSH = True
REACH_ORDER = True  # with INCUMBENT_CUT: keys processed reached first (`key_order.Reached`)
# with REACH_ORDER and `max_rows`: past this share of it waiting, the highest-progress key is taken even if
# rows may still come to it (they then wait there again): at batch 1, AV's roots 13 and 15 completed so
# instead of stopping at the row limit (sixty-fifth session)
SPILL_AT = 0.75
PORT_SETS = 1  # the most ports one such floor sums (`pmapgen.latency_floor.port_sets`)
BUDGET_RTOL = 1e-9  # slack on an energy budget: the bound and the model sum in different orders
BOX_RTOL = 1e-12  # slack on a spatial group's box bound (`_box_cut`), summed in floats
GROWTH = 1.1  # a rising budget's next value over its last (generate_by_rising_budgets)
# `_Search._moves` of earlier searches in this process, per space: the keyed searches of a
# refinement are thousands of small searches of one Einsum, in one space for most of them
# (at batch 1, Q keyed by I's c_T: 617 of 668 under 0.1 s, 11 ms each enumerating moves)
_SHARED_MOVES: dict = {}
SHARED_MOVES = 20000  # prefixes held in all (what a search keeps of its own is not bounded by it)
_SHARED_FLOORS: dict = {}  # the same for `pmapgen.bounds.energy_floor_of`, whose plans are cached per floor
SHARED_FLOORS = 64  # spaces held in it, and in `_SHARED_MEMOS`
_SHARED_MEMOS: dict = {}  # `templates.Space.memo` per space: storage states are few (hundreds per space)


def _concat(parts: list[dict]) -> dict:
    """Waiting parts (`_compact`) as one set of columns, each at its full width (`_WIDE`)."""
    width = max(p["tiles"].shape[1] for p in parts)
    out = {c: np.concatenate([p[c] for p in parts], dtype=_WIDE[parts[0][c].dtype]) for c in parts[0]
           if c != "tiles"}
    out["tiles"] = np.concatenate([_zero_padded(p["tiles"], width) for p in parts], dtype=np.int64)
    return out


class _Wide(dict):
    """dtype -> the type a column is computed in: int64 for integers, float64 for floats
    (`_compact` may hold a waiting part's columns narrower); a lookup, not a call, per column."""

    def __missing__(self, dtype: np.dtype) -> np.dtype:
        out = self[dtype] = (np.dtype(np.int64) if dtype.kind in "ui" else np.dtype(np.float64) if dtype.kind == "f"
                             else dtype)
        return out


_WIDE = _Wide()


def _widened(cols: dict) -> dict:
    """A waiting part (`_compact`) with every column back at its full width (`_WIDE`)."""
    return {c: v if (w := _WIDE[v.dtype]) == v.dtype else v.astype(w) for c, v in cols.items()}


def _zero_padded(a: np.ndarray, width: int) -> np.ndarray:
    """A 2-D array with zero columns appended up to `width` (`np.pad`'s, at a tenth of its
    per-call cost: a search pads thousands of small arrays)."""
    if a.shape[1] == width:
        return a
    out = np.zeros((a.shape[0], width), dtype=a.dtype)
    out[:, :a.shape[1]] = a
    return out


def _compact(cols: dict, narrow: bool = True) -> dict:
    """A waiting part with each column that is equal on every row held as one value,
    broadcast (read-only, no memory per row): at batch 1 about half a part's columns are
    (reservations of levels not yet reached, a tensor's fills above its backing, ...).
    With `narrow`, the others are held in the narrowest type that holds every value
    exactly: non-negative integers unsigned (extents, temporal bounds, fills, tiles),
    floats as float32 where each value is one (reservations and bits are products of small
    factors). Reading a part widens them again (`_concat`, `_widened`). At batch 1, V's
    waiting rows took 223 bytes each at full width, 129 narrowed (sixty-second session)."""
    if len(cols["tiles"]) < COMPACT_ROWS:
        return cols
    for c, v in cols.items():
        if v.ndim != 1 or not v.strides[0]:
            if narrow and v.ndim == 2 and v.size and v.min() >= 0:  # (tiles)
                if (t := np.min_scalar_type(int(v.max()))).itemsize < v.itemsize:
                    cols[c] = v.astype(t)
            continue
        if v.dtype.kind in "if":
            lo, hi, single = (_span if v.dtype.kind == "i" else _float_span)(v)
        else:
            lo, hi, single = 0, int(not (v == v[0]).all()), False
        if lo == hi:
            cols[c] = full(v[:1].copy(), len(v))  # (a copy: the view must not hold the whole column)
        elif not narrow:
            continue
        elif v.dtype.kind == "i" and lo >= 0 and (t := np.min_scalar_type(int(hi))).itemsize < v.itemsize:
            cols[c] = v.astype(t)
        elif v.dtype.kind == "f" and single:
            cols[c] = v.astype(np.float32)
    return cols


@numba.njit(cache=True)
def _span(v):
    """(least, most, False) of a non-empty integer column, in one pass (`_compact`)."""
    lo = hi = v[0]
    for x in v:
        lo, hi = min(lo, x), max(hi, x)
    return lo, hi, False


@numba.njit(cache=True)
def _float_span(v):
    """(least, most, whether every value is a float32) of a non-empty float column, in one
    pass (`_compact`; a NaN is neither: it keeps the column as it is)."""
    lo = hi = v[0]
    single = True
    for x in v:
        if x != x:
            return 0.0, 1.0, False
        lo, hi = min(lo, x), max(hi, x)
        single = single and np.float64(np.float32(x)) == x
    return lo, hi, single


@dataclass
class Stats:
    prefixes: int = 0  # structural prefixes processed
    reached: int = 0  # keys reached: each is processed before the search ends (`size`)
    rows: int = 0  # partial rows built
    kept: int = 0  # rows that survived the merge at their prefix
    beaten: int = 0  # of those, dropped before they were extended by a finished row (`_Search._beaten`)
    spilled: int = 0  # keys taken past `SPILL_AT`, whether or not every row that may reach them had come
    crossed: int = 0  # waiting rows dropped by a wider key's rows (`_Search._prune_narrower`)
    seconds: float = 0.0
    roots: list = field(default_factory=list)  # prefixes processed per root (`_Search.run`'s order)


# rows built that count as one key in `size`: at gpt3 batch 1 one key of a uniform-budget search
# costs 2 to 6 ms and one row built about 0.4 us (eighty-fourth session)
ROWS_PER_KEY = 5000


def size(stats: Stats) -> int:
    """What a search is known to cost so far: keys reached, plus rows built per ROWS_PER_KEY.
    It only grows, and every key reached is processed before the search ends, so a search
    whose size passes a limit would pass it whole: a size limit (`_Search.run`) cuts it as
    soon as that is known. A count, not a time: the same search is cut at the same key on
    every machine."""
    return stats.reached + stats.rows // ROWS_PER_KEY


class _Search:
    """One Einsum on one compute unit."""

    def __init__(self, einsum: str, workload: Workload, arch: Arch, unit: str, constraints: Constraints,
                 objectives=("energy", "latency"), budget: float | None = None, max_rows: int | None = None):
        self.w, self.a, self.unit = workload, arch, unit
        self.max_rows = max_rows  # stop (incomplete) once more partial rows than this wait at once
        self.waiting_rows = 0
        self.budget = budget  # drop rows whose every completion exceeds this energy (pmapgen.bounds)
        self.latency = "latency" in objectives  # port times are criteria only if latency is
        # energy is a criterion if it is an objective or bounded (a row within an energy
        # budget must not be pruned by one over it); for latency alone it is none
        self.energy = "energy" in objectives or budget is not None
        self.e = workload.einsum(einsum)
        given = constraints  # the mirror only where the caller's are their own image (`find_mirror`)
        constraints = narrowed(constraints)
        check_latency_budget(constraints, objectives)
        # drop rows whose every completion takes longer than this (`pmapgen.latency_floor`)
        self.latency_budget = constraints.latency_budget
        self.sp: Space = space(self.e, workload, unit, arch, constraints)
        self.latency_terms = latency_floor_of(einsum, workload, arch, unit, self.sp.groups) if self.latency else None
        self._tops: dict = {}  # Prefix -> (`open_groups`, the tensors backed at the top level)
        self._closed: dict = {}  # Prefix -> `_closed_ports`
        self._touches: dict = {}  # Prefix -> `_touched`
        self._unbounds: dict = {}  # Prefix -> `_unbound`
        self._latency_columns = () if not self.latency else (
            "inst", *(f"e:{r}" for r in self.e.rank_variables),
            *(f"sp:{k}" for k in self.latency_terms.fan_sizes),
            *(f"{port}:{m.name}" for m in self.latency_terms.memories for port in ("rb", "wb")))
        self.fixed = None if constraints.key is None else fixed_key(constraints.key, einsum, workload, arch, unit)
        self.fixed_tensors = fixed_tensors(constraints.tensor_keys, einsum, workload, arch, unit) \
            if constraints.tensor_keys else None
        self.key_sets = key_sets(constraints.tensor_key_sets, einsum, workload, arch, unit) \
            if constraints.tensor_key_sets else None
        self.keyed = self.fixed is not None or self.fixed_tensors is not None or self.key_sets is not None
        # per-key budgets: each row's bound is its `kb` column (`pmapgen.key_budgets`)
        self.key_lookup = None if constraints.key_budgets is None or budget is None else \
            KeyLookup(constraints.key_budgets, einsum, workload, arch, unit)
        self._in_key: dict = {}  # (Key.fused, F) -> whether it may still end with the fixed key and c_T
        self.allowed = constraints.tiles
        # (`_ordered`: only where no loop order is imposed, which may forbid the one order kept)
        self._orders = self.latency and not self.energy and UNBOUND_TENSORS and UNBOUND_ORDER \
            and not constraints.loop_order
        self.ranks = list(self.sp.relevance)
        self.path = self.sp.path
        self.levels = tracked_levels(arch, unit)
        self.n_res = len(self.e.rank_variables) + 1  # res:<level>:k for k = 0..(most fused loops)
        self.shared = [t for t in self.e.tensors if workload.is_shared(t)]
        # column names, formatted once: a search reads them hundreds of thousands of times
        ranks, tensors = self.e.rank_variables, self.e.tensors
        self._ecols, self._tcols = tuple((r, f"e:{r}") for r in ranks), tuple((r, f"t:{r}") for r in ranks)
        self._fcols, self._bcols = tuple((x, f"f:{x}") for x in tensors), tuple((x, f"b:{x}") for x in tensors)
        self._res_cols = {lv: tuple(f"res:{lv}:{k}" for k in range(self.n_res)) for lv in self.levels}
        self._all_res = tuple(c for lv in self.levels for c in self._res_cols[lv])
        self._backing_cols = {lv: f"backing:{lv}" for lv in self.levels}
        self._distinct_cols = {x: tuple(f"t:{r}" for r in self.e.use(x).ranks) for x in tensors}
        self.mirror = find_mirror(self.e, workload, self.sp, given, tuple(self.shared)) \
            if self.fixed is None and self.fixed_tensors is None else \
            self_mirror(self.e, workload, self.sp, given, tuple(self.shared))
        self._drops: dict = {}  # (Key.fused, final) -> whether the mirror image of its structure is searched instead
        self.records: list[Record] = []
        # a row's fused structure (shared tensors' backing levels, then the loops and backings
        # placed while fused: its compatibility group) is its `sid` column, an index into these
        self._structures: list[tuple] = []
        self._sids: dict[tuple, int] = {}
        self._multisets: list[tuple] = []  # sid -> its events sorted: the `Key.fused` its rows wait at
        self._appends: dict = {}  # (sid, events) -> the sid of the structure with the events appended
        self.incoming: dict[Key, _Waiting] = {}
        self._events: dict = {}  # fused event -> its entry in `_reach_vector`
        # the keys rows wait at; reached first where finished rows drop partial ones (`_incumbent_cut`)
        self.order = KeyOrder(self._reach_vector if REACH_ORDER and self._incumbent_cut() else None)
        self.done: list[tuple[Key, int, dict]] = []
        # per compatibility group (F, sid, fused tiles), the frontier of the finished rows' final
        # criteria that may drop partial rows (`_hold`, `_beaten`)
        self.incumbents: dict[tuple, np.ndarray] = {}
        self._held: set = set()  # the (F, sid) of the incumbents' groups
        self._move_lists: dict = {}  # Prefix -> `_moves`
        # what `_moves` depends on: the space (tensor_keys and key only narrow it, `narrowed`), capacities, bits
        self._space_key = (repr(replace(self.sp, constraints=replace(self.sp.constraints, key=None, tensor_keys={},
                                                                     key_budgets=None, latency_budget=None))),
                           arch, unit, tuple(workload.tensors[t].bits for t in self.e.tensors))
        if len(_SHARED_MEMOS) >= SHARED_FLOORS and self._space_key not in _SHARED_MEMOS:
            _SHARED_MEMOS.clear()
        self.sp = replace(self.sp, memo=_SHARED_MEMOS.setdefault(self._space_key, {}))
        # this space's `_SHARED_MOVES`, looked up once: the key hashes the arch field by field
        # (1% of the energy set's workers when `_moves` looked it up per prefix)
        self._shared_moves: dict = _SHARED_MOVES.setdefault(self._space_key, {})
        self._move_adds: dict = {}  # storage Move -> `_adds`
        self._fanouts: dict = {}  # spatial dim -> `_fanout`
        self._tile_checks: dict = {}  # structure id -> `pmapgen.fixed_key.tile_checks` (a keyed search's)
        self._set_checks: dict = {}  # (structure id, F) -> `pmapgen.fixed_key.set_checks`
        self._plans: dict = {}  # Prefix -> its energy floor's `pmapgen.bounds.floor_plan`
        self._opens: dict = {}  # Prefix -> `_open`
        self._steps: dict = {}  # (loop Move, `_open` of the prefix it leads to) -> `pmapgen.bounds.loop_step`
        self._move_tables: dict = {}  # loop Move -> `_loop_tables`
        self._inputs: tuple = (None, None)  # (the columns of the key being extended, their `floor_inputs`)
        self._rooms: tuple = (None, None)  # (those columns, their `_room`)
        self._normal: dict = {}  # (prefix, F) -> the prefix as merge keys hold it (`_key`)
        # per rank variable (`Space.relevance` order), whether its loop count can bind: fewer
        # loops allowed than its size's prime factors (`_key`)
        self._binding = tuple(self.sp.max_loops[r] < _prime_factors(self.w.rank_sizes[r]) for r in self.sp.relevance)
        self._prefixes: dict = {}  # Prefix -> the one object equal to it (`_interned`)
        self._narrower: dict = {}  # `_masked` key -> the waiting keys after a temporal loop (`_prune_narrower`)
        self._masks: dict = {}  # Key -> `_masked`
        self._states: dict = {}  # Key -> `_state_columns`
        self._criteria_cols: dict = {}  # Prefix -> `_criteria_columns`
        self.stats = Stats()
        self._root_of: dict = {}  # Key -> the root its rows came from (keys of two roots differ: `search_part`)
        self._root = 0  # the root of the key being processed
        self._sub: tuple[int, int] | None = None  # (j, m): sub-part j of m (`run`)
        self._from_open = False  # the fused structure of the key being processed is still open (F unknown)
        self._owners: dict = {}  # (fused structure, F) -> `_owner`
        # the floor's plans are cached per floor (`pmapgen.bounds._plan`): one floor per space and rank sizes
        floor_key = (self._space_key, tuple(workload.rank_sizes[r] for r in self.e.rank_variables))
        self.floor = _SHARED_FLOORS.get(floor_key)
        if self.floor is None:
            if len(_SHARED_FLOORS) >= SHARED_FLOORS:
                _SHARED_FLOORS.clear()
            self.floor = _SHARED_FLOORS[floor_key] = energy_floor_of(self.sp, workload, arch)
        # per set of finite ports, the energy floor with their seconds per bit as its costs
        # (`pmapgen.latency_floor`, "the bits still to come"): (`PortSet`, floor)
        self.port_floors = [] if self.latency_budget is None or not PORT_FLOORS else [
            (ps, replace(self.floor, energy={(kind, m.name): ps.costs.get((kind, m.name), 0.0)
                                             for m in self.latency_terms.memories for kind in ("read", "write")},
                         compute_pJ=0.0))
            for ps in port_sets(self.latency_terms.memories, PORT_SETS)]
        # rank variables indexing each tensor at most once: the floor does not fall as a temporal loop's bound grows
        self._monotone = {r: bool(self.floor.ranks[:, i].max() <= 1) for i, r in enumerate(self.e.rank_variables)}
        self.lowest_floor = math.inf  # the least energy floor of the rows pushed (with a budget)
        self.budget_cut = False  # some row with a finite floor was dropped for the budget (`Stats.budget_cut`)
        self.cut_floor = math.inf  # the least finite floor of a row dropped for the budget (`Stats.cut_floor`)

    # ---- columns <-> the model's Above -------------------------------------------------
    def _above(self, cols: dict, depth: int, lifetimes: dict) -> Above:
        return Above(extents={r: cols[c] for r, c in self._ecols}, temporal={r: cols[c] for r, c in self._tcols},
                     time=cols["time"], fills={x: cols[c] for x, c in self._fcols}, instances=cols["inst"],
                     between={x: cols[c] for x, c in self._bcols}, depth=depth, lifetime=lifetimes)

    def _store(self, cols: dict, above: Above) -> None:
        for r, c in self._ecols:
            cols[c] = above.extents[r]
        for r, c in self._tcols:
            cols[c] = above.temporal[r]
        for x, c in self._fcols:
            cols[c] = above.fills[x]
        for x, c in self._bcols:
            cols[c] = above.between[x]
        cols["time"], cols["inst"] = above.time, above.instances

    # ---- the search ----------------------------------------------------------------------
    def run(self, deadline: float | None, root: int | None = None, max_size: int | None = None,
            max_waiting: int | None = None, sub: tuple[int, int] | None = None) -> str:
        """Search to the end (""), or until the deadline (TIME_LIMIT), more than `max_rows`
        waiting rows (ROW_LIMIT), a `size` over `max_size` (SIZE_LIMIT) or more than
        `max_waiting` keys waiting at once (WAITING_LIMIT) stop it: the limit that did. The
        keys waiting are a search's breadth, a sign (not a bound) that it is large: at gpt3
        batch 1 the uniform searches that complete hold at most 398 keys waiting, the others
        pass 500 in a fraction of the time their size takes to pass the probe's
        (`ffm.slack.PROBE_WAITING`). `root`: only from that root (an index into
        `templates.roots`; `search_part`). Keys reached first spill past `SPILL_AT` of `max_rows`
        (`key_order.Reached.pop`): a key processed twice extends each row once, and prunes
        within each batch, which drops only rows a whole-key prune would.

        `sub` = (j, m): sub-part j of m of the root's search. A row's fused structure is final
        once F is (`Key.depth_f`), and rows of two structures never meet at a key after
        that: sub-part j keeps only the rows whose structure is final at a structure it
        owns (`_owner`). So past that point each sub-part searches its own compatibility
        groups whole (their incumbents too), before it every sub-part searches all, and the
        sub-parts' results pruned together are the whole search's
        (`pmapgen.all_einsums.merge_subparts`). A root whose F is known from the start is
        one group: sub-part 0 searches it."""
        assert sub is None or root is not None, "a sub-part is of one root"
        self._sub = sub
        for i, (prefix, move) in enumerate(roots(self.sp, self.w)):
            self.stats.roots.append(0)
            if root is not None and i != root:
                continue
            self._root = i
            cols = self._root_columns()
            backing = {**dict(prefix.inner), **dict(prefix.shared_onchip)}  # root tensors are in DRAM
            sid = self._sid(tuple((t, backing[t]) for t in self.shared))
            cols["sid"] = np.array([sid], dtype=np.int64)
            key = Key(prefix, self._multisets[sid], None if prefix.shared_onchip else 0, ())
            if sub is not None and key.depth_f is not None and sub[0] != 0:  # one group from the root: sub-part 0's
                continue
            lifetimes = {t: 0 for t in self.e.tensors}
            self.records.append(Record([(None, Move(()))], np.zeros(1, np.int64), np.zeros(1, np.int64),
                                       np.zeros((1, 0), np.int64)))
            self._from_open = key.depth_f is None
            self._emit_storage(len(self.records) - 1, key, move, cols, lifetimes, root=True)
        spill_at = None if self.max_rows is None or self.order.reached is None else self.max_rows * SPILL_AT
        while self.order:
            spill = spill_at is not None and self.waiting_rows > spill_at
            self.stats.spilled += spill
            for key in self.order.pop(deepest=self.waiting_rows > SUBTREE_ROWS, spill=spill):
                if deadline is not None and time.perf_counter() > deadline:
                    return TIME_LIMIT
                if self.max_rows is not None and self.waiting_rows > self.max_rows:
                    return ROW_LIMIT
                if max_size is not None and size(self.stats) > max_size:
                    return SIZE_LIMIT
                if max_waiting is not None and len(self.incoming) > max_waiting:
                    return WAITING_LIMIT
                self._process(key)
        return ""

    def _root_columns(self) -> dict:
        cols: dict = {}
        self._store(cols, start(self.e, self.w))
        cols = {k: np.array([v], dtype=np.int64) for k, v in cols.items()}
        for k, m in enumerate(self.a.path(self.unit)):
            if m.fanout:
                cols[f"sp:{k}"] = np.ones(1, np.int64)
        cols["energy"] = np.zeros(1)
        for lv in self.path if self.latency else ():  # bits moved per port: only latency needs them
            cols[f"rb:{lv}"] = np.zeros(1)
            cols[f"wb:{lv}"] = np.zeros(1)
        for lv in self.levels:
            cols[f"backing:{lv}"] = np.zeros(1)
            for k in range(self.n_res):
                cols[f"res:{lv}:{k}"] = np.zeros(1)
        return cols

    def _push(self, key: Key, parent: int, move: Move, cols: dict, tiles: np.ndarray, checked: bool = False) -> None:
        """Rows reaching `key` by one move; pruned at once if they are `PUSH_PRUNE_ROWS` or
        more (a smaller batch waits as it came, and `_merged` prunes it with the key's other
        batches: most small batches keep every row), and merged with the rows already
        waiting there once they are many (memory stays near the frontiers' size). At a done
        key they are also finished and held as incumbents at once (`HOLD_AT_PUSH`): the key
        is processed only once no waiting key may reach it, after most of its region.
        `checked`: the caller has cut the rows over the budgets already (a loop move:
        `_over_budget_cut`, `_over_latency_cut`, whose floors are the children's own; at batch 1
        the latency floor at the push cut none of the 6.4 M rows QK's loop moves built in 30 s,
        sixty-second session)."""
        n = len(tiles)
        if n and self.mirror is not None:
            final = key.depth_f is not None
            keep = self._where(cols["sid"], lambda s: not self._mirrored(self._structures[s], final))
            if not keep.all():
                cols, tiles, n = _rows(cols, keep), tiles[keep], int(keep.sum())
        if not n:
            return
        if self._sub is not None and self._from_open and key.depth_f is not None and \
                self._owner(key) != self._sub[0]:
            return
        self.stats.rows += n
        if self.keyed:
            cols, tiles, n = self._within_key(key, cols, tiles)
            if not n:
                return
        if self.budget is not None and not checked:
            floor = self._floor(key.prefix, cols)
            self.lowest_floor = min(self.lowest_floor, float(floor.min()))
            ok = floor <= cols.get("kb", self.budget) * (1 + BUDGET_RTOL)
            if not ok.all():
                self._cut(floor[~ok])
                cols, tiles, n = _rows(cols, ok), tiles[ok], int(ok.sum())
                if not n:
                    return
        if self.latency_budget is not None and not checked:
            threshold = self.latency_budget * (1 + LATENCY_RTOL)
            ok = self._latency_floor(key.prefix, cols, threshold) <= threshold
            if not ok.all():
                cols, tiles, n = _rows(cols, ok), tiles[ok], int(ok.sum())
                if not n:
                    return
        if DEAD_CUT:
            ok = self._continues(key, cols, n)
            if ok is not None and not ok.all():
                cols, tiles, n = _rows(cols, ok), tiles[ok], int(ok.sum())
                if not n:
                    return
        if key not in self.incoming:
            self.incoming[key] = _Waiting([], [])
            self.stats.reached += 1
            self.order.add(key)
            self._root_of[key] = self._root
            if CROSS_KEYS and key.prefix.last == "temporal":
                self._narrower.setdefault(self._masked(key), set()).add(key)
        waiting = self.incoming[key]
        waiting.batches.append((parent, move))
        cols = {**cols, "batch": np.full(n, len(waiting.batches) - 1, np.int64), "tiles": tiles}
        narrow = self.waiting_rows > NARROW_ROWS
        if HOLD_AT_PUSH and key.depth_f is not None and self._incumbent_cut() and key.prefix.done(self.sp):
            cols = self._prune(key, cols)
            self._hold(key, self._finish(key, cols))
        elif n >= PUSH_PRUNE_ROWS:
            cols = self._prune(key, cols)
        else:
            waiting.raw = True
        waiting.parts.append(_compact(cols, narrow))
        self.waiting_rows += len(waiting.parts[-1]["batch"])
        if len(waiting.parts) > 1 and (held := sum(len(p["batch"]) for p in waiting.parts)) > MERGE_ROWS:
            waiting.parts = [_compact(self._prune(key, _concat(waiting.parts)), narrow)]
            waiting.raw = False
            self.waiting_rows += len(waiting.parts[0]["batch"]) - held

    def _owner(self, key: Key) -> int:
        """The sub-part (of `_sub`'s m) that owns a key whose fused structure is final: a
        function of that structure alone (a CRC of its canonical form, the same in every
        process: hashes of strings, and so the order of frozensets, differ between them)."""
        group = (key.fused, key.depth_f)
        out = self._owners.get(group)
        if out is None:
            out = self._owners[group] = zlib.crc32(repr(_canonical(group)).encode()) % self._sub[1]
        return out

    def _continues(self, key: Key, cols: dict, n: int) -> np.ndarray | None:
        """Per row pushed to `key` (not done), whether it may have a child: some loop move
        whose rank variables it has not run out of (every loop's bound is at least 2), or
        some storage run that fits it (`_fits`, as processing the key would ask). None
        where every row may. A row with none would wait, be pruned and be processed for
        nothing; it dominates no row that has one (a row at most its reservations, with
        its extents and tiles, has whatever children it has), so dropping it changes no
        frontier (sixtieth session: at batch 1, 27.5% of the rows V's search within its
        latency floor kept at root 6). In a block below the fused region, a row must reach
        a storage run that fits with the block's rank variables at their extents and the
        others at best 1 (sixty-first session: V's root 2 within its latency floor built
        6.78 M rows instead of 9.16 M)."""
        if key.prefix.done(self.sp):
            return None
        options, plan = self._moves(key.prefix)
        block = key.prefix.block
        if block and not key.prefix.backing and BLOCK_CUT:
            # after a temporal loop below the fused region the next cut is a storage run (no
            # spatial group follows a temporal loop there), and no rank variable of the block
            # loops again before it: at best every other one is down to 1 by then
            view = {**cols, "row": np.arange(n), **{f"e:{r}": np.ones(n, dtype=np.int64)
                                                     for r in self.e.rank_variables if r not in block}}
            return self._fits(plan, view, _Tiles(self, view)).any(axis=0) if plan[0] else np.zeros(n, dtype=bool)
        ok = np.zeros(n, dtype=bool)
        for move, _, adds in options:
            if adds is None:
                can = full(np.logical_and.reduce([cols[f"e:{lp.rank_variable}"] >= 2
                                                  for lp in move.nodes]), n)
                if can.all():
                    return None
                ok |= can
        if plan[0]:
            view = {**cols, "row": np.arange(n)}
            ok |= self._fits(plan, view, _Tiles(self, view)).any(axis=0)
        return ok

    def _sid(self, fused: tuple) -> int:
        """The id of a fused structure (its `sid` column). Rows whose structures hold the
        same events in another order (fused loops over m then n, or n then m) have the
        same moves and costs ahead: they wait at one key (`Key.fused`, the events sorted)
        and are extended together, and `sid`, a state column, keeps them from being
        compared (at batch 1, V within 10.4 mJ: 6,074 keys instead of 11,654; QK within
        3.47 mJ: 2,591 instead of 8,752)."""
        sid = self._sids.get(fused)
        if sid is None:
            sid = self._sids[fused] = len(self._structures)
            self._structures.append(fused)
            self._multisets.append(tuple(sorted(fused, key=repr)))
        return sid

    def _appended(self, sids: np.ndarray, events: tuple) -> np.ndarray:
        """Each row's structure id once `events` are appended to its structure."""
        if not events:
            return sids
        distinct, inverse = _distinct(sids)
        new = np.array([self._append(s, events) for s in distinct], dtype=np.int64)
        return full(new[:1], len(sids)) if inverse is None else new[inverse]

    def _append(self, sid: int, events: tuple) -> int:
        out = self._appends.get((sid, events))
        if out is None:
            out = self._appends[sid, events] = self._sid(self._structures[sid] + events)
        return out

    @staticmethod
    def _where(sids: np.ndarray, holds, dtype=bool) -> np.ndarray:
        """Per row, `holds` of its structure id (called once per distinct id)."""
        distinct, inverse = _distinct(sids)
        if not distinct:
            return np.zeros(0, dtype=dtype)
        ok = np.array([holds(s) for s in distinct], dtype=dtype)
        return np.full(len(sids), ok[0]) if inverse is None else ok[inverse]

    def _mirrored(self, fused: tuple, final: bool) -> bool:
        """Whether rows of this fused structure are left to its mirror image's (cached)."""
        if self.mirror is None:
            return False
        drops = self._drops.get((fused, final))
        if drops is None:
            drops = self._drops[fused, final] = self.mirror.drops(fused, final)
        return drops

    def _may_fit(self, fused: tuple, depth_f: int | None) -> bool:
        """Whether a fused structure may still end with the fixed key and c_T (cached)."""
        ok = self._in_key.get((fused, depth_f))
        if ok is None:
            ok = self._in_key[fused, depth_f] = (
                (self.fixed is None or structure_ok(self.fixed, fused, depth_f, self.w, self.e.name))
                and (self.fixed_tensors is None or tensors_ok(self.fixed_tensors, fused, depth_f, self.w, self.e.name))
                and (self.key_sets is None or sets_ok(self.key_sets, fused, depth_f, self.w, self.e.name)))
        return ok

    def _within_key(self, key: Key, cols: dict, tiles: np.ndarray) -> tuple[dict, np.ndarray, int]:
        """The rows that may still end with the fixed compatibility key and c_T (`pmapgen.fixed_key`)."""
        sids, _ = _distinct(cols["sid"])
        keep = np.zeros(len(tiles), dtype=bool)
        for sid in sids:
            fused = self._structures[sid]
            if not self._may_fit(fused, key.depth_f):
                continue
            ok = np.ones(len(tiles), dtype=bool) if len(sids) == 1 else cols["sid"] == sid
            if self.fixed is not None:
                ok &= tiles_ok(self.fixed, fused, cols)
            if self.fixed_tensors is not None:
                checks = self._tile_checks.get(sid)
                if checks is None:
                    checks = self._tile_checks[sid] = tile_checks(self.fixed_tensors, fused, self.w, self.e.name)
                ok &= within_tiles(checks, cols)
            if self.key_sets is not None:
                checks = self._set_checks.get((sid, key.depth_f))
                if checks is None:
                    checks = self._set_checks[sid, key.depth_f] = set_checks(self.key_sets, fused, key.depth_f,
                                                                              self.w, self.e.name)
                ok &= within_sets(checks, cols)
            keep |= ok
        if keep.all():
            return cols, tiles, len(tiles)
        return _rows(cols, keep), tiles[keep], int(keep.sum())

    def _floor(self, prefix: Prefix, cols: dict) -> np.ndarray:
        return energy_floor(self.floor, cols, self._plan(prefix))

    def _latency_floor(self, prefix: Prefix, cols: dict, threshold: float = math.inf) -> np.ndarray:
        """Per row, at most the latency of every completion (`pmapgen.latency_floor`)."""
        n = len(cols["inst"])
        return self._latency_floors(prefix, cols, cols, np.arange(n, dtype=np.int64), np.zeros((n, 0), np.int64),
                                    identity_step(self.floor),
                                    floor_inputs(self.floor, cols) if self.port_floors else (None, None, None),
                                    threshold)

    def _latency_floors(self, prefix: Prefix, parent: dict, child: dict, parents: np.ndarray, bounds: np.ndarray,
                        step, inputs: tuple, threshold: float) -> np.ndarray:
        """Per row of `child` (the columns the floor reads, at `prefix`), the compute and port
        terms, then each finite port set's bits still to come (`port_floors`), those only
        for the rows still at most `threshold` (the others keep a floor above it). The
        ports' floors come from row `parents[i]` of `parent` (its `floor_inputs`, `inputs`)
        through loop bounds `bounds[i]` under `step` (`child_floors`): a row's own, with
        no bounds and the identity step (`_latency_floor`)."""
        tops = self._latency_tops(prefix)
        reached = reach(self.latency_terms, child, tops[0])
        floor = latency_floor(self.latency_terms, child, *tops, reached)
        if not self.port_floors or not (floor <= threshold).any():
            return floor
        ints, _, free = inputs
        seconds = np.array([ps.seconds(parent) for ps, _ in self.port_floors])
        spread = np.array([ps.spread(reached[1]) for ps, _ in self.port_floors])
        return child_port_floors(self.floor, self._port_plans(prefix), ints, seconds, free, parents, bounds, step,
                                 spread, floor, threshold)

    def _port_plans(self, prefix: Prefix) -> tuple:
        """The port floors' plans at `prefix`, stacked (`pmapgen.bounds.stacked_plans`)."""
        plans = self._plans.get((prefix, "ports"))
        if plans is None:
            plans = self._plans[prefix, "ports"] = stacked_plans([self._plan(prefix, f) for _, f in self.port_floors])
        return plans

    def _latency_tops(self, prefix: Prefix) -> tuple:
        tops = self._tops.get(prefix)
        if tops is None:
            on_chip = dict(prefix.shared_onchip)
            tops = self._tops[prefix] = (open_groups(self.sp, prefix),
                                         frozenset(t for t in self.e.tensors if on_chip.get(t, 0) == 0))
        return tops

    def _plan(self, prefix: Prefix, f=None):
        """The energy floor's plan at `prefix` (`f`: a port's floor instead, `port_floors`)."""
        f = f or self.floor
        at = prefix if f is self.floor else (prefix, id(f))
        plan = self._plans.get(at)
        if plan is None:
            # (fanout levels that can get no more spatial loops: their spread is gone)
            closed = frozenset(self.floor.spread) - open_groups(self.sp, prefix)
            plan = self._plans[at] = floor_plan(f, dict(prefix.inner), storage_state(self.sp, prefix).candidates,
                                                closed)
        return plan

    def _prune(self, key: Key, cols: dict) -> dict:
        if len(cols["energy"]) < 2:  # (one row is its own frontier)
            return cols
        keep = self._frontier(key, cols)
        if keep.all():  # (most prunes at batch 1 keep every row: no copy; columns are never written in place)
            return cols
        return _rows(cols, keep)

    def _process(self, key: Key) -> None:
        """Merge the rows that reached `key`, keep the frontier, and extend it by every move."""
        waiting = self.incoming.pop(key)
        if CROSS_KEYS and key.prefix.last == "temporal":
            self._narrower[self._masked(key)].discard(key)
        self.waiting_rows -= sum(len(p["batch"]) for p in waiting.parts)
        self.stats.prefixes += 1
        self._root = self._root_of.pop(key)
        self._from_open = key.depth_f is None
        self.stats.roots[self._root] += 1
        cols = self._merged(key, waiting)
        n = len(cols["batch"])
        self.stats.kept += n
        self.records.append(Record(waiting.batches, _narrow(cols.pop("batch")), _narrow(cols["row"]),
                                   _narrow(cols.pop("tiles")), key))
        rid = len(self.records) - 1
        cols["row"] = np.arange(n, dtype=np.int64)
        if key.prefix.done(self.sp):  # (its rows may still grow below: all of them are extended)
            final = self._finish(key, cols)
            final["row"] = cols["row"]
            if DONE_PRUNE:
                final = _rows(final, self._final_frontier(final))
            self.done.append((key, rid, final))
            if not HOLD_AT_PUSH:  # (else every row here was held when it was pushed)
                self._hold(key, final)
        beaten = self._beaten(key, cols)
        if beaten is not None:
            self.stats.beaten += int(beaten.sum())
            cols = _rows(cols, ~beaten)
        if CROSS_KEYS:
            self._prune_narrower(key, cols)
        lifetimes = dict(key.lifetimes)
        options, plan = self._moves(key.prefix)
        fits = iter(self._fits(plan, cols, _Tiles(self, cols)))  # per storage run, in order
        for move, prefix, adds in options:
            if adds is None:
                self._extend(rid, key, move, prefix, cols, lifetimes)
                continue
            ok = next(fits)
            if ok.any():
                self._emit_storage(rid, key, move, cols, lifetimes, prefix=prefix, fits=ok)

    def _merged(self, key: Key, waiting: _Waiting) -> dict:
        """The rows waiting at `key`, in one part, pruned (as `_process` takes them)."""
        if len(waiting.parts) > 1:
            return self._prune(key, _concat(waiting.parts))
        part = _widened(waiting.parts[0])
        return self._prune(key, part) if waiting.raw else part

    def _moves(self, prefix: Prefix) -> tuple[list, tuple]:
        """`moves` after `prefix` (cached: a third of the keys processed share a prefix
        with an earlier one, V at batch 64) as (move, prefix it leads to, `_adds` of a
        storage run or None for loops), and the storage runs' `_capacity_plan`. Also
        looked up in, and while small added to, what earlier searches of the same space
        in this process found (`_SHARED_MOVES`)."""
        out = self._move_lists.get(prefix)
        if out is None:
            out = self._shared_moves.get(prefix)
            if out is None:
                adds, plan = self._runs(prefix)
                options = [(move, after, adds[i] if i < len(adds) else None)
                           for i, (move, after) in enumerate(moves(self.sp, prefix))]
                assert all(isinstance(move.nodes[0], Storage) == (a is not None) for move, _, a in options)
                out = (options, plan)
                if sum(map(len, _SHARED_MOVES.values())) < SHARED_MOVES:
                    self._shared_moves[prefix] = out
            if self._orders and prefix.block and not prefix.backing:
                out = ([o for o in out[0] if o[2] is not None or self._ordered(prefix, o[0])], out[1])
            out = self._move_lists[prefix] = ([(m, self._interned(a), d) for m, a, d in out[0]], out[1])
        return out

    def _ordered(self, prefix: Prefix, move: Move) -> bool:
        """Whether a loop move after `prefix` (below the fused region, in a block) keeps
        the block's loops in the one order kept per class of the *bound* tensors they index
        (those not `_unbound`: with latency the only objective, the others' fills decide
        nothing): a class's loops contiguous, ordered by the tensors they index, then name.
        `templates.moves` keeps one order per class of every tensor indexed; two adjacent
        loops indexing the same bound tensors leave those tensors' fills, every tile, the
        time and the reservations below the fused region as they are, and gathering a
        class's loops only lowers the fills of bound tensors (sixty-first session)."""
        loop = move.nodes[0]
        if loop.spatial is not None:
            return True
        free = self._unbound(prefix)
        if not free:
            return True
        relevance = self.sp.relevance
        bound = lambda r: relevance[r] - free
        order = lambda r: (tuple(sorted(relevance[r])), r)
        r, prev = loop.rank_variable, prefix.block[-1]
        if bound(r) == bound(prev):
            return order(r) > order(prev)
        return not any(bound(b) == bound(r) for b in prefix.block)

    def _runs(self, prefix: Prefix) -> tuple[tuple, tuple]:
        """(`_adds` of each storage run `moves` offers after `prefix`, which come first and
        in `templates.storage_state` order, and their `_capacity_plan`): per storage state,
        in the space's memo (its key holds the arch, unit and bits these depend on)."""
        if prefix.last == "storage":
            return (), _capacity_plan([])
        key = ("runs", prefix.inner, prefix.backing, prefix.shared_onchip, prefix.floor)
        out = self.sp.memo.get(key)
        if out is None:
            adds = tuple(self._adds(move) for move, *_ in storage_state(self.sp, prefix).runs)
            out = self.sp.memo[key] = (adds, _capacity_plan(list(adds)))
        return out

    def _adds(self, move: Move) -> tuple:
        """Per level a storage run adds tiles to (in node order): (level, capacity, its
        tensors with the factor from values to the capacity's unit); cached per move."""
        out = self._move_adds.get(move)
        if out is None:
            out = self._move_adds[move] = self._levels_added(move)
        return out

    def _levels_added(self, move: Move) -> tuple:
        added: dict = {}
        for node in move.nodes:
            if node.level in self.levels:
                unit, capacity = capacity_unit(self.a, node.level)
                for t in node.tensors:
                    added.setdefault(node.level, (capacity, []))[1].append(
                        (t, 1 if unit == "values" else self.w.tensors[t].bits))
        return tuple((lv, capacity, tuple(parts)) for lv, (capacity, parts) in added.items())

    def _masked(self, key: Key) -> tuple:
        """`key` without the bookkeeping of which moves may come next (`Prefix.last`,
        `last_run`, `last_temporal`, `block`, `loose`): keys equal in it have the same
        storage state, loops, fused structure and lifetimes, so rows at them with the same
        state columns are compared on the same criteria (`_prune_narrower`)."""
        out = self._masks.get(key)
        if out is None:
            p = key.prefix.but(last="", last_run=(), last_temporal=None, block=(), loose=False)
            out = self._masks[key] = (p, key.fused, key.depth_f, key.lifetimes)
        return out

    def _wider(self, wide: Prefix, narrow: Prefix) -> bool:
        """Whether `wide` allows every move `narrow` allows, and leads by each to a prefix
        related the same way (`_prune_narrower`); the rest of their keys equal (`_masked`)."""
        if narrow.last != "temporal":
            return False
        if wide.last == "temporal":
            return wide.block[-1] == narrow.block[-1] and set(wide.block) < set(narrow.block)
        return (wide.last == "spatial" and not wide.block and not wide.loose and wide.last_temporal is not None
                and self.sp.relevance[wide.last_temporal] <= self.sp.relevance[narrow.last_temporal])

    def _prune_narrower(self, key: Key, cols: dict) -> None:
        """Drop the rows waiting at keys that allow a subset of `key`'s moves (`_wider`)
        that a row `key` keeps (`cols`) weakly dominates with the same state: every
        completion of such a row is one of the dominating row's, at least as good.

        With the rest of the key equal (`_masked`), a key after a temporal loop allows
        fewer moves than one whose block holds a subset of its loops and ends with the same
        loop (each block rule of `templates.moves`, `Constraints.order_allowed` and
        `_ordered` forbids more as the block grows), and fewer than a key after a spatial
        group, not loose, with an empty block, whose last temporal loop indexes only tensors
        the other's does (it allows every storage run and temporal loop, may end, and after
        the next storage run allows every temporal loop the other's child does); each move
        leads to keys related the same way. The wider key has the lower progress and the
        same reach vector, so its rows are processed while the narrower key's wait
        (`key_order`; the other way round, at V's root 3 at batch 1, none were left to
        drop). Sixty-sixth session: within its latency floor, 4.67 M of the 8.38 M rows V's
        root 3 kept at keys after a temporal loop were so dominated (scratch
        `/tmp/tl/crossdom66.py`)."""
        if not len(cols["row"]):
            return
        for k in [k for k in self._narrower.get(self._masked(key), ()) if self._wider(key.prefix, k.prefix)]:
            waiting = self.incoming[k]
            theirs = _concat(waiting.parts) if len(waiting.parts) > 1 else _widened(waiting.parts[0])
            if not len(theirs["batch"]):
                continue
            keep = self._undominated(key, cols, k, theirs)
            if not keep.all():
                waiting.parts = [_compact(_rows(theirs, keep), self.waiting_rows > NARROW_ROWS)]
                self.waiting_rows -= len(keep) - len(waiting.parts[0]["batch"])
                self.stats.crossed += len(keep) - int(keep.sum())

    def _undominated(self, wide: Key, wcols: dict, narrow: Key, ncols: dict) -> np.ndarray:
        """Which rows of `ncols` (at `narrow`) no row of `wcols` (at `wide`, which allows a
        superset of its moves) weakly dominates with the same state columns; of exact ties
        the wider key's row is kept (`pareto_mask` keeps the first)."""
        n, m = len(wcols["energy"]), len(ncols["energy"])
        names = self._state_columns(wide, wcols)
        state = np.column_stack([np.concatenate([full(wcols[c], n), full(ncols[c], m)]) for c in names])
        crit = np.column_stack([np.concatenate([full(a, n), full(b, m)])
                                for a, b in zip(self._criteria(wide, wcols), self._criteria(narrow, ncols))])
        return state_frontier(state, crit)[n:]

    def _state_columns(self, key: Key, cols: dict) -> tuple[str, ...]:
        """What continuations need equal: extents (which tile choices divide), the fused
        structure and tiles (the compatibility group and key) and, if latency is a
        criterion, the spatial factors."""
        out = self._states.get(key)  # (every row at a key has the same columns: cached per key)
        if out is None:
            spatial = sorted(c for c in cols if c.startswith("sp:")) + ["inst"] if self.latency else []
            out = self._states[key] = (*(c for _, c in self._ecols), *spatial,
                                       *sorted(c for c in cols if c.startswith("ft:")), "sid")
        return out

    def _criteria(self, key: Key, cols: dict) -> list[np.ndarray]:
        """What a row has accumulated (energy, port times, reservations), and the state every
        continuation's costs grow with: temporal iterations above (`time`, fills of
        tensors still to place), instances (energy only: latency keeps them equal), and,
        negated, spatial reuse factors (`between`) and the output's distinct tiles (its
        partial sums are fills minus distinct tiles)."""
        n = len(cols["energy"])
        out = [cols["energy"]] if self.energy else []
        closed = self._closed_ports(key.prefix) if self.latency and CLOSED_PORTS else frozenset()
        used = used_instances(self.latency_terms, cols, n) if closed else None
        for k, lv in enumerate(self.path) if self.latency else ():
            for x in port_times(self.a.memory(lv), cols[f"rb:{lv}"], cols[f"wb:{lv}"]):
                if k in closed:  # final: at most `least` is as good as none (`_closed_ports`)
                    x = np.maximum(x / used[k], self.latency_terms.least)
                out.append(full(x, n))
        plain, negated, products = self._criteria_columns(key.prefix)
        out += [cols[c] for c in plain]
        out += [_negated(cols[c]) for c in negated]
        out += [-math.prod(cols[c] for c in p) for p in products]
        return out

    def _criteria_columns(self, prefix: Prefix) -> tuple[tuple, tuple, tuple]:
        """`_criteria`'s columns after energy and the ports at `prefix`: (those compared as
        they are, those compared negated, per output the columns whose product is its
        distinct tiles, compared negated). Cached: a search prunes at every push."""
        out = self._criteria_cols.get(prefix)
        if out is None:
            # (a tensor whose accesses to come reach no finite port moves no latency: `_unbound`)
            free = self._unbound(prefix) if self.latency and not self.energy and UNBOUND_TENSORS else frozenset()
            plain = (*self._all_res, "time", *("f:" + t for t in sorted(self._open(prefix)) if t not in free),
                     *(() if self.latency else ("inst",)))
            negated = tuple(c for t, c in self._bcols if t not in free)
            products = tuple(self._distinct_cols[t] for t in self.e.tensors if self.e.is_output(t) and t not in free)
            out = self._criteria_cols[prefix] = (plain, negated, products)
        return out

    def _touched(self, prefix: Prefix) -> dict[str, frozenset[int]]:
        """Per tensor, the levels a continuation of `prefix` may still access for it: a
        level's bits grow only by a node placed there (its fills), a node placed below the
        tensor's innermost node there (reads from it, and an output's updates), or the leaf
        under that innermost node; so its innermost node's level and the levels its next
        nodes may use (a tensor whose on-chip backing is still to place: that level and
        every one below)."""
        out = self._touches.get(prefix)
        if out is None:
            inner, pending = dict(prefix.inner), dict(prefix.backing)
            out = self._touches[prefix] = {
                t: frozenset({inner[t], *prefix.candidates(self.sp, t)}) if t in inner
                else frozenset(range(pending.get(t, 0), len(self.path))) for t in self.e.tensors}
        return out

    def _unbound(self, prefix: Prefix) -> frozenset[str]:
        """The tensors whose accesses to come (`_touched`) reach no finite-bandwidth port.
        With energy no criterion, their state columns (fills `f:`, spreads `b:`, an
        output's distinct tiles) change nothing a continuation's latency or reservations
        depend on, so the prune leaves them out (sixtieth session: at batch 1, V's root 6
        within its latency floor, I's fills alone kept 36% of the rows kept, scratch
        `/tmp/tl/crit.py`)."""
        out = self._unbounds.get(prefix)
        if out is None:
            touched = self._touched(prefix)
            out = self._unbounds[prefix] = frozenset(
                t for t, levels in touched.items() if not any(port_times(self.a.memory(self.path[k]), 1.0, 1.0)
                                                              for k in levels))
        return out

    def _closed_ports(self, prefix: Prefix) -> frozenset[int]:
        """The levels no continuation of `prefix` accesses again (no tensor's `_touched`):
        their port times are final. Such a time at most `LatencyFloor.least` is then as good as none: every
        completion of every row takes at least that long, so the time never decides its
        latency. The prune compares max(time, least) for those ports (sixtieth session,
        docs/pmapgen.md "Closed ports, groups' reach, rows with no continuation"). Open
        ports' bits may still grow by what continuations add, so they are compared as they
        are (tests/test_latency_floor.py has a case where comparing them so loses rows)."""
        out = self._closed.get(prefix)
        if out is None:
            out = self._closed[prefix] = frozenset(range(len(self.path))).difference(*self._touched(prefix).values())
        return out

    def _frontier(self, key: Key, cols: dict) -> np.ndarray:
        # a column held as one value (`_compact`) is equal in every row: it splits no group and
        # decides no dominance, so it is left out. The others are stacked as rows, then viewed
        # transposed: one copy (column_stack builds each column's 2-D view)
        n = len(cols["energy"])
        criteria = [v for v in self._criteria(key, cols) if v.strides[0]]
        if not criteria:  # every row equal in every criterion: all kept, as the filter keeps ties
            return np.ones(n, dtype=bool)
        state = [v for v in (cols[c] for c in self._state_columns(key, cols)) if v.strides[0]]
        x = np.array(criteria, dtype=np.float64).T
        if not state:  # (in C layout: the filter's layout `pmapgen.all_einsums.warm_kernels` loads)
            return pareto_mask(np.ascontiguousarray(x))
        return state_frontier(np.array(state).T, x)

    # ---- moves on columns ----------------------------------------------------------------
    def _extend(self, rid: int, key: Key, move: Move, prefix: Prefix, cols: dict, lifetimes: dict) -> None:
        """A loop move: every divisor choice of its bounds, pushed to the prefix it leads to."""
        fused = key.prefix.fused
        events = tuple(("loop", lp.rank_variable, lp.spatial) for lp in move.nodes) if fused else ()
        rows = np.arange(len(cols["row"]))
        if fused and (self.keyed or self.mirror is not None):
            def grows(sid: int) -> bool:  # some child may end with the fixed key, and no mirror image stands for it
                child = self._structures[sid] + events
                return not ((self.keyed and not self._may_fit(child, key.depth_f))
                            or self._mirrored(child, key.depth_f is not None))
            keep = self._where(cols["sid"], grows)
            if not keep.all():
                rows = np.flatnonzero(keep)
        if LOOP_KERNEL and self.budget is not None and self.latency_budget is None and len(rows):
            rows, bounds = self._within_budget(move, prefix, cols, rows)
        else:
            rows, bounds = self._loop_choices(key, move, prefix, cols, rows)
        if not len(rows):
            return
        above_lifetimes = dict(lifetimes)
        out = _rows({c: v for c, v in cols.items() if c != "row"}, rows)
        out["row"] = cols["row"][rows]
        above = self._above(out, key.prefix.depth, above_lifetimes)
        n_ft = sum(c.startswith("ft:") for c in out)
        tiles = []
        for lp, b in zip(move.nodes, bounds):
            above = after_loop(above, self.e, lp.rank_variable, b, self._dim(lp))
            tile = above.extents[lp.rank_variable]
            tiles.append(tile)
            if lp.spatial is not None:
                k = self._fanout_level(lp.spatial)
                out[f"sp:{k}"] = out[f"sp:{k}"] * b
            if fused:
                out[f"ft:{n_ft}"] = tile
                n_ft += 1
        out["sid"] = self._appended(out["sid"], events)
        self._store(out, above)
        pending = self._open(prefix)
        lt = {t: (min(v, key.depth_f) if key.depth_f is not None else v) for t, v in above.lifetime.items()
              if t in pending}
        self._close_fills(out, prefix)
        self._push(self._key(prefix, out["sid"], key.depth_f, lt), rid, move, out,
                   np.column_stack(tiles).astype(np.int64), checked=True)

    def _within_budget(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray) -> tuple[np.ndarray, list]:
        """`_loop_choices` within the energy budget alone, in one compiled call
        (`pmapgen.loop_choices`): the same choices in the same order, the same cuts noted."""
        ints, energy, free = self._floor_inputs(cols)
        tables, monotone, box = self._loop_tables(move)
        got = cut_choices(ints, energy, free, rows, cols.get("kb"), self.budget, BUDGET_RTOL, BOX_RTOL, box,
                          monotone, tables, self._step(move, prefix), self._plan(prefix), self.floor.compute_pJ,
                          self.floor.ops, self.floor.ranks)
        for low in (got.box_cut, got.floor_cut):
            if low is not None:
                self._cut_least(low)
        self.lowest_floor = min(self.lowest_floor, got.lowest)
        return got.rows, list(np.ascontiguousarray(got.bounds.T))  # (a column per loop, each contiguous)

    def _loop_tables(self, move: Move) -> tuple[LoopTables, bool, bool]:
        """(`LoopTables` of a loop move, whether its floor is `monotone` (`_over_budget_cut`),
        whether it is a spatial group (a box first: `_box_cut`)), cached per move."""
        out = self._move_tables.get(move)
        if out is None:
            dims = {lp.spatial: i for i, lp in enumerate(move.nodes) if lp.spatial is not None}
            ranks = self.e.rank_variables
            tables = _loop_tables_of(tuple((ranks.index(lp.rank_variable), dims.get(lp.spatial, -1),
                                            self._dim(lp).size if lp.spatial is not None else 0,
                                            self.w.rank_sizes[lp.rank_variable],
                                            _allowed_key(self.allowed.get(lp.rank_variable))) for lp in move.nodes))
            first = move.nodes[0]
            monotone = len(move.nodes) == 1 and first.spatial is None and self._monotone[first.rank_variable]
            out = self._move_tables[move] = (tables, monotone, all(lp.spatial is not None for lp in move.nodes))
        return out

    def _loop_choices(self, key: Key, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray
                      ) -> tuple[np.ndarray, list]:
        """A loop move's (parent rows, bounds per loop) from `rows`: every divisor choice of
        its bounds, without those over the energy budget (a spatial group's box first,
        `_box_cut`, then each child's floor, `_over_budget_cut`) and the latency budget
        (`_reach_cut` while a spatial group is enumerated, then `_over_latency_cut`)."""
        if self.budget is not None and len(rows) and all(lp.spatial is not None for lp in move.nodes):
            rows = self._box_cut(move, prefix, cols, rows)
        if not len(rows):  # (most spatial groups within a budget: their box cuts every row)
            return rows, []
        bounds: list[np.ndarray] = []
        reach_cut = (REACH_CUT and self.latency_budget is not None and len(rows)
                     and all(lp.spatial is not None for lp in move.nodes))
        for i, loop in enumerate(move.nodes):
            if reach_cut:
                rows, bounds = self._reach_cut(move, prefix, cols, rows, bounds)
            r = loop.rank_variable
            extent = cols[f"e:{r}"][rows]
            for lp, b in zip(move.nodes[:i], bounds):
                if lp.rank_variable == r:
                    extent = extent // b
            pick, b = _divisor_choices(extent, self.w.rank_sizes[r], self.allowed.get(r))
            rows, bounds = rows[pick], [x[pick] for x in bounds] + [b]
            if loop.spatial is not None:  # the dim's loops so far must fit its size
                used = math.prod(bb for lp, bb in zip(move.nodes, bounds) if lp.spatial == loop.spatial)
                ok = used <= self._dim(loop).size
                rows, bounds = rows[ok], [x[ok] for x in bounds]
        if len(rows) and self.budget is not None:
            rows, bounds = self._over_budget_cut(key, move, prefix, cols, rows, bounds)
        if len(rows) and self.latency_budget is not None:
            rows, bounds = self._over_latency_cut(move, prefix, cols, rows, bounds)
        return rows, bounds

    def _over_budget_cut(self, key: Key, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray,
                         bounds: list) -> tuple[np.ndarray, list]:
        """The (row, bounds) choices of a loop move without those whose energy floor exceeds
        the budget, decided before the children are built (a tight budget cuts almost all:
        V at batch 1, 11 floors computed per child built): the floors come from the parent
        rows' inputs and the bounds (`pmapgen.bounds.child_floors`), computed once per key.
        For one temporal loop the floor does not fall as its bound grows (rows come with
        their bounds ascending), so a row's larger bounds are not tried once one is over."""
        ints, energy, free = self._floor_inputs(cols)
        loops = tuple((lp.rank_variable, self._dim(lp)) for lp in move.nodes)
        step = self._step(move, prefix)
        threshold = self.budget * (1 + BUDGET_RTOL)
        monotone = len(loops) == 1 and loops[0][1] is None and self._monotone[loops[0][0]]
        floor = child_floors(self.floor, ints, energy, free, rows, np.column_stack(bounds), step,
                             self._plan(prefix), threshold, monotone)
        if len(floor):
            self.lowest_floor = min(self.lowest_floor, float(floor.min()))
        ok = floor <= (threshold if "kb" not in cols else cols["kb"][rows] * (1 + BUDGET_RTOL))
        self._cut(floor[~ok])
        return rows[ok], [b[ok] for b in bounds]

    def _over_latency_cut(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray,
                          bounds: list) -> tuple[np.ndarray, list]:
        """The (row, bounds) choices of a loop move without those whose latency floor exceeds
        the latency budget, decided before the children are built: a loop changes only
        what the floor reads of the extents and, if spatial, of the instances (the bits
        moved so far stay), so each child's floor comes from its parent's columns. At batch
        1, within V's least latency, most children built were cut at their push."""
        if COMPUTE_CUT:
            rows, bounds = self._compute_cut(move, prefix, cols, rows, bounds)
            if not len(rows):
                return rows, bounds
        view = _rows({c: cols[c] for c in self._latency_columns}, rows)
        for lp, b in zip(move.nodes, bounds):
            view[f"e:{lp.rank_variable}"] = view[f"e:{lp.rank_variable}"] // b  # (perfect factors: `_divisor_choices`)
            if lp.spatial is not None:
                k = self._fanout_level(lp.spatial)
                view[f"sp:{k}"], view["inst"] = view[f"sp:{k}"] * b, view["inst"] * b
        threshold = self.latency_budget * (1 + LATENCY_RTOL)
        ok = self._latency_floors(prefix, cols, view, rows, np.column_stack(bounds), self._step(move, prefix),
                                  self._floor_inputs(cols) if self.port_floors else (None, None, None),
                                  threshold) <= threshold
        return rows[ok], [b[ok] for b in bounds]

    def _compute_cut(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray,
                     bounds: list) -> tuple[np.ndarray, list]:
        """`_over_latency_cut`'s choices without those whose compute term alone is over the
        budget with the instances still to come at most the product of the open fanouts'
        sizes and the extents left (`latency_floor.reach` takes its groups' reach, at most
        that): a cut on the parent's instances and extents and the loops' bounds, before the
        children's columns are gathered. Its floor is at most `_latency_floors`', so it cuts
        only choices that cuts (sixty-second session: at batch 1, QK's spatial groups offered
        61.7 M choices in 30 s, and it cut all 60.9 M the floor cut)."""
        f = self.latency_terms
        inst, room = (x[rows] for x in self._room(cols))
        for lp, b in zip(move.nodes, bounds):
            room = room // b  # (perfect factors: `_divisor_choices`)
            if lp.spatial is not None:
                inst = inst * b
        grow = self._grow(prefix)
        # (exact integers below 2**53 in floats, divided as `latency_floor.latency` does)
        ok = f.compute / (inst * np.minimum(room, grow)).astype(np.float64) <= self.latency_budget * (1 + LATENCY_RTOL)
        return rows[ok], [b[ok] for b in bounds]

    def _grow(self, prefix: Prefix) -> int:
        """The most instances the fanouts still open at `prefix` may add: the product of their
        sizes (the compute cuts' bound; `latency_floor.reach` takes their groups' reach)."""
        f = self.latency_terms
        return math.prod(f.fan_sizes[k] for k in self._latency_tops(prefix)[0] if k in f.fan_sizes)

    def _room(self, cols: dict) -> tuple[np.ndarray, np.ndarray]:
        """Per row of the key being extended, its instances and the product of its extents
        (int64), for `_compute_cut` and `_reach_cut` (cached for its moves)."""
        if self._rooms[0] is not cols:
            n = len(cols["inst"])
            room = math.prod(np.asarray(cols[f"e:{r}"], dtype=np.int64) for r in self.latency_terms.ranks)
            self._rooms = (cols, (full(np.asarray(cols["inst"], dtype=np.int64), n), full(room, n)))
        return self._rooms[1]

    def _reach_cut(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray,
                   bounds: list) -> tuple[np.ndarray, list]:
        """The partial choices of a spatial group (parent rows `rows`, the first `len(bounds)`
        loops' bounds) some completion of which `_compute_cut` may keep. With B the product
        of the group's bounds, a child's compute term is compute / min(inst x room, inst x
        B x grow) (inst, room: the parent's instances and extents' product; grow: the open
        fanouts' sizes), which falls as B grows; each loop still to enumerate multiplies B
        by at most the least of its dim's size and the extent left of its rank variable.
        So a choice whose B at that most is over the budget has no completion the compute
        cut keeps, and is not enumerated further (sixty-seventh session: at batch 1 V's
        root 3 enumerated 453.7 M spatial choices, 1.3% of which the compute cut kept)."""
        f = self.latency_terms
        most = math.prod(bounds) if bounds else np.ones(len(rows), dtype=np.int64)
        for lp in move.nodes[len(bounds):]:
            left = full(cols[f"e:{lp.rank_variable}"], len(cols["inst"]))[rows]
            for placed, b in zip(move.nodes, bounds):
                if placed.rank_variable == lp.rank_variable:
                    left = left // b
            most = most * np.minimum(left, self._dim(lp).size)
        grow = self._grow(prefix)
        inst, room = (x[rows] for x in self._room(cols))
        # (exact integers below 2**53 in floats, as `_compute_cut` divides)
        ok = (f.compute / np.minimum(inst * room, inst * most * grow).astype(np.float64)
              <= self.latency_budget * (1 + LATENCY_RTOL))
        if ok.all():
            return rows, bounds
        return rows[ok], [b[ok] for b in bounds]

    def _box_cut(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray) -> np.ndarray:
        """The parent rows of a spatial group some of whose children may be within the
        budget: a row whose bound over its whole box of bounds (2 to the dim's size or the
        extent, `pmapgen.bounds.box_floors`) is over has none, and its choices are not
        enumerated. At batch 1 QK's spatial groups offer 34 M choices and 8 k are within."""
        # (the bound is summed in floats in another order than the floors: a hair of slack)
        floor = self._box_floors(move, prefix, cols, rows)
        ok = floor * (1 - BOX_RTOL) <= (cols["kb"][rows] if "kb" in cols else self.budget) * (1 + BUDGET_RTOL)
        self._cut(floor[~ok] * (1 - BOX_RTOL))
        return rows[ok]

    def _cut(self, floors: np.ndarray) -> None:
        """Note rows dropped for the budget: those whose floor is finite (an infinite floor
        says no completion of the row fits, at any budget), and the least such floor."""
        if len(floors):
            self._cut_least(float(floors.min()))

    def _cut_least(self, low: float) -> None:
        """`_cut` of rows whose least floor is `low`."""
        if low < self.cut_floor:
            self.cut_floor = low
            self.budget_cut = self.budget_cut or math.isfinite(low)

    def _box_floors(self, move: Move, prefix: Prefix, cols: dict, rows: np.ndarray) -> np.ndarray:
        """`_box_cut`'s bound per row."""
        ints, energy, _ = self._floor_inputs(cols)
        high = np.column_stack([np.minimum(cols[f"e:{lp.rank_variable}"][rows], self._dim(lp).size)
                                for lp in move.nodes])
        low = np.full(len(move.nodes), 2.0)
        return box_floors(self.floor, ints, energy, rows, low, high, self._step(move, prefix), self._plan(prefix))

    def _floor_inputs(self, cols: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`floor_inputs` of the key being extended, stacked once for all its moves."""
        if self._inputs[0] is not cols:
            self._inputs = (cols, floor_inputs(self.floor, cols))
        return self._inputs[1]

    def _step(self, move: Move, prefix: Prefix):
        """The `loop_step` of a loop move into `prefix` (cached)."""
        pending = self._open(prefix)
        step = self._steps.get((move, pending))
        if step is None:
            loops = tuple((lp.rank_variable, self._dim(lp)) for lp in move.nodes)
            step = self._steps[move, pending] = loop_step(self.e, loops, frozenset(self.e.tensors) - pending)
        return step

    def _dim(self, loop: Loop):
        """The fanout dim of a spatial loop (None: temporal)."""
        return self._fanout(loop.spatial)[1] if loop.spatial else None

    def _fanout_level(self, dim: str) -> int:
        """The index of the memory whose fanout has spatial dim `dim`."""
        return self._fanout(dim)[0]

    def _fanout(self, dim: str) -> tuple:
        """(the index of the memory whose fanout has `dim`, the dim), cached per search."""
        out = self._fanouts.get(dim)
        if out is None:
            owner = self.a.fanout_owner(dim, self.unit)
            out = self._fanouts[dim] = (self.a.memory_index[owner.name], owner.dim(dim))
        return out

    def _emit_storage(self, rid: int, key: Key, move: Move, cols: dict, lifetimes: dict,
                      prefix: Prefix | None = None, root: bool = False, fits: np.ndarray | None = None) -> None:
        """A storage run: every node's tile, its link to its parent, its reservation, for
        the rows whose tiles fit (`fits`, from `_fits`; computed here if None)."""
        p = key.prefix
        prefix = prefix or p
        out = dict(cols)
        if "row" not in out:
            out["row"] = np.zeros(1, np.int64)
        n = len(out["row"])
        if fits is None:
            fits = self._fits(_capacity_plan([self._adds(move)]), out, _Tiles(self, out))[0]
        if not fits.all():  # most runs overflow a level for most rows: cut them before any count
            if not fits.any():
                return
            kept = _rows({c: v for c, v in out.items() if type(v) is np.ndarray and v.shape == (n,)}, fits)
            out = {c: kept.get(c, v) for c, v in out.items()}
            n = int(fits.sum())
        above = self._above(out, p.depth, {t: lifetimes.get(t, 0) for t in self.e.tensors})
        inner = dict(p.inner) if not root else {}
        backing = dict(p.shared_onchip)
        events = []
        depth_f = key.depth_f
        for node in move.nodes:
            k = self.a.memory_index[node.level]
            for t in node.tensors:
                values, fills, distinct = storage_tile(above, self.e, t)
                bits = self.w.tensors[t].bits
                if t in inner:
                    parent_level = self.path[inner[t]]
                    for kind, lv, amount in link_counts(self.e.is_output(t), node.level, parent_level, values,
                                                        fills, distinct, above.instances, above.between[t]):
                        self._access(out, kind, lv, amount * bits)
                inner[t] = k
                is_backing = backing.get(t) == k
                if is_backing:
                    events.append(("backing", t, k))  # where it sits among the fused loops: its c_T
                if node.level in self.levels:
                    unit, _ = capacity_unit(self.a, node.level)
                    size = values * (1 if unit == "values" else bits) * np.ones(n)
                    if is_backing:
                        c = self._backing_cols[node.level]
                        out[c] = out[c] + size
                    else:
                        lt = above.lifetime[t] if depth_f is None else min(above.lifetime[t], depth_f)
                        for c in self._res_cols[node.level][lt:]:
                            out[c] = out[c] + size
                above = after_storage(above, t)
        if depth_f is None and not prefix.fused:
            depth_f = p.depth
        out["sid"] = self._appended(out["sid"], tuple(events))
        self._store(out, above)
        shape = (n,)
        out = {c: v if type(v) is np.ndarray and v.shape == shape else np.full(shape, v) for c, v in out.items()}
        pending = self._open(prefix)
        self._close_fills(out, prefix)
        lt = {t: (min(lifetimes.get(t, 0), depth_f) if depth_f is not None else lifetimes.get(t, 0))
              for t in sorted(pending)}
        if root:
            lt = {t: 0 for t in sorted(pending)}
        if self.key_lookup is not None and (root or any(ev[1] in self.key_lookup.watched for ev in events)):
            out["kb"] = self._key_budgets(out)  # c_T placed: the row's keys are known
        self._push(self._key(prefix, out["sid"], depth_f, lt), rid, move, out, np.zeros((n, 0), np.int64))

    def _key_budgets(self, cols: dict) -> np.ndarray:
        """Per row, the largest budget of the keys it may still end at (`pmapgen.key_budgets`)."""
        sids, inverse = _distinct(cols["sid"])
        if inverse is None:
            return self.key_lookup.budgets(self._structures[sids[0]], cols, np.arange(len(cols["sid"])))
        out = np.empty(len(inverse))
        for i, sid in enumerate(sids):
            rows = np.flatnonzero(inverse == i)
            out[rows] = self.key_lookup.budgets(self._structures[sid], cols, rows)
        return out

    def _fits(self, plan: tuple, cols: dict, tiles: "_Tiles") -> np.ndarray:
        """Per storage run of `plan` (`_capacity_plan`) and row, whether the run's tiles
        fit every level they add to, with what the row holds there already (all its
        reservations and backing tiles: every reservation is in `res:<level>:<last>`).
        `tiles` gives each tensor's tile values at these rows. The sizes are integer
        (values times a unit factor), so one product per level gives each run's sum."""
        n_runs, levels = plan
        ok = np.ones((n_runs, len(cols["row"])), dtype=bool)
        for lv, capacity, runs, tensors, factors in levels:
            each = [tiles.values(t) for t in tensors]
            values = np.empty((len(tensors), ok.shape[1]), dtype=np.result_type(*each))
            for i, v in enumerate(each):
                values[i] = v  # (a value broadcast to every row)
            size = factors @ values
            ok[runs] &= cols[self._res_cols[lv][-1]] + cols[self._backing_cols[lv]] + size <= capacity
        return ok

    def _close_fills(self, cols: dict, prefix: Prefix) -> None:
        """Zero the fills of tensors that can get no further node: nothing multiplies them
        any more, so rows differing only there are equal."""
        pending = self._open(prefix)
        for t in self.e.tensors:
            if t not in pending:
                cols[f"f:{t}"] = np.zeros_like(cols[f"f:{t}"])

    def _open(self, prefix: Prefix) -> frozenset[str]:
        """Tensors that may still get a storage node (their fills and lifetimes matter)."""
        out = self._opens.get(prefix)  # (a prefix's hash is kept: cheaper than the space's memo key)
        if out is None:
            out = self._opens[prefix] = storage_state(self.sp, prefix).open
        return out

    def _interned(self, prefix: Prefix) -> Prefix:
        """The one object of this search equal to `prefix`: the dicts keyed by prefixes (and
        by keys holding them) then find it by identity instead of comparing every field."""
        return self._prefixes.setdefault(prefix, prefix)

    def _key(self, prefix: Prefix, sids: np.ndarray, depth_f: int | None, lifetimes: dict) -> Key:
        """The merge key of rows with structure ids `sids` (all of one multiset of fused
        events: they come from one key by one move): below the fused region depths past
        F + 1 and loop counts that cannot bind (a rank's prime factors run out first)
        change nothing, nor does the order of a block's loops before its last
        (`BLOCK_SETS`): every rule on the next move (`templates.moves`, `_ordered`,
        `_continues`, `Constraints.order_allowed`) reads the block's rank variables as a
        set and its last loop, and so does the block the move leads to."""
        normal = self._normal.get((prefix, depth_f))
        if normal is None:
            loops = tuple(n if binds else 0 for n, binds in zip(prefix.loops, self._binding))
            depth = prefix.depth if depth_f is None else min(prefix.depth, depth_f + 1)
            block = block_set(prefix.block) if BLOCK_SETS else prefix.block
            normal = self._normal[prefix, depth_f] = self._interned(prefix.but(loops=loops, depth=depth,
                                                                               block=block))
        return Key(normal, self._multisets[int(sids[0])], depth_f, tuple(sorted(lifetimes.items())))

    def _access(self, out: dict, kind: str, level: str, bits) -> None:
        m = self.a.memory(level)
        port = "rb" if kind == "read" else "wb"
        if self.latency:
            out[f"{port}:{level}"] = out[f"{port}:{level}"] + bits
        out["energy"] = out["energy"] + bits * (m.read_energy if kind == "read" else m.write_energy)

    def _leaf(self, key: Key, cols: dict) -> tuple[dict, Above]:
        """Done rows' columns with the leaf's accesses added, and their `Above`."""
        out = dict(cols)
        above = self._above(out, key.prefix.depth, {})
        ops = math.prod(self.w.rank_sizes[r] for r in self.e.rank_variables)
        inner = dict(key.prefix.inner)
        for t in self.e.tensors:
            kind, lv, amount = leaf_counts(self.e.is_output(t), self.path[inner[t]], ops, above.between[t])
            self._access(out, kind, lv, amount * self.w.tensors[t].bits)
        return out, above

    def latency_breakdown(self, key: Key, cols: dict) -> dict:
        """Done rows' latency terms by name (`pmapgen.latency_floor.latency_terms`), with
        latency an objective: which one each row's latency is (benchmarks/latency_waste.py)."""
        out, above = self._leaf(key, cols)
        n = len(out["row"])
        return latency_terms(self.latency_terms, out, above.instances * np.ones(n),
                             used_instances(self.latency_terms, out, n))

    def _finish(self, key: Key, cols: dict) -> dict:
        """The leaf's accesses, latency, and the final criteria of done rows."""
        out, above = self._leaf(key, cols)
        n = len(out["row"])
        ops = math.prod(self.w.rank_sizes[r] for r in self.e.rank_variables)
        unit = self.a.compute(self.unit)
        final = {"energy": out["energy"] + ops * unit.energy}
        if self.latency:
            final["latency"] = latency(self.latency_terms, out, above.instances * np.ones(n),
                                       used_instances(self.latency_terms, out, n))
        f = key.depth_f or 0
        final.update({f"res:{lv}:{k}": out[f"res:{lv}:{k}"] for lv in self.levels for k in range(f + 1)})
        final["ft"] = self._fused_tiles(out, n)
        final["sid"] = out["sid"]
        return final

    @staticmethod
    def _fused_tiles(cols: dict, n: int) -> np.ndarray:
        """The fused loops' tiles (`ft:<i>` in order) as an n x k float array (one zero
        column if none): with F and the structure, a row's compatibility group."""
        fts = sorted((c for c in cols if c.startswith("ft:")), key=lambda c: int(c[3:]))
        return np.column_stack([full(cols[c], n) for c in fts] or [np.zeros(n)]).astype(np.float64)

    def _least_criteria(self, cols: dict, f: int, n: int) -> np.ndarray:
        """Per row, at most every completion's final criteria but latency (`_beaten`):
        reservations by lifetime to F only grow, and so does energy, by at least the
        compute's."""
        out = [full(cols[f"res:{lv}:{k}"], n) for lv in self.levels for k in range(f + 1)]
        if self.energy:
            ops = math.prod(self.w.rank_sizes[r] for r in self.e.rank_variables)
            out.append(full(cols["energy"], n) + ops * self.a.compute(self.unit).energy)
        return np.column_stack(out).astype(np.float64) if out else np.zeros((n, 0))

    def _hold(self, key: Key, final: dict) -> None:
        """Add finished rows of a done key (as they are pushed there: `HOLD_AT_PUSH`) to
        their groups' `incumbents`: those of latency at most `LatencyFloor.least` (with
        latency an objective), the least any completion of any row takes, so latency never
        favours a partial row over them. (A completion at the floor takes `least` bit for
        bit, its terms computed the same way: at batch 1 the 1,165 done rows of V's root 0
        within its floor do.)"""
        if key.depth_f is None or not self._incumbent_cut():
            return
        n = len(final["sid"])
        ok = final["latency"] <= self.latency_terms.least if self.latency else np.ones(n, dtype=bool)
        if not ok.any():
            return
        f = key.depth_f
        x = self._least_criteria(final, f, n)
        if self.energy:  # (finished: its energy as it is)
            x[:, -1] = final["energy"]
        rows = np.flatnonzero(ok)
        sid, ft, x = full(final["sid"], n)[rows], final["ft"][rows], x[rows]
        labels = group_labels(np.column_stack([sid, ft]))
        kept = np.flatnonzero(pareto_mask(x, labels))  # (one call for all: QK's done keys hold about 40 groups)
        for at in _by_group(labels[kept]):
            at = kept[at]
            group = (f, int(sid[at[0]]), ft[at[0]].tobytes())
            front, held = x[at], self.incumbents.get(group)
            if held is not None:
                front = front[~dominated(front, held)]  # (most are: one compiled pass, no sort)
                if not len(front):
                    continue
                front = np.vstack([held, front])
                front = front[pareto_mask(front)]
            self.incumbents[group] = front
            self._held.add(group[:2])

    def _reach_vector(self, key: Key) -> list[int]:
        """Integers no move lowers (`key_order.Reached`): each tensor's innermost level (-1:
        none yet), the spatial groups placed, the fused rank variables, the on-chip backings
        placed, the shared tensors' backing levels (a root's: equal in every key reached),
        loops, depth, the storage floor and deepest level, F (once known, equal in every
        key reached) and the count of each fused event."""
        p, sp = key.prefix, self.sp
        inner, pending = dict(p.inner), dict(p.backing)
        f = key.depth_f
        v = [inner.get(t, -1) for t in self.e.tensors]
        v += [int(k in p.groups_placed) for k in sorted(sp.groups)]
        v += [int(r in p.fused_ranks) for r in self.ranks]
        v += [-int(t in pending) for t in self.shared]
        onchip = dict(p.shared_onchip)  # (a root's: equal in every key reached)
        v += [x for t in self.shared for x in (onchip.get(t, 0), -onchip.get(t, 0))]
        v += [*p.loops, p.depth, p.floor, p.deepest, -1 if f is None else f, -(1 << 30) if f is None else -f]
        counts = [0] * len(self._events)
        for ev in key.fused:
            i = self._events.setdefault(ev, len(self._events))
            counts += [0] * (i + 1 - len(counts))
            counts[i] += 1
        return v + counts

    def _incumbent_cut(self) -> bool:
        """Only without an energy budget: within one, a finished row must also be within
        its key's budget to stand for what it drops (the budget's floor cuts those searches)."""
        return INCUMBENT_CUT and self.budget is None

    def _beaten(self, key: Key, cols: dict) -> np.ndarray | None:
        """Which rows of `key` (F known: their compatibility group is settled) a finished
        row of their group (`incumbents`) weakly dominates in every final criterion at the
        row's least completion (`_least_criteria`; latency: every completion takes at least
        `least`, which the incumbents meet). Every completion of such a row is then at
        least as bad as that finished row, which the table holds, so none is needed. None:
        no row is."""
        if key.depth_f is None or not self.incumbents or not self._incumbent_cut():
            return None
        if not any((key.depth_f, sid) in self._held for sid in _distinct(cols["sid"])[0]):
            return None
        n = len(cols["row"])
        ft, sid = self._fused_tiles(cols, n), full(cols["sid"], n)
        out, x = None, None
        for at in _by_group(group_labels(np.column_stack([sid, ft]))):
            front = self.incumbents.get((key.depth_f, int(sid[at[0]]), ft[at[0]].tobytes()))
            if front is None:
                continue
            if x is None:
                x, out = self._least_criteria(cols, key.depth_f, n), np.zeros(n, dtype=bool)
            out[at] = dominated(x[at], front)
        return out if out is not None and out.any() else None

    def _final_frontier(self, final: dict) -> np.ndarray:
        """Which done rows of one key (`_finish`) are on their compatibility group's frontier
        of reservations and objectives (energy if it is a criterion, latency if it is one):
        at least the criteria `survivors` prunes all done rows on, over groups (structure,
        fused tiles; one key has one F) at most as large, so it drops only rows `survivors`
        would. Held until the search ends, the done rows' columns were most of a search's
        memory (sixty-first session: at batch 1, QK within its latency budget, 4.17 M done
        rows, 562 MiB, of which 0.53 M are on these frontiers)."""
        n = len(final["sid"])
        names = [c for c in final if c.startswith("res:")] + ["energy"] * self.energy + ["latency"] * self.latency
        crit = np.column_stack([full(final[c], n) for c in names]).astype(np.float64, copy=False)
        return state_frontier(np.column_stack([final["sid"], final["ft"]]), crit)

    # ---- the end -----------------------------------------------------------------------
    def lower_bound(self) -> float:
        """At most the energy of every pmapping, wherever the search stopped: each one
        completes a row still waiting (or is dominated by one that does), or is a done row
        (or dominated by one), so the least of the waiting rows' floors and the done rows'
        energies bounds them all. Rows cut by the budget are left out: a caller takes the
        least of this and the budget."""
        low = min((float(f["energy"].min()) for *_, f in self.done if len(f["energy"])), default=math.inf)
        for key, waiting in self.incoming.items():
            for part in map(_widened, waiting.parts):
                if len(part["energy"]):  # (a part not pruned yet is: its dominated rows' floors are not this search's)
                    part = self._prune(key, part) if waiting.raw else part
                    low = min(low, float(self._floor(key.prefix, part).min()))
        return low

    def survivors(self, objectives) -> list[tuple[Template, np.ndarray]]:
        """The done rows on their compatibility group's frontier, as (template, tiles)."""
        if not self.done:
            return []
        structure: dict = {}
        names = lambda final: [c for c in final if c.startswith("res:")] + list(objectives)
        width = max(len(names(f)) for *_, f in self.done)
        ft_width = max(f["ft"].shape[1] for *_, f in self.done)
        crit = np.concatenate([_zero_padded(np.column_stack([f[c] for c in names(f)]), width) for *_, f in self.done])
        ids = np.concatenate([self._where(f["sid"], lambda s: structure.setdefault((s, k.depth_f), len(structure)),
                                          np.int64) for k, _, f in self.done])
        fts = np.concatenate([_zero_padded(f["ft"], ft_width) for *_, f in self.done])
        # one compatibility group: the same fused structure and F, the same fused tiles
        keep = state_frontier(np.column_stack([ids, fts]), crit)
        out, first = [], 0
        for key, rid, f in self.done:
            n = len(f["energy"])
            rows = np.flatnonzero(keep[first:first + n])
            first += n
            if len(rows):
                traced = self._trace(rid, f["row"][rows])
                paths = [(nodes, tiles) for nodes, tiles, _ in traced]
                if self.mirror is not None:  # (a path's moves make one fused structure)
                    paths += [(list(self.mirror.nodes(nodes)), tiles) for nodes, tiles, which in traced
                              if self.mirror.asymmetric(self._structures[int(f["sid"][rows[which[0]]])])]
                out += [(_template(self.e.name, self.unit, nodes), tiles) for nodes, tiles in paths]
        return out

    def _trace(self, rid: int, rows: np.ndarray) -> list[tuple[list, np.ndarray, np.ndarray]]:
        """(nodes, tiles per row, positions in `rows`) of every path that led to these rows."""
        rec = self.records[rid]
        if rec.batches[0][0] is None:
            return [(list(rec.batches[0][1].nodes), np.zeros((len(rows), 0), np.int64), np.arange(len(rows)))]
        out = []
        b = rec.batch[rows]
        for batch in np.unique(b):
            sel = np.flatnonzero(b == batch)
            parent, move = rec.batches[batch]
            n_loops = sum(isinstance(x, Loop) for x in move.nodes)
            for nodes, tiles, which in self._trace(parent, rec.parent[rows[sel]]):
                sub = sel[which]
                out.append((nodes + list(move.nodes), np.hstack([tiles, rec.tiles[rows[sub], :n_loops]]), sub))
        return out


def _canonical(v):
    """`v` with every set sorted (by repr) and every dataclass as its fields: a value whose
    repr is the same in every process (`_Search._owner`)."""
    if isinstance(v, (set, frozenset)):
        return ("set", tuple(sorted((_canonical(x) for x in v), key=repr)))
    if isinstance(v, tuple):
        return tuple(_canonical(x) for x in v)
    if isinstance(v, dict):
        return ("dict", tuple(sorted(((_canonical(k), _canonical(x)) for k, x in v.items()), key=repr)))
    if is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, tuple(_canonical(getattr(v, f.name)) for f in fields(v)))
    return v


def block_set(block: tuple) -> tuple:
    """A block of temporal loops as a key holds it (`BLOCK_SETS`): its rank variables but
    the last in name order, then the last."""
    return tuple(sorted(block[:-1])) + block[-1:]


def _rows(cols: dict, index: np.ndarray) -> dict:
    """The columns at `index` (positions or a mask); a column held as one value (`_compact`)
    stays one value, broadcast, instead of being copied out row by row."""
    if index.dtype == np.bool_:
        index = np.flatnonzero(index)  # once: a mask is scanned again by every column it indexes
    out, n = {}, len(index)
    for c, v in cols.items():
        if v.strides[0] or v.ndim != 1 or not len(v):  # (take: a 2-D column's rows at a seventh of indexing's cost)
            out[c] = v[index] if v.ndim == 1 else v.take(index, axis=0)
        else:
            out[c] = v[:n] if n <= len(v) else full(v[:1], n)  # (a slice keeps the zero stride)
    return out


def _by_group(labels: np.ndarray):
    """Per group label (`pareto.group_labels`), its rows."""
    order = np.argsort(labels, kind="stable")
    yield from np.split(order, np.flatnonzero(np.diff(labels[order])) + 1)


def _distinct(v: np.ndarray) -> tuple[list[int], np.ndarray | None]:
    """(the distinct values of an integer column, each row's index among them; None when
    there is one value: most keys hold one fused structure)."""
    if not len(v):
        return [], np.zeros(0, dtype=np.int64)
    if not v.strides[0] or (v == v[0]).all():
        return [int(v[0])], None
    distinct, inverse = np.unique(v, return_inverse=True)
    return distinct.tolist(), inverse


def _negated(v: np.ndarray) -> np.ndarray:
    """-v, a column held as one value (`_compact`) kept one value."""
    return -v if v.strides[0] else full(-v[:1], len(v))


def _narrow(a: np.ndarray) -> np.ndarray:
    """Non-negative integers in the smallest unsigned type that holds them: records keep
    every row a search keeps (29 M for QK at batch 1 within 3.2 mJ), and most fit 16 bits."""
    return a.astype(np.min_scalar_type(int(a.max())) if a.size else np.uint8, copy=False)


def _capacity_plan(runs: list[tuple]) -> tuple:
    """(number of runs, per level: (level, capacity, the runs adding to it, the tensors
    they add, their unit factors as a runs x tensors integer matrix)) of storage runs
    given by their `_Search._adds`: what `_Search._fits` checks, once per prefix."""
    per_level: dict = {}
    for i, adds in enumerate(runs):
        for lv, capacity, parts in adds:
            per_level.setdefault(lv, (capacity, []))[1].append((i, parts))
    levels = []
    for lv, (capacity, entries) in per_level.items():
        tensors = sorted({t for _, parts in entries for t, _ in parts})
        factors = np.zeros((len(entries), len(tensors)), dtype=np.int64)
        for row, (_, parts) in enumerate(entries):
            for t, factor in parts:
                factors[row, tensors.index(t)] = factor
        levels.append((lv, capacity, np.array([i for i, _ in entries], dtype=np.int64), tuple(tensors), factors))
    return len(runs), tuple(levels)


class _Tiles:
    """Each tensor's tile values (the model's `tile_size`) at one batch of rows,
    computed on first use: the storage runs after a key read them instead of each
    building the model's point again."""

    def __init__(self, search: _Search, cols: dict):
        self._search, self._cols = search, cols
        self._above: Above | None = None
        self._values: dict = {}

    def values(self, tensor: str) -> np.ndarray:
        if tensor not in self._values:
            if self._above is None:
                self._above = self._search._above(self._cols, 0, {})
            self._values[tensor] = tile_size(self._above, self._search.e, tensor)
        return self._values[tensor]


def _divisor_choices(extent: np.ndarray, size: int, allowed) -> tuple[np.ndarray, np.ndarray]:
    """(row index, bound) for every bound >= 2 dividing each row's extent (a divisor of
    the rank's `size`), with the tile extent / bound in `allowed`, if given: looked up in
    the rank's `_divisor_table`, rows in order and each row's bounds in `_bounds` order."""
    return _choices(extent, *_divisor_table(size, _allowed_key(allowed)))


@lru_cache(maxsize=1 << 12)
def _loop_tables_of(loops: tuple) -> LoopTables:
    """`LoopTables` of loops ((rank variable's index, dim id or -1, dim size, rank size,
    `_allowed_key`), ...): shared by every search in the process (the energy set's keyed
    searches are hundreds, each meeting the same moves)."""
    return LoopTables.of([(r, d, s, _divisor_table(size, allowed)) for r, d, s, size, allowed in loops])


def _allowed_key(allowed) -> tuple | None:
    """A rank's allowed tile extents (`Constraints.tiles`) as `_divisor_table` takes them."""
    return tuple(sorted(allowed)) if allowed else None


@numba.njit(cache=True)
def _choices(extent, divisors, counts, starts, flat):
    """`_divisor_choices` on its rank's table: one pass to count, one to fill."""
    at = np.searchsorted(divisors, extent)
    total = 0
    for i in range(extent.shape[0]):
        total += counts[at[i]]
    rows = np.empty(total, dtype=np.int64)
    bounds = np.empty(total, dtype=np.int64)
    k = 0
    for i in range(extent.shape[0]):
        s = starts[at[i]]
        for j in range(counts[at[i]]):
            rows[k] = i
            bounds[k] = flat[s + j]
            k += 1
    return rows, bounds


@lru_cache(maxsize=None)
def _divisor_table(size: int, allowed: tuple | None) -> tuple[np.ndarray, ...]:
    """(divisors of `size` ascending, how many bounds each has, where they start in
    `flat`, flat: each divisor's `_bounds` in turn)."""
    divisors = [d for d in range(1, math.isqrt(size) + 1) if size % d == 0]
    divisors = sorted(set(divisors + [size // d for d in divisors]))
    per = [_bounds(d, allowed) for d in divisors]
    counts = np.array([len(x) for x in per], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    flat = np.array([b for x in per for b in x], dtype=np.int64)
    return np.array(divisors, dtype=np.int64), counts, starts, flat


@lru_cache(maxsize=None)
def _bounds(extent: int, allowed: tuple | None) -> tuple[int, ...]:
    """Every loop bound >= 2 dividing `extent` (the tile extent / bound in `allowed`, if given)."""
    return tuple(extent // t for (t,) in reversed(divisor_chains(extent, 1)) if not allowed or t in allowed)


def generate_by_prefixes(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None = None,
                         objectives=("energy", "latency"), time_limit: float | None = None,
                         budget: float | None = None, max_rows: int | None = None, part: int | None = None,
                         max_size: int | None = None, max_waiting: int | None = None,
                         sub: tuple[int, int] | None = None):
    """`pmapgen.generate`'s result (table, templates, Stats) computed by the prefix search,
    or by its part `part` alone (`search_part`: a worker's share of a split search).

    Stats count structural prefixes processed (as `templates`) and partial rows built (as
    `tile_shapes`; with a budget, loop moves build only the children within it). A time
    limit that stops the search leaves the table empty and `complete` False: rows exist
    only once whole pmappings are reached. `budget` (pJ) keeps only pmappings of at most
    that energy, and prunes partial ones whose every completion exceeds it
    (`pmapgen.bounds`): the frontier of those within the budget. With a budget, `Stats.lower_bound` is at most every pmapping's energy, complete or not
    (`_Search.lower_bound`). `max_rows` stops the search like the time limit once more
    partial rows than that wait at once: they are most of its memory (at batch 1, 48
    columns, about half of them held as one value per part: `_compact`). `max_size` stops it
    once its `size` (over all its compute units) is more than that, `max_waiting` once more
    keys than that wait at once in one unit's search (`_Search.run`). `sub` = (j, m): only
    sub-part j of m of part `part` (`_Search.run`)."""
    from pmapgen.generate import result
    begin = time.perf_counter()
    rows, st = search_part(einsum, workload, arch, constraints, objectives, time_limit, budget, max_rows, part,
                           max_size, max_waiting, sub)
    table, templates, stats = result(einsum, rows, workload, arch, objectives, st.templates, st.tile_shapes,
                                     st.stopped_by, begin, st.lower_bound, budget, constraints)
    return table, templates, replace(stats, budget_cut=st.budget_cut, parts=st.parts, cut_floor=st.cut_floor)


def search_part(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None = None,
                objectives=("energy", "latency"), time_limit: float | None = None, budget: float | None = None,
                max_rows: int | None = None, part: int | None = None,
                max_size: int | None = None, max_waiting: int | None = None,
                sub: tuple[int, int] | None = None) -> tuple[list, "Stats"]:
    """The prefix search's kept rows (`generate.Rows`, before they are pruned across
    templates: `generate.result` does that) and its Stats (`kept` 0), from every root, or
    only from root `part` of the `parts` of `generate_by_prefixes` (`pmapgen.parts`).

    Two roots differ in some shared tensor's backing level, which is in every key a row
    waits at and in every pmapping's compatibility key, so no row of one ever meets a
    row of another: searched apart they keep the rows searched together keep. A mirror
    image (`pmapgen.symmetry`) is added by the part whose structure is searched."""
    from pmapgen.generate import Stats, template_rows
    begin = time.perf_counter()
    deadline = None if time_limit is None else begin + time_limit
    e = workload.einsum(einsum)
    rows, stopped_by, n_prefixes, n_rows, low, cut, cut_floor = [], "", 0, 0, math.inf, False, math.inf
    done = 0  # the `size` of the compute units searched so far, against `max_size`
    parts: list[int] | None = [] if part is None else None  # prefixes per part, where every unit ran
    first = 0  # the flat index of this unit's first root
    for unit in arch.computes_for(e):
        n = _root_count(e, workload, arch, unit.name, constraints) if part is not None else 0
        root, first = (None if part is None else part - first), first + n
        if root is not None and not 0 <= root < n:
            continue
        if stopped_by:  # not started: its first rows' floors bound it
            low, parts = min(low, _first_floor(einsum, workload, arch, unit.name, constraints)), None
            continue
        boxes = tiling_lower_bound(einsum, workload, arch, unit.name, constraints) if budget is not None else None
        if boxes is not None and boxes > budget * (1 + BUDGET_RTOL):  # nothing on this unit is within the budget
            low, cut, parts, cut_floor = min(low, boxes), cut or math.isfinite(boxes), None, min(cut_floor, boxes)
            continue
        search = _Search(einsum, workload, arch, unit.name, constraints or Constraints(), objectives, budget, max_rows)
        stopped_by = search.run(deadline, root, None if max_size is None else max_size - done, max_waiting, sub)
        n_prefixes, n_rows = n_prefixes + search.stats.prefixes, n_rows + search.stats.rows
        done += size(search.stats)
        parts = None if parts is None else parts + search.stats.roots
        if budget is not None:
            low = min(low, max(search.lower_bound(), boxes or 0.0))
        cut, cut_floor = cut or search.budget_cut, min(cut_floor, search.cut_floor)
        if not stopped_by:
            for t, tiles in search.survivors(objectives):
                done = template_rows(t, tiles, workload, arch)
                within = _within(done, budget)
                if len(within.tiles) < len(done.tiles):  # pmappings over the budget: the least is cut too
                    energy = full(done.columns["energy"], len(done.tiles))
                    cut, cut_floor = True, min(cut_floor, float(energy[energy > budget * (1 + BUDGET_RTOL)].min()))
                if len(within.tiles):
                    rows.append(within)
    low = 0.0 if budget is None else min(low, budget)
    return [] if stopped_by else rows, Stats(n_prefixes, n_rows, 0, not stopped_by, time.perf_counter() - begin, low,
                                             budget, stopped_by, budget is not None and cut, tuple(parts or ()),
                                             math.inf if budget is None else cut_floor)


def part_count(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None = None) -> int:
    """How many parts `search_part` splits the prefix search of `einsum` into: its roots
    (backing choices) over all its compute units."""
    e = workload.einsum(einsum)
    return sum(_root_count(e, workload, arch, unit.name, constraints) for unit in arch.computes_for(e))


def _root_count(e, workload: Workload, arch: Arch, unit: str, constraints: Constraints | None) -> int:
    return sum(1 for _ in roots(space(e, workload, unit, arch, narrowed(constraints)), workload))


def part_backings(einsum: str, workload: Workload, arch: Arch,
                  constraints: Constraints | None = None) -> list[tuple[str, dict[str, str]]]:
    """Per part of `search_part` (in part order), its compute unit and the backing level of
    each of the Einsum's tensors at its root: what tells a part's rows from another's."""
    e, out = workload.einsum(einsum), []
    for unit in arch.computes_for(e):
        sp = space(e, workload, unit.name, arch, narrowed(constraints))
        for prefix, _ in roots(sp, workload):
            levels = {t: sp.path[0] for t, _ in prefix.inner} | {t: sp.path[b] for t, b in prefix.backing}
            out.append((unit.name, {t: levels[t] for t in e.tensors}))
    return out


def generate_by_rising_budgets(einsum: str, workload: Workload, arch: Arch, ceiling: float,
                               constraints: Constraints | None = None, objectives=("energy", "latency"),
                               time_limit: float | None = None, max_rows: int | None = None):
    """`generate_by_prefixes` at budgets rising from the Einsum's energy floor by GROWTH
    until one keeps a pmapping, or reaches `ceiling` (a real pmapping's energy, so it
    does): the table then holds a lowest-energy pmapping (and the frontier within
    `Stats.budget`). A search costs more the looser its budget, steeply (docs/pmapgen.md,
    "Rising budgets"), so this finds the minimum far sooner than one search at a loose
    ceiling; a budget whose search completes with nothing proves the minimum above it,
    which `Stats.lower_bound` reports if the time limit (for all rounds) stops a later one.
    `max_rows` stops a round as the time limit does, once more partial rows than that wait
    (`generate_by_prefixes`). The ceiling may be infinite (`ffm.map` proves before it has
    found any pmapping): a round that completes with nothing and dropped no row for its
    budget (`Stats.budget_cut`) shows the Einsum has no pmapping at all, and ends the
    rising with an empty table and an infinite lower bound."""
    from pmapgen.generate import Stats
    begin = time.perf_counter()
    low = energy_lower_bound(einsum, workload, arch, constraints)
    budget, n_prefixes, n_rows = low * GROWTH, 0, 0
    while True:
        budget = min(budget, ceiling) if budget > 0 else ceiling
        left = None if time_limit is None else time_limit - (time.perf_counter() - begin)
        table, templates, st = generate_by_prefixes(einsum, workload, arch, constraints, objectives,
                                                    None if left is None else max(left, 0.0), budget, max_rows)
        n_prefixes, n_rows = n_prefixes + st.templates, n_rows + st.tile_shapes
        # a search that completes with nothing and dropped nothing for its budget: no pmapping at all
        none = st.complete and table.empty and not st.budget_cut
        if not st.complete or not table.empty or budget >= ceiling or none:
            return table, templates, Stats(n_prefixes, n_rows, st.kept, st.complete, time.perf_counter() - begin,
                                           math.inf if none else max(low, st.lower_bound), budget, st.stopped_by,
                                           st.budget_cut, st.parts, st.cut_floor)
        low, budget = budget, budget * GROWTH


def energy_lower_bound(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None = None) -> float:
    """A lower bound (pJ) on the energy of every pmapping of `einsum`: the least energy floor
    (`pmapgen.bounds`) of the prefix search's first partial pmappings, each of which every
    pmapping extends, or the nested-box bound of `pmapgen.tiling` where it is higher. Cheap
    (the search stops there: a budget of -inf cuts every row)."""
    return min(max(_first_floor(einsum, workload, arch, unit.name, constraints),
                   tiling_lower_bound(einsum, workload, arch, unit.name, constraints) or 0.0)
               for unit in arch.computes_for(workload.einsum(einsum)))


def _first_floor(einsum: str, workload: Workload, arch: Arch, unit: str, constraints: Constraints | None,
                 root: int | None = None) -> float:
    # (an energy floor: without the latency budget, it bounds the pmappings within it too)
    search = _Search(einsum, workload, arch, unit, replace(constraints or Constraints(), latency_budget=None),
                     ("energy",), -math.inf)
    search.run(None, root)
    return search.lowest_floor


def part_floor(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None, part: int) -> float:
    """A lower bound on the energy of every pmapping of part `part` (`search_part`): its
    root's first rows' floors (inf: a root whose rows the floors cannot place)."""
    e, first = workload.einsum(einsum), 0
    for unit in arch.computes_for(e):
        n = _root_count(e, workload, arch, unit.name, constraints)
        if part < first + n:
            return max(_first_floor(einsum, workload, arch, unit.name, constraints, part - first),
                       tiling_lower_bound(einsum, workload, arch, unit.name, constraints) or 0.0)
        first += n
    raise ValueError(f"{einsum} has no part {part}")


def _within(rows, budget: float | None):
    """Template rows with at most `budget` energy (a bound only prunes partial pmappings
    that cannot get under it; some that could may still end above)."""
    if budget is None:
        return rows
    return rows.take(rows.columns["energy"] <= budget * (1 + BUDGET_RTOL))
