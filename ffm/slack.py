"""Every pmapping an energy-optimal mapping could use (FFM §6.1, issue 3's set, for the
energy objective), given U, the energy of any valid mapping (docs/pmapgen.md, "Every
pmapping an optimal mapping could use").

Energy is a sum over Einsums of non-negative terms, and the optimum is at most U. So in
any mapping M of energy at most U, Einsum e's pmapping costs at most U minus what the
other Einsums cost in M, and each of those costs at least its minimum m_o:

- **uniform budgets** (`slack_budgets`): U minus the sum of the others' minima;
- **keyed budgets** (`slack_tables`): the Einsums searched one after the other, each per
  key c (the c_T of its inputs) that the Einsums already searched can give it, within
  β_e(c) = U - R_e(c) - (the minima of the Einsums not yet searched), R_e(c) the least
  energy of a mapping of the Einsums already searched that gives e's inputs c
  (`ffm.refine.rest_by_key` over their tables). Those are the ones a short probe completed
  within their uniform budgets, then the others in topological order. By induction those
  tables hold, for every such M, a row of the same compatibility group dominating M's
  pmapping, so R_e(c) is at most what they cost in M; hence e's pmapping in M costs at
  most β_e(c) at the c M gives it, and the search at c within β_e(c)
  (`ffm.refine.search_keys`) holds it or a row dominating it. The rows kept are those
  within their own key's β, so e's table dominates M's pmapping too, which carries the
  induction on.
- **siblings** (`siblings`, `sibling_betas`): an Einsum f not yet searched that is identical
  to e up to names and reads e's tagged inputs in the same place gives them the same c in
  M, so it costs at least m_e(c), e's least energy at c, not only its minimum m_f: β_e(c)
  drops by Σ_f (m_e(c) - m_f), and a key where m_e(c) is above (β_e(c) + Σ_f m_f) / (n + 1)
  gives e nothing (a search within that finds m_e(c) wherever it is below). Once searched,
  such readers join R_e(c) at the key (`rest_by_key`'s `readers`).
- **readers** (`ffm.consumers`, `minima_tables`): an Einsum f not yet searched that reads e's
  output gives it the c_T d that e gives it, so it costs at least its least energy at d,
  which a table of f complete within a budget bounds (the rising search that found m_f):
  e's second pass holds a row whose output is at d to β_e(c) less that excess over m_f.
  The one search answering siblings holds its rows to the least of their penalties.

The keyed budgets are far tighter: the Einsums already searched count at what they cost
together at the key they give (FFA and FFB together cost 1.40 mJ more than their minima at
gpt3 batch 1), an unfused input's producer costs more than its fused minimum, and most keys
no pmapping of e can give, which a quick search shows. At gpt3 batch 1 the keyed tables
take about 45 s where the uniform ones took 245 (docs/pmapgen.md, "Keyed budgets").
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Hashable

import pandas as pd

from arch.model import Arch
from ffm.latency_bound import einsum_latency_floor
from ffm.consumers import consumer_penalty
from ffm.refine import BACKING_GROUP_FROM, outer_levels, rest_by_key, search_keys, tagged_tensors, within_betas
from pmapgen import Constraints, Stats
from pmapgen.all_einsums import (STOP, Job, generate_all, merge_parts, merge_subparts, rename, run_searches, signature,
                                 union)
from pmapgen.constraints import with_latency
from pmapgen.generate import TIME_LIMIT
from pmapgen.key_budgets import OutputPenalty, least_penalty
from pmapgen.prefixes import part_backings, part_floor
from pmapgen.symmetry import key_mirror
from workloads.model import Workload

RTOL = 1e-9  # energies equal up to summation order: a pmapping at exactly its budget is kept


def slack_budgets(minima: dict[str, float], bound: float) -> dict[str, float]:
    """Each Einsum's budget `bound` minus the other Einsums' minima: in any mapping of energy
    at most `bound` (a valid mapping's, so at least the optimum) Einsum e's pmapping costs at
    most that (module docstring). Tables complete within these budgets hold every pmapping
    that could be part of an energy-optimal mapping, and the join over them is the optimum."""
    rest = sum(minima.values())
    return {e: bound - (rest - m) for e, m in minima.items()}


def latency_slack_budgets(workload: Workload, arch: Arch, bound: float) -> dict[str, float]:
    """Each Einsum's latency budget (seconds) given U = `bound`, the latency of a valid
    mapping: latency is a sum over Einsums too (docs/semantics.md §6), so `slack_budgets`
    applies, with each other Einsum counted at its latency floor (`ffm.latency_bound`),
    which is at most its least latency. Tables complete within these budgets
    (`Constraints.latency_budget`, objective latency) hold every pmapping a
    latency-optimal mapping could use (docs/pmapgen.md, "Latency budgets")."""
    return slack_budgets({e: einsum_latency_floor(e, workload, arch) for e in workload.einsum_names}, bound)


def producer_keys(workload: Workload, tables: dict[str, pd.DataFrame], einsum: str) -> dict[str, tuple]:
    """Per input of `einsum` whose producer's table is in `tables` (complete), the c_T its
    rows give the tensor (sorted): the only c_T a mapping whose producer's pmapping that
    table dominates can give it (a row dominates only rows of its own compatibility group,
    whose key holds the c_T). Empty where the table has no row."""
    out = {}
    for u in workload.einsum(einsum).inputs:
        producer = workload.producer(u.tensor)
        if producer in tables:
            out[u.tensor] = tuple(sorted({dict(key[0])[u.tensor] for key in tables[producer]["compat"]}, key=repr))
    return out


def siblings(workload: Workload, free, einsum: str, constraints: dict[str, Constraints] | None,
             among=None) -> tuple[str, ...]:
    """The Einsums of `among` (default `free`) besides `einsum` that are identical to it up to names (the same
    `pmapgen.all_einsums.signature`, their constraints included) and read each of its tagged
    inputs (`ffm.refine.tagged_tensors`: those whose producer is searched) in the same place.
    In a mapping each gives those tensors the c_T `einsum` gives them (DESIGN §6), so each
    costs at least `einsum`'s least energy at that key (at gpt3: K and Q for V, all reading I)."""
    tagged = tagged_tensors(workload, free, einsum)
    if not tagged:
        return ()
    c = constraints or {}
    sig = signature(einsum, workload, c.get(einsum))
    place = {u.tensor: k for k, u in enumerate(workload.einsum(einsum).tensor_uses)}
    out = []
    for f in free if among is None else among:
        uses = [u.tensor for u in workload.einsum(f).tensor_uses]
        if f != einsum and all(place[t] < len(uses) and uses[place[t]] == t for t in tagged) \
                and signature(f, workload, c.get(f)) == sig:
            out.append(f)
    return tuple(out)


def sibling_betas(betas: dict[tuple, float], first: dict[tuple, float], floors: dict,
                  minima: list[float]) -> dict[tuple, float]:
    """The keyed budgets `betas` ({key c: β(c)}) of an Einsum e with siblings (`siblings`)
    of minima `minima`, tightened by e's least energy m(c) at each key.

    In a mapping of energy at most U giving e's inputs c, each sibling gives them c too and
    costs at least max(m_f, m(c)), where β(c) counted it at its minimum m_f; so e's pmapping
    there costs at most β(c) - Σ_f max(0, m(c) - m_f), and, costing at least m(c), only if
    m(c) <= (β(c) + Σ_f m_f) / (n + 1), `first`. `floors` is the search within `first`
    (`search_keys`' floors): None where e has no pmapping at c within it, so c is left out;
    else (m(c), complete), or a lower bound on m(c) if that search was cut short, which
    bounds as well."""
    out = {}
    for k, beta in betas.items():
        got = floors.get(k)
        if got is None or got[0] > first[k] * (1 + RTOL):
            continue
        out[k] = beta - sum(max(0.0, got[0] - m) for m in minima)
    return out


@dataclass(frozen=True)
class LatencyTables:
    """`latency_slack_tables`' result: per Einsum (table, templates, Stats) `generate_all`-style;
    per Einsum the c_T each input was held to (`producer_keys`' at the levels of its roots),
    and the roots (`pmapgen.prefixes.part_backings` indices) its producers gave no c_T, so
    not searched."""
    results: dict[str, tuple[pd.DataFrame, list, Stats]]
    keys: dict[str, dict[str, tuple]]
    skipped: dict[str, tuple[int, ...]]
    # `early`'s stop: per Einsum the rows of its roots ended by then (`results` holds them
    # too, each Einsum with a root not ended incomplete); None if it never stopped the set
    early: dict[str, tuple[pd.DataFrame, list, Stats]] | None = None
    order: tuple[tuple[str, int], ...] = ()  # the roots searched (or answered), in the order they ended
    guessed: tuple[tuple[str, int], ...] = ()  # the roots searched on a guess first (`early` only)

    def levels(self, einsum: str) -> dict[str, tuple[str, ...]]:
        """Per input held to its producer's c_T, their backing levels."""
        return {t: tuple(sorted({ct[0] for ct in cts})) for t, cts in self.keys[einsum].items()}


def latency_slack_tables(workload: Workload, arch: Arch, bound: float,
                         constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
                         workers: int | None = None, progress: bool = False, max_rows: int | None = None,
                         einsums: tuple[str, ...] | None = None, deadline: float | None = None,
                         stop_when_incomplete: bool = False,
                         early: Callable[[dict[str, tuple]], bool] | None = None,
                         sub_parts: int = 1) -> LatencyTables:
    """Every Einsum's pmappings within its latency budget (`latency_slack_budgets` for U =
    `bound`, seconds), each input held to the c_T its producer's complete table gives it
    (`producer_keys`, `Constraints.tensor_key_sets`), searched root by root as a graph.

    Sound by induction in topological order, as `slack_tables`' keys: for every mapping M
    of latency at most U, each Einsum's pmapping in M is within its uniform budget, so the
    producer's table (complete within it) holds a row of its compatibility group, with the
    c_T M gives the tensor, that dominates it; so M gives the tensor a c_T of that table,
    and the consumer's search restricted to those c_T still reaches its own pmapping in M.
    At gpt3 batch 1 within the latency optimum, no row of I's table backs I in DRAM or in
    the Registers, so half of V's roots (root 1, its longest, among them) are not searched,
    and QK_softmax's table backs QK only in the LocalBuffer (docs/pmapgen.md, "Producers'
    keys"). A producer cut short restricts nothing.

    A root (a part of the prefix search, `pmapgen.prefixes.part_backings`) backs each
    input at one level, so it needs only the c_T its producer's roots backing the tensor
    at that level give: it starts as soon as those have ended, not when the whole producer
    has, and the long roots of one Einsum overlap the next Einsum's (docs/pmapgen.md,
    "Roots as a graph"). At the top level (DRAM) the first of those to end with rows is
    enough: a tensor backed at the top is under no loop, so it has one c_T there, and a
    root reading an input from DRAM starts as soon as any producer root has written it
    there (docs/pmapgen.md, "One c_T at the top"). An input and its mirror image (QK's Q
    and K, `pmapgen.symmetry`) are held at both their levels, so the root's search keeps
    its mirror. Roots alike up to names (V's, K's and Q's) are searched once; each gets
    `time_limit`. No root starts after `deadline` (a `time.perf_counter()` value, which
    also cuts those running short), and with `stop_when_incomplete` none after one is cut
    short (the set cannot complete); an Einsum with a root not searched for either reason
    is incomplete, its table empty.
    `early(tables)`, once every Einsum has rows, is given after each root ends the rows of
    the roots ended so far (per Einsum, `merge_parts`-style); returning True stops the set
    at once, the roots running abandoned (`LatencyTables.early`). With `early`, a root not
    yet fed whose inputs each have some c_T at its levels from the producer roots ended
    (or guessed) so far is first searched on those (a guess, `LatencyTables.guessed`): its
    rows are real pmappings, so a join of them meeting U is a mapping within U, long before
    the roots it waits for end. Once fed it is searched on the rest of the product of its
    inputs' c_T (none, mostly: the producer's first root usually gives every c_T the others
    do); pruning is per compatibility group and the pieces' c_T differ, so the pieces
    together keep what one search would (docs/pmapgen.md, "Guesses").

    `sub_parts` > 1 searches the job of each root that backs every input held to a
    producer's c_T at the top or the outermost on-chip level (`ffm.refine.outer_levels`) as
    that many sub-parts by fused structure (`pmapgen.prefixes._Search.run`'s `sub`), merged
    back (`merge_subparts`) once all have ended: a long root then shares the cores instead
    of running alone while the roots after it wait. An input backed deeper keeps the fused
    structure open longer, which every sub-part searches again (docs/pmapgen.md, "Sub-parts
    in the latency set")."""
    names = [e for e in workload.einsum_names if einsums is None or e in einsums]
    budgets = latency_slack_budgets(workload, arch, bound)
    own = {e: replace((constraints or {}).get(e) or Constraints(), latency_budget=budgets[e]) for e in names}
    roots = {e: part_backings(e, workload, arch, own[e]) for e in names}
    held_by = {e: {u.tensor: workload.producer(u.tensor) for u in workload.einsum(e).inputs
                   if workload.producer(u.tensor) in names} for e in names}
    depth: dict[str, int] = {}
    for e in names:  # (topological)
        depth[e] = 1 + max((depth[p] for p in held_by[e].values()), default=-1)
    image = {e: _image_of(e, workload, arch, own[e]) for e in names}
    top = arch.top.name
    ended: dict[tuple[str, int], tuple | None] = {}  # (Einsum, root) -> its result; None: not searched
    held: dict[str, dict[str, set]] = {e: {} for e in names}
    waiting = {(e, i) for e in names for i in range(len(roots[e]))}
    answers: dict[Hashable, list] = {}  # job key -> the roots it answers, the first the one it searches
    answered: dict[Hashable, tuple] = {}  # job key -> its result, once it has ended
    order: list[tuple[str, int]] = []  # the roots ended, in order
    # with `early`, a root searched on the c_T given so far before it was fed (a guess):
    # root -> the c_T sets it was searched on, its pieces' results, and its pieces left to end
    guessed: dict[tuple[str, int], dict[str, tuple]] = {}
    pieces: dict[tuple[str, int], list] = {}
    left: dict[tuple[str, int], int] = {}
    split: dict[Hashable, tuple[Job, dict[int, tuple]]] = {}  # a split job's key -> it, its sub-parts ended
    outer = {e: outer_levels(arch, workload.einsum(e)) for e in names}

    def subs(e: str, i: int) -> int:  # the sub-parts the root's jobs are searched as
        return sub_parts if all(roots[e][i][1][t] in outer[e] for t in held_by[e]) else 1

    def levels(e: str, i: int) -> dict[str, set]:
        at = roots[e][i][1]
        return {t: {at[t], at[image[e].get(t, t)]} for t in held_by[e]}

    def feeding(e: str, i: int) -> dict[str, list]:  # per held input, the producer's roots backing it there
        return {t: [(held_by[e][t], j) for j, (_, at) in enumerate(roots[held_by[e][t]]) if at[t] in lv]
                for t, lv in levels(e, i).items()}

    def rows_of(p: tuple[str, int]) -> list:  # a root's results so far: itself once ended, else its pieces
        r = ended.get(p)
        return ([] if r is None else [r]) if p in ended else pieces.get(p, [])

    def fed_input(e: str, i: int, t: str) -> bool:
        """Whether input t's producer has given every c_T it can at the root's levels: at
        each, every producer root backing it there has ended or, at the top level, one has
        given rows (a tensor backed at the top is under no loop: its one c_T is (top, ()),
        docs/semantics.md §3)."""
        p = held_by[e][t]
        for level in levels(e, i)[t]:
            parts = [(p, j) for j, (_, at) in enumerate(roots[p]) if at[t] == level]
            if not all(q in ended for q in parts) and not (level == top and any(
                    len(r[0]) and r[2].complete for q in parts for r in rows_of(q))):
                return False
        return True

    def given(e: str, i: int, t: str) -> tuple | None:
        """The c_T input t's producer roots at the root's levels have given so far (None: one
        was cut short, which restricts nothing)."""
        got = [r for q in feeding(e, i)[t] for r in rows_of(q)]
        if any(not r[2].complete for r in got):
            return None
        return tuple(sorted({c for r in got for c in producer_keys(workload, {held_by[e][t]: r[0]}, e)[t]
                             if own[e].backing_allowed(t, c[0])}, key=repr))

    def at_level(e: str, i: int, t: str, cts: tuple | None) -> bool:  # some c_T at the root's own level
        return cts is None or any(c[0] == roots[e][i][1][t] for c in cts)

    def answer(key: Hashable, e: str, i: int) -> None:
        res, rep = answered[key], answers[key][0][0]
        res = res if e == rep else (*rename(res[0], res[1], rep, e, workload), res[2])
        pieces.setdefault((e, i), []).append(res)
        left[e, i] -= 1
        if not left[e, i] and (e, i) not in waiting:  # (a guess's piece ends with more to come)
            end(e, i)

    def end(e: str, i: int) -> None:
        got = pieces.get((e, i), [])
        ended[e, i] = got[0] if len(got) == 1 else \
            merge_parts(Job(e, workload, arch, own[e], ("latency",), time_limit), got)
        order.append((e, i))

    def job(e: str, i: int, sets: dict[str, tuple | None], role: str) -> list:
        """The root's search on `sets` if it is a new job, as `sub_parts` jobs (`_Sub`) if
        split, else none (answered by one alike up to names)."""
        c = replace(own[e], tensor_key_sets={**own[e].tensor_key_sets,
                                             **{t: cts for t, cts in sets.items() if cts is not None}})
        part = part_backings(e, workload, arch, c).index(roots[e][i])
        key = (signature(e, workload, c), part, role)
        answers.setdefault(key, []).append((e, i))
        left[e, i] = left.get((e, i), 0) + 1
        if key in answered:
            answer(key, e, i)
        if len(answers[key]) > 1:
            return []
        search = Job(e, workload, arch, c, ("latency",), time_limit, max_rows=max_rows, part=part)
        if (m := subs(e, i)) == 1:
            return [(key, search)]
        split[key] = (search, {})
        return [(_Sub(key, k, m), search._replace(sub=(k, m))) for k in range(m)]

    def start(e: str, i: int) -> list:
        """The root's jobs once fed: its search on every c_T its producers give (only those
        its guess did not search, if it had one), or none (`ended` None: no c_T at its level)."""
        waiting.discard((e, i))
        sets = {t: given(e, i, t) for t in held_by[e]}
        for t, cts in sets.items():
            held[e].setdefault(t, set()).update(cts or ())
        if not all(at_level(e, i, t, cts) for t, cts in sets.items()):
            ended[e, i] = None
            return []
        if (e, i) not in guessed:
            return job(e, i, sets, "whole")
        # the rest of the product of the sets beyond the guess's: for each input guessed, its
        # c_T not guessed, with the inputs before it as guessed and those after it whole
        tried, out, rest = guessed[e, i], [], []
        for k, t in enumerate(tried):  # (a producer cut short since: all of t's c_T again)
            new = None if sets[t] is None else tuple(c for c in sets[t] if c not in set(tried[t]))
            if new is None or new and at_level(e, i, t, new):
                rest.append({**sets, **{u: tried[u] for u in list(tried)[:k]}, t: new})
        for r in rest:
            out += job(e, i, r, "rest")
        if not left.get((e, i)):
            end(e, i)
        return out

    def guess(e: str, i: int) -> list:
        """With `early`: the root's search on the c_T its producers have given so far, when
        each input has some at the root's level (its rows are real pmappings, so a join of
        them meeting U is one; the rest of its c_T are searched once it is fed)."""
        sets = {t: given(e, i, t) for t in held_by[e]}
        if not all(cts is not None and at_level(e, i, t, cts) for t, cts in sets.items()):
            return []
        guessed[e, i] = {t: cts for t, cts in sets.items() if not fed_input(e, i, t)}
        return job(e, i, sets, "guess")

    def ready() -> list:
        """The jobs of the roots whose producers' roots at their levels have all ended, and
        with `early` the guesses, deepest Einsum first (they lead towards the graph's last
        roots)."""
        out, before = [], None
        while before != len(ended):
            before = len(ended)
            for e, i in sorted(waiting, key=lambda r: (-depth[r[0]], names.index(r[0]), r[1])):
                if all(fed_input(e, i, t) for t in held_by[e]):
                    out += start(e, i)
                elif early is not None and (e, i) not in guessed:
                    out += guess(e, i)
        return out

    def so_far() -> dict[str, tuple] | None:  # the rows of the roots ended and pieces, once every Einsum has some
        got = {e: [r for i in range(len(roots[e])) for r in rows_of((e, i))] for e in names}
        if not all(any(len(r[0]) for r in rs) for rs in got.values()):
            return None
        return {e: merge_parts(Job(e, workload, arch, own[e], ("latency",), time_limit), rs)
                for e, rs in got.items()}

    stop: list[dict] = []

    def more(key: Hashable, res: tuple) -> list | str:
        if isinstance(key, _Sub):  # a sub-part: its root's job ends with the last of them
            search, got = split[key.key]
            got[key.index] = res
            if len(got) < key.of:
                return []
            key, res = key.key, merge_subparts(search, search.part, [got[k] for k in range(key.of)])
        answered[key] = res
        for e, i in answers[key]:
            answer(key, e, i)
        if early is not None and len(res[0]) and (tables := so_far()) is not None and early(tables):
            stop.append(tables)
            return STOP
        return ready()

    run_searches(ready(), workers, progress, "latency: roots", stop_when_incomplete, unit="root", deadline=deadline,
                 more=more)
    results = {}
    for e in names:
        got = [ended[e, i] if (e, i) in ended else _not_started(e, workload, arch, own[e], i)
               for i in range(len(roots[e])) if ended.get((e, i), True) is not None]
        c = replace(own[e], tensor_key_sets={**own[e].tensor_key_sets,
                                             **{t: tuple(sorted(cts, key=repr)) for t, cts in held[e].items()}})
        results[e] = merge_parts(Job(e, workload, arch, c, ("latency",), time_limit), got)
    return LatencyTables(results, {e: {t: tuple(sorted(cts, key=repr)) for t, cts in held[e].items()} for e in names},
                         {e: tuple(i for i in range(len(roots[e])) if (e, i) in ended and ended[e, i] is None)
                          for e in names}, stop[0] if stop else None, tuple(order), tuple(guessed))


@dataclass(frozen=True)
class _Sub:
    """The job key of sub-part `index` of `of` of the latency set's job `key`
    (`latency_slack_tables`' `sub_parts`)."""
    key: Hashable
    index: int
    of: int


def _not_started(einsum: str, workload: Workload, arch: Arch, c: Constraints, root: int) -> tuple:
    """A root's `_search` result when it never started (its producers', or itself, past the
    deadline or after a root was cut short): cut short by the time limit before any row,
    so `merge_parts` leaves its Einsum incomplete, bounded by the root's floor."""
    return pd.DataFrame(), [], Stats(0, 0, 0, False, 0.0, part_floor(einsum, workload, arch, c, root),
                                     stopped_by=TIME_LIMIT)


def _image_of(einsum: str, workload: Workload, arch: Arch, c: Constraints) -> dict[str, str]:
    """Each input of `einsum` swapped by the mirror symmetry its search within `c` may use
    (`pmapgen.symmetry.find_mirror`: only a latency budget and c_T sets), else none."""
    if replace(c, latency_budget=None, tensor_key_sets={}) != Constraints():
        return {}
    mirror = key_mirror(einsum, workload, arch, None)
    return {} if mirror is None else dict(mirror.tensors)


@dataclass(frozen=True)
class SlackTables:
    """`slack_tables`' result: per Einsum (table, templates, Stats) `generate_all`-style, the
    table holding its pmappings within their key's β (or its uniform budget: `uniform`);
    `keys` counts the keys the Einsums searched before it can give it within U, `searches`
    the keyed searches run or answered for them, `rest_seconds` the time spent joining
    those Einsums' tables per key. An Einsum with a search cut short (its time limit,
    `max_rows` or the deadline) has `Stats.complete` False, and counts at its minimum for
    the Einsums after it. Its Stats count the prefixes and rows of the searches run for it
    (none for K and Q at gpt3, which V's searches answer)."""
    results: dict[str, tuple[pd.DataFrame, list, Stats]]
    bound: float
    minima: dict[str, float]
    keys: dict[str, int]
    searches: dict[str, int]
    rest_seconds: dict[str, float]
    probe_seconds: float = 0.0  # the uniform budgets' searches (the probe), wall
    uniform: tuple[str, ...] = ()  # the Einsums whose tables are their uniform budgets' (the rest keyed)
    betas: dict = field(default_factory=dict)  # keyed Einsum -> {key: β} its searches held its keys to
    penalties: dict = field(default_factory=dict)  # keyed Einsum -> the `OutputPenalty` its searches held it to

    @property
    def incomplete(self) -> tuple[str, ...]:
        return tuple(e for e, r in self.results.items() if not r[2].complete)


# a search size (`pmapgen.prefixes.size`: keys reached, and rows built per 5,000): `slack_tables`
# first tries each Einsum within its uniform budget up to this size. At gpt3 batch 1 the four
# that complete have sizes 1,123 to 2,905 (FFA the most; this is 10% over it); the others pass
# it in 7 to 17 s each on the eighty-fourth session's machine. With FFA missed, V's, QK's and
# AV's keyed budgets lose FFA and FFB's joint cost and their searches evaluate 4 to 18 times
# the tile shapes (docs/pmapgen.md, "A probe by size"). A size, not seconds: a 4 s probe
# completed FFA on one machine and not on a slower one
PROBE = 3200
# keys waiting at once (`pmapgen.prefixes._Search.run`): a probe search with more is cut too, as
# wide. At gpt3 batch 1 the four that complete hold at most 398 (FFA; within the latency floors
# 235), while V, QK, AV and Z pass 500 at a fifth to under a third of the size (energy set) and a
# third to all of it (floors) at which PROBE cuts them: 20 s of the probe's 26 s of CPU on those four
# (docs/pmapgen.md, "A probe by breadth"). A heuristic: a wide search completed would cost time
# only, since each Einsum the probe cuts is keyed
PROBE_WAITING = 500
# sub-parts per root of the keyed searches `ffm.refine._sub_parts` picks (`pmapgen.prefixes._Search.run`'s
# `sub`), for the energy set (no latency budgets). At gpt3 batch 1 one root of V's (I and V in the
# GlobalBuffer) took 18 s alone while the other core idled 7 s, one of QK's 8 s beside 2 s of the rest: six
# pairs alternated, 51.4 s mean against 57.8. Within the latency floors V's parts are more even (11.8, 6.0 and
# 4.2 s) and split so they took 22% more CPU and 2 to 5 s more wall, so none is split there
# (docs/pmapgen.md, "Sub-parts"). Nor in a sibling's first pass: its roots are short (V's 0.3 to 2.7 s)
SUB_PARTS = 8
# sub-parts per root of the latency set's roots that back every held input at the top or the outermost
# on-chip level (`latency_slack_tables`' `sub_parts`; benchmarks/pmapgen_speed.py's default). At gpt3 batch 1
# three roots ran alone for 87 to 110 s of the set's 315 to 369 s (V's with I and V in the GlobalBuffer, Z's
# second, FFB's last); split so, one search ran alone for about 20 s and the set took 0.87 to 0.90 times the
# wall with the same CPU. The latency proof's set (`ffm.latency_proof`, stopping at its first root cut short)
# keeps whole roots (docs/pmapgen.md, "Sub-parts in the latency set")
LATENCY_SUB_PARTS = 8


def slack_tables(workload: Workload, arch: Arch, bound: float, minima: dict[str, float],
                 constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
                 workers: int | None = None, progress: bool = False, max_rows: int | None = None,
                 probe: int = PROBE, uniform: tuple[str, ...] | None = None, probe_waiting: int | None = PROBE_WAITING,
                 deadline: float | None = None, by_backing: int = BACKING_GROUP_FROM,
                 minima_tables: dict[str, tuple[pd.DataFrame, float]] | None = None,
                 steps: tuple[tuple[float, dict[str, float]], ...] = ()) -> SlackTables:
    """Every Einsum's pmappings within its budgets (module docstring) for U = `bound` (pJ,
    the energy of a valid mapping) and each Einsum's minimum energy `minima`: tables
    holding, up to dominance within compatibility groups, every pmapping of every mapping
    of energy at most U, and so every pmapping an energy-optimal mapping could use.

    First every Einsum is searched within its uniform budget (`slack_budgets`) up to the
    size `probe` (`PROBE`, `pmapgen.prefixes.size`: the same on every machine) and
    `probe_waiting` keys waiting at once (`PROBE_WAITING`; None: no such limit), or
    `time_limit` if that comes first; those that complete keep that table (at batch 1, I,
    QK_softmax, FFA and FFB) and join the rest of every keyed search, so the later Einsums
    count there at their joint cost (FFA and FFB together cost 1.40 mJ more than their minima), not at
    their minima. The others (V, K, Q, QK, AV and Z there, each over 90 s) are then searched
    by key in topological order. `uniform` names the Einsums to search within their uniform
    budgets instead, with no probe (the rest keyed); `probe=0` keys every Einsum. Each
    keyed search gets `time_limit` seconds and `max_rows` waiting rows, and none starts after
    `deadline` (a `time.perf_counter()` value; an Einsum cut so is incomplete); identical
    Einsums (V, K, Q) share their searches (`generate_all`, `search_keys`' `searched`).
    Keys sharing their backing levels are searched as one group from `by_backing` per
    tagged tensor (`search_keys`), each key held to its own β in that search
    (`pmapgen.key_budgets`). An Einsum with free siblings (`siblings`: at gpt3, V with K and Q,
    all reading I) is first searched within (β + Σ m_f) / (n + 1) per key, which finds its
    least energy at every key it could use, and then within β tightened by it
    (`sibling_betas`: at gpt3 batch 1, V's 669 keys become 3 and its searches take 33 s of
    CPU where they took 54); each rest joins the searched Einsums reading the tagged inputs at the key
    (`rest_by_key`'s `readers`), so K's and Q's budgets count V (and K) at its least there,
    and the searches of siblings, one per backing group, answer each other's.
    `minima_tables` ({Einsum: (table, budget)}, each complete within its budget: the rising
    searches that found `minima`) bound what each keyed Einsum's output costs its readers
    at its c_T (`ffm.consumers`): its second pass holds a row whose output is at d to β
    less that penalty (for siblings sharing the search, the least of theirs), and its table
    keeps the rows within its own.

    `steps` ((U_j, minima_j), ...) are more regions the tables must hold, each every mapping
    of energy at most U_j whose Einsums cost at least minima_j (the pareto proof's boxes,
    each minima within its own latency budgets: `ffm.pareto_proof`). One run holds them all
    (`step_limit`): the minima counted are the least of every region's, and an Einsum's
    budgets the largest any region gives it. Readers' penalties are not used then."""
    names = workload.einsum_names
    each = ((bound, minima),) + tuple(steps)
    if steps:
        minima = {e: min(m[e] for _, m in each) for e in names}
        minima_tables = None
    first = names if uniform is None else tuple(uniform)
    if uniform is None and probe <= 0:
        first = ()
    budgets = slack_budgets(minima, bound * (1 + RTOL)) if not steps else \
        {e: step_limit(each, minima, e, names, ()) - sum(minima[f] for f in names if f != e) for e in names}
    start = time.perf_counter()
    objectives = with_latency(("energy",), *(constraints or {}).values())  # (latency budgets: latency too)
    sub_parts = SUB_PARTS if objectives == ("energy",) else 1
    pre = generate_all(workload, arch, constraints, objectives=objectives, workers=workers, progress=progress,
                       time_limit=time_limit, budgets={e: budgets[e] for e in first},
                       desc="slack: uniform budgets", einsums=first, max_rows=max_rows,
                       split=uniform is not None, max_size=probe if uniform is None else None,
                       max_waiting=probe_waiting if uniform is None else None) if first else {}
    probe_seconds = time.perf_counter() - start
    results = {e: r for e, r in pre.items() if r[2].complete}
    tables = {e: r[0] for e, r in results.items()}  # the complete tables so far: the rest of each keyed search
    keys = {e: 1 for e in results}
    searches = dict(keys)
    rest_seconds = {e: 0.0 for e in results}
    searched: dict = {}
    held: dict = {}
    penalties: dict = {}
    leasts: dict = {}  # Einsum -> its first pass's floors (`search_keys`): its least energy per key
    for e in names:
        if e in results:
            continue
        start = time.perf_counter()
        free = tuple(x for x in names if x not in tables)  # e, the Einsums after it, and any cut short
        later = sum(minima[x] for x in free if x != e)
        twins = siblings(workload, free, e, constraints)
        limit = step_limit(each, minima, e, free, twins)
        rests = rest_by_key(workload, arch, tables, free, e, limit - later - minima[e] * (1 - RTOL), readers=True)
        rest_seconds[e] = time.perf_counter() - start
        betas = {k: limit - r - later for k, r in rests.items()}
        keys[e] = len(betas)
        # one search per backing group, however few its keys: the searches of siblings keyed alike answer each other's
        grouping = 0 if siblings(workload, free, e, constraints, among=names) else by_backing
        explored = evaluated = searches[e] = 0
        if twins and betas:
            low = [minima[f] for f in twins]
            first = {k: (b + sum(low)) / (len(low) + 1) for k, b in betas.items()}
            known = _siblings_least(workload, e, free, names, constraints, leasts, betas)
            if known is None:
                ks = search_keys(e, first, 0.0, workload, arch, (constraints or {}).get(e), searched, time_limit,
                                 deadline=deadline, workers=workers, progress=progress,
                                 desc=f"slack: {e}, least per key", max_rows=max_rows, by_backing=grouping,
                                 own_budgets=True)
                known = leasts[e] = ks.floors
                explored, evaluated, searches[e] = ks.explored, ks.evaluated, ks.searches
            betas = sibling_betas(betas, first, known, low)
        held[e] = betas
        own, shared = _penalties(workload, e, free, twins, minima, minima_tables)
        penalties[e] = shared
        ks = search_keys(e, betas, 0.0, workload, arch, (constraints or {}).get(e), searched, time_limit,
                         deadline=deadline, workers=workers, progress=progress, desc=f"slack: {e}", max_rows=max_rows,
                         by_backing=grouping, own_budgets=True, sub_parts=sub_parts, penalty=shared) if betas else None
        searches[e] += ks.searches if ks else 0
        parts = [{e: (table[within_betas(table, betas, own)], templates, stats)}
                 for table, templates, stats in (ks.results.values() if ks else ()) if len(table)]
        table, templates, _ = union(*parts)[e] if parts else (pd.DataFrame(), [], None)
        complete = not (ks and ks.cut)
        stats = Stats(explored + (ks.explored if ks else 0), evaluated + (ks.evaluated if ks else 0), len(table),
                      complete, time.perf_counter() - start, budget=max(betas.values(), default=-math.inf))
        results[e] = (table, templates, stats)
        if complete:
            tables[e] = table
    return SlackTables({e: results[e] for e in names}, bound, dict(minima), keys, searches, rest_seconds,
                       probe_seconds, tuple(e for e in names if e in pre and pre[e][2].complete), held, penalties)


def step_limit(steps: tuple[tuple[float, dict[str, float]], ...], least: dict[str, float], e: str,
               counted: tuple[str, ...], twins: tuple[str, ...]) -> float:
    """The U that `slack_tables` holds Einsum e to over every region of `steps` ((U_j,
    minima_j), ...), the Einsums of `counted` but e counted at `least` (each the least of
    the regions' minima): the largest U_j less what counting them at `least` instead of
    minima_j adds. Then β = U - R - Σ least is at least every region's own β_j, so a table
    within it holds what each region's would (`slack_tables`' induction, region by region).
    The siblings `twins` are left out of that sum: `sibling_betas` then counts each at
    max(its least, e's least at the key), at most what region j counts it at (max(its
    minimum_j, e's least there)). With one region, U_1."""
    return max(u * (1 + RTOL) - sum(m[x] - least[x] for x in counted if x != e and x not in twins) for u, m in steps)


def _siblings_least(workload: Workload, e: str, free: tuple, names: tuple, constraints: dict | None,
                    leasts: dict, betas: dict) -> dict | None:
    """A sibling's first-pass floors (`leasts`) holding every key of `betas`: e's least energy
    at each, since the sibling is e up to names and reads e's tagged inputs in the same place
    (`siblings`); None if no sibling searched so has them all (e then runs its own). Its
    least at a key is not in its table: that holds only the rows within their output's
    penalty (`_penalties`)."""
    for s in siblings(workload, free, e, constraints, among=names):
        got = leasts.get(s)
        if got is not None and all(got.get(k) is not None for k in betas):
            return got
    return None


def _penalties(workload: Workload, e: str, free: tuple, twins: tuple, minima: dict[str, float],
               minima_tables: dict | None) -> tuple[OutputPenalty | None, OutputPenalty | None]:
    """e's own `ffm.consumers.consumer_penalty` (its readers among `free`, its siblings
    `twins` aside: `sibling_betas` counts them), and the least of its and its siblings'
    (the one search answers theirs, each output read at the same rank positions)."""
    if not minima_tables:
        return None, None
    group = (e,) + twins
    counted = tuple(x for x in free if x not in group)
    each = [consumer_penalty(workload, s, counted, minima, minima_tables) for s in group]
    return each[0], least_penalty(each, workload.einsum(e).output.tensor)
