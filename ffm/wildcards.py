"""The wildcard bound: a lower bound on the energy optimum from tables complete within
budgets, and which budgets to raise to lift it (docs/mapper.md, "Energy proof").

Each Einsum e has a table complete within a budget b_e: every pmapping of energy at most
b_e is in it, or one that dominates it within its compatibility group (a budgeted prefix
search's frontier). Take any valid mapping M and let W (the wildcards) be the Einsums
whose pmapping in M costs more than its budget. Every other Einsum's pmapping is in its
table or dominated there, so for each part C of the rest (Einsums linked by tensors they
share), M restricted to C is a valid mapping of the sub-workload C, and the join over C's
tables finds one at most as costly: J(C), with compatibility keys cut to the tensors C
shares (the join checks fewer tensors, loops and live tiles there than in the whole
workload, never more). So

    energy(M) >= min over W of  sum_{e in W} b_e + sum over parts C of (all but W) of J(C).

The term without wildcards is the join over all tables: a real mapping. When it is the
least term it is the optimum. Otherwise the least term's wildcards are the Einsums
whose budgets must rise before the bound can: their searches have not yet seen the
pmappings a better mapping would need.

Terms are visited in increasing order of their base (sum of the minima, plus b_e - min_e
per wildcard), which each term's value is at least: once a base reaches the least value
found (or a ceiling, the best mapping known), no later term can be lower.
"""
from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from tqdm import tqdm

from arch.model import Arch
from ffm.compatibility import factorize_keys
from ffm.join import hold
from ffm.search import SearchResult, search
from workloads.model import Workload

MAX_TERMS = 1 << 14  # terms examined per bound; past them the next base bounds the rest
MAX_RAISED = 3  # Einsums raised since a term was refined, past which its refined value is dropped


@dataclass(frozen=True)
class Bound:
    """`lower`: at most the energy of every valid mapping. `wildcards`: the least term's
    wildcards (empty: the join over all tables is the least term, so `full` is the
    optimum when `lower` equals it). `term`: the least term's value, `rest` its part
    from the joins of the Einsums that are not wildcards. `full`: the join over all
    tables (None if no term needed it). `evaluated`: the parts whose join (or, for one
    Einsum, least energy) this bound computed."""
    lower: float
    wildcards: tuple[str, ...]
    term: float
    full: SearchResult | None
    evaluated: int
    rest: float = math.inf  # the least term's joins of the other Einsums (term minus the wildcards' budgets)
    refined: bool = False  # the least term's value is its refinement's (`ffm.refine`), not budgets plus joins


def parts(workload: Workload, einsums) -> list[frozenset[str]]:
    """The Einsums of `einsums` grouped into parts linked by tensors they share, in
    workload order (so sums over parts add in the same order every run)."""
    left = [e for e in workload.einsum_names if e in set(einsums)]
    out = []
    while left:
        part, todo = {left[0]}, [left[0]]
        while todo:
            for t in workload.einsum(todo.pop()).tensors:
                for other in workload.users(t):
                    if other in left and other not in part:
                        part.add(other)
                        todo.append(other)
        left = [e for e in left if e not in part]
        out.append(frozenset(part))
    return out


CUTS_HELD = 32  # `cut_keys` results kept (`_CUTS`), of at most CUT_ROWS_HELD rows in all
CUT_ROWS_HELD = 1 << 20
_CUTS: dict = {}  # (id of a table, the tensors its keys keep): (the table, its keys cut)


def cut_keys(table: pd.DataFrame, sub: Workload) -> pd.DataFrame:
    """`table` with its compatibility keys cut to the tensors `sub` shares: the table itself
    if it keeps them all, else one frame per table (by identity: tables are never written
    in place) and set of tensors kept, for the last CUTS_HELD, so that the joins of the
    energy proof, hundreds over a few tables (the wildcard bound's parts, the refinements'
    rests), see the same frames again (`ffm.join._table`)."""
    if table.empty:
        return table
    shared = frozenset(t for t in sub.tensors if sub.is_shared(t))
    keyed = frozenset(t for t, _ in table["compat"].iloc[0][0])  # every row keys the same tensors
    if keyed <= shared:
        return table
    key = (id(table), keyed & shared)
    held = _CUTS.pop(key, None)
    if held is None or held[0] is not table:
        codes, uniques = factorize_keys(table["compat"].to_numpy())
        cut = np.fromiter(((tuple((t, c) for t, c in k[0] if t in shared), k[1]) for k in uniques), dtype=object,
                          count=len(uniques))
        held = (table, table.assign(compat=cut[codes]))  # (rows of a group keep sharing one key)
    hold(_CUTS, key, held, CUTS_HELD, CUT_ROWS_HELD)
    return held[1]


class WildcardBound:
    """The wildcard bound of `workload` (module docstring), remembering each part's join
    until `forget` says one of its Einsums' tables changed."""

    def __init__(self, workload: Workload, arch: Arch,
                 join: Callable[[dict[str, pd.DataFrame], Workload], SearchResult] | None = None,
                 progress: bool = False):
        self.w, self.a, self.progress = workload, arch, progress
        self._join = join or (lambda tables, sub: search(tables, sub, arch, "energy", epsilon=0.0, scout=0))
        self._parts: dict[frozenset, tuple[float, SearchResult | None]] = {}
        self._splits: dict[frozenset, list[tuple[str, list[frozenset]]]] = {}  # `_split`'s, per part
        self._lows: dict[frozenset, tuple[int, float]] = {}  # `_split`'s results in this `bound` call
        # wildcards: (refined value, {Einsum outside them raised since: its budget then})
        self._refined: dict[tuple[str, ...], tuple[float, dict[str, float]]] = {}

    def forget(self, einsum: str, budget: float | None = None) -> None:
        """`einsum`'s table changed (its budget rose from `budget`): the joins of the parts
        holding it no longer hold. A refined term stays a bound when its own wildcards'
        budgets rise (fewer mappings have those wildcards). When another Einsum x's budget
        rises from b_x, the term's mappings gain those with x in (b_x, b_x'], which were
        mappings of the term with x a wildcard too: the refined value then holds only
        together with that term's value at b_x (`_since`). Without `budget`, or past
        MAX_RAISED such Einsums, the refined value is dropped."""
        self._parts = {c: v for c, v in self._parts.items() if einsum not in c}
        kept = {}
        for w, (value, raised) in self._refined.items():
            if einsum not in w and budget is not None:
                raised = {**raised, einsum: raised.get(einsum, budget)}  # the oldest budget: the widest band
            if einsum in w or (budget is not None and len(raised) <= MAX_RAISED):
                kept[w] = (value, raised)
        self._refined = kept

    def refine(self, wildcards: tuple[str, ...], value: float) -> None:
        """The term of `wildcards` is at least `value` (`ffm.refine.refine`) for the tables
        and budgets as they are now."""
        old, raised = self._refined.get(wildcards, (-math.inf, {}))
        self._refined[wildcards] = (max(value, old) if not raised else value, {})

    def refined(self, wildcards: tuple[str, ...]) -> bool:
        """Was this term refined for the tables as they are now?"""
        return wildcards in self._refined and not self._refined[wildcards][1]

    def _since(self, wild: tuple[str, ...], raised: dict[str, float], tables: dict[str, pd.DataFrame],
               budgets: dict[str, float], bar: tqdm) -> float:
        """At most the energy of every mapping of the term of `wild` that was not one when
        it was refined: some nonempty set S of the Einsums `raised` since then lies in its
        raised band, above its old budget; so the term of W and S, at those budgets."""
        least = math.inf
        names = sorted(raised)
        for n in range(1, len(names) + 1):
            for s in itertools.combinations(names, n):
                value = sum(budgets[e] for e in wild) + sum(raised[e] for e in s)
                for part in parts(self.w, [e for e in self.w.einsum_names if e not in wild and e not in s]):
                    value += self._part(part, tables, bar)
                    if value >= least:
                        break
                least = min(least, value)
        return least

    def _part(self, part: frozenset, tables: dict[str, pd.DataFrame], bar: tqdm) -> float:
        if part not in self._parts:
            bar.update()
            if any(tables[e].empty for e in part):
                self._parts[part] = (math.inf, None)
            elif len(part) == 1:
                (e,) = part
                self._parts[part] = (float(tables[e]["energy"].min()), None)
            else:
                whole = len(part) == len(self.w.einsum_names)
                sub = self.w if whole else self.w.restricted(part)
                found = self._join({e: tables[e] if whole else cut_keys(tables[e], sub)
                                    for e in sub.einsum_names}, sub)
                energy = float(found.best["energy"].iloc[0]) if not found.best.empty else math.inf
                self._parts[part] = (energy, found if whole else None)
        return self._parts[part][0]

    def _split(self, part: frozenset, tables: dict[str, pd.DataFrame], least: dict[str, float], bar: tqdm) -> float:
        """A lower bound on `part`'s join from joins already known: the most, over its
        Einsums e, of least[e] plus, for each part `part` falls into without e, its join
        where known, else this same bound of it (and at least its Einsums' least energies).
        A valid mapping of `part` restricted to each of those parts is a valid mapping of
        it (the module docstring's argument), and e's pmapping costs at least least[e].
        After a raise of e, the parts holding e must be joined again, but the parts
        without it are known (forty-fourth session). Held per `bound` call until another
        join becomes known."""
        if part not in self._splits:
            self._splits[part] = [(e, parts(self.w, [x for x in part if x != e])) for e in sorted(part)]
        held = self._lows.get(part)
        if held is not None and held[0] == len(self._parts):  # no join known since
            return held[1]
        low = sum(least[e] for e in part)
        for e, pieces in self._splits[part]:
            low = max(low, least[e] + sum(self._part(c, tables, bar) if len(c) == 1 or c in self._parts
                                          else self._split(c, tables, least, bar) for c in pieces))
        self._lows[part] = (len(self._parts), low)
        return low

    def _term(self, at: float, rest: list[frozenset], tables: dict[str, pd.DataFrame], least: dict[str, float],
              best: float, bar: tqdm) -> float:
        """The term of the wildcards costing `at` whose other Einsums form the parts `rest`,
        or, once at least `best`, a lower bound on it of at least `best`. Parts not yet
        joined count at a lower bound (`_split`: the joins known of their parts without one
        Einsum, or their Einsums' least energies) until they are, so a term that the joins
        already known put past `best` runs no join (after a raise, most of a bound's joins
        are of the parts holding the raised Einsum)."""
        unknown = lambda part: len(part) > 1 and part not in self._parts  # noqa: E731
        lows = [self._split(part, tables, least, bar) if unknown(part) else self._part(part, tables, bar)
                for part in rest]
        low = at + sum(lows)
        for part, part_low in zip(rest, lows):
            if low >= best:
                return low
            if unknown(part):
                low += self._part(part, tables, bar) - part_low
        value = at
        for part in rest:  # in workload order, as every run adds
            value += self._part(part, tables, bar)
        return value

    def bound(self, tables: dict[str, pd.DataFrame], budgets: dict[str, float],
              ceiling: float = math.inf, skip: frozenset = frozenset()) -> Bound:
        """The bound for `tables` (each complete within `budgets[e]`, pJ); terms at or
        above `ceiling` (a valid mapping's energy) are not looked into. The terms of the
        wildcard sets in `skip` (being refined) are left out: the bound is then one on the
        mappings of the other terms only, and its least term the next to refine."""
        order = tuple(self.w.einsum_names)
        # a table may also hold rows above its budget; a wildcard counts at the budget, so
        # the base may count an Einsum at no more than that
        least = {e: min(float(tables[e]["energy"].min()), budgets[e]) if len(tables[e]) else budgets[e]
                 for e in order}
        extra = sorted((max(budgets[e] - least[e], 0.0), e) for e in order)  # what a wildcard adds to the base
        base0 = sum(least.values())
        known = len(self._parts)
        self._lows = {}  # (they depend on `least`, set per call)
        best, best_w, rest, refined = math.inf, None, math.inf, False
        heap = [(base0, -1, ())]
        lower, terms = None, 0
        bar = tqdm(desc="proof: wildcard bound", unit="part", disable=not self.progress)
        while heap:
            base, last, chosen = heapq.heappop(heap)
            if base >= min(best, ceiling) or terms >= MAX_TERMS:
                lower = min(best, base)
                break
            terms += 1
            if last + 1 < len(extra):  # the next sets, each visited once: add the next, or swap the last for it
                heapq.heappush(heap, (base + extra[last + 1][0], last + 1, chosen + (last + 1,)))
                if chosen:
                    heapq.heappush(heap, (base - extra[last][0] + extra[last + 1][0], last + 1,
                                          chosen[:-1] + (last + 1,)))
            wild = tuple(e for e in order if e in {extra[i][1] for i in chosen})
            if wild in skip:
                continue
            at = sum(budgets[e] for e in wild)
            value = self._term(at, parts(self.w, [e for e in order if e not in wild]), tables, least, best, bar)
            refined, raised = self._refined.get(wild, (-math.inf, {}))
            if raised and refined > value:
                refined = min(refined, self._since(wild, raised, tables, budgets, bar))
            better = refined > value
            value = max(value, refined)
            if value < best:
                best, best_w, rest, refined = value, wild, value - at, better
        bar.close()
        if lower is None:
            lower = best
        full = self._parts.get(frozenset(order), (math.inf, None))[1]
        return Bound(lower, best_w or (), best, full, len(self._parts) - known, rest, refined)
