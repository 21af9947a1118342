"""The main process's turn: one thread at a time runs its Python, and a thread waiting on
worker processes gives the turn away.

The energy proof refines several terms at once (`ffm.budgets`, docs/mapper.md "Step 28"):
each refinement runs in a thread, and while one waits for its keyed searches another
joins its rests or hands its own searches to the idle worker. The turn keeps everything
those threads share in this process (the joins' and tables' caches, `searched`) touched
by one of them at a time, so none of that code needs to be thread-safe; the Python they
run is serialized by the interpreter anyway, so the turn costs no parallelism. Code that
never takes the turn (a single thread) runs as before: giving away a turn one does not
hold does nothing.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")


class Turn:
    """A lock that knows whether the current thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._given = threading.Condition()
        self._count = 0  # how many times a thread gave the turn up (`let`)

    def held(self) -> bool:
        return getattr(self._local, "held", False)

    def _give(self) -> None:
        self._local.held = False
        self._lock.release()
        with self._given:
            self._count += 1
            self._given.notify_all()

    def _get(self) -> None:
        self._lock.acquire()
        self._local.held = True

    @contextmanager
    def take(self) -> Iterator[None]:
        """Hold the turn for the block (waiting for it first)."""
        self._get()
        try:
            yield
        finally:
            self._give()

    @contextmanager
    def away(self) -> Iterator[None]:
        """Let other threads have the turn for the block, if this thread holds it (a wait
        on workers or on another thread), and take it back after."""
        if not self.held():
            yield
            return
        self._give()
        try:
            yield
        finally:
            self._get()

    def given(self) -> int:
        """How many times a thread has given the turn up so far."""
        with self._given:
            return self._count

    def wait_given(self, since: int, timeout: float | None = None) -> bool:
        """Wait until the turn was given up more than `since` times in all (`given`);
        False if `timeout` seconds passed first."""
        with self._given:
            return self._given.wait_for(lambda: self._count > since, timeout=timeout)

    def let(self, start: Callable[[], T]) -> T:
        """`start()` (which starts a thread that takes the turn), then the turn given away
        until some other thread gives it up: the new thread runs until it waits on
        workers or ends, so they work while this thread goes on."""
        since = self.given()
        got = start()
        if self.held():
            self._local.held = False
            self._lock.release()
            self.wait_given(since)
            self._get()
        return got


TURN = Turn()
