"""Constraints on a pmapping mapspace: the hook the comparison mapspaces (TransFusion, FLAT,
...) are written in. The default constrains nothing beyond DESIGN §4."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Constraints:
    """Per-Einsum restrictions on pmapgen's enumeration.

    backing: tensor -> levels its backing storage may use (absent: any the arch allows).
    fusable_ranks: rank variables that may be fused loops (above a shared on-chip backing);
        None: any.
    loop_ranks: rank variables that may have temporal loops at all; None: any.
    spatial: (dim -> allowed rank variables); absent dim: any.
    loop_order: rank variables whose temporal loops, where several share a block (no
        storage node or spatial loop between them), must appear in this order, outer first.
    tiles: rank variable -> the tile sizes its loops may use.
    max_loops_per_rank: how many loops one rank variable may be split into.
    max_spatial_per_level: how many spatial loops one fanout level may use.
    key: the compatibility key every pmapping must have (a pmapgen table's `compat`
        value; `pmapgen.fixed_key`); None: any.
    tensor_keys: shared tensor -> the c_T every pmapping must give it (a part of `key`:
        (backing level, loops above it), as `looptree.validate.compatibility` gives it).
    tensor_key_sets: shared tensor -> the c_T a pmapping may give it (a sorted tuple: any of
        them; `ffm.slack.latency_slack_tables` gives a consumer its producers' c_T).
    key_budgets: a budgeted prefix search's energy budget per combination of c_T of chosen
        shared tensors (`pmapgen.key_budgets.KeyBudgets`): a partial pmapping is held to
        the largest budget of those it may still end at, less its output's penalty at its
        c_T if the budgets carry one (`OutputPenalty`); None: the search's one budget.
    latency_budget: seconds every pmapping kept takes at most (needs "latency" among the
        objectives: `check_latency_budget`). The prefix search drops a partial pmapping
        whose latency floor is above it (`pmapgen.latency_floor`); every generator drops
        the pmappings above it. None: no such limit.
    """
    backing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fusable_ranks: frozenset[str] | None = None
    loop_ranks: frozenset[str] | None = None
    spatial: dict[str, frozenset[str]] = field(default_factory=dict)
    loop_order: tuple[str, ...] = ()
    tiles: dict[str, frozenset[int]] = field(default_factory=dict)
    max_loops_per_rank: int = 8
    max_spatial_per_level: int = 8
    key: tuple | None = None
    tensor_keys: dict[str, tuple] = field(default_factory=dict)
    tensor_key_sets: dict[str, tuple] = field(default_factory=dict)
    key_budgets: "KeyBudgets | None" = None
    latency_budget: float | None = None

    def backing_allowed(self, tensor: str, level: str) -> bool:
        return tensor not in self.backing or level in self.backing[tensor]

    def loop_allowed(self, rank: str, fused: bool) -> bool:
        if self.loop_ranks is not None and rank not in self.loop_ranks:
            return False
        return not fused or self.fusable_ranks is None or rank in self.fusable_ranks

    def order_allowed(self, block: tuple[str, ...], rank: str) -> bool:
        """May a loop over `rank` follow the loops `block` of the same block?"""
        if rank not in self.loop_order:
            return True
        k = self.loop_order.index(rank)
        return all(self.loop_order.index(b) <= k for b in block if b in self.loop_order)

    def spatial_allowed(self, rank: str, dim: str) -> bool:
        return dim not in self.spatial or rank in self.spatial[dim]


def with_latency(objectives, *constraints: "Constraints | None") -> tuple[str, ...]:
    """`objectives`, with latency added when any of `constraints` holds a latency budget:
    what a search for the least energy within latency budgets (`ffm.latency_proof`'s
    energy proof at the latency floors) compares, so that `check_latency_budget` holds."""
    bounded = any(c is not None and c.latency_budget is not None for c in constraints)
    return tuple(objectives) + (("latency",) if bounded and "latency" not in objectives else ())


def check_latency_budget(constraints: Constraints, objectives) -> None:
    """A latency budget prunes by latency, so latency must be a criterion: with energy alone,
    a row over the budget could dominate, and so drop, one within it."""
    if constraints.latency_budget is not None and "latency" not in objectives:
        raise ValueError(f"Constraints.latency_budget needs 'latency' among the objectives, got {tuple(objectives)}")
