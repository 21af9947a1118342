"""Where a mapper run's memory peaks: runs `python -m ffm.map ARGS` as it is run from the
command line, samples the resident memory (RSS) of its process tree every --every seconds
from /proc, and prints per phase (read from the progress bar's label: pmapgen, join,
descent, proof, ...) the peak of the main process, of the largest worker and of the tree.
The peak of the largest single process is what `/usr/bin/time -v` reports as maximum
resident set size; forked workers share most of their pages with the main process, so the
tree's sum overstates what the machine holds.

    python benchmarks/memory.py -- --workload gpt3 --arch tpuv4i --time-limit 20 --proof-time 10

Linux only (/proc)."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASE = re.compile(r"[A-Za-z]+")  # a progress bar label's first word: "descent 2: fuse FFA: 40%" -> "descent"


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _rss_mib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _phase(stderr: Path) -> str:
    """The first word of the last progress bar line the run wrote ("start" before the first)."""
    try:
        with stderr.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 600))
            tail = f.read().decode(errors="replace")
    except OSError:
        return "start"
    lines = [s for s in re.split(r"[\r\n]", tail) if s.strip()]
    m = PHASE.match(lines[-1].strip()) if lines else None
    return m.group(0) if m else "start"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the arguments of python -m ffm.map (after --)")
    a = p.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    with tempfile.TemporaryDirectory() as tmp:
        err, report = Path(tmp) / "stderr", Path(tmp) / "stdout"
        with err.open("wb") as sink, report.open("wb") as out_file:
            start = time.perf_counter()
            run = subprocess.Popen([sys.executable, "-m", "ffm.map", *args], stdout=out_file, stderr=sink)
            peaks: dict[str, list[int]] = {}  # phase -> [main, largest worker, tree]
            while run.poll() is None:
                main_rss = _rss_mib(run.pid)
                workers = [_rss_mib(c) for c in _children(run.pid)]
                phase = _phase(err)
                peak = peaks.setdefault(phase, [0, 0, 0])
                for i, v in enumerate((main_rss, max(workers, default=0), main_rss + sum(workers))):
                    peak[i] = max(peak[i], v)
                time.sleep(a.every)
            out = report.read_text(errors="replace")
            wall = time.perf_counter() - start
        if run.returncode:
            sys.exit(f"ffm.map exited {run.returncode}:\n{err.read_text(errors='replace')[-2000:]}{out}")
    totals = re.search(r"^Energy .*$", out, re.MULTILINE)  # the report's totals line
    print(f"python -m ffm.map {' '.join(args)}: {wall:.0f} s wall; {totals.group(0) if totals else ''}")
    print(f"{'phase':<12} {'main MiB':>9} {'worker MiB':>11} {'tree MiB':>9}")
    for phase, (m, wk, tree) in peaks.items():
        print(f"{phase:<12} {m:>9} {wk:>11} {tree:>9}")
    print(f"{'peak':<12} {max(v[0] for v in peaks.values()):>9} {max(v[1] for v in peaks.values()):>11} "
          f"{max(v[2] for v in peaks.values()):>9}")


if __name__ == "__main__":
    main()
