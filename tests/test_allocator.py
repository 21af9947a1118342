"""`pmapgen.allocator`: with the mmap threshold fixed, large arrays freed go back to the system
(with glibc's rising threshold the heap keeps them), checked in fresh interpreters; and
pmapgen's searches run in worker processes, whose memory leaves with them."""
import os
import subprocess
import sys

import pytest

import arch
import pmapgen.all_einsums as all_einsums
import workloads
from pmapgen import generate_all

# Free every other one of 32 arrays of 6 MiB, after a freed 24 MiB array raised glibc's
# threshold: from the heap (rising threshold) the 96 MiB of holes stay resident.
SCRIPT = """
import sys
from pathlib import Path
import numpy as np
from pmapgen.allocator import MAIN_THRESHOLD, mmap_threshold
def rss_mib():
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) >> 10
if sys.argv[1] == "fixed" and not mmap_threshold(MAIN_THRESHOLD):
    sys.exit(3)  # no glibc mallopt
raise_threshold = np.ones(24 << 17)
del raise_threshold
kept, holes = [], []
for i in range(32):
    (kept if i % 2 else holes).append(np.ones(6 << 17))
before = rss_mib()
holes.clear()
print(before - rss_mib())
"""


def _released_mib(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True)
    if run.returncode == 3:
        pytest.skip("no glibc mallopt")
    assert run.returncode == 0, run.stderr
    return int(run.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_fixed_threshold_returns_freed_large_arrays_to_the_system():
    assert _released_mib("rising") < 16  # the holes stay in the heap
    assert _released_mib("fixed") >= 90  # 16 arrays of 6 MiB unmapped


_record = {}  # where `_recording` leaves the pid of each process that ran a search


def _recording(args):
    (_record["dir"] / str(os.getpid())).touch()
    return _record["job"](args)


def test_a_single_einsum_is_searched_in_a_worker_unless_one_process_is_asked_for(monkeypatch, tmp_path):
    _record.update(dir=tmp_path, job=all_einsums._job)
    monkeypatch.setattr(all_einsums, "_job", _recording)  # forked workers inherit the patch
    w, a = workloads.load("matmul_chain", length=1, M=4, big=8, small=4), arch.load("simple")
    generate_all(w, a, progress=False)
    assert [int(f.name) for f in tmp_path.iterdir()] != [os.getpid()]
    generate_all(w, a, progress=False, workers=1)
    assert str(os.getpid()) in {f.name for f in tmp_path.iterdir()}
