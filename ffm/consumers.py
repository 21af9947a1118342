"""What an Einsum's output costs its readers, per c_T (issue 3's energy set: docs/pmapgen.md,
"Consumers' bounds").

A keyed budget β_e(c) (`ffm.slack.slack_tables`) counts every Einsum not yet searched at its
minimum m_f. But a reader f of e's output gives that tensor the c_T d that e gives it (DESIGN
§6), so in a mapping where e's output is at d, f costs at least L_f(d), its least energy
among its pmappings at d, and e's pmapping costs at most β_e(c) - (L_f(d) - m_f).

L_f comes from a table of f complete within a budget b_f (the rising search that found m_f:
every pmapping of f within b_f is dominated by a row of its compatibility group, whose key
holds its c_T): at a c_T where the table's least is x, L_f(d) >= min(x, b_f); at a c_T where
it has no row, L_f(d) >= b_f. Readers are counted only where β counts them at their minimum:
not yet searched (the rest R_e(c) joins the searched ones), and not e's siblings (whose term
`ffm.slack.sibling_betas` takes already). Several readers add up.
"""
from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from pmapgen.generate import held_within
from pmapgen.key_budgets import OutputPenalty
from workloads.model import Workload


def least_by_ct(table: pd.DataFrame, tensor: str) -> dict[tuple, float]:
    """{c_T of `tensor`: the table's least energy among its rows giving it that c_T}."""
    out: dict[tuple, float] = {}
    for key, energy in zip(table["compat"], table["energy"]):
        ct = dict(key[0]).get(tensor)
        if ct is not None:
            out[ct] = min(out.get(ct, math.inf), float(energy))
    return out


def readers(workload: Workload, einsum: str, counted: Iterable[str]) -> tuple[str, ...]:
    """The Einsums of `counted` besides `einsum` that read its output."""
    out = workload.einsum(einsum).output.tensor
    return tuple(f for f in counted if f != einsum and out in {u.tensor for u in workload.einsum(f).inputs})


def consumer_penalty(workload: Workload, einsum: str, counted: Iterable[str], minima: dict[str, float],
                     complete: dict[str, tuple[pd.DataFrame, float]]) -> OutputPenalty | None:
    """The least `einsum`'s readers among `counted` (those its budget counts at their
    `minima`) cost over those minima, per c_T of its output (module docstring), from the
    tables of `complete` ({Einsum: (table, budget it is complete within)}); None where no
    such reader has a table (no penalty), or the output is not shared."""
    out = workload.einsum(einsum).output.tensor
    fs = [f for f in readers(workload, einsum, counted) if f in complete]
    if not fs or not workload.is_shared(out):
        return None
    least = {f: least_by_ct(complete[f][0], out) for f in fs}
    gap = {f: max(0.0, complete[f][1] - minima[f]) for f in fs}

    def over(f: str, ct: tuple) -> float:
        return max(0.0, min(least[f].get(ct, math.inf), complete[f][1]) - minima[f])

    named = {ct: sum(over(f, ct) for f in fs) for ct in {ct for f in fs for ct in least[f]}}
    return OutputPenalty.of(out, named, sum(gap.values()))


def complete_within(results: dict) -> dict[str, tuple[pd.DataFrame, float]]:
    """{Einsum: (table, the energy it holds every pmapping's frontier within)} of the complete
    budgeted searches among `results` (`pmapgen.generate_all`-style: the rising searches
    that found the minima; `pmapgen.generate.held_within`): `consumer_penalty`'s tables."""
    out = {}
    for e, (table, _, stats) in results.items():
        within = held_within(stats)
        if stats.complete and within is not None:
            out[e] = (table, within)
    return out
