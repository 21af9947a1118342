"""`looptree.evaluate`: a whole mapping's energy, latency, accesses and peak usage."""
from __future__ import annotations

from dataclasses import dataclass, field

from arch.model import Arch
from looptree.model import PmappingAnalysis, PmappingCost, analyze, cost
from looptree.nodes import Mapping, Pmapping
from looptree.reservations import Usage, usage
from looptree.validate import normalize, validate_mapping
from workloads.model import Workload


@dataclass(frozen=True)
class EinsumResult:
    energy_pJ: float
    latency_s: float
    ops: int
    compute_energy_pJ: float
    compute_latency_s: float
    memory_latency_s: dict[str, float]


@dataclass(frozen=True)
class Evaluation:
    energy_pJ: float
    latency_s: float
    per_einsum: dict[str, EinsumResult]
    accesses: dict[str, dict[str, dict[str, int]]]  # level -> tensor -> reads/writes (values)
    energy_by_access_pJ: dict[str, dict[str, float]]  # level -> tensor -> pJ
    peak_usage_bits: dict[str, float]
    usage: Usage
    overflows: dict[str, str]  # level -> description, empty when valid
    fused_tensors: tuple[str, ...]
    mapping: Mapping = field(repr=False, default=None)

    @property
    def edp(self) -> float:
        return self.energy_pJ * self.latency_s

    @property
    def valid(self) -> bool:
        return not self.overflows


def fused_tensors(mapping: Mapping, workload: Workload, arch: Arch) -> tuple[str, ...]:
    """Intermediates backed below the top level, in workload order."""
    top = arch.memories[0].name
    out = []
    for t, tensor in workload.tensors.items():
        # the producer's backing, or a consumer's when only part of the workload is mapped
        # (one pmapping evaluated alone)
        users = [e for e in workload.users(t) if e in mapping.order] if tensor.role == "intermediate" else []
        if users and mapping[users[0]].backing(t)[1] != top:
            out.append(t)
    return tuple(out)


def evaluate(mapping: Mapping | Pmapping, workload: Workload, arch: Arch) -> Evaluation:
    """Validate and evaluate a mapping (or a single-Einsum pmapping) with the analytical model.

    Raises MappingError if it is outside the mapspace; capacity overflows do not raise:
    they are reported in `overflows` (and `valid` is False).
    """
    if isinstance(mapping, Pmapping):
        mapping = Mapping({mapping.einsum: mapping}, (mapping.einsum,))
        if len(workload.einsums) != 1:
            workload = _single(workload, mapping.order[0])
    mapping = Mapping({e: normalize(p, workload) for e, p in mapping.pmappings.items()}, mapping.order)
    validate_mapping(mapping, workload, arch)
    analyses: dict[str, PmappingAnalysis] = {}
    costs: dict[str, PmappingCost] = {}
    accesses: dict[str, dict[str, dict[str, int]]] = {}
    energies: dict[str, dict[str, float]] = {}
    per_einsum = {}
    for name in mapping.order:
        a = analyses[name] = analyze(mapping[name], workload, arch)
        c = costs[name] = cost(a, workload, arch)
        for (level, tensor), n in a.counts.reads.items():
            _bump(accesses, level, tensor, "reads", int(n))
        for (level, tensor), n in a.counts.writes.items():
            _bump(accesses, level, tensor, "writes", int(n))
        for (level, tensor), pj in c.energy_by_access.items():
            energies.setdefault(level, {})[tensor] = energies.get(level, {}).get(tensor, 0.0) + float(pj)
        per_einsum[name] = EinsumResult(float(c.energy_pJ), float(c.latency_s), int(a.ops),
                                        float(c.compute_energy_pJ), float(c.compute_latency_s),
                                        {k: float(v) for k, v in c.memory_latency_s.items()})
    use = usage(mapping, analyses, workload, arch)
    return Evaluation(
        energy_pJ=sum(r.energy_pJ for r in per_einsum.values()),
        latency_s=sum(r.latency_s for r in per_einsum.values()),
        per_einsum=per_einsum, accesses=accesses, energy_by_access_pJ=energies,
        peak_usage_bits=use.peak_bits, usage=use, overflows=use.overflows(arch),
        fused_tensors=fused_tensors(mapping, workload, arch), mapping=mapping)


def _bump(d: dict, level: str, tensor: str, key: str, n: int) -> None:
    slot = d.setdefault(level, {}).setdefault(tensor, {"reads": 0, "writes": 0})
    slot[key] += n


def _single(workload: Workload, einsum: str) -> Workload:
    """The workload restricted to one Einsum; tensors keep their roles, so an intermediate
    may still be backed on chip (as pmapgen explores it)."""
    from dataclasses import replace
    e = workload.einsum(einsum)
    return replace(workload, einsums=(e,), tensors={t: workload.tensors[t] for t in e.tensors})
