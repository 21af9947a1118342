"""Load a workload spec (DESIGN §3, docs/specs.md) into a `Workload`.

Every problem is raised as `specio.SpecError(file, field, message)`; the message says what
was expected. Einsums must be listed in a topological order.
"""
from __future__ import annotations

import numbers
import re
from pathlib import Path
from typing import Any

from specio import SpecError, read_spec
from workloads.model import Einsum, Tensor, TensorUse, Workload

SHIPPED_DIR = Path(__file__).parent / "specs"
DEFAULT_BITS = 8
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENT_RE = re.compile(rf"^{_IDENT}$")
_USE_RE = re.compile(rf"^\s*({_IDENT})\s*\[([^\[\]]*)\]\s*$")
_EINSUM_FORM = '"OUT[r,...] = IN[r,...] * IN[r,...]"'
_TOP_KEYS = ("name", "description", "variables", "rank_sizes", "bits", "einsums", "chain", "weights")
_CHAIN_KEYS = ("length", "ranks", "widths")


def available() -> list[str]:
    """Names of the shipped workload specs."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.yaml"))


def parse_overrides(items: list[str], source: str = "--set") -> dict[str, int]:
    """Parse command-line `NAME=INTEGER` strings (e.g. `seq_len=65536`) into a dict."""
    out: dict[str, int] = {}
    for item in items:
        name, eq, value = str(item).partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not _IDENT_RE.match(name) or not re.fullmatch(r"[+-]?\d+", value):
            raise SpecError(source, str(item), "expected NAME=INTEGER, e.g. seq_len=65536")
        if int(value) <= 0:
            raise SpecError(source, str(item), f"expected a positive integer for {name}, got {value}")
        out[name] = int(value)
    return out


def load(spec: str | Path | dict, **variables: int) -> Workload:
    """Load a workload from a shipped name, a YAML path or a dict; `variables` override
    the spec's variables (an unknown name is an error)."""
    data, src = read_spec(spec, SHIPPED_DIR, "workload")
    return _WorkloadLoader(data, src).build(variables)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _fmt(names: Any) -> str:
    names = sorted(names)
    return ", ".join(names) if names else "(none)"


class _WorkloadLoader:
    def __init__(self, data: dict, src: str):
        self.data, self.src = data, src
        self.variables: dict[str, int] = {}
        self.rank_sizes: dict[str, int] = {}

    def error(self, field: str | None, message: str) -> SpecError:
        return SpecError(self.src, field, message)

    # -- scalar helpers ---------------------------------------------------------------
    def mapping(self, value: Any, field: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(field, f"expected a mapping, got {value!r}")
        return value

    def identifier(self, value: Any, field: str, what: str) -> str:
        if not isinstance(value, str) or not _IDENT_RE.match(value):
            raise self.error(field, f"expected {what} (an identifier like [A-Za-z_][A-Za-z0-9_]*), got {value!r}")
        return value

    def positive_int(self, value: Any, field: str) -> int:
        """An integer > 0, or the name of a variable (resolved)."""
        if isinstance(value, str) and _IDENT_RE.match(value):
            if value not in self.variables:
                raise self.error(field, f"unknown variable {value!r}; expected a positive integer "
                                        f"or one of the variables: {_fmt(self.variables)}")
            return self.variables[value]
        if not _is_int(value) or value <= 0:
            raise self.error(field, f"expected a positive integer or a variable name, got {value!r}")
        return int(value)

    # -- sections ---------------------------------------------------------------------
    def build(self, overrides: dict[str, Any]) -> Workload:
        d = self.data
        for key in d:
            if key not in _TOP_KEYS:
                raise self.error(str(key), f"unknown field; expected one of: {', '.join(_TOP_KEYS)}")
        if "name" not in d:
            raise self.error("name", "missing; expected the workload's name")
        name = d["name"]
        if not isinstance(name, str) or not name.strip():
            raise self.error("name", f"expected the workload's name (a non-empty string), got {name!r}")
        self.read_variables(overrides)
        self.read_rank_sizes()
        entries, weights = self.read_einsum_entries()
        einsums = [self.parse_einsum(entry, f"einsums[{i}]") for i, entry in enumerate(entries)]
        shapes = self.check_dag(einsums)
        weights = self.read_weights(weights, einsums, shapes)
        bits = self.read_bits(shapes)
        consumed = {u.tensor for e in einsums for u in e.inputs}
        produced = {e.output.tensor for e in einsums}
        tensors = {}
        for t, (shape, _) in shapes.items():
            role = "input" if t not in produced else ("intermediate" if t in consumed else "output")
            tensors[t] = Tensor(t, shape, bits.get(t, bits["default"]), role, t in weights)
        return Workload(name, tuple(einsums), tensors, self.rank_sizes, self.variables, self.src)

    def read_variables(self, overrides: dict[str, Any]) -> None:
        for k, v in self.mapping(self.data.get("variables"), "variables").items():
            self.identifier(k, f"variables.{k}", "a variable name")
            if not _is_int(v) or v <= 0:
                raise self.error(f"variables.{k}", f"expected a positive integer, got {v!r}")
            self.variables[k] = int(v)
        for k, v in overrides.items():
            if k not in self.variables:
                raise self.error(f"variables.{k}", f"cannot set unknown variable {k!r}; "
                                                   f"expected one of: {_fmt(self.variables)}")
            if not _is_int(v) or v <= 0:
                raise self.error(f"variables.{k}", f"expected a positive integer to set {k} to, got {v!r}")
            self.variables[k] = int(v)

    def read_rank_sizes(self) -> None:
        for r, v in self.mapping(self.data.get("rank_sizes"), "rank_sizes").items():
            self.identifier(r, f"rank_sizes.{r}", "a rank variable")
            self.rank_sizes[r] = self.positive_int(v, f"rank_sizes.{r}")

    def read_einsum_entries(self) -> tuple[list, list]:
        d = self.data
        weights = d.get("weights") or []
        if not isinstance(weights, list):
            raise self.error("weights", f"expected a list of workload-input tensor names, got {weights!r}")
        if "chain" in d:
            if "einsums" in d:
                raise self.error("chain", "expected either `einsums` or `chain`, not both")
            entries, chain_weights = self.expand_chain(self.mapping(d["chain"], "chain"))
            return entries, [*weights, *chain_weights]
        if "einsums" not in d:
            raise self.error("einsums", f"missing; expected a list of Einsums like {_EINSUM_FORM}")
        entries = d["einsums"]
        if not isinstance(entries, list) or not entries:
            raise self.error("einsums", f"expected a non-empty list of Einsums like {_EINSUM_FORM}")
        return entries, weights

    def expand_chain(self, chain: dict) -> tuple[list, list]:
        """`chain: {length, ranks, widths}` -> T{i}[ranks.., n{i}] = T{i-1}[ranks.., n{i-1}] * W{i}[n{i-1}, n{i}]."""
        for key in chain:
            if key not in _CHAIN_KEYS:
                raise self.error(f"chain.{key}", f"unknown field; expected one of: {', '.join(_CHAIN_KEYS)}")
        if "length" not in chain or "widths" not in chain:
            raise self.error("chain", "expected `length` (Einsums in the chain) and `widths` (sizes of n0, n1, ...)")
        length = self.positive_int(chain["length"], "chain.length")
        ranks = chain.get("ranks", [])
        if not isinstance(ranks, list):
            raise self.error("chain.ranks", f"expected a list of rank variables, got {ranks!r}")
        for i, r in enumerate(ranks):
            self.identifier(r, f"chain.ranks[{i}]", "a rank variable")
        widths = chain["widths"]
        if not isinstance(widths, list) or not widths:
            raise self.error("chain.widths", f"expected a non-empty list of sizes, got {widths!r}")
        sizes = [self.positive_int(w, f"chain.widths[{i}]") for i, w in enumerate(widths)]
        for i in range(length + 1):
            if f"n{i}" in self.rank_sizes:
                raise self.error(f"rank_sizes.n{i}", "rank variable is generated by `chain`; expected it not "
                                                     "to be listed in rank_sizes")
            self.rank_sizes[f"n{i}"] = sizes[i % len(sizes)]
        lead = "".join(f"{r}," for r in ranks)
        entries = [f"T{i}[{lead}n{i}] = T{i - 1}[{lead}n{i - 1}] * W{i}[n{i - 1},n{i}]"
                   for i in range(1, length + 1)]
        return entries, [f"W{i}" for i in range(1, length + 1)]

    def parse_use(self, text: str, field: str, expr: str) -> TensorUse:
        m = _USE_RE.match(text)
        if not m:
            raise self.error(field, f"cannot read tensor {text.strip()!r} in {expr!r}; expected "
                                    f"NAME[r,...], as in {_EINSUM_FORM}")
        ranks = tuple(r.strip() for r in m.group(2).split(",")) if m.group(2).strip() else ()
        for r in ranks:
            if not _IDENT_RE.match(r):
                raise self.error(field, f"bad rank variable {r!r} in {text.strip()!r}; expected identifiers "
                                        "separated by commas")
            if ranks.count(r) > 1:
                raise self.error(field, f"rank variable {r!r} appears twice in {text.strip()!r}; expected "
                                        "each position of a tensor to have its own rank variable")
            if r not in self.rank_sizes:
                raise self.error(field, f"rank variable {r!r} has no size; expected it in rank_sizes "
                                        f"(known: {_fmt(self.rank_sizes)})")
        return TensorUse(m.group(1), ranks)

    def parse_einsum(self, entry: Any, field: str) -> Einsum:
        unit = None
        if isinstance(entry, dict):
            for key in entry:
                if key not in ("expr", "unit"):
                    raise self.error(field, f"unknown key {key!r}; expected `expr` and optionally `unit`")
            if "expr" not in entry:
                raise self.error(field, f"missing `expr`; expected {{expr: {_EINSUM_FORM}, unit: vector}}")
            unit = entry.get("unit")
            if unit is not None and not (isinstance(unit, str) and _IDENT_RE.match(unit)):
                raise self.error(f"{field}.unit", f"unknown unit {unit!r}; expected vector, mac or a compute "
                                                  "unit's name")
            entry = entry["expr"]
        if not isinstance(entry, str) or entry.count("=") != 1:
            raise self.error(field, f"expected an Einsum like {_EINSUM_FORM}, got {entry!r}")
        lhs, rhs = entry.split("=")
        output = self.parse_use(lhs, field, entry)
        inputs = tuple(self.parse_use(t, field, entry) for t in rhs.split("*"))
        names = [u.tensor for u in inputs]
        if output.tensor in names:
            raise self.error(field, f"{output.tensor} is both the output and an input of {entry!r}; expected "
                                    "an Einsum to write a new tensor")
        if len(set(names)) != len(names):
            raise self.error(field, f"a tensor is used twice as an input in {entry!r}; expected distinct inputs")
        return Einsum(output.tensor, output, inputs, unit)

    def check_dag(self, einsums: list[Einsum]) -> dict[str, tuple[tuple[int, ...], str]]:
        """Check producers, topological order and consistent sizes; return tensor -> (shape, first use)."""
        producer: dict[str, int] = {}
        for i, e in enumerate(einsums):
            if e.name in producer:
                raise self.error(f"einsums[{i}]", f"{e.name} is already produced by einsums[{producer[e.name]}]; "
                                                  "expected each tensor to have one producer")
            producer[e.name] = i
        for i, e in enumerate(einsums):
            for u in e.inputs:
                j = producer.get(u.tensor)
                if j is not None and j >= i:
                    cycle = self.find_cycle(einsums, producer, start=j, target=i)
                    if cycle:
                        raise self.error(f"einsums[{i}]", "cycle in the Einsum DAG (data flows "
                                         + " -> ".join(reversed(cycle)) + "); expected an acyclic DAG")
                    raise self.error(f"einsums[{i}]", f"{e.name} consumes {u.tensor}, which is produced later "
                                                      f"by einsums[{j}]; expected Einsums in a topological order "
                                                      "(each tensor produced before it is consumed)")
        shapes: dict[str, tuple[tuple[int, ...], str]] = {}
        for i, e in enumerate(einsums):
            for u in e.tensor_uses:
                shape = tuple(self.rank_sizes[r] for r in u.ranks)
                if u.tensor not in shapes:
                    shapes[u.tensor] = (shape, f"einsums[{i}] ({u})")
                    continue
                first, where = shapes[u.tensor]
                if len(first) != len(shape):
                    raise self.error(f"einsums[{i}]", f"{u} has {len(shape)} rank(s) but {len(first)} in {where}; "
                                                      "expected every use of a tensor to have the same ranks")
                for pos, (a, b) in enumerate(zip(first, shape)):
                    if a != b:
                        raise self.error(f"einsums[{i}]", f"{u} gives position {pos} ({u.ranks[pos]}) size {b} "
                                                          f"but {where} gives it size {a}; expected every use "
                                                          "to give each position the same size")
        return shapes

    @staticmethod
    def find_cycle(einsums: list[Einsum], producer: dict[str, int], start: int, target: int) -> list[str]:
        """A dependency path from Einsum `target` back to itself through `start`, if any."""
        def path(i: int, seen: set[int]) -> list[str] | None:
            if i == target:
                return [einsums[i].name]
            seen.add(i)
            for u in einsums[i].inputs:
                j = producer.get(u.tensor)
                if j is not None and j not in seen:
                    rest = path(j, seen)
                    if rest is not None:
                        return [einsums[i].name, *rest]
            return None
        rest = path(start, set())
        return [einsums[target].name, *rest] if rest else []

    def read_weights(self, names: list, einsums: list[Einsum], shapes: dict) -> set[str]:
        produced = {e.name for e in einsums}
        for i, t in enumerate(names):
            if not isinstance(t, str) or t not in shapes:
                raise self.error(f"weights[{i}]", f"no tensor named {t!r}; expected a workload input "
                                                  f"(one of: {_fmt(set(shapes) - produced)})")
            if t in produced:
                raise self.error(f"weights[{i}]", f"{t} is produced by an Einsum; expected a workload input "
                                                  "(a tensor no Einsum produces)")
        return set(names)

    def read_bits(self, shapes: dict) -> dict[str, int]:
        bits = self.data.get("bits", DEFAULT_BITS)
        if not isinstance(bits, dict):
            return {"default": self.positive_int(bits, "bits")}
        if "default" not in bits:
            raise self.error("bits", "expected a `default` entry, as in {default: 8, QK: 16}")
        out = {}
        for t, v in bits.items():
            if t != "default" and t not in shapes:
                raise self.error(f"bits.{t}", f"no tensor named {t!r}; expected default or a tensor name "
                                              f"(one of: {_fmt(shapes)})")
            out[t] = self.positive_int(v, f"bits.{t}")
        return out
