"""Reading spec files and reporting spec errors, shared by `arch` and `workloads`.

Every problem in a user's spec is raised as `SpecError`, whose one-line message names the
file, the field and what was expected; command-line entry points print that line and exit
with status 2 instead of showing a traceback.
"""
from specio.errors import SpecError
from specio.quantities import parse_quantity
from specio.reader import read_spec

__all__ = ["SpecError", "parse_quantity", "read_spec"]
