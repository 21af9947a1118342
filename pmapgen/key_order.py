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
  of 11.0 M);
- **reached first** (`Reached`, sixty-fourth session: one key at a time, the highest
  progress of those no waiting key may reach, by a vector of the prefix's fields that no
  move lowers) goes depth first through the keys, within a structure too, so finished
  rows come early and drop the partial rows they dominate (`_Search._beaten`). The
  prefix search uses it where that cut is on (no energy budget). Rows that merge at a key
  from many paths wait there for all of them; past a share of its row limit the search
  **spills** (sixty-fifth session): it takes the highest-progress key whether or not rows
  may still come, and a key that gets rows later is added and processed again. Each row
  is still extended once, so the result is the same.
"""
from __future__ import annotations

import heapq
from collections import Counter
from itertools import count

import numpy as np


class KeyOrder:
    """Waiting keys (anything with `fused` and `progress`), handed out one fused structure's
    level at a time, in either order; or, given `reach`, one key at a time, reached first
    (`Reached`)."""

    def __init__(self, reach=None) -> None:
        self.reached = None if reach is None else Reached(reach)
        self.groups: dict[tuple, dict[int, list]] = {}  # fused structure -> progress -> keys
        self._lowest: list = []  # heap of (progress, -len(fused), n, fused): level by level
        self._deepest: list = []  # heap of (-len(fused), -progress, n, fused): deepest first
        self._n = count()  # ties go to the structure seen first (fused tuples do not compare)
        self._multisets: dict[tuple, Counter] = {}  # `_ready`'s counts per structure

    def __bool__(self) -> bool:
        return bool(self.groups) if self.reached is None else bool(self.reached)

    def add(self, key) -> None:
        if self.reached is not None:
            self.reached.add(key)
            return
        levels = self.groups.setdefault(key.fused, {})
        if key.progress not in levels:
            levels[key.progress] = []
            n = next(self._n)
            heapq.heappush(self._lowest, (key.progress, -len(key.fused), n, key.fused))
            heapq.heappush(self._deepest, (-len(key.fused), -key.progress, n, key.fused))
        levels[key.progress].append(key)

    def pop(self, deepest: bool = False, spill: bool = False) -> list:
        """The keys of one fused structure at one progress, all ready to process; given
        `reach`, one key, and with `spill` the highest progress whether ready or not
        (`Reached.pop`). The level orders ignore `spill`: the search spills only keys
        reached first."""
        if self.reached is not None:
            return [self.reached.pop(spill)]
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


class Reached:
    """Waiting keys handed out one at a time: of those no other waiting key may still reach,
    the one of the highest progress (a depth-first order: the search reaches finished rows
    early, which then drop the partial rows they dominate). `reach(key)` is a vector of
    integers no move lowers (`_Search._reach_vector`), so a key J reaches K only if J's
    progress is lower and J's vector is at most K's in every entry; a key none reaches
    gets no more rows. Each key counts the waiting keys that may reach it (`blocked`),
    updated as keys come and go."""

    def __init__(self, reach) -> None:
        self.reach = reach
        self.keys: list = []  # waiting keys; None where processed (a free slot)
        self.vectors = np.zeros((0, 0), np.int64)
        self.progress = np.zeros(0, np.int64)
        self.blocked = np.zeros(0, np.int64)  # per slot, the waiting keys that may reach it
        self.live = np.zeros(0, bool)
        self.free: list = []
        self.n = 0

    def __bool__(self) -> bool:
        return self.n > 0

    def add(self, key) -> None:
        v = np.asarray(self.reach(key), dtype=np.int64)
        if v.shape[0] > self.vectors.shape[1]:  # a vector grows with the fused events seen (zeros before)
            self.vectors = np.hstack([self.vectors, np.zeros((len(self.vectors), v.shape[0] - self.vectors.shape[1]),
                                                             np.int64)])
        v = np.concatenate([v, np.zeros(self.vectors.shape[1] - v.shape[0], np.int64)])
        if not self.free:
            grow = max(len(self.keys), 16)
            self.keys += [None] * grow
            self.free = list(range(len(self.keys) - 1, len(self.keys) - grow - 1, -1))
            self.vectors = np.vstack([self.vectors, np.zeros((grow, self.vectors.shape[1]), np.int64)])
            self.progress = np.concatenate([self.progress, np.zeros(grow, np.int64)])
            self.blocked = np.concatenate([self.blocked, np.zeros(grow, np.int64)])
            self.live = np.concatenate([self.live, np.zeros(grow, bool)])
        i = self.free.pop()
        p = key.progress
        below = self.live & (self.vectors <= v).all(axis=1)
        above = self.live & (self.vectors >= v).all(axis=1)
        self.blocked[i] = int((below & (self.progress < p)).sum())
        self.blocked[above & (self.progress > p)] += 1
        self.keys[i], self.vectors[i], self.progress[i], self.live[i] = key, v, p, True
        self.n += 1

    def pop(self, spill: bool = False):
        """The key of the highest progress that no waiting key may reach (one always is:
        the lowest progress), taken out; the keys it may reach count one fewer. With
        `spill`, the key of the highest progress of all, reached or not: rows may still come
        to it, and it is then added again and processed again with them."""
        ready = np.flatnonzero(self.live & ((self.blocked == 0) | spill))
        i = int(ready[np.argmax(self.progress[ready])])
        key, v, p = self.keys[i], self.vectors[i], self.progress[i]
        self.keys[i], self.live[i] = None, False
        self.free.append(i)
        self.n -= 1
        self.blocked[self.live & (self.vectors >= v).all(axis=1) & (self.progress > p)] -= 1
        return key
