"""A floor on the latency of every completion of a partial pmapping (docs/pmapgen.md,
"Latency budgets"): what `Constraints.latency_budget` cuts the prefix search with.

A pmapping's latency is the max of its compute time and each level's port times
(docs/semantics.md §6, `looptree.model.cost`), so a floor of any one term bounds it. For a
partial pmapping (the prefix search's row):

- **compute**: ops / (used instances x throughput) / clock. The instances it ends with are
  the spatial factors placed so far (`inst`) times those still to come, and those are at
  most the product over the groups still open (`templates.open_groups`: a placed or closed
  group's factor is final) of what each may reach (`group_reach`), and at most the extents
  left (spatial loops below split the current tile: `e:<rank>`). A group's dim runs loops
  over some rank variables only (`templates.spatial_groups`: a systolic array's reducing
  dim runs reduced ones), each loop's bound divides what the tile leaves of its rank
  variable, so the dim's factor is a divisor of the product of those extents, and at most
  the dim's size: a dim of 128 under a tile of 96 reductions reaches 96, and under 192
  (3 x 64) at most 96 too (sixtieth session).
- **ports**: the bits a level's ports move only grow as nodes are placed (`rb:`, `wb:`
  columns: each storage node adds its fills, none is taken back), over that level's
  instances, which grow as compute's do, from the fanouts at or above it.
- **the top level**: the tensors backed there (workload inputs and outputs, and shared
  tensors not on chip: DESIGN §4) move each value through its ports at least once, read
  (inputs) or written (outputs), whatever is placed below (as `ffm.latency_bound`).
- **the bits still to come** (`ports`, `PortSet`): the energy floor (`pmapgen.bounds`) bounds the sum
  over every access still to come of its bits times a per-bit cost, for any non-negative
  costs (each term is the least over the ways down of what they move). With cost 1 / the
  port's bandwidth on that port's accesses and 0 elsewhere (and no compute energy), and
  the port's seconds so far as the base, it bounds a port's seconds over all instances;
  over the most instances the port may be spread over, its time. The prefix search keeps
  one such floor per finite port (`_Search._latency_floor`).

The floor never falls as a row grows; the test is that it is at most the latency of every
pmapping completed from the row (tests/test_latency_floor.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import combinations

import numpy as np

from arch.model import Arch
from looptree.model import port_times, start, tile_size
from pmapgen.columns import full
from workloads.model import Workload


@dataclass(frozen=True)
class LatencyFloor:
    """What one Einsum's latency floor needs on one compute unit."""
    compute: float  # seconds at one instance: ops / throughput / clock
    memories: tuple  # the unit's path, top first
    fan_sizes: dict  # fanout level index -> the product of its dims' sizes
    ranks: tuple  # rank variables (their extents `e:<rank>` cap the spatial factors to come)
    tops: tuple  # (tensor, is output, bits of its full tile): what the top level moves at least
    # fanout level index -> its possible spatial groups, each as (dim size, the indices in
    # `ranks` of the rank variables its loops on that dim run) per dim it uses (`group_reach`)
    groups: dict
    least: float = 0.0  # at most every pmapping's latency: an empty row's floor (`latency_floor_of`)


def latency_floor_of(einsum: str, workload: Workload, arch: Arch, unit: str, groups: dict) -> LatencyFloor:
    """`groups`: per fanout level, the spatial groups the space allows (`templates.Space.groups`).
    `least` is the floor of a row with nothing placed, every group open, the full extents
    left and the tensors no other Einsum shares (workload inputs and outputs, backed at
    the top level: DESIGN §4) at the top: every pmapping of the Einsum on this unit takes
    at least that long."""
    e = workload.einsum(einsum)
    ops = math.prod(workload.rank_sizes[r] for r in e.rank_variables)
    path = arch.path(unit)
    root = start(e, workload)
    f = LatencyFloor(ops / arch.compute(unit).throughput / arch.clock_hz, tuple(path),
                     {k: math.prod(d.size for d in m.fanout) for k, m in enumerate(path) if m.fanout},
                     tuple(e.rank_variables),
                     tuple((t, e.is_output(t), float(tile_size(root, e, t) * workload.tensors[t].bits))
                           for t in e.tensors),
                     {k: tuple(_dims(path[k], group, e.rank_variables) for group in gs) for k, gs in groups.items()})
    empty = {"inst": np.ones(1), **{f"e:{r}": np.array([workload.rank_sizes[r]]) for r in e.rank_variables},
             **{f"sp:{k}": np.ones(1) for k in f.fan_sizes},
             **{f"{port}:{m.name}": np.zeros(1) for m in path for port in ("rb", "wb")}}
    unshared = frozenset(t for t in e.tensors if not workload.is_shared(t))
    return replace(f, least=float(latency_floor(f, empty, frozenset(groups), unshared)[0]))


def _dims(memory, group: tuple, ranks: tuple) -> tuple:
    """A spatial group's (dim size, rank variable indices) per dim it uses."""
    size = {d.name: d.size for d in memory.fanout}
    on: dict = {}
    for dim, r in group:
        on.setdefault(dim, []).append(ranks.index(r))
    return tuple(sorted((size[d], tuple(sorted(rs))) for d, rs in on.items()))


@lru_cache(maxsize=1 << 16)
def _divisor_at_most(n: int, most: int) -> int:
    """The largest divisor of n that is at most `most`."""
    for d in range(min(n, most), 0, -1):
        if n % d == 0:
            return d
    return 1


def _dim_reach(extents: list[np.ndarray], size: int, ranks: tuple) -> np.ndarray:
    """Per row, the most one dim of `size` may run over `ranks` (indices into `extents`): the
    largest divisor of their extents' product at most its size."""
    p = extents[ranks[0]]
    for i in ranks[1:]:
        p = p * extents[i]
    # (most products are at most the size or a multiple of it: only the others are searched)
    out = np.where(p <= size, p, size).astype(np.float64)
    other = np.flatnonzero((p > size) & (p % size != 0))
    if len(other):
        values, inverse = np.unique(p[other], return_inverse=True)
        out[other] = np.array([_divisor_at_most(int(v), size) for v in values], dtype=np.float64)[inverse.reshape(-1)]
    return out


def group_reach(f: LatencyFloor, level: int, extents: list[np.ndarray]) -> np.ndarray:
    """Per row, the most instances level `level`'s spatial group may still add: the max over
    its possible groups of the product of their dims' reach (`_dim_reach`; 1 where no group
    is possible). `extents`: per rank variable of `f.ranks`, its `e:` column."""
    memo: dict = {}
    best = np.ones(len(extents[0]) if extents else 1)
    for dims in f.groups.get(level, ()):
        got = 1.0
        for dim in dims:
            if dim not in memo:
                memo[dim] = _dim_reach(extents, *dim)
            got = got * memo[dim]
        best = np.maximum(best, got)
    return best


def latency(f: LatencyFloor, cols: dict, instances: np.ndarray, used: list[np.ndarray]) -> np.ndarray:
    """Compute time at `instances`, and each level's port times for its `rb:`/`wb:` bits over
    `used[k]` instances (the fanouts at or above level k): the max, per row. A done row's
    latency with its final instances; its floor with the most it may reach."""
    terms = iter(latency_terms(f, cols, instances, used).values())
    out = next(terms)
    for x in terms:
        out = np.maximum(out, x)
    return out


def latency_terms(f: LatencyFloor, cols: dict, instances: np.ndarray, used: list[np.ndarray]) -> dict:
    """`latency`'s terms by name: "compute", then "<level> read", "<level> write" and
    "<level> shared" for each finite port (`looptree.model.port_times`' order)."""
    out = {"compute": f.compute / instances}
    for k, m in enumerate(f.memories):
        names = [f"{m.name} {kind}" for kind, bw in (("read", m.read_bandwidth), ("write", m.write_bandwidth),
                                                      ("shared", m.bandwidth)) if bw != math.inf]
        out.update(zip(names, port_times(m, cols[f"rb:{m.name}"], cols[f"wb:{m.name}"], used[k])))
    return out


def used_instances(f: LatencyFloor, cols: dict, n: int) -> list[np.ndarray]:
    """Per level, the product of the spatial factors placed at the fanouts at or above it."""
    out, used = [], np.ones(n)
    for k in range(len(f.memories)):
        if k in f.fan_sizes:
            used = used * cols[f"sp:{k}"]
        out.append(used)
    return out


def reach(f: LatencyFloor, cols: dict, open_groups: frozenset) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per row, the most instances compute may end with, and per level the most its ports
    may be spread over (module docstring). `open_groups`: the fanout levels whose spatial
    group may still be placed."""
    n = len(cols["inst"])
    extents = [full(cols[f"e:{r}"], n) for r in f.ranks]
    room = np.ones(n)
    for x in extents:
        room = room * x
    used = used_instances(f, cols, n)
    grow, out = 1.0, []
    for k in range(len(f.memories)):
        if k in open_groups and k in f.fan_sizes:
            grow = grow * group_reach(f, k, extents)
        out.append(used[k] * np.minimum(room, grow))
    return cols["inst"] * np.minimum(room, grow), out


def latency_floor(f: LatencyFloor, cols: dict, open_groups: frozenset, top_tensors: frozenset,
                  reached: tuple | None = None) -> np.ndarray:
    """Per row, at most the latency of each pmapping completed from it (module docstring).
    `open_groups`: as `reach`'s (`reached`: its result, if computed); `top_tensors`: the
    tensors backed at the top level."""
    instances, spread = reached or reach(f, cols, open_groups)
    reads = sum((b for t, out, b in f.tops if t in top_tensors and not out), 0.0)
    writes = sum((b for t, out, b in f.tops if t in top_tensors and out), 0.0)
    top = f.memories[0].name
    cols = {**cols, f"rb:{top}": np.maximum(cols[f"rb:{top}"], reads),
            f"wb:{top}": np.maximum(cols[f"wb:{top}"], writes)}
    return latency(f, cols, instances, spread)


def ports(memories: tuple) -> list[tuple[int, str, float, float]]:
    """Each finite-bandwidth port on the path: (level index, memory name, seconds per bit
    read, seconds per bit written): a read port costs reads only, a write port writes
    only, a shared port both (`looptree.model.port_times`)."""
    out = []
    for k, m in enumerate(memories):
        for r, w in ((m.read_bandwidth, math.inf), (math.inf, m.write_bandwidth), (m.bandwidth, m.bandwidth)):
            if r != math.inf or w != math.inf:
                out.append((k, m.name, 1 / r, 1 / w))
    return out


@dataclass(frozen=True)
class PortSet:
    """Some ports, each at weight 1 / their number: the max of their times is at least the
    mean, and the mean at least the weighted sum of their bits over the most instances
    any of them may be spread over. One floor of that sum (`port_sets`) couples the ports'
    ways down, which their floors one by one do not."""
    levels: tuple  # each port's level index
    costs: dict  # (kind, memory name) -> weighted seconds per bit

    def seconds(self, cols: dict) -> np.ndarray:
        """The weighted seconds the ports' bits so far (`rb:`, `wb:`) take, over all instances."""
        out = 0.0
        for (kind, name), c in self.costs.items():
            out = out + cols[f"{'rb' if kind == 'read' else 'wb'}:{name}"] * c
        return np.ascontiguousarray(full(out, len(cols["inst"])), dtype=np.float64)

    def spread(self, reached: list[np.ndarray]) -> np.ndarray:
        """Per row, the most instances any of the ports may be spread over (`reach`)."""
        return np.maximum.reduce([reached[k] for k in self.levels])


def port_sets(memories: tuple, most: int = 1) -> list[PortSet]:
    """Every set of at most `most` finite ports (`ports`), one port alone first."""
    out = []
    singles = ports(memories)
    for size in range(1, min(most, len(singles)) + 1):
        for chosen in combinations(singles, size):
            costs: dict = {}
            for _, name, r, w in chosen:
                costs["read", name] = costs.get(("read", name), 0.0) + r / size
                costs["write", name] = costs.get(("write", name), 0.0) + w / size
            out.append(PortSet(tuple(k for k, *_ in chosen), costs))
    return out
