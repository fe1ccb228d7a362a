"""corgipile: the Python client of the corgipile PostgreSQL extension.

In-database SGD with CorgiPile's two-level shuffle, from Python::

    import corgipile

    client = corgipile.connect("dbname=ml")          # or the PG* variables
    client.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 10")
    model = client.train("points", "logistic", learning_rate=0.05, seed=1)
    rows = client.execute("SELECT id, label FROM points PREDICT BY " + model.name)

See README.md for the full tour: statements, models, estimators, loaders
and the ``corgipile`` command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import Client, Result, connect
from .errors import (
    ConnectionTypeError,
    CorgipileError,
    ModelExists,
    ModelFormatError,
    ModelNotFound,
    ParameterError,
    StatementError,
    TrainingCancelled,
    TrainingInterrupted,
)
from .loaders import LoadResult
from .models import Epoch, Model, ModelInfo
from .training import EpochProgress

__version__ = "0.4.0"

if TYPE_CHECKING:  # pragma: no cover
    from .estimators import SGDClassifier, SGDRegressor


def __getattr__(name: str) -> Any:
    # the estimators need scikit-learn, an optional dependency: import them
    # on first use so that the rest of the client works without it
    if name in ("SGDClassifier", "SGDRegressor"):
        try:
            from . import estimators
        except ImportError as exc:
            raise ImportError(f"corgipile.{name} is a scikit-learn estimator and needs "
                              "scikit-learn: pip install 'corgipile[sklearn]'") from exc
        return getattr(estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Client",
    "Result",
    "connect",
    "Model",
    "ModelInfo",
    "Epoch",
    "EpochProgress",
    "LoadResult",
    "SGDClassifier",
    "SGDRegressor",
    "CorgipileError",
    "StatementError",
    "ParameterError",
    "ModelNotFound",
    "ModelExists",
    "ModelFormatError",
    "TrainingCancelled",
    "TrainingInterrupted",
    "ConnectionTypeError",
    "__version__",
]
