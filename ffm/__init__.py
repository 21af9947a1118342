"""ffm: FFM's second phase and the product's entry point.

`ffm.map(workload, arch, objective=...)` runs pmapgen, the group / prune / join search
(`ffm.join`, `ffm.search`) and evaluates the chosen mapping; `python -m ffm.map` is its
command line. ε-pruning (FFM §6.3) is being added to the search.
"""
from ffm.capacity import NoValidMapping
from ffm.join import join
from ffm.mapper import MapResult, map

__all__ = ["MapResult", "NoValidMapping", "join", "map"]
