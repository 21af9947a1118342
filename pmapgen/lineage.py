"""Where a prefix search's kept rows lead (`pmapgen.prefixes._Search.records`: each
processed prefix's kept rows, with their parent record and row): which lead to a done row
within a latency threshold, and how many kept rows lie below each. benchmarks/latency_waste.py
reads a search within a latency floor with them: the rows that lead nowhere are what a
tighter floor would cut."""
from __future__ import annotations

import numpy as np


def parents(search, rid: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of record `rid`: its parent's record (-1: a root's) and row."""
    rec = search.records[rid]
    batch = np.array([-1 if p is None else p for p, _ in rec.batches], dtype=np.int64)
    return batch[rec.batch], rec.parent


def leading(search, threshold: float) -> dict[int, np.ndarray]:
    """Per record, which rows have a done row of latency at most `threshold` below them."""
    marked = {rid: np.zeros(len(rec.batch), dtype=bool) for rid, rec in enumerate(search.records)}
    for _, rid, final in search.done:
        marked[rid][np.asarray(final["row"])[final["latency"] <= threshold]] = True
    for rid in range(len(search.records) - 1, -1, -1):  # a parent's record comes before its children's
        rows = np.flatnonzero(marked[rid])
        if len(rows):
            parent, row = parents(search, rid)
            for p in np.unique(parent[rows]):
                if p >= 0:
                    marked[int(p)][row[rows][parent[rows] == p]] = True
    return marked


def subtree_sizes(search) -> dict[int, np.ndarray]:
    """Per record, each row's kept descendants, itself included."""
    size = {rid: np.ones(len(rec.batch), dtype=np.int64) for rid, rec in enumerate(search.records)}
    for rid in range(len(search.records) - 1, -1, -1):
        parent, row = parents(search, rid)
        for p in np.unique(parent):
            if p >= 0:
                np.add.at(size[int(p)], row[parent == p], size[rid][parent == p])
    return size
