"""Where the C allocator puts large arrays (glibc; a no-op elsewhere).

glibc's malloc serves a request above its mmap threshold with fresh pages that go back
to the system when freed, and smaller ones from its heaps, which keep what is freed for
reuse. The threshold starts at 128 KiB but rises to the size of each mapped block freed
(up to 32 MiB), so once the first large numpy temporaries are freed, arrays of up to
that size come from the heaps, which the many differently sized tables then leave
fragmented: the process keeps what it freed. That matters only in a process that lives
long: the mapper's main process, which joins and runs for the whole job. pmapgen's
searches run in workers that live for one `generate_all` call and leave nothing behind.

So the main process (`python -m ffm.map`) fixes the threshold at MAIN_THRESHOLD, and the
workers fix it at WORKER_THRESHOLD, where the rising threshold would end: mapping every
array costs a page fault per page touched, and pmapgen's searches evaluated 0.6 times
the tile shapes in the same time with every array above 128 KiB mapped (measured with
`benchmarks/pmapgen_speed.py`; docs/measurements.md, twentieth session)."""
from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc malloc.h)
MAIN_THRESHOLD = 128 << 10  # bytes: glibc's initial threshold, kept
WORKER_THRESHOLD = 32 << 20  # bytes: the most glibc's rising threshold reaches on 64-bit


def mmap_threshold(size: int) -> bool:
    """Fix this process's mmap threshold at `size` bytes: larger allocations are mapped,
    and unmapped when freed (forked workers inherit it). Whether the C library took it
    (False where there is no glibc `mallopt`)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, size) == 1
