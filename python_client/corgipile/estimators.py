"""scikit-learn estimators over corgipile.train.

>>> from corgipile import SGDClassifier
>>> clf = SGDClassifier("dbname=ml", loss="log_loss", max_epoch_num=10, seed=1)
>>> clf.fit(X_train, y_train)            # arrays / pandas: COPY into a temporary table
>>> clf.predict_proba(X_test)
>>> clf.fit("points")                    # or a table (a SELECT query works too)
>>> clf.score("heldout")                 # accuracy, computed in the database

They are real scikit-learn estimators (``BaseEstimator`` with
``ClassifierMixin`` / ``RegressorMixin``): ``clone``, ``Pipeline``,
``cross_val_score``, ``GridSearchCV`` and pickling work, and they pass
scikit-learn's estimator checks (see tests/python/client/test_estimators.py
for the few that do not apply). They need scikit-learn
(``pip install 'corgipile[sklearn]'``).

Design, in short:

- **A connection string, not a connection.** ``dsn`` is a libpq string or
  URI (None: the ``PG*`` environment variables). Every ``fit`` / ``predict``
  / ``score`` opens its own connection and closes it, so an estimator holds
  no live resource and deep-copies and pickles like any other.
- **Parameters are corgipile.train's**, written out in ``__init__`` (which
  ``get_params`` introspects), with the engine's defaults; a test compares
  them with ``corgipile.train``'s signature in ``pg_proc`` so the two cannot
  drift. ``loss`` picks the model ("hinge": svm, "log_loss": logistic, or
  softmax for more than two classes; the regressor's only loss is
  "squared_error": linear). ``verbose`` shows the progress bar.
- **No clutter in corgipile.models.** Without ``model_name``, ``fit`` trains
  inside a transaction that is rolled back once the weights are read: the
  model lives in the estimator (``model_``) and nowhere else. Predictions on
  arrays are computed locally from those weights (the same rule as the
  server: a zero margin goes to the negative class). Predictions and scores
  on a table or query run in the database: the model is re-created
  (``Client.import_model``) inside a transaction that is rolled back after
  the query. With ``model_name``, ``fit`` stores the model under that name
  (replacing an older one) and the database uses it directly.
- **Validation.** ``validation="20%"`` holds out that share of the rows
  (per row, from ``seed``): ``history_`` has their score for every epoch and
  ``model_.params["holdout"]`` their final figures and metrics. A table
  name scores that table instead (fitting on a table only).
- **What scikit-learn users pass.** Arrays; scipy sparse matrices (CSR,
  or anything ``validate_data`` turns into CSR), loaded into the sparse
  layout (``feature_indices``, ``features``) without densifying; the dense
  or sparse output of a ``ColumnTransformer``; and DataFrames with text,
  category or boolean columns, which go to the server as columns of those
  types for its stored preprocessing to one-hot encode (the model's
  ``preprocess``), so ``predict`` on a frame encodes the same way
  (``Model.decision_function``). ``feature_names_in_`` is set for frames.
- **Missing values.** NaN in a numeric column (or None in a frame's
  numeric column) is refused with a ValueError naming the columns, as
  scikit-learn's own estimators refuse it, unless the estimator imputes:
  ``missing="mean"`` (or ``"median"``, ``"zero"``, and
  ``missing_indicator=True``: scikit-learn's ``SimpleImputer`` and its
  ``add_indicator``) trains on every row, NaN sent as NULL, with the
  statistic stored in the model, and ``predict`` imputes as trained. A
  model is never asked to classify a row whose score it cannot compute.
- **Labels.** On arrays, any labels work: ``classes_`` is ``np.unique(y)``
  and the table gets -1/+1 (two classes) or 0..K-1 (softmax); predictions
  map back to ``classes_``. On a table, the classes are the model's
  (``[-1, 1]``, ``[0, 1]``, ``[False, True]``, or softmax's classes, text
  included).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import numpy as np
from psycopg import sql
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from . import metrics
from ._sql import ident as _ident
from ._sql import quote_ident
from ._sql import relation_sql as _relation_sql
from ._tables import frame_columns
from .client import Client, connect
from .errors import LoadError
from .models import Model

__all__ = ["SGDClassifier", "SGDRegressor", "TRAIN_PARAMS"]

# The estimator parameters that are corgipile.train's, in its order. The
# test suite checks this list, and the defaults in __init__, against the
# signature of corgipile.train in pg_proc.
TRAIN_PARAMS = ("model_name", "label", "features", "feature_indices", "n_features",
                "shuffle", "learning_rate", "decay", "max_epoch_num", "batch_size", "l2",
                "block_size", "buffer_size", "seed", "double_buffer", "validation", "l1",
                "tolerance", "n_iter_no_change", "warm_start", "standardize",
                "max_categories", "workers", "average", "missing", "missing_indicator")

# parameters that say where the data is in a table; fit(X, y) on arrays
# writes its own table and sets them
_TABLE_PARAMS = ("label", "features", "feature_indices", "n_features")


def _is_source(data: Any) -> bool:
    """A table name or a SELECT query (text or psycopg.sql), not data."""
    return isinstance(data, (str, sql.Composable))


def _categorical_frame(X: Any) -> bool:
    """A pandas DataFrame with a column that is not a plain number: text,
    category, boolean (sent as columns for the server to encode)."""
    if not (hasattr(X, "dtypes") and hasattr(X, "columns") and hasattr(X, "iloc")):
        return False
    return any(getattr(dt, "kind", "O") not in "iuf" for dt in X.dtypes)


# The temporary table a fit on arrays or a DataFrame trains from is named
# after the argument that holds the data, so that what the server says of it
# ('skipped 12 rows of "X" with a NULL label or NULL features', 'column
# "city" of relation "X" has more than 1000 distinct values') names what the
# user passed: X, its columns, and y. It lives in the fit's own session and
# transaction, which is rolled back.
_FIT_TABLE = 'pg_temp."X"'


def _label_name(columns: list[str]) -> str:
    """y, or y_ ... when X has a column y."""
    name = "y"
    while name in columns:
        name += "_"
    return name


def _nan_columns(X: Any, names: Any = None) -> list[str]:
    """The columns of X holding a missing number: NaN in an array or a
    sparse matrix's entries, None/NaN/NA in a DataFrame's numeric columns
    (text columns keep NULL as a category). Named by the frame's columns,
    by names (feature_names_in_), else by position."""
    if hasattr(X, "dtypes") and hasattr(X, "columns"):
        return [str(c) for c, dt in zip(X.columns, X.dtypes, strict=True)
                if getattr(dt, "kind", "O") in "iuf" and bool(X[c].isna().any())]
    if issparse(X):
        # scipy-stubs' issparse narrows to SparseABC, an empty class
        coo = X.tocoo()  # type: ignore[attr-defined]
        cols = np.unique(coo.col[np.isnan(coo.data)])
    else:
        arr = np.asarray(X, dtype=np.float64)
        cols = np.flatnonzero(np.isnan(arr).any(axis=0)) if arr.ndim == 2 else np.array([])
    if names is not None:
        return [str(names[j]) for j in cols]
    return [f"column {int(j)}" for j in cols]


def _nan_error(est: Any, cols: list[str], fitted_skip: bool) -> ValueError:
    """scikit-learn's answer to NaN (a ValueError that says so), with the
    columns and the parameter that imputes them."""
    shown = ", ".join(cols[:10]) + (f" and {len(cols) - 10} more" if len(cols) > 10 else "")
    if fitted_skip:
        return ValueError(
            f"Input X contains NaN in {shown}; the model of {type(est).__name__} was trained "
            "with missing='skip' and cannot score rows with a missing number: fit it with "
            "missing='mean' (or 'median', 'zero'), or drop or fill those rows")
    return ValueError(
        f"Input X contains NaN in {shown}; {type(est).__name__} does not accept missing "
        "values unless it imputes them: pass missing='mean' (or 'median', 'zero'; "
        "missing_indicator=True adds a 0/1 feature per such column), as scikit-learn's "
        "SimpleImputer would, or drop or fill those rows")


class _SGDBase(BaseEstimator):
    """What SGDClassifier and SGDRegressor share; see the module docstring."""

    _loss_models: dict[str, str] = {}

    # -- plumbing ---------------------------------------------------------------------

    def _connect(self) -> Client:
        return connect(self.dsn, progress=bool(self.verbose))

    def _train_params(self, table_fit: bool) -> dict[str, Any]:
        params = {name: getattr(self, name) for name in TRAIN_PARAMS}
        # warm_start names a stored model; scikit-learn's own checks set the
        # boolean False ("no warm start"), which means the same as None
        if params["warm_start"] is False:
            params["warm_start"] = None
        elif not (params["warm_start"] is None or isinstance(params["warm_start"], str)):
            raise ValueError("warm_start takes the name of a stored model to start from, "
                             f"not {params['warm_start']!r}")
        if not table_fit:
            for name in _TABLE_PARAMS:
                params.pop(name)
        # None means "the engine's default" for the nullable parameters
        return {k: v for k, v in params.items() if v is not None}

    def _check_loss(self) -> None:
        if self.loss not in self._loss_models:
            raise ValueError(f"{type(self).__name__} takes loss in "
                             f"{sorted(self._loss_models)}, not {self.loss!r}")

    def _model_kind(self, n_classes: int | None) -> str:
        return self._loss_models[self.loss]

    # -- fitting --------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, where: str | None = None) -> _SGDBase:
        """Train on arrays / a DataFrame X with targets y, or on a table name
        or SELECT query X (y None: the label is the table's ``label``
        column). ``where`` filters a table."""
        self._check_loss()
        if _is_source(X):
            if y is not None:
                raise ValueError("y is given by the table's label column; pass y only "
                                 "with arrays")
            self._fit_source(X, where)
        else:
            if where is not None:
                raise ValueError("where= filters a table; with arrays, select the rows "
                                 "yourself")
            self._fit_arrays(X, y)
        return self

    def _fit_source(self, source: Any, where: str | None) -> None:
        params = self._train_params(table_fit=True)
        persistent = self.model_name is not None
        with self._connect() as client:
            kind = self._model_kind(self._table_classes(client, source, where))
            if persistent:
                model = client.train(source, kind, where=where, replace=True, **params)
            else:
                with client.connection.transaction(force_rollback=True):
                    model = client.train(source, kind, where=where, **params)
        classes = model.classes
        self._frame_columns: list[str] | None = None
        self._set_fitted(model, None if classes is None else np.asarray(classes))
        for attr in ("feature_names_in_",):
            if hasattr(self, attr):
                delattr(self, attr)
        self.n_features_in_ = model.n_features

    def _table_classes(self, client: Client, source: Any, where: str | None) -> int | None:
        """How many distinct labels a table has (up to 3), where the model
        depends on it; None where it does not."""
        return None

    def _encode_y(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(the labels to store in the table, classes_ or None)."""
        raise NotImplementedError

    def _fit_arrays(self, X: Any, y: Any) -> None:
        if _categorical_frame(X):
            self._fit_frame(X, y)
            return
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             y_numeric=self._y_numeric, ensure_all_finite="allow-nan")
        self._frame_columns = None
        sparse = issparse(X)
        nan_cols = _nan_columns(X, getattr(self, "feature_names_in_", None))
        if nan_cols and self.missing == "skip":
            raise _nan_error(self, nan_cols, False)
        if nan_cols and sparse:
            raise ValueError(f"Input X contains NaN in {', '.join(nan_cols[:10])}; a sparse "
                             "matrix's missing entries are zeros and NaN is not imputed: "
                             "pass a dense array to impute them")
        labels, classes = self._encode_y(y)
        # an indicator per column needs the columns layout (an array model
        # has one weight per element)
        layout = "columns" if self.missing_indicator else "array"

        def load(client: Client, temp: str) -> Any:
            if sparse:
                from .loaders import load_csr

                return load_csr(client.connection, temp, X, labels, temporary=True,
                                analyze=False, label_name="y")
            return client.load_numpy(temp, X, labels, temporary=True, analyze=False,
                                     label_name="y", layout=layout)

        self._fit_loaded(load, classes)

    def _fit_frame(self, X: Any, y: Any) -> None:
        """A DataFrame with text, category or boolean columns: a temporary
        table of those columns (loaders.load_dataframe), which the server
        one-hot encodes; missing values are NULL. Every column is a
        feature, as scikit-learn's estimators take every column of X."""
        cols = frame_columns(X)
        if "id" in cols:
            raise ValueError(f"X has a column 'id', the name of the row number column of the "
                             f"table it is copied into: rename it (columns: {cols})")
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target "
                             "y is None")
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        if len(y) == 0:
            raise ValueError("Found array with 0 sample(s) (shape=(0, "
                             f"{len(cols)})) while a minimum of 1 is required.")
        if self._y_numeric:
            y = np.asarray(y, dtype=np.float64)
        nan_cols = _nan_columns(X)
        if nan_cols and self.missing == "skip":
            raise _nan_error(self, nan_cols, False)
        labels, classes = self._encode_y(y)
        self.feature_names_in_ = np.asarray(cols, dtype=object)
        self.n_features_in_ = len(cols)
        self._frame_columns = cols
        label = _label_name(cols)
        frame = X.set_axis(cols, axis=1).assign(**{label: labels})

        def load(client: Client, temp: str) -> Any:
            try:
                loaded = client.load_dataframe(temp, frame, label=label, temporary=True,
                                               analyze=False)
            except LoadError as exc:
                # the loader's fix is its own options; here X is what to change
                raise LoadError(f"X: {exc.message}", column=exc.column,
                                advice="change that column of X first" if exc.fix
                                else exc.advice) from None
            # every column of X is a feature, whatever the loader would suggest
            return replace(loaded, features=", ".join(quote_ident(c) for c in cols))

        self._fit_loaded(load, classes)

    def _fit_loaded(self, load: Any, classes: np.ndarray | None) -> None:
        kind = self._model_kind(None if classes is None else len(classes))
        params = self._train_params(table_fit=False)
        name = self.model_name
        with self._connect() as client:
            conn = client.connection
            # rolled back: the temporary table and the model go with it
            with conn.transaction(force_rollback=True):
                loaded = load(client, _FIT_TABLE)
                params.update(loaded.train_params())
                params.pop("model_name", None)
                model = client.train(_FIT_TABLE, kind, **params)
            model.relation = "(arrays)"
            if name is not None:
                doc = model.to_dict()
                doc["relation"] = "(arrays)"
                model = client.import_model(doc, name=name, replace=True)
        self._set_fitted(model, classes)

    def _set_fitted(self, model: Model, classes: np.ndarray | None) -> None:
        self.model_ = model
        self.model_name_ = self.model_name
        self.history_ = list(model.history)
        self.n_iter_ = model.epochs
        self.intercept_ = model.intercept
        # model.classes[k] is the k-th output's label in the server's answers;
        # classes_[k] is what we return for it
        self._server_classes = model.classes

    @classmethod
    def from_model(cls, model_name: str, dsn: str | None = None) -> _SGDBase:
        """A fitted estimator around a model stored in the database (its
        model_name is set, so predictions on tables use it directly)."""
        with connect(dsn, progress=False) as client:
            model = client.get_model(model_name)
        losses = {kind: loss for loss, kind in cls._loss_models.items()}
        if "log_loss" in cls._loss_models:
            losses["softmax"] = "log_loss"  # log_loss's model for several classes
        if model.model not in losses:
            raise ValueError(f'model "{model_name}" is a {model.model} model; '
                             f"{cls.__name__} takes {', '.join(sorted(losses))} models")
        est = cls(dsn, loss=losses[model.model], model_name=model_name)
        classes = None if model.classes is None else np.asarray(model.classes)
        est._set_fitted(model, classes)
        est.n_features_in_ = model.n_features
        return est

    # -- using the model --------------------------------------------------------------

    def _decision(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        cols = getattr(self, "_frame_columns", None)
        if cols is not None:
            # fitted on a frame of columns: the same columns, encoded as the
            # server encodes them
            if not (hasattr(X, "columns") and hasattr(X, "iloc")):
                raise ValueError(f"{type(self).__name__} was fitted on a DataFrame with "
                                 f"columns {cols}; predict takes a DataFrame with them")
            missing = [c for c in cols if c not in [str(k) for k in X.columns]]
            if missing:
                raise ValueError(f"the DataFrame lacks the fitted columns {missing}")
            frame = X.copy()
            frame.columns = [str(k) for k in X.columns]
            self._check_nan(_nan_columns(frame[cols]))
            return self.model_.decision_function(frame[cols].astype(object).where(
                frame[cols].notna(), None))
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False,
                          ensure_all_finite="allow-nan")
        nan_cols = _nan_columns(X, getattr(self, "feature_names_in_", None))
        if nan_cols and issparse(X):
            raise ValueError(f"Input X contains NaN in {', '.join(nan_cols[:10])}; a sparse "
                             "matrix's entries are not imputed")
        self._check_nan(nan_cols)
        if issparse(X):
            # in original units the transform is folded into the weights
            out = np.asarray(X @ self.model_.coef.T) + self.model_.intercept
            return out[:, 0] if out.shape[1] == 1 else out
        return self.model_.decision_function(X)

    def _check_nan(self, nan_cols: list[str]) -> None:
        """Rows with a missing number are scored only by a model that
        imputes them: a NaN score must never become a class."""
        if nan_cols and self.model_.missing == "skip":
            raise _nan_error(self, nan_cols, True)

    def _in_database(self, source: Any, where: str | None, run: Any) -> Any:
        """run(client, model_name) with the fitted model in the database:
        the stored one, or a copy imported in a transaction rolled back
        afterwards."""
        check_is_fitted(self)
        with self._connect() as client:
            if self.model_name_ is not None:
                return run(client, self.model_name_)
            with client.connection.transaction(force_rollback=True):
                name = f"corgipile_estimator_{uuid.uuid4().hex[:12]}"
                client.import_model(self.model_.to_dict(), name=name)
                return run(client, name)

    def _server_predict(self, source: Any, where: str | None) -> np.ndarray:
        return self._in_database(source, where,
                                 lambda client, name: client.predict(name, source, where=where))

    def _server_score(self, source: Any, where: str | None) -> float:
        metric = self._metric

        def run(client: Client, name: str) -> float:
            src = client._source(source, where)
            relation = None if src.query is not None else _relation_sql(
                client.connection, src.relation)
            result = metrics.evaluate(client.connection, name, relation=relation,
                                      query=src.query)
            value = result[metric]
            # score() is a float, as scikit-learn's: NaN for a NULL metric
            return float("nan") if value is None else float(value)

        return self._in_database(source, where, run)

    _metric = ""
    _y_numeric = False

    def _score(self, mixin: Any, X: Any, y: Any, sample_weight: Any,
               where: str | None) -> float:
        """Accuracy (classifier) or R² (regressor): on arrays X, y as
        scikit-learn computes it (mixin's score), or in the database on a
        table / query X (against its label column)."""
        if _is_source(X):
            if y is not None:
                raise ValueError("y is given by the table's label column; pass y only "
                                 "with arrays")
            if sample_weight is not None:
                raise ValueError("sample_weight applies to arrays only")
            return self._server_score(X, where)
        return float(mixin.score(self, X, y, sample_weight=sample_weight))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.seed is None
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = self.missing != "skip"
        return tags


def _has_proba(est: Any) -> bool:
    """predict_proba exists for loss="log_loss" only, as in scikit-learn."""
    if est.loss != "log_loss":
        raise AttributeError(f"predict_proba is only available for loss='log_loss', "
                             f"not loss={est.loss!r}")
    return True


class SGDClassifier(ClassifierMixin, _SGDBase):
    """Linear classifier trained by SGD in the database.

    loss: "hinge" (model svm; two classes) or "log_loss" (model logistic for
    two classes, softmax for more; gives predict_proba). The other
    parameters are corgipile.train's; see the module docstring for dsn,
    verbose and model_name.
    """

    _loss_models = {"hinge": "svm", "log_loss": "logistic"}
    _metric = "accuracy"

    def __init__(self, dsn: str | None = None, *, loss: str = "hinge",
                 model_name: str | None = None, label: str = "label",
                 features: str = "features", feature_indices: str | None = None,
                 n_features: int | None = None, shuffle: str = "corgipile",
                 learning_rate: float | None = None, decay: float = 0.95, max_epoch_num: int | None = None,
                 batch_size: int = 1, l2: float | None = None, block_size: str | None = None,
                 buffer_size: str | None = None, seed: int | None = None,
                 double_buffer: bool = True, validation: str | None = None, l1: float = 0.0,
                 tolerance: float | None = None, n_iter_no_change: int | None = None,
                 warm_start: str | None = None, standardize: str = "auto",
                 max_categories: int = 1000, workers: int = 1,
                 average: bool | None = None, missing: str = "skip",
                 missing_indicator: bool = False,
                 verbose: bool = False) -> None:
        self.dsn = dsn
        self.loss = loss
        self.model_name = model_name
        self.label = label
        self.features = features
        self.feature_indices = feature_indices
        self.n_features = n_features
        self.shuffle = shuffle
        self.learning_rate = learning_rate
        self.decay = decay
        self.max_epoch_num = max_epoch_num
        self.batch_size = batch_size
        self.l2 = l2
        self.block_size = block_size
        self.buffer_size = buffer_size
        self.seed = seed
        self.double_buffer = double_buffer
        self.validation = validation
        self.l1 = l1
        self.tolerance = tolerance
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.standardize = standardize
        self.max_categories = max_categories
        self.average = average
        self.workers = workers
        self.missing = missing
        self.missing_indicator = missing_indicator
        self.verbose = verbose

    def _model_kind(self, n_classes: int | None) -> str:
        if n_classes is not None and n_classes > 2:
            if self.loss != "log_loss":
                raise ValueError(
                    f"Only binary classification is supported with loss={self.loss!r} (an "
                    f"SVM), but y has {n_classes} classes; use loss='log_loss' (softmax "
                    "regression) for several classes")
            return "softmax"
        if n_classes is None and self.loss == "log_loss":
            return "logistic"
        return self._loss_models[self.loss]

    def _table_classes(self, client: Client, source: Any, where: str | None) -> int | None:
        if self.loss != "log_loss":
            return None  # svm: the engine checks the labels
        # the engine reads label as SQL does: "Kind" keeps its case, Kind folds
        label = sql.Identifier(_ident(self.label))
        src = client._source(source, where)
        from_item = metrics.source_sql(
            None if src.query is not None else _relation_sql(client.connection, src.relation),
            src.query)
        row = client.connection.execute(sql.SQL(
            "SELECT pg_catalog.count(*) FROM (SELECT DISTINCT s.{} FROM {} "
            "WHERE s.{} IS NOT NULL LIMIT 3) d").format(
                label, from_item, label),
            src.query_params if src.query is not None else None).fetchone()
        return int(row[0]) if row else None

    def _encode_y(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes; "
                             f"y has only one class: {classes[0]!r}")
        if len(classes) == 2:
            return np.where(codes == 1, 1, -1).astype(np.int64), classes
        return codes.astype(np.int64), classes

    def _set_fitted(self, model: Model, classes: np.ndarray | None) -> None:
        super()._set_fitted(model, classes)
        self.classes_ = classes if classes is not None else np.asarray(model.classes)
        self.coef_ = model.coef

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, *,
              where: str | None = None) -> float:
        """Accuracy on arrays X, y, or on a table / query X (computed by the
        database, against its label column)."""
        return self._score(ClassifierMixin, X, y, sample_weight, where)

    def decision_function(self, X: Any) -> np.ndarray:
        """w·x + b for each row of an array (binary: shape (n,), positive
        means classes_[1]; softmax: shape (n, n_classes)), computed locally."""
        if _is_source(X):
            raise ValueError("decision_function takes an array; for a table use predict "
                             "or predict_proba, which run in the database")
        return self._decision(X)

    def predict(self, X: Any, *, where: str | None = None) -> np.ndarray:
        """The predicted class (one of classes_) of each row of an array, or
        of each row of a table / query (computed by the database)."""
        if _is_source(X):
            check_is_fitted(self)
            raw = self._server_predict(X, where)
            return self._from_server(raw)
        scores = self._decision(X)
        index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[index]

    def _from_server(self, raw: np.ndarray) -> np.ndarray:
        """Server answers (model.classes' values) as classes_."""
        keys = self._server_classes or []
        lookup = {_key(c): k for k, c in enumerate(keys)}
        index = np.array([lookup[_key(v)] for v in raw], dtype=int)
        return self.classes_[index] if len(index) else self.classes_[:0]

    @available_if(_has_proba)
    def predict_proba(self, X: Any, *, where: str | None = None) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), columns in classes_
        order (loss="log_loss" only)."""
        check_is_fitted(self)
        if self.model_.model not in ("logistic", "softmax"):
            raise AttributeError("predict_proba needs loss='log_loss' (a logistic or "
                                 f"softmax model), not a {self.model_.model} model")
        if _is_source(X):
            def run(client: Client, name: str) -> np.ndarray:
                src = client._source(X, where)
                from_item = metrics.source_sql(
                    None if src.query is not None else _relation_sql(client.connection,
                                                                     src.relation),
                    src.query)
                rows = client.connection.execute(
                    sql.SQL("SELECT corgipile.predict_proba({}, s) FROM {}").format(
                        sql.Literal(name), from_item)).fetchall()
                return np.array([r[0] for r in rows], dtype=np.float64).reshape(len(rows), -1)

            p = self._in_database(X, where, run)
            return np.column_stack([1.0 - p[:, 0], p[:, 0]]) if p.shape[1] == 1 else p
        scores = self._decision(X)
        if scores.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-scores))
            return np.column_stack([1.0 - p1, p1])
        z = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(z)
        out: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return out

    @available_if(_has_proba)
    def predict_log_proba(self, X: Any, *, where: str | None = None) -> np.ndarray:
        """log of predict_proba."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X, where=where))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # hinge is binary only (softmax is log_loss's multiclass model)
        tags.classifier_tags.multi_class = self.loss == "log_loss"
        return tags


class SGDRegressor(RegressorMixin, _SGDBase):
    """Linear regression trained by SGD in the database (model "linear").

    loss: "squared_error", the only one. The other parameters are
    corgipile.train's; see the module docstring for dsn, verbose and
    model_name.
    """

    _loss_models = {"squared_error": "linear"}
    _metric = "r2"
    _y_numeric = True

    def __init__(self, dsn: str | None = None, *, loss: str = "squared_error",
                 model_name: str | None = None, label: str = "label",
                 features: str = "features", feature_indices: str | None = None,
                 n_features: int | None = None, shuffle: str = "corgipile",
                 learning_rate: float | None = None, decay: float = 0.95, max_epoch_num: int | None = None,
                 batch_size: int = 1, l2: float | None = None, block_size: str | None = None,
                 buffer_size: str | None = None, seed: int | None = None,
                 double_buffer: bool = True, validation: str | None = None, l1: float = 0.0,
                 tolerance: float | None = None, n_iter_no_change: int | None = None,
                 warm_start: str | None = None, standardize: str = "auto",
                 max_categories: int = 1000, workers: int = 1,
                 average: bool | None = None, missing: str = "skip",
                 missing_indicator: bool = False,
                 verbose: bool = False) -> None:
        self.dsn = dsn
        self.loss = loss
        self.model_name = model_name
        self.label = label
        self.features = features
        self.feature_indices = feature_indices
        self.n_features = n_features
        self.shuffle = shuffle
        self.learning_rate = learning_rate
        self.decay = decay
        self.max_epoch_num = max_epoch_num
        self.batch_size = batch_size
        self.l2 = l2
        self.block_size = block_size
        self.buffer_size = buffer_size
        self.seed = seed
        self.double_buffer = double_buffer
        self.validation = validation
        self.l1 = l1
        self.tolerance = tolerance
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.standardize = standardize
        self.max_categories = max_categories
        self.average = average
        self.workers = workers
        self.missing = missing
        self.missing_indicator = missing_indicator
        self.verbose = verbose

    def _encode_y(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        return np.asarray(y, dtype=np.float64), None

    def _set_fitted(self, model: Model, classes: np.ndarray | None) -> None:
        super()._set_fitted(model, classes)
        self.coef_ = model.coef[0]

    def score(self, X: Any, y: Any = None, sample_weight: Any = None, *,
              where: str | None = None) -> float:
        """R² on arrays X, y, or on a table / query X (computed by the
        database, against its label column)."""
        return self._score(RegressorMixin, X, y, sample_weight, where)

    def predict(self, X: Any, *, where: str | None = None) -> np.ndarray:
        """Predicted values for the rows of an array (computed locally) or
        of a table / query (computed by the database)."""
        if _is_source(X):
            return np.asarray(self._server_predict(X, where), dtype=np.float64)
        return np.asarray(self._decision(X), dtype=np.float64)


def _key(value: Any) -> Any:
    """A class value as the server returns it: numbers as float, else text."""
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return float(value)
    return str(value)
