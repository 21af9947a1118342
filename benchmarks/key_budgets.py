"""A keyed backing group's search within its largest β against the same search holding
each key to its own β (`pmapgen.key_budgets`), side by side on gpt3 / tpuv4i.

    python benchmarks/key_budgets.py [--bound-mj 125.64] [--einsums V QK AV] [--groups 2]

It finds every Einsum's minimum, runs `ffm.slack.slack_tables` within U = --bound-mj
(batch 1 / 2048 tokens) to get each keyed Einsum's keys and their β, then, for the
--groups backing groups with the most keys of each Einsum named, searches the group whole
in this process both ways. It prints both times and prefixes and whether the rows within
their keys' β are the same (`ffm.refine.within_betas`). Ratios are what to compare: this
machine is noisy.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import arch as arch_specs
import workloads
from ffm.refine import backing_group, within_betas
from ffm.slack import slack_tables
from pmapgen import Constraints, generate_all
from pmapgen.key_budgets import KeyBudgets
from pmapgen.prefixes import generate_by_prefixes
from split import rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bound-mj", type=float, default=125.64, help="U: a mapping's energy, mJ")
    parser.add_argument("--einsums", nargs="*", default=["V", "QK", "AV"])
    parser.add_argument("--groups", type=int, default=2, help="backing groups per Einsum, most keys first")
    args = parser.parse_args()
    w, a = workloads.load("gpt3", batch=1, seq_len=2048), arch_specs.load("tpuv4i")
    found = generate_all(w, a, objectives=("energy",), budgets={e: math.inf for e in w.einsum_names}, rising=True,
                         progress=False, time_limit=300)
    minima = {e: float(r[0]["energy"].min()) for e, r in found.items()}
    keyed = slack_tables(w, a, args.bound_mj * 1e9, minima, time_limit=300, progress=False)
    print(f"gpt3 batch 1 on tpuv4i, U = {args.bound_mj} mJ; one backing group's search, whole in this process")
    print(f"{'Einsum':<7}{'group':<50}{'keys':>7}{'one β s':>9}{'prefixes':>10}{'own β s':>9}{'prefixes':>10}  same")
    for e in args.einsums:
        betas = keyed.betas.get(e)
        if not betas:
            print(f"{e:<7}not keyed (its uniform table completed in the probe)")
            continue
        by_group: dict = {}
        for k in betas:
            by_group.setdefault(backing_group(k), []).append(k)
        for group, members in sorted(by_group.items(), key=lambda g: -len(g[1]))[:args.groups]:
            own = {k: betas[k] for k in members}
            plain = Constraints(backing={t: (ct[0],) for t, ct in group})
            out = []
            for c in (plain, replace(plain, key_budgets=KeyBudgets.of(own))):
                start = time.perf_counter()
                table, _, stats = generate_by_prefixes(e, w, a, c, ("energy",), None, max(own.values()))
                out.append((time.perf_counter() - start, stats.templates, table[within_betas(table, own)]))
            same = rows(out[0][2]).equals(rows(out[1][2]))
            name = ", ".join(f"{t} {ct[0]}" for t, ct in group)
            print(f"{e:<7}{name:<50}{len(members):>7}{out[0][0]:>9.2f}{out[0][1]:>10}{out[1][0]:>9.2f}{out[1][1]:>10}"
                  f"  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
