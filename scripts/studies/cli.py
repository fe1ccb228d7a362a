"""Convergence study: every shuffle strategy of corgipile.train on real data.

Follows the CorgiPile paper's protocol (sections 3 and 7.2, Fig. 2, 8, 11,
Table 3) on Fashion-MNIST (Debian's dataset-fashion-mnist package):

* two tasks: a binary one (upper-body clothing, classes {0,2,3,4,6}, against
  the rest, trained with a logistic or SVM model) and the 10-class one
  (softmax);
* each training table stored twice: label-clustered (sorted by the task's
  label) and feature-ordered (sorted by the image's mean pixel intensity);
* every strategy with the same memory budget, buffer_size 10% and 2%;
* per epoch: the mean training loss and the held-out accuracy on the 10,000
  test images (corgipile.train's validation), for several seeds;
* a block-size sweep of the two block-based strategies at the 2% buffer
  (the paper's Fig. 11b asks the same question).

Writes, into --output-dir (default docs/):
  convergence-results.csv          every epoch of every run (the data of every plot)
  convergence-results.json         protocol, machine, datasets, learning-rate search,
                                   runs with their engine parameters, summary, checks
  convergence-results.md           the final-accuracy tables and the acceptance checks
  convergence-lr-search.csv        the learning-rate search, when it ran
  img/convergence-*.png            accuracy and loss per epoch, mean over seeds with
                                   a min-max band, one line per strategy

Two more studies share its runner (scripts/studies/runner.py): --grab
(studies/grab.py: GraB against corgipile and shuffle_once, docs/grab.md) and
--parallel (studies/parallel.py: train(workers => N), docs/parallel.md).
This module holds the options of all three and picks the study.

Usage: scripts/convergence_study.py [--dsn DSN] [--quick] [--jobs 2] ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .grab import GRAB_DATASETS, grab_study
from .paper import LR_GRID, ORDERINGS, STRATEGIES, TASKS, paper_study
from .parallel import PAR_DATASETS, parallel_study
from .runner import DEFAULT_LR, ROOT, csv_list


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--dsn", default="", help="libpq connection string (default: PG* variables)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per run (default 20, quick 2)")
    p.add_argument("--seeds", type=int, default=None,
                   help="number of seeds, run as seeds 1..N (default 3, quick 1)")
    p.add_argument("--datasets", type=csv_list, default=list(TASKS),
                   help=f"comma-separated tasks among {', '.join(TASKS)}")
    p.add_argument("--orderings", type=csv_list, default=list(ORDERINGS))
    p.add_argument("--strategies", type=csv_list, default=list(STRATEGIES))
    p.add_argument("--buffers", type=csv_list, default=["10%", "2%"])
    p.add_argument("--binary-model", default="logistic", choices=["logistic", "svm"])
    p.add_argument("--learning-rate", action="append", default=[], metavar="MODEL=LR",
                   help="override a model's learning rate, e.g. softmax=0.01 (repeatable); "
                        "MODEL=default leaves it NULL: the engine's default schedule "
                        "(averaged SGD, since 0.4.0)")
    p.add_argument("--standardize", default="off", choices=["off", "auto"],
                   help="standardize => of every training (default off: raw pixels, as the "
                        "exact solvers see them; auto is the engine's default)")
    p.add_argument("--lr-search", action="store_true",
                   help=f"choose each model's learning rate from {LR_GRID} first: shuffle_once, "
                        "seed 1, label-clustered table, best final held-out accuracy")
    p.add_argument("--decay", type=float, default=0.95)
    p.add_argument("--sweep-blocks", type=csv_list, default=None,
                   help="block sizes (pages) of the block-size sweep (default 4,11; quick 4; "
                        "'none' skips it)")
    p.add_argument("--sweep-buffer", default="2%")
    p.add_argument("--sweep-strategies", type=csv_list, default=["corgipile", "block_only"])
    p.add_argument("--train-rows", type=int, default=None,
                   help="stratified subsample of the 60,000 training images (default all; quick 3000)")
    p.add_argument("--test-rows", type=int, default=None,
                   help="stratified subsample of the 10,000 test images (default all; quick 1000)")
    p.add_argument("--jobs", type=int, default=1, help="trainings run at once (connections)")
    p.add_argument("--reuse-tables", action="store_true",
                   help="keep the cs_* tables of an earlier run with the same sizes")
    p.add_argument("--order-only", action="store_true",
                   help="only redo the feeding-order figure (img/convergence-order.png) and its "
                        "entry in an existing convergence-results.json")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 3000/1000 rows, 1 seed, 2 epochs, one sweep block size")
    p.add_argument("--output-dir", type=Path, default=ROOT / "docs")
    p.add_argument("--grab", action="store_true",
                   help="the GraB study instead (issue 10: shuffle_once, corgipile, grab; "
                        "optimality gap per epoch; writes convergence-grab.*)")
    p.add_argument("--grab-datasets", type=csv_list, default=list(GRAB_DATASETS),
                   help=f"with --grab: among {', '.join(GRAB_DATASETS)}")
    p.add_argument("--synthetic-rows", type=int, default=None,
                   help="with --grab: rows of the synthetic table (default 100000, quick 10000)")
    p.add_argument("--parallel", action="store_true",
                   help="the parallel-training study instead (issue 11: workers => N on the "
                        "GraB study's label-clustered tables; writes convergence-parallel.*)")
    p.add_argument("--parallel-n", type=csv_list, default=None,
                   help="with --parallel: the N > 1 to compare with N = 1 (default 2)")
    p.add_argument("--parallel-rates", type=csv_list, default=None,
                   help="with --parallel: among constant, decaying (default both; quick constant)")
    args = p.parse_args(argv)
    if args.parallel:
        args.epochs = args.epochs or (2 if args.quick else 10)
        args.seeds = args.seeds or (1 if args.quick else 3)
        args.train_rows = args.train_rows or (1000 if args.quick else 8000)
        args.test_rows = args.test_rows or (300 if args.quick else 2000)
        args.synthetic_rows = args.synthetic_rows or (5000 if args.quick else 100000)
        args.grab_datasets = list(PAR_DATASETS)
        args.parallel_n = [int(n) for n in (args.parallel_n or ["2"])]
        args.parallel_rates = args.parallel_rates or (
            ["constant"] if args.quick else ["constant", "decaying"])
        if any(n < 2 for n in args.parallel_n):
            p.error("--parallel-n: each N must be at least 2")
        if any(r not in ("constant", "decaying") for r in args.parallel_rates):
            p.error("--parallel-rates: among constant, decaying")
        if args.epochs < 1 or args.seeds < 1 or args.jobs < 1:
            p.error("--epochs, --seeds and --jobs must be positive")
        return args
    if args.grab:
        # Fashion-MNIST subsampled (8,000 of 60,000 training images): the
        # exact softmax solve and 72 settings x (1 + 2 + ... + E) epochs must
        # fit a loaded 2-core machine
        args.epochs = args.epochs or (2 if args.quick else 10)
        args.seeds = args.seeds or (1 if args.quick else 3)
        args.train_rows = args.train_rows or (1000 if args.quick else 8000)
        args.test_rows = args.test_rows or (300 if args.quick else 2000)
        args.synthetic_rows = args.synthetic_rows or (5000 if args.quick else 100000)
        bad = [d for d in args.grab_datasets if d not in GRAB_DATASETS]
        if bad:
            p.error(f"--grab-datasets: unknown {', '.join(bad)}")
        if args.epochs < 1 or args.seeds < 1 or args.jobs < 1:
            p.error("--epochs, --seeds and --jobs must be positive")
        return args
    if args.epochs is None:
        args.epochs = 2 if args.quick else 20
    if args.seeds is None:
        args.seeds = 1 if args.quick else 3
    if args.quick:
        args.train_rows = args.train_rows or 3000
        args.test_rows = args.test_rows or 1000
    if args.sweep_blocks is None:
        args.sweep_blocks = ["4"] if args.quick else ["4", "11"]
    if args.sweep_blocks == ["none"]:
        args.sweep_blocks = []
    for name, values, allowed in (("--datasets", args.datasets, TASKS),
                                  ("--orderings", args.orderings, ORDERINGS),
                                  ("--strategies", args.strategies, STRATEGIES),
                                  ("--sweep-strategies", args.sweep_strategies, STRATEGIES)):
        bad = [v for v in values if v not in allowed]
        if bad:
            p.error(f"{name}: unknown {', '.join(bad)} (choose among {', '.join(allowed)})")
    lr = dict(DEFAULT_LR)
    for item in args.learning_rate:
        model, _, value = item.partition("=")
        if model not in lr or not value:
            p.error(f"--learning-rate: expected MODEL=LR with MODEL in {', '.join(lr)}")
        lr[model] = None if value == "default" else float(value)
    args.lr = lr
    if args.epochs < 1 or args.seeds < 1 or args.jobs < 1:
        p.error("--epochs, --seeds and --jobs must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.parallel:
        return parallel_study(args)
    if args.grab:
        return grab_study(args)
    return paper_study(args, argv)


if __name__ == "__main__":
    sys.exit(main())
