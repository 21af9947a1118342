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

An `OutputPenalty` lowers that bound by what the Einsum's output costs its readers at its
c_T (`ffm.consumers`): β(c) - p(d) for a row whose output's c_T is d, p's least over the
output's level until the output's backing is placed. A row at d is cut only where its
floor is above β(c) - p(d) for every key c it could end at, so the search keeps every
pmapping within that (or one dominating it in its compatibility group).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import combinations
from typing import Callable

import numpy as np

from arch.model import Arch
from workloads.model import Workload


@dataclass(frozen=True)
class OutputPenalty:
    """pJ an Einsum's readers cost over the minima its budgets count them at, per c_T of
    its output `tensor` (`ffm.consumers.consumer_penalty`): `named` ((c_T, pJ), ...),
    `default` at any other c_T; each named value at most `default`."""
    tensor: str
    named: tuple
    default: float

    @staticmethod
    def of(tensor: str, named: dict, default: float) -> "OutputPenalty":
        return OutputPenalty(tensor, tuple(sorted(named.items(), key=repr)), float(default))

    def at(self, ct: tuple) -> float:
        """The penalty at c_T `ct`."""
        return dict(self.named).get(ct, self.default)

    def covers(self, other: "OutputPenalty | None") -> bool:
        """Whether a search held to this penalty keeps every row one held to `other` keeps:
        at most `other`'s at every c_T (the tensor's name aside: siblings' searches answer
        each other's, `ffm.slack.siblings`)."""
        if other is None:
            return self.default <= 0 and all(p <= 0 for _, p in self.named)
        mine, theirs = dict(self.named), dict(other.named)
        return self.default <= other.default * (1 + 1e-9) and all(
            mine.get(ct, self.default) <= theirs.get(ct, other.default) * (1 + 1e-9) for ct in {*mine, *theirs})


def least_penalty(penalties: list["OutputPenalty | None"], tensor: str) -> "OutputPenalty | None":
    """The pointwise least of `penalties` (None: none at all) as `tensor`'s: what a search
    answering several Einsums' searches (`ffm.slack.siblings`) may hold its rows to."""
    if not penalties or any(p is None for p in penalties):
        return None
    named = {ct for p in penalties for ct, _ in p.named}
    return OutputPenalty.of(tensor, {ct: min(p.at(ct) for p in penalties) for ct in named},
                            min(p.default for p in penalties))


@lru_cache(maxsize=1 << 16)
def _part_repr(part: tuple) -> str:
    """repr of a key's (tensor, c_T): keys share them (AV's 40,118 keys at batch 1, 835)."""
    return repr(part)


def _key_repr(item: tuple) -> str:
    """repr of a (key, β) item's key, built as a tuple's repr is from its parts' reprs
    (cached: at a quarter of the cost of each key's repr)."""
    key = item[0]
    return "(" + ", ".join(map(_part_repr, key)) + ("," if len(key) == 1 else "") + ")"


@dataclass(frozen=True)
class KeyBudgets:
    """((key, β), ...): key ((tensor, c_T), ...) sorted by tensor, over the same tensors
    for every key; β in pJ; `penalty` lowers each row's β by its output's
    (`OutputPenalty`). Its repr is a digest, so a search's signature
    (`pmapgen.all_einsums.signature`) stays short however many keys it holds."""
    items: tuple
    penalty: OutputPenalty | None = None

    @staticmethod
    def of(betas: dict[tuple, float], penalty: OutputPenalty | None = None) -> "KeyBudgets":
        # (ordered by the keys' reprs, `_key_repr`: the items' order, as no tuple's repr starts
        # another's, without each β's; at batch 1 the energy set's main process sorts 80,000 keys so)
        return KeyBudgets(tuple(sorted(betas.items(), key=_key_repr)), penalty)

    @property
    def top(self) -> float:
        return max(beta for _, beta in self.items)

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.items[0][0]) if self.items else ()

    def renamed(self, tensor: Callable[[str], str]) -> "KeyBudgets":
        penalty = None if self.penalty is None else replace(self.penalty, tensor=tensor(self.penalty.tensor))
        return KeyBudgets.of({tuple(sorted((tensor(t), ct) for t, ct in key)): beta for key, beta in self.items},
                             penalty)

    def __repr__(self) -> str:
        held = self.items if self.penalty is None else (self.items, self.penalty)
        digest = hashlib.sha1(repr(held).encode()).hexdigest()[:16]
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
        signs: dict = {}  # (tensor, c_T) -> its entry: keys share each tensor's c_T (AV at batch 1: 40,118 keys)
        for key, beta in budgets.items:
            sig = [signs.get(tc) or signs.setdefault(tc, (tc[0], index[tc[1][0]], self._multiset(tc[0], tc[1][1])))
                   for tc in key]
            for n in range(1, len(sig) + 1):
                for part in combinations(sig, n):
                    if self.best.get(part, -np.inf) < beta:
                        self.best[part] = beta
        penalty = budgets.penalty
        self.output = penalty.tensor if penalty is not None and workload.is_shared(penalty.tensor) else None
        self.watched = self.tensors + ((self.output,) if self.output else ())  # placing these sets a row's bound
        self.penalty: dict[tuple, float] = {}  # (level, loops' multiset) -> least penalty of the c_T giving it
        self.at_level: dict[int, float] = {}  # level -> least penalty there, default included
        if self.output:
            for (level, loops), p in penalty.named:
                if level in index:
                    sig = (index[level], self._multiset(self.output, loops))
                    self.penalty[sig] = min(self.penalty.get(sig, np.inf), p)
                    self.at_level[index[level]] = min(self.at_level.get(index[level], penalty.default), p)
            self.default = penalty.default
        self._layouts: dict = {}

    def _multiset(self, t: str, loops: tuple) -> tuple:
        ranks = self.e.use(t).ranks
        return tuple(sorted((ranks[pos], int(tile), sp) for pos, tile, sp in loops))

    def _layout(self, fused: tuple) -> tuple:
        """Per watched tensor (the tagged ones, then the output) placed in structure `fused`
        (backed at the top level, or its backing event reached): (tensor, level, ((ft
        index, rank, dim) per loop event before its backing indexing it)); cached."""
        out = self._layouts.get(fused)
        if out is None:
            levels = dict(fused[:self.n_shared])
            loops, placed = [], {}
            for t in self.watched:
                if levels.get(t) == 0:
                    placed[t] = ()
            for ev in fused[self.n_shared:]:
                if ev[0] == "backing":
                    if ev[1] in self.watched:
                        ranks = self.e.use(ev[1]).ranks
                        placed[ev[1]] = tuple(lp for lp in loops if lp[1] in ranks)
                else:
                    loops.append((len(loops), ev[1], ev[2]))
            out = self._layouts[fused] = tuple((t, levels[t], placed[t]) for t in self.watched if t in placed)
        return out

    def budgets(self, fused: tuple, cols: dict, rows: np.ndarray) -> np.ndarray:
        """The bound for rows `rows` of `cols`, all of structure `fused`."""
        layout = self._layout(fused)
        inputs = tuple(x for x in layout if x[0] != self.output)
        out = self._input_budgets(inputs, cols, rows)
        if self.output:
            placed = [x for x in layout if x[0] == self.output]
            if placed:
                out = out - self._output_penalty(placed[0], cols, rows)
            else:  # its level is in the structure; its loops are not placed yet
                out = out - self.at_level.get(dict(fused[:self.n_shared])[self.output], self.default)
        return out

    def _output_penalty(self, placed: tuple, cols: dict, rows: np.ndarray) -> np.ndarray:
        _, level, lps = placed
        if not lps:
            return np.full(len(rows), self.penalty.get((level, ()), self.default))
        tiles = np.column_stack([np.asarray(cols[f"ft:{k}"])[rows] for k, _, _ in lps])
        distinct, which = np.unique(tiles, axis=0, return_inverse=True)
        out = np.array([self.penalty.get((level, tuple(sorted((rank, tile, sp) for (_, rank, sp), tile
                                                              in zip(lps, values)))), self.default)
                        for values in distinct.tolist()])
        return out[which.reshape(-1)]

    def _input_budgets(self, layout: tuple, cols: dict, rows: np.ndarray) -> np.ndarray:
        """The largest β of the keys giving the placed tagged tensors of `layout` their c_T."""
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
