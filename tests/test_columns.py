"""`pmapgen.columns.full` against `np.broadcast_to`, whose view it builds faster."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from pmapgen.columns import full


@given(st.integers(0, 50), st.sampled_from([np.int64, np.uint16, np.float64, np.float32, np.bool_]),
       st.sampled_from(["scalar", "0-d", "one", "n", "zero-stride n", "zero-stride one"]))
def test_full_is_broadcast_to(n, dtype, form):
    base = (np.arange(max(n, 1)) * 3 + 1).astype(dtype)
    v = {"scalar": base[0].item(), "0-d": np.array(base[0]), "one": base[:1], "n": base[:n],
         "zero-stride n": np.broadcast_to(base[:1], (n,)), "zero-stride one": np.broadcast_to(base[:1], (1,))}[form]
    out, want = full(v, n), np.broadcast_to(v, n)
    assert out.shape == (n,) and np.array_equal(out, want) and out.dtype == want.dtype
    if isinstance(v, np.ndarray) and v.shape == (n,):
        assert out is v  # already n values: no view built
    else:
        assert not out.flags.writeable and out.strides == (0,)


def test_full_refuses_what_broadcast_to_refuses():
    for v, n in ((np.arange(5), 4), (np.broadcast_to(np.ones(1), (7,)), 3), (np.ones((2, 2)), 4)):
        with pytest.raises(ValueError):
            np.broadcast_to(v, n)
        with pytest.raises(ValueError):
            full(v, n)
