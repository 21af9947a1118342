"""A size limit (`pmapgen.prefixes.size`: keys reached and rows built, a count and not a
time) cuts a prefix search at the same key on every machine: the first key before which
the unlimited search's size is past the limit. So does a limit on the keys waiting at
once (`_Search.run`'s `max_waiting`). A search the limits do not cut keeps what the
unlimited search keeps. (`ffm.slack.slack_tables`' probe is such a pair of limits: its
callers are checked in tests/test_slack.py.)"""
from hypothesis import assume, given, settings
from hypothesis import strategies as st
import pandas as pd
import pytest

from pmapgen import Constraints
from pmapgen.generate import SIZE_LIMIT, WAITING_LIMIT
from pmapgen.prefixes import _Search, generate_by_prefixes, size
from tests.test_search import SETTINGS, problems


def size_before_each_key(einsum: str, workload, arch) -> list[tuple[int, int]]:
    """The unlimited search's size and keys waiting just before it processes each key, in order."""
    search = _Search(einsum, workload, arch, arch.computes_for(workload.einsum(einsum))[0].name, Constraints(),
                     ("energy",))
    before, process = [], search._process

    def counted(key):
        before.append((size(search.stats), len(search.incoming)))
        process(key)

    search._process = counted
    assert search.run(None) == ""
    assert search.stats.reached == search.stats.prefixes  # every key reached was processed: `size` only grows to it
    return before


@settings(max_examples=12, **SETTINGS)
@given(problems(max_levels=2), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_size_limit_cuts_a_search_where_its_size_passes_the_limit(problem, which, limit, waiting):
    check_size_limit(*problem, which, limit, waiting)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_size_limit_cuts_a_search_where_its_size_passes_the_limit_long(problem, which, limit, waiting):
    check_size_limit(*problem, which, limit, waiting)


def check_size_limit(workload, arch, which: int, limit: int, waiting: int) -> None:
    """Einsum `which` (modulo their count) searched with a size limit drawn from `limit`,
    and a limit on the keys waiting drawn from `waiting` (none for an even draw)."""
    e = workload.einsum_names[which % len(workload.einsum_names)]
    assume(len(arch.computes_for(workload.einsum(e))) == 1)
    before = size_before_each_key(e, workload, arch)
    m = limit % (max((b for b, _ in before), default=0) + 2)
    k = None if waiting % 2 == 0 else waiting // 2 % (max((n for _, n in before), default=0) + 2)
    processed = next((i for i, (b, n) in enumerate(before) if b > m or k is not None and n > k), len(before))
    table, _, stats = generate_by_prefixes(e, workload, arch, objectives=("energy",), max_size=m, max_waiting=k)
    assert stats.templates == processed
    if processed < len(before):
        assert not stats.complete and table.empty
        assert stats.stopped_by == (SIZE_LIMIT if before[processed][0] > m else WAITING_LIMIT)
    else:
        assert stats.complete
        full, _, _ = generate_by_prefixes(e, workload, arch, objectives=("energy",))
        pd.testing.assert_frame_equal(table, full)
