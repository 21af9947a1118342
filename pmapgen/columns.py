"""Columns of a search's rows held as one value: a read-only view with a zero stride, no
memory per row (`prefixes._compact`). `numpy.broadcast_to` builds the same view at about
2 us a call; a search makes millions of such calls on small batches (sixty-eighth session:
1.76 M at V's root 3 within its latency floor at batch 1), so they are built here directly."""
from __future__ import annotations

import numpy as np


def full(v, n: int) -> np.ndarray:
    """`v` (an array of `n` values, or one value) as `n` values: itself if it has them, else
    its value repeated by a zero-stride read-only view, as `np.broadcast_to(v, n)` gives."""
    if type(v) is np.ndarray and v.ndim == 1 and len(v) == n:
        return v
    if type(v) is not np.ndarray:
        v = np.asarray(v)
    if v.size != 1:
        raise ValueError(f"cannot hold {v.shape} values as {n}")
    out = np.ndarray((n,), v.dtype, v if v.ndim == 1 else v.reshape(1), 0, (0,))
    out.flags.writeable = False
    return out
