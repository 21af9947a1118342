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


def residency_box(p, workload, tensor: str, at: int) -> dict:
    """The extents, over the rank variables `tensor` lacks, that one fill of its node at
    position `at` serves: each one's per-instance extent there, times the temporal loops
    over it between the tensor's last indexing temporal loop above and the node (its
    reuse). docs/mapper.md, "Step 20"."""
    e = workload.einsum(p.einsum)
    extents, trailing = dict(workload.rank_sizes), {r: 1 for r in e.rank_variables}
    for node in p.nodes[:at]:
        if not hasattr(node, "rank_variable"):
            continue
        bound = extents[node.rank_variable] // node.tile
        extents[node.rank_variable] = node.tile
        if node.spatial is None:
            if e.indexes(node.rank_variable, tensor):
                trailing = {r: 1 for r in e.rank_variables}
            else:
                trailing[node.rank_variable] *= bound
    return {r: extents[r] * trailing[r] for r in e.rank_variables if not e.indexes(r, tensor)}


def check_boxes(problem) -> int:
    """Every non-backing node of an input writes ops / (its residency box's volume) values:
    the identity the nested-box tiling bound rests on (docs/mapper.md, "Step 20")."""
    workload, arch, pmapping = problem
    p = normalize(pmapping, workload)
    e = workload.einsum(p.einsum)
    truth = interpret(p, workload, arch)
    checked = 0
    for t in e.tensors:
        if e.is_output(t):
            continue
        nodes = [(i, n.level) for i, n in enumerate(p.nodes) if getattr(n, "tensors", ()) and t in n.tensors]
        for i, level in nodes[1:]:
            volume = 1
            for extent in residency_box(p, workload, t, i).values():
                volume *= extent
            assert truth.ops % volume == 0 and truth.writes[(level, t)] == truth.ops // volume, (t, level, p)
            checked += 1
    return checked


@settings(max_examples=150, **SETTINGS)
@given(problems(fanouts="always", reduced=True))
def test_an_input_s_node_writes_ops_over_its_residency_box(problem):
    check_boxes(problem)
