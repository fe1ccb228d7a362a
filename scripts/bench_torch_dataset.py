#!/usr/bin/env python3
"""Rows per second into PyTorch from a PostgreSQL table, three ways:

* corgipile.torch.CorgiPileDataset (TID range scans of random blocks, a
  shuffled buffer; method 'select' and 'copy'), through a DataLoader with
  1, 2 and 4 workers;
* ``COPY (SELECT label, features FROM t) TO STDOUT (FORMAT BINARY)`` of the
  same columns, rows parsed into numpy arrays the same way (no shuffle:
  the speed limit of reading the table once);
* a psycopg server-side cursor over ``ORDER BY random()`` (a full shuffle
  per epoch), as an IterableDataset whose workers each take the rows with
  id % workers = worker, through the same DataLoader.

Every method ends in batches of torch tensors in the training process.
Prints a Markdown table; --json writes the figures.

    .venv/bin/python scripts/bench_torch_dataset.py --dsn dbname=ml --table fmnist_train_20000
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone

import numpy as np
import psycopg
import torch
from psycopg import sql
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from corgipile.torch import CorgiPileDataset
from corgipile.torch.reader import register_loaders


class RandomOrderCursor(IterableDataset):
    """ORDER BY random() through a named (server-side) cursor."""

    def __init__(self, dsn: str, table: str):
        self.dsn, self.table = dsn, table

    def __iter__(self):
        info = get_worker_info()
        w, n = (0, 1) if info is None else (info.id, info.num_workers)
        with psycopg.connect(self.dsn) as conn:
            register_loaders(conn)
            with conn.cursor(name="shuffled", binary=True) as cur:
                cur.itersize = 2000
                cur.execute(sql.SQL("SELECT label, features FROM {} WHERE id %% %s = %s "
                                    "ORDER BY random()").format(sql.Identifier(self.table)), (n, w))
                for label, feats in cur:
                    yield torch.from_numpy(feats.astype(np.float32)), label


def time_loader(ds, workers: int, batch_size: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    rows = 0
    for batch in DataLoader(ds, batch_size=batch_size, num_workers=workers):
        rows += len(batch[1])
    return rows, time.perf_counter() - t0


def time_copy(dsn: str, table: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    rows = 0
    with psycopg.connect(dsn) as conn:
        register_loaders(conn)
        q = sql.SQL("COPY (SELECT label, features FROM {}) TO STDOUT (FORMAT BINARY)").format(
            sql.Identifier(table))
        with conn.cursor().copy(q) as copy:
            copy.set_types(["int4", "float4[]"])
            buf_x, buf_y = [], []
            for label, feats in copy.rows():
                buf_x.append(feats)
                buf_y.append(label)
                if len(buf_y) == 256:
                    torch.from_numpy(np.stack(buf_x).astype(np.float32))
                    rows += len(buf_y)
                    buf_x, buf_y = [], []
            rows += len(buf_y)
    return rows, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--table", default="fmnist_train_20000")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is kept")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = []

    def record(method: str, workers: int | None, fn) -> None:
        best = None
        for _ in range(args.repeat):
            rows, secs = fn()
            if best is None or secs < best[1]:
                best = (rows, secs)
        rows, secs = best
        results.append({"method": method, "workers": workers, "rows": rows, "seconds": round(secs, 3),
                        "rows_per_s": round(rows / secs)})
        print(f"| {method} | {workers if workers is not None else '-'} | {rows} | {secs:.2f} "
              f"| {rows / secs:,.0f} |", flush=True)

    print("| method | DataLoader workers | rows | seconds | rows/s |\n|---|---|---|---|---|")
    record("COPY (SELECT ...) TO STDOUT, binary, in storage order", None,
           lambda: time_copy(args.dsn, args.table))
    for w in [int(x) for x in args.workers.split(",")]:
        for method in ("select", "copy"):
            ds = CorgiPileDataset(args.dsn, args.table, seed=1, method=method)
            record(f"CorgiPileDataset (TID range scans, method={method})", w,
                   lambda ds=ds, w=w: time_loader(ds, w, args.batch_size))
            ds.close()
        record("server-side cursor, ORDER BY random()", w,
               lambda w=w: time_loader(RandomOrderCursor(args.dsn, args.table), w, args.batch_size))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       "machine": f"{platform.node()} {platform.machine()}, "
                                  f"{__import__('os').cpu_count()} cores (shared)",
                       "table": args.table, "batch_size": args.batch_size,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
