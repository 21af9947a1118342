"""The main process's turn (`pmapgen.turn`): one thread at a time holds it, a thread gives
it away only for a wait, and a thread started with `let` runs until it first gives it up."""
from __future__ import annotations

import threading

from pmapgen.turn import Turn


def test_away_without_the_turn_does_nothing_and_with_it_lets_another_thread_in():
    turn, order = Turn(), []
    with turn.away():  # not held: nothing to give, nothing to wait for
        order.append("not held")
    assert not turn.held()

    def other():
        with turn.take():
            order.append("other")
    with turn.take():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=0.2)
        assert thread.is_alive()  # it waits for the turn this thread holds
        with turn.away():
            thread.join(timeout=30)
        assert turn.held() and not thread.is_alive()
    assert order == ["not held", "other"]


def test_let_runs_the_new_thread_until_it_gives_the_turn_up():
    turn, order = Turn(), []
    release = threading.Event()

    def worker():
        with turn.take():
            order.append("worker starts")
            with turn.away():  # as a wait on worker processes
                assert release.wait(timeout=30)
            order.append("worker ends")

    with turn.take():
        thread = turn.let(lambda: _started(worker))
        order.append("main goes on")  # only once the worker gave the turn up
        release.set()
        with turn.away():
            thread.join(timeout=30)
    assert order == ["worker starts", "main goes on", "worker ends"]


def _started(target) -> threading.Thread:
    thread = threading.Thread(target=target)
    thread.start()
    return thread
