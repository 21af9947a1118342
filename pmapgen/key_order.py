"""The order in which the prefix search (`pmapgen.prefixes`) processes the keys rows wait at.

A key may be processed once no waiting key can still push rows to it. Every move raises a
key's `progress`, and appends events to its rows' fused structures or leaves them as they
are, so a key J can reach a key K only if J's fused events (`Key.fused`, a multiset) are
within K's and J's progress is lower. Any order respecting that gives the same result; they differ in how
many rows wait at once (docs/pmapgen.md, "Deepest structure first"):

- **level by level** (lowest progress first) advances every fused structure together, so
  a search cut short by its time limit has raised the energy floor of every structure
  (its lower bound); but every structure's rows wait at once;
- **deepest first** (the longest fused structure, then the highest progress, that is
  ready) finishes one structure's subtree before opening the next, so only its rows and
  the other structures' first rows wait (QK at batch 1 within 3.2 mJ: 1.3 M rows instead
  of 11.0 M).
"""
from __future__ import annotations

import heapq
from collections import Counter
from itertools import count


class KeyOrder:
    """Waiting keys (anything with `fused` and `progress`), handed out one fused structure's
    level at a time, in either order."""

    def __init__(self) -> None:
        self.groups: dict[tuple, dict[int, list]] = {}  # fused structure -> progress -> keys
        self._lowest: list = []  # heap of (progress, -len(fused), n, fused): level by level
        self._deepest: list = []  # heap of (-len(fused), -progress, n, fused): deepest first
        self._n = count()  # ties go to the structure seen first (fused tuples do not compare)
        self._multisets: dict[tuple, Counter] = {}  # `_ready`'s counts per structure

    def __bool__(self) -> bool:
        return bool(self.groups)

    def add(self, key) -> None:
        levels = self.groups.setdefault(key.fused, {})
        if key.progress not in levels:
            levels[key.progress] = []
            n = next(self._n)
            heapq.heappush(self._lowest, (key.progress, -len(key.fused), n, key.fused))
            heapq.heappush(self._deepest, (-len(key.fused), -key.progress, n, key.fused))
        levels[key.progress].append(key)

    def pop(self, deepest: bool = False) -> list:
        """The keys of one fused structure at one progress, all ready to process."""
        if deepest:
            return self._pop_deepest()
        while True:
            progress, _, _, fused = heapq.heappop(self._lowest)
            if progress in self.groups.get(fused, ()):  # else processed already, deepest first
                return self._take(fused, progress)

    def _pop_deepest(self) -> list:
        aside = []
        try:
            while True:
                entry = heapq.heappop(self._deepest)
                _, negative, _, fused = entry
                levels = self.groups.get(fused)
                if levels is None or -negative not in levels:
                    continue  # processed already, level by level
                low = min(levels)
                if -negative == low and self._ready(fused, low):
                    return self._take(fused, low)
                aside.append(entry)
        finally:
            for entry in aside:
                heapq.heappush(self._deepest, entry)

    def _ready(self, fused: tuple, progress: int) -> bool:
        """No waiting key of a structure this one may extend (a smaller multiset within
        it) has a lower progress."""
        need = self._counts(fused)
        return not any(len(g) < len(fused) and min(levels) < progress and self._counts(g) <= need
                       for g, levels in self.groups.items())

    def _counts(self, fused: tuple) -> Counter:
        out = self._multisets.get(fused)
        if out is None:
            out = self._multisets[fused] = Counter(fused)
        return out

    def _take(self, fused: tuple, progress: int) -> list:
        levels = self.groups[fused]
        keys = levels.pop(progress)
        if not levels:
            del self.groups[fused]
        return keys
