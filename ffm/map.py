"""`python -m ffm.map --workload gpt3 --arch tpuv4i`: map a workload optimally and report it.

Prints the report (totals, what stays on chip, per-Einsum and per-level energy, the
LoopTree, mapper statistics); `--out` writes the DESIGN §8 export. Bad input is one line
`file: field: expected ...` on stderr and exit status 2; no valid mapping is one line naming
the capacity each level would need, exit status 1.
"""
from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

from ffm.capacity import NoValidMapping, NothingFoundInTime
from ffm.latency_proof import LATENCY_SET_TIME
from ffm.mapper import map as map_workload
from ffm.report import result_text
from looptree.mapping_io import save_json
from pmapgen.allocator import MAIN_THRESHOLD, mmap_threshold
from specio import SpecError
from specio.cli import run
from workloads import parse_overrides


DEFAULT_TIME_LIMIT = 60.0
DEFAULT_PROOF_TIME = 30.0


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (exit 2), like every other input error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m ffm.map", description=__doc__.splitlines()[0])
    p.add_argument("--workload", required=True, help="shipped name (gpt3, matmul_chain, ...) or YAML path")
    p.add_argument("--arch", required=True, help="shipped name (tpuv4i, simple, ...) or YAML path")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="override workload variables, e.g. --set seq_len=65536 batch=1")
    p.add_argument("--objective", default="energy", help="energy (default), latency, edp or pareto")
    p.add_argument("--mapspace", default="ffm", help="ffm (default: the full mapspace)")
    p.add_argument("--out", help="write the mapping export (JSON, DESIGN §8) here")
    p.add_argument("--force", action="store_true", help="let --out overwrite an existing file")
    p.add_argument("--time-limit", type=_seconds, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                   help=f"pmapgen seconds per Einsum before it stops early and the result is flagged as not "
                        f"provably optimal (default {DEFAULT_TIME_LIMIT:g}; 0: no limit, exhaustive, no proof); "
                        f"for energy, pmapgen runs only if the energy proof does not complete")
    p.add_argument("--proof-time", type=_seconds, default=DEFAULT_PROOF_TIME, metavar="SECONDS",
                   help=f"with a time limit, for every objective: seconds per Einsum and step for "
                        f"the energy proof, which runs first and makes the least-energy result (energy: the "
                        f"result; pareto: the frontier's lowest-energy point) provably optimal where it completes "
                        f"(default {DEFAULT_PROOF_TIME:g}; 0: no proof)")
    p.add_argument("--latency-set", type=_seconds, default=LATENCY_SET_TIME, metavar="SECONDS",
                   help=f"latency with a time limit and --no-floors-proof: wall seconds for the latency set at "
                        f"the latency bound, run first; when its tables join to a mapping at the bound the result "
                        f"is proven optimal and nothing else runs (default {LATENCY_SET_TIME:g}; 0: not run)")
    p.add_argument("--no-floors-proof", action="store_true",
                   help="latency, edp and pareto with a time limit: skip the energy proof with every Einsum held "
                        "to its latency floor, which runs first and, where it finds a mapping at the latency "
                        "bound, gives the least-energy latency optimum (latency: the result; pareto: the "
                        "frontier's least-latency point)")
    p.add_argument("--no-pareto-proof", action="store_true",
                   help="pareto with a time limit: skip the pareto proof, which, once the floors proof and the "
                        "energy proof completed, proves the frontier exact from complete tables over the boxes "
                        "no known mapping dominates (then pmapgen does not run)")
    p.add_argument("--no-descent", action="store_true",
                   help="every objective, when pmapgen was cut short and the proof did not complete: skip the "
                        "coordinate descent that searches each Einsum again within its compatibility group, and "
                        "its fusion moves (faster, usually a worse mapping)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def _check_out(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise SpecError(str(path), None, "already exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise SpecError(str(path), None, f"directory {path.parent} does not exist")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    mmap_threshold(MAIN_THRESHOLD)  # what the joins free goes back to the system (pmapgen.allocator)

    def body() -> None:
        variables = parse_overrides(args.set)
        if args.out:  # checked before what may be minutes of mapping; save_json checks again
            _check_out(Path(args.out), args.force)
        result = map_workload(args.workload, args.arch, objective=args.objective, mapspace=args.mapspace,
                              variables=variables, progress=not args.no_progress,
                              time_limit=args.time_limit or None, prove=args.proof_time > 0,
                              proof_time_limit=args.proof_time, descent=not args.no_descent,
                              latency_set_time=args.latency_set, floors_proof=not args.no_floors_proof,
                              pareto_proof=not args.no_pareto_proof)
        if args.out:  # before printing: a closed pipe (| head) must not lose the export
            save_json(result.export(), args.out, force=args.force)
        print(result_text(result) + (f"\n\nWrote {args.out}" if args.out else ""))

    return run(body, statuses=((NoValidMapping, 1), (NothingFoundInTime, 1)))


class _CallableModule(types.ModuleType):
    """`ffm.map` is both this CLI module (`python -m ffm.map`) and the function
    `ffm.map(workload, arch, ...)`: importing the module replaces the package attribute, so
    the module forwards calls to the function."""

    def __call__(self, *args, **kwargs):
        return map_workload(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
