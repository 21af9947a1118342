"""`pmapgen.timeline`: the spans run_searches records, and the occupancy of a window by them."""
import time

import pytest

import arch
import workloads
from pmapgen import generate_all
from hypothesis import given, settings
from hypothesis import strategies as st

from pmapgen.timeline import Idle, Occupancy, idle, occupancy, recording


def test_occupancy_of_hand_drawn_spans():
    # 0..10 s: A runs 1-4, B 3-6, C 5-8; so none 0-1 and 8-10, one 1-3, 4-5 and 6-8, two 3-4 and 5-6
    spans = [("A", 1.0, 4.0), ("B", 3.0, 6.0), ("C", 5.0, 8.0)]
    assert occupancy(spans, 0.0, 10.0) == Occupancy(wall=10.0, busy=9.0, none=3.0, one=5.0, more=2.0)


def test_occupancy_clips_spans_to_the_window_and_counts_three_as_more():
    spans = [("A", -2.0, 3.0), ("B", 1.0, 12.0), ("C", 2.0, 4.0)]
    # window 0..10: A 0-3, B 1-10, C 2-4: one 0-1 and 4-10, two 1-2, three 2-3, two 3-4
    assert occupancy(spans, 0.0, 10.0) == Occupancy(wall=10.0, busy=3.0 + 9.0 + 2.0, none=0.0, one=7.0, more=3.0)
    assert occupancy([], 0.0, 2.5) == Occupancy(wall=2.5, busy=0.0, none=2.5, one=0.0, more=0.0)


def test_idle_stretches_of_hand_drawn_spans():
    spans = [("A", 1.0, 4.0), ("B", 3.0, 6.0), ("C", 5.0, 8.0)]
    assert idle(spans, 0.0, 10.0) == [Idle(0.0, 1.0, "A"), Idle(8.0, 10.0, None)]
    assert idle(spans, 0.0, 10.0, least=1.5) == [Idle(8.0, 10.0, None)]
    # B ends inside A: no stretch opens at 2; one opens when A ends at 5, until C
    nested = [("C", 6.0, 7.0), ("B", 1.0, 2.0), ("A", 0.0, 5.0)]
    assert idle(nested, 0.0, 10.0) == [Idle(5.0, 6.0, "C"), Idle(7.0, 10.0, None)]
    # clipped to the window: A's start before it, C after it
    assert idle([("A", -3.0, 2.0), ("C", 11.0, 12.0)], 0.0, 10.0) == [Idle(2.0, 10.0, None)]
    assert idle([], 1.0, 3.0) == [Idle(1.0, 3.0, None)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 25), st.integers(1, 8)), max_size=8))
def test_idle_stretches_add_up_to_the_time_no_span_ran(drawn):
    spans = [(i, float(a), float(a + n)) for i, (a, n) in enumerate(drawn)]
    stretches = idle(spans, 0.0, 20.0)
    assert sum(s.end - s.start for s in stretches) == pytest.approx(occupancy(spans, 0.0, 20.0).none)
    for s in stretches:  # no span runs inside a stretch, and the one named starts at its end
        assert all(b <= s.start or a >= s.end for _, a, b in spans)
        assert s.next is None and s.end == 20.0 or any(i == s.next and max(a, 0.0) == s.end for i, a, _ in spans)


@pytest.mark.parametrize("workers", [1, 2])
def test_every_search_run_searches_ends_is_recorded_inside_the_block(workers):
    w, a = workloads.load("matmul_chain", length=2, M=4, big=8, small=4), arch.load("simple")
    with recording() as timeline:
        start = time.perf_counter()
        with recording() as inner:
            found = generate_all(w, a, progress=False, workers=workers)
        end = time.perf_counter()
    generate_all(w, a, progress=False, workers=workers)  # (after the block: not recorded)
    assert len(timeline.spans) == len(found)
    assert sorted(label for label, _, _ in timeline.spans) == sorted(found)
    assert inner.spans == timeline.spans
    assert all(start <= s < e <= end for _, s, e in timeline.spans)
    o = occupancy(timeline.spans, start, end)
    assert o.busy == pytest.approx(sum(e - s for _, s, e in timeline.spans))
    assert o.none + o.one + o.more == pytest.approx(o.wall)
