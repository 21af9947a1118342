"""FFM phase 1 (FFM §6.1): every Pareto-optimal pmapping of one Einsum, as a pandas table.

For each template, all tile shapes are evaluated at once through the one cost model
(`looptree.model`, fed numpy arrays), turned into criteria, filtered by capacity, and pruned
within their compatibility group with the one Pareto filter; survivors of all templates
are pruned again per group.

Criteria of a pmapping (docs/pmapgen.md):
- `energy`, `latency`: its own contribution (both are summed over Einsums);
- `res:<level>:<k>` for k = 0..F (F = its number of fused loops): the tile space at that
  level (bits, or values for a `values` capacity) of its private storage nodes whose
  lifetime depth, capped at F, is <= k. While another Einsum sharing s >= 1 loops with it
  runs, exactly `res:<level>:<s-1>` of it is live; while it runs, `res:<level>:<F>`.
- `backing:<tensor>`: the tile of each shared tensor kept on chip at its backing level
  (fixed by compatibility: live from producer to last consumer).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import pandas as pd

from arch.model import Arch
from looptree.model import analyze, cost
from looptree.nodes import Loop, Pmapping, Storage
from looptree.validate import canonical_loops, compatibility, fused_depth
from pmapgen.capacity import capacity_unit, tracked_levels
from pmapgen.constraints import Constraints, check_latency_budget
from pmapgen.fixed_key import has_key, narrowed
from pmapgen.pareto import group_labels, pareto_mask
from pmapgen.templates import Template, templates
from pmapgen.tiles import tile_shape_chunks
from workloads.model import Workload

OBJECTIVES = ("energy", "latency")
LATENCY_RTOL = 1e-9  # slack on a latency budget: a floor and the model may round apart
# what may cut a search short (`Stats.stopped_by`): the wall clock, the rows waiting at once, the
# search's size (`pmapgen.prefixes.size`), the keys waiting at once (a wide search: `_Search.run`)
TIME_LIMIT, ROW_LIMIT, SIZE_LIMIT, WAITING_LIMIT = "time limit", "row limit", "size limit", "waiting limit"


@dataclass(frozen=True)
class Stats:
    templates: int
    tile_shapes: int
    kept: int
    complete: bool = True  # False: a limit stopped the enumeration (result not exhaustive)
    seconds: float = 0.0
    lower_bound: float = 0.0  # pJ, at most every pmapping's energy (a budgeted search's; else 0)
    budget: float | None = None  # pJ: the table is the frontier of the pmappings within it (a budgeted search)
    stopped_by: str = ""  # which limit made `complete` False: TIME_LIMIT, ROW_LIMIT, SIZE_LIMIT or WAITING_LIMIT
    # False: a budgeted search dropped no row its floor could still place for the budget, so a
    # larger budget keeps nothing more (`generate_by_rising_budgets` stops rising there)
    budget_cut: bool = True
    # a prefix search's structural prefixes processed per part (`pmapgen.prefixes.search_part`'s
    # roots, over all compute units; () if not known): what the energy proof's next split
    # search of the Einsum orders its parts by (`pmapgen.all_einsums.split_searches`' `costs`)
    parts: tuple[int, ...] = ()
    # pJ, a complete budgeted search's: every pmapping its table leaves out (but for those a
    # row dominates) costs at least this, the least energy floor of what the budget dropped
    # (inf: nothing), so the table holds the frontier of all pmappings below it, not only of
    # those within `budget` (`held_within`)
    cut_floor: float = math.inf


def held_within(stats: Stats) -> float | None:
    """The energy a complete budgeted search's table holds the frontier within: its budget,
    or more when nothing exists between the budget and the least floor the budget cut
    (`Stats.cut_floor`, a hair below it). A raise of the energy proof that adds nothing
    (the Einsum's pmappings jump from one energy to the next) still moves the budget up to
    the next pmapping's floor (docs/mapper.md, "Step 31")."""
    if stats.budget is None or not stats.complete:
        return stats.budget
    return max(stats.budget, stats.cut_floor * (1 - CUT_RTOL))


CUT_RTOL = 1e-6  # `held_within` stays this share below the least floor cut (floats summed in other orders)


def _fused_structure(template: Template, workload: Workload, arch: Arch):
    """(einsum, shared tensors backed on chip with their backing node index, fused depth F)."""
    e = workload.einsum(template.einsum)
    top = arch.memories[0].name
    skeleton = template.with_tiles(list(range(template.n_slots)))
    shared = [(t, skeleton.backing(t)[0]) for t in e.tensors
              if workload.is_shared(t) and skeleton.backing(t)[1] != top]
    return e, shared, fused_depth(skeleton, workload, arch)


@dataclass
class Rows:
    """Criteria of some tile shapes of one template, as numpy columns."""
    template: Template
    tiles: np.ndarray  # (n x slots)
    columns: dict[str, np.ndarray]  # energy, latency, res:*, backing:*
    fused: int
    groups: np.ndarray  # group label per row (the fused loops' tiles) within this template

    def take(self, mask: np.ndarray) -> "Rows":
        return Rows(self.template, self.tiles[mask], {k: v[mask] for k, v in self.columns.items()},
                    self.fused, self.groups[mask])

    def criteria(self, objectives=OBJECTIVES) -> np.ndarray:
        names = [c for c in self.columns if c.startswith("res:")] + list(objectives)
        return np.column_stack([self.columns[c] for c in names]) if len(self.tiles) else np.zeros((0, len(names)))


def template_rows(template: Template, tiles: np.ndarray, workload: Workload, arch: Arch) -> Rows:
    """Criteria of every tile shape of a template, capacity-feasible rows only."""
    n = len(tiles)
    p = template.with_tiles([tiles[:, k] for k in range(template.n_slots)])
    a = analyze(p, workload, arch)
    c = cost(a, workload, arch)
    _, shared, fused = _fused_structure(template, workload, arch)
    cols: dict[str, np.ndarray] = {
        "energy": np.broadcast_to(np.asarray(c.energy_pJ, dtype=np.float64), n),
        "latency": np.broadcast_to(np.asarray(c.latency_s, dtype=np.float64), n),
    }
    feasible = np.ones(n, dtype=bool)
    shared_names = {t for t, _ in shared}
    for level in tracked_levels(arch, template.unit):
        kind, capacity = capacity_unit(arch, level)
        res = [np.zeros(n) for _ in range(fused + 1)]
        backing_total = np.zeros(n)
        for tile in a.tiles:
            if tile.level != level:
                continue
            scale = 1 if kind == "values" else workload.tensors[tile.tensor].bits
            size = np.broadcast_to(np.asarray(tile.values * scale, dtype=np.float64), n)
            if tile.parent is None and tile.tensor in shared_names:
                cols[f"backing:{tile.tensor}"] = size
                backing_total = backing_total + size
                continue
            for k in range(min(tile.lifetime_depth, fused), fused + 1):
                res[k] = res[k] + size
        for k in range(fused + 1):
            cols[f"res:{level}:{k}"] = res[k]
        feasible &= res[fused] + backing_total <= capacity
    return Rows(template, tiles, cols, fused, _groups(tiles, fused)).take(feasible)


def _groups(tiles: np.ndarray, fused: int) -> np.ndarray:
    """Group label per row within one template: rows with the same fused loops' tiles."""
    return group_labels(tiles[:, :fused])


def _concat(parts: list[Rows]) -> Rows:
    """The rows of several chunks of one template as one Rows (group labels re-derived)."""
    tiles = np.concatenate([r.tiles for r in parts])
    first = parts[0]
    columns = {k: np.concatenate([np.broadcast_to(r.columns[k], len(r.tiles)) for r in parts]) for k in first.columns}
    return Rows(first.template, tiles, columns, first.fused, _groups(tiles, first.fused))


def prune_rows(rows: Rows, objectives=OBJECTIVES) -> Rows:
    """Pareto frontier of each group within one template."""
    return rows.take(pareto_mask(rows.criteria(objectives), rows.groups)) if len(rows.tiles) else rows


def to_frame(rows: list[Rows], workload: Workload, arch: Arch, template_ids: list[int]) -> pd.DataFrame:
    """One table from the rows of many templates (compatibility keys built here): the
    columns as one concatenation of the templates' tables would give them (in order of
    first appearance; a column a template lacks is NaN there), built as numpy columns and
    one frame (a frame per template cost a millisecond each: a split search's merge
    builds thousands)."""
    if not rows:
        return pd.DataFrame()
    sizes = [len(r.tiles) for r in rows]
    fused_depths, compat = [], []
    for r in rows:
        e, shared, fused = _fused_structure(r.template, workload, arch)
        fused_depths.append(fused)
        compat += _compat_keys(r.template, r.tiles, e, shared, fused, workload)
    special = {"tiles": lambda: [tuple(t) for r in rows for t in r.tiles.tolist()],  # templates differ in slots
               "fused_depth": lambda: np.repeat(np.asarray(fused_depths, dtype=np.int64), sizes),
               "compat": lambda: compat,
               "template": lambda: np.repeat(np.asarray(template_ids, dtype=np.int64), sizes)}
    data = {}
    for c in dict.fromkeys(c for r in rows for c in [*r.columns, *special]):
        data[c] = special[c]() if c in special else np.concatenate(
            [np.broadcast_to(np.asarray(r.columns[c]), n) if c in r.columns else np.full(n, np.nan)
             for r, n in zip(rows, sizes)])
    return pd.DataFrame(data)


def evaluate_template(template: Template, tiles: np.ndarray, workload: Workload, arch: Arch) -> pd.DataFrame:
    """Criteria of every tile shape of a template, as a table (capacity-feasible rows)."""
    return to_frame([template_rows(template, tiles, workload, arch)], workload, arch, [0])


def _key_skeleton(template: Template, einsum, fused: int, workload: Workload) -> tuple[list, list]:
    """A template's compatibility key with tile slot numbers where the tiles go: c_T per
    shared tensor (`looptree.validate.compatibility`) and (rank, slot, spatial) per fused
    loop."""
    skeleton = template.with_tiles(list(range(template.n_slots)))  # tiles = slot numbers
    per_tensor = [(t, compatibility(skeleton, t, workload)) for t in sorted(einsum.tensors) if workload.is_shared(t)]
    fused_slots = [(lp.rank_variable, lp.tile, lp.spatial) for lp in canonical_loops(skeleton.loops[:fused])]
    return per_tensor, fused_slots


def _key_shape(template: Template, workload: Workload, arch: Arch) -> tuple[tuple, list[int]]:
    """(the key without its tile values, the slots whose values fill it in, in order): two
    rows have equal compatibility keys exactly when these are equal and so are the values."""
    e, _, fused = _fused_structure(template, workload, arch)
    per_tensor, fused_slots = _key_skeleton(template, e, fused, workload)
    shape = (tuple((t, level, tuple((pos, sp) for pos, _, sp in loops)) for t, (level, loops) in per_tensor),
             tuple((r, sp) for r, _, sp in fused_slots))
    slots = [k for _, (_, loops) in per_tensor for _, k, _ in loops] + [k for _, k, _ in fused_slots]
    return shape, slots


def _compat_keys(template: Template, tiles: np.ndarray, einsum, shared, fused: int, workload: Workload) -> list:
    """Per row: ((tensor, c_T) per shared tensor, ((rank, tile, spatial) per fused loop)),
    with c_T as `looptree.validate.compatibility` gives it (tiles filled in per row)."""
    per_tensor, fused_slots = _key_skeleton(template, einsum, fused, workload)
    # each part's (first, tile, spatial) triples zipped in C per row (QK_softmax at batch 1 keeps
    # 35 k rows, nearly all with distinct fused tiles: a second built by generators)
    tensors = [[(t, (level, c_t)) for c_t in _filled(tiles, loops)] for t, (level, loops) in per_tensor]
    return list(zip(zip(*tensors) if tensors else repeat((), len(tiles)), _filled(tiles, fused_slots)))


def _filled(tiles: np.ndarray, triples: list) -> list:
    """Per row, `triples` ((first, slot, spatial) each) with each slot replaced by the row's tile there."""
    if not triples:
        return [()] * len(tiles)
    firsts, slots, spatial = zip(*triples)
    return [tuple(zip(firsts, values, spatial)) for values in tiles[:, list(slots)].tolist()]


def prune_across_templates(kept: list[Rows], workload: Workload, arch: Arch, objectives=OBJECTIVES) -> list[Rows]:
    """Each template's rows cut to the Pareto frontier of their compatibility group over all
    templates (FFM §3.2), found on numbers before any per-row key or table is built: most
    rows of a large Einsum go here."""
    if not kept:
        return kept
    shapes: dict = {}
    codes = []
    for r in kept:
        shape, slots = _key_shape(r.template, workload, arch)
        codes.append((shapes.setdefault(shape, len(shapes)), r.tiles[:, slots]))
    sizes = [len(r.tiles) for r in kept]
    key = np.full((sum(sizes), 1 + max(v.shape[1] for _, v in codes)), -1, dtype=np.int64)
    res = list(dict.fromkeys(c for r in kept for c in r.columns if c.startswith("res:")))
    x = np.full((len(key), len(res) + len(objectives)), np.inf)  # a reservation a template lacks: inf
    at = 0
    for r, (sid, values), n in zip(kept, codes, sizes):
        key[at:at + n, 0] = sid
        key[at:at + n, 1:1 + values.shape[1]] = values
        for j, c in enumerate(res + list(objectives)):
            if c in r.columns:
                x[at:at + n, j] = r.columns[c]
        at += n
    keep = pareto_mask(x, group_labels(key))
    bounds = np.cumsum([0] + sizes)
    return [r.take(keep[bounds[i]:bounds[i + 1]]) for i, r in enumerate(kept)]


def prune_table(table: pd.DataFrame, objectives=OBJECTIVES) -> pd.DataFrame:
    """A table's rows cut to the frontier of their compatibility group (`compat`) on their
    reservations and `objectives`, as `prune_across_templates` cuts rows (a reservation a
    row's template lacks, NaN in the table, counts as inf; of equal rows the first is kept):
    the tables of sub-parts of one search, each pruned alone (`pmapgen.all_einsums.merge_subparts`)."""
    if len(table) < 2:
        return table
    res = [c for c in table.columns if c.startswith("res:")]
    x = table[res + list(objectives)].to_numpy(dtype=np.float64, copy=True)
    x[np.isnan(x)] = np.inf
    ids: dict = {}
    labels = np.fromiter((ids.setdefault(c, len(ids)) for c in table["compat"]), np.int64, len(table))
    keep = pareto_mask(x, labels)
    return table if keep.all() else table[keep].reset_index(drop=True)


def generate(einsum: str, workload: Workload, arch: Arch, constraints: Constraints | None = None,
             objectives=OBJECTIVES, time_limit: float | None = None) -> tuple[pd.DataFrame, list[Template], Stats]:
    """All Pareto-optimal pmappings of `einsum` (per compatibility group), with the
    templates their `template` column indexes and counts of what was explored.

    `time_limit` (seconds) stops the enumeration early; the result is then not exhaustive
    and `Stats.complete` is False.
    """
    e = workload.einsum(einsum)
    constraints = narrowed(constraints)
    check_latency_budget(constraints, objectives)
    kept: list[Rows] = []
    n_templates = n_shapes = 0
    start = time.perf_counter()
    stopped_by = ""
    for unit in arch.computes_for(e):
        for template in templates(e, workload, arch, unit.name, constraints):
            if time_limit is not None and time.perf_counter() - start > time_limit:
                stopped_by = TIME_LIMIT
                break
            n_templates += 1
            parts = []
            for tiles in tile_shape_chunks(template, workload, arch, constraints.tiles):
                n_shapes += len(tiles)
                rows = prune_rows(template_rows(template, tiles, workload, arch), objectives)
                if len(rows.tiles):
                    parts.append(rows)
            if len(parts) > 1:  # chunks of one template: prune their union (groups are per template)
                parts = [prune_rows(_concat(parts), objectives)]
            kept += [r for r in parts if len(r.tiles)]
    return result(einsum, kept, workload, arch, objectives, n_templates, n_shapes, stopped_by, start,
                  constraints=constraints)


def result(einsum: str, kept: list[Rows], workload: Workload, arch: Arch, objectives, explored: int,
           evaluated: int, stopped_by: str, start: float, lower_bound: float = 0.0, budget: float | None = None,
           constraints: Constraints | None = None) -> tuple[pd.DataFrame, list[Template], Stats]:
    """(table, templates, Stats) from the kept rows of every template, pruned per group;
    only those with the compatibility key and c_T `constraints` fix, if any
    (`Constraints.key`, `Constraints.tensor_keys`, `Constraints.tensor_key_sets`) and
    within its latency budget, if any (`Constraints.latency_budget`; latency is a
    criterion then, so filtering before the prune keeps what filtering after would). `stopped_by` names the limit that cut the
    search short ("" if it was exhaustive)."""
    c = constraints or Constraints()
    if c.latency_budget is not None:
        kept = [r.take(np.broadcast_to(r.columns["latency"], len(r.tiles)) <= c.latency_budget * (1 + LATENCY_RTOL))
                for r in kept]
        kept = [r for r in kept if len(r.tiles)]
    if not kept:
        empty = pd.DataFrame(columns=["einsum", "compat", "energy", "latency", "template", "tiles"])
        return empty, [], Stats(explored, evaluated, 0, not stopped_by, time.perf_counter() - start, lower_bound,
                                budget, stopped_by)
    # columns as `to_frame` of every template would have them, though some templates lose every row
    columns = list(dict.fromkeys(c for r in kept for c in [*r.columns, "tiles", "fused_depth", "compat", "template"]))
    cut = prune_across_templates(kept, workload, arch, objectives)
    ids = [i for i, r in enumerate(cut) if len(r.tiles)]
    table = has_key(to_frame([cut[i] for i in ids], workload, arch, ids), c.key, c.tensor_keys,
                    c.tensor_key_sets)
    table = table.reindex(columns=columns).reset_index(drop=True)
    table.insert(0, "einsum", einsum)
    return table, [r.template for r in kept], Stats(explored, evaluated, len(table), not stopped_by,
                                                    time.perf_counter() - start, lower_bound, budget, stopped_by)


def rebuild(row: pd.Series, templates_: list[Template]) -> Pmapping:
    """The exact pmapping a table row stands for."""
    return templates_[int(row["template"])].with_tiles(list(row["tiles"]))
