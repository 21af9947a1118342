"""Load an architecture spec (DESIGN §3, docs/semantics.md §1, docs/specs.md) into an `Arch`.

Every problem is raised as `specio.SpecError(file, field, message)`; the message says what
was expected.
"""
from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Any

from arch.model import KEEP_SELECTORS, Arch, ComputeUnit, FanoutDim, Memory
from specio import SpecError, parse_quantity, read_spec

SHIPPED_DIR = Path(__file__).parent / "specs"
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BARE_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_VALUES_RE = re.compile(r"^\s*(\d+)\s*values?\s*$")
_TOP_KEYS = ("name", "description", "clock", "levels")
_MEMORY_KEYS = ("memory", "capacity", "read_energy", "write_energy", "bandwidth", "read_bandwidth",
                "write_bandwidth", "fanout", "must_keep", "may_keep")
_COMPUTE_KEYS = ("compute", "energy", "throughput", "einsums", "below")
_DIM_KEYS = ("size", "multicast", "reduce", "iterates")
_ITERATES = ("any", "multicast", "reduced")
_EINSUM_SELECTORS = ("all", "mac", "vector")
_EXAMPLE = {"capacity": "'512 KiB'", "bandwidth": "'614 GB/s'", "energy_per_bit": "'1.88 pJ/bit'",
            "energy": "'0.084 pJ'", "frequency": "'1.05 GHz'"}


def _what(kind: str) -> str:
    return {"energy_per_bit": "an energy per bit", "energy": "an energy per op"}.get(kind, f"a {kind}")


def available() -> list[str]:
    """Names of the shipped architecture specs."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


def load(spec: str | Path | dict) -> Arch:
    """Load an architecture from a shipped name, a YAML path or a dict."""
    data, src = read_spec(spec, SHIPPED_DIR, "arch")
    return _ArchLoader(src).build(data)


class _ArchLoader:
    def __init__(self, src: str):
        self.src = src

    def error(self, field: str | None, message: str) -> SpecError:
        return SpecError(self.src, field, message)

    # -- value helpers ----------------------------------------------------------------
    def quantity(self, value: Any, kind: str, field: str, positive: bool = False) -> float:
        """A quantity with a unit (a bare 0 needs none); `positive` rejects 0."""
        text = str(value).strip() if isinstance(value, (str, int, float)) else ""
        if not isinstance(value, bool) and _BARE_RE.fullmatch(text) \
                and float(text) != 0:
            raise self.error(field, f"missing unit in {value!r}; expected {_what(kind)} such as {_EXAMPLE[kind]}")
        q = parse_quantity(value, kind, self.src, field)
        if positive and q <= 0:
            raise self.error(field, f"expected a positive {kind} such as {_EXAMPLE[kind]}, got {value!r}")
        return q

    def positive_int(self, value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.error(field, f"expected a positive integer, got {value!r}")
        return value

    def flag(self, value: Any, field: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(field, f"expected true or false, got {value!r}")
        return value

    def check_keys(self, entry: dict, allowed: tuple[str, ...], field: str) -> None:
        for key in entry:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                did = f"did you mean {hint[0]!r}? " if hint else ""
                raise self.error(f"{field}.{key}" if field else str(key), f"unknown field; {did}expected one of: {', '.join(allowed)}")

    def selectors(self, value: Any, field: str, known: tuple[str, ...]) -> tuple[str, ...]:
        """A selector or list of them: a known keyword or a tensor/Einsum name (typos of a
        keyword are rejected)."""
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise self.error(field, f"expected a list of selectors ({', '.join(known)} or names), got {value!r}")
        for i, s in enumerate(items):
            if not isinstance(s, str) or not _IDENT_RE.match(s):
                raise self.error(f"{field}[{i}]", f"expected a selector ({', '.join(known)}) or a name, got {s!r}")
            if s not in known:
                hint = difflib.get_close_matches(s, known, n=1, cutoff=0.75)
                if hint:
                    raise self.error(f"{field}[{i}]", f"unknown selector {s!r}; did you mean {hint[0]!r}? expected "
                                                      f"one of {', '.join(known)} or a name")
        return tuple(items)

    # -- levels -----------------------------------------------------------------------
    def build(self, d: dict) -> Arch:
        self.check_keys(d, _TOP_KEYS, "")
        for key, what in (("name", "the architecture's name"), ("clock", "a frequency such as '1.05 GHz'"),
                          ("levels", "a list of memories (outermost first) then compute units")):
            if key not in d:
                raise self.error(key, f"missing; expected {what}")
        if not isinstance(d["name"], str) or not d["name"].strip():
            raise self.error("name", f"expected the architecture's name (a non-empty string), got {d['name']!r}")
        clock = self.quantity(d["clock"], "frequency", "clock", positive=True)
        if math.isinf(clock):
            raise self.error("clock", f"expected a finite frequency such as '1.05 GHz', got {d['clock']!r}")
        levels = d["levels"]
        if not isinstance(levels, list) or not levels:
            raise self.error("levels", "expected a non-empty list of memories (outermost first) then compute units")
        memories: list[Memory] = []
        computes: list[ComputeUnit] = []
        names: dict[str, int] = {}
        dims: dict[str, str] = {}
        for i, entry in enumerate(levels):
            field = f"levels[{i}]"
            if not isinstance(entry, dict) or ("memory" in entry) == ("compute" in entry):
                raise self.error(field, f"expected a mapping with either `memory: NAME` or `compute: NAME`, "
                                        f"got {entry!r}")
            kind = "memory" if "memory" in entry else "compute"
            name = entry[kind]
            if not isinstance(name, str) or not _IDENT_RE.match(name):
                raise self.error(f"{field}.{kind}", f"expected a level name (an identifier), got {name!r}")
            if name in names:
                raise self.error(f"{field}.{kind}", f"duplicate level name {name!r} (also levels[{names[name]}]); "
                                                    "expected unique names")
            names[name] = i
            if kind == "memory":
                if computes:
                    raise self.error(field, f"memory {name!r} is listed after compute unit {computes[0].name!r}; "
                                            "expected memories first (outermost first), then compute units")
                memories.append(self.memory(entry, field, dims))
            else:
                computes.append(self.compute(entry, field, [m.name for m in memories]))
        if not computes:
            raise self.error("levels", "no compute unit; expected at least one `compute:` level after the memories")
        return Arch(d["name"], clock, tuple(memories), tuple(computes), self.src)

    def memory(self, e: dict, field: str, dims: dict[str, str]) -> Memory:
        self.check_keys(e, _MEMORY_KEYS, field)
        name = e["memory"]
        if "capacity" not in e:
            raise self.error(f"{field}.capacity", f"missing for memory {name!r}; expected a size such as "
                                                  "'512 KiB', 'N values' or inf")
        bits, values = self.capacity(e["capacity"], f"{field}.capacity")
        kw: dict[str, Any] = {"capacity_bits": bits, "capacity_values": values}
        for key in ("read_energy", "write_energy"):
            if key in e:
                kw[key] = self.quantity(e[key], "energy_per_bit", f"{field}.{key}")
        for key in ("bandwidth", "read_bandwidth", "write_bandwidth"):
            if key in e:
                kw[key] = self.quantity(e[key], "bandwidth", f"{field}.{key}", positive=True)
        if "fanout" in e:
            kw["fanout"] = self.fanout(e["fanout"], name, f"{field}.fanout")
            for dim in kw["fanout"]:
                if dim.name in dims:
                    raise self.error(f"{field}.fanout.{dim.name}", f"spatial dim {dim.name!r} is also a fanout "
                                                                   f"dim of {dims[dim.name]}; expected unique dim names")
                dims[dim.name] = name
        for key in ("must_keep", "may_keep"):
            if key in e:
                kw[key] = self.selectors(e[key], f"{field}.{key}", KEEP_SELECTORS)
        return Memory(name, **kw)

    def capacity(self, value: Any, field: str) -> tuple[float, float]:
        """(capacity_bits, capacity_values): a size, inf, or `N values`."""
        if isinstance(value, str) and "value" in value:
            m = _VALUES_RE.match(value)
            if not m or int(m.group(1)) <= 0:
                raise self.error(field, f"expected 'N values' with N a positive integer, got {value!r}")
            return math.inf, float(m.group(1))
        return self.quantity(value, "capacity", field, positive=True), math.inf

    def fanout(self, value: Any, memory: str, field: str) -> tuple[FanoutDim, ...]:
        if not isinstance(value, dict):
            return (FanoutDim(memory, self.positive_int(value, field), multicast=False, reduce=False),)
        if not value:
            raise self.error(field, "expected an integer or a mapping {DIM: {size: N, multicast: bool, reduce: bool}}")
        out = []
        for dim, spec in value.items():
            f = f"{field}.{dim}"
            if not isinstance(dim, str) or not _IDENT_RE.match(dim):
                raise self.error(f, f"expected a spatial dim name (an identifier), got {dim!r}")
            if not isinstance(spec, dict):
                spec = {"size": spec}
            self.check_keys(spec, _DIM_KEYS, f)
            if "size" not in spec:
                raise self.error(f"{f}.size", "missing; expected a positive integer (instances along the dim)")
            multicast = self.flag(spec.get("multicast", False), f"{f}.multicast")
            reduce = self.flag(spec.get("reduce", False), f"{f}.reduce")
            iterates = spec.get("iterates", "any")
            if iterates not in _ITERATES:
                raise self.error(f"{f}.iterates", f"expected one of {', '.join(_ITERATES)}, got {iterates!r}")
            if (iterates, multicast, reduce) in (("multicast", False, reduce), ("reduced", multicast, False)):
                flag = "multicast" if iterates == "multicast" else "reduce"
                raise self.error(f"{f}.iterates", f"'{iterates}' needs {flag}: true on the same dim")
            out.append(FanoutDim(dim, self.positive_int(spec["size"], f"{f}.size"), multicast=multicast,
                                 reduce=reduce, iterates=iterates))
        return tuple(out)

    def compute(self, e: dict, field: str, memories: list[str]) -> ComputeUnit:
        self.check_keys(e, _COMPUTE_KEYS, field)
        if not memories:
            raise self.error(field, f"compute unit {e['compute']!r} comes before any memory; expected at least "
                                    "one memory, and memories first (outermost first), then compute units")
        kw: dict[str, Any] = {}
        if "energy" in e:
            kw["energy"] = self.quantity(e["energy"], "energy", f"{field}.energy")
        if "throughput" in e:
            t = e["throughput"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf:
                raise self.error(f"{field}.throughput", f"expected a positive number of ops per cycle per "
                                                        f"instance, got {t!r}")
            kw["throughput"] = float(t)
        if "einsums" in e:
            kw["einsums"] = self.selectors(e["einsums"], f"{field}.einsums", _EINSUM_SELECTORS)
        if "below" in e:
            if e["below"] not in memories:
                raise self.error(f"{field}.below", f"unknown memory {e['below']!r}; expected one of the memories "
                                                   f"listed above it: {', '.join(memories)}")
            kw["below"] = e["below"]
        return ComputeUnit(e["compute"], **kw)
