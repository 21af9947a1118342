"""What an Einsum's output costs its readers per c_T (`ffm.consumers`), by hand; the searches
held to it are checked in tests/test_key_budgets.py (against the exhaustive tables) and the
energy set in tests/test_slack.py."""
from __future__ import annotations

import math

import pandas as pd

import workloads
from ffm.consumers import consumer_penalty, readers
from pmapgen.key_budgets import OutputPenalty, least_penalty

W = workloads.load({"name": "readers", "rank_sizes": {"m": 2, "a": 2}, "bits": 8,
                    "einsums": ["X[m,a] = I[m,a]", "Y[m,a] = X[m,a]", "Z[m,a] = X[m,a]", "U[m,a] = Y[m,a] * Z[m,a]"]})
D1, D2, D3 = ("GlobalBuffer", ()), ("GlobalBuffer", ((0, 1, None),)), ("DRAM", ())


def table(tensor: str, rows: list[tuple[tuple, float]]) -> pd.DataFrame:
    return pd.DataFrame({"compat": [(((tensor, ct),), ()) for ct, _ in rows], "energy": [x for _, x in rows]})


def test_a_reader_costs_its_least_at_the_c_t_capped_at_its_budget_and_its_budget_where_it_has_no_row():
    """Y (minimum 10, complete within 18) has rows at D1 (12 and 15) and D2 (20, above its
    budget, so only 18 is proven there); Z (minimum 5, within 6) a row at D1 (5). X's
    penalty adds them: D1 2 + 0, D2 8 + 1, any other c_T 8 + 1. Readers not counted (Z),
    or without a table, add nothing; an output no one reads has none."""
    minima = {"Y": 10.0, "Z": 5.0}
    complete = {"Y": (table("X", [(D1, 15.0), (D1, 12.0), (D2, 20.0)]), 18.0), "Z": (table("X", [(D1, 5.0)]), 6.0)}
    assert readers(W, "X", W.einsum_names) == ("Y", "Z")
    both = consumer_penalty(W, "X", ("Y", "Z", "U"), minima, complete)
    assert both.tensor == "X" and both.default == 9.0
    assert (both.at(D1), both.at(D2), both.at(D3)) == (2.0, 9.0, 9.0)
    only_y = consumer_penalty(W, "X", ("Y", "U"), minima, complete)
    assert (only_y.at(D1), only_y.at(D2), only_y.at(D3)) == (2.0, 8.0, 8.0)
    assert consumer_penalty(W, "X", ("U",), minima, complete) is None
    assert consumer_penalty(W, "X", ("Y", "Z"), minima, {}) is None
    assert consumer_penalty(W, "U", W.einsum_names, {"U": 1.0}, {"U": (table("U", []), 2.0)}) is None


def test_a_table_complete_without_budget_proves_no_mapping_at_a_c_t_it_lacks():
    """A reader's table complete within no budget (inf): where it has no row, no pmapping of
    it gives that c_T, so the producer's rows there are cut (an infinite penalty)."""
    got = consumer_penalty(W, "X", ("Y",), {"Y": 10.0}, {"Y": (table("X", [(D1, 11.0)]), math.inf)})
    assert got.at(D1) == 1.0 and got.at(D2) == math.inf


def test_the_least_of_penalties_is_pointwise_and_covers_each():
    """Siblings sharing a search hold its rows to the least of their penalties, which covers
    (keeps at least the rows of) each; a search with no penalty is the least of all."""
    a = OutputPenalty.of("Y", {D1: 1.0, D2: 4.0}, 5.0)
    b = OutputPenalty.of("Z", {D1: 3.0, D3: 2.0}, 6.0)
    least = least_penalty([a, b], "Y")
    assert (least.at(D1), least.at(D2), least.at(D3), least.default) == (1.0, 4.0, 2.0, 5.0)
    assert least.covers(a) and least.covers(b) and not a.covers(b) and not b.covers(a)
    assert least_penalty([a, None], "Y") is None and not a.covers(None)
