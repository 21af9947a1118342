"""The workload data model: tensors and Einsums forming a DAG (DESIGN §3).

A tensor's ranks are its positions. Each Einsum names the rank variable that indexes each
position of each tensor it touches; rank variables are global letters whose sizes the
workload fixes, so the same letter means the same iteration range everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Literal, Mapping

Role = Literal["input", "output", "intermediate"]


@dataclass(frozen=True)
class TensorUse:
    """A tensor as one Einsum indexes it: `tensor[ranks...]`."""
    tensor: str
    ranks: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.tensor}[{','.join(self.ranks)}]"


@dataclass(frozen=True)
class Einsum:
    """`output = inputs[0] * inputs[1] ...`; the Einsum is named after its output tensor."""
    name: str
    output: TensorUse
    inputs: tuple[TensorUse, ...]
    unit: str | None = None  # 'mac', 'vector' or a compute unit's name; None: by input count

    @property
    def kind(self) -> str:
        """'vector' for one-input Einsums (or unit: vector), else 'mac'."""
        if self.unit in ("vector", "mac"):
            return self.unit
        return "vector" if len(self.inputs) <= 1 else "mac"

    @cached_property
    def tensor_uses(self) -> tuple[TensorUse, ...]:
        return (*self.inputs, self.output)

    @cached_property
    def tensors(self) -> tuple[str, ...]:
        return tuple(u.tensor for u in self.tensor_uses)

    @cached_property
    def rank_variables(self) -> tuple[str, ...]:
        """All rank variables, in order of first appearance (output first)."""
        seen: list[str] = []
        for use in (self.output, *self.inputs):
            for r in use.ranks:
                if r not in seen:
                    seen.append(r)
        return tuple(seen)

    @cached_property
    def reduced(self) -> frozenset[str]:
        """Rank variables that do not index the output (summed over)."""
        return frozenset(self.rank_variables) - frozenset(self.output.ranks)

    def use(self, tensor: str) -> TensorUse:
        for u in self.tensor_uses:
            if u.tensor == tensor:
                return u
        raise KeyError(f"{tensor} is not used by Einsum {self.name}")

    def indexes(self, rank_variable: str, tensor: str) -> bool:
        return rank_variable in self.use(tensor).ranks

    def is_output(self, tensor: str) -> bool:
        return tensor == self.output.tensor

    def __str__(self) -> str:
        return f"{self.output} = {' * '.join(str(u) for u in self.inputs)}"


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    bits: int
    role: Role
    weight: bool = False  # a workload input flagged as a weight (arch `keep` selectors use it)

    @property
    def values(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Workload:
    name: str
    einsums: tuple[Einsum, ...]
    tensors: Mapping[str, Tensor]
    rank_sizes: Mapping[str, int]
    variables: Mapping[str, int | float] = field(default_factory=dict)
    source: str = "<workload>"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "rank_sizes", MappingProxyType(dict(self.rank_sizes)))
        object.__setattr__(self, "variables", MappingProxyType(dict(self.variables)))

    def __reduce__(self):  # MappingProxyType fields do not pickle; rebuild from plain dicts
        return (Workload, (self.name, self.einsums, dict(self.tensors), dict(self.rank_sizes),
                           dict(self.variables), self.source))

    def restricted(self, names) -> Workload:
        """The sub-workload of the Einsums in `names` (in this workload's order): a tensor
        is shared there only if two of them use it."""
        return Workload(self.name, tuple(e for e in self.einsums if e.name in names), dict(self.tensors),
                        dict(self.rank_sizes), dict(self.variables), self.source)

    def einsum(self, name: str) -> Einsum:
        for e in self.einsums:
            if e.name == name:
                return e
        raise KeyError(f"workload {self.name} has no Einsum {name!r}")

    @cached_property
    def einsum_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.einsums)

    def producer(self, tensor: str) -> str | None:
        for e in self.einsums:
            if e.output.tensor == tensor:
                return e.name
        return None

    def consumers(self, tensor: str) -> tuple[str, ...]:
        return tuple(e.name for e in self.einsums if tensor in (u.tensor for u in e.inputs))

    def users(self, tensor: str) -> tuple[str, ...]:
        """Einsums that produce or consume `tensor`, in workload order."""
        return self._users.get(tensor, ())

    @cached_property
    def _users(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for e in self.einsums:
            for t in dict.fromkeys(e.tensors):
                out[t] = out.get(t, ()) + (e.name,)
        return out

    def is_shared(self, tensor: str) -> bool:
        """Used by more than one Einsum: its compatibility matters for fusion."""
        return len(self.users(tensor)) > 1

    def ops(self, einsum: str) -> int:
        n = 1
        for r in self.einsum(einsum).rank_variables:
            n *= self.rank_sizes[r]
        return n

    @cached_property
    def topological_order(self) -> tuple[str, ...]:
        """The Einsums in spec order (the loader guarantees it is topological)."""
        return self.einsum_names
