"""scikit-learn-style estimators over corgipile.train.

>>> clf = corgipile.SGDClassifier(client, model="svm", max_epoch_num=10, seed=1)
>>> clf.fit("points")                    # a table, a SELECT query, or arrays
>>> clf.predict("SELECT * FROM new_points")
>>> clf.score("heldout")                 # accuracy
>>> clf.coef_, clf.intercept_

They follow scikit-learn's conventions (parameters in ``__init__``,
``get_params``/``set_params``, fitted attributes ending in ``_``) without
requiring scikit-learn. Training runs in the database: ``fit`` on a table
or query never moves the data; ``fit(X, y)`` on arrays first loads them
into a temporary table with COPY.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from .client import Client
from .models import Model

__all__ = ["SGDClassifier", "SGDRegressor"]


class _SGDBase:
    _default_model = "svm"
    _kinds: tuple[str, ...] = ()

    def __init__(self, client: Client, model: str | None = None, **params: Any) -> None:
        self.client = client
        self.model = model if model is not None else self._default_model
        self.params = dict(params)

    # -- scikit-learn protocol ---------------------------------------------------

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"client": self.client, "model": self.model, **self.params}

    def set_params(self, **params: Any) -> _SGDBase:
        for key, value in params.items():
            if key in ("client", "model"):
                setattr(self, key, value)
            else:
                self.params[key] = value
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in {"model": self.model, **self.params}.items())
        return f"{type(self).__name__}({args})"

    # -- fitting -------------------------------------------------------------------

    def fit(self, data: Any, y: Any = None, *, where: str | None = None,
            progress: bool | None = None, callback: Any = None) -> _SGDBase:
        """Train on a table name, a SELECT query, or arrays X, y.

        With model_name among the parameters, a refit replaces that model;
        without, every fit stores a new model with a generated name."""
        if self.model.lower() not in self._kinds:
            raise ValueError(f"{type(self).__name__} takes model in {self._kinds}, "
                             f"not {self.model!r}")
        params = dict(self.params)
        replace = params.get("model_name") is not None
        if isinstance(data, str) or hasattr(data, "as_string"):
            if y is not None:
                raise ValueError("y is given by the table's label column; pass y only "
                                 "with arrays")
            fitted = self.client.train(data, self.model, where=where, replace=replace,
                                       progress=progress, callback=callback, **params)
        else:
            if y is None:
                raise ValueError("fit(X, y) on arrays needs y")
            temp = f"corgipile_fit_{uuid.uuid4().hex[:12]}"
            loaded = self.client.load_numpy(temp, data, y, temporary=True, analyze=False)
            for key, value in loaded.train_params().items():
                params.setdefault(key, value)
            try:
                if params.get("model_name") is None:
                    params["model_name"] = self._generated_name()
                fitted = self.client.train(temp, self.model, replace=replace,
                                           progress=progress, callback=callback, **params)
                self.client.connection.execute(
                    "SELECT corgipile.annotate_model(%s, '(arrays)')", (fitted.name,))
                fitted.relation = "(arrays)"
            finally:
                from psycopg import sql

                self.client.connection.execute(
                    sql.SQL("DROP TABLE IF EXISTS pg_temp.{}").format(sql.Identifier(temp)))
        self._set_fitted(fitted)
        return self

    def _generated_name(self) -> str:
        row = self.client.connection.execute(
            "SELECT format('arrays_%%s_%%s', %s::text, nextval('corgipile.model_name_seq'))",
            (self.model.lower(),)).fetchone()
        assert row is not None
        return str(row[0])

    def _set_fitted(self, model: Model) -> None:
        self.model_ = model
        self.model_name_ = model.name
        self.n_features_in_ = model.n_features
        self.history_ = model.history
        self.n_iter_ = model.epochs

    def _check_fitted(self) -> Model:
        model: Model | None = getattr(self, "model_", None)
        if model is None:
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet: call fit() first")
        return model

    @classmethod
    def from_model(cls, client: Client, model_name: str) -> _SGDBase:
        """An estimator around a model already stored in the database."""
        model = client.get_model(model_name)
        est = cls(client, model.model)
        est._set_fitted(model)
        return est

    # -- using the model ---------------------------------------------------------

    def predict(self, data: Any, *, where: str | None = None) -> np.ndarray:
        """Predictions for a table, a SELECT query, or an array of rows."""
        model = self._check_fitted()
        return self.client.predict(model.name, data, where=where)

    def _score_arrays(self, pred: np.ndarray, y: np.ndarray) -> float:
        raise NotImplementedError

    def _metric(self) -> str:
        raise NotImplementedError

    def score(self, data: Any, y: Any = None, *, where: str | None = None) -> float:
        """Accuracy (classifier) or R² (regressor) on a table, a query, or
        arrays X, y."""
        model = self._check_fitted()
        if y is None:
            if not (isinstance(data, str) or hasattr(data, "as_string")):
                raise ValueError("score(X, y) on arrays needs y")
            src = self.client._source(data, where)
            from . import metrics
            from .client import _relation_sql

            relation = None if src.query is not None else _relation_sql(
                self.client.connection, src.relation)
            result = metrics.evaluate(self.client.connection, model.name, relation=relation,
                                      query=src.query)
            return float(result[self._metric()])
        pred = self.predict(data)
        return self._score_arrays(pred, np.asarray(y))


class SGDClassifier(_SGDBase):
    """Linear classifier trained by SGD in the database: model "svm"
    (hinge loss), "logistic"/"lr", or "softmax" (several classes)."""

    _default_model = "svm"
    _kinds = ("svm", "logistic", "lr", "softmax")

    def _set_fitted(self, model: Model) -> None:
        super()._set_fitted(model)
        self.classes_ = np.array(model.classes if model.classes is not None else [])
        self.coef_ = model.coef
        self.intercept_ = model.intercept

    def _metric(self) -> str:
        return "accuracy"

    def _score_arrays(self, pred: np.ndarray, y: np.ndarray) -> float:
        y = y.astype(np.float64) if y.dtype == np.bool_ else y
        return float(np.mean(pred == y))

    def decision_function(self, x: Any) -> np.ndarray:
        """w·x + b for each row of an array, computed locally."""
        return self._check_fitted().decision_function(x)


class SGDRegressor(_SGDBase):
    """Linear regression trained by SGD in the database (model "linear")."""

    _default_model = "linear"
    _kinds = ("linear",)

    def _set_fitted(self, model: Model) -> None:
        super()._set_fitted(model)
        self.coef_ = model.coef[0]
        self.intercept_ = model.intercept

    def _metric(self) -> str:
        return "r2"

    def _score_arrays(self, pred: np.ndarray, y: np.ndarray) -> float:
        y = y.astype(np.float64)
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        ss_res = float(np.sum((y - pred) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot else float("nan")
