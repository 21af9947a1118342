"""When searches ran: each job's span in its worker, recorded while a `Timeline` is active,
and how much of a stretch of wall time had none, one, or more of them running.

The energy set's wall time is the workers' search time over the cores plus what the main
process does between them (each keyed Einsum's rest, its key budgets) and the tails where
one job is left running: `occupancy` puts a number on each (benchmarks/pmapgen_speed.py
prints it). Spans are `time.perf_counter()` readings taken in the worker; on one machine
that clock is the same in every process (CLOCK_MONOTONIC on Linux)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Hashable, Iterator

_ACTIVE: list[Timeline] = []


@dataclass
class Timeline:
    """The spans (label, start, end) of the jobs that ended while it was active."""
    spans: list[tuple[Hashable, float, float]]

    def add(self, label: Hashable, start: float, end: float) -> None:
        self.spans.append((label, start, end))


@contextmanager
def recording() -> Iterator[Timeline]:
    """A `Timeline` that every job ending in this process's `run_searches` adds its span to
    until the block ends (nested blocks each get every span)."""
    timeline = Timeline([])
    _ACTIVE.append(timeline)
    try:
        yield timeline
    finally:
        _ACTIVE.remove(timeline)


def record(label: Hashable, start: float, end: float) -> None:
    """Note a job's span in every active `Timeline` (none active: nothing)."""
    for timeline in _ACTIVE:
        timeline.add(label, start, end)


@dataclass(frozen=True)
class Occupancy:
    """Over `wall` seconds: the jobs' summed seconds (`busy`), and the seconds during which
    no job ran (`none`), exactly one ran (`one`), and two or more ran (`more`)."""
    wall: float
    busy: float
    none: float
    one: float
    more: float


def occupancy(spans: list[tuple[Hashable, float, float]], start: float, end: float) -> Occupancy:
    """`Occupancy` of the window [start, end] by `spans` (each clipped to the window)."""
    events = []
    for _, a, b in spans:
        a, b = max(a, start), min(b, end)
        if b > a:
            events += [(a, 1), (b, -1)]
    events.sort()
    by_count = [0.0, 0.0, 0.0]  # seconds with 0, 1, 2 or more running
    running, last = 0, start
    for t, step in events:
        by_count[min(running, 2)] += t - last
        running, last = running + step, t
    by_count[min(running, 2)] += end - last
    busy = sum(min(b, end) - max(a, start) for _, a, b in spans if min(b, end) > max(a, start))
    return Occupancy(end - start, busy, *by_count)


@dataclass(frozen=True)
class Idle:
    """A stretch [start, end] with no job running, and the label of the job that started
    at its end (None: the window ended first)."""
    start: float
    end: float
    next: Hashable | None


def idle(spans: list[tuple[Hashable, float, float]], start: float, end: float, least: float = 0.0) -> list[Idle]:
    """The stretches of the window [start, end] of at least `least` seconds in which no span
    ran, in time order: where the main process held the run up (the energy set's rests and
    key budgets between Einsums)."""
    clipped = sorted((max(a, start), min(b, end), label) for label, a, b in spans if min(b, end) > max(a, start))
    out, reach = [], start  # reach: the latest end of the spans begun so far
    for a, b, label in clipped:
        if a - reach >= least and a > reach:
            out.append(Idle(reach, a, label))
        reach = max(reach, b)
    if end - reach >= least and end > reach:
        out.append(Idle(reach, end, None))
    return out
