"""The column types the loaders write, in one table, and the one rule that
picks a column's type from its values, whatever the source: CSV text, a
pandas column or an Arrow (Parquet) column.

Every type is written with its schema (``pg_catalog.float8``): a bare name
is looked up through search_path, where a role that may create objects in
a schema listed before pg_catalog (public) could have put a look-alike, a
domain named ``text`` whose CHECK runs its owner's function on every value
and stays on the column for every later write.

The rule: a column gets the narrowest type that holds every value it has,
in the order boolean, integer, bigint, double precision, text. Integers
are sized by their values, not by the source's integer width (pandas'
int64 of small numbers is an integer column, as the same numbers in a CSV
are). In a label, integer-valued numbers (``6.0``) are integers: a label
of classes reads as classes however it was written. A source that declares
a type the engine or SQL can use keeps it: dates and timestamps, decimals
(numeric). So the same data gives the same table, and the same model, from
any loader.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql

from ._sql import qualified_type
from .errors import LoadError

__all__ = ["Kind", "KINDS", "column_sql", "parse_kind", "integer_kind", "infer_text",
           "infer_pandas", "frame_kinds", "infer_arrow"]


@dataclass(frozen=True)
class Kind:
    """A column type the loaders write."""

    name: str  # pg_catalog's name of the type
    display: str  # the name format_type() shows, for messages
    noun: str  # what one value is, for messages ("an integer")
    number: bool = False  # a number to the engine (a numeric feature)
    category: bool = False  # one-hot encoded by the engine (text and boolean)
    pattern: str | None = None  # the text its input function takes (a server regex)
    width: int | None = None  # bytes a value takes in a row (None: varies)


_INT_TEXT = r"^\s*[+-]?[0-9]+(\.0*)?\s*$"  # 6 and 6.0: see cast_text
_FLOAT_TEXT = (r"^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
               r"|inf|infinity|nan)\s*$")

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("bool", "boolean", "a boolean", category=True,
         pattern=r"^\s*(t|true|f|false|y|yes|n|no|on|off|1|0)\s*$", width=1),
    Kind("int4", "integer", "an integer", number=True, pattern=_INT_TEXT, width=4),
    Kind("int8", "bigint", "an integer", number=True, pattern=_INT_TEXT, width=8),
    Kind("float4", "real", "a number", number=True, pattern=_FLOAT_TEXT, width=4),
    Kind("float8", "double precision", "a number", number=True, pattern=_FLOAT_TEXT,
         width=8),
    Kind("numeric", "numeric", "a number", number=True, pattern=_FLOAT_TEXT),
    Kind("text", "text", "text", category=True),
    Kind("date", "date", "a date", width=4),
    Kind("timestamp", "timestamp without time zone", "a timestamp", width=8),
    Kind("timestamptz", "timestamp with time zone", "a timestamp", width=8),
)}

# the names a caller may give a type by (types=, --types)
_ALIASES = {"bool": "bool", "boolean": "bool", "int": "int4", "int4": "int4",
            "integer": "int4", "int8": "int8", "bigint": "int8", "float": "float8",
            "float8": "float8", "double": "float8", "double precision": "float8",
            "float4": "float4", "real": "float4", "numeric": "numeric", "decimal": "numeric",
            "text": "text", "str": "text", "string": "text", "date": "date",
            "timestamp": "timestamp", "timestamptz": "timestamptz"}

INT4 = (-2**31, 2**31 - 1)
INT8 = (-2**63, 2**63 - 1)


def column_sql(kind: str) -> sql.SQL:
    """The type as the client writes it: ``pg_catalog.int4``,
    ``pg_catalog.float8[]``."""
    base = kind[:-2] if kind.endswith("[]") else kind
    if base not in KINDS:  # pragma: no cover - the loaders' own names
        raise AssertionError(f"not a loader type: {kind!r}")
    return sql.SQL(qualified_type(kind))


def parse_kind(name: str, column: str) -> str:
    """A type given by the caller ('int', 'float', 'text', ...) for column."""
    try:
        return _ALIASES[str(name).strip().lower()]
    except KeyError:
        raise LoadError(f"unknown column type {name!r} for column {column!r}: use one of "
                        "boolean, integer, bigint, float (double precision), real, numeric, "
                        "text, date, timestamp, timestamptz", column=column) from None


def integer_kind(lo: int, hi: int) -> str | None:
    """int4 or int8 for integers from lo to hi; None beyond int8."""
    if INT4[0] <= lo and hi <= INT4[1]:
        return "int4"
    if INT8[0] <= lo and hi <= INT8[1]:
        return "int8"
    return None


def _too_big(column: str, value: Any) -> LoadError:
    return LoadError(f"column {column!r} holds {value}, outside bigint's range "
                     f"({INT8[0]} to {INT8[1]})", column=column,
                     fix={"types": {column: "float"}},
                     advice="or type it text to keep every digit")


# -- CSV text --------------------------------------------------------------------

_BOOL_WORDS = {"true", "false", "t", "f", "yes", "no"}
_INT_RE = re.compile(r"\s*[+-]?[0-9]+\s*\Z")
_INTEGRAL_RE = re.compile(r"\s*([+-]?[0-9]+)\.0*\s*\Z")
_FLOAT_RE = re.compile(r"\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                       r"|inf|infinity)\s*\Z", re.I)


def integral_text(value: str) -> bool:
    """6.0, 6., -3.00: an integer written as a decimal."""
    return _INTEGRAL_RE.match(value) is not None


def infer_text(values: Iterable[str], label: bool = False) -> str:
    """The narrowest type that reads every (non-missing) text value; no
    value at all: text. label: integer-valued decimals are integers."""
    seen = False
    is_bool = is_int = is_float = True
    lo = hi = 0
    for v in values:
        seen = True
        if is_bool and v.strip().lower() not in _BOOL_WORDS:
            is_bool = False
        if is_int:
            m = _INT_RE.match(v)
            whole = v if m else None
            if whole is None and label:
                m2 = _INTEGRAL_RE.match(v)
                whole = m2.group(1) if m2 else None
            if whole is None:
                is_int = False
            else:
                n = int(whole)
                lo, hi = min(lo, n), max(hi, n)
        if is_float and not is_int and not _FLOAT_RE.match(v):
            is_float = False
        if not (is_bool or is_int or is_float):
            return "text"
    if not seen:
        return "text"
    if is_bool:
        return "bool"
    if is_int:
        return integer_kind(lo, hi) or "float8"
    return "float8" if is_float else "text"


# -- pandas ----------------------------------------------------------------------

def _integral_floats(values: np.ndarray) -> str | None:
    """int4/int8 when every value is a whole number in bigint's range."""
    if not values.size or not np.all(np.isfinite(values)) or \
            not np.all(values == np.round(values)):
        return None
    lo, hi = float(values.min()), float(values.max())
    if not (-2.0**63 <= lo and hi < 2.0**63):
        return None
    return integer_kind(int(lo), int(hi))


def infer_pandas(series: Any, label: bool = False) -> str:
    """A pandas column's type by the rule (series.name names it)."""
    import pandas as pd
    from pandas.api import types as pt

    dt = series.dtype
    name = str(series.name)
    if isinstance(dt, pd.CategoricalDtype):
        return "text"
    if pt.is_bool_dtype(dt):
        return "bool"
    if pt.is_integer_dtype(dt):
        vals = series.dropna()
        if not len(vals):
            return "int4"
        lo, hi = int(vals.min()), int(vals.max())
        kind = integer_kind(lo, hi)
        if kind is None:
            raise _too_big(name, hi if hi > INT8[1] else lo)
        return kind
    if pt.is_float_dtype(dt):
        if label:
            return _integral_floats(series.dropna().to_numpy(dtype=np.float64)) or "float8"
        return "float8"
    if pt.is_datetime64_any_dtype(dt):
        return "timestamptz" if getattr(dt, "tz", None) is not None else "timestamp"
    if not (pt.is_object_dtype(dt) or pt.is_string_dtype(dt)):
        raise LoadError(f"column {name!r} has type {dt}, which the loader does not store",
                        column=name, advice="convert it to numbers, booleans, text or "
                                            "dates first")
    return _infer_objects(series.dropna().tolist(), name, label)


def frame_kinds(frame: Any, columns: list[str], label: str | None,
                types: dict[str, str] | None) -> dict[str, str]:
    """The type of each of a DataFrame's columns: the rule, or types=."""
    kinds = {}
    for c, t in (types or {}).items():
        if c not in columns:
            raise LoadError(f"types= names column {c!r}, which is not loaded", column=c)
        kinds[c] = parse_kind(t, c)
    for c in columns:
        if c not in kinds:
            kinds[c] = infer_pandas(frame[c], label=c == label)
    return kinds


def _infer_objects(vals: list[Any], name: str, label: bool) -> str:
    """An object column by its Python values (what to_csv would write)."""
    if not vals:
        return "text"
    if all(isinstance(v, (bool, np.bool_)) for v in vals):
        return "bool"
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
           for v in vals):
        lo, hi = int(min(vals)), int(max(vals))
        kind = integer_kind(lo, hi)
        if kind is None:
            raise _too_big(name, hi if hi > INT8[1] else lo)
        return kind
    if all(isinstance(v, (int, float, np.integer, np.floating))
           and not isinstance(v, (bool, np.bool_)) for v in vals):
        floats = np.asarray(vals, dtype=np.float64)
        return (_integral_floats(floats) if label else None) or "float8"
    if all(isinstance(v, decimal.Decimal) for v in vals):
        return "numeric"
    if all(isinstance(v, datetime.datetime) for v in vals):
        aware = {v.tzinfo is not None for v in vals}
        if len(aware) > 1:
            raise LoadError(f"column {name!r} mixes timestamps with and without a time zone",
                            column=name, advice="give them all a time zone, or none")
        return "timestamptz" if aware == {True} else "timestamp"
    if all(isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
           for v in vals):
        return "date"
    return "text"


# -- Arrow (Parquet) -----------------------------------------------------------------

def infer_arrow(name: str, typ: Any, values: Callable[[], Any], label: bool = False) -> str:
    """An Arrow column's type by the rule; values() reads the column (a
    ChunkedArray), called only where the values decide (integer ranges,
    an integer-valued label)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = typ.value_type if pa.types.is_dictionary(typ) else typ
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        if t.bit_width < 32 or (t.bit_width == 32 and pa.types.is_signed_integer(t)):
            return "int4"
        mm = pc.min_max(values())
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None:
            return "int4"
        kind = integer_kind(lo, hi)
        if kind is None:
            raise _too_big(name, hi if hi > INT8[1] else lo)
        return kind
    if pa.types.is_floating(t):
        if label:
            v = values().to_numpy()
            return _integral_floats(v[~np.isnan(v)]) or "float8"
        return "float8"
    if pa.types.is_decimal(t):
        if label and t.scale == 0:
            mm = pc.min_max(values())
            if mm["min"].as_py() is not None:
                kind = integer_kind(int(mm["min"].as_py()), int(mm["max"].as_py()))
                if kind is not None:
                    return kind
        return "numeric"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamptz" if t.tz is not None else "timestamp"
    raise LoadError(f"column {name!r} has Parquet type {t}, which the loader does not store",
                    column=name, advice="numbers, booleans, strings, decimals, dates and "
                                        "timestamps load; leave it out or convert it")
