"""Plain-text tables and JSON for the command line."""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["cell", "format_table", "to_json"]

MAX_CELL = 48


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        return f"{v:.6g}"
    if isinstance(value, _dt.datetime):
        return value.isoformat(" ", "seconds")
    if isinstance(value, (list, tuple, np.ndarray)):
        text = "{" + ",".join(cell(v) for v in list(value)) + "}"
    else:
        text = str(value)
    if len(text) > MAX_CELL:
        text = text[:MAX_CELL - 3] + "..."
    return text


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned table like psql's, numbers right-aligned."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in texts:
        for i, t in enumerate(row):
            widths[i] = max(widths[i], len(t))
    numeric = [all(isinstance(r[i], (int, float, np.number)) and not isinstance(r[i], bool)
                   for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
               for i in range(len(columns))]
    lines = [" | ".join(c.center(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
             "-+-".join("-" * w for w in widths)]
    for row in texts:
        lines.append(" | ".join(t.rjust(w) if numeric[i] else t.ljust(w)
                                for i, (t, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    n = len(rows)
    lines.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(lines)


def _default(obj: Any) -> Any:
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    if isinstance(obj, decimal.Decimal):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    return str(obj)


def _clean(obj: Any) -> Any:
    """NaN/inf are not JSON: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_asdict"):
        return [_clean(v) for v in obj]
    if hasattr(obj, "_asdict"):
        return _clean(obj._asdict())
    return obj


def to_json(obj: Any) -> str:
    return json.dumps(_clean(obj), indent=2, default=_default, allow_nan=False)
