"""`pmapgen.lineage.leading` on energy: which kept partial rows lead to a done row within an energy limit
(`benchmarks/headroom.py` reads it, on a search run without the Pareto prune, as what an
exact floor would keep). Checked against a walk from each such done row up its parents,
one row at a time."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pmapgen.constraints import Constraints
from pmapgen.lineage import leading
from pmapgen.prefixes import BUDGET_RTOL, _Search
from tests.test_pmapgen import SETTINGS, small_problems


def walked(search: _Search, limit: float) -> set[tuple[int, int]]:
    """(record, row) of every ancestor of a done row within `limit`, and of those rows."""
    out: set = set()
    for _, rid, final in search.done:
        for row in np.flatnonzero(final["energy"] <= limit * (1 + BUDGET_RTOL)):
            r, i = rid, int(final["row"][row])
            while (r, i) not in out:
                out.add((r, i))
                rec = search.records[r]
                parent = rec.batches[int(rec.batch[i])][0]
                if parent is None:
                    break
                r, i = parent, int(rec.parent[i])
    return out


@settings(max_examples=10, **SETTINGS)
@given(small_problems(max_levels=2), st.floats(0.0, 1.0), st.booleans())
def test_leading_rows_are_the_ancestors_of_done_rows_within_the_limit(problem, where, budgeted):
    workload, arch = problem
    e = workload.einsum("Z")
    unit = arch.computes_for(e)[0].name
    search = _Search("Z", workload, arch, unit, Constraints(), ("energy",))
    search.run(None)
    energies = np.concatenate([f["energy"] for *_, f in search.done]) if search.done else np.zeros(0)
    if not len(energies):
        return
    limit = float(energies.min() + where * (energies.max() - energies.min()))
    if budgeted:  # as the benchmark runs it: the search itself within the limit
        search = _Search("Z", workload, arch, unit, Constraints(), ("energy",), limit)
        search.run(None)
    marks = leading(search, limit * (1 + BUDGET_RTOL), "energy")
    assert {(r, int(i)) for r, m in enumerate(marks) for i in np.flatnonzero(m)} == walked(search, limit)
    roots = [m for rec, m in zip(search.records, marks) if rec.batches[0][0] is None]
    assert any(m.any() for m in roots)  # the least done row is within the limit and leads back to a root
