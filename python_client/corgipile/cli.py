"""The ``corgipile`` command: train, predict, evaluate, models, load, sql
and bench, against the database given by --dsn or the PG* variables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ._format import cell, format_table, to_json
from .errors import (
    CorgipileError,
    LoadError,
    ModelExists,
    ModelNotFound,
    StatementError,
    TrainingInterrupted,
)

__all__ = ["main", "build_parser"]

PROG = "corgipile"


class CliError(CorgipileError):
    """A mistake in the command line, with a hint on how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

DESCRIPTION = """\
Train and use linear models (SVM, logistic, linear and softmax regression)
inside PostgreSQL with the corgipile extension, which shuffles the data the
CorgiPile way as it reads the table, so even tables stored clustered by
label train as if fully shuffled.

The database: --dsn 'host=... dbname=... user=...' (or a postgresql:// URI),
or else the usual PG* environment variables (PGHOST, PGPORT, PGDATABASE,
PGUSER, PGPASSWORD). The database needs CREATE EXTENSION corgipile."""

EPILOG = """\
a first session:
  corgipile load points points.csv --label y        # CSV -> table "points", label y
  corgipile train points svm --label y --epochs 10 --name demo
  corgipile evaluate demo points                    # accuracy
  corgipile predict demo points --columns id,y --limit 5
  corgipile models                                  # what is stored
  corgipile sql "SELECT * FROM points TRAIN BY logistic WITH label = y, learning_rate = 0.05"

Run `corgipile COMMAND --help` for each command's options."""


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--dsn", default=default, metavar="DSN",
                        help="libpq connection string or URI (default: the PG* environment "
                             "variables)")
    parser.add_argument("--json", action="store_true",
                        default=argparse.SUPPRESS if suppress else False,
                        help="print JSON instead of a table")


# corgipile.train's parameters as options: (flag, param, type, help)
TRAIN_OPTIONS: list[tuple[list[str], str, Any, str]] = [
    (["--name"], "model_name", str,
     "name to store the model under (default: <table>_<model>_<n>)"),
    (["--label"], "label", str, "label column (default: label)"),
    (["--features"], "features", str,
     "feature array column, or comma-separated numeric columns (default: features)"),
    (["--feature-indices"], "feature_indices", str,
     "sparse layout: int[] column of 0-based indices; --features is then the values"),
    (["--n-features"], "n_features", int, "number of features (default: inferred)"),
    (["--shuffle"], "shuffle", str,
     "corgipile (default), block_only, no_shuffle, grab, or another strategy of the engine"),
    (["--learning-rate", "--lr"], "learning_rate", float,
     "first epoch's step size (0.1; 0.01 for linear)"),
    (["--decay"], "decay", float, "learning rate multiplier after each epoch (0.95)"),
    (["--epochs", "--max-epoch-num"], "max_epoch_num", int,
     "number of epochs (default: until the model converges, at most 20, or up to 1000 "
     "on a smaller table; 3 and then the polish on a table of up to 50,000 rows)"),
    (["--batch-size"], "batch_size", int, "mini-batch size (1)"),
    (["--l2"], "l2", float,
     "L2 penalty (default: 1/rows with the default rate, as scikit-learn's C=1; else 0)"),
    (["--block-size"], "block_size", str, "block size, e.g. 10MB or a number of pages"),
    (["--buffer-size"], "buffer_size", str, "buffer size: a percentage of the table, a "
                                            "size, or pages (default: the whole table "
                                            "when it fits maintenance_work_mem, else 10%%)"),
    (["--seed"], "seed", int, "random seed, for reproducible runs"),
    (["--validation"], "validation", str,
     "held-out table scored after each epoch, or a percentage of this table's rows "
     "held out (20%%: the same rows for the same --seed)"),
    (["--l1"], "l1", float, "L1 penalty (0)"),
    (["--tolerance"], "tolerance", float,
     "early stopping: stop when the loss improves by less than this (default: the "
     "default rule, 0.5%% of the averaged model's objective)"),
    (["--n-iter-no-change"], "n_iter_no_change", int,
     "epochs without improvement before stopping (default: 1 for the default rule, "
     "5 with --tolerance)"),
    (["--warm-start"], "warm_start", str,
     "start from this stored model's weights (and, with --shuffle grab, its block order)"),
    (["--standardize"], "standardize", str,
     "scale numeric features: auto (default), on, scale_only or off"),
    (["--max-categories"], "max_categories", int,
     "most distinct values of a text column that is one-hot encoded (1000)"),
    (["--workers"], "workers", int, "processes that train, the leader included (1)"),
    (["--missing"], "missing", str,
     "a NULL number: skip (default: the row is left out), mean, median or zero "
     "(imputed, and predict imputes the same)"),
]


def _add_train(sub: Any) -> None:
    p = sub.add_parser(
        "train", help="train a model on a table, with a live progress bar",
        description="Train a model with corgipile.train() on a table (or on its rows\n"
                    "matching --where) and store it in corgipile.models. Prints one row per\n"
                    "epoch; a progress bar shows the epochs live on a terminal. Ctrl-C\n"
                    "cancels the training on the server.",
        epilog="examples:\n"
               "  corgipile train points svm\n"
               "  corgipile train points logistic --name clf --epochs 10 --lr 0.05 --seed 1\n"
               "  corgipile train points svm --where \"split = 'train'\" "
               "--validation heldout\n"
               "  corgipile train points logistic --validation 20% --seed 1\n"
               "  corgipile train docs lr --features vals --feature-indices idx\n"
               "  corgipile train points svm --set some_new_param=value",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    p.add_argument("table", help="table to train on (schema-qualified if needed)")
    p.add_argument("model", help="svm, logistic (or lr), linear, softmax")
    g = p.add_argument_group("training parameters (those of corgipile.train)")
    for flags, dest, typ, help_text in TRAIN_OPTIONS:
        metavar = {int: "N", float: "NUM"}.get(typ, dest.upper())
        g.add_argument(*flags, dest=f"p_{dest}", type=typ, default=None, help=help_text,
                       metavar=metavar)
    g.add_argument("--no-double-buffer", dest="p_double_buffer", action="store_const",
                   const=False, default=None,
                   help="read the next buffer only after training on the current one")
    g.add_argument("--missing-indicator", dest="p_missing_indicator", action="store_const",
                   const=True, default=None,
                   help="with --missing: add a 0/1 feature for each column that had NULLs")
    g.add_argument("--set", dest="extra", action="append", default=[], metavar="NAME=VALUE",
                   help="any other corgipile.train parameter (repeatable)")
    p.add_argument("--where", metavar="CONDITION",
                   help="train on the rows matching this SQL condition (copied into a "
                        "temporary table first)")
    p.add_argument("--replace", action="store_true",
                   help="drop an existing model of the same --name first")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def _add_predict(sub: Any) -> None:
    p = sub.add_parser(
        "predict", help="predict with a stored model, on a table or one feature vector",
        description="Print a table's rows with a prediction column computed by\n"
                    "corgipile.predict(), or the prediction for one feature vector.",
        epilog="examples:\n"
               "  corgipile predict demo points --columns id,label --limit 10\n"
               "  corgipile predict demo points --where 'id > 100' --csv > predictions.csv\n"
               "  corgipile predict demo --vector 0.8,-0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    p.add_argument("model_name", help="the stored model")
    p.add_argument("table", nargs="?", help="table whose rows to predict")
    p.add_argument("--vector", metavar="X1,X2,...",
                   help="predict this one dense feature vector instead of a table "
                        "(--vector=-1,2 when it starts with a minus)")
    p.add_argument("--columns", default="*", metavar="COL,COL",
                   help="columns to show next to the prediction (default: all)")
    p.add_argument("--where", metavar="CONDITION", help="only the rows matching this condition")
    p.add_argument("--limit", type=int, help="at most this many rows")
    p.add_argument("--csv", action="store_true", help="write CSV (full values) to stdout")
    p.set_defaults(func=cmd_predict)


def _add_evaluate(sub: Any) -> None:
    p = sub.add_parser(
        "evaluate", help="score a stored model on a table (accuracy, R², ...)",
        description="Metrics of a stored model on a table: the server's\n"
                    "corgipile.evaluate() when installed, else accuracy (classifiers) or\n"
                    "R², RMSE and MAE (regression) computed with corgipile.predict().",
        epilog="example:\n  corgipile evaluate demo heldout",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    p.add_argument("model_name")
    p.add_argument("table")
    p.add_argument("--where", metavar="CONDITION", help="only the rows matching this condition")
    p.set_defaults(func=cmd_evaluate)


def _add_models(sub: Any) -> None:
    p = sub.add_parser(
        "models", help="list, show, drop, rename, export or import stored models",
        description="Manage the models in corgipile.models. Without an action, list them.",
        epilog="examples:\n"
               "  corgipile models\n"
               "  corgipile models show demo\n"
               "  corgipile models rename demo svm_v1\n"
               "  corgipile models export svm_v1 -o svm_v1.json\n"
               "  corgipile --dsn 'dbname=prod' models import svm_v1.json\n"
               "  corgipile models drop svm_v1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    a = actions.add_parser("list", help="list the stored models (the default)")
    _common(a, True)
    a = actions.add_parser("show", help="a model's details and per-epoch history")
    _common(a, True)
    a.add_argument("name")
    a.add_argument("--weights", action="store_true", help="print the weights too")
    a = actions.add_parser("drop", help="delete models")
    _common(a, True)
    a.add_argument("names", nargs="+", metavar="name")
    a = actions.add_parser("rename", help="rename a model")
    _common(a, True)
    a.add_argument("old")
    a.add_argument("new")
    a = actions.add_parser("export", help="write a model as JSON (stdout or -o FILE)")
    _common(a, True)
    a.add_argument("name")
    a.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    a = actions.add_parser("import", help="store a model exported as JSON")
    _common(a, True)
    a.add_argument("file", help="the JSON file, or - for stdin")
    a.add_argument("--name", help="store it under this name instead")
    a.add_argument("--replace", action="store_true", help="overwrite a model of that name")
    p.set_defaults(func=cmd_models, action=None)


def _add_load(sub: Any) -> None:
    p = sub.add_parser(
        "load", help="load a CSV, Parquet, LIBSVM/SVMlight or .npz file into a new table (COPY)",
        description="Create a table from a file with COPY.\n\n"
                    "CSV and Parquet columns keep their names and types (boolean, integer,\n"
                    "float, text; CSV types inferred from the first rows, --types overrides);\n"
                    "empty fields and NA are NULL; the server one-hot encodes text columns.\n\n"
                    "layouts:\n"
                    "  auto     CSV: array when every feature is a number, else columns\n"
                    "  array    id, label, features float8[] (the default for .npz)\n"
                    "  columns  id, label, one column per feature (the header's names)\n"
                    "  sparse   id, label, feature_indices int[], features float8[]\n"
                    "           (the default for LIBSVM; 'dense' stores LIBSVM as array)\n\n"
                    "--order stores the rows as given, clustered by label (SGD's worst\n"
                    "case, to see what the shuffle buys), ordered by a feature, or shuffled.",
        epilog="examples:\n"
               "  corgipile load points points.csv --label y\n"
               "  corgipile load points points.csv --layout columns --order label\n"
               "  corgipile load sales sales.csv --label churned --exclude customer_id,notes\n"
               "  corgipile load sales sales.csv --label amount --columns age,visits\n"
               "  corgipile load stops stops.csv --label arrested --types zip=text\n"
               "  corgipile load stops stops.parquet --label arrested\n"
               "  corgipile load rcv1 rcv1_train.binary              # LIBSVM, sparse\n"
               "  corgipile load a9a a9a.txt --format libsvm --layout dense --order label\n"
               "  corgipile load data arrays.npz                     # arrays X and y",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    p.add_argument("table", help="the table to create")
    p.add_argument("file", help="input file")
    p.add_argument("--format", choices=["csv", "parquet", "libsvm", "npz"],
                   help="default: from the extension (.csv, .parquet, .npz; anything else "
                        "is LIBSVM)")
    p.add_argument("--layout", choices=["auto", "array", "columns", "sparse", "dense"],
                   help="table layout (default: auto for CSV, columns for Parquet, array for "
                        ".npz, sparse for LIBSVM)")
    p.add_argument("--types", metavar="COL=TYPE,...",
                   help="CSV and Parquet: column types instead of the inferred ones (boolean, "
                        "integer, bigint, float, real, numeric, text, date, timestamp, "
                        "timestamptz)")
    p.add_argument("--na", metavar="S,S", default=None,
                   help="CSV: the field values read as NULL (default: empty, NA, N/A, NaN, "
                        "nan, NULL, null)")
    p.add_argument("--label", default=None,
                   help="CSV: the label column's name or 0-based number (default: label); "
                        "it keeps its name and type in the table")
    p.add_argument("--columns", metavar="COL,COL",
                   help="CSV: the feature columns to load (default: every column but the "
                        "label)")
    p.add_argument("--exclude", metavar="COL,COL",
                   help="CSV: columns to leave out (ids, free text, ...)")
    p.add_argument("--no-header", action="store_true", help="CSV: the first line is data")
    p.add_argument("--delimiter", default=",", help="CSV field separator (default: ,)")
    p.add_argument("--order", default="given",
                   help="given (default), label, feature:J (index or column name), random")
    p.add_argument("--seed", type=int, help="seed of --order random")
    p.add_argument("--float4", action="store_true", help="store features as float4")
    p.add_argument("--if-exists", choices=["fail", "replace", "append"], default="fail",
                   help="when the table exists (default: fail)")
    p.add_argument("--n-features", type=int, help="LIBSVM: the dimension (default: inferred)")
    p.add_argument("--zero-based", choices=["auto", "yes", "no"], default="auto",
                   help="LIBSVM: are indices 0-based (default: auto)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_load)


def _add_sql(sub: Any) -> None:
    p = sub.add_parser(
        "sql", help="run one statement, TRAIN BY and PREDICT BY included",
        description="Run one SQL statement and print its rows. The client translates\n"
                    "  SELECT * FROM <table> [WHERE ...] TRAIN BY <model> [WITH <p> = <v>, ...]\n"
                    "  SELECT <cols> FROM <table> [WHERE ...] PREDICT BY <model_name>\n"
                    "into corgipile.train / corgipile.predict; anything else runs unchanged.",
        epilog="examples:\n"
               "  corgipile sql \"SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 5\"\n"
               "  corgipile sql \"SELECT id, label FROM points LIMIT 5 PREDICT BY demo\"",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p, True)
    p.add_argument("statement", help="the statement, or - to read it from stdin")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_sql)


BENCH_HELP = "benchmark the shuffle strategies against MADlib, Bismarck and scikit-learn"


def _load_bench() -> tuple[Any, str | None]:
    """(the corgipile.bench module, None), or (None, why it cannot run)."""
    import importlib

    try:
        return importlib.import_module("corgipile.bench"), None
    except ImportError as exc:
        if getattr(exc, "name", None) == "corgipile.bench":
            return None, ("corgipile bench is not available in this installation: the "
                          "corgipile.bench module is missing")
        return None, f"corgipile bench cannot start: {exc}"


def _add_bench(sub: Any, bench: Any) -> None:
    """`bench` is implemented by corgipile.bench, imported only when used."""
    p = sub.add_parser("bench", help=BENCH_HELP, conflict_handler="resolve")
    _common(p, True)
    p.set_defaults(func=cmd_bench, bench=bench)
    if bench is not None:
        bench.add_arguments(p)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(parser, False)
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_train(sub)
    _add_predict(sub)
    _add_evaluate(sub)
    _add_models(sub)
    _add_load(sub)
    _add_sql(sub)
    bench = _load_bench()[0] if _wants_bench(argv) else None
    _add_bench(sub, bench)
    from .proxy import add_subcommand as _add_proxy

    _add_proxy(sub)
    return parser


def _wants_bench(argv: Sequence[str] | None) -> bool:
    args = list(sys.argv[1:] if argv is None else argv)
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--dsn":
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a == "bench"
    return False


# -- commands ---------------------------------------------------------------------

def _client(args: argparse.Namespace, progress: bool | None = None) -> Any:
    from .client import connect

    return connect(args.dsn, progress=progress)


def _print_rows(args: argparse.Namespace, columns: list[str], rows: list[Any]) -> None:
    if args.json:
        print(to_json([dict(zip(columns, r, strict=True)) for r in rows]))
    else:
        print(format_table(columns, rows))


def cmd_train(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key.startswith("p_") and value is not None:
            params[key[2:]] = value
    for item in args.extra:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"--set takes NAME=VALUE, not {item!r}")
        params[name.strip()] = value
    progress = False if (args.no_progress or args.json) else None
    with _client(args, progress) as client:
        model = client.train(args.table, args.model, where=args.where, replace=args.replace,
                             **params)
    if args.json:
        print(to_json({"model_name": model.name, "model": model.model,
                       "relation": model.relation, "n_features": model.n_features,
                       "classes": model.classes, "params": model.params,
                       "history": model.history_records()}))
        return 0
    rows: list[tuple[Any, ...]] = [tuple(e) for e in model.history]
    # the epochs' scores are of iterates on their way; a polished model's own
    # figures on its training rows are the polish's row, as train() returns it
    polish = (model.params or {}).get("polish") or {}
    if "score" in polish:
        rows.append(("polish", polish["rows"], polish["loss"], polish["score"], None, None))
    print(format_table(["epoch", "tuples", "loss", "score", "validation_score", "seconds"], rows))
    last = model.history[-1] if model.history else None
    summary = f'model "{model.name}" stored: {model.model}, {model.n_features} features'
    if "score" in polish and polish["score"] is not None:
        summary += f", training score {polish['score']:.4f} (polished)"
    elif last is not None:
        summary += f", last epoch's training score {last.score:.4f}"
    if last is not None and last.validation_score is not None:
        summary += f", validation {last.validation_score:.4f}"
    print(summary)
    return 0


def _names(text: str) -> sql.Composable:
    if text.strip() == "*":
        return sql.SQL("*")
    from ._sql import ident as _ident

    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise CliError("--columns needs column names", "e.g. --columns id,label")
    return sql.SQL(", ").join(sql.Identifier(_ident(p)) for p in parts)


def cmd_predict(args: argparse.Namespace) -> int:
    import numpy as np

    from ._sql import relation_sql as _relation_sql
    from .loaders import table_name
    from .metrics import predict_sql
    from .statements import filter_query

    with _client(args) as client:
        if args.vector is not None:
            if args.table is not None:
                raise CliError("give either a table or --vector, not both")
            try:
                vec = [float(v) for v in args.vector.split(",")]
            except ValueError:
                raise CliError(f"--vector takes numbers separated by commas, not "
                                     f"{args.vector!r}") from None
            raw = client.predict(args.model_name, [vec])[0]
            pred: Any = (raw if raw is None or isinstance(raw, str) else
                         bool(raw) if isinstance(raw, (bool, np.bool_)) else float(raw))
            if args.json:
                print(to_json({"model_name": args.model_name, "features": vec,
                               "prediction": pred}))
            else:
                print(cell(pred))
            return 0
        if args.table is None:
            raise CliError("give a table to predict on, or --vector X1,X2,...")
        model = client.get_model(args.model_name)
        # the label's type: text and boolean classes through predict_class
        # (as PREDICT BY does)
        ident = table_name(args.table)
        _relation_sql(client.connection, ident.as_string(client.connection))  # exists?
        if args.where:
            source = sql.SQL("({}) AS s").format(filter_query(ident, args.where))
        else:
            source = sql.SQL("{} AS s").format(ident)
        query = sql.SQL("SELECT {cols}, {pred} AS prediction FROM {src}"
                        ).format(cols=_names(args.columns),
                                 pred=predict_sql(model.classes, sql.Literal(args.model_name),
                                                  sql.Identifier("s")),
                                 src=source)
        if args.limit is not None:
            query += sql.SQL(" LIMIT {}").format(sql.Literal(args.limit))
        cur = client.connection.execute(query)
        columns = [c.name for c in cur.description or ()]
        rows = cur.fetchall()
    if args.csv:
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else
                             ("{" + ",".join(map(str, v)) + "}" if isinstance(v, list) else v)
                             for v in row])
        return 0
    _print_rows(args, columns, rows)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.evaluate(args.model_name, args.table, where=args.where)
    if args.json:
        print(to_json(result))
    else:
        print(format_table(["metric", "value"], list(result.items())))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    action = args.action or "list"
    with _client(args) as client:
        if action == "list":
            infos = client.list_models()
            columns = ["name", "model", "relation", "n_features", "epochs", "loss", "score",
                       "validation_score", "created_at", "owner"]
            _print_rows(args, columns, [tuple(i) for i in infos])
        elif action == "show":
            model = client.get_model(args.name)
            doc = model.to_dict()
            if not args.weights:
                doc.pop("weights")
            if args.json:
                print(to_json(doc))
            else:
                for key in ("model_name", "model", "relation", "label", "features",
                            "feature_indices", "n_features", "classes", "created_at", "owner"):
                    print(f"{key:16} {'' if doc[key] is None else doc[key]}")
                print(f"{'params':16} {json.dumps(model.params, sort_keys=True)}")
                if model.weights is not None:
                    print(f"{'intercept':16} "
                          f"{', '.join(f'{b:.6g}' for b in model.scaled_intercept)}")
                if args.weights and model.weights is not None:
                    print(f"{'weights':16} {', '.join(f'{w:.17g}' for w in model.weights)}")
                print()
                print(format_table(list(model.history[0]._fields) if model.history else
                                   ["epoch"], [tuple(e) for e in model.history]))
        elif action == "drop":
            for name in args.names:
                client.drop_model(name)
                if not args.json:
                    print(f'dropped model "{name}"')
            if args.json:
                print(to_json({"dropped": args.names}))
        elif action == "rename":
            client.rename_model(args.old, args.new)
            print(to_json({"renamed": args.old, "to": args.new}) if args.json
                  else f'renamed model "{args.old}" to "{args.new}"')
        elif action == "export":
            text = json.dumps(client.export_model(args.name), indent=2, allow_nan=False)
            if args.output:
                Path(args.output).write_text(text + "\n", encoding="utf-8")
                if not args.json:
                    print(f'exported model "{args.name}" to {args.output}', file=sys.stderr)
            else:
                print(text)
        elif action == "import":
            text = sys.stdin.read() if args.file == "-" else \
                Path(args.file).read_text(encoding="utf-8")
            model = client.import_model(text, name=args.name, replace=args.replace)
            print(to_json({"imported": model.name}) if args.json
                  else f'imported model "{model.name}" ({model.model}, '
                       f'{model.n_features} features)')
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from . import loaders

    path = args.file
    if not os.path.exists(path):
        raise CliError(f"no such file: {path}")
    fmt = args.format or ("csv" if path.lower().endswith((".csv", ".csv.txt")) else
                          "parquet" if path.lower().endswith((".parquet", ".pq")) else
                          "npz" if path.lower().endswith(".npz") else "libsvm")
    common: dict[str, Any] = dict(
        order=args.order, seed=args.seed, feature_type="float4" if args.float4 else "float8",
        if_exists=args.if_exists, progress=False if args.no_progress else None)
    with _client(args) as client:
        conn = client.connection
        if fmt not in ("csv", "parquet") and (args.columns or args.exclude):
            raise CliError("--columns and --exclude apply to CSV and Parquet files",
                           "a LIBSVM or .npz file has no column names")
        if fmt not in ("csv", "parquet") and args.types:
            raise CliError("--types applies to CSV and Parquet files")
        if fmt != "csv" and args.na is not None:
            raise CliError("--na applies to CSV files")
        if fmt == "csv":
            label: Any = args.label if args.label is not None else (
                "label" if not args.no_header else 0)
            if isinstance(label, str) and label.isdigit():
                label = int(label)
            extra: dict[str, Any] = {}
            if args.na is not None:
                extra["na_values"] = args.na.split(",")
            result = loaders.load_csv(conn, args.table, path, label=label,
                                      features=_list(args.columns, "--columns"),
                                      exclude=_list(args.exclude, "--exclude"),
                                      delimiter=args.delimiter, header=not args.no_header,
                                      layout=args.layout or "auto",
                                      types=_types(args.types), **extra, **common)
        elif fmt == "parquet":
            if args.order != "given" or (args.layout or "columns") != "columns":
                raise CliError("a Parquet file loads in file order into the columns layout",
                               "drop --order and --layout")
            try:
                result = loaders.load_parquet(
                    conn, args.table, path, label=args.label or "label",
                    features=_list(args.columns, "--columns"),
                    exclude=_list(args.exclude, "--exclude"), types=_types(args.types),
                    feature_type=common["feature_type"], if_exists=args.if_exists,
                    progress=common["progress"])
            except ImportError as exc:
                raise CliError(str(exc)) from None
        elif fmt == "npz":
            import numpy as np

            with np.load(path, allow_pickle=False) as data:
                keys = set(data.files)
                xk = next((k for k in ("X", "x", "features") if k in keys), None)
                yk = next((k for k in ("y", "Y", "label", "labels") if k in keys), None)
                if xk is None:
                    raise CliError(f"{path}: no array named X (arrays: "
                                         f"{', '.join(sorted(keys))})")
                result = loaders.load_numpy(conn, args.table, data[xk],
                                            data[yk] if yk else None,
                                            layout=_dense_layout(args.layout), **common)
        else:
            zero: bool | str = {"yes": True, "no": False}.get(args.zero_based, "auto")
            result = loaders.load_libsvm(conn, args.table, path,
                                         layout=args.layout or "sparse",
                                         n_features=args.n_features, zero_based=zero,
                                         **common)
    if args.json:
        from dataclasses import asdict

        print(to_json({**asdict(result), "train_params": result.train_params()}))
        return 0
    print(f"loaded {result.rows} rows into {args.table} ({result.layout} layout, "
          f"{result.n_features} features)")
    hint = " ".join(f"--{k.replace('_', '-')} {_shell(str(v))}"
                    for k, v in result.train_params().items()
                    if (k, v) not in (("features", "features"), ("label", "label")))
    if result.suggested_model is not None:
        print(f"train it with: corgipile train {_shell(args.table)} "
              f"{result.suggested_model}{' ' + hint if hint else ''}   # {result.suggestion}")
    elif result.suggestion:
        print(f"note: {result.suggestion}")
    for column, why in result.left_out.items():
        print(f"  not in --features: {column}: {why}")
    return 0


def _load_options(fix: dict[str, Any]) -> str:
    """A loader's fix (its keyword arguments) as the load command's options."""
    out = []
    for name, value in fix.items():
        if name == "types":
            out.append("--types " + (_shell(",".join(f"{c}={t}" for c, t in value.items()))
                                     if value else "COL=TYPE,..."))
        elif name in ("features", "exclude", "na_values"):
            option = {"features": "--columns", "exclude": "--exclude", "na_values": "--na"}
            out.append(f"{option[name]} " + (_shell(",".join(value)) if value else "COL,COL"))
        elif name == "label":
            out.append("--label " + (_shell(str(value)) if value is not None else "COLUMN"))
        elif name == "feature_type":
            out.append("--float4" if value == "float4" else "")
        elif name == "header":
            out.append("--no-header" if value is False else "")
        else:
            out.append(f"--{name.replace('_', '-')} {_shell(str(value))}")
    return " ".join(o for o in out if o)


def _types(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    out = {}
    for item in text.split(","):
        name, eq, typ = item.partition("=")
        if not eq or not name.strip() or not typ.strip():
            raise CliError(f"--types takes COL=TYPE,...: cannot read {item!r}")
        out[name.strip()] = typ.strip()
    return out


def _list(text: str | None, option: str) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise CliError(f"{option} needs column names separated by commas")
    return names


def _dense_layout(layout: str | None) -> str:
    return "array" if layout in (None, "dense", "auto") else layout


def _shell(text: str) -> str:
    import shlex

    return shlex.quote(text)


def cmd_sql(args: argparse.Namespace) -> int:
    statement = sys.stdin.read() if args.statement == "-" else args.statement
    progress = False if (args.no_progress or args.json) else None
    with _client(args, progress) as client:
        result = client.execute(statement)
        if result.description is None:
            if args.json:
                print(to_json({"status": result.statusmessage, "rowcount": result.rowcount}))
            else:
                print(result.statusmessage or "")
            return 0
        columns = result.columns
        rows = result.fetchall()
    _print_rows(args, columns, rows)
    if result.kind == "train" and not args.json:
        print(f'model "{result.model_name}" stored')
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.bench is None:  # pragma: no cover - main() reports a missing module first
        _report("corgipile bench is not available")
        return 2
    return int(args.bench.run(args) or 0)


# -- entry point --------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    if _wants_bench(argv):
        bench, error = _load_bench()
        if error is not None:
            _report(error, "install the client with its bench extra: "
                           "pip install 'corgipile[bench]'")
            return 2
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (TrainingInterrupted, KeyboardInterrupt):
        print(f"\n{PROG}: interrupted; the server query was cancelled and nothing was stored",
              file=sys.stderr)
        return 130
    except psycopg.Error as exc:
        diag = getattr(exc, "diag", None)
        message = (diag.message_primary if diag is not None and diag.message_primary
                   else str(exc).strip())
        server_hint = diag.message_hint if diag is not None else None
        _report(message, _hint_for(args, exc) or server_hint)
        return 1
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    except StatementError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)  # its text points at the statement
        return 1
    except (CorgipileError, ValueError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, ModelExists):  # the Python advice (replace=True) is the hint's
            message = message.split(";")[0]
        if isinstance(exc, LoadError):  # the fix, in this command's options, is the hint's
            message = exc.message
        _report(message, _hint_for(args, exc))
        return 1


def _report(message: str, hint: str | None = None) -> None:
    """Every error the same way: `corgipile: error: ...`, then a HINT line
    when there is something to do about it."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    if hint:
        print(f"HINT: {hint}", file=sys.stderr)


def _hint_for(args: argparse.Namespace, exc: BaseException) -> str | None:
    """The command line's own hint for an error, where the command has an
    option that fixes it (it replaces the server's, which speaks SQL)."""
    command = getattr(args, "command", None)
    action = getattr(args, "action", None)
    if isinstance(exc, CliError):
        return exc.hint
    if isinstance(exc, LoadError):
        return exc.hint(_load_options(exc.fix) if exc.fix else None)
    if isinstance(exc, ModelExists) or isinstance(exc, psycopg.errors.DuplicateObject):
        if command == "train":
            return ("pass --replace to overwrite it, or choose another --name "
                    "(`corgipile models` lists the stored models)")
        if command == "models" and action == "import":
            return "pass --replace to overwrite it, or --name to store it under another name"
        if command == "models" and action == "rename":
            return "choose another name, or drop that model first (corgipile models drop NAME)"
    if isinstance(exc, ModelNotFound):
        return "`corgipile models` lists the stored models"
    if isinstance(exc, psycopg.errors.DuplicateTable) and command == "load":
        return "pass --if-exists replace to overwrite the table, or --if-exists append"
    if isinstance(exc, psycopg.OperationalError):
        return ("give the database with --dsn 'host=... dbname=... user=...' or the PG* "
                "variables (PGHOST, PGPORT, PGDATABASE, PGUSER)")
    if isinstance(exc, (psycopg.errors.UndefinedFunction, psycopg.errors.UndefinedTable,
                        psycopg.errors.InvalidSchemaName)) and "corgipile." in str(exc) \
            and command != "sql":
        return "run CREATE EXTENSION corgipile in this database"
    return None


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
