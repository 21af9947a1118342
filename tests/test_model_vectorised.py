"""The model evaluates arrays of tile shapes at once, equal to evaluating each one."""
import numpy as np
from hypothesis import HealthCheck, given, settings

from looptree.model import analyze, cost
from looptree.nodes import Loop, Pmapping
from looptree.validate import normalize
from tests.strategies import problems


def _with_tiles(p: Pmapping, tiles: list) -> Pmapping:
    it = iter(tiles)
    return Pmapping(p.einsum, tuple(Loop(n.rank_variable, next(it), n.spatial) if isinstance(n, Loop) else n
                                    for n in p.nodes))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(problems())
def test_array_tiles_equal_scalar_evaluation(problem):
    w, a, p = problem
    p = normalize(p, w)
    # a second tile shape for the same loop structure: halve tiles where that keeps bounds >= 2
    scalar = [lp.tile for lp in p.loops]
    alt = [t // 2 if t % 2 == 0 and t > 1 else t for t in scalar]
    try:
        alt_p = normalize(_with_tiles(p, alt), w)
    except Exception:
        return
    if len(alt_p.loops) != len(p.loops):
        return
    arrays = _with_tiles(p, [np.array([s, t]) for s, t in zip(scalar, alt)])
    vec = analyze(arrays, w, a)
    vcost = cost(vec, w, a)
    for k, single in enumerate((p, alt_p)):
        one = analyze(single, w, a)
        ocost = cost(one, w, a)
        for table, vtable in ((one.counts.reads, vec.counts.reads), (one.counts.writes, vec.counts.writes)):
            for key, n in table.items():
                assert np.broadcast_to(vtable[key], 2)[k] == n
        assert np.isclose(np.broadcast_to(vcost.energy_pJ, 2)[k], ocost.energy_pJ)
        assert np.isclose(np.broadcast_to(vcost.latency_s, 2)[k], ocost.latency_s)
