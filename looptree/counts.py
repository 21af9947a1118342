"""Access counts of one pmapping: what both the analytical model and the interpreter return."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AccessCounts:
    """Values read and written per (level, tensor), and ops, summed over all instances."""
    reads: dict[tuple[str, str], Any] = field(default_factory=dict)
    writes: dict[tuple[str, str], Any] = field(default_factory=dict)
    ops: Any = 0

    def add_read(self, level: str, tensor: str, n: Any) -> None:
        self.reads[(level, tensor)] = self.reads.get((level, tensor), 0) + n

    def add_write(self, level: str, tensor: str, n: Any) -> None:
        self.writes[(level, tensor)] = self.writes.get((level, tensor), 0) + n

    def nonzero(self) -> dict[tuple[str, str, str], Any]:
        """{(level, tensor, 'reads'|'writes'): n} without zero entries, for comparisons."""
        out = {(lv, t, "reads"): n for (lv, t), n in self.reads.items() if n}
        out.update({(lv, t, "writes"): n for (lv, t), n in self.writes.items() if n})
        return out
