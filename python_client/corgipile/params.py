"""The parameters of ``corgipile.train``, read from the server's catalog.

Reading them from ``pg_proc`` rather than hard-coding them keeps the client
in step with the installed engine: a parameter the engine adds is accepted
by ``client.train(...)``, TRAIN BY ... WITH and the CLI's ``--set`` at once,
and an unknown one is refused with the list of valid names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ._sql import catalog_type, qualified_type, qualify_names, select_targets
from .errors import CorgipileError, ParameterError
from .statements import Bound, Name

__all__ = ["TrainSignature", "POSITIONAL", "train_defaults"]

# corgipile.train(relation, model, ...): these two are never named parameters
POSITIONAL = ("relation", "model")

# text parameters the engine reads as SQL identifiers (unquoted names fold
# to lower case there); a bare name given for them is passed quoted
IDENTIFIER_PARAMS = frozenset({"label", "features", "feature_indices"})
# text parameters whose value may be a relation name (validation: a table or
# '20%'); written as a bare name in SQL it is quoted, qualified or not
RELATION_PARAMS = frozenset({"validation"})

_SAFE_TYPE = re.compile(r"^[a-z][a-z0-9_ ]*(\[\])?$")
_INTEGER = {"integer", "bigint", "smallint"}
_FLOAT = {"double precision", "real", "numeric"}
_TEXT = {"text", "character varying", "name"}

_SIGNATURE_SQL = """
SELECT p.proargnames, p.proargmodes,
       ARRAY(SELECT pg_catalog.format_type(u.t, NULL)
               FROM pg_catalog.unnest(coalesce(p.proallargtypes,
                                               p.proargtypes::pg_catalog.oid[]))
                    WITH ORDINALITY AS u(t, i)
              ORDER BY u.i)
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
 WHERE n.nspname OPERATOR(pg_catalog.=) 'corgipile'
   AND p.proname OPERATOR(pg_catalog.=) 'train'
"""


@dataclass(frozen=True)
class TrainSignature:
    """Name and SQL type of each named parameter of corgipile.train, in
    declaration order (relation and model excluded)."""

    types: dict[str, str]

    @classmethod
    def load(cls, conn: psycopg.Connection[Any]) -> TrainSignature:
        rows = conn.execute(_SIGNATURE_SQL).fetchall()
        if not rows:
            raise CorgipileError(
                "corgipile.train() is not installed in this database: run "
                "CREATE EXTENSION corgipile (as a user allowed to create extensions)")
        names, modes, types = rows[0]
        out: dict[str, str] = {}
        for i, (name, typ) in enumerate(zip(names or [], types, strict=False)):
            mode = modes[i] if modes else "i"
            if mode in ("i", "b", "v") and name and name not in POSITIONAL:
                out[name] = catalog_type(typ)
        return cls(out)

    @property
    def names(self) -> list[str]:
        return list(self.types)

    def valid_names_text(self) -> str:
        return ", ".join(self.names)

    def check_name(self, name: str) -> str:
        if name in POSITIONAL:
            raise ParameterError(
                f"{name} is not a named parameter: the table comes from FROM / the first "
                "argument, the model from TRAIN BY / the second argument")
        if name not in self.types:
            raise ParameterError(
                f"unknown training parameter {name!r}; valid parameters are: "
                f"{self.valid_names_text()}")
        return self.types[name]

    def convert(self, name: str, value: Any) -> Any:
        """The Python value to bind for parameter name (checked and coerced
        to what the SQL type accepts)."""
        typ = self.check_name(name)
        if isinstance(value, Bound):
            value = value.value
        if hasattr(value, "item") and type(value).__module__ == "numpy":
            value = value.item()  # numpy scalar
        if value is None:
            return None
        if isinstance(value, Name):
            if (typ == "regclass" or name in RELATION_PARAMS
                    or (name in IDENTIFIER_PARAMS and len(value.parts) == 1)):
                # a name written in SQL keeps its meaning: "Y" is the column Y
                return value.quoted()
            if len(value.parts) != 1:
                raise ParameterError(f"{name} takes a single name or a quoted string, "
                                     f"not {'.'.join(value.parts)}")
            return value.parts[0]
        if typ in _INTEGER:
            if isinstance(value, bool):
                raise ParameterError(f"{name} takes an integer, not {value!r}")
            if isinstance(value, float):
                if not value.is_integer():
                    raise ParameterError(f"{name} takes an integer, not {value!r}")
                return int(value)
            if isinstance(value, (int, str)):
                return value
        elif typ in _FLOAT:
            if isinstance(value, bool):
                raise ParameterError(f"{name} takes a number, not {value!r}")
            if isinstance(value, (int, float, str)):
                return value
        elif typ == "boolean":
            if isinstance(value, (bool, str)):
                return value
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
        elif typ in _TEXT:
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, (str, int, float)):
                return str(value)
        elif typ == "regclass":
            if isinstance(value, str):
                return value
            if isinstance(value, sql.Identifier):
                return value.as_string(None)
        else:
            return value
        raise ParameterError(f"{name} takes a value of type {typ}, not {value!r}")

    def cast(self, name: str) -> sql.Composable:
        """``name => %s::type``"""
        typ = self.types[name]
        if not _SAFE_TYPE.match(typ):  # pragma: no cover - the catalog's own names
            raise CorgipileError(f"unexpected type {typ!r} for parameter {name}")
        return sql.SQL("{} => {}::" + qualified_type(typ)).format(sql.Identifier(name),
                                                                   sql.Placeholder())

    def call(self, relation: str, model: str, params: dict[str, Any]
             ) -> tuple[sql.Composed, list[Any]]:
        """``SELECT * FROM corgipile.train(%s::regclass, %s, name => %s::type, ...)``
        and its parameters (already converted)."""
        parts: list[sql.Composable] = [sql.SQL("%s::pg_catalog.regclass"),
                                       sql.SQL("%s::pg_catalog.text")]
        values: list[Any] = [relation, model]
        for name, value in params.items():
            parts.append(self.cast(name))
            values.append(value)
        query = sql.SQL("SELECT * FROM corgipile.train({})").format(sql.SQL(", ").join(parts))
        return query, values


_DEFAULTS_SQL = """
SELECT p.proargnames, p.proargmodes, p.pronargdefaults,
       pg_catalog.pg_get_expr(p.proargdefaults, 0)
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
 WHERE n.nspname OPERATOR(pg_catalog.=) 'corgipile'
   AND p.proname OPERATOR(pg_catalog.=) 'train'
"""


def train_defaults(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The default of each named parameter of corgipile.train that has one,
    as the Python value the server gives for it (the default expressions
    are read from pg_proc, split by PostgreSQL's own parser and evaluated
    by the server)."""
    from pglast.stream import RawStream

    row = conn.execute(_DEFAULTS_SQL).fetchone()
    if row is None:
        raise CorgipileError("corgipile.train() is not installed in this database: run "
                             "CREATE EXTENSION corgipile")
    names, modes, ndefaults, exprs = row
    inputs = [name for i, name in enumerate(names or [])
              if (modes[i] if modes else "i") in ("i", "b", "v")]
    if not ndefaults:
        return {}
    targets = select_targets(exprs)
    # pg_get_expr writes pg_catalog's names bare ('x'::text): qualified here
    texts = [RawStream()(qualify_names(t.val)) for t in targets]
    if len(texts) != ndefaults:  # pragma: no cover - the catalog's own text
        raise CorgipileError(f"cannot read the {ndefaults} defaults of corgipile.train")
    named = inputs[-ndefaults:]
    types = TrainSignature.load(conn).types
    casts = []
    for name, text in zip(named, texts, strict=True):
        typ = types[name]
        if not _SAFE_TYPE.match(typ):  # pragma: no cover - the catalog's own names
            raise CorgipileError(f"unexpected type {typ!r} for parameter {name}")
        casts.append(f"({text})::{qualified_type(typ)}")  # the value the function receives
    values = conn.execute("SELECT " + ", ".join(casts)).fetchone() or ()
    return dict(zip(named, values, strict=True))
