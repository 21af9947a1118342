"""The LoopTree data model (DESIGN §4): a pmapping is a root-to-leaf path of nodes.

`Loop.tile` is normally an int, but the cost model only multiplies and divides it, so a
pmapgen template may carry a numpy array (one entry per tile shape) or a sympy symbol.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping as MappingT, Union


@dataclass(frozen=True)
class Storage:
    """Tiles of `tensors` are kept at memory `level` from this point down."""
    level: str
    tensors: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.level}: {', '.join(self.tensors)}"


@dataclass(frozen=True, eq=False)
class Loop:
    """Iterate `rank_variable` in steps of `tile`; spatial loops name a fanout dim."""
    rank_variable: str
    tile: Any
    spatial: str | None = None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Loop) and self.rank_variable == other.rank_variable
                and self.spatial == other.spatial and _same(self.tile, other.tile))

    def __hash__(self) -> int:
        return hash((self.rank_variable, self.spatial, _hashable(self.tile)))

    def __str__(self) -> str:
        kind = f"S-for[{self.spatial}]" if self.spatial else "for"
        return f"{kind} {self.rank_variable} tile {self.tile}"


@dataclass(frozen=True)
class Compute:
    unit: str

    def __str__(self) -> str:
        return f"compute on {self.unit}"


Node = Union[Storage, Loop, Compute]


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) if not hasattr(a, "shape") else bool((a == b).all())
    except Exception:
        return a is b


def _hashable(x: Any) -> Any:
    return x if not hasattr(x, "shape") else id(x)


@dataclass(frozen=True)
class Pmapping:
    """The mapping of one Einsum: storage, loop and compute nodes from root to leaf."""
    einsum: str
    nodes: tuple[Node, ...]

    @cached_property
    def compute(self) -> Compute:
        leaf = self.nodes[-1]
        if not isinstance(leaf, Compute):
            raise ValueError(f"pmapping of {self.einsum} does not end in a compute node")
        return leaf

    @cached_property
    def loops(self) -> tuple[Loop, ...]:
        return tuple(n for n in self.nodes if isinstance(n, Loop))

    def storage_positions(self, tensor: str) -> tuple[tuple[int, str], ...]:
        """(node index, level) of every storage node of `tensor`, root first."""
        return tuple((i, n.level) for i, n in enumerate(self.nodes)
                     if isinstance(n, Storage) and tensor in n.tensors)

    def backing(self, tensor: str) -> tuple[int, str]:
        """(node index, level) of the backing (outermost) storage node of `tensor`."""
        pos = self.storage_positions(tensor)
        if not pos:
            raise KeyError(f"pmapping of {self.einsum} keeps {tensor} nowhere")
        return pos[0]

    def loops_above(self, index: int) -> tuple[Loop, ...]:
        return tuple(n for n in self.nodes[:index] if isinstance(n, Loop))


@dataclass(frozen=True)
class Mapping:
    """One pmapping per Einsum plus the execution order (a topological order)."""
    pmappings: MappingT[str, Pmapping]
    order: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "pmappings", MappingProxyType(dict(self.pmappings)))
        object.__setattr__(self, "order", tuple(self.order))

    def __getitem__(self, einsum: str) -> Pmapping:
        return self.pmappings[einsum]
