"""The one error type for bad user input (specs, mappings, command-line values)."""
from __future__ import annotations


class SpecError(ValueError):
    """A user-facing error: `file: field: message` on one line."""

    def __init__(self, source: str | None, field: str | None, message: str):
        self.source = source or "<spec>"
        self.field = field or ""
        self.message = message
        where = f"{self.source}: {self.field}: " if self.field else f"{self.source}: "
        super().__init__(where + message)
