"""pmapgen: FFM's first phase, every Pareto-optimal single-Einsum pmapping as a table."""
from pmapgen.all_einsums import generate_all
from pmapgen.constraints import Constraints
from pmapgen.generate import Stats, generate, rebuild
from pmapgen.pareto import pareto_mask

__all__ = ["Constraints", "Stats", "generate", "generate_all", "pareto_mask", "rebuild"]
