"""Why nothing fits: the smallest capacity of each finite level that would admit a mapping.

When the search finds no valid mapping, each finite-capacity level is relaxed in turn
(the others stay as specified) and the mapper is re-run: the smallest peak usage of that
level over the resulting full mappings is exactly the capacity it needs. The relaxed level
gets a huge but finite capacity, so pmapgen and the join still track its reservations as
criteria; the minimum of a level's peak (monotone in the reservation columns) is then
attained on the pruned join frontier, so no exhaustive enumeration is needed.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

import pandas as pd
from tqdm import tqdm

from arch.model import Arch
from ffm.join import peak
from looptree.reservations import size_text
from pmapgen.capacity import capacity_unit, finite_levels
from specio import SpecError

UNLIMITED = 1e300  # "infinite" for the relaxed level, yet finite so its usage stays tracked


def relaxed(arch: Arch, level: str) -> Arch:
    """`arch` with `level`'s capacity (in its own unit) made practically unlimited."""
    unit, _ = capacity_unit(arch, level)
    field = "capacity_values" if unit == "values" else "capacity_bits"
    memories = tuple(replace(m, **{field: UNLIMITED}) if m.name == level else m for m in arch.memories)
    return replace(arch, memories=memories)


def needed_capacities(arch: Arch, full_mappings: Callable[[Arch], pd.DataFrame],
                      progress: bool = False) -> dict[str, float]:
    """level -> the smallest capacity (in the level's unit) that admits a mapping when only
    that level changes; inf if relaxing it alone does not help. `full_mappings(arch)` returns
    the join's non-dominated full mappings (with reservation columns) on `arch`."""
    needs = {}
    for level in tqdm(finite_levels(arch), desc="no valid mapping; relaxing each level", unit="level",
                      disable=not progress):
        loose = relaxed(arch, level)
        full = full_mappings(loose)
        needs[level] = min((peak(row, loose)[level] for _, row in full.iterrows()), default=math.inf)
    return needs


def amount_text(amount: float, unit: str) -> str:
    """A capacity in a level's unit, exactly: '96 B (768 bits)' or '2 values'."""
    if unit == "values":
        return f"{amount:g} value{'' if amount == 1 else 's'}"
    text = size_text(amount)
    return text if text.endswith("bits") or amount == math.inf else f"{text} ({amount:.0f} bits)"


class NoValidMapping(SpecError):
    """No mapping in the mapspace fits the architecture's capacities.

    `needs[level]` is the smallest capacity (bits, or values for a `values` level) that
    would admit a mapping with every other level as specified (inf: none would);
    `capacities[level]` is what the arch has, `units[level]` 'bits' or 'values'."""

    def __init__(self, workload: str, arch: Arch, needs: dict[str, float]):
        self.needs = dict(needs)
        self.units = {lv: capacity_unit(arch, lv)[0] for lv in needs}
        self.capacities = {lv: capacity_unit(arch, lv)[1] for lv in needs}
        parts = []
        for lv, need in needs.items():
            unit, have = self.units[lv], self.capacities[lv]
            if need == math.inf:
                parts.append(f"even an unlimited {lv} alone would not suffice")
            else:
                parts.append(f"{lv} needs at least {amount_text(need, unit)} per instance, "
                             f"has {amount_text(have, unit)}")
        if not parts:
            parts.append("no level has a finite capacity: the mapspace itself is empty")
        super().__init__(f"{workload} on {arch.name}", None, "no valid mapping: " + "; or ".join(parts))


class NothingFoundInTime(SpecError):
    """pmapgen was cut short by its time limit before any valid mapping turned up: whether
    one exists is not known (so no capacity advice)."""

    def __init__(self, workload: str, arch: Arch, time_limit: float):
        super().__init__(f"{workload} on {arch.name}", "time limit",
                         f"no valid mapping found with pmapgen cut short at {time_limit:g} s per Einsum; "
                         f"allow more time (0: no limit, exhaustive)")
