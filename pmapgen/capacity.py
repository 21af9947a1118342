"""Capacities in the unit each level states (bits, or values for a register file), and the
check that a pmapping's own tiles fit them.

A pmapping fits a level when the tiles of all its storage nodes at that level (private
and shared backing alike) fit together: that is the usage while it runs, a lower bound of
what any mapping containing it needs there (docs/pmapgen.md, "Capacity").
"""
from __future__ import annotations

import math

import numpy as np

from arch.model import Arch
from looptree.model import tile_values
from workloads.model import Workload


def capacity_unit(arch: Arch, level: str) -> tuple[str, float]:
    """('bits'|'values', capacity) of a level, per instance."""
    m = arch.memory(level)
    return ("values", m.capacity_values) if m.capacity_values != math.inf else ("bits", m.capacity_bits)


def finite_levels(arch: Arch) -> list[str]:
    """Memories below the top whose capacity (bits or values) is finite."""
    return [m.name for m in arch.memories[1:] if capacity_unit(arch, m.name)[1] != math.inf]


def tracked_levels(arch: Arch, unit: str) -> list[str]:
    """Finite-capacity levels on a compute unit's path (the top never is)."""
    return [m.name for m in arch.path(unit)[1:] if capacity_unit(arch, m.name)[1] != math.inf]


def usage(pmapping, workload: Workload, arch: Arch, level: str):
    """What the pmapping's storage nodes at `level` occupy together, in the level's unit
    (tiles may be arrays: one entry per tile shape)."""
    kind, _ = capacity_unit(arch, level)
    total = 0
    for lv, tensor, values in tile_values(pmapping, workload):
        if lv == level:
            total = total + values * (1 if kind == "values" else workload.tensors[tensor].bits)
    return total


def fits(pmapping, workload: Workload, arch: Arch) -> np.ndarray | bool:
    """Whether the pmapping's own tiles fit every finite level on its path. Tiles only grow
    with the loop tiles, so with undecided tiles set to 1 this is a necessary condition
    (pmapgen drops tile shapes early with it)."""
    ok = True
    for level in tracked_levels(arch, pmapping.compute.unit):
        ok = ok & (usage(pmapping, workload, arch, level) <= capacity_unit(arch, level)[1])
    return ok
