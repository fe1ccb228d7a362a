"""Stored models: reading, listing, renaming, dropping, export and import.

A model is one row of ``corgipile.models``, the view of the models the
role owns or was granted USAGE on (``relation``, ``history`` and the
dataset figures of ``params`` are NULL/absent unless the role may read the
training table). Writes go through the extension's functions
(``corgipile.rename_model``, ``corgipile.drop_model``,
``corgipile.import_model``). :class:`Model` is that row in
Python, weights as a numpy array; :func:`export_model` /
:func:`import_model` move it between databases as a JSON document.
Floats survive the trip bit for bit (JSON numbers are written with
Python's shortest round-trip repr), so predictions after an import are
identical.

Models trained with ``standardize`` (the default since 0.3.0) or with text
and boolean feature columns store their preprocessing in ``preprocess``
(docs/preprocessing.md): the weights are in the scaled space, what the
server predicts with. :attr:`Model.coef` / :attr:`Model.intercept` give them
in the features' original units (as scikit-learn users expect),
:attr:`Model.scaled_coef` / :attr:`Model.scaled_intercept` as stored, and
:meth:`Model.decision_function` takes raw rows, one-hot expanding category
columns and applying the stored transform as the server does.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import psycopg
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb

from .errors import ModelExists, ModelFormatError, ModelNotFound

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = [
    "Epoch",
    "Model",
    "ModelInfo",
    "FORMAT",
    "get_model",
    "list_models",
    "drop_model",
    "rename_model",
    "export_model",
    "import_model",
]

FORMAT = "corgipile.model"
FORMAT_VERSION = 1


class Epoch(NamedTuple):
    """One epoch of a training, as the server reported it."""

    epoch: int
    tuples: int
    loss: float
    score: float
    validation_score: float | None
    seconds: float


_EPOCH_FIELDS = Epoch._fields


@dataclass
class Model:
    """A trained model: one row of corgipile.models."""

    name: str
    model: str
    relation: str | None
    label: str
    features: list[str]
    feature_indices: str | None
    # None where the view hides them: a preprocessed model whose training
    # relation the role may not read (docs/security.md)
    n_features: int | None
    weights: np.ndarray | None = field(repr=False)
    classes: list[Any] | None
    params: dict[str, Any] = field(repr=False)
    history: list[Epoch] = field(repr=False)
    created_at: _dt.datetime | None = None
    owner: str | None = None
    preprocess: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def coef(self) -> np.ndarray:
        """Feature weights in the features' original units, shape
        (n_outputs, n_features): one row for a binary or regression model,
        one per class for softmax. For a standardized model these are
        w / std (the server's cp_prep_weights_to_original); category
        indicators are not scaled."""
        scale, _ = self._transform()
        return self.scaled_coef * scale

    @property
    def intercept(self) -> np.ndarray:
        """Biases in original units, shape (n_outputs,): b + sum(w * offset),
        i.e. b - sum(w * mean / std) for centred features."""
        _, offset = self._transform()
        return self.scaled_intercept + self.scaled_coef @ offset

    @property
    def scaled_coef(self) -> np.ndarray:
        """The weights as stored: in the scaled space of a standardized model."""
        return self._matrix()[:, :-1]

    @property
    def scaled_intercept(self) -> np.ndarray:
        """The biases as stored."""
        return self._matrix()[:, -1]

    def _width(self) -> int:
        """n_features, which a model whose weights are hidden does not show."""
        if self.n_features is None:
            raise self._hidden_weights()
        return self.n_features

    def _hidden_weights(self) -> ModelFormatError:
        return ModelFormatError(
            f"the weights of model {self.name} are hidden: they are in the scale of its "
            "preprocessing, and the role may not read the relation it was trained on; "
            "predict with Client.predict")

    def _transform(self) -> tuple[np.ndarray, np.ndarray]:
        """Per model feature, the scale and offset of x' = x * scale + offset
        that training applied (ones and zeros when nothing was scaled)."""
        n = self.n_features
        if n is None or self.weights is None:
            raise self._hidden_weights()
        scale = np.ones(n)
        offset = np.zeros(n)
        prep = self.preprocess
        if prep is None:
            if self.params.get("standardize", "off") != "off":
                raise ModelFormatError(
                    f"model {self.name} was standardized, but its preprocessing is hidden: "
                    "the role may not read the relation it was trained on")
            return scale, offset
        if prep.get("standardize", "off") == "off":
            return scale, offset
        centred = prep["standardize"] == "on"
        mean = np.zeros(n)
        std = np.zeros(n)
        skip = np.zeros(n, dtype=bool)
        pos = 0
        for f in prep["features"]:
            kind = f["kind"]
            if kind == "number":
                mean[pos], std[pos] = f["mean"], f["std"]
                pos += 1
            elif kind == "onehot":
                skip[pos:pos + len(f["categories"])] = True
                pos += len(f["categories"])
            else:  # array, sparse: one figure per element
                mean[:] = f["mean"]
                std[:] = f["std"]
                pos = n
        with np.errstate(divide="ignore"):
            scale = np.where((std > 0) & np.isfinite(std), 1.0 / std, 1.0)
        offset = -mean * scale if centred else np.zeros(n)
        scale[skip] = 1.0
        offset[skip] = 0.0
        return scale, offset

    @property
    def missing(self) -> str:
        """What a NULL number becomes: "skip" (the row is left out, and
        the server predicts NULL), or the statistic it is imputed with,
        "mean", "median" or "zero" (train(missing => ...))."""
        if self.preprocess is not None:
            return str(self.preprocess.get("missing", "skip"))
        return str(self.params.get("missing", "skip"))

    def _missing(self) -> tuple[np.ndarray | None, list[int]]:
        """(the fill of each model position, NaN where there is none; None
        when the model does not impute), and the feature columns that have
        a missing indicator, in the order of their positions."""
        prep = self.preprocess
        if prep is None:
            if self.missing != "skip":
                raise ModelFormatError(
                    f"model {self.name} imputes NULL numbers, but its preprocessing is "
                    "hidden: the role may not read the relation it was trained on")
            return None, []
        if prep.get("missing", "skip") == "skip":
            return None, []
        fill = np.full(self._width(), np.nan)
        indicators = []
        pos = 0
        for i, f in enumerate(prep["features"]):
            kind = f["kind"]
            if kind == "number":
                fill[pos] = f["fill"]
                if prep.get("missing_indicator") and f.get("nulls"):
                    indicators.append(i)
                pos += 1
            elif kind == "onehot":
                pos += len(f["categories"])
            else:  # an array: one fill per element
                fill[:] = f["fill"]
                pos = self._width()
        return fill, indicators

    def _categories(self) -> list[list[str] | None] | None:
        """Per feature column, its categories (None for a number), or None
        when no column is one-hot encoded."""
        if not self.preprocess:
            return None
        cats = [f.get("categories") if f.get("kind") == "onehot" else None
                for f in self.preprocess.get("features", [])]
        return cats if any(c is not None for c in cats) else None

    def encode(self, rows: Any) -> np.ndarray:
        """Raw rows as the model's feature vectors (before scaling): each
        category column replaced by its indicators in code order; a NULL
        (None, NaN) or unseen value is all zeros, as on the server. A
        missing number (None, NaN) is what the model imputes (the stored
        fill, and its missing indicator), or NaN when it does not impute
        (the server predicts NULL for such a row). rows is a pandas
        DataFrame with the feature columns, or a sequence of rows holding
        the feature columns in the model's order."""
        cats = self._categories()
        fill, indicators = self._missing()
        if (hasattr(rows, "columns") and hasattr(rows, "iloc")
                and self.params.get("layout", "columns" if len(self.features) > 1 else "array")
                == "columns" and all(f in rows.columns for f in self.features)):
            rows = rows[self.features]
        if cats is None:
            arr = np.asarray(rows, dtype=np.float64)
            arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
            missing = np.isnan(arr)
            if fill is not None and missing.any():
                arr = np.where(missing, fill[:arr.shape[1]], arr)
            if indicators:
                arr = np.hstack([arr, missing[:, indicators].astype(np.float64)])
            return arr
        if hasattr(rows, "columns") and hasattr(rows, "itertuples"):
            rows = rows.itertuples(index=False, name=None)
        out = []
        for row in rows:
            row = list(row)
            if len(row) != len(self.features):
                raise ValueError(f"model {self.name} reads {len(self.features)} columns "
                                 f"({', '.join(self.features)}), got {len(row)}")
            x: list[float] = []
            for value, col in zip(row, cats, strict=True):
                if col is None:
                    if not _is_missing(value):
                        x.append(float(value))
                    else:
                        x.append(float("nan") if fill is None else float(fill[len(x)]))
                    continue
                ind = [0.0] * len(col)
                key = _category_key(value)
                if key is not None and key in col:
                    ind[col.index(key)] = 1.0
                x.extend(ind)
            x.extend(1.0 if _is_missing(row[i]) else 0.0 for i in indicators)
            out.append(x)
        return np.array(out, dtype=np.float64).reshape(-1, self._width())

    def _matrix(self) -> np.ndarray:
        if self.n_features is None or self.weights is None:
            raise self._hidden_weights()
        width = self.n_features + 1
        if self.weights.size % width:
            raise ValueError(f"model {self.name}: {self.weights.size} weights do not "
                             f"split into rows of {width}")
        return self.weights.reshape(-1, width)

    @property
    def epochs(self) -> int:
        return len(self.history)

    def history_records(self) -> list[dict[str, Any]]:
        """The per-epoch history as a list of dicts."""
        return [e._asdict() for e in self.history]

    def history_frame(self) -> pandas.DataFrame:
        """The per-epoch history as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("history_frame() needs pandas: pip install "
                              "'corgipile[pandas]'") from exc
        return pd.DataFrame.from_records(self.history, columns=list(_EPOCH_FIELDS))

    def decision_function(self, x: Any) -> np.ndarray:
        """w·x + b for each raw row, computed locally as the server does:
        category columns one-hot expanded (see :meth:`encode`), then the
        stored transform, then the stored weights. A dense 2-D array of
        numbers for models without category columns. Use Client.predict for
        the server's labels."""
        scale, offset = self._transform()
        arr = self.encode(x)
        if arr.shape[1] != self.n_features:
            raise ValueError(f"model {self.name} takes {self.n_features} features, "
                             f"got {arr.shape[1]}")
        out: np.ndarray = (arr * scale + offset) @ self.scaled_coef.T + self.scaled_intercept
        return out[:, 0] if out.shape[1] == 1 else out

    def to_dict(self) -> dict[str, Any]:
        """The export document (JSON-serialisable)."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "model_name": self.name,
            "model": self.model,
            "relation": self.relation,
            "label": self.label,
            "features": list(self.features),
            "feature_indices": self.feature_indices,
            "n_features": self.n_features,
            "weights": None if self.weights is None else [float(w) for w in self.weights],
            "classes": self.classes,
            "params": self.params,
            "history": [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                         for k, v in rec.items()} for rec in self.history_records()],
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "owner": self.owner,
            "preprocess": self.preprocess,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, doc: Any) -> Model:
        """Check an export document and build the Model it describes."""
        if isinstance(doc, (str, bytes)):
            try:
                doc = json.loads(doc)
            except json.JSONDecodeError as exc:
                raise ModelFormatError(f"not a JSON document: {exc}") from None
        if not isinstance(doc, dict):
            raise ModelFormatError("a model document is a JSON object")
        if doc.get("format") != FORMAT:
            raise ModelFormatError(f"not a corgipile model export (format should be "
                                   f"{FORMAT!r}, got {doc.get('format')!r})")
        version = doc.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ModelFormatError(f"unsupported export version {version!r}; this client "
                                   f"reads version {FORMAT_VERSION}")

        def need(key: str, kind: Any, optional: bool = False) -> Any:
            if key not in doc or (doc[key] is None and not optional):
                raise ModelFormatError(f"the document has no {key!r}")
            value = doc[key]
            if value is not None and not isinstance(value, kind):
                raise ModelFormatError(f"{key!r} has the wrong type ({type(value).__name__})")
            return value

        name = need("model_name", str)
        n_features = need("n_features", int)
        weights = need("weights", list)
        if isinstance(n_features, bool) or n_features <= 0:
            raise ModelFormatError("'n_features' must be a positive integer")
        if not weights or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w)
                for w in weights):
            raise ModelFormatError("'weights' must be a non-empty list of finite numbers")
        if len(weights) % (n_features + 1):
            raise ModelFormatError(f"{len(weights)} weights do not fit {n_features} features "
                                   "plus a bias")
        features = need("features", list)
        if not all(isinstance(f, str) for f in features):
            raise ModelFormatError("'features' must be a list of column names")
        history = []
        for i, rec in enumerate(need("history", list, optional=True) or []):
            if not isinstance(rec, dict):
                raise ModelFormatError(f"history[{i}] is not an object")
            history.append(_epoch(rec))
        created = doc.get("created_at")
        created_at = None
        if created:
            try:
                created_at = _dt.datetime.fromisoformat(created)
            except (TypeError, ValueError):
                raise ModelFormatError(f"bad created_at {created!r}") from None
        return cls(
            name=name, model=need("model", str),
            relation=need("relation", str, optional=True) or "(unknown)",
            label=need("label", str), features=features,
            feature_indices=need("feature_indices", str, optional=True),
            n_features=n_features, weights=np.array(weights, dtype=np.float64),
            classes=need("classes", list, optional=True),
            params=need("params", dict, optional=True) or {}, history=history,
            created_at=created_at, owner=doc.get("owner"),
            preprocess=need("preprocess", dict, optional=True) if "preprocess" in doc else None)


def _epoch(rec: dict[str, Any]) -> Epoch:
    return Epoch(
        epoch=int(rec.get("epoch", 0)), tuples=int(rec.get("tuples", 0)),
        loss=_float(rec.get("loss")), score=_float(rec.get("score")),
        validation_score=(None if rec.get("validation_score") is None
                          else _float(rec.get("validation_score"))),
        seconds=_float(rec.get("seconds")))


def _float(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _is_missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a NULL."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pandas.NA has no truth value
        return True


def _category_key(value: Any) -> str | None:
    """A category value as the server knows it: a boolean's text output
    (true/false), a string as is; None or NaN for NULL."""
    if _is_missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return str(value)


class ModelInfo(NamedTuple):
    """A line of list_models(): the model without its weights."""

    name: str
    model: str
    relation: str | None
    n_features: int
    epochs: int
    loss: float | None
    score: float | None
    validation_score: float | None
    created_at: _dt.datetime
    owner: str


_COLUMNS = ("model_name, model, relation, label, features, feature_indices, n_features, "
            "weights, classes, params, history, created_at, owner, preprocess")


def _row_to_model(row: tuple[Any, ...]) -> Model:
    (name, model, relation, label, features, feature_indices, n_features, weights,
     classes, params, history, created_at, owner, preprocess) = row
    return Model(
        name=name, model=model, relation=relation, label=label, features=list(features),
        feature_indices=feature_indices, n_features=n_features,
        weights=None if weights is None else np.array(weights, dtype=np.float64),
        classes=classes,
        params=params or {}, history=[_epoch(r) for r in (history or [])],
        created_at=created_at, owner=owner, preprocess=preprocess)


def get_model(conn: psycopg.Connection[Any], name: str) -> Model:
    row = conn.execute(f"SELECT {_COLUMNS} FROM corgipile.models "
                       "WHERE model_name OPERATOR(pg_catalog.=) %s",
                       (name,)).fetchone()
    if row is None:
        raise ModelNotFound(f'model "{name}" does not exist')
    return _row_to_model(row)


def list_models(conn: psycopg.Connection[Any]) -> list[ModelInfo]:
    rows = conn.execute(
        "SELECT model_name, model, relation, n_features, "
        "       coalesce(pg_catalog.jsonb_array_length(history), 0), "
        "       ((history OPERATOR(pg_catalog.->) -1) OPERATOR(pg_catalog.->>) 'loss'"
        ")::pg_catalog.float8, "
        "       ((history OPERATOR(pg_catalog.->) -1) OPERATOR(pg_catalog.->>) 'score'"
        ")::pg_catalog.float8, "
        "       ((history OPERATOR(pg_catalog.->) -1) OPERATOR(pg_catalog.->>) "
        "'validation_score')::pg_catalog.float8, created_at, owner "
        "  FROM corgipile.models ORDER BY created_at, model_name").fetchall()
    return [ModelInfo(*r) for r in rows]


def _exists(conn: psycopg.Connection[Any], name: str) -> bool:
    """Whether the model exists among those the role may see."""
    return conn.execute("SELECT 1 FROM corgipile.models WHERE model_name OPERATOR(pg_catalog.=) %s",
                        (name,)).fetchone() is not None


def drop_model(conn: psycopg.Connection[Any], name: str) -> None:
    try:
        conn.execute("SELECT corgipile.drop_model(%s)", (name,))
    except pgerrors.UndefinedObject as exc:
        raise ModelNotFound(str(exc.diag.message_primary or exc)) from None


def rename_model(conn: psycopg.Connection[Any], old: str, new: str) -> None:
    """Rename through corgipile.rename_model(), which checks ownership and the
    new name (since 0.2.0 nobody writes the model storage directly)."""
    try:
        conn.execute("SELECT corgipile.rename_model(%s, %s)", (old, new))
    except pgerrors.UndefinedObject as exc:
        raise ModelNotFound(str(exc.diag.message_primary or exc)) from None
    except pgerrors.DuplicateObject as exc:
        raise ModelExists(str(exc.diag.message_primary or exc)) from None


def export_model(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    model = get_model(conn, name)
    if model.weights is None:
        raise model._hidden_weights()
    return model.to_dict()


def import_model(conn: psycopg.Connection[Any], doc: Any, name: str | None = None,
                 replace: bool = False) -> Model:
    """Insert an exported model; the caller provides the transaction."""
    model = Model.from_dict(doc)
    assert model.weights is not None  # from_dict requires them
    if name is not None:
        model.name = name
    if replace and _exists(conn, model.name):
        drop_model(conn, model.name)
    # corgipile.import_model() validates the row as predict() will load it
    # and makes the caller its owner; the relation is another database's.
    try:
        conn.execute(
            "SELECT corgipile.import_model(%s, %s, %s, %s, %s::pg_catalog.text[], %s, %s, "
            " %s::pg_catalog.float8[], %s, %s, %s, %s::pg_catalog.timestamptz, "
            "%s::pg_catalog.jsonb)",
            (model.name, model.model, model.relation or "(unknown)", model.label,
             model.features, model.feature_indices, model.n_features,
             [float(w) for w in model.weights],
             None if model.classes is None else Jsonb(model.classes), Jsonb(model.params),
             Jsonb(model.history_records()), model.created_at,
             None if model.preprocess is None else Jsonb(model.preprocess)))
    except pgerrors.DuplicateObject:
        raise ModelExists(f'model "{model.name}" already exists; pass replace=True or '
                          'another name') from None
    return get_model(conn, model.name)
