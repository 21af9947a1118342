"""`pmapgen.timeline`: the spans run_searches records, and the occupancy of a window by them."""
import time

import pytest

import arch
import workloads
from pmapgen import generate_all
from pmapgen.timeline import Occupancy, occupancy, recording


def test_occupancy_of_hand_drawn_spans():
    # 0..10 s: A runs 1-4, B 3-6, C 5-8; so none 0-1 and 8-10, one 1-3, 4-5 and 6-8, two 3-4 and 5-6
    spans = [("A", 1.0, 4.0), ("B", 3.0, 6.0), ("C", 5.0, 8.0)]
    assert occupancy(spans, 0.0, 10.0) == Occupancy(wall=10.0, busy=9.0, none=3.0, one=5.0, more=2.0)


def test_occupancy_clips_spans_to_the_window_and_counts_three_as_more():
    spans = [("A", -2.0, 3.0), ("B", 1.0, 12.0), ("C", 2.0, 4.0)]
    # window 0..10: A 0-3, B 1-10, C 2-4: one 0-1 and 4-10, two 1-2, three 2-3, two 3-4
    assert occupancy(spans, 0.0, 10.0) == Occupancy(wall=10.0, busy=3.0 + 9.0 + 2.0, none=0.0, one=7.0, more=3.0)
    assert occupancy([], 0.0, 2.5) == Occupancy(wall=2.5, busy=0.0, none=2.5, one=0.0, more=0.0)


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
