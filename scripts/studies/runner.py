"""What the convergence studies share: Fashion-MNIST and the synthetic
tables, their copies in the database, the exact minimum f* of a dataset,
the trainings run a few at a time (Runner), the machine's description, and
the writing of a study's CSV / JSON / markdown."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]  # the checkout
DATA = Path("/usr/share/datasets/fashion-mnist")
UPPER_BODY = (0, 2, 3, 4, 6)  # T-shirt/top, Pullover, Dress, Coat, Shirt
# Chosen by the learning-rate search below (shuffle_once, seed 1, 20 epochs,
# label-clustered table, best final held-out accuracy; svm was not searched,
# 0.001 from a pilot); --lr-search redoes it.
DEFAULT_LR = {"logistic": 0.01, "svm": 0.001, "softmax": 0.001}
PREFIX = "cs_"
# Fashion-MNIST subsets are linearly separable or nearly so: without l2 the
# minimum is at infinity (f* = 0, |w| grows without end) and every order only
# measures how slowly SGD walks out there.  A small l2 makes f* a real minimum.
GRAB_FASHION_L2 = 1e-3


# ---------------------------------------------------------------- data

def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): magic, dimensions, then bytes."""
    with gzip.open(path, "rb") as f:
        _, _, dtype, ndim = struct.unpack(">BBBB", f.read(4))
        if dtype != 0x08:
            raise ValueError(f"{path}: expected unsigned bytes, got type {dtype:#x}")
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def stratified_subset(classes: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    """Indices of about n rows with the class proportions kept (all rows if n is None)."""
    if n is None or n >= len(classes):
        return np.arange(len(classes))
    rng = np.random.default_rng(seed)
    picked = []
    for c in np.unique(classes):
        idx = np.flatnonzero(classes == c)
        k = max(1, round(n * len(idx) / len(classes)))
        picked.append(rng.choice(idx, size=k, replace=False))
    return np.sort(np.concatenate(picked))


def load_fashion(train_rows: int | None, test_rows: int | None) -> dict:
    if not DATA.is_dir():
        sys.exit(f"{DATA} is missing: install Debian's dataset-fashion-mnist package "
                 "(scripts/install_deps.sh does)")
    xtr = read_idx(DATA / "train-images-idx3-ubyte.gz").reshape(60000, -1)
    ytr = read_idx(DATA / "train-labels-idx1-ubyte.gz")
    xte = read_idx(DATA / "t10k-images-idx3-ubyte.gz").reshape(10000, -1)
    yte = read_idx(DATA / "t10k-labels-idx1-ubyte.gz")
    tr = stratified_subset(ytr, train_rows, seed=0)
    te = stratified_subset(yte, test_rows, seed=1)
    return {"train": (xtr[tr], ytr[tr], tr), "test": (xte[te], yte[te], te)}


def binary_label(classes: np.ndarray) -> np.ndarray:
    return np.where(np.isin(classes, UPPER_BODY), 1, -1)


def orders(images: np.ndarray, classes: np.ndarray) -> dict[str, np.ndarray]:
    """Storage orders of the training tables (stable: ties keep the file's order)."""
    mean_intensity = images.astype(np.float64).mean(axis=1)
    return {
        # the binary task's table is clustered by its own label (-1 then +1),
        # the 10-class task's by class (0, 1, ..., 9)
        "clustered-binary": np.argsort(binary_label(classes), kind="stable"),
        "clustered-10": np.argsort(classes, kind="stable"),
        # one table serves both tasks: sorted by mean pixel intensity
        "feature": np.argsort(mean_intensity, kind="stable"),
    }


def adjacent_same(labels: np.ndarray) -> float:
    """Share of consecutive rows with the same label: 1 is fully clustered."""
    return float(np.mean(labels[1:] == labels[:-1])) if len(labels) > 1 else 1.0


def copy_table(conn: psycopg.Connection, table: str, images: np.ndarray, classes: np.ndarray,
               ids: np.ndarray, order: np.ndarray, fingerprint: str) -> None:
    x = (images / 255.0).astype(np.float32)
    y = binary_label(classes)
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, class int, label int, features float4[])")
    # keep the 784-float arrays (compressed) in the heap pages rather than in
    # TOAST, so that a block of pages holds its rows, as in scripts/demo.py
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN features SET STORAGE MAIN")
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "int4", "float4[]"])
        for i in order:
            copy.write_row((int(ids[i]), int(classes[i]), int(y[i]), x[i].tolist()))
    conn.execute(f"VACUUM ANALYZE {table}")
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.Identifier(table),
                                                          sql.Literal(fingerprint)))


def table_fingerprint(conn: psycopg.Connection, table: str) -> str | None:
    row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", (table,)).fetchone()
    return row[0] if row else None


def prepare_tables(conn: psycopg.Connection, data: dict, reuse: bool, log) -> dict:
    """Create the test table and the three training tables; return their description."""
    xtr, ytr, idtr = data["train"]
    xte, yte, idte = data["test"]
    fp = f"convergence_study v1 train={len(ytr)} test={len(yte)}"
    tables = {"test": (xte, yte, idte, np.arange(len(yte)))}
    for name, order in orders(xtr, ytr).items():
        tables[name] = (xtr, ytr, idtr, order)
    info = {}
    for name, (x, y, ids, order) in tables.items():
        table = PREFIX + name.replace("-", "_")
        t0 = time.monotonic()
        if reuse and table_fingerprint(conn, table) == f"{fp} {name}":
            log(f"  {table}: reusing the table loaded earlier")
        else:
            copy_table(conn, table, x, y, ids, order, f"{fp} {name}")
            log(f"  {table}: {len(order)} rows loaded in {time.monotonic() - t0:.1f} s")
        pages, size = conn.execute(
            "SELECT relpages, pg_relation_size(oid) FROM pg_class WHERE oid = %s::regclass",
            (table,)).fetchone()
        info[name] = {
            "table": table, "rows": int(len(order)), "pages": int(pages), "bytes": int(size),
            "adjacent_same_class": adjacent_same(y[order]),
            "adjacent_same_binary_label": adjacent_same(binary_label(y[order])),
        }
    return info


def buffer_tag(buffer: str) -> str:
    return buffer.replace("%", "pct")


def block_tag(block: str | None) -> str:
    return "default" if block is None else f"{block}p"


# ---------------------------------------------------------------- training

class Runner:
    """Runs corgipile.train calls, one connection per worker thread."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.local = threading.local()
        self.conns: list[psycopg.Connection] = []
        self.lock = threading.Lock()

    def conn(self) -> psycopg.Connection:
        c = getattr(self.local, "conn", None)
        if c is None:
            c = psycopg.connect(self.dsn, autocommit=True)
            c.execute("SET corgipile.progress = off")
            self.local.conn = c
            with self.lock:
                self.conns.append(c)
        return c

    def close(self) -> None:
        for c in self.conns:
            c.close()

    def train(self, run: dict) -> dict:
        conn = self.conn()
        name = run["model_name"]
        conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models AS m"
                     " WHERE m.model_name = %s", (name,))
        t0 = time.monotonic()
        try:
            rows = self._train(conn, run)
        except psycopg.errors.DataException as e:
            # a learning rate of the search may diverge (non-finite loss):
            # that rate loses; anywhere else the error is a real failure
            if not run["stage"].startswith("lr"):
                raise
            return {**run, "history": [], "final_validation_score": None,
                    "wall_seconds": time.monotonic() - t0, "engine_params": {},
                    "error": str(e).strip()}
        wall = time.monotonic() - t0
        params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = %s",
                              (name,)).fetchone()[0]
        conn.execute("SELECT corgipile.drop_model(%s)", (name,))
        out = dict(run)
        out["history"] = [
            {"epoch": e, "tuples": n, "loss": loss, "train_score": score,
             "validation_score": vscore, "seconds": secs}
            for e, n, loss, score, vscore, secs in rows]
        out["final_validation_score"] = rows[-1][4]
        out["wall_seconds"] = wall
        out["engine_params"] = {k: params.get(k) for k in
                                ("pages_per_block", "blocks_per_buffer", "n_blocks")}
        return out

    @staticmethod
    def _train(conn: psycopg.Connection, run: dict) -> list[tuple]:
        return conn.execute(
            "SELECT epoch, tuples, loss, score, validation_score, seconds "
            "FROM corgipile.train(%s::regclass, %s, model_name => %s, label => %s, "
            "shuffle => %s, learning_rate => %s, decay => %s, max_epoch_num => %s, "
            "buffer_size => %s, block_size => %s, seed => %s, validation => %s, "
            # the study's figures are of raw features, as its exact solvers see
            # them (--standardize auto: the engine's default)
            "standardize => %s)",
            (run["table"], run["model"], run["model_name"], run["label"], run["strategy"],
             run["learning_rate"], run["decay"], run["epochs"], run["buffer"],
             run["block_size"], run["seed"], run["test_table"],
             run.get("standardize", "off"))).fetchall()


def run_all(runner: Runner, runs: list[dict], jobs: int, log) -> list[dict]:
    done: list[dict] = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(runner.train, r): r for r in runs}
        for k, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            done.append(r)
            if "error" in r:
                log(f"  [{k}/{len(runs)}] {r['task']} lr={r['learning_rate']}: {r['error']}")
                continue
            log(f"  [{k}/{len(runs)} {time.monotonic() - t0:6.0f}s] {r['task']} {r['ordering']} "
                f"buf={r['buffer']} block={block_tag(r['block_size'])} {r['strategy']:<14} "
                f"lr={r['learning_rate']} "
                f"seed={r['seed']}: held-out {r['final_validation_score']:.4f} "
                f"({r['wall_seconds']:.1f} s)")
    order = {r["model_name"]: i for i, r in enumerate(runs)}
    done.sort(key=lambda r: order[r["model_name"]])
    return done


# ---------------------------------------------------------------- main

def machine(conn: psycopg.Connection) -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average_at_start": os.getloadavg(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(), "os": platform.platform(),
            "server": conn.execute("SHOW server_version").fetchone()[0],
            "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
            "extension": conn.execute("SELECT extversion FROM pg_extension "
                                      "WHERE extname = 'corgipile'").fetchone()[0],
            "git_commit": commit}


def synthetic_rows(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian classes (-1/+1, Bayes accuracy about 94.5%), the table of
    scripts/grab_simulation.py: overlapping classes, so the unregularised
    minimum exists and is not far away."""
    rng = np.random.default_rng(1000 + seed)
    y = np.where(rng.random(n) < 0.5, -1, 1)
    mu = rng.normal(size=d)
    mu *= 1.6 / np.linalg.norm(mu)
    x = rng.normal(size=(n, d)) + 0.3 + y[:, None] * mu[None, :]
    return x, y


def grab_data(args: argparse.Namespace) -> dict[str, dict]:
    """The study's datasets: training rows in storage order, test rows, model."""
    out = {}
    if any(d.startswith("synthetic") for d in args.grab_datasets):
        n, n_test = args.synthetic_rows, max(1000, args.synthetic_rows // 5)
        x, y = synthetic_rows(n + n_test, 20, seed=0)
        xtr, ytr, xte, yte = x[:n], y[:n], x[n:], y[n:]
        storage = {"synthetic-clustered": np.argsort(ytr, kind="stable"),
                   "synthetic-feature": np.argsort(xtr.mean(axis=1), kind="stable")}
        for name, order in storage.items():
            out[name] = {"model": "logistic", "x": xtr[order], "y": ytr[order], "l2": 0.0,
                         "x_test": xte, "y_test": yte, "feature_type": "float8[]",
                         "what": f"{n} rows x 20 features, two Gaussian classes, stored "
                                 + ("sorted by label" if name.endswith("clustered")
                                    else "sorted by the mean of the features")}
    fashion = [d for d in args.grab_datasets if d.startswith("fashion")]
    if fashion:
        data = load_fashion(args.train_rows, args.test_rows)
        xtr, ctr, _ = data["train"]
        xte, cte, _ = data["test"]
        # the engine reads float4 and widens to float8: f* uses the same values
        xtr = (xtr / 255.0).astype(np.float32).astype(np.float64)
        xte = (xte / 255.0).astype(np.float32).astype(np.float64)
        if "fashion-binary" in fashion:
            ytr, yte = binary_label(ctr), binary_label(cte)
            order = np.argsort(ytr, kind="stable")
            out["fashion-binary"] = {
                "model": "logistic", "x": xtr[order], "y": ytr[order], "x_test": xte,
                "l2": GRAB_FASHION_L2,
                "y_test": yte, "feature_type": "float4[]",
                "what": f"{len(ytr)} Fashion-MNIST images (stratified subsample), "
                        "upper-body clothing vs the rest, stored sorted by label"}
        if "fashion-10" in fashion:
            order = np.argsort(ctr, kind="stable")
            out["fashion-10"] = {
                "model": "softmax", "x": xtr[order], "y": ctr[order].astype(int),
                "l2": GRAB_FASHION_L2,
                "x_test": xte, "y_test": cte.astype(int), "feature_type": "float4[]",
                "what": f"{len(ctr)} Fashion-MNIST images (stratified subsample), "
                        "10 classes, stored sorted by class"}
    return {k: out[k] for k in args.grab_datasets}


def grab_copy(conn: psycopg.Connection, table: str, x: np.ndarray, y: np.ndarray,
              feature_type: str) -> dict:
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, label int, features {feature_type})")
    # the arrays stay in the heap pages (compressed), so a block of pages holds its rows
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN features SET STORAGE MAIN")
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", feature_type])
        for i in range(len(y)):
            copy.write_row((i, int(y[i]), x[i].tolist()))
    conn.execute(f"VACUUM ANALYZE {table}")
    pages = conn.execute("SELECT relpages FROM pg_class WHERE oid = %s::regclass",
                         (table,)).fetchone()[0]
    return {"table": table, "rows": int(len(y)), "pages": int(pages),
            "rows_per_page": len(y) / max(1, pages)}


# f(w) for the engine's models, l2 = 0: logistic is the mean of
# log(1 + exp(-y (w.x + b))) with y in {-1, +1}; softmax the mean cross-entropy,
# weights laid out per class as [w_1..w_d, b] (the engine's layout).

def logistic_f(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    z = x @ w[:-1] + w[-1]
    m = y * z
    f = float(np.mean(np.logaddexp(0.0, -m)))
    s = -y * np.exp(-np.logaddexp(0.0, m))       # d/dz log(1 + exp(-y z))
    g = np.empty_like(w)
    g[:-1] = x.T @ s / len(y)
    g[-1] = s.mean()
    return f, g


def softmax_f(w: np.ndarray, x: np.ndarray, y: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    d = x.shape[1]
    W = w.reshape(k, d + 1)
    z = x @ W[:, :-1].T + W[:, -1]
    z -= z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    f = float(np.mean(lse - z[np.arange(len(y)), y]))
    p = np.exp(z - lse[:, None])
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    g = np.empty_like(W)
    g[:, :-1] = p.T @ x
    g[:, -1] = p.sum(axis=0)
    return f, g.ravel()


def exact_minimum(ds: dict) -> dict:
    """f* by L-BFGS (scipy) on the same rows, objective and l2."""
    from scipy.optimize import minimize

    x, y = ds["x"], ds["y"]
    k = int(y.max()) + 1 if ds["model"] == "softmax" else 1
    fun = ds_f(ds)
    t0 = time.monotonic()
    res = minimize(fun, np.zeros(k * (x.shape[1] + 1)), jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "maxfun": 40000, "gtol": 1e-8, "ftol": 1e-15})
    f, g = fun(res.x)
    return {"fstar": f, "grad_norm": float(np.linalg.norm(g)), "iterations": int(res.nit),
            "weight_norm": float(np.linalg.norm(res.x)), "seconds": time.monotonic() - t0,
            "solver": "scipy L-BFGS-B, gtol 1e-8", "message": str(res.message)}


def ds_f(ds: dict):
    """The objective and its gradient for the dataset, with its l2 term
    (l2/2 |w|^2 over the weights, not the biases: the engine's shrink step)."""
    x, y, l2 = ds["x"], ds["y"], ds["l2"]
    d = x.shape[1]
    if ds["model"] == "softmax":
        k = int(y.max()) + 1
        mask = np.tile(np.r_[np.ones(d), 0.0], k)
        base = lambda w: softmax_f(w, x, y, k)  # noqa: E731
    else:
        mask = np.r_[np.ones(d), 0.0]
        base = lambda w: logistic_f(w, x, y)  # noqa: E731

    def fun(w):
        f, g = base(w)
        wm = w * mask
        return f + 0.5 * l2 * float(wm @ wm), g + l2 * wm
    return fun


def noise_bound(a: np.ndarray, b: np.ndarray) -> float:
    """Two standard errors of the difference of two means over seeds."""
    def se(v):
        return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
    return 2.0 * float(np.hypot(se(a), se(b)))


def load_study_tables(args: argparse.Namespace, data: dict, prefix: str,
                      log) -> tuple[dict[str, dict], dict]:
    """Copy each dataset (and its test rows) into tables named prefix + name
    and solve it exactly: the tables' facts and f*, and the machine."""
    tinfo: dict[str, dict] = {}
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        mach = machine(conn)
        for name, ds in data.items():
            t0 = time.monotonic()
            table = prefix + name.replace("-", "_")
            tinfo[name] = grab_copy(conn, table, ds["x"], ds["y"], ds["feature_type"])
            test = grab_copy(conn, table + "_test", ds["x_test"], ds["y_test"], ds["feature_type"])
            tinfo[name]["test_table"] = test["table"]
            tinfo[name]["test_rows"] = test["rows"]
            sol = exact_minimum(ds)
            tinfo[name].update(sol, what=ds["what"], model=ds["model"])
            log(f"  {table}: {tinfo[name]['rows']} rows, {tinfo[name]['pages']} pages; "
                f"f* = {sol['fstar']:.6g} (|grad| {sol['grad_norm']:.1e}, {sol['iterations']} "
                f"iterations) in {time.monotonic() - t0:.0f} s")
    return tinfo, mach


def run_settings(args: argparse.Namespace, runs: list[dict], setting, data: dict,
                 tinfo: dict[str, dict], describe, log) -> list[dict]:
    """Train every run (args.jobs at a time) with setting(conn, run, dataset,
    f*), logging each result's last epoch through describe(result)."""
    log(f"{len(runs)} settings, each trained for 1..{args.epochs} epochs, {args.jobs} at a time")
    runner = Runner(args.dsn)
    results: list[dict] = []
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(lambda r: setting(runner.conn(), r, data[r["dataset"]],
                                                     tinfo[r["dataset"]]["fstar"]), r)
                       for r in runs]
            for k, fut in enumerate(futures, 1):
                r = fut.result()
                results.append(r)
                log(f"  [{k}/{len(runs)} {time.monotonic() - t0:5.0f}s] {describe(r)}")
    finally:
        runner.close()
    return results


def generated_line(report: dict) -> str:
    """The run line of a study's Markdown: when, at which commit, on what,
    at what load, how long, with which command."""
    m = report["machine"]
    return (f"Generated {report['generated']} at commit {m.get('git_commit') or '?'} on "
            f"{m['cpu']}, {m['cores']} cores (load average at start "
            f"{m['load_average_at_start'][0]:.1f}), in {report['total_seconds']:.0f} s. "
            f"Command: `{report['command']}`.")


def write_study(out: Path, stem: str, report: dict, markdown: str, value, log,
                started: float) -> None:
    """Write stem.json and stem.md (stem.csv is written by the caller) and
    log each goal's check, its value formatted by value()."""
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    (out / f"{stem}.md").write_text(markdown)
    log(f"Wrote {out / (stem + '.csv')}, .json and .md in {time.monotonic() - started:.0f} s")
    for c in report["summary"]["checks"]:
        log(f"  {'ok ' if c['holds'] else 'NO '} {c['goal']}: {c['dataset']} {c['rate']} "
            f"{value(c['value'])}")


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]
