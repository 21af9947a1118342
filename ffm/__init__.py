"""ffm: FFM's second phase and the product's entry point.

`ffm.map(workload, arch, objective=...)` runs pmapgen, the group / prune / join search
(`ffm.compatibility`, `ffm.reservations`, `ffm.join`, `ffm.search`) and evaluates the chosen mapping; `python -m ffm.map` is its
command line. The search runs an ε-pruned dirty pass, then an exact clean pass under
its bound (FFM §6.3, docs/search.md).
"""
from ffm.capacity import NoValidMapping
from ffm.join import join
from ffm.mapper import MapResult, map

__all__ = ["MapResult", "NoValidMapping", "join", "map"]
