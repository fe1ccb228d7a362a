#!/usr/bin/env python3
"""Rows per second into PyTorch from a PostgreSQL table, side by side in one
run, with the CPU seconds of the client and of the server.

Readers compared (each ends in float32 tensors of a batch in the training
process, batch 256):

* ``copy-numpy``: ``COPY (SELECT label, features FROM t) TO STDOUT (FORMAT
  BINARY)`` in storage order, parsed with one np.frombuffer over a
  structured dtype per 16 MB: the speed limit of reading the table once
  through plain SQL (no shuffle);
* ``dataset-server``: CorgiPileDataset (shuffle='corgipile', batch_size=256,
  DataLoader(batch_size=None)) reading through corgipile.block_rows;
* ``dataset-copy``: the same dataset reading with method='copy' (one binary
  COPY of TID range scans per buffer, parsed vectorised);
* ``dataset-server-2w``: dataset-server with 2 DataLoader workers.

Runs are interleaved (every reader once per round) and repeated; the
median of each reader and the ratio to copy-numpy of the same round are
reported.  Client CPU: this process and its reaped children (DataLoader
workers).  Server CPU: the postmaster's reaped children plus its live ones
(/proc, so the server must run on this machine).

    .venv/bin/python scripts/bench_torch_dataset.py --dsn dbname=bench --table dense28
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import struct
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
import torch
from psycopg import sql
from torch.utils.data import DataLoader

from corgipile.torch import CorgiPileDataset

TICK = os.sysconf("SC_CLK_TCK")
ARRAY_ELEM = {"real[]": (">f4", 700), "double precision[]": (">f8", 701)}


def _stat(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the postmaster's children, live and reaped."""
    f = _stat(postmaster)
    total = sum(int(v) for v in f[11:15])  # utime stime cutime cstime (fields 14-17)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = _stat(int(d))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if int(s[1]) == postmaster:
            total += int(s[11]) + int(s[12])
    return total / TICK


def client_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def copy_numpy(dsn: str, table: str, elem: str, d: int, batch: int) -> int:
    """Binary COPY in storage order, parsed vectorised, cut into batches."""
    row = np.dtype([("nf", ">i2"), ("ylen", ">i4"), ("y", ">i4"), ("alen", ">i4"),
                    ("hdr", ">i4", (5,)), ("x", [("len", ">i4"), ("v", elem)], (d,))])
    rows = 0
    with psycopg.connect(dsn) as conn:
        q = sql.SQL("COPY (SELECT label::pg_catalog.int4, features FROM ONLY {}) "
                    "TO STDOUT (FORMAT BINARY)").format(sql.Identifier(table))
        buf = bytearray()
        header = True
        with conn.cursor().copy(q) as copy:
            for chunk in copy:
                buf += chunk
                if header and len(buf) >= 19:
                    del buf[:19 + struct.unpack_from("!I", buf, 15)[0]]
                    header = False
                if len(buf) >= 16 << 20:
                    n = len(buf) // row.itemsize
                    rows += _batches(np.frombuffer(buf, row, n), batch)
                    del buf[:n * row.itemsize]
        n = (len(buf) - 2) // row.itemsize
        rows += _batches(np.frombuffer(buf, row, n), batch)
    return rows


def _batches(rec: np.ndarray, batch: int) -> int:
    if len(rec) == 0:
        return 0
    assert (rec["x"]["len"] == rec.dtype["x"].base["v"].itemsize).all()
    x = rec["x"]["v"].astype(np.float32)
    y = rec["y"].astype(np.int64)
    for i in range(0, len(x), batch):
        torch.from_numpy(x[i:i + batch])
        torch.from_numpy(y[i:i + batch])
    return len(x)


def dataset(dsn: str, table: str, method: str, workers: int, batch: int) -> int:
    ds = CorgiPileDataset(dsn, table, seed=1, method=method, batch_size=batch)
    rows = 0
    for _x, y in DataLoader(ds, batch_size=None, num_workers=workers):
        rows += len(y)
    ds.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--table", required=True)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--readers", default="copy-numpy,dataset-server,dataset-copy,dataset-server-2w")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with psycopg.connect(args.dsn) as conn:
        typ, d, pages, n = conn.execute(
            "SELECT pg_catalog.format_type(a.atttypid, NULL), "
            "(SELECT pg_catalog.cardinality(features) FROM ONLY " +
            sql.Identifier(args.table).as_string(conn) + " LIMIT 1), "
            "pg_catalog.pg_relation_size(c.oid) / 8192, c.reltuples::int8 "
            "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
            "WHERE c.oid = pg_catalog.to_regclass(%s) AND a.attname = 'features'",
            (args.table,)).fetchone()
        postmaster = int(_stat(conn.info.backend_pid)[1])
    elem = ARRAY_ELEM[typ][0]
    bs = args.batch_size
    readers = {
        "copy-numpy": lambda: copy_numpy(args.dsn, args.table, elem, d, bs),
        "dataset-server": lambda: dataset(args.dsn, args.table, "server", 0, bs),
        "dataset-copy": lambda: dataset(args.dsn, args.table, "copy", 0, bs),
        "dataset-server-2w": lambda: dataset(args.dsn, args.table, "server", 2, bs),
        "dataset-copy-2w": lambda: dataset(args.dsn, args.table, "copy", 2, bs),
    }
    chosen = args.readers.split(",")
    runs: dict[str, list[dict]] = {r: [] for r in chosen}
    print(f"# {args.table}: {n} rows x {typ} [{d}], {pages} pages; batch {bs}; "
          f"{args.rounds} rounds, readers interleaved; load {os.getloadavg()[0]:.1f}", flush=True)
    for rnd in range(args.rounds):
        for name in chosen:
            c0, s0, t0, l0 = client_cpu(), server_cpu(postmaster), time.perf_counter(), os.getloadavg()[0]
            rows = readers[name]()
            t1 = time.perf_counter()
            # closed sessions' backends exit and are reaped (their CPU then
            # moves into the postmaster's cutime; a zombie shows none)
            time.sleep(0.5)
            c1, s1, l1 = client_cpu(), server_cpu(postmaster), os.getloadavg()[0]
            runs[name].append({"rows": rows, "seconds": t1 - t0, "client_cpu": c1 - c0,
                               "server_cpu": s1 - s0, "load": (l0 + l1) / 2})
            print(f"round {rnd} {name}: {rows} rows {t1 - t0:.2f} s, {rows / (t1 - t0):,.0f} rows/s, "
                  f"client CPU {c1 - c0:.2f} s, server CPU {s1 - s0:.2f} s, load {l1:.1f}",
                  flush=True)
    base = runs.get("copy-numpy")
    print("\n| reader | rows/s (median) | x copy-numpy (same round, median) | client CPU s | "
          "server CPU s | load |\n|---|---|---|---|---|---|")
    summary = []
    for name in chosen:
        rs = runs[name]
        rate = statistics.median(r["rows"] / r["seconds"] for r in rs)
        ratio = (statistics.median((base[i]["seconds"] / r["seconds"]) for i, r in enumerate(rs))
                 if base else float("nan"))
        cc = statistics.median(r["client_cpu"] for r in rs)
        sc = statistics.median(r["server_cpu"] for r in rs)
        load = statistics.median(r["load"] for r in rs)
        summary.append({"reader": name, "rows_per_s": round(rate), "ratio_to_copy_numpy":
                        round(ratio, 2), "client_cpu_s": round(cc, 2), "server_cpu_s": round(sc, 2),
                        "load": round(load, 1), "runs": rs})
        print(f"| {name} | {rate:,.0f} | {ratio:.2f} | {cc:.2f} | {sc:.2f} | {load:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       "machine": f"{platform.node()} {platform.machine()}, "
                                  f"{os.cpu_count()} cores (shared)",
                       "table": args.table, "rows": n, "pages": pages, "batch_size": bs,
                       "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
