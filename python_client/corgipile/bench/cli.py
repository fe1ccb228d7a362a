"""`corgipile bench`: the engine's shuffles against MADlib, Bismarck and
scikit-learn, on generated tables or on yours."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from .. import strategies as shuffles
from . import bismarck, engine, madlib, sklearn_runner
from ._db import Stopwatch, value
from .config import TrainSettings
from .datasets import ORDERS, Dataset, ScanClock, describe_table, synthetic
from .results import FAILED, OK, Run, format_table, summarize, to_document, write_files

DEFAULT_STRATEGIES = ",".join(shuffles.PAPER)
BASELINES = ("bismarck", "madlib", "sklearn")
BASELINE_ORDERS = ("shuffle_once", "no_shuffle")

DESCRIPTION = """\
Measure time-to-accuracy and per-epoch time of the engine's shuffle
strategies and of the baselines users would otherwise pick:
  engine     corgipile.train() with each --strategies entry (strategies the
             server does not know are skipped with a message);
  bismarck   a Bismarck-style C aggregate (benchmarks/bismarck, install with
             `make -C benchmarks/bismarck install`), one call per epoch, over
             a copy shuffled once with ORDER BY random() (copy time counted)
             and over the table as stored;
  madlib     madlib.svm_classification / madlib.logregr_train (igd and irls), when
             the database has MADlib (schema "madlib"); skipped otherwise;
  sklearn    SGDClassifier / SGDRegressor on the table exported with COPY
             (export time counted).
Every method gets the same learning rate, decay, epochs and L2.  Figures are
ratios to a plain sequential scan of the same columns measured in the same
run, so they hold on a noisy machine.  Writes results.json, epochs.csv,
summary.csv and PNG plots into --output."""

EPILOG = """\
examples:
  corgipile bench                                   # synthetic 100k x 20, clustered by label
  corgipile bench --rows 1000000 --models svm --epochs 10
  corgipile bench --table higgs_train:higgs_test --no-synthetic
  corgipile bench --table points --features 'x1, x2, x3' --label y
  python -m corgipile.bench --dsn 'host=localhost dbname=ml' --baselines bismarck,sklearn"""


def _add_once(parser: argparse.ArgumentParser, *flags: str, **kw: Any) -> None:
    """Add an option unless the caller's parser already has it (the main
    CLI may define --dsn and --json for every subcommand)."""
    try:
        parser.add_argument(*flags, **kw)
    except argparse.ArgumentError:
        pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register `corgipile bench`'s options on `parser` (a subcommand parser)."""
    if parser.description is None:
        parser.description = DESCRIPTION
        parser.epilog = EPILOG
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _add_once(parser, "--dsn", default=argparse.SUPPRESS,
              help="libpq connection string (default: the PG* environment variables)")
    _add_once(parser, "--json", action="store_true", default=argparse.SUPPRESS,
              help="print the full results as JSON on stdout instead of a table")

    data = parser.add_argument_group("data")
    data.add_argument("--table", action="append", default=[], metavar="TRAIN[:TEST]",
                      help="train on this table (repeatable); TEST is a held-out table with the "
                           "same columns, else scores are taken on TRAIN itself")
    data.add_argument("--label", default="label", help="label column of --table (default: label)")
    data.add_argument("--features", default="features",
                      help="feature array column of --table, or a comma-separated list of "
                           "numeric columns (default: features)")
    data.add_argument("--synthetic", dest="synthetic", action="store_true", default=None,
                      help="also generate a synthetic table (the default without --table)")
    data.add_argument("--no-synthetic", dest="synthetic", action="store_false")
    data.add_argument("--rows", type=int, default=100_000,
                      help="rows of the synthetic training table (default: 100000)")
    data.add_argument("--dims", type=int, default=20, help="features of the synthetic table (default: 20)")
    data.add_argument("--test-rows", type=int, default=None,
                      help="rows of the synthetic held-out table (default: rows / 5)")
    data.add_argument("--order", choices=ORDERS, default="clustered",
                      help="storage order of the synthetic table: clustered by label (the paper's "
                           "worst case), ordered by the first feature, or random (default: clustered)")
    data.add_argument("--bayes-accuracy", type=float, default=0.95,
                      help="accuracy of the best linear classifier on the synthetic data (default: 0.95)")

    meth = parser.add_argument_group("methods")
    meth.add_argument("--models", default="svm,logistic",
                      help="comma-separated models (default: svm,logistic; 'linear' too)")
    meth.add_argument("--strategies", default=DEFAULT_STRATEGIES,
                      help=f"comma-separated engine shuffles (default: {DEFAULT_STRATEGIES})")
    meth.add_argument("--baselines", default=",".join(BASELINES),
                      help="comma-separated baselines: bismarck, madlib, sklearn, or none "
                           "(default: all three)")
    meth.add_argument("--baseline-orders", default=",".join(BASELINE_ORDERS),
                      help="data orders for Bismarck and MADlib: shuffle_once (a copy made with "
                           "ORDER BY random()), no_shuffle (the table as stored) (default: both)")
    meth.add_argument("--sklearn-no-shuffle", dest="sklearn_shuffle", action="store_false",
                      help="let scikit-learn visit the rows in storage order instead of "
                           "shuffling them in memory every epoch")

    hp = parser.add_argument_group("training settings (the same for every method)")
    hp.add_argument("--epochs", type=int, default=20, help="epochs (default: 20)")
    hp.add_argument("--learning-rate", type=float, default=0.1, help="first epoch's rate (default: 0.1)")
    hp.add_argument("--decay", type=float, default=0.95, help="rate decay per epoch (default: 0.95)")
    hp.add_argument("--l2", type=float, default=0.0, help="L2 penalty (default: 0)")
    hp.add_argument("--seed", type=int, default=1, help="seed of every random choice (default: 1)")
    hp.add_argument("--buffer-size", default="10%", help="engine buffer size (default: 10%%)")
    hp.add_argument("--block-size", default=None, help="engine block size (default: the engine's choice)")
    hp.add_argument("--single-buffer", dest="double_buffer", action="store_false",
                    help="train the engine without double buffering")

    ms = parser.add_argument_group("measurement and output")
    ms.add_argument("--scan-repeat", type=int, default=3,
                    help="plain scans timed before and after the runs; the median is the unit "
                         "(default: 3)")
    ms.add_argument("--target-gap", type=float, default=0.01,
                    help="time-to-accuracy target: the best final held-out score of any method, "
                         "minus this (default: 0.01)")
    ms.add_argument("--output", "-o", default=None,
                    help="directory for results.json, epochs.csv, summary.csv and the PNGs "
                         "(default: bench-results/<date-time>)")
    ms.add_argument("--no-plots", dest="plots", action="store_false", help="write no PNGs")
    ms.add_argument("--keep-tables", action="store_true",
                    help="keep the shuffled copies (generated tables are always kept for reuse)")
    ms.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _split(text: str) -> list[str]:
    return [] if text.strip().lower() == "none" else [t.strip() for t in text.split(",") if t.strip()]


def settings_from(args: argparse.Namespace) -> TrainSettings:
    return TrainSettings(epochs=args.epochs, learning_rate=args.learning_rate, decay=args.decay,
                         l2=args.l2, seed=args.seed, buffer_size=args.buffer_size,
                         block_size=args.block_size, double_buffer=args.double_buffer,
                         sklearn_shuffle=args.sklearn_shuffle)


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "cpu_model": cpu}


def _server(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for name in ("server_version", "shared_buffers", "work_mem", "max_parallel_workers_per_gather",
                 "jit", "synchronize_seqscans"):
        info[name] = value(conn, sql.SQL("SHOW {}").format(sql.Identifier(name)))
    for ext in ("corgipile", bismarck.EXTENSION):
        row = conn.execute("SELECT extversion FROM pg_catalog.pg_extension "
                           "WHERE extname OPERATOR(pg_catalog.=) %s", (ext,)).fetchone()
        info[f"{ext}_version"] = row[0] if row else None
    # madpack installs a schema, not an extension
    info["madlib_version"] = madlib.version(conn)
    return info


def _session(conn: psycopg.Connection[Any]) -> None:
    # training is one process, so the scan it is compared with is one too;
    # no JIT compilation in any timed query; scans start at block 0
    conn.execute("SET max_parallel_workers_per_gather = 0")
    conn.execute("SET jit = off")
    conn.execute("SET synchronize_seqscans = off")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SET application_name = 'corgipile bench'")


# optional packages: (module, what needs it, pip extra)
OPTIONAL = (("matplotlib", "the PNG plots", "bench"),
            ("sklearn", "the scikit-learn baseline", "bench"))


def missing_packages(baselines: list[str], plots: bool) -> list[tuple[str, str, str]]:
    """The optional packages this run would need and cannot import:
    (module, what needs it, pip extra)."""
    import importlib.util

    wanted = [o for o in OPTIONAL if (o[0] == "matplotlib" and plots)
              or (o[0] == "sklearn" and "sklearn" in baselines)]
    return [o for o in wanted if importlib.util.find_spec(o[0]) is None]


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by parsed arguments; 0 when every method
    ran or was skipped with a reason, 1 when one failed, 2 on bad arguments."""
    quiet = getattr(args, "quiet", False)

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr, flush=True)

    cfg = settings_from(args)
    models = _split(args.models)
    strategies = _split(args.strategies)
    baselines = _split(args.baselines)
    orders = _split(args.baseline_orders)
    bad = [b for b in baselines if b not in BASELINES] + [o for o in orders if o not in BASELINE_ORDERS]
    if bad or not models or cfg.epochs < 1:
        print(f"corgipile bench: error: bad arguments: "
              f"{', '.join(bad) or 'no models or epochs'}\n"
              f"HINT: baselines are {', '.join(BASELINES)} or none; orders are "
              f"{', '.join(BASELINE_ORDERS)}",
              file=sys.stderr)
        return 2
    # say at the start what is missing, not with a traceback at the end
    plots = args.plots
    sklearn_reason: str | None = None
    for module, needed_by, extra in missing_packages(baselines, plots):
        package = "scikit-learn" if module == "sklearn" else module
        reason = (f"{package} is not installed, so {needed_by} will be skipped; "
                  f"pip install 'corgipile[{extra}]' (or {package}) to include it")
        print(f"corgipile bench: note: {reason}", file=sys.stderr, flush=True)
        if module == "matplotlib":
            plots = False
        else:
            sklearn_reason = reason
    synth = args.synthetic if args.synthetic is not None else not args.table
    out = Path(args.output or Path("bench-results") / _dt.datetime.now().strftime("%Y%m%d-%H%M%S"))

    runs: list[Run] = []
    scans: dict[str, float] = {}
    scans_min: dict[str, float] = {}
    datasets_doc: list[dict[str, Any]] = []
    started = time.perf_counter()
    # on a shared machine the load says how far to trust the seconds
    load_at_start = os.getloadavg()
    with psycopg.connect(getattr(args, "dsn", None) or "", autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        except psycopg.Error as e:
            log(f"corgipile extension: {str(e).strip()}")
        _session(conn)

        datasets: list[Dataset] = []
        if synth:
            datasets.append(synthetic(conn, args.rows, args.dims,
                                      args.test_rows or max(1, args.rows // 5), args.order,
                                      args.bayes_accuracy, args.seed, log=log))
        for spec in args.table:
            train, _, test = spec.partition(":")
            datasets.append(describe_table(conn, train, test or None, args.label, args.features))

        bismarck_reason = bismarck.ensure_extension(conn) if "bismarck" in baselines else None
        if bismarck_reason:
            log(f"bismarck: skipped: {bismarck_reason}")
        madlib_reason = madlib.unavailable_reason(conn) if "madlib" in baselines else None
        if madlib_reason:
            log(f"madlib: skipped: {madlib_reason}")

        for ds in datasets:
            log(f"== {ds.name}: {ds.rows:,} rows x {ds.dims} features, "
                f"{ds.size_bytes / 2**20:.1f} MiB")
            clock = ScanClock(conn, ds, args.scan_repeat)
            copy: tuple[str, float] | None = None
            copy_watch = Stopwatch(clock.cpu)
            needs_copy = "shuffle_once" in orders and (
                ("bismarck" in baselines and not bismarck_reason)
                or ("madlib" in baselines and not madlib_reason))
            if needs_copy:
                with copy_watch:
                    copy = bismarck.shuffle_once_copy(conn, ds, cfg.seed)
                log(f"   shuffled copy (ORDER BY random()): {copy[1]:.3f} s")

            def note(r: Run, clock: ScanClock = clock) -> None:
                if r.status == OK:
                    r.extra["scan_seconds_around"] = clock.around()
                    if clock.around_cpu is not None:
                        r.extra["scan_cpu_seconds_around"] = clock.around_cpu
                _note(log, runs, r)

            try:
                for model in models:
                    for strategy in strategies:
                        note(engine.run_strategy(conn, ds, model, strategy, cfg))
                    for b in baselines:
                        if b == "bismarck":
                            for order in orders:
                                if bismarck_reason:
                                    note(Run.skipped(ds.name, model, f"bismarck ({order})",
                                                     "bismarck", order, bismarck_reason))
                                else:
                                    note(bismarck.run(conn, ds, model, order, cfg, copy))
                        elif b == "madlib":
                            for order in orders:
                                for r in madlib.runs(conn, ds, model, order, cfg, copy):
                                    note(r)
                        elif b == "sklearn" and sklearn_reason is not None:
                            note(Run.skipped(ds.name, model, "sklearn", "sklearn",
                                             "epoch_shuffle (in memory)", sklearn_reason))
                        elif b == "sklearn":
                            note(sklearn_runner.run(conn, ds, model, cfg))
            finally:
                if copy is not None and not args.keep_tables:
                    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.SQL(copy[0])))
            clock.finish(args.scan_repeat)
            scans[ds.name] = statistics.median(clock.all)
            scans_min[ds.name] = min(clock.all)
            d = ds.describe()
            d.update(scan_seconds=scans[ds.name], scan_seconds_before=clock.before,
                     scan_seconds_between=clock.between, scan_seconds_after=clock.after,
                     scan_cpu_seconds_before=clock.cpu_before,
                     scan_cpu_seconds_between=clock.cpu_between,
                     scan_cpu_seconds_after=clock.cpu_after,
                     shuffled_copy_seconds=copy[1] if copy else None,
                     shuffled_copy_cpu_seconds=copy_watch.cpu_seconds if copy else None)
            datasets_doc.append(d)
        server = _server(conn)

    targets = summarize(runs, scans, args.target_gap, scan_min=scans_min)
    meta = {
        "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": sys.argv,
        "settings": asdict(cfg),
        "models": models, "strategies": strategies, "baselines": baselines,
        "baseline_orders": orders, "target_gap": args.target_gap,
        "scan_repeat": args.scan_repeat,
        "machine": {**_machine(), "load_average_at_start": load_at_start,
                    "load_average_at_end": os.getloadavg()},
        "server": server,
        "bench_seconds": time.perf_counter() - started,
        "units": "seconds; *_ratio_to_scan: seconds / the mean of the plain scans timed just "
                 "before and just after the run; epoch_min_ratio_to_scan_min: fastest epoch / "
                 "fastest scan of the dataset in this run; scores: accuracy (R^2 for linear)",
    }
    doc = to_document(meta, datasets_doc, runs, targets)
    files = write_files(doc, runs, out)
    if plots:
        from .plots import plot

        files += plot(runs, scans, targets, out)
    if getattr(args, "json", False):
        print(json.dumps(doc, indent=2))
    else:
        print(format_table(runs, targets))
        print("wrote " + ", ".join(str(f) for f in files))
    return 1 if any(r.status == FAILED for r in runs) else 0


def _note(log: Callable[[str], None], runs: list[Run], r: Run) -> None:
    runs.append(r)
    if r.status != OK:
        log(f"   {r.model:<9} {r.method:<26} {r.status}: {r.reason}")
        return
    last = r.epochs[-1]
    secs = [e.seconds for e in r.epochs]
    per = statistics.median(secs) if len(secs) == last.epoch else sum(secs) / last.epoch
    score = "-" if last.test_score is None else f"{last.test_score:.4f}"
    scan = statistics.median(r.extra["scan_seconds_around"])
    log(f"   {r.model:<9} {r.method:<26} setup {r.setup_seconds:7.3f} s  "
        f"epoch {per:7.4f} s ({per / scan:5.2f} scans)  final score {score}")
    for n in r.notes:
        log(f"      note: {n}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corgipile bench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))
