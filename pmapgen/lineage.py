"""Where a prefix search's kept rows lead (`pmapgen.prefixes._Search.records`: each
processed prefix's kept rows, with their parent record and row): which lead to a done row
within a latency or energy threshold, and how many kept rows lie below each.
benchmarks/latency_waste.py reads a search within a latency floor with them, and
benchmarks/headroom.py a search within an energy budget: the rows that lead nowhere are
what a tighter floor would cut, or what dominance drops later."""
from __future__ import annotations

import numpy as np


def parents(search, rid: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of record `rid`: its parent's record (-1: a root's) and row."""
    rec = search.records[rid]
    batch = np.array([-1 if p is None else p for p, _ in rec.batches], dtype=np.int64)
    return batch[rec.batch], rec.parent


def leading(search, threshold: float, column: str = "latency") -> list[np.ndarray]:
    """Per record, which rows have a done row (one its key's final prune kept) whose
    `column` ("latency" or "energy") is at most `threshold` below them: with "energy" and
    the search's budget, what an exact floor would have kept (`benchmarks/headroom.py`
    compares it with what the search kept). Records follow their parents, so one pass from
    the last marks every ancestor."""
    marks = [np.zeros(len(rec.batch), dtype=bool) for rec in search.records]
    for _, rid, final in search.done:
        marks[rid][np.asarray(final["row"])[np.asarray(final[column]) <= threshold]] = True
    for rid in range(len(search.records) - 1, -1, -1):
        rec, mark = search.records[rid], marks[rid]
        if rec.batches[0][0] is None or not mark.any():
            continue
        for b in np.unique(rec.batch[mark]):
            marks[rec.batches[b][0]][rec.parent[mark & (rec.batch == b)]] = True
    return marks


def subtree_sizes(search) -> dict[int, np.ndarray]:
    """Per record, each row's kept descendants, itself included."""
    size = {rid: np.ones(len(rec.batch), dtype=np.int64) for rid, rec in enumerate(search.records)}
    for rid in range(len(search.records) - 1, -1, -1):
        parent, row = parents(search, rid)
        for p in np.unique(parent):
            if p >= 0:
                np.add.at(size[int(p)], row[parent == p], size[rid][parent == p])
    return size
