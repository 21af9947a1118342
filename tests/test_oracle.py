"""The brute-force oracle (`tests.oracle`) skips tensor chains no pmapping may hold; here,
the pmappings it yields are exactly those it yields when it builds every chain and lets
the validator judge each, so the skipping loses nothing the tests rely on."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.oracle import all_pmappings
from tests.test_pmapgen import SETTINGS, small_problems
from tests.test_search import _max_loops, problems


def check_same_pmappings(workload, arch, max_loops: int = 3) -> None:
    for einsum in workload.einsum_names:
        n = min(_max_loops(workload, einsum), max_loops)
        assert list(all_pmappings(workload, arch, einsum, n)) == \
            list(all_pmappings(workload, arch, einsum, n, every=True)), einsum


@settings(max_examples=6, **SETTINGS)
@given(problems(n_einsums=(2,), max_levels=2))
def test_the_oracle_skips_only_chains_the_validator_rejects(problem):
    check_same_pmappings(*problem)


@settings(max_examples=4, **SETTINGS)
@given(small_problems(max_levels=2))
def test_the_oracle_skips_only_chains_the_validator_rejects_with_fanouts(problem):
    check_same_pmappings(*problem, max_loops=2)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(problems(n_einsums=(2, 3), max_levels=3))
def test_the_oracle_skips_only_chains_the_validator_rejects_long(problem):
    check_same_pmappings(*problem)
