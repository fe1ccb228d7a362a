#!/usr/bin/env python3
"""The figures of docs/block-size.md: held-out accuracy per epoch of corgipile
at several block sizes against shuffle_once, on corgipile bench's synthetic
label-clustered table (500,000 rows x 28 features, 20,000 held-out rows).

Every training passes standardize => 'off', as corgipile bench does, so the
figures are of the raw generated features.  Accuracy only: no timings.

Usage: PYTHONPATH=python_client .venv/bin/python -P scripts/bench_block_size.py [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import sys
from decimal import ROUND_HALF_UP, Decimal

import psycopg

from corgipile.bench.datasets import synthetic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance

# (label, shuffle, block_size): block sizes in pages; None is the engine's default
ROWS_OF_TABLE = [
    ("`shuffle_once`", "shuffle_once", None),
    ("`corgipile`, former default size", "corgipile", "111"),
    ("`corgipile`", "corgipile", "16"),
    ("`corgipile`", "corgipile", "4"),
    ("`corgipile`, default", "corgipile", None),
]


def fmt(score: float) -> str:
    """Three decimals, halves rounded up (0.9355 -> 0.936), as SQL's round() does."""
    return str(Decimal(repr(score)).quantize(Decimal("0.001"), ROUND_HALF_UP))


def train(conn: psycopg.Connection, table: str, test: str, model: str, shuffle: str,
          block_size: str | None, seed: int, epochs: int) -> tuple[list[float], dict]:
    conn.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                 "WHERE model_name = 'bench_block_size'")
    rows = conn.execute(
        "SELECT validation_score FROM corgipile.train(%s::regclass, %s, "
        "model_name => 'bench_block_size', shuffle => %s, learning_rate => 0.1, "
        "decay => 0.95, max_epoch_num => %s, buffer_size => '10%%', block_size => %s, "
        "seed => %s, validation => %s, standardize => 'off')",
        (table, model, shuffle, epochs, block_size, seed, test)).fetchall()
    params = conn.execute("SELECT params FROM corgipile.models "
                          "WHERE model_name = 'bench_block_size'").fetchone()[0]
    conn.execute("SELECT corgipile.drop_model('bench_block_size')")
    return [r[0] for r in rows], params


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", default="")
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--test-rows", type=int, default=20_000)
    p.add_argument("--epochs", type=int, default=8)
    args = p.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        ds = synthetic(conn, args.rows, 28, args.test_rows, "clustered", 0.95, seed=1,
                       log=print)
        table, test = ds.table, ds.test_table
        print(f"{provenance.run_line()}; svm, seed 1, {args.epochs} epochs\n")
        print("| shuffle | blocks per buffer (pages per block) | held-out accuracy, epochs "
              f"1-{args.epochs} |\n|---|---|---|")
        for label, shuffle, bs in ROWS_OF_TABLE:
            scores, params = train(conn, table, test, "svm", shuffle, bs, 1, args.epochs)
            size = ("-" if shuffle == "shuffle_once" else
                    f"{params['blocks_per_buffer']} ({params['pages_per_block']})")
            print(f"| {label} | {size} | {' '.join(fmt(s) for s in scores)} |", flush=True)
        print("\nDefault block size, final held-out accuracy, seeds 1-3:")
        for model in ("svm", "logistic"):
            finals = [train(conn, table, test, model, "corgipile", None, seed, args.epochs)[0][-1]
                      for seed in (1, 2, 3)]
            once = train(conn, table, test, model, "shuffle_once", None, 1, args.epochs)[0][-1]
            print(f"  {model}: {', '.join(fmt(s) for s in finals)} "
                  f"(shuffle_once, seed 1: {fmt(once)})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
