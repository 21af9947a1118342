"""A loop move's bound choices, cut by the energy budget, in one compiled call.

A loop move (one temporal loop, or a spatial group: loops over fanout dims) offers each
row of a key every perfect-factor bound of each of its loops (`prefixes._divisor_choices`,
loop by loop, a spatial dim's loops together at most its size). Within an energy budget a
spatial group first drops the rows whose box bound (`bounds.box_floors`) is over, and then
every choice whose child's floor (`bounds.child_floors`) is over (`prefixes._Search.
_box_cut`, `_over_budget_cut`). Done with numpy, that is a dozen calls and as many small
arrays per move, some 30,000 moves a pass over the batch-1 energy set's longest jobs,
most of which keep no choice (ninety-sixth session: 15,200 spatial groups cut whole by
their box, about 100 us each). Here it is one call per move: the same choices in the same
order, the same floors from the same kernels (`bounds._floor`, `bounds._box_floor`), so
the same children. (The kernel, `bounds._cut_choices`, sits beside those two: numba's
on-disk cache is per source file, and a kernel calling another file's would keep a stale
copy of it when only that file changed.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pmapgen.bounds import _cut_choices


@dataclass(frozen=True)
class LoopTables:
    """What a loop move's choices need besides the rows, per loop l (the same for the move
    in every search of its space: `prefixes._loop_tables_of`): `rank_of[l]`, its rank
    variable's index (`floor_inputs`' first columns are the extents); `dim_of[l]`, its
    fanout dim's id (-1: temporal) and `dim_size[l]` that dim's size; its rank's
    `prefixes._divisor_table` padded to one row per loop (`n_divisors` real entries each)."""
    rank_of: np.ndarray
    dim_of: np.ndarray
    dim_size: np.ndarray
    divisors: np.ndarray
    n_divisors: np.ndarray
    counts: np.ndarray
    starts: np.ndarray
    flat: np.ndarray

    @staticmethod
    def of(loops: list[tuple[int, int, int, tuple]]) -> "LoopTables":
        """From (rank index, dim id or -1, dim size, `_divisor_table`) per loop."""
        n = len(loops)
        width = max(len(t[0]) for *_, t in loops)
        flat_width = max(max(len(t[3]) for *_, t in loops), 1)
        divisors = np.zeros((n, width), np.int64)
        counts, starts = np.zeros((n, width), np.int64), np.zeros((n, width), np.int64)
        flat = np.zeros((n, flat_width), np.int64)
        for l, (_, _, _, (d, c, s, f)) in enumerate(loops):
            divisors[l, :len(d)], counts[l, :len(c)], starts[l, :len(s)], flat[l, :len(f)] = d, c, s, f
        return LoopTables(np.array([x[0] for x in loops], np.int64), np.array([x[1] for x in loops], np.int64),
                          np.array([x[2] for x in loops], np.int64), divisors,
                          np.array([len(t[0]) for *_, t in loops], np.int64), counts, starts, flat)


class Choices(NamedTuple):
    """The kept choices (`rows`: positions in the key's rows, `bounds`: one column per
    loop), and what the search notes of the others (`_Search._cut`, `lowest_floor`): the
    least floor of the choices computed (inf: none), and of the rows the box dropped and
    the choices the floor dropped, each None if it dropped none."""
    rows: np.ndarray
    bounds: np.ndarray
    lowest: float
    box_cut: float | None
    floor_cut: float | None


def cut_choices(ints: np.ndarray, energy: np.ndarray, free: np.ndarray, rows: np.ndarray, kb: np.ndarray | None,
                budget: float, rtol: float, box_rtol: float, box: bool, monotone: bool, tables: LoopTables,
                step, plan, compute_pJ: float, ops: int, ranks: np.ndarray) -> Choices:
    """Every choice of a loop move from parent rows `rows` (of `floor_inputs`' `ints`,
    `energy`, `free`) within each row's budget (`kb`, per row of the key; None: `budget`)
    times 1 + `rtol`: with `box`, first the rows whose box bound times 1 - `box_rtol` is
    within it (a spatial group); then each choice whose floor under `step` (`loop_step`)
    and `plan` (`floor_plan`) is, the floor computed with the threshold `budget` times
    1 + `rtol` (`monotone`: `child_floors`')."""
    kb = np.zeros(0) if kb is None else np.ascontiguousarray(kb, dtype=np.float64)
    out = _cut_choices(ints, energy, free, rows, kb, budget * (1 + rtol), 1 + rtol, 1 - box_rtol, box, monotone,
                       tables.rank_of, tables.dim_of, tables.dim_size, tables.divisors, tables.n_divisors,
                       tables.counts, tables.starts, tables.flat, step.source, step.powers, step.terms,
                       compute_pJ, np.int64(ops), ranks, *plan.packed)
    kept, bounds, lowest, n_box, box_low, n_floor, floor_low = out
    return Choices(kept, bounds, lowest, box_low if n_box else None, floor_low if n_floor else None)
