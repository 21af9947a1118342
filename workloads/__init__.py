"""Workloads: Einsum DAGs (DESIGN §3). `load(name_or_path_or_dict, **variables)`."""
from workloads.loader import available, load, parse_overrides
from workloads.model import Einsum, Tensor, TensorUse, Workload

__all__ = ["Einsum", "Tensor", "TensorUse", "Workload", "available", "load", "parse_overrides"]
