"""The analytical model's counts equal the reference interpreter's, exactly, on random
small Einsums (1-3 inputs, 2-4 rank variables, sizes up to 8), random archs (2-4 levels,
fanouts up to 4, multicast and reduction on or off) and random legal pmappings."""
import pytest
from hypothesis import HealthCheck, given, settings

from looptree.interpreter import interpret
from looptree.model import analyze
from looptree.validate import normalize, validate_pmapping
from tests.strategies import problems

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(problem):
    workload, arch, pmapping = problem
    pmapping = normalize(pmapping, workload)
    validate_pmapping(pmapping, workload, arch)  # the generator only draws legal pmappings
    model = analyze(pmapping, workload, arch).counts
    truth = interpret(pmapping, workload, arch)
    assert model.ops == truth.ops
    assert model.nonzero() == truth.nonzero()


@settings(max_examples=150, **SETTINGS)
@given(problems())
def test_model_equals_interpreter(problem):
    check(problem)


@settings(max_examples=150, **SETTINGS)
@given(problems(fanouts="always", reduced=True))
def test_model_equals_interpreter_spatial_and_partial_sums(problem):
    check(problem)


@pytest.mark.slow
@settings(max_examples=5000, **SETTINGS)
@given(problems())
def test_model_equals_interpreter_long(problem):
    check(problem)


@pytest.mark.slow
@settings(max_examples=5000, **SETTINGS)
@given(problems(fanouts="always", reduced=True))
def test_model_equals_interpreter_spatial_and_partial_sums_long(problem):
    check(problem)
