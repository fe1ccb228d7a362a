"""The client: a psycopg connection plus TRAIN BY / PREDICT BY, training
with progress, predictions, evaluation, model management and loaders."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from . import metrics
from . import models as _models
from ._sql import EQ, QUALIFIED_NAME, relation_sql
from .errors import ConnectionTypeError, ModelNotFound, ParameterError, StatementError
from .models import Model, ModelInfo
from .params import TrainSignature
from .statements import (
    PlainStatement,
    Prediction,
    PredictStatement,
    ServerParam,
    TrainStatement,
    check_query,
    filter_query,
    is_query,
    parse_statement,
    train_arguments,
)
from .training import ProgressCallback, Source, run_training, transaction

if TYPE_CHECKING:  # pragma: no cover
    import pandas

    from .loaders import LoadResult

__all__ = ["Client", "Result", "connect"]


def connect(dsn: Any = None, *, progress: bool | None = None, **kwargs: Any) -> Client:
    """Open a client.

    dsn: a libpq connection string or URI (``"host=... dbname=..."``,
    ``"postgresql://..."``); None uses the standard ``PG*`` environment
    variables (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, ...). A
    psycopg connection or a SQLAlchemy engine/connection is wrapped instead.
    Extra keyword arguments go to ``psycopg.connect``.

    The connection is in autocommit mode: each call commits its own work.
    """
    if dsn is None or isinstance(dsn, str):
        conn = psycopg.connect(dsn or "", autocommit=True, **kwargs)
        return Client(conn, progress=progress, _owned=True)
    return Client(dsn, progress=progress)


class Result:
    """The outcome of :meth:`Client.execute`: a cursor with its rows
    fetched, iterable, with column names.

    kind is "sql" for a plain statement, "train" for TRAIN BY (one row per
    epoch; model_name says where the model went) and "predict" for
    PREDICT BY (the query's columns plus ``prediction``)."""

    def __init__(self, cursor: psycopg.Cursor[Any], kind: str = "sql",
                 model_name: str | None = None) -> None:
        self.cursor = cursor
        self.kind = kind
        self.model_name = model_name

    @property
    def columns(self) -> list[str]:
        """Column names; empty for a statement that returns no rows."""
        return [c.name for c in self.cursor.description or ()]

    @property
    def description(self) -> Any:
        return self.cursor.description

    @property
    def rowcount(self) -> int:
        return self.cursor.rowcount

    @property
    def statusmessage(self) -> str | None:
        return self.cursor.statusmessage

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.cursor.fetchone()

    def fetchmany(self, size: int = 0) -> list[tuple[Any, ...]]:
        return self.cursor.fetchmany(size)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.cursor.fetchall()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.cursor)

    def records(self) -> list[dict[str, Any]]:
        """The remaining rows as dicts keyed by column name."""
        cols = self.columns
        return [dict(zip(cols, row, strict=True)) for row in self.cursor.fetchall()]

    def to_dataframe(self) -> pandas.DataFrame:
        """The remaining rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.cursor.fetchall(), columns=self.columns)

    def __repr__(self) -> str:
        return f"<Result kind={self.kind} columns={self.columns} rowcount={self.rowcount}>"


def _is_sqlalchemy(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "sqlalchemy"


class Client:
    """A connection to a database with the corgipile extension.

    ``Client(conn)`` wraps a psycopg connection, a SQLAlchemy ``Engine`` or
    ``Connection`` (with the ``postgresql+psycopg`` driver), a DSN string,
    or nothing (the ``PG*`` environment variables). On a connection that
    is not in autocommit mode the client works inside that connection's
    transaction and you commit it; ``connect()`` and engines give an
    autocommit connection where each call commits.

    progress: show a tqdm bar while training; None means "when stderr is a
    terminal". Every training call can override it.

    A Client is not thread-safe, like the connection it wraps.
    """

    def __init__(self, connection: Any = None, *, progress: bool | None = None,
                 _owned: bool = False) -> None:
        self.progress = progress
        self._owned = _owned
        self._release: Any = None
        self._signature: TrainSignature | None = None
        if connection is None or isinstance(connection, str):
            connection = psycopg.connect(connection or "", autocommit=True)
            self._owned = True
        if _is_sqlalchemy(connection):
            connection = self._from_sqlalchemy(connection)
        if isinstance(connection, psycopg.AsyncConnection):
            raise ConnectionTypeError("the client needs a synchronous psycopg.Connection, "
                                      "not an AsyncConnection")
        if not isinstance(connection, psycopg.Connection):
            raise ConnectionTypeError(
                f"cannot use a {type(connection).__module__}.{type(connection).__name__}: "
                "give a DSN string, a psycopg.Connection, or a SQLAlchemy Engine/Connection")
        self.connection: psycopg.Connection[Any] = connection

    def _from_sqlalchemy(self, obj: Any) -> Any:
        from sqlalchemy.engine import Connection as SAConnection
        from sqlalchemy.engine import Engine

        if isinstance(obj, Engine):
            raw = obj.raw_connection()
            dbapi = raw.driver_connection
            if not isinstance(dbapi, psycopg.Connection):
                raw.close()
                raise ConnectionTypeError(_SA_DRIVER)
            driver: psycopg.Connection[Any] = dbapi
            previous = driver.autocommit
            driver.autocommit = True

            def release() -> None:
                if not driver.closed:
                    driver.autocommit = previous
                raw.close()  # back to the pool

            self._release = release
            return dbapi
        if isinstance(obj, SAConnection):
            dbapi = obj.connection.driver_connection
            if not isinstance(dbapi, psycopg.Connection):
                raise ConnectionTypeError(_SA_DRIVER)
            if not obj.in_transaction():
                obj.begin()  # our work is part of the SQLAlchemy transaction
            return dbapi
        raise ConnectionTypeError(f"cannot use a SQLAlchemy {type(obj).__name__}; give an "
                                  "Engine or a Connection")

    # -- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        """Close the connection if the client opened it (or return an
        engine's connection to its pool); a wrapped connection stays open."""
        if self._release is not None:
            self._release()
            self._release = None
        elif self._owned and not self.connection.closed:
            self.connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def signature(self) -> TrainSignature:
        """The parameters of corgipile.train in this database (cached)."""
        if self._signature is None:
            self._signature = TrainSignature.load(self.connection)
        return self._signature

    def _bar(self, progress: bool | None) -> bool:
        if progress is None:
            progress = self.progress
        if progress is None:
            return bool(getattr(sys.stderr, "isatty", lambda: False)())
        return bool(progress)

    # -- statements ---------------------------------------------------------

    def execute(self, query: str | sql.Composable,
                params: Sequence[Any] | Mapping[str, Any] | None = None, *,
                progress: bool | None = None, callback: ProgressCallback | None = None
                ) -> Result:
        """Run one statement; see :mod:`corgipile.statements` for TRAIN BY and
        PREDICT BY. Anything else goes to the server unchanged."""
        text = query.as_string(self.connection) if isinstance(query, sql.Composable) else query
        stmt = parse_statement(text, params)
        if isinstance(stmt, PlainStatement):
            cur = self.connection.cursor()
            cur.execute(query if isinstance(query, sql.Composable) else text,  # type: ignore[arg-type]
                        params)
            return Result(cur)
        if isinstance(stmt, TrainStatement):
            return self._execute_train(stmt, progress, callback)
        assert isinstance(stmt, PredictStatement)
        rows = self.connection.execute(
            "SELECT m.model_name, m.classes FROM corgipile.models m "
            "WHERE m.model_name OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])",
            (stmt.model_names,)).fetchall()
        model_classes = dict(rows)
        for p in stmt.predictions:
            if p.model_name not in model_classes:
                raise StatementError(f'model "{p.model_name}" does not exist', stmt.text,
                                     p.model_position,
                                     "list the models with `corgipile models` (CLI) or "
                                     "client.list_models()")

        def call(p: Prediction) -> str:
            return metrics.predict_sql(model_classes[p.model_name], sql.Literal(p.model_name),
                                       sql.Identifier(p.row)).as_string(self.connection)

        cur = self.connection.cursor()
        cur.execute(stmt.query(call), stmt.params)
        return Result(cur, "predict", stmt.model_name)

    def _execute_train(self, stmt: TrainStatement, progress: bool | None,
                       callback: ProgressCallback | None) -> Result:
        for p in stmt.params:
            if isinstance(p.value, ServerParam):
                raise StatementError(f"{p.name} = ${p.value.number}: PostgreSQL's $n parameters "
                                     "are not supported here", stmt.text, p.position,
                                     "pass params and write %s (or %(name)s) for the value")
        sig = self.signature
        model, params = train_arguments(stmt, sig)
        if stmt.source_query is not None:
            try:
                label = self.connection.execute(QUALIFIED_NAME, (stmt.relation,)
                                                ).fetchone()[0]  # type: ignore[index]
            except pgerrors.UndefinedTable as exc:
                if not self.connection.autocommit:
                    raise
                raise StatementError(str(exc.diag.message_primary), stmt.text,
                                     stmt.relation_position) from None
            source = Source(query=stmt.source_query, query_params=stmt.source_params,
                            label=label, base=stmt.relname, filter_text=stmt.where_text)
        else:
            source = Source(relation=stmt.relation)
        cur, name = run_training(self.connection, sig, source, model, params,
                                 bar=self._bar(progress), callback=callback)
        return Result(cur, "train", name)

    # -- training -----------------------------------------------------------

    def _source(self, source: Any, where: str | None) -> Source:
        if isinstance(source, sql.Composable) and not isinstance(source, sql.Identifier):
            source = source.as_string(self.connection)
        if isinstance(source, str) and is_query(source):
            if where is not None:
                raise ParameterError("where= filters a table; put the condition in the query")
            check_query(source)
            return Source(query=sql.SQL(source), label=f"({source.strip()})", base="query")
        relation = source.as_string(self.connection) if isinstance(source, sql.Identifier) \
            else source
        if not isinstance(relation, str):
            raise ParameterError(f"train on a table name or a SELECT query, not {source!r}")
        if where is None:
            return Source(relation=relation)
        row = self.connection.execute(
            "SELECT n.nspname, c.relname, pg_catalog.format('%%I.%%I', n.nspname, c.relname) "
            "FROM pg_catalog.pg_class c "
            f"JOIN pg_catalog.pg_namespace n ON n.oid {EQ} c.relnamespace "
            f"WHERE c.oid {EQ} %s::pg_catalog.regclass", (relation,)).fetchone()
        assert row is not None
        query = filter_query(sql.Identifier(row[0], row[1]), where)
        return Source(query=query, label=row[2], base=row[1], filter_text=where)

    def train(self, source: Any, model: str, *, where: str | None = None,
              replace: bool = False, progress: bool | None = None,
              callback: ProgressCallback | None = None, **params: Any) -> Model:
        """Train a model and return it (weights and per-epoch history).

        source: a table name (``"points"``, ``'public."My Table"'``) or a
        SELECT query, which is first copied into a temporary table.
        where: train on the table's rows matching this SQL condition (also
        through a temporary table).
        model: "svm", "logistic"/"lr", and whatever else the engine offers.
        params: corgipile.train's parameters (model_name, learning_rate,
        max_epoch_num, shuffle, seed, ...); unknown names are refused.
        replace: drop an existing model of the same model_name first, in the
        same transaction.
        progress: tqdm bar of epochs, loss and score (default: on a terminal).
        callback: called with an EpochProgress after every epoch; if it
        raises, the training is cancelled and the exception propagates.

        Ctrl-C cancels the query on the server and raises
        TrainingInterrupted; nothing is stored.
        """
        src = self._source(source, where)
        cur, name = run_training(self.connection, self.signature, src, model, params,
                                 replace=replace, bar=self._bar(progress), callback=callback)
        if name is None:
            raise ModelNotFound("the training returned no rows, so no model was stored")
        return self.get_model(name)

    # -- prediction and evaluation -------------------------------------------

    def predict(self, model_name: str, data: Any, *, where: str | None = None) -> np.ndarray:
        """Predictions of a stored model, computed by the server.

        data: a 2-D array-like of dense feature vectors (one prediction per
        row, in order), a pandas DataFrame holding the model's feature
        columns, a table name (optionally with where=), or a SELECT query
        (rows in the order the table or query yields them)."""
        conn = self.connection
        _, _, classes = metrics.model_head(conn, model_name)
        fn = metrics.predict_function(classes)
        boolean = metrics.predict_cast(classes) is not None
        dtype = np.bool_ if boolean else object if fn == "predict_class" else np.float64
        if isinstance(data, str) or isinstance(data, sql.Composable):
            src = self._source(data, where)
            from_item = metrics.source_sql(
                None if src.query is not None else relation_sql(conn, src.relation),
                src.query)
            rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(
                metrics.predict_sql(classes, sql.Literal(model_name), sql.Identifier("s")),
                from_item)).fetchall()
            return _predictions([r[0] for r in rows], dtype)
        if _is_dataframe(data):
            model = self.get_model(model_name)
            missing = [f for f in model.features if f not in data.columns]
            if model.feature_indices is None and not missing and len(model.features) > 1:
                data = data[model.features].to_numpy(dtype=np.float64)
            else:
                data = data.to_numpy(dtype=np.float64)
        arr = np.asarray(data, dtype=np.float64)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2:
            raise ValueError("predict() takes a 2-D array of feature vectors")
        # NaN is a missing value (as in pandas and scikit-learn): a NULL
        # element, which a model trained with missing => ... imputes
        texts = ["{" + ",".join("NULL" if v != v else repr(float(v)) for v in row) + "}"
                 for row in arr]
        rows = conn.execute(sql.SQL(
            "SELECT {} FROM pg_catalog.unnest(%s::pg_catalog.text[]) "
            "WITH ORDINALITY AS u(x, i) ORDER BY u.i").format(
                metrics.predict_sql(classes, sql.Literal(model_name),
                                    sql.SQL("u.x::pg_catalog.float8[]"))),
            (texts,)).fetchall()
        return _predictions([r[0] for r in rows], dtype)

    def evaluate(self, model_name: str, source: Any, *, where: str | None = None
                 ) -> dict[str, float | int | None]:
        """Metrics of a stored model on a table or query: the server's
        corgipile.evaluate() when installed (tables only), else accuracy for
        classifiers and r2/mse for regression, computed with
        corgipile.predict."""
        src = self._source(source, where)
        if src.query is None:
            assert src.relation is not None
            return metrics.evaluate(self.connection, model_name,
                                    relation=relation_sql(self.connection, src.relation),
                                    relation_text=src.relation)
        return metrics.evaluate(self.connection, model_name, query=src.query)

    # -- models ---------------------------------------------------------------

    def list_models(self) -> list[ModelInfo]:
        """Every stored model, oldest first, without weights."""
        return _models.list_models(self.connection)

    def get_model(self, name: str) -> Model:
        return _models.get_model(self.connection, name)

    def drop_model(self, name: str) -> None:
        _models.drop_model(self.connection, name)

    def rename_model(self, old: str, new: str) -> Model:
        _models.rename_model(self.connection, old, new)
        return self.get_model(new)

    def export_model(self, name: str) -> dict[str, Any]:
        """The model as a JSON-serialisable document (json.dumps it, or use
        Model.to_json); import it elsewhere with import_model."""
        return _models.export_model(self.connection, name)

    def import_model(self, doc: Any, *, name: str | None = None, replace: bool = False
                     ) -> Model:
        """Store an exported model (a dict, or its JSON text) in this
        database, under its own name or name=; replace=True overwrites."""
        with transaction(self.connection):
            return _models.import_model(self.connection, doc, name=name, replace=replace)

    # -- loading ----------------------------------------------------------------

    def load_numpy(self, table: str, x: Any, y: Any = None, **kwargs: Any) -> LoadResult:
        """See :func:`corgipile.loaders.load_numpy`."""
        from .loaders import load_numpy

        return load_numpy(self.connection, table, x, y, **kwargs)

    def load_dataframe(self, table: str, frame: Any, **kwargs: Any) -> LoadResult:
        """See :func:`corgipile.loaders.load_dataframe`."""
        from .loaders import load_dataframe

        return load_dataframe(self.connection, table, frame, **kwargs)

    def load_csv(self, table: str, path: Any, **kwargs: Any) -> LoadResult:
        """See :func:`corgipile.tabular.load_csv`."""
        from .loaders import load_csv

        return load_csv(self.connection, table, path, **kwargs)

    def load_parquet(self, table: str, path: Any, **kwargs: Any) -> LoadResult:
        """See :func:`corgipile.tabular.load_parquet` (needs pyarrow)."""
        from .loaders import load_parquet

        return load_parquet(self.connection, table, path, **kwargs)

    def load_libsvm(self, table: str, path: Any, **kwargs: Any) -> LoadResult:
        """See :func:`corgipile.loaders.load_libsvm`."""
        from .loaders import load_libsvm

        return load_libsvm(self.connection, table, path, **kwargs)


_SA_DRIVER = ("the SQLAlchemy engine must use the psycopg 3 driver: create it with a "
              "postgresql+psycopg:// URL")


def _is_dataframe(obj: Any) -> bool:
    return type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("pandas")


def _predictions(values: list[Any], dtype: Any) -> np.ndarray:
    """The server's predictions as an array of dtype; a NULL prediction (a
    row with a NULL feature the model does not impute) stays None, in an
    object array if dtype cannot hold it, never a class."""
    if dtype is np.bool_ and any(v is None for v in values):
        dtype = object
    return np.array(values, dtype=dtype)
