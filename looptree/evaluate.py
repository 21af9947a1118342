"""`python -m looptree.evaluate mapping.json [--check]`: re-evaluate an exported mapping.

Loads the workload and arch the export names (with its variables), validates the mapping,
and prints the report; `--check` also runs the reference interpreter on every Einsum whose
iteration space is small enough and says whether its counts agree with the model.
"""
from __future__ import annotations

import argparse
import sys
import types

import arch as arch_specs
import workloads
from looptree.evaluation import evaluate
from looptree.mapping_io import load_mapping
from looptree.render import report_text
from specio.cli import run

CHECK_LIMIT = 2_000_000


def check_against_interpreter(evaluation, workload, arch, limit: int = CHECK_LIMIT) -> list[str]:
    """One line per Einsum: agrees / differs (with the first difference) / skipped (too big)."""
    from looptree.interpreter import interpret
    from looptree.model import analyze
    lines = []
    for name in evaluation.mapping.order:
        p = evaluation.mapping[name]
        ops = workload.ops(name)
        if ops > limit:
            lines.append(f"  {name}: skipped ({ops:.3g} iteration points > {limit:.3g})")
            continue
        model = analyze(p, workload, arch).counts.nonzero()
        truth = interpret(p, workload, arch, max_points=limit).nonzero()
        diffs = [k for k in set(model) | set(truth) if model.get(k, 0) != truth.get(k, 0)]
        if diffs:
            k = sorted(diffs)[0]
            lines.append(f"  {name}: DIFFERS at {k[0]} {k[1]} {k[2]}: model {model.get(k, 0)}, "
                         f"interpreter {truth.get(k, 0)} ({len(diffs)} differences)")
        else:
            lines.append(f"  {name}: agrees ({len(model)} counts)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m looptree.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("mapping", help="a mapping exported by ffm.map --out (DESIGN §8 JSON)")
    parser.add_argument("--check", action="store_true", help="also run the reference interpreter")
    args = parser.parse_args(argv)

    def body() -> None:
        doc = load_mapping(args.mapping)
        workload = workloads.load(doc.workload, **doc.variables)
        arch = arch_specs.load(doc.arch)
        ev = evaluate(doc.mapping, workload, arch)
        print(report_text(ev, workload, arch, title=f"{workload.name} on {arch.name} ({args.mapping})"))
        if doc.totals:
            same = all(abs(float(doc.totals.get(k, v)) - v) <= 1e-9 * max(1.0, abs(v))
                       for k, v in (("energy_pJ", ev.energy_pJ), ("latency_s", ev.latency_s)))
            print(f"\nRecorded totals {'match' if same else 'DIFFER from'} this evaluation.")
        if args.check:
            print("\nModel vs reference interpreter:")
            print("\n".join(check_against_interpreter(ev, workload, arch)))

    return run(body)


class _CallableModule(types.ModuleType):
    """`looptree.evaluate` is both this CLI module (`python -m looptree.evaluate`) and the
    normative function `looptree.evaluate(mapping, workload, arch)`: importing the module
    replaces the package attribute, so the module forwards calls to the function."""

    def __call__(self, *args, **kwargs):
        return evaluate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
