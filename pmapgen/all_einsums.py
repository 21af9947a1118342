"""pmapgen for a whole workload: Einsums in parallel across local cores, with a progress
bar; Einsums identical up to names (same shapes, roles, bits and sharing, same
constraints) are generated once and the result renamed."""
from __future__ import annotations

import gc
import math
import multiprocessing
import os
import signal
import time
from collections import deque
from contextlib import nullcontext
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import replace
from typing import Callable, Hashable, NamedTuple

import numpy as np
import pandas as pd
from tqdm import tqdm

from arch.model import Arch
from pmapgen.allocator import WORKER_THRESHOLD, mmap_threshold
from pmapgen.constraints import Constraints
from pmapgen.generate import OBJECTIVES, TIME_LIMIT, Stats, generate, prune_table, result
from pmapgen.pareto import state_frontier
from pmapgen.prefixes import (energy_lower_bound, generate_by_prefixes, generate_by_rising_budgets, part_count,
                               part_floor, search_part)
from pmapgen.templates import Template, relabeled
from pmapgen.timeline import record
from pmapgen.turn import TURN
from workloads.model import Workload


def signature(einsum: str, workload: Workload, constraints: Constraints | None) -> tuple:
    """What pmapgen's result depends on, with tensor and rank names factored out (in the
    constraints too: V, K and Q searched within keys equal up to names are one search)."""
    e = workload.einsum(einsum)
    ranks = {r: k for k, r in enumerate(e.rank_variables)}
    uses = tuple((tuple(ranks[r] for r in u.ranks), workload.tensors[u.tensor].bits, workload.tensors[u.tensor].role,
                  workload.tensors[u.tensor].weight, workload.is_shared(u.tensor)) for u in e.tensor_uses)
    return (e.kind, e.unit, uses, tuple(workload.rank_sizes[r] for r in e.rank_variables),
            repr(_unnamed(constraints, e)))


def _unnamed(c: Constraints | None, e) -> Constraints | None:
    """`c` with `e`'s tensors and rank variables named by their position (others kept)."""
    if c is None:
        return None
    tensors = {u.tensor: f"#{k}" for k, u in enumerate(e.tensor_uses)}
    ranks = {r: f"#{k}" for k, r in enumerate(e.rank_variables)}
    t, r = (lambda x: tensors.get(x, x)), (lambda x: ranks.get(x, x))

    def rank_set(s):
        return None if s is None else tuple(sorted(map(r, s)))

    key = None if c.key is None else (tuple(sorted((t(x), ct) for x, ct in c.key[0])),
                                      tuple((r(x), tile, sp) for x, tile, sp in c.key[1]))
    return replace(c, backing=dict(sorted((t(x), v) for x, v in c.backing.items())),
                   fusable_ranks=rank_set(c.fusable_ranks), loop_ranks=rank_set(c.loop_ranks),
                   spatial={d: rank_set(v) for d, v in sorted(c.spatial.items())},
                   loop_order=tuple(map(r, c.loop_order)),
                   tiles=dict(sorted((r(x), tuple(sorted(v))) for x, v in c.tiles.items())), key=key,
                   tensor_keys=dict(sorted((t(x), v) for x, v in c.tensor_keys.items())),
                   tensor_key_sets=dict(sorted((t(x), v) for x, v in c.tensor_key_sets.items())),
                   key_budgets=None if c.key_budgets is None else c.key_budgets.renamed(t))


def _renaming(src: str, dst: str, workload: Workload) -> tuple[dict, dict]:
    a, b = workload.einsum(src), workload.einsum(dst)
    tensors = {u.tensor: v.tensor for u, v in zip(a.tensor_uses, b.tensor_uses)}
    return tensors, dict(zip(a.rank_variables, b.rank_variables))


def rename(table: pd.DataFrame, templates: list[Template], src: str, dst: str,
           workload: Workload) -> tuple[pd.DataFrame, list[Template]]:
    """`src`'s pmapgen result as `dst`'s, for two Einsums with the same signature."""
    tmap, rmap = _renaming(src, dst, workload)
    new_templates = [replace(t, einsum=dst, nodes=relabeled(t.nodes, tmap, rmap)) for t in templates]
    out = table.rename(columns={f"backing:{t}": f"backing:{tmap[t]}" for t in tmap})
    out["einsum"] = dst
    out["compat"] = [(tuple(sorted((tmap[t], c) for t, c in key)), tuple((rmap[r], tile, sp) for r, tile, sp in fused))
                     for key, fused in out["compat"]]
    return out, new_templates


class Job(NamedTuple):
    """One search of `run_searches` (run by `_search`, in a worker): an Einsum's pmapgen
    within its constraints, objectives, limits and energy `budget` (pJ; None: none),
    rising from its floor if `rising` (`generate_by_rising_budgets`), or only root `part`
    of a budgeted prefix search (`split_searches`), or only its sub-part `sub` = (j, m)
    (`pmapgen.prefixes._Search.run`). The limits: `time_limit` seconds, `max_rows`
    waiting rows, `max_size` (`pmapgen.prefixes.size`) and `max_waiting` keys waiting
    (`pmapgen.prefixes._Search.run`)."""
    einsum: str
    workload: Workload
    arch: Arch
    constraints: Constraints | None
    objectives: tuple
    time_limit: float | None = None
    budget: float | None = None
    rising: bool = False
    max_rows: int | None = None
    max_size: int | None = None
    part: int | None = None
    max_waiting: int | None = None
    sub: tuple[int, int] | None = None


def _search(j: Job) -> tuple:
    """A job's (table, templates, Stats), of the whole search or of one part of a split one
    (`split_searches`: its table is built here, in the worker, and `merge_parts` concatenates
    the parts')."""
    if j.part is not None:
        return generate_by_prefixes(j.einsum, j.workload, j.arch, j.constraints, j.objectives, j.time_limit, j.budget,
                                    j.max_rows, j.part, j.max_size, j.max_waiting, j.sub)
    if j.budget is not None and j.rising:
        return generate_by_rising_budgets(j.einsum, j.workload, j.arch, j.budget, j.constraints, j.objectives,
                                          j.time_limit, j.max_rows)
    if j.budget is None and (j.constraints is None or j.constraints.latency_budget is None):
        return generate(j.einsum, j.workload, j.arch, j.constraints, j.objectives, j.time_limit)
    return generate_by_prefixes(j.einsum, j.workload, j.arch, j.constraints, j.objectives, j.time_limit, j.budget,
                                j.max_rows, max_size=j.max_size, max_waiting=j.max_waiting)


def _job(item):
    """(key, its search's result, the search's span in this process: `pmapgen.timeline`)."""
    key, args = item
    start = time.perf_counter()
    out = _search(args)
    return key, out, (start, time.perf_counter())


def _worker_start(threshold: int) -> None:
    """A worker's setup: its allocator's threshold (`pmapgen.allocator`), Ctrl-C ending it
    without a traceback (the main process says once that it was interrupted), and its
    garbage collector (`WORKER_GC`)."""
    gc.freeze()
    gc.set_threshold(*WORKER_GC)
    mmap_threshold(threshold)
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))


# A worker's collector: what it inherited from the parent (forked: the parent's whole heap,
# a few hundred thousand objects) is frozen out of its view (`gc.freeze`), and its full
# collections wait for 100 younger ones, not 10 (the search's state lives as long as the
# search). At batch 1 the energy proof's workers spent 6.6 s of their 58 s of CPU in the
# collector, 5.5 s of it in 33 full collections; frozen, 36 full ones took 2.8 s; with
# both, none ran and the workers' peak memory stayed 379 MB (fiftieth session).
WORKER_GC = (700, 10, 100)


_WARM = False  # `warm_kernels` ran in this process

STOP = "stop"  # what `run_searches`' `more` returns to end every search at once


def warm_kernels() -> None:
    """Load the compiled kernels the searches call (numba's, cached on disk) in this
    process, once, before it forks workers, so that each worker starts with them. A fresh
    worker otherwise loads them on its first search: about 0.35 s of a core (numba's
    registries and four overloads; V's first part of a proof raise took 0.55 s in a fresh
    process, 0.12 to 0.24 s in one forked after this, 0.09 s warm), and the batch-1 energy
    proof starts about a dozen (forty-ninth session). A search of an 8 x 8 x 8 matmul within
    its energy floor calls each kernel with the argument types every search passes (arrays
    only: no shape, arch or Einsum enters the signatures), in about 0.3 s. Nothing to do
    where workers are spawned instead of forked."""
    global _WARM
    if _WARM or multiprocessing.get_start_method() != "fork":
        return
    _WARM = True
    import arch as arch_specs
    import workloads
    w, a = workloads.load("matmul_chain", length=1, M=8, big=8, small=8), arch_specs.load("tpuv4i")
    (e,) = w.einsum_names
    search_part(e, w, a, None, ("energy",), None, energy_lower_bound(e, w, a))
    # a batch's frontier in both layouts its callers pass: stacked and transposed (`_Search._frontier`;
    # a search this small prunes no batch of two rows, `PUSH_PRUNE_ROWS`), and column by column
    state = np.zeros((1, 2), dtype=np.int64)
    for layout in (state.T, np.ascontiguousarray(state.T)):
        state_frontier(layout, np.zeros((2, 1)))
    # what this process holds now lives as long as it does (modules, numba's registries, the
    # kernels): frozen out of the collector, its full collections skip it (ninety-fifth
    # session: 7 of them took 0.74 s of the batch-1 energy set's main process), and the
    # workers forked next inherit it frozen (`_worker_start` freezes again what is newer)
    gc.freeze()


class Workers:
    """Worker processes kept across `run_searches` calls until `close` (or the `with`
    block's end), for callers that run many short searches in turn: a refinement of the
    energy proof runs its keyed searches (thousands, a few ms each) in several calls, and
    fresh workers start each with cold caches (the floors' plans and loop steps, spatial
    groups). Long searches should not run in them: what a search allocates leaves with a
    fresh worker, where a kept one holds on to what it could not return."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or max(1, os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None

    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            warm_kernels()
            self._pool = ProcessPoolExecutor(self.workers, initializer=_worker_start, initargs=(WORKER_THRESHOLD,))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def terminate(self) -> None:
        """End the workers now, their searches unfinished (`run_searches`' STOP)."""
        if self._pool is not None:
            for process in list(self._pool._processes.values()):  # (public only from Python 3.14)
                process.terminate()
            self.close()

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_searches(jobs: list[tuple[Hashable, Job]], workers: int | None = None, progress: bool = True, desc: str = "pmapgen",
                 stop_when_incomplete: bool = False, unit: str = "einsum", deadline: float | None = None,
                 kept: Workers | None = None, more: Callable[[Hashable, tuple], list[tuple]] | None = None) -> dict:
    """{key: (table, templates, stats)} for `jobs`, each (key, `Job`), run `workers` at a time
    in worker processes (default one per core; 1: in this process). `stop_when_incomplete`
    starts no job after one is cut short, and none starts after `deadline` (a
    `time.perf_counter()` value, which also shortens the time limits of those it starts);
    the jobs left out are missing from the result. `kept` runs them in its workers
    (`Workers`, `workers` ignored; one: in this process) instead of fresh ones.

    `more(key, result)`, called as each job ends, gives the jobs its result made ready (a
    graph of searches: `ffm.slack.latency_slack_tables`); they start before the jobs queued, the last
    made ready first, and only `workers` jobs are handed out at once, so a job made ready
    waits for no job queued behind a worker. `more` returning STOP ends the run at once:
    no job starts, the running ones are abandoned (their workers terminated, unless
    `kept`) and are missing from the result."""
    in_process = (workers if kept is None else kept.workers) == 1
    workers = kept.workers if kept is not None else workers or max(1, min(len(jobs), os.cpu_count() or 1))
    results = {}
    bar = tqdm(total=len(jobs), desc=desc, unit=unit, disable=not progress)
    queue = deque(jobs)
    stopped = []  # a job cut short, with `stop_when_incomplete`, or STOP: start none from now on

    def ended(key, res, span: tuple[float, float]) -> None:
        results[key] = res
        record(key, *span)
        if stop_when_incomplete and not res[2].complete:
            stopped.append(key)
        if more is not None:
            with nullcontext() if TURN.held() else TURN.take():  # (it may touch the caches other threads share)
                new = more(key, res)
            if new == STOP:
                stopped.append(STOP)
                new = []
            queue.extendleft(reversed(new))
            bar.total += len(new)
        bar.update()

    def next_job():  # None: nothing more to start
        if stopped:
            return None
        if deadline is None:
            return queue.popleft() if queue else None
        left = deadline - time.perf_counter()
        if not queue or left <= 0:
            return None
        key, job = queue.popleft()
        return key, job._replace(time_limit=left if job.time_limit is None else min(job.time_limit, left))

    if in_process:
        while (job := next_job()) is not None:
            ended(*_job(job))
    else:
        # `workers` jobs in flight when a stop may come (it leaves nothing queued), else
        # twice that: a worker done with a job of a few ms has the next one at hand instead
        # of waiting for this process to hand it one (a refinement runs thousands)
        flight = workers if stop_when_incomplete or more is not None else 2 * workers
        with (Workers(workers) if kept is None else nullcontext(kept)) as own:
            pool = own.pool()
            with TURN.away():  # the loop touches nothing shared: another thread may have the turn (`pmapgen.turn`)
                running = {pool.submit(_job, job) for job in (next_job() for _ in range(flight)) if job is not None}
                while running and STOP not in stopped:
                    done, running = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        ended(*future.result())
                        if STOP in stopped:
                            break
                    while len(running) < flight and (job := next_job()) is not None:
                        running.add(pool.submit(_job, job))
                if STOP in stopped and kept is None:
                    own.terminate()
                elif STOP in stopped:  # (kept workers: their searches end on their own)
                    wait(running)
    bar.close()
    return results


def generate_all(workload: Workload, arch: Arch, constraints: dict[str, Constraints] | None = None,
                 objectives=OBJECTIVES, workers: int | None = None, progress: bool = True,
                 time_limit: float | None = None, budgets: dict[str, float] | None = None,
                 stop_when_incomplete: bool = False, desc: str = "pmapgen", rising: bool = False,
                 einsums: tuple[str, ...] | None = None, max_rows: int | None = None,
                 costs: dict[str, tuple[int, ...]] | None = None, split: bool = True,
                 max_size: int | None = None, max_waiting: int | None = None
                 ) -> dict[str, tuple[pd.DataFrame, list[Template], Stats]]:
    """pmapgen for every Einsum: {einsum: (table, templates, stats)}.

    The searches run in worker processes (`workers`, default one per core up to one per
    Einsum), even a single one, so that what a search allocates leaves with its worker
    instead of staying in the long-lived caller's heap (`pmapgen.allocator`);
    `workers=1` runs them in this process.

    `time_limit` (seconds per Einsum) makes an Einsum's enumeration stop early; its
    `Stats.complete` is then False and its table is not exhaustive (see `generate`).
    `budgets` ({einsum: pJ}) switches those Einsums to the prefix search keeping only the
    frontier of pmappings within that energy (`generate_by_prefixes`); Einsums generated
    once for several names get the largest of their budgets. `stop_when_incomplete` skips
    the Einsums not started once one is incomplete and leaves them out of the result (for
    callers that need every Einsum complete); jobs then run largest Einsum first.
    `rising` makes the budgets ceilings: each Einsum's search starts at its energy floor
    and rises until it keeps a pmapping (`generate_by_rising_budgets`). `einsums` limits
    the run (and the result) to those Einsums. `max_rows` stops a budgeted search (each
    round of a rising one), as the time limit does, once more partial rows than that wait
    at once (its memory; `generate_by_prefixes`). `costs` ({einsum: `Stats.parts` of an
    earlier search}) orders the parts of budgeted searches split across the workers
    (`split_searches`). Budgeted searches are split by root across the workers unless
    `split` is False: then each runs whole in one worker with its own limits. `max_size`
    stops a budgeted prefix search (not rising; each part of a split one) once its size
    is known to be more than that (`pmapgen.prefixes.size`): a count of keys and rows, so every machine cuts the
    same searches at the same key, which tells which Einsums complete cheaply
    (`ffm.slack.slack_tables`' probe; split, the long searches' parts would take the time
    the short ones would have used); `max_waiting` stops it once more keys than that wait
    at once (`pmapgen.prefixes._Search.run`: a wide search).
    """
    constraints = constraints or {}
    budgets = budgets or {}
    representative: dict[tuple, str] = {}
    same_as: dict[str, str] = {}
    names = [e for e in workload.einsum_names if einsums is None or e in einsums]
    for e in names:
        sig = signature(e, workload, constraints.get(e))
        same_as[e] = representative.setdefault(sig, e)
    unique = [e for e in names if same_as[e] == e]
    if stop_when_incomplete:
        unique.sort(key=lambda e: -math.prod(workload.rank_sizes[r] for r in workload.einsum(e).rank_variables))
    budget = {rep: max((budgets[e] for e in names if same_as[e] == rep and e in budgets),
                       default=None) for rep in unique}
    jobs = [(e, Job(e, workload, arch, constraints.get(e), objectives, time_limit, budget[e], rising, max_rows,
                    max_size, max_waiting=max_waiting)) for e in unique]
    budgeted = budgets or any(c is not None and c.latency_budget is not None for c in constraints.values())
    if budgeted and not rising and workers != 1 and split:
        results = split_searches(jobs, workers, progress, desc, stop_when_incomplete, costs=costs)
    else:
        results = run_searches(jobs, workers, progress, desc, stop_when_incomplete)
    out = {}
    for e in names:
        rep = same_as[e]
        if rep not in results:
            continue
        table, templates, stats = results[rep]
        out[e] = (table, templates, stats) if rep == e else (*rename(table, templates, rep, e, workload), stats)
    return out


def split_searches(jobs: list[tuple[Hashable, Job]], workers: int | None, progress: bool, desc: str,
                   stop_when_incomplete: bool = False, deadline: float | None = None,
                   split: Callable[[Hashable], bool] | None = None, kept: Workers | None = None,
                   costs: dict[Hashable, tuple[int, ...]] | None = None,
                   sub_parts: Callable[[Hashable], int] | None = None) -> dict:
    """`run_searches` for budgeted prefix searches, each split into its parts (one per
    root: `pmapgen.prefixes.search_part`) so that the parts of one long search share the
    cores: a raise of the energy proof is often one Einsum, and one process searching it
    left the other core idle (docs/pmapgen.md, "Searches split by root").

    Every part gets the Einsum's time limit, and none starts once the unsplit jobs would
    all have run out of theirs (`workers` Einsums at a time), nor after `deadline` (a
    `time.perf_counter()` value). Each part may hold the
    whole search's `max_rows` waiting rows: the cap is per process, as it is when
    `workers` unsplit searches run at once. (A share of it per part cut raises short
    whose rows sit mostly under one root, which the whole search held: twenty-eighth
    session.) The parts not started count as the Einsum's search cut short where one of
    its parts was, and as not started otherwise. `split(key)` picks the jobs to split
    (default: all); the others run whole among the parts. `kept`: `run_searches`'.

    `costs` ({key: per part, what an earlier search of it cost: `Stats.parts`}) starts each
    job's parts most costly first (a stable order; a job without costs, or with the wrong
    number, in part order); the jobs keep their order. In part order the energy proof's
    first raise at batch 1 started its longest part last and ran it alone for 2 s. Across
    the jobs, a long part cut short by the time limit kept the other jobs' parts from
    starting under `stop_when_incomplete`, which changed the batch-64 proof (docs/mapper.md,
    "Step 29" and "Step 30").

    `sub_parts(key)` > 1 splits each part of that job further, into that many sub-parts by
    compatibility group (`pmapgen.prefixes._Search.run`'s `sub`), merged back per part
    (`merge_subparts`): for the few long parts that would run alone on one core while the
    others idle (docs/pmapgen.md, "Sub-parts")."""
    n_workers = kept.workers if kept is not None else workers or max(1, os.cpu_count() or 1)
    parts, count, subs = [], {}, {}
    for e, job in jobs:
        if split is not None and not split(e):
            parts.append((e, job))
            continue
        count[e] = part_count(job.einsum, job.workload, job.arch, job.constraints)
        given = (costs or {}).get(e, ())
        ordered = sorted(range(count[e]), key=lambda i: -given[i]) if len(given) == count[e] else range(count[e])
        subs[e] = m = 1 if sub_parts is None else sub_parts(e)
        parts += [((e, i), job._replace(part=i)) for i in ordered] if m == 1 else \
            [((e, i, j), job._replace(part=i, sub=(j, m))) for i in ordered for j in range(m)]
    limit = jobs[0][1].time_limit if jobs else None
    if limit is not None:
        own = time.perf_counter() + limit * math.ceil(len(jobs) / n_workers)
        deadline = own if deadline is None else min(own, deadline)
    ran = run_searches(parts, workers, progress, desc, stop_when_incomplete, unit="part", deadline=deadline,
                       kept=kept)
    out = {}
    for e, args in jobs:
        if e not in count:
            if e in ran:
                out[e] = ran[e]
            continue
        got = [ran.get((e, i)) if subs[e] == 1 else
               merge_subparts(args, i, [ran.get((e, i, j)) for j in range(subs[e])]) for i in range(count[e])]
        cut = any(r is not None and not r[2].complete for r in got)
        if cut or all(r is not None for r in got):
            out[e] = merge_parts(args, got)
    return out


def merge_subparts(args: Job, part: int, got: list) -> tuple[pd.DataFrame, list[Template], Stats] | None:
    """Part `part`'s (table, templates, Stats) from its sub-parts' (`split_searches`), None
    for a sub-part not started (None if none started): `merge_parts` over the sub-parts
    (the part's floor bounds those not started), pruned together within each compatibility
    group (`pmapgen.generate.prune_table`: sub-parts own fused structures, and a
    compatibility group is a structure's up to the order of its loops, so the prune of one
    search holds)."""
    if all(r is None for r in got):
        return None
    table, templates, stats = merge_parts(args, got, lambda _: part_floor(args.einsum, args.workload, args.arch,
                                                                          args.constraints, part))
    if stats.complete:
        table = prune_table(table, args.objectives)
    return table, templates, replace(stats, kept=len(table), parts=())


def merge_parts(args: Job, got: list,
                floor: Callable[[int], float] | None = None) -> tuple[pd.DataFrame, list[Template], Stats]:
    """One Einsum's (table, templates, Stats) from its parts' (`_search`), None for a part
    not started: their tables one after the other, each `template` column shifted past the
    templates of the parts before it, and the columns in order of first appearance, as one
    `generate.result` over all the parts' rows gives them. Pruning across the parts would
    drop nothing: rows of two roots differ in a shared tensor's backing level, so they are
    never in one compatibility group (`search_part`). A part cut short or not started
    leaves the table empty and the Einsum incomplete, bounded below by the least of its
    parts' bounds (`floor(i)` for part i not started: its `part_floor` by default)."""
    einsum, workload, arch, constraints, objectives, budget = args.einsum, args.workload, args.arch, \
        args.constraints, args.objectives, args.budget
    begin = time.perf_counter()
    low, stopped_by, explored, evaluated, seconds, cut_floor = math.inf, "", 0, 0, 0.0, math.inf
    tables, templates = [], []
    for i, r in enumerate(got):
        if r is None:
            low = min(low, part_floor(einsum, workload, arch, constraints, i) if floor is None else floor(i))
            stopped_by = stopped_by or TIME_LIMIT
            continue
        table, part_templates, st = r
        low, stopped_by, cut_floor = min(low, st.lower_bound), stopped_by or st.stopped_by, min(cut_floor, st.cut_floor)
        explored, evaluated, seconds = explored + st.templates, evaluated + st.tile_shapes, seconds + st.seconds
        if part_templates and not st.stopped_by:  # (a part that kept no row gives `result`'s empty frame)
            tables.append(table.assign(template=table["template"] + len(templates)))
        templates += part_templates
    low = low if budget is None else min(low, budget)
    parts = tuple(0 if r is None else r[2].templates for r in got)
    if stopped_by or not tables:
        table, _, st = result(einsum, [], workload, arch, objectives, explored, evaluated, stopped_by, begin, low,
                              budget, constraints)
        return table, [] if stopped_by else templates, replace(st, seconds=seconds + st.seconds, parts=parts,
                                                                cut_floor=cut_floor)
    columns = list(dict.fromkeys(c for t in tables for c in t.columns))
    table = pd.concat([t for t in tables if len(t)] or tables[:1], ignore_index=True).reindex(columns=columns)
    return table, templates, Stats(explored, evaluated, len(table), True, seconds + time.perf_counter() - begin, low,
                                   budget, "", parts=parts, cut_floor=cut_floor)


def union(first: dict, *others: dict) -> dict[str, tuple[pd.DataFrame, list[Template], Stats]]:
    """Per Einsum, the rows of all `generate_all` results in one table (its `template`
    column re-indexed into the concatenated templates), so one join can pick from any;
    the first's Stats. Einsums missing from `others`, or with no rows there (perhaps no
    columns either: a keyed search with no key within its budgets), keep the first's
    result. One concat per Einsum: a refinement unites thousands of keyed searches, and
    doing it pairwise copies the growing table each time."""
    out = {}
    for e, (table, templates, stats) in first.items():
        parts, templates = [table], list(templates)
        for other in others:
            if e in other and len(other[e][0]):
                more, more_templates, _ = other[e]
                parts.append(more.assign(template=more["template"] + len(templates)))
                templates += more_templates
        out[e] = (table, templates, stats) if len(parts) == 1 else \
            (pd.concat(parts, ignore_index=True), templates, stats)
    return out
