"""Per-key energy budgets within one prefix search (`Constraints.key_budgets`).

A keyed search of a backing group (`ffm.refine.search_keys`) fixes only the levels its
tagged tensors are backed at and searches every c_T above them at once, within the largest
β of the group's keys. Most of what it explores is wasted: at gpt3 batch 1, QK's search
with K and Q in the GlobalBuffer (1740 keys, β from 2.64 to 4.28 mJ) reached 150 pairs of
c_T, 38 of them keys, in 8.4 s; within the 90th percentile of the β it took 2.9 s. With
`KeyBudgets`, each partial pmapping is held to the β of the keys it can still end at:

- until a tagged tensor's backing is placed, the largest β (`KeyBudgets.top`);
- once some are placed, their c_T are fixed (c_T is the backing level and the loops above
  the backing that index the tensor, `looptree.validate.compatibility`; loops placed later
  are below it), and the row is held to the largest β of the keys giving those tensors
  those c_T: -inf, so cut at once, if none does.

A row's c_T is compared as the multiset of (rank variable, tile, spatial dim) of those
loops, which c_T determines (it lists them in canonical order), so a row whose c_T is a
key's is held to at least that key's β: the bound stays a bound for every key, and the
search keeps every pmapping of each key within its own β, or one dominating it in its
compatibility group. Rows at other keys or above their own key's β may remain (the
caller filters them, `ffm.refine.within_betas`); every row a budget cuts has an energy
floor above the β of every key it could end at.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import combinations
from typing import Callable

import numpy as np

from arch.model import Arch
from workloads.model import Workload


@dataclass(frozen=True)
class KeyBudgets:
    """((key, β), ...): key ((tensor, c_T), ...) sorted by tensor, over the same tensors
    for every key; β in pJ. Its repr is a digest, so a search's signature
    (`pmapgen.all_einsums.signature`) stays short however many keys it holds."""
    items: tuple

    @staticmethod
    def of(betas: dict[tuple, float]) -> "KeyBudgets":
        return KeyBudgets(tuple(sorted(betas.items(), key=repr)))

    @property
    def top(self) -> float:
        return max(beta for _, beta in self.items)

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.items[0][0]) if self.items else ()

    def renamed(self, tensor: Callable[[str], str]) -> "KeyBudgets":
        return KeyBudgets.of({tuple(sorted((tensor(t), ct) for t, ct in key)): beta for key, beta in self.items})

    def __repr__(self) -> str:
        digest = hashlib.sha1(repr(self.items).encode()).hexdigest()[:16]
        return f"KeyBudgets({len(self.items)} keys, {digest})"


class KeyLookup:
    """`KeyBudgets` as the prefix search of one Einsum on one compute unit reads them: per
    row, from its fused structure (`pmapgen.prefixes._Search`'s `Key.fused`: the shared
    tensors' backing levels, then ("loop", rank, dim) and ("backing", tensor, level)
    events) and its fused tiles (the `ft:i` column of the i-th loop event), the largest β
    of the keys it may still end at."""

    def __init__(self, budgets: KeyBudgets, einsum: str, workload: Workload, arch: Arch, unit: str):
        if not budgets.items:
            raise ValueError(f"key budgets for {einsum} name no key")
        self.e = workload.einsum(einsum)
        self.n_shared = sum(workload.is_shared(t) for t in self.e.tensors)
        self.tensors = budgets.tensors
        self.top = budgets.top
        index = {m.name: k for k, m in enumerate(arch.path(unit))}
        self.best: dict[tuple, float] = {}  # per subset of the tensors, their (tensor, level, loops) -> largest β
        for key, beta in budgets.items:
            sig = [(t, index[level], self._multiset(t, loops)) for t, (level, loops) in key]
            for n in range(1, len(sig) + 1):
                for part in combinations(sig, n):
                    if self.best.get(part, -np.inf) < beta:
                        self.best[part] = beta
        self._layouts: dict = {}

    def _multiset(self, t: str, loops: tuple) -> tuple:
        ranks = self.e.use(t).ranks
        return tuple(sorted((ranks[pos], int(tile), sp) for pos, tile, sp in loops))

    def _layout(self, fused: tuple) -> tuple:
        """Per tagged tensor placed in structure `fused` (backed at the top level, or its
        backing event reached): (tensor, level, ((ft index, rank, dim) per loop event
        before its backing indexing it)); cached."""
        out = self._layouts.get(fused)
        if out is None:
            levels = dict(fused[:self.n_shared])
            loops, placed = [], {}
            for t in self.tensors:
                if levels.get(t) == 0:
                    placed[t] = ()
            for ev in fused[self.n_shared:]:
                if ev[0] == "backing":
                    if ev[1] in self.tensors:
                        ranks = self.e.use(ev[1]).ranks
                        placed[ev[1]] = tuple(lp for lp in loops if lp[1] in ranks)
                else:
                    loops.append((len(loops), ev[1], ev[2]))
            out = self._layouts[fused] = tuple((t, levels[t], placed[t]) for t in self.tensors if t in placed)
        return out

    def budgets(self, fused: tuple, cols: dict, rows: np.ndarray) -> np.ndarray:
        """The bound for rows `rows` of `cols`, all of structure `fused`."""
        layout = self._layout(fused)
        if not layout:
            return np.full(len(rows), self.top)
        columns = [(t, k, rank, sp) for t, _, lps in layout for k, rank, sp in lps]
        if not columns:
            return np.full(len(rows), self.best.get(tuple((t, level, ()) for t, level, _ in layout), -np.inf))
        tiles = np.column_stack([np.asarray(cols[f"ft:{k}"])[rows] for _, k, _, _ in columns])
        distinct, which = np.unique(tiles, axis=0, return_inverse=True)
        out = np.empty(len(distinct))
        for i, values in enumerate(distinct.tolist()):
            per = {t: [] for t, _, _ in layout}
            for (t, _, rank, sp), tile in zip(columns, values):
                per[t].append((rank, tile, sp))
            out[i] = self.best.get(tuple((t, level, tuple(sorted(per[t]))) for t, level, _ in layout), -np.inf)
        return out[which.reshape(-1)]
