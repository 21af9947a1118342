"""Refining a term of the wildcard bound: its wildcards searched on demand, within the keys
the other Einsums give them (docs/mapper.md, "Energy proof").

A term of the wildcard bound (`ffm.wildcards`) with wildcards W counts each w in W at its
budget b_w: w's table says nothing of its pmappings above b_w, so the term lets w join
anything. But in a mapping M below U whose wildcards are W, the other Einsums' pmappings
are in their tables (or dominated there within their compatibility groups), and they fix
the c_T of every tensor a wildcard shares with them. For each wildcard e:

1. **the rest by key**: the join over the other Einsums' tables (keys cut to what they
   share, `ffm.wildcards.cut_keys`) keeps the least mapping of every tag, the c_T those
   rows give e's shared tensors (`ffm.join.join`'s `tag`): R_e(c), the least energy of the
   rest when it gives e the key c. M's rest costs at least R_e(c) for the c it gives e:
   restricted to the rest, M is a valid mapping of that sub-workload (the argument of
   `ffm.wildcards`), and each of its pmappings is dominated by a table row of the same
   full compatibility group, hence of the same c_T.
2. **keyed searches**: so e's pmapping in M costs less than
   β_e(c) = U - R_e(c) - (the other wildcards' least costs L_w: their budgets, or more
   once their keys were searched). A budgeted prefix search of e within β_e(c) with c
   fixed (`Constraints.tensor_keys`) holds it or a pmapping that dominates it within its
   group. Keys with β_e(c) <= b_e need no search (e is above its budget in M). Most keys
   the rest would like, no pmapping of e can give, and the search that shows it is quick.
   The wildcards are searched one after the other; once e's keys are, L_e is the least
   over them of e's least cost there.
   **Absorbed wildcards** (thirtieth session): once all of e's keyed searches completed,
   e's pmapping in M is dominated by one of its keyed rows at the key M gives it, within
   that key's β, of the same compatibility group. So those rows are a table of e for the
   mappings of this term, and a wildcard searched after e that reads e's output counts e
   in its rest through them (each at least b_e) instead of at L_e, so it is keyed by
   that output's c_T too (the others keep their rest: rejoining it costs seconds). At
   batch 1, AV reads V and QK_softmax: with both wildcards, AV was one search with
   nothing fixed (157 s on one core; the term stood); keyed by their rows, 1242
   searches took 11.8 s and the term closed.
3. **the value**: M costs at least R_e(c) + e's least cost there (above b_e, at least the
   keyed table's least, or a cut search's `Stats.lower_bound`) + the other wildcards'
   L_w, least over c: one bound per wildcard, the largest is taken. And the exact
   join over all tables, each wildcard's table together with its keyed rows, costs at most
   M's energy when every key M gives its wildcards was searched to the end; keys cut short
   bound M by the per-key sum instead. The refined term is the larger of the two; U or
   more closes it. A mapping the join finds below U is a better result.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable
import numpy as np
import pandas as pd

from arch.model import Arch
from ffm.join import join
from ffm.search import SearchResult, search
from ffm.wildcards import cut_keys
from pmapgen import Constraints
from pmapgen.all_einsums import Job, Workers, rename, signature, split_searches, union
from pmapgen.constraints import with_latency
from pmapgen.generate import ROW_LIMIT
from pmapgen.key_budgets import KeyBudgets, OutputPenalty
from pmapgen.symmetry import key_mirror, mirror_result
from pmapgen.turn import TURN
from workloads.model import Einsum, Workload

RTOL = 1e-9  # energies equal up to summation order


@dataclass(frozen=True)
class Refinement:
    """What refining the term of `wildcards` found: `value` is at most the energy of every
    mapping below U whose wildcards are these (U or more: none is). `keys` keyed searches
    were run or due, `empty` of them completed with no pmapping, `cut` were cut short or
    not started (a deadline), keeping `rows` pmappings in all. `least` says what each
    wildcard costs at least in such a mapping (its budget, or more once its keys were
    searched)."""
    wildcards: tuple[str, ...]
    value: float
    keys: int = 0
    empty: int = 0
    cut: int = 0
    rows: int = 0
    seconds: float = 0.0
    least: tuple[tuple[str, float], ...] = ()  # (wildcard, what it costs at least in a mapping of the term below U)
    reused: int = 0  # keys answered by an earlier refinement's complete search (`refine`'s `searched`)
    retry: bool = False  # a term refined before, its searches cut short there run again split by root
    absorbed: tuple[str, ...] = ()  # wildcards whose keyed rows joined the rest of a later one reading them
    mirrored: int = 0  # keys answered by the search at their mirror image (`search_keys`)
    by_rows: int = 0  # of `cut`, the searches stopped by their waiting rows (`max_rows`), not by time

    @property
    def complete(self) -> bool:
        return self.cut == 0


def tagged_tensors(workload: Workload, wildcards, einsum: str) -> dict[str, str]:
    """{tensor: Einsum}: each input of `einsum` whose producer is not a wildcard, and that
    producer (its rows give the tensor's c_T). Outputs are left free: tagging them by
    their consumers' rows multiplies the rows the rest's join keeps past the producers
    of the inputs by every key of each output (4.7 GB at batch 1, twenty-third session)."""
    out = {}
    for u in workload.einsum(einsum).inputs:
        producer = workload.producer(u.tensor)
        if producer is not None and producer not in wildcards:
            out[u.tensor] = producer
    return out


JOINS_HELD = 64  # `_join_energy` results kept (`_JOINS`)
_JOINS: dict = {}  # names -> ((workload, arch, their tables), the join's least energy)


def _join_energy(tables: dict[str, pd.DataFrame], workload: Workload, arch: Arch, names: list[str]) -> float:
    """The least energy of the join over `names` as a sub-workload (keys cut to what they
    share; 0 for none). Kept while those Einsums' tables are the same objects: the
    refinements of one proof join the same rests again and again (at batch 1, 87 calls
    took 4.5 s of the proof's 141 s)."""
    if not names:
        return 0.0
    if any(not len(tables[e]) for e in names):
        return math.inf
    key, now = tuple(names), (workload, arch, *(tables[e] for e in names))
    held = _JOINS.get(key)
    if held is not None and all(a is b for a, b in zip(held[0], now)):
        return held[1]
    sub = workload.restricted(names)
    full = join({e: cut_keys(tables[e], sub) for e in names}, sub, arch, ("energy",))
    energy = float(full["energy"].min()) if len(full) else math.inf
    if len(_JOINS) >= JOINS_HELD:
        _JOINS.pop(next(iter(_JOINS)))
    _JOINS[key] = (now, energy)
    return energy


def rest_by_key(workload: Workload, arch: Arch, tables: dict[str, pd.DataFrame], wildcards, einsum: str,
                limit: float, readers: bool = False) -> dict[tuple, float]:
    """{key: R}: for each key (((tensor, c_T), ...) sorted) the Einsums that are not
    `wildcards` can give `einsum`'s inputs, a lower bound R on their energy when they do,
    where below `limit`.

    The rest is split after the last producer of a tagged input: R is the least energy of
    the join over the Einsums up to it that gives the key (`ffm.join.join`'s `tag`) plus
    the least of the join over the Einsums after it. Each of the two is a valid mapping of
    its own sub-workload, so the sum bounds the rest's join, and tags multiply only the
    first join's rows (joined whole, the rest kept 4.7 GB of tagged rows at batch 1; split,
    its least is 121.356 mJ where the whole one's is 121.389).

    With `readers`, the split comes after the last Einsum reading a tagged input too: such
    an Einsum gives the input the same c_T (DESIGN §6), so joined before the split it counts
    at its least at the key, not at its least anywhere (at gpt3, Q's rest holds V and K,
    which read I, at their least with I's c_T; `ffm.slack.siblings`)."""
    rest = [e for e in workload.einsum_names if e not in wildcards]
    tagged = sorted(tagged_tensors(workload, wildcards, einsum).items())
    if not tagged:
        energy = _join_energy(tables, workload, arch, rest)
        return {(): energy} if energy < limit else {}
    last = max(rest.index(user) for _, user in tagged)
    if readers:
        inputs = {t for t, _ in tagged}
        last = max([last] + [k for k, x in enumerate(rest) if inputs & {u.tensor for u in workload.einsum(x).inputs}])
    first, after = rest[:last + 1], rest[last + 1:]
    tail = _join_energy(tables, workload, arch, after)
    if any(not len(tables[e]) for e in first) or tail >= limit:
        return {}
    codes, uniques, radix = [], [], 1
    for t, user in tagged:  # code 0: the user is not joined yet
        c, u = pd.factorize(pd.Series([dict(k[0])[t] for k in tables[user]["compat"]]))
        codes.append((user, tables[user].index, (c + 1) * radix))
        uniques.append(list(u))
        radix *= len(u) + 1

    def tag(frame) -> np.ndarray:  # (the join's `ffm.join.Columns`, or its result)
        out = np.zeros(len(frame["energy"]), dtype=np.int64)
        for user, index, code in codes:
            if f"row:{user}" in frame:
                out += code[index.get_indexer(np.asarray(frame[f"row:{user}"]))]
        return out

    low = np.array([float(tables[e]["energy"].min()) for e in first])
    later = np.concatenate([np.cumsum(low[::-1])[::-1][1:], [0.0]])  # the least the Einsums after step i add

    def admit(i: int, frame) -> np.ndarray:
        return np.asarray(frame["energy"], dtype=float) + later[i] + tail < limit

    sub = workload.restricted(first)
    full = join({e: cut_keys(tables[e], sub) for e in first}, sub, arch, ("energy",), admit=admit, tag=tag)
    if full.empty:
        return {}
    least = full.assign(tag=tag(full)).groupby("tag")["energy"].min()
    rem, parts = least.index.to_numpy(dtype=np.int64), []
    for (t, _), u in zip(tagged, uniques):  # each tensor's digit of the codes, as (tensor, c_T)
        rem, digit = np.divmod(rem, len(u) + 1)
        pairs = np.empty(len(u) + 1, dtype=object)
        for i, c in enumerate(u, 1):  # (one by one: numpy would unpack the tuples)
            pairs[i] = (t, c)
        parts.append(pairs[digit])
    return dict(zip(zip(*parts), (least.to_numpy(dtype=float) + tail).tolist()))



KEY_ALL_UP_TO = 20000  # keys a wildcard is searched at one by one; past it, grouped (`key_groups`)
# keys sharing their tensors' backing levels searched once, those levels fixed and the loops
# above them free, when at least this many per tagged tensor (`key_groups`). At batch 1 (forty-fourth session,
# docs/mapper.md "Step 24"), per backing assignment, the keyed searches' CPU against one
# search within their largest β: Q keyed by I in the LocalBuffer, 380 keys 4.36 s, one search
# 0.35 s; QK_softmax by QK in the LocalBuffer, 225 keys 5.96 s against 1.26 s; Q by I in the
# GlobalBuffer, 290 keys 15.9 s against 9.34 s; but Z by AV in the GlobalBuffer, 6 keys 5.52 s
# against 8.44 s, and QK by Q in the GlobalBuffer and K in the LocalBuffer, 182 keys 1.90 s
# against 2.69 s: few keys fix many loops each, and their searches are quick
BACKING_GROUP_FROM = 150


def backing_group(key: tuple) -> tuple:
    """The search key of `key`'s backing group (((tensor, (level, None)), ...)): its tensors
    backed at the same levels, the loops above them left free (`search_keys`' `keyed`)."""
    return tuple((t, (level, None)) for t, (level, _) in key)


def key_groups(betas: dict[tuple, float], up_to: int = KEY_ALL_UP_TO,
               known: Callable[[tuple], float] | None = None,
               by_backing: int = BACKING_GROUP_FROM) -> dict[tuple, list[tuple]]:
    """{search key: the keys of `betas` ({key: β}) it answers}.

    First, keys whose tensors are backed at the same levels form one group, searched once
    with those levels fixed and the loops above them free (`backing_group`), where there
    are at least `by_backing` of them per tagged tensor (a key fixing loops over more
    tensors is searched quicker alone) or an earlier complete search of that group answers
    them all (`known(group)`: its β, -inf for none): the one search explores the loop nests
    above the backings once, where each keyed search explores them again to reach its own.
    Of the other keys, up to `up_to` are each searched alone. Past that, they are grouped by
    the c_T of one tagged tensor. The tensor is the one leaving the fewest searches
    that earlier ones do not answer, then the fewest groups.

    Each group is searched within the largest β of its keys: such a search holds every
    pmapping of the group within that β, or one dominating it within its compatibility
    group, which has the same c_T for every tensor, so its rows give each key of the
    group its least cost (`least_by_key`). At batch 1,
    (QK, AV) gives AV 449466 keys, pairs of 6514 c_T of QK_softmax's output and 69 of V:
    grouped by QK_softmax's c_T its searches take 0.05 to 10 s each (over an hour in all);
    by V's, the term (QK_softmax, AV) had run 68 of the 69 searches and the term closed
    in 60 s (docs/mapper.md, "Step 5")."""
    known = known or (lambda group: -math.inf)
    out: dict[tuple, list[tuple]] = {}
    by_levels: dict[tuple, list[tuple]] = {}
    for k in betas:
        by_levels.setdefault(backing_group(k), []).append(k)
    keys = []
    for group, members in by_levels.items():
        if len(members) >= by_backing * len(group) or known(group) >= max(betas[k] for k in members):
            out[group] = members
        else:
            keys += members
    if len(keys) <= up_to or len(keys[0]) < 2:  # one tagged tensor: a group is a key
        return {**out, **{k: [k] for k in keys}}
    best, choice = None, {}
    for i in range(len(keys[0])):
        groups: dict[tuple, list[tuple]] = {}
        for k in keys:
            groups.setdefault((k[i],), []).append(k)
        new = sum(known(g) < max(betas[k] for k in members) for g, members in groups.items())
        if best is None or (new, len(groups)) < best:
            best, choice = (new, len(groups)), groups
    return {**out, **choice}


def least_by_key(table: pd.DataFrame, tensors: list[str]) -> dict[tuple, float]:
    """{((tensor, c_T), ...) for `tensors`: the least energy of `table`'s rows with those c_T}."""
    out: dict[tuple, float] = {}
    if table.empty:
        return out
    for key, energy in zip(table["compat"], table["energy"].to_numpy(dtype=float)):
        c_t = dict(key[0])
        tag = tuple((t, c_t[t]) for t in tensors)
        out[tag] = min(energy, out.get(tag, math.inf))
    return out


@dataclass(frozen=True)
class KeyedSearches:
    """What `search_keys` found for one wildcard: per key, (its least cost there, at least
    the budget; complete) or None (no pmapping of it below the key's β); the searches'
    results by (einsum, search key); how many searches were due, came back empty, were cut
    short or not started, kept rows, were answered by earlier ones, or by the search at
    their mirror image (QK's keys: `pmapgen.symmetry.key_mirror`)."""
    floors: dict
    results: dict
    searches: int = 0
    empty: int = 0
    cut: int = 0
    rows: int = 0
    reused: int = 0
    mirrored: int = 0  # answered by the search at their mirror image (`pmapgen.symmetry.mirror_result`)
    by_rows: int = 0  # of `cut`, stopped by their waiting rows (`max_rows`)
    explored: int = 0  # structural prefixes the searches run here processed (not those reused or mirrored)
    evaluated: int = 0  # partial rows they built


def search_keys(e: str, betas: dict[tuple, float], budget: float, workload: Workload, arch: Arch,
                constraints: Constraints | None = None, searched: dict | None = None,
                time_limit: float | None = None, deadline: float | None = None, workers: int | None = None,
                progress: bool = False, group_above: int = KEY_ALL_UP_TO, desc: str = "keyed searches",
                split: bool = False, max_rows: int | None = None, kept: Workers | None = None,
                by_backing: int = BACKING_GROUP_FROM, own_budgets: bool = False, sub_parts: int = 1,
                penalty: OutputPenalty | None = None) -> KeyedSearches:
    """e's least cost at each key c of `betas` ({c: β}) among its pmappings giving its tagged
    inputs those c_T and costing at most β, from budgeted prefix searches with c fixed
    (`Constraints.tensor_keys`), or grouped (`key_groups`). `searched` is `refine`'s,
    keyed by what a search's result depends on (`pmapgen.all_einsums.signature`: names
    factored out), so a search of one Einsum answers the same search of another identical
    up to names, renamed (at batch 1, V's and Q's keyed by I's c_T: the same searches).
    `split` runs each search split by root across the workers
    (`pmapgen.all_einsums.split_searches`): for the few long searches of a retry, not for
    the thousands of millisecond ones a first refinement runs (a part per root each).
    Without it, only the search of a key fixing no loop is split: it is the longest by
    far, and often nearly alone (at batch 1, Z keyed by AV unfused took 5.35 s of the
    6.3 s of Z's 8 keyed searches, one core idle meanwhile).
    Of two keys that are each other's mirror image (QK's, Q and K swapped:
    `pmapgen.symmetry.key_mirror`), the one of larger β is searched and the other answered
    by its rows mirrored (`mirror_result`: exactly the rows its own search would keep).
    `max_rows` cuts a search short like its time limit once that many partial rows wait.
    `kept` runs the searches in those workers (`pmapgen.all_einsums.Workers`), not fresh ones.
    `by_backing`: keys sharing their backing levels are searched as one group from this many
    per tagged tensor (`key_groups`). `own_budgets` holds each key of a group to its own β
    in the group's search (`pmapgen.key_budgets`), not to the group's largest: at batch 1,
    AV's search with QK_softmax and V in the LocalBuffer took 0.7 s instead of 3.2; the
    group a mirror image answers (`mirror_key`) holds the image's keys, mirrored, too.
    `sub_parts` > 1 splits each root of the searches `_sub_parts` picks into that many
    sub-parts (`pmapgen.all_einsums.split_searches`). `penalty` lowers every key's β by
    what e's output costs its readers at its c_T (`ffm.consumers`, `pmapgen.key_budgets`):
    each search holds its keys to their own β then, no mirror image answers another, and a
    key's floor is its least among the rows within β less their output's penalty."""
    base = constraints or Constraints()
    searched = {} if searched is None else searched
    held: dict = {}  # group -> {key: β} its search holds each key to (`own_budgets`)

    def keyed(group: tuple, budgets: bool = True) -> Constraints:  # a c_T without loops (`backing_group`): the level
        fixed = {t: ct for t, ct in group if ct[1] is not None}
        levels = {t: (ct[0],) for t, ct in group if ct[1] is None}
        if budgets and penalty is not None:
            own = KeyBudgets.of(held.get(group) or {k: betas[k] for k in groups[group]}, penalty)
        else:
            own = KeyBudgets.of(held[group]) if budgets and group in held else None
        return replace(base, tensor_keys={**base.tensor_keys, **fixed}, backing={**base.backing, **levels},
                       key_budgets=own)

    def sig_of(group: tuple) -> tuple:  # what `searched` files a search under: its budgets go with it
        return signature(e, workload, keyed(group, budgets=False))

    def need(group: tuple) -> dict:  # {key: β} a search must cover to answer `group`
        return held.get(group) or {k: betas[k] for k in groups[group]}

    def known(group: tuple) -> float:
        bound = searched.get(sig_of(group), (-math.inf,))[0]
        return -math.inf if isinstance(bound, KeyBudgets) else bound

    groups = key_groups(betas, group_above, known, by_backing)
    mirror = None if base.tensor_keys or penalty is not None else key_mirror(e, workload, arch, base)
    jobs, done, floors, sigs = [], {}, {}, {}
    images: dict = {}  # group: the group whose search, mirrored, answers it (`pmapgen.symmetry.mirror_result`)
    theirs: list = []  # groups another refinement is searching within their β (`_RUNNING`)
    reused = mirrored = empty = cut = rows = by_rows = 0

    def reuse(group: tuple, beta: float) -> bool:  # answered by a complete search within β at least?
        sig = sigs[e, group]
        if sig not in searched or not _covers(searched[sig][0], need(group), penalty):
            return False
        _, src, (table, templates, stats) = searched[sig]
        if src != e:
            table, templates = rename(table, templates, src, e, workload)
        # (most are empty: the search that shows no pmapping gives a key is the common one)
        done[e, group] = (table[table["energy"].to_numpy() <= beta] if len(table) else table, templates, stats)
        return True

    def job(group: tuple, beta: float) -> tuple:
        c = keyed(group)
        return (e, group), Job(e, workload, arch, c, with_latency(("energy",), c), time_limit, beta, max_rows=max_rows)

    order = sorted(groups.items(), key=lambda g: -max(betas[k] for k in g[1]))
    if own_budgets:
        held.update(_held_budgets(e, order, betas, mirror, workload))
    for group, members in order:
        beta = max(held[group].values()) if group in held else max(betas[k] for k in members)
        sigs[e, group] = sig = sig_of(group)
        if reuse(group, beta):
            reused += 1
        elif group in images:  # its mirror image came first, so within a β at least its own
            mirrored += 1
            continue
        elif sig in _RUNNING and _covers(_RUNNING[sig][0], need(group), penalty):
            theirs.append((group, beta))
        else:
            jobs.append(job(group, beta))
        image = mirror_key(mirror, workload.einsum(e), group, members)
        if image is not None and image in groups and (groups[image] == [image] or image == backing_group(image)) \
                and (e, image) not in sigs and image not in images:
            images[image] = group
    ran = _run_keyed(jobs, sigs, searched, workers, progress, desc, deadline, split, kept, sub_parts)
    if theirs:
        for group, _ in theirs:
            with TURN.away():
                _RUNNING.get(sigs[e, group], (0.0, _DONE))[1].wait()
        again = [job(group, beta) for group, beta in theirs if not reuse(group, beta)]
        reused += len(theirs) - len(again)
        ran.update(_run_keyed(again, sigs, searched, workers, progress, desc, deadline, split, kept, sub_parts))
    done.update(ran)
    explored, evaluated = sum(r[2].templates for r in ran.values()), sum(r[2].tile_shapes for r in ran.values())
    for image, group in images.items():
        src = done.get((e, group))
        if (e, image) in done or src is None:  # answered by `searched` after all, or its image not started
            continue
        done[e, image] = res = mirror_result(src, mirror, e, workload, arch, with_latency(("energy",), keyed(group)),
                                                     keyed(group))
        if res[2].complete:
            searched[sigs[e, image]] = (KeyBudgets.of({k: betas[k] for k in groups[image]}) if group in held else
                                        max(betas[k] for k in groups[group]), e, res)
    for group, members in groups.items():
        res = done.get((e, group))
        if res is None:  # not started: the deadline
            cut += 1
            floors.update({k: (budget, False) for k in members})
            continue
        table, _, stats = res
        rows += len(table)
        if not stats.complete:
            cut += 1
            by_rows += stats.stopped_by == ROW_LIMIT
            floors.update({k: (max(budget, stats.lower_bound), False) for k in members})
            continue
        empty += table.empty
        by_key = least_by_key(table, [t for t, _ in members[0]])
        for k in members:
            there = by_key.get(k, math.inf)
            floors[k] = (max(budget, there), True) if there <= betas[k] else None
    return KeyedSearches(floors, done, len(groups), empty, cut, rows, reused, mirrored, by_rows, explored, evaluated)


_RUNNING: dict = {}  # signature: (β, Event set when done) of the keyed searches running now (`_run_keyed`)
_DONE = threading.Event()
_DONE.set()


def _bound(job: Job) -> float | KeyBudgets:
    """What a keyed search's job holds its rows to: its budget, or its key budgets."""
    budgets = job.constraints.key_budgets
    return job.budget if budgets is None else budgets


def _covers(bound: float | KeyBudgets, need: dict, penalty: OutputPenalty | None = None) -> bool:
    """Whether a complete search within `bound` (`_bound`) answers the keys of `need`
    ({key: β}) each within its β less `penalty` at the output's c_T (β equal up to
    summation order)."""
    if not isinstance(bound, KeyBudgets):
        return bound >= max(need.values()) * (1 - RTOL)
    held = dict(bound.items)
    return all(held.get(k, -math.inf) >= b * (1 - RTOL) for k, b in need.items()) and \
        (bound.penalty is None or bound.penalty.covers(penalty))


def _held_budgets(e: str, order: list, betas: dict, mirror, workload: Workload) -> dict:
    """`search_keys`' `own_budgets`: per group of several keys (in `order`, the groups
    by falling β), the β its search holds each key to: its own keys', and those of the
    mirror image it answers, mirrored (the pairing `search_keys` makes: a group and the
    image after it in that order)."""
    held, answered = {}, set()
    einsum = workload.einsum(e)
    groups, at = dict(order), {group: i for i, (group, _) in enumerate(order)}
    for i, (group, members) in enumerate(order):
        if group in answered:
            continue
        own = {k: betas[k] for k in members}
        image = mirror_key(mirror, einsum, group, members)
        if image is not None and image == backing_group(image) and at.get(image, -1) > i:
            answered.add(image)
            for k in groups[image]:
                mk = tuple(sorted(mirror.tensor_keys(einsum, dict(k)).items()))
                own[mk] = max(own.get(mk, -math.inf), betas[k])
        if len(own) > 1:
            held[group] = own
    return held


def _run_keyed(jobs: list, sigs: dict, searched: dict, workers: int | None, progress: bool, desc: str,
               deadline: float | None, split: bool, kept: Workers | None, sub_parts: int = 1) -> dict:
    """`search_keys`' searches `jobs`, recorded in `searched` where complete. While they
    run, `_RUNNING` holds them, so a refinement running at the same time (`ffm.budgets`
    refines several terms at once) waits for a search within its β at most instead of
    running it again: at batch 1, (Q, AV) and (Q, QK_softmax, AV) search the same keys of Q."""
    if not jobs:
        return {}
    jobs = sorted(jobs, key=lambda job: _fixed_loops(job[0][1]))  # stable: by β within
    subs = {key: _sub_parts(key[1], args, sub_parts) for key, args in jobs}
    mine = {sigs[key]: (_bound(args), threading.Event()) for key, args in jobs}
    mine = {sig: held for sig, held in mine.items() if sig not in _RUNNING}
    _RUNNING.update(mine)
    try:
        ran = split_searches(jobs, workers, progress, desc, deadline=deadline,
                             split=None if split else (lambda key: _fixed_loops(key[1]) == 0), kept=kept,
                             sub_parts=lambda key: subs[key])
        for key, args in jobs:
            if key in ran and ran[key][2].complete:
                searched[sigs[key]] = (_bound(args), key[0], ran[key])
    finally:
        for sig, (_, done) in mine.items():
            _RUNNING.pop(sig, None)
            done.set()
    return ran


def _sub_parts(group: tuple, job: Job, m: int) -> int:
    """How many sub-parts each root of a keyed search is split into (m, or 1): only a
    search that fixes no loop (the longest) and holds every tagged input at most at the
    outermost on-chip level. A sub-part repeats the search down to where the fused
    structure is final, which an input held deeper keeps open: at batch 1, split in 8,
    AV's parts with QK_softmax in the LocalBuffer took 2.3 to 4.8 times their CPU, those
    with every tagged input in the GlobalBuffer 1.03 to 1.35 times (docs/pmapgen.md, "Sub-parts")."""
    if _fixed_loops(group):
        return 1
    outer = outer_levels(job.arch, job.workload.einsum(job.einsum))
    return m if all(level in outer for _, (level, _) in group) else 1


def outer_levels(arch: Arch, einsum: Einsum) -> set[str]:
    """The levels a tensor of `einsum` may be backed at without keeping its sub-parts'
    shared search long: the top and the outermost on-chip level of each compute unit's path.
    An input backed deeper leaves the fused structure open further down, and each sub-part
    repeats the search down to where it is final (docs/pmapgen.md, "Sub-parts")."""
    return {m.name for u in arch.computes_for(einsum) for m in arch.path(u.name)[:2]}


def _fixed_loops(group: tuple) -> int:
    """How many fused loops a search key fixes (((tensor, (level, loops)), ...)). A key
    fixing none leaves the search the most to do: at batch 1 the one keyed search of Q
    with I unfused took 12.5 s of (Q, AV)'s 43.6 s, the other 667 under 3.5 s each, so it
    starts first rather than last (β alone put it last: its β was the least)."""
    return sum(len(loops or ()) for _, (_, loops) in group)


def mirror_key(mirror, einsum, group: tuple, members: list) -> tuple | None:
    """The mirror image of a key searched alone or of a backing group (((tensor, c_T), ...)
    sorted; `backing_group`), or None: no mirror, a group of keys by one tensor's c_T
    (`key_groups`), or a key that is its own image. A backing group's search fixes only
    the levels, so its image is the search at the mirrored levels (at batch 1, QK's keys
    with K in the LocalBuffer and Q in the GlobalBuffer and the other way round: 4.3 s
    each)."""
    if mirror is None or (members != [group] and group != backing_group(group)):
        return None
    image = tuple(sorted(mirror.tensor_keys(einsum, dict(group)).items()))
    return None if image == group else image


def next_wildcard(workload: Workload, left: list[str], free, closers=()) -> str:
    """The wildcard of `left` (not yet searched) to search next, `free` being the wildcards
    not absorbed into the rest: one of `closers` first (its keys alone closed an earlier
    term, and the searches that showed it often answer this term's keys from `searched`;
    on llama3_8b at batch 1, FFG's one empty keyed search closed every term holding it,
    but AV's and QK's keys, searched first, took 104 and 140 s; fifty-second session;
    the order is a matter of speed only), then most tagged inputs (their keys fix more,
    so their searches are quicker: at batch 1, AV's keyed searches take under a second and Q's,
    keyed by I's c_T alone, 1 to 60 s), then the one whose output the most wildcards of
    `left` read (once absorbed, it tags their inputs), then the one whose tagged inputs'
    last producer comes first (its rest joins the fewest Einsums, `rest_by_key`: the
    rests are joined when first read, and a term the first wildcard closes needs no
    other's; "fewest keys" here joined AV's rest for (QK, AV) at batch 1, 1.2 s, for QK
    to close the term alone; forty-fourth session)."""
    order = list(workload.einsum_names)

    def feeds(e: str) -> int:
        out = workload.einsum(e).output.tensor
        return sum(any(u.tensor == out for u in workload.einsum(w).inputs) for w in left if w != e)

    def last_producer(e: str) -> int:
        return max((order.index(p) for p in tagged_tensors(workload, free, e).values()), default=-1)
    return min(left, key=lambda e: (e not in closers, -len(tagged_tensors(workload, free, e)), -feeds(e),
                                    last_producer(e), left.index(e)))


def within_betas(table: pd.DataFrame, betas: dict[tuple, float], penalty: OutputPenalty | None = None) -> np.ndarray:
    """Which rows of a keyed search's `table` are at a key of `betas` ({key: β}, keys
    ((tensor, c_T), ...) over the same tensors) and cost at most its β, less `penalty` at
    their output's c_T: a grouped search (`key_groups`) holds rows at other keys and above
    their own key's β."""
    tensors = [t for t, _ in next(iter(betas), ())]
    keys = [tuple((t, dict(k[0])[t]) for t in tensors) for k in table["compat"]]
    energy = table["energy"].to_numpy(dtype=float)
    if penalty is not None and len(table):
        energy = energy + np.array([penalty.at(dict(k[0]).get(penalty.tensor)) for k in table["compat"]])
    return np.array([x <= betas.get(k, -math.inf) for k, x in zip(keys, energy)], dtype=bool)


def absorbed_table(ks: KeyedSearches, betas: dict[tuple, float], budget: float) -> pd.DataFrame:
    """A searched wildcard's keyed rows, as a table the rest can join (its searches all
    completed): in a mapping of the term below U, its pmapping costs less than the β of
    the key c the rest gives it, so a row of its search at c of the same compatibility
    group, costing at most that, dominates it. Rows at other keys or above their key's β
    are left out (a grouped search holds such rows), and rows below `budget` count at it
    (the wildcard costs more there)."""
    frames = [table[within_betas(table, betas)] for table, _, _ in ks.results.values() if len(table)]
    if not frames:
        return pd.DataFrame(columns=["compat", "energy"])
    table = pd.concat(frames, ignore_index=True)
    return table.assign(energy=np.maximum(table["energy"].to_numpy(dtype=float), budget))


def refine(workload: Workload, arch: Arch, results: dict, budgets: dict[str, float], wildcards: tuple[str, ...],
           bound: float, constraints: dict[str, Constraints] | None = None, time_limit: float | None = None,
           deadline: float | None = None, workers: int | None = None, progress: bool = False,
           searched: dict | None = None, group_above: int = KEY_ALL_UP_TO, retry: bool = False,
           max_rows: int | None = None, kept: Workers | None = None, closers: set[str] | None = None
           ) -> tuple[Refinement, tuple[dict, SearchResult] | None]:
    """(the refinement of the term of `wildcards`, a mapping below `bound` (U) if its join
    found one: (results it indexes, SearchResult)). `results` holds each Einsum's table
    (`generate_all`-style) complete within `budgets`; each keyed search gets `time_limit`
    seconds and none starts after `deadline` (`time.perf_counter()`).

    `searched` ({search signature: (β, einsum, result)}, updated here) holds the complete
    keyed searches of earlier refinements and of this one: one whose β is at least the new
    β answers that key (its rows within the new β are a frontier within it), so a term
    refined again after a raise, or a term sharing a wildcard with one refined before,
    searches only the keys whose β rose; and an Einsum identical to one searched before
    up to names (V, K, Q) is answered by that one's searches, renamed (`search_keys`). A
    wildcard with more than `group_above` keys is searched once per group of keys sharing
    one tensor's c_T (`key_groups`).

    The wildcards are searched one after the other (`next_wildcard`). Once all of e's keys
    are searched, e costs at least L_e in a mapping of this term (the least over its keys
    of its keyed table's least, or its search's lower bound, and at least b_e), so the
    wildcards after it are searched within U - R(c) - L_e - ..., and a wildcard whose
    per-key sums reach U closes the term without searching the others. `closers`
    (updated here) names the wildcards whose keys closed an earlier term so: they are
    searched first (`next_wildcard`).

    `retry` marks a term refined before whose keyed searches were cut short: the complete
    ones are all in `searched`, so only those cut short run again, each split by root
    across the workers (`search_keys`' `split`). `max_rows` caps each keyed search's
    waiting rows, and `kept` runs them in those workers (`search_keys`)."""
    start = time.perf_counter()
    tables = {e: r[0] for e, r in results.items()}
    least = {e: budgets[e] for e in wildcards}  # L_e: what e costs at least in a mapping of this term

    def rest(e: str, free, least: dict[str, float]) -> dict:
        return rest_by_key(workload, arch, tables, free, e, bound * (1 - RTOL) - sum(least[w] for w in free))

    rests = _Rests(lambda e, at_start=dict(least): rest(e, wildcards, at_start))
    frees: dict[str, tuple[str, ...]] = {}  # e: the wildcards not in the rest when e was searched
    floors: dict[str, dict[tuple, tuple[float, bool] | None]] = {}  # e: {key: (e's least there, complete) | None: empty}
    got: dict = {}
    keys = empty = cut = rows = reused = mirrored = by_rows = 0
    searched = {} if searched is None else searched
    left, absorbed = list(wildcards), set()
    while left:
        free = tuple(w for w in wildcards if w not in absorbed)
        e = next_wildcard(workload, left, free, closers or ())
        left.remove(e)
        if set(tagged_tensors(workload, free, e)) - set(tagged_tensors(workload, wildcards, e)):
            rests[e] = rest(e, free, least)  # e reads an absorbed wildcard's output: keyed by its rows' c_T too
        else:  # the rest as before, absorbed wildcards at their L (rejoining it costs seconds at batch 1)
            free = tuple(wildcards)
        frees[e] = free
        others = sum(least[w] for w in free if w != e)
        floors[e] = {}
        betas = {}
        for key, r in rests[e].items():
            beta = bound - r - others
            if beta <= budgets[e]:  # e would cost less than its budget there: not a mapping of this term
                floors[e][key] = None
            else:
                betas[key] = beta
        ks = search_keys(e, betas, budgets[e], workload, arch, (constraints or {}).get(e), searched, time_limit,
                         deadline, workers, progress, group_above, desc=f"proof: refine {', '.join(wildcards)}: {e}",
                         split=retry, max_rows=max_rows, kept=kept, own_budgets=True)
        floors[e].update(ks.floors)
        got.update(ks.results)
        keys, empty, cut, rows, reused, mirrored, by_rows = (
            keys + ks.searches, empty + ks.empty, cut + ks.cut, rows + ks.rows, reused + ks.reused,
            mirrored + ks.mirrored, by_rows + ks.by_rows)
        least[e] = min((f[0] for f in floors[e].values() if f is not None), default=math.inf)
        if per_key(e, rests, floors, least, free)[0] >= bound * (1 - RTOL):
            if closers is not None:
                closers.add(e)
            break  # e's keys close the term: the others need no search
        if not ks.cut:
            tables[e] = absorbed_table(ks, betas, budgets[e])
            absorbed.add(e)
    values = [per_key(e, rests, floors, least, frees[e]) for e in floors]
    value = max(v for v, _ in values)
    cut_bound = min(c for _, c in values)
    best = None
    if value < bound * (1 - RTOL):
        both = union(results, *({e: res} for (e, _), res in got.items() if len(res[0])))
        # exact, pruned against U from the start (the U mapping need not be in these tables)
        found = search({e: r[0] for e, r in both.items()}, workload, arch, "energy", epsilon=0.0, known=bound)
        energy = float(found.best["energy"].iloc[0]) if not found.best.empty else math.inf
        if energy < bound * (1 - RTOL):
            best = (both, found)
        value = max(value, min(energy, cut_bound))
    return Refinement(tuple(wildcards), value, keys, empty, cut, rows, time.perf_counter() - start,
                      tuple((e, least[e]) for e in wildcards), reused, retry,
                      tuple(w for w in wildcards if any(w not in f for f in frees.values())), mirrored,
                      by_rows), best


class _Rests(dict):
    """Each wildcard's rest by key (`rest_by_key`), joined when first read: a term that the
    first wildcard searched closes needs no other's (at batch 1, 2.3 s of the 5.1 s the
    refinements spent in rests; forty-fourth session). `make(e)` joins it with the limits
    the term started with, so a rest read late is the one read first would have been."""

    def __init__(self, make: Callable[[str], dict]):
        super().__init__()
        self.make = make

    def __missing__(self, e: str) -> dict:
        self[e] = got = self.make(e)
        return got


def per_key(e: str, rests: dict[str, dict], floors: dict[str, dict], least: dict[str, float],
            wildcards) -> tuple[float, float]:
    """(the least over e's keys of R_e(c) + e's least there + the other wildcards' L_w,
    the same over the keys whose search was cut short or not started): a mapping of the
    term costs at least the first, and one giving a wildcard a key cut short, at least the
    second. Keys where no pmapping of e can be (None: an empty search, or a budget β_e(c)
    at most b_e) count at nothing."""
    others = sum(least[w] for w in wildcards if w != e)
    value = cut = math.inf
    for key, f in floors[e].items():
        if f is None:
            continue
        v = rests[e][key] + others + f[0]
        value = min(value, v)
        if not f[1]:
            cut = min(cut, v)
    return value, cut
