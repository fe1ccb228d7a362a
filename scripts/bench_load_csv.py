#!/usr/bin/env python3
"""corgipile's CSV loader against psql's \\copy of the same file.

Writes a mixed CSV (an integer label, floats, integers, booleans, a text
category and free text; some fields empty, which both read as NULL), then,
interleaved and repeated:

- ``corgipile.loaders.load_csv``: types inferred on a 10,000-row sample,
  then (every column kept) COPY (FORMAT csv) straight into the typed table,
  or (``--exclude``) COPY into a temporary table of text columns cast on
  the server by INSERT ... SELECT; ANALYZE skipped for the comparison;
- ``psql -c '\\copy t FROM file (FORMAT csv, HEADER)'`` into a table of the
  same types created beforehand (what a user who knows the types writes).

For each: wall seconds, rows/s, the client's CPU seconds (this process for
the loader, the psql child for \\copy) and the server backend's CPU seconds
(read from /proc/self/stat through pg_read_file in the same session, so a
superuser connection on the same machine is needed). Usage:

    eval "$(scripts/pgcluster.sh env .demo "$(scripts/demo_port.sh)")"
    .venv/bin/python scripts/bench_load_csv.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_client"))

import psycopg  # noqa: E402

from corgipile.loaders import load_csv  # noqa: E402

TYPES = [("label", "integer"), ("x1", "double precision"), ("x2", "double precision"),
         ("n1", "integer"), ("n2", "bigint"), ("flag", "boolean"), ("kind", "text"),
         ("note", "text")]
TICK = os.sysconf("SC_CLK_TCK")


def write_csv(path: Path, rows: int, seed: int) -> None:
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "label": rng.choice([-1, 1], rows),
        "x1": rng.normal(size=rows).round(6),
        "x2": (rng.random(rows) * 1000).round(3),
        "n1": rng.integers(0, 100, rows),
        "n2": rng.integers(0, 2**40, rows),
        "flag": rng.random(rows) < 0.5,
        "kind": rng.choice(["alpha", "beta", "gamma, delta", "epsilon"], rows),
        "note": rng.choice(["", "fine", 'says "hi"', "two words"], rows),
    })
    frame["x1"] = frame["x1"].astype(object).where(rng.random(rows) > 0.02, None)
    frame["n1"] = frame["n1"].astype("Int64").where(rng.random(rows) > 0.02, pd.NA)
    frame.to_csv(path, index=False, na_rep="")


def backend_cpu(conn: psycopg.Connection) -> float:
    stat = conn.execute("SELECT pg_catalog.pg_read_file('/proc/self/stat')").fetchone()[0]
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_loader(dsn: str, path: Path, exclude: list[str] | None = None) -> dict[str, float]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_cp")
        server0 = backend_cpu(conn)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        result = load_csv(conn, "bench_cp", path, label="label", layout="columns",
                          exclude=exclude, analyze=False, progress=False)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        server = backend_cpu(conn) - server0
        assert result.rows > 0
    return {"wall": wall, "client_cpu": cpu, "server_cpu": server, "rows": result.rows}


def run_psql(dsn: str, path: Path, psql: str) -> dict[str, float]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_psql")
        conn.execute("CREATE TABLE bench_psql (" + ", ".join(f"{c} {t}" for c, t in TYPES)
                     + ")")
    script = ("SELECT pg_catalog.pg_read_file('/proc/self/stat');\n"
              f"\\copy bench_psql FROM '{path}' (FORMAT csv, HEADER)\n"
              "SELECT pg_catalog.pg_read_file('/proc/self/stat');\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([psql, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", dsn],
                         input=script, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = [line for line in out.stdout.splitlines() if ")" in line]
    ticks = [sum(int(x) for x in s.rsplit(")", 1)[1].split()[11:13]) for s in stats]
    rows = int(next(line.split()[1] for line in out.stdout.splitlines()
                    if line.startswith("COPY ")))
    return {"wall": wall, "client_cpu": (after.ru_utime + after.ru_stime)
            - (before.ru_utime + before.ru_stime),
            "server_cpu": (ticks[1] - ticks[0]) / TICK, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dsn", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--exclude", default=None,
                    help="columns the loader leaves out (this takes its text staging path: "
                         "COPY into text columns, cast by INSERT ... SELECT)")
    ap.add_argument("--psql", default=shutil.which("psql") or "/usr/lib/postgresql/15/bin/psql")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.csv"
        os.chmod(tmp, 0o755)
        write_csv(path, args.rows, args.seed)
        size = path.stat().st_size
        print(f"{args.rows} rows, {size / 1e6:.1f} MB, load average "
              f"{os.getloadavg()[0]:.1f}", file=sys.stderr)
        results: dict[str, list[dict[str, float]]] = {"corgipile load_csv": [], "psql \\copy": []}
        for r in range(args.repeat):
            # interleaved, the order alternating
            order = [("corgipile load_csv", run_loader), ("psql \\copy", None)]
            if r % 2:
                order.reverse()
            for name, fn in order:
                res = fn(args.dsn, path, args.exclude.split(",") if args.exclude else None) \
                    if fn else run_psql(args.dsn, path, args.psql)
                results[name].append(res)
                print(f"  {name}: {res['wall']:.2f} s", file=sys.stderr)
        summary = {}
        for name, runs in results.items():
            best = min(runs, key=lambda x: x["wall"])
            med = sorted(x["wall"] for x in runs)[len(runs) // 2]
            summary[name] = {"rows": best["rows"], "best_wall": best["wall"],
                             "median_wall": med, "rows_per_s_best": best["rows"] / best["wall"],
                             "client_cpu_best": best["client_cpu"],
                             "server_cpu_best": best["server_cpu"]}
        ratio = summary["psql \\copy"]["best_wall"] / summary["corgipile load_csv"]["best_wall"]
        print(json.dumps({"rows": args.rows, "bytes": size, "repeat": args.repeat,
                          "load_average": os.getloadavg(), "summary": summary,
                          "loader_speed_vs_copy": ratio, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
