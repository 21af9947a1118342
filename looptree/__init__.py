"""LoopTree: the data model of a (fused) mapping, its analytical cost model, and the
reference interpreter that defines access counts by execution."""
from looptree.evaluation import Evaluation, evaluate
from looptree.mapping_io import MappingDocument, export, load_mapping, save_json
from looptree.model import analyze, cost
from looptree.nodes import Compute, Loop, Mapping, Pmapping, Storage
from looptree.validate import MappingError, compatibility, normalize, validate_mapping, validate_pmapping

__all__ = ["Compute", "Evaluation", "Loop", "Mapping", "MappingDocument", "MappingError", "Pmapping",
           "Storage", "analyze", "compatibility", "cost", "evaluate", "export", "load_mapping",
           "normalize", "save_json", "validate_mapping", "validate_pmapping"]
