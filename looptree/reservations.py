"""Reservations of a full mapping: which tiles are live while each Einsum runs, and the
peak usage per memory level and instance (docs/semantics.md §5, FFM §5.1).
"""
from __future__ import annotations

from dataclasses import dataclass

from arch.model import Arch
from looptree.model import PmappingAnalysis
from looptree.nodes import Mapping
from looptree.validate import fused_depths
from workloads.model import Workload


@dataclass(frozen=True)
class Usage:
    """Peak per level (per instance), and the usage while each Einsum runs."""
    peak_bits: dict[str, float]
    peak_values: dict[str, float]
    during_bits: dict[str, dict[str, float]]  # einsum -> level -> bits

    def overflows(self, arch: Arch) -> dict[str, str]:
        """level -> 'needs X, has Y' for every level whose peak exceeds its capacity."""
        out = {}
        for m in arch.memories[1:]:
            bits, values = self.peak_bits.get(m.name, 0), self.peak_values.get(m.name, 0)
            if bits > m.capacity_bits:
                out[m.name] = (f"needs {size_text(bits)} per instance, has {size_text(m.capacity_bits)} "
                               f"(over by {size_text(bits - m.capacity_bits)})")
            elif values > m.capacity_values:
                out[m.name] = (f"needs {values:g} values per instance, has {m.capacity_values:g} "
                               f"(over by {values - m.capacity_values:g})")
        return out


def shares(depths: list[int], a: int, b: int) -> int:
    """Loops shared by the Einsums at order positions a and b."""
    if a == b:
        return 10**9
    lo, hi = min(a, b), max(a, b)
    return min(depths[lo:hi])


def usage(mapping: Mapping, analyses: dict[str, PmappingAnalysis], workload: Workload, arch: Arch) -> Usage:
    """Usage of every level while each Einsum runs, and the peaks."""
    order = list(mapping.order)
    position = {e: k for k, e in enumerate(order)}
    depths = fused_depths(mapping, workload, arch)
    during: dict[str, dict[str, float]] = {}
    during_values: dict[str, dict[str, float]] = {}
    for y, ename in enumerate(order):
        bits: dict[str, float] = {}
        values: dict[str, float] = {}
        counted_backing: set[str] = set()
        for x, xname in enumerate(order):
            for k, tile in enumerate(analyses[xname].tiles):
                shared_backing = _is_first_in_chain(analyses[xname], k) and workload.is_shared(tile.tensor)
                if shared_backing:
                    users = [position[u] for u in workload.users(tile.tensor)]
                    if not (min(users) <= y <= max(users)) or tile.tensor in counted_backing:
                        continue
                    counted_backing.add(tile.tensor)
                elif x != y and shares(depths, x, y) <= tile.lifetime_depth:
                    continue
                b = float(tile.values * workload.tensors[tile.tensor].bits)
                bits[tile.level] = bits.get(tile.level, 0.0) + b
                values[tile.level] = values.get(tile.level, 0.0) + float(tile.values)
        during[ename] = bits
        during_values[ename] = values
    levels = [m.name for m in arch.memories]
    peak_bits = {lv: max((d.get(lv, 0.0) for d in during.values()), default=0.0) for lv in levels}
    peak_values = {lv: max((d.get(lv, 0.0) for d in during_values.values()), default=0.0) for lv in levels}
    return Usage(peak_bits, peak_values, during)


def _is_first_in_chain(analysis: PmappingAnalysis, k: int) -> bool:
    return analysis.tiles[k].parent is None


def size_text(bits: float) -> str:
    """Bits as a human size in binary units (B, KiB, MiB, GiB)."""
    if bits == float("inf"):
        return "unlimited"
    for unit, factor in (("GiB", 8 * 2**30), ("MiB", 8 * 2**20), ("KiB", 8 * 2**10), ("B", 8)):
        if bits >= factor:
            return f"{bits / factor:.4g} {unit}"
    return f"{bits:g} bits"
