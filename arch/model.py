"""The architecture data model: a memory hierarchy ending in compute units (DESIGN §3).

Memories are listed outermost first. A memory's `fanout` says how many instances of it
(and of everything below it) hang off one instance of the memory above, as named spatial
dims. Compute units hang below a named memory (by default the innermost), so a vector unit
can sit beside the PE array under the same local buffer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from workloads.model import Einsum, Tensor


@dataclass(frozen=True)
class FanoutDim:
    """One named spatial dimension: `size` instances; whether a value read once from the
    parent may be multicast to all of them, and whether their updates may be reduced on the
    way up into one update of the parent."""
    name: str
    size: int
    multicast: bool = True
    reduce: bool = True
    iterates: str = "any"  # which spatial loops the wiring supports: see `allows`

    def allows(self, einsum, ranks) -> bool:
        """Whether this dim can run spatial loops over `ranks` (all of its loops in one
        pmapping of `einsum`). `any`: every rank variable (a reduced one only if the dim
        reduces). `multicast`: the loops leave some read tensor unindexed, which the dim
        broadcasts (a systolic array's input rows). `reduced`: only reduced rank variables,
        whose updates the dim accumulates (a systolic array's partial-sum columns)."""
        if any(r in einsum.reduced for r in ranks) and not self.reduce:
            return False
        if self.iterates == "reduced":
            return all(r in einsum.reduced for r in ranks)
        if self.iterates == "multicast" and ranks:
            return any(not einsum.is_output(t) and not any(einsum.indexes(r, t) for r in ranks)
                       for t in einsum.tensors)
        return True


@dataclass(frozen=True)
class Memory:
    name: str
    capacity_bits: float = math.inf  # per instance
    capacity_values: float = math.inf  # per instance, for register-like levels ("1 value")
    read_energy: float = 0.0  # pJ/bit
    write_energy: float = 0.0  # pJ/bit
    read_bandwidth: float = math.inf  # bits/s per instance, read port
    write_bandwidth: float = math.inf  # bits/s per instance, write port
    bandwidth: float = math.inf  # bits/s per instance, reads + writes share it
    fanout: tuple[FanoutDim, ...] = ()
    must_keep: tuple[str, ...] = ()  # selectors: tensor names, input/output/intermediate/weight/all
    may_keep: tuple[str, ...] = ("all",)

    @property
    def instances_per_parent(self) -> int:
        return math.prod(d.size for d in self.fanout)

    def dim(self, name: str) -> FanoutDim:
        for d in self.fanout:
            if d.name == name:
                return d
        raise KeyError(name)


@dataclass(frozen=True)
class ComputeUnit:
    name: str
    energy: float = 0.0  # pJ per op
    throughput: float = 1.0  # ops per cycle per instance
    einsums: tuple[str, ...] = ("all",)  # selectors: mac, vector, Einsum names, all
    below: str | None = None  # the memory it hangs under; None: the innermost memory

    def runs(self, einsum: Einsum) -> bool:
        return "all" in self.einsums or einsum.kind in self.einsums or einsum.name in self.einsums


KEEP_SELECTORS = ("all", "input", "output", "intermediate", "weight", "activation",
                  "read", "written")


def selects(selectors: tuple[str, ...], tensor: Tensor, einsum: Einsum) -> bool:
    """Whether a keep-selector list names `tensor` as used by `einsum`.

    Selectors: a tensor name; its workload role (input/output/intermediate); weight or
    activation (non-weight); read / written (an input / the output of this Einsum); all.
    """
    for s in selectors:
        if s in ("all", tensor.name, tensor.role):
            return True
        if (s == "weight" and tensor.weight) or (s == "activation" and not tensor.weight):
            return True
        if s == "read" and tensor.name != einsum.output.tensor:
            return True
        if s == "written" and tensor.name == einsum.output.tensor:
            return True
    return False


@dataclass(frozen=True)
class Arch:
    name: str
    clock_hz: float
    memories: tuple[Memory, ...]
    computes: tuple[ComputeUnit, ...]
    source: str = "<arch>"

    @cached_property
    def memory_index(self) -> dict[str, int]:
        return {m.name: i for i, m in enumerate(self.memories)}

    def memory(self, name: str) -> Memory:
        return self.memories[self.memory_index[name]]

    def compute(self, name: str) -> ComputeUnit:
        for c in self.computes:
            if c.name == name:
                return c
        raise KeyError(name)

    def path(self, compute: str) -> tuple[Memory, ...]:
        """The memories from the top down to the one `compute` hangs under."""
        unit = self.compute(compute)
        last = self.memory_index[unit.below] if unit.below else len(self.memories) - 1
        return self.memories[: last + 1]

    def computes_for(self, einsum: Einsum) -> tuple[ComputeUnit, ...]:
        return tuple(c for c in self.computes if c.runs(einsum))

    @property
    def top(self) -> Memory:
        return self.memories[0]

    def may_keep(self, memory: str, tensor: Tensor, einsum: Einsum) -> bool:
        m = self.memory(memory)
        return selects(m.may_keep, tensor, einsum) or selects(m.must_keep, tensor, einsum)

    def must_keep(self, memory: str, tensor: Tensor, einsum: Einsum) -> bool:
        return selects(self.memory(memory).must_keep, tensor, einsum)

    def fanout_owner(self, dim: str, compute: str) -> Memory:
        """The memory on `compute`'s path whose fanout has spatial dim `dim`."""
        for m in self.path(compute):
            if any(d.name == dim for d in m.fanout):
                return m
        raise KeyError(dim)
