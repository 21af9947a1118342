"""The mapping export of DESIGN §8: write it, read it back into looptree nodes."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looptree.nodes import Compute, Loop, Mapping, Node, Pmapping, Storage

if TYPE_CHECKING:
    from looptree.evaluation import Evaluation
from specio import SpecError


@dataclass(frozen=True)
class MappingDocument:
    """A mapping as exported: the mapping plus what it was made for and what it cost."""
    mapping: Mapping
    workload: str
    arch: str
    variables: dict[str, int] = field(default_factory=dict)
    objective: str | None = None
    totals: dict[str, float] = field(default_factory=dict)
    source: str = "<mapping>"
    raw: dict = field(default_factory=dict, repr=False)


def node_to_json(node: Node) -> dict:
    if isinstance(node, Storage):
        return {"storage": node.level, "tensors": list(node.tensors)}
    if isinstance(node, Loop):
        out: dict[str, Any] = {"loop": node.rank_variable, "tile": int(node.tile)}
        if node.spatial:
            out["spatial"] = node.spatial
        return out
    return {"compute": node.unit}


def pmapping_to_json(p: Pmapping) -> list[dict]:
    return [node_to_json(n) for n in p.nodes]


def _node_from_json(d: Any, source: str, field_name: str) -> Node:
    if not isinstance(d, dict):
        raise SpecError(source, field_name, f"expected a node object, got {d!r}")
    keys = set(d)
    if "storage" in d:
        tensors = d.get("tensors")
        if keys - {"storage", "tensors"} or not isinstance(tensors, list) or not tensors:
            raise SpecError(source, field_name, 'expected {"storage": LEVEL, "tensors": [names...]}')
        return Storage(str(d["storage"]), tuple(str(t) for t in tensors))
    if "loop" in d:
        if keys - {"loop", "tile", "spatial"} or "tile" not in d:
            raise SpecError(source, field_name, 'expected {"loop": RANK, "tile": N[, "spatial": DIM]}')
        tile = d["tile"]
        if isinstance(tile, bool) or not isinstance(tile, int) or tile <= 0:
            raise SpecError(source, field_name + ".tile", f"expected a positive integer, got {tile!r}")
        return Loop(str(d["loop"]), tile, d.get("spatial"))
    if "compute" in d:
        if keys != {"compute"}:
            raise SpecError(source, field_name, 'expected {"compute": UNIT}')
        return Compute(str(d["compute"]))
    raise SpecError(source, field_name, "expected a storage, loop or compute node")


def load_mapping(path_or_dict: str | Path | dict) -> MappingDocument:
    """Read the export of DESIGN §8 (a path to JSON or an already-parsed dict)."""
    if isinstance(path_or_dict, dict):
        data, source = path_or_dict, "<mapping dict>"
    else:
        source = str(path_or_dict)
        try:
            data = json.loads(Path(path_or_dict).read_text())
        except FileNotFoundError:
            raise SpecError(source, None, "file not found") from None
        except json.JSONDecodeError as exc:
            raise SpecError(source, f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise SpecError(source, None, "expected a JSON object")
    for key in ("workload", "arch", "pmappings"):
        if key not in data:
            raise SpecError(source, key, "missing (expected the DESIGN §8 export format)")
    pm = data["pmappings"]
    if not isinstance(pm, dict) or not pm:
        raise SpecError(source, "pmappings", "expected an object {einsum: [nodes...]}")
    pmappings = {}
    for einsum, nodes in pm.items():
        if not isinstance(nodes, list) or not nodes:
            raise SpecError(source, f"pmappings.{einsum}", "expected a non-empty list of nodes")
        pmappings[einsum] = Pmapping(einsum, tuple(_node_from_json(n, source, f"pmappings.{einsum}[{i}]")
                                                   for i, n in enumerate(nodes)))
    order = data.get("order", list(pmappings))
    if not isinstance(order, list):
        raise SpecError(source, "order", "expected a list of Einsum names")
    variables = data.get("variables", {}) or {}
    if not isinstance(variables, dict):
        raise SpecError(source, "variables", "expected an object {name: value}")
    return MappingDocument(Mapping(pmappings, tuple(order)), str(data["workload"]), str(data["arch"]),
                           dict(variables), data.get("objective"), dict(data.get("totals", {}) or {}),
                           source, data)


def save_json(data: dict, path: str | Path, force: bool = False) -> None:
    """Write JSON; refuse to overwrite an existing file unless `force`."""
    path = Path(path)
    if path.exists() and not force:
        raise SpecError(str(path), None, "already exists; pass --force to overwrite it")
    path.write_text(json.dumps(data, indent=1) + "\n")


def export(evaluation: "Evaluation", workload_name: str, arch_name: str, variables: dict,
           objective: str | None = None) -> dict:
    """The DESIGN §8 document for an evaluated mapping."""
    m = evaluation.mapping
    return {
        "workload": workload_name, "arch": arch_name, "variables": dict(variables),
        "objective": objective, "order": list(m.order),
        "pmappings": {e: pmapping_to_json(m[e]) for e in m.order},
        "totals": {"energy_pJ": evaluation.energy_pJ, "latency_s": evaluation.latency_s,
                   "edp": evaluation.edp},
        "per_einsum": {e: {"energy_pJ": r.energy_pJ, "latency_s": r.latency_s, "ops": r.ops}
                       for e, r in evaluation.per_einsum.items()},
        "accesses": evaluation.accesses,
        "peak_usage_bits": evaluation.peak_usage_bits,
        "fused_tensors": list(evaluation.fused_tensors),
    }
