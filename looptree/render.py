"""Human-readable text: the LoopTree of a mapping and an evaluation report."""
from __future__ import annotations

from arch.model import Arch
from looptree.nodes import Compute, Loop, Mapping, Storage
from looptree.reservations import size_text
from looptree.validate import fused_depths
from workloads.model import Workload


def _node_text(node, workload: Workload, einsum: str, extent: int = 0) -> str:
    if isinstance(node, Storage):
        return f"[{node.level}] {', '.join(node.tensors)}"
    if isinstance(node, Loop):
        kind = f"S-for ({node.spatial})" if node.spatial else "for"
        return f"{kind} {node.rank_variable}: {extent // node.tile} tiles of {node.tile}"
    return f"({node.unit}) {workload.einsum(einsum)}"


def looptree_text(mapping: Mapping, workload: Workload, arch: Arch) -> str:
    """The mapping as one indented tree: all top-level storage at the root; loops shared
    with the previous Einsum (fused loops) and the backing node of a shared tensor are
    printed once; each Einsum's own nodes hang below them, ending in its compute leaf."""
    top = arch.memories[0].name
    depths = [0] + fused_depths(mapping, workload, arch)
    root: list[str] = []
    lines: list[str] = []
    shown: set[tuple[str, str]] = set()
    for k, name in enumerate(mapping.order):
        p = mapping[name]
        backing = {p.backing(t)[0] for t in workload.einsum(name).tensors if workload.is_shared(t)}
        loops_seen = 0
        indent = 1
        extents = dict(workload.rank_sizes)
        for i, node in enumerate(p.nodes):
            if isinstance(node, Loop):
                loops_seen += 1
                extent, extents[node.rank_variable] = extents[node.rank_variable], node.tile
                if loops_seen <= depths[k]:
                    indent += 1
                    continue
            if isinstance(node, Storage):
                if node.level == top:
                    root += [t for t in node.tensors if t not in root]
                    continue
                fresh = tuple(t for t in node.tensors if not (i in backing and workload.is_shared(t)
                                                              and (node.level, t) in shown))
                shown.update((node.level, t) for t in node.tensors if i in backing)
                if not fresh:
                    continue
                node = Storage(node.level, fresh)
            bullet = "- " if isinstance(node, Compute) else ""
            lines.append("  " * indent + bullet + _node_text(node, workload, name,
                                                             extent if isinstance(node, Loop) else 0))
            if isinstance(node, Loop):
                indent += 1
    return "\n".join([f"[{top}] {', '.join(root)}"] + lines)


def _eng(x: float, unit: str) -> str:
    for prefix, f in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0), ("m", 1e-3),
                      ("u", 1e-6), ("n", 1e-9), ("p", 1e-12)):
        if abs(x) >= f:
            return f"{x / f:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def energy_text(pj: float) -> str:
    return _eng(pj * 1e-12, "J")


def time_text(seconds: float) -> str:
    return _eng(seconds, "s")


def edp_text(edp_pj_s: float) -> str:
    """An energy-delay product given in pJ*s, as J*s."""
    return f"{edp_pj_s * 1e-12:.4g} J*s"


def unfused_intermediates(evaluation, workload: Workload) -> tuple[str, ...]:
    """Intermediate tensors exchanged through the top level (not fused), in workload order."""
    return tuple(t for t, tensor in workload.tensors.items()
                 if tensor.role == "intermediate" and t not in evaluation.fused_tensors)


def report_text(evaluation, workload: Workload, arch: Arch, title: str = "") -> str:
    """Totals, what is fused, per-Einsum and per-level/tensor energy, peak usage, LoopTree."""
    ev = evaluation
    out = []
    if title:
        out += [title, "=" * len(title)]
    out.append(f"Energy {energy_text(ev.energy_pJ)}   Latency {time_text(ev.latency_s)}   "
               f"EDP {edp_text(ev.edp)}")
    status = "valid" if ev.valid else "INVALID: " + "; ".join(f"{lv} {msg}" for lv, msg in ev.overflows.items())
    out.append(f"Capacity: {status}")
    top = arch.memories[0].name
    if ev.fused_tensors:
        where = []
        for t in ev.fused_tensors:
            _, level = ev.mapping[workload.producer(t)].backing(t)
            where.append(f"{t} in {level}")
        out.append("Kept on chip (fused): " + ", ".join(where))
        unfused = unfused_intermediates(ev, workload)
        if unfused:
            out.append(f"Through {top} (unfused): " + ", ".join(unfused))
    else:
        out.append(f"Kept on chip (fused): nothing; every intermediate goes through {top}")
    out.append("")
    out.append(f"{'Einsum':<14}{'energy':>12}{'latency':>12}{'ops':>12}  bound by")
    for e in ev.mapping.order:
        r = ev.per_einsum[e]
        bound = max([("compute", r.compute_latency_s)] + list(r.memory_latency_s.items()), key=lambda kv: kv[1])[0]
        out.append(f"{e:<14}{energy_text(r.energy_pJ):>12}{_eng(r.latency_s, 's'):>12}{r.ops:>12.3g}  {bound}")
    out.append("")
    out.append("Energy by level and tensor:")
    for m in arch.memories:
        row = ev.energy_by_access_pJ.get(m.name, {})
        if not row:
            continue
        total = sum(row.values())
        parts = ", ".join(f"{t} {energy_text(v)}" for t, v in sorted(row.items(), key=lambda kv: -kv[1]) if v)
        if not parts:  # accessed, but free in this arch: say what is there rather than nothing
            parts = ", ".join(sorted(row)) + " (accesses cost 0 pJ here)"
        out.append(f"  {m.name:<14}{energy_text(total):>12}   {parts}")
    compute = sum(r.compute_energy_pJ for r in ev.per_einsum.values())
    out.append(f"  {'compute':<14}{energy_text(compute):>12}")
    out.append("")
    out.append("Peak usage per instance:")
    for m in arch.memories[1:]:
        if m.capacity_values != float("inf"):
            peak = ev.usage.peak_values.get(m.name, 0.0)
            out.append(f"  {m.name:<14}{peak:>10g} values of {m.capacity_values:g}")
        else:
            peak = ev.peak_usage_bits.get(m.name, 0.0)
            out.append(f"  {m.name:<14}{size_text(peak):>12} of {size_text(m.capacity_bits)}")
    out.append("")
    out.append("LoopTree:")
    out.append(looptree_text(ev.mapping, workload, arch))
    return "\n".join(out)
