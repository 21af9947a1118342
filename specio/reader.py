"""Resolve a spec given as a shipped name, a path or a dict, and read its YAML/JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specio.errors import SpecError


def read_spec(spec: str | Path | dict, shipped_dir: Path, kind: str) -> tuple[dict, str]:
    """Return (mapping, source label) for a shipped name, a file path or an in-memory dict."""
    if isinstance(spec, dict):
        return spec, f"<{kind} dict>"
    text = str(spec)
    path = Path(text)
    if not path.suffix and not path.exists():
        candidate = shipped_dir / f"{text}.yaml"
        if not candidate.exists():
            names = ", ".join(sorted(p.stem for p in shipped_dir.glob("*.yaml")))
            raise SpecError(text, None, f"no shipped {kind} of that name and no such file "
                                        f"(shipped {kind}s: {names})")
        path = candidate
    if not path.exists():
        raise SpecError(str(path), None, "file not found")
    try:
        data: Any = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise SpecError(str(path), where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise SpecError(str(path), None, f"expected a mapping at the top level, got {type(data).__name__}")
    return data, str(path)
