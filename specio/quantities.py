"""Numbers with units (`128 MiB`, `614 GB/s`, `1.05 GHz`, `7.03 pJ/bit`, `inf`).

Each quantity kind has one base unit: capacity in bits, bandwidth in bits/s, energy per
bit in pJ/bit, energy per op in pJ, frequency in Hz.
"""
from __future__ import annotations

import math
import re

from specio.errors import SpecError

_BYTE_PREFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_ENERGY = {"fJ": 1e-3, "pJ": 1.0, "nJ": 1e3, "uJ": 1e6}

UNITS: dict[str, dict[str, float]] = {
    # capacity -> bits ("values" is handled by the arch loader: it depends on the tensor)
    "capacity": {**{f"{p}B": f * 8 for p, f in _BYTE_PREFIX.items()},
                 **{f"{p}b": f for p, f in _BYTE_PREFIX.items()},
                 **{f"{p}bit": f for p, f in _BYTE_PREFIX.items()},
                 **{f"{p}bits": f for p, f in _BYTE_PREFIX.items()}},
    # bandwidth -> bits per second
    "bandwidth": {**{f"{p}B/s": f * 8 for p, f in _BYTE_PREFIX.items()},
                  **{f"{p}b/s": f for p, f in _BYTE_PREFIX.items()},
                  **{f"{p}bit/s": f for p, f in _BYTE_PREFIX.items()}},
    "energy_per_bit": {f"{e}/{b}": v / d for e, v in _ENERGY.items()
                       for b, d in (("bit", 1), ("b", 1), ("B", 8), ("byte", 8))},
    "energy": {**_ENERGY, **{f"{e}/op": v for e, v in _ENERGY.items()}},
    "frequency": {f"{p}Hz": f for p, f in _SI.items()},
}

_NUMBER = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")


def parse_quantity(value: object, kind: str, source: str, field: str,
                   default_unit: str | None = None, allow_inf: bool = True) -> float:
    """Parse `value` as a `kind` quantity; return it in the kind's base unit.

    A bare number takes `default_unit` (or the base unit). Raises SpecError naming
    source and field otherwise.
    """
    units = UNITS[kind]
    noun = kind.replace("_", " ")
    expected = f"{'an' if noun[0] in 'aeiou' else 'a'} {noun} such as " + {
        "capacity": "'512 KiB'", "bandwidth": "'614 GB/s'", "energy_per_bit": "'1.88 pJ/bit'",
        "energy": "'0.084 pJ'", "frequency": "'1.05 GHz'"}[kind]
    if isinstance(value, bool) or value is None:
        raise SpecError(source, field, f"expected {expected}, got {value!r}")
    if isinstance(value, (int, float)):
        number, unit = float(value), default_unit or ""
    else:
        text = str(value).strip()
        if text.lower() in ("inf", "infinity", "unlimited"):
            if not allow_inf:
                raise SpecError(source, field, f"expected a finite value, got {value!r}")
            return math.inf
        match = _NUMBER.match(text)
        if not match:
            raise SpecError(source, field, f"expected {expected}, got {value!r}")
        number, unit = float(match.group(1)), match.group(2) or default_unit or ""
    if unit == "" and default_unit is None:
        factor = 1.0
    elif unit in units:
        factor = units[unit]
    else:
        raise SpecError(source, field, f"unknown unit {unit!r} in {value!r}; expected {expected}")
    if number < 0 or (math.isinf(number) and not allow_inf):
        raise SpecError(source, field, f"expected a non-negative value, got {value!r}")
    return number * factor
