"""Architectures: memory hierarchies with compute units (DESIGN §3). `load(name_or_path_or_dict)`."""
from arch.loader import available, load
from arch.model import KEEP_SELECTORS, Arch, ComputeUnit, FanoutDim, Memory

__all__ = ["KEEP_SELECTORS", "Arch", "ComputeUnit", "FanoutDim", "Memory", "available", "load"]
