"""ffm: FFM's second phase, group / prune / join of pmappings into full fused mappings.

Status: the exact join (`ffm.join.join`) is in place and checked against brute force;
the ε-pruned two-pass search, `ffm.map` and its command line are not yet (issue 4).
"""
from ffm.join import join

__all__ = ["join"]
