#!/usr/bin/env python3
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

Usage: scripts/convergence_study.py [--dsn DSN] [--quick] [--jobs 2] ...
"""

from __future__ import annotations

import os

# One BLAS thread: on a small, loaded machine (the study's 2 cores are shared)
# OpenBLAS's threads fight each other, and the exact solves of --grab ran 4x
# slower with them.  An explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import datetime as dt  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor, as_completed  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/usr/share/datasets/fashion-mnist")
UPPER_BODY = (0, 2, 3, 4, 6)  # T-shirt/top, Pullover, Dress, Coat, Shirt
STRATEGIES = ("no_shuffle", "block_only", "corgipile", "sliding_window", "mrs",
              "shuffle_once", "epoch_shuffle")
ORDERINGS = ("clustered", "feature")
TASKS = ("fashion-binary", "fashion-10")
LR_GRID = (0.1, 0.01, 0.001, 0.0001)
# Chosen by the learning-rate search below (shuffle_once, seed 1, 20 epochs,
# label-clustered table, best final held-out accuracy; svm was not searched,
# 0.001 from a pilot); --lr-search redoes it.
DEFAULT_LR = {"logistic": 0.01, "svm": 0.001, "softmax": 0.001}
PREFIX = "cs_"
STYLE = {  # one colour and line style per strategy, the same in every plot
    "no_shuffle": ("tab:red", ":"),
    "block_only": ("tab:orange", "--"),
    "corgipile": ("tab:blue", "-"),
    "sliding_window": ("tab:purple", "-."),
    "mrs": ("tab:brown", "--"),
    "shuffle_once": ("black", "-"),
    "epoch_shuffle": ("tab:green", ":"),
}


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


# ---------------------------------------------------------------- tasks

def tasks(args: argparse.Namespace) -> dict[str, dict]:
    all_tasks = {
        "fashion-binary": {"model": args.binary_model, "label": "label",
                           "tables": {"clustered": "clustered-binary", "feature": "feature"},
                           "what": "upper-body clothing {0,2,3,4,6} (+1) vs the rest (-1)"},
        "fashion-10": {"model": "softmax", "label": "class",
                       "tables": {"clustered": "clustered-10", "feature": "feature"},
                       "what": "the 10 Fashion-MNIST classes"},
    }
    return {t: all_tasks[t] for t in args.datasets}


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


def make_run(task: str, spec: dict, ordering: str, buffer: str, block: str | None,
             strategy: str, seed: int, lr: float, args: argparse.Namespace, tinfo: dict,
             stage: str) -> dict:
    table = tinfo[spec["tables"][ordering]]["table"]
    name = (f"{PREFIX}{task}_{ordering}_{buffer_tag(buffer)}_{block_tag(block)}_{strategy}_"
            f"s{seed}_{stage}").replace("-", "_")
    return {"stage": stage, "task": task, "model": spec["model"], "label": spec["label"],
            "ordering": ordering, "table": table, "test_table": tinfo["test"]["table"],
            "buffer": buffer, "block_size": block, "strategy": strategy, "seed": seed,
            "learning_rate": lr, "decay": args.decay, "epochs": args.epochs, "model_name": name,
            "standardize": args.standardize}


# ---------------------------------------------------------------- summaries

def summarise(runs: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        k = (r["stage"], r["task"], r["ordering"], r["buffer"], r["block_size"], r["strategy"])
        groups.setdefault(k, []).append(r)
    out = []
    for (stage, task, ordering, buffer, block, strategy), rs in groups.items():
        acc = np.array([r["final_validation_score"] for r in rs], dtype=float)
        loss = np.array([r["history"][-1]["loss"] for r in rs], dtype=float)
        out.append({"stage": stage, "task": task, "model": rs[0]["model"], "ordering": ordering,
                    "buffer": buffer, "block_size": block, "strategy": strategy,
                    "seeds": [r["seed"] for r in rs], "final_accuracy_mean": float(acc.mean()),
                    "final_accuracy_min": float(acc.min()), "final_accuracy_max": float(acc.max()),
                    "final_accuracy_std": float(acc.std(ddof=1)) if len(acc) > 1 else 0.0,
                    "final_loss_mean": float(loss.mean()),
                    "best_epoch_accuracy_mean": float(np.mean(
                        [max(h["validation_score"] for h in r["history"]) for r in rs])),
                    "pages_per_block": rs[0]["engine_params"]["pages_per_block"],
                    "blocks_per_buffer": rs[0]["engine_params"]["blocks_per_buffer"],
                    "n_blocks": rs[0]["engine_params"]["n_blocks"],
                    "seconds_per_epoch": float(np.mean(
                        [np.mean([h["seconds"] for h in r["history"]]) for r in rs]))})
    return out


def find(summary: list[dict], **kw) -> dict | None:
    for s in summary:
        if all(s[k] == v for k, v in kw.items()):
            return s
    return None


def acceptance(summary: list[dict], args: argparse.Namespace) -> list[dict]:
    """The issue's two statements, checked on the main grid (engine default block size)."""
    checks = []
    small = "2%" if "2%" in args.buffers else args.buffers[-1]
    for task in args.datasets:
        for ordering in args.orderings:
            so = find(summary, stage="main", task=task, ordering=ordering, buffer=small,
                      strategy="shuffle_once")
            cp = find(summary, stage="main", task=task, ordering=ordering, buffer=small,
                      strategy="corgipile")
            if so and cp:
                gap = 100 * (cp["final_accuracy_mean"] - so["final_accuracy_mean"])
                checks.append({"check": "corgipile within 0.5 pp of shuffle_once",
                               "task": task, "ordering": ordering, "buffer": small,
                               "strategy": "corgipile", "gap_pp": gap,
                               "holds": abs(gap) <= 0.5})
    for task in args.datasets:
        for buffer in args.buffers:
            so = find(summary, stage="main", task=task, ordering="clustered", buffer=buffer,
                      strategy="shuffle_once")
            if not so:
                continue
            for strategy in ("no_shuffle", "block_only", "sliding_window", "mrs"):
                s = find(summary, stage="main", task=task, ordering="clustered", buffer=buffer,
                         strategy=strategy)
                if s:
                    gap = 100 * (s["final_accuracy_mean"] - so["final_accuracy_mean"])
                    # "worse" = at least 0.5 pp below shuffle_once, the same margin
                    # the first statement calls comparable
                    checks.append({"check": "worse than shuffle_once on clustered data",
                                   "task": task, "ordering": "clustered", "buffer": buffer,
                                   "strategy": strategy, "gap_pp": gap, "holds": gap <= -0.5})
    return checks


def pct(v: float) -> str:
    return f"{100 * v:.2f}"


def markdown(summary: list[dict], checks: list[dict], args: argparse.Namespace) -> str:
    lines = ["<!-- written by scripts/convergence_study.py; do not edit by hand -->", ""]
    lines.append("Final held-out accuracy (%) after the last epoch: mean over seeds "
                 "[min, max]; engine default block size.")
    for task in args.datasets:
        for ordering in args.orderings:
            lines += ["", f"**{task}, {ordering}**", "",
                      "| strategy | " + " | ".join(f"buffer {b}" for b in args.buffers) + " |",
                      "|---|" + "---:|" * len(args.buffers)]
            for strategy in args.strategies:
                cells = []
                for b in args.buffers:
                    s = find(summary, stage="main", task=task, ordering=ordering, buffer=b,
                             strategy=strategy)
                    cells.append("" if s is None else
                                 f"{pct(s['final_accuracy_mean'])} [{pct(s['final_accuracy_min'])}, "
                                 f"{pct(s['final_accuracy_max'])}]")
                lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    sweep = [s for s in summary if s["stage"] == "sweep"]
    if sweep:
        lines += ["", f"Block-size sweep at buffer {args.sweep_buffer}: final held-out accuracy (%), "
                  "mean [min, max]; pages per block (blocks per buffer).", ""]
        blocks = sorted({s["block_size"] for s in sweep}, key=lambda b: int(b))
        lines.append("| task | ordering | strategy | " + " | ".join(
            f"{b} page(s)" for b in blocks) + " | default | shuffle_once |")
        lines.append("|---|---|---|" + "---:|" * (len(blocks) + 2))
        for task in args.datasets:
            for ordering in args.orderings:
                so = find(summary, stage="main", task=task, ordering=ordering,
                          buffer=args.sweep_buffer, strategy="shuffle_once")
                for strategy in args.sweep_strategies:
                    cells = []
                    for b in blocks:
                        s = find(summary, stage="sweep", task=task, ordering=ordering,
                                 buffer=args.sweep_buffer, block_size=b, strategy=strategy)
                        cells.append("" if s is None else
                                     f"{pct(s['final_accuracy_mean'])} [{pct(s['final_accuracy_min'])}, "
                                     f"{pct(s['final_accuracy_max'])}] ({s['blocks_per_buffer']})")
                    d = find(summary, stage="main", task=task, ordering=ordering,
                             buffer=args.sweep_buffer, strategy=strategy)
                    cells.append("" if d is None else
                                 f"{pct(d['final_accuracy_mean'])} [{pct(d['final_accuracy_min'])}, "
                                 f"{pct(d['final_accuracy_max'])}] ({d['pages_per_block']}p, "
                                 f"{d['blocks_per_buffer']})")
                    cells.append("" if so is None else pct(so["final_accuracy_mean"]))
                    lines.append(f"| {task} | {ordering} | {strategy} | " + " | ".join(cells) + " |")
    if checks:
        lines += ["", "Acceptance checks (main grid, default block size; gap = strategy minus "
                  "shuffle_once, mean final held-out accuracy, percentage points):", "",
                  "| check | task | ordering | buffer | strategy | gap (pp) | holds |",
                  "|---|---|---|---|---|---:|---|"]
        for c in checks:
            lines.append(f"| {c['check']} | {c['task']} | {c['ordering']} | {c['buffer']} | "
                         f"{c['strategy']} | {c['gap_pp']:+.2f} | {'yes' if c['holds'] else 'NO'} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- feeding order

# (strategy, block size) pairs whose feeding order is pictured, as in Fig. 3
# (11 pages is the former default block size at the 2% buffer: 1/16 of it)
ORDER_VIEWS = (("no_shuffle", None), ("sliding_window", None), ("mrs", None),
               ("block_only", None), ("corgipile", "11"), ("corgipile", None),
               ("shuffle_once", None))


def order_heatmaps(conn: psycopg.Connection, table: str, buffer: str, seed: int,
                   bins: int = 100) -> list[dict]:
    """Class shares along one epoch's feeding order (corgipile.shuffled_scan).

    The epoch is cut into `bins` equal stretches of the rows fed; for each
    stretch, the share of each class.  tv_from_uniform is the mean over the
    stretches of the total variation distance between the stretch's class
    shares and the table's: 0 for a perfect shuffle, 0.9 for a table
    clustered by ten equal classes read in order.
    """
    cls = dict(conn.execute(sql.SQL("SELECT id, class FROM {}").format(sql.Identifier(table)))
               .fetchall())
    prior = np.bincount(np.array(list(cls.values())), minlength=10) / len(cls)
    views = []
    for strategy, block in ORDER_VIEWS:
        ids = conn.execute("SELECT id FROM corgipile.shuffled_scan(%s::regclass, %s, %s, %s, %s)",
                           (table, strategy, block, buffer, seed)).fetchall()
        c = np.array([cls[i] for (i,) in ids])
        edges = np.linspace(0, len(c), bins + 1).astype(int)
        share = np.array([np.bincount(c[a:b], minlength=10) / max(b - a, 1)
                          for a, b in zip(edges[:-1], edges[1:])])
        views.append({"strategy": strategy, "block_size": block, "buffer": buffer, "seed": seed,
                      "rows_fed": int(len(c)), "bins": bins,
                      "tv_from_uniform": float(np.mean(0.5 * np.abs(share - prior).sum(axis=1))),
                      "class_share": share.T.round(4).tolist()})
    return views


def plot_order(views: list[dict], title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(views), 1, figsize=(10, 1.5 * len(views) + 0.8), sharex=True,
                             gridspec_kw={"hspace": 0.6})
    for ax, v in zip(axes, views):
        im = ax.imshow(np.array(v["class_share"]), aspect="auto", origin="lower", vmin=0, vmax=1,
                       cmap="viridis", extent=(0, 100, -0.5, 9.5), interpolation="nearest")
        label = v["strategy"] + (", default block size" if v["block_size"] is None
                                 else f", {v['block_size']}-page blocks")
        ax.set_title(f"{label}  (rows fed {v['rows_fed']}, TV from table mix "
                     f"{v['tv_from_uniform']:.2f})", fontsize=9, loc="left")
        ax.set_yticks([0, 9])
        ax.set_ylabel("class", fontsize=8)
    axes[-1].set_xlabel("position in the epoch's feeding order (%)")
    fig.colorbar(im, ax=axes, shrink=0.6, label="share of the class in that stretch")
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


# ---------------------------------------------------------------- plots

def plot_group(runs: list[dict], title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    by_strategy: dict[str, list[dict]] = {}
    for r in runs:
        by_strategy.setdefault(r["strategy"], []).append(r)
    for strategy in [s for s in STRATEGIES if s in by_strategy]:
        rs = by_strategy[strategy]
        n = min(len(r["history"]) for r in rs)
        epochs = np.arange(1, n + 1)
        color, ls = STYLE[strategy]
        for ax, key in ((ax_acc, "validation_score"), (ax_loss, "loss")):
            v = np.array([[h[key] for h in r["history"][:n]] for r in rs], dtype=float)
            if key == "validation_score":
                v = 100 * v
            ax.plot(epochs, v.mean(axis=0), color=color, linestyle=ls, marker=".",
                    label=strategy, linewidth=1.6)
            ax.fill_between(epochs, v.min(axis=0), v.max(axis=0), color=color, alpha=0.15,
                            linewidth=0)
    ax_acc.set_title("held-out accuracy (test set) after each epoch")
    ax_acc.set_ylabel("accuracy (%)")
    ax_loss.set_title("mean training loss of the epoch")
    ax_loss.set_ylabel("loss")
    from matplotlib.ticker import MaxNLocator
    for ax in (ax_acc, ax_loss):
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = ax_acc.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    nseeds = len({r["seed"] for r in runs})
    fig.suptitle(f"{title} - mean over {nseeds} seed(s), band = min-max")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_sweep(summary: list[dict], args: argparse.Namespace, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(t, o) for t in args.datasets for o in args.orderings]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
    for ax, (task, ordering) in zip(axes[0], panels):
        for strategy in args.sweep_strategies:
            pts = [s for s in summary if s["task"] == task and s["ordering"] == ordering
                   and s["buffer"] == args.sweep_buffer and s["strategy"] == strategy
                   and (s["stage"] == "sweep" or s["stage"] == "main")]
            pts.sort(key=lambda s: s["pages_per_block"])
            if not pts:
                continue
            x = [s["pages_per_block"] for s in pts]
            color, ls = STYLE[strategy]
            for s in pts:
                if s["stage"] == "main":  # the engine's default block size
                    ax.plot([s["pages_per_block"]], [100 * s["final_accuracy_mean"]], marker="*",
                            markersize=14, color=color, linestyle="none")
            ax.errorbar(x, [100 * s["final_accuracy_mean"] for s in pts],
                        yerr=[[100 * (s["final_accuracy_mean"] - s["final_accuracy_min"]) for s in pts],
                              [100 * (s["final_accuracy_max"] - s["final_accuracy_mean"]) for s in pts]],
                        color=color, linestyle=ls, marker="o", capsize=3, label=strategy)
        so = find(summary, stage="main", task=task, ordering=ordering, buffer=args.sweep_buffer,
                  strategy="shuffle_once")
        if so:
            ax.axhline(100 * so["final_accuracy_mean"], color="black", linewidth=1,
                       label="shuffle_once")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("pages per block (8 kB pages)")
        ax.set_ylabel("final held-out accuracy (%)")
        ax.set_title(f"{task}, {ordering}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Block size at buffer {args.sweep_buffer}: mean over seeds, bars = min-max, "
                 f"star = engine default block size")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


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


# ---------------------------------------------------------------- GraB study (issue 10 §3)
#
# scripts/convergence_study.py --grab [--quick]: shuffle_once, corgipile and
# grab on label-clustered and feature-ordered tables, at a constant and a
# decaying learning rate, several seeds.  Per epoch it records the optimality
# gap f(w) - f* (f = the mean training loss the engine minimises, l2 = 0; f*
# from an exact L-BFGS solve on the same rows) and the held-out accuracy, and
# it times grab's epochs against corgipile's in the same run.  Writes
# convergence-grab.csv / .json / .md into --output-dir (docs/grab.md reads them).

GRAB_STRATEGIES = ("shuffle_once", "corgipile", "grab")
GRAB_DATASETS = ("synthetic-clustered", "synthetic-feature", "fashion-binary", "fashion-10")
GRAB_PREFIX = "cg_"
GRAB_DECAY = 0.8
# Fashion-MNIST subsets are linearly separable or nearly so: without l2 the
# minimum is at infinity (f* = 0, |w| grows without end) and every order only
# measures how slowly SGD walks out there.  A small l2 makes f* a real minimum.
GRAB_FASHION_L2 = 1e-3
# constant rates: the simulation's 0.01 for the synthetic table (docs/grab-simulation.md),
# the study's DEFAULT_LR for Fashion-MNIST
GRAB_LR = {"synthetic-clustered": 0.01, "synthetic-feature": 0.01,
           "fashion-binary": DEFAULT_LR["logistic"], "fashion-10": DEFAULT_LR["softmax"]}
# softmax's 0.001 (best held-out accuracy after 20 epochs) leaves, after 10
# epochs, a gap that is the same for every order (docs/grab.md): a 10x
# constant rate too, where what remains of the gap is the order's
GRAB_EXTRA_CONSTANT = {"fashion-10": 0.01}


def grab_rates(name: str) -> list[tuple[str, float, float]]:
    """(label, learning rate, decay) of the dataset's settings."""
    out = [("constant", GRAB_LR[name], 1.0), ("decaying", GRAB_LR[name], GRAB_DECAY)]
    if name in GRAB_EXTRA_CONSTANT:
        out.append((f"constant {GRAB_EXTRA_CONSTANT[name]}", GRAB_EXTRA_CONSTANT[name], 1.0))
    return out


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


def engine_train(conn: psycopg.Connection, run: dict, epochs: int,
                 validation: str | None) -> tuple[list[tuple], list[float], dict]:
    name = run["model_name"]
    conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models AS m"
                 " WHERE m.model_name = %s", (name,))
    rows = conn.execute(
        "SELECT epoch, loss, validation_score, seconds FROM corgipile.train("
        "%s::regclass, %s, model_name => %s, shuffle => %s, learning_rate => %s, "
        "decay => %s, l2 => %s, max_epoch_num => %s, seed => %s, validation => %s, "
        # the 0.3.0 default buffer, which the study's figures were made with
        # (0.4.0's default takes a table below maintenance_work_mem whole)
        "standardize => 'off', buffer_size => '10%%')",
        (run["table"], run["model"], name, run["strategy"], run["learning_rate"],
         run["decay"], run["l2"], epochs, run["seed"], validation)).fetchall()
    weights, params = conn.execute(
        "SELECT weights, params FROM corgipile.models WHERE model_name = %s",
        (name,)).fetchone()
    conn.execute("SELECT corgipile.drop_model(%s)", (name,))
    return rows, weights, params


def grab_setting(conn: psycopg.Connection, run: dict, ds: dict, fstar: float) -> dict:
    """One (dataset, rate, seed, strategy): trainings of 1, 2, ..., E epochs
    with the same seed.  A seed gives the same weights whatever
    max_epoch_num, so the e-epoch training's weights are the E-epoch
    training's after epoch e: f(w) - f* per epoch without a hook for
    per-epoch weights.  The E-epoch training validates on the test table
    (held-out accuracy per epoch); the shorter ones give the epoch times."""
    E = run["epochs"]
    gaps, secs = [], []
    full = None
    for e in range(1, E + 1):
        rows, w, params = engine_train(conn, run, e, run["test_table"] if e == E else None)
        gaps.append(ds_f(ds)(np.array(w, dtype=float))[0] - fstar)
        if e < E or E == 1:
            secs.append([r[3] for r in rows])
        if full is not None and [r[1] for r in rows[:-1]] != full:
            raise SystemExit(f"{run['model_name']}: the {e}-epoch training did not repeat the "
                             "shorter one's epochs; per-epoch weights cannot be taken this way")
        full = [r[1] for r in rows]
    return {**run, "epochs_out": [
        {"epoch": r[0], "loss": r[1], "validation_score": r[2], "seconds": r[3], "gap": g}
        for r, g in zip(rows, gaps)],
        "timing_seconds": secs[-1],
        "engine_params": {k: params.get(k) for k in (
            "pages_per_block", "blocks_per_buffer", "n_blocks", "grab_buffer_shuffle",
            "grab_dim", "grab_projected", "grab_unit_blocks", "grab_epochs_kept",
            "grab_step")}}


def grab_runs(args: argparse.Namespace, data: dict, tinfo: dict) -> list[dict]:
    runs = []
    for name in data:
        for rate, lr, decay in grab_rates(name):
            for seed in range(1, args.seeds + 1):
                for strategy in GRAB_STRATEGIES:
                    runs.append({
                        "dataset": name, "model": data[name]["model"], "rate": rate,
                        "learning_rate": lr, "decay": decay, "l2": data[name]["l2"],
                        "seed": seed, "strategy": strategy, "epochs": args.epochs,
                        "table": tinfo[name]["table"], "test_table": tinfo[name]["test_table"],
                        "model_name": f"{GRAB_PREFIX}{name}_{rate}_{strategy}_s{seed}"
                                      .replace("-", "_")})
    return runs


def noise_bound(a: np.ndarray, b: np.ndarray) -> float:
    """Two standard errors of the difference of two means over seeds."""
    def se(v):
        return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
    return 2.0 * float(np.hypot(se(a), se(b)))


def grab_summary(results: list[dict], data: dict, args: argparse.Namespace) -> dict:
    settings, checks, timing = [], [], []
    for name in data:
        for rate, lr, decay in grab_rates(name):
            cell = {"dataset": name, "rate": rate, "learning_rate": lr, "decay": decay}
            for strategy in GRAB_STRATEGIES:
                gap = [r for r in results if r["dataset"] == name
                       and r["rate"] == rate and r["strategy"] == strategy]
                g = np.array([[e["gap"] for e in r["epochs_out"]] for r in gap])
                a = np.array([[e["validation_score"] for e in r["epochs_out"]] for r in gap])
                cell[strategy] = {
                    "final_gap": g[:, -1].tolist(), "final_gap_mean": float(g[:, -1].mean()),
                    "gap_per_epoch_mean": g.mean(axis=0).tolist(),
                    "final_accuracy_mean": float(a[:, -1].mean()),
                    "accuracy_per_epoch_mean": a.mean(axis=0).tolist(),
                    "engine_params": gap[0]["engine_params"]}
            cg = np.array(cell["corgipile"]["final_gap"])
            gg = np.array(cell["grab"]["final_gap"])
            cell["grab_over_corgipile"] = float(gg.mean() / cg.mean())
            cell["noise"] = noise_bound(gg, cg)
            settings.append(cell)
            if rate.startswith("constant") and name != "synthetic-feature":
                checks.append({"goal": "grab's final gap <= 1/2 of corgipile's (label-clustered, "
                                       "constant rate)", "dataset": name, "rate": rate,
                               "value": cell["grab_over_corgipile"],
                               "holds": cell["grab_over_corgipile"] <= 0.5})
            checks.append({"goal": "grab not worse than corgipile beyond noise "
                                   "(mean gap difference <= 2 standard errors)",
                           "dataset": name, "rate": rate,
                           "value": float(gg.mean() - cg.mean()), "noise": cell["noise"],
                           "holds": bool(gg.mean() - cg.mean() <= cell["noise"])})
        for rate, _, decay in grab_rates(name):
            if decay != 1.0:
                continue
            t = {}
            for strategy in ("corgipile", "grab"):
                # epochs 2.. of the (E-1)-epoch trainings (no validation), constant rate
                secs = [x for r in results if r["rate"] == rate
                        and r["dataset"] == name and r["strategy"] == strategy
                        for x in (r["timing_seconds"][1:] or r["timing_seconds"])]
                t[strategy] = float(np.median(secs))
            ratio = t["grab"] / t["corgipile"]
            timing.append({"dataset": name, "rate": rate, "corgipile_epoch_s": t["corgipile"],
                           "grab_epoch_s": t["grab"], "ratio": ratio})
            checks.append({"goal": "grab epoch <= 1.1 x corgipile epoch", "dataset": name,
                           "rate": rate, "value": ratio, "holds": ratio <= 1.1})
    return {"settings": settings, "timing": timing, "checks": checks}


def grab_markdown(summary: dict, report: dict) -> str:
    L = ["<!-- written by scripts/convergence_study.py --grab; do not edit by hand -->", ""]
    p = report["protocol"]
    L.append(f"Generated {report['generated']} on {report['machine']['cpu']}, "
             f"{report['machine']['cores']} cores (load average at start "
             f"{report['machine']['load_average_at_start'][0]:.1f}), in "
             f"{report['total_seconds']:.0f} s. Command: `{report['command']}`.")
    L.append("")
    L.append(f"{p['epochs']} epochs, seeds {p['seeds']}, batch size 1, engine default "
             f"sizing (buffer 10%, default block size); constant = the rate below with "
             f"decay 1, decaying = the same rate with decay {GRAB_DECAY} per epoch "
             "(\"constant X\": rate X, decay 1). Gap = f(w) - f* after the epoch (f = the "
             "engine's objective: mean training loss + l2/2 |w|^2 without the biases; f* from "
             "L-BFGS on the same rows), mean over seeds; noise = two standard errors of the "
             "difference of the grab and corgipile means (0 with one seed). Fashion-MNIST is a "
             f"stratified subsample of {p.get('fashion_train_rows')} training and "
             f"{p.get('fashion_test_rows')} test images.")
    L.append("")
    E = p["epochs"]
    L.append("| dataset | rows (pages) | rows per block | lr | l2 | f* | solver gradient norm |")
    L.append("|---|---|---|---|---|---|---|")
    for name, d in report["datasets"].items():
        s = next(c for c in summary["settings"] if c["dataset"] == name)
        ep = s["grab"]["engine_params"]
        rpb = d["rows"] / max(1, ep["n_blocks"] or 1)
        L.append(f"| {name} | {d['rows']} ({d['pages']}) | {rpb:.1f} "
                 f"({ep['pages_per_block']} page(s); grab buffer "
                 f"{'shuffled' if ep['grab_buffer_shuffle'] == 'true' else 'kept in order'}"
                 f"{', projected to ' + str(ep['grab_dim']) if ep['grab_projected'] == 'true' else ''}"
                 f") | {GRAB_LR[name]} | {p['l2'][name]:g} | {d['fstar']:.6g} | "
                 f"{d['grad_norm']:.1e} |")
    L += ["", "Final gap (mean over seeds), grab / corgipile, and final held-out accuracy (%); "
          "grab's unit (blocks) and the epochs its buffer kept GraB's order (seed 1):", "",
          "| dataset | rate | shuffle_once | corgipile | grab | grab / corgipile | noise (2 se) "
          "| acc. shuffle_once | acc. corgipile | acc. grab | grab unit | epochs kept |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in summary["settings"]:
        ep = c["grab"]["engine_params"]
        L.append(f"| {c['dataset']} | {c['rate']} | "
                 + " | ".join(f"{c[s]['final_gap_mean']:.2e}" for s in GRAB_STRATEGIES)
                 + f" | {c['grab_over_corgipile']:.2f} | {c['noise']:.1e} | "
                 + " | ".join(f"{100 * c[s]['final_accuracy_mean']:.2f}" for s in GRAB_STRATEGIES)
                 + f" | {ep.get('grab_unit_blocks')} | {ep.get('grab_epochs_kept')} of {E} |")
    L += ["", "Gap per epoch (mean over seeds), constant rate:", ""]
    L.append("| dataset | strategy | " + " | ".join(str(e) for e in range(1, E + 1)) + " |")
    L.append("|---|---|" + "---:|" * E)
    for c in summary["settings"]:
        if not c["rate"].startswith("constant"):
            continue
        for s in GRAB_STRATEGIES:
            L.append(f"| {c['dataset']} | {s} | "
                     + " | ".join(f"{v:.1e}" for v in c[s]["gap_per_epoch_mean"]) + " |")
    L += ["", "Epoch time (median over epochs 2.. of the trainings without validation, constant rate, all seeds; the strategies alternate, so they share the machine's load):", "",
          "| dataset | rate | corgipile epoch (s) | grab epoch (s) | grab / corgipile |",
          "|---|---|---:|---:|---:|"]
    for t in summary["timing"]:
        L.append(f"| {t['dataset']} | {t.get('rate', 'constant')} | {t['corgipile_epoch_s']:.3f} "
                 f"| {t['grab_epoch_s']:.3f} | {t['ratio']:.2f} |")
    L += ["", "Goals (issue 10 §3):", "", "| goal | dataset | rate | value | holds |",
          "|---|---|---|---:|---|"]
    for c in summary["checks"]:
        v = f"{c['value']:.3g}" + (f" (noise {c['noise']:.1e})" if "noise" in c else "")
        L.append(f"| {c['goal']} | {c['dataset']} | {c['rate']} | {v} | "
                 f"{'yes' if c['holds'] else 'NO'} |")
    return "\n".join(L) + "\n"


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


def grab_study(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    data = grab_data(args)
    tinfo, mach = load_study_tables(args, data, GRAB_PREFIX, log)
    runs = grab_runs(args, data, tinfo)

    def describe(r: dict) -> str:
        last = r["epochs_out"][-1]
        return (f"{r['dataset']} {r['rate']} {r['strategy']:<12} seed {r['seed']}: gap "
                f"{last['gap']:.3e}, held-out {last['validation_score']:.4f}, "
                f"{np.median(r['timing_seconds']):.3f} s/epoch")

    results = run_settings(args, runs, grab_setting, data, tinfo, describe, log)

    summary = grab_summary(results, data, args)
    with open(out / "convergence-grab.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "model", "rate", "learning_rate", "decay", "l2", "strategy",
                    "seed", "epoch", "train_loss_progressive", "gap", "validation_score",
                    "seconds"])
        for r in results:
            for e in r["epochs_out"]:
                w.writerow([r["dataset"], r["model"], r["rate"], r["learning_rate"],
                            r["decay"], r["l2"], r["strategy"], r["seed"], e["epoch"], e["loss"],
                            e["gap"], e["validation_score"], e["seconds"]])
    report = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "convergence_study.py " + " ".join(sys.argv[1:]),
        "protocol": {"epochs": args.epochs, "seeds": list(range(1, args.seeds + 1)),
                     "strategies": list(GRAB_STRATEGIES), "quick": args.quick,
                     "learning_rates": {k: GRAB_LR[k] for k in data}, "decay": GRAB_DECAY,
                     "batch_size": 1, "buffer_size": "10%", "block_size": "default",
                     "l2": {k: data[k]["l2"] for k in data},
                     "fashion_train_rows": args.train_rows, "fashion_test_rows": args.test_rows,
                     "synthetic_rows": args.synthetic_rows,
                     "gap": "f(w) - f* after each epoch, f = the engine's objective (mean loss "
                            "+ l2/2 |w|^2 without the biases) computed in numpy from the "
                            "weights of the same-seed training of that many epochs",
                     "accuracy": "validation_score (test table) of the full-length training",
                     "epoch_time": "median of epochs 2.. of the (E-1)-epoch trainings "
                                   "(no validation), constant rate, all seeds"},
        "machine": mach,
        "datasets": {k: {kk: vv for kk, vv in v.items()} for k, v in tinfo.items()},
        "summary": summary, "runs": results,
        "total_seconds": time.monotonic() - started,
    }
    write_study(out, "convergence-grab", report, grab_markdown(summary, report),
                lambda v: f"{v:.3g}", log, started)
    return 0


# ---------------------------------------------------------------- parallel study (issue 11 §3)
#
# scripts/convergence_study.py --parallel [--quick]: train(workers => N) on the
# GraB study's label-clustered tables (its builders, its f* solver): corgipile
# at N = 1 and N = 2, and at N = 2 (and N = 4 with --parallel-n 2,4) shuffle
# grab with CD-GraB's PairBalance (corgipile.parallel_grab = pair_balance)
# against one GraB walk per worker (independent) and corgipile.  Per epoch:
# f(w) - f* and the held-out accuracy.  Writes convergence-parallel.csv /
# .json / .md into --output-dir (docs/parallel.md reads them).

PAR_DATASETS = ("synthetic-clustered", "fashion-binary")
PAR_PREFIX = "cpar_"


def par_arms(ns: list[int]) -> list[dict]:
    """The trainings compared: (label, N, shuffle, parallel_grab)."""
    arms = [{"arm": "corgipile N=1", "workers": 1, "strategy": "corgipile", "grab": None}]
    for n in ns:
        arms += [{"arm": f"corgipile N={n}", "workers": n, "strategy": "corgipile", "grab": None},
                 {"arm": f"CD-GraB N={n}", "workers": n, "strategy": "grab",
                  "grab": "pair_balance"},
                 {"arm": f"ID-GraB N={n}", "workers": n, "strategy": "grab",
                  "grab": "independent"}]
    return arms


def par_train(conn: psycopg.Connection, run: dict, epochs: int,
              validation: str | None) -> tuple[list[tuple], list[float]]:
    name = run["model_name"]
    conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models AS m"
                 " WHERE m.model_name = %s", (name,))
    conn.execute("SELECT pg_catalog.set_config('corgipile.parallel_grab', %s, false)",
                 (run["grab"] or "pair_balance",))
    rows = conn.execute(
        "SELECT epoch, loss, validation_score, seconds FROM corgipile.train("
        "%s::regclass, %s, model_name => %s, shuffle => %s, learning_rate => %s, "
        "decay => %s, l2 => %s, max_epoch_num => %s, seed => %s, validation => %s, "
        "standardize => 'off', workers => %s, buffer_size => '10%%')",
        (run["table"], run["model"], name, run["strategy"], run["learning_rate"],
         run["decay"], run["l2"], epochs, run["seed"], validation, run["workers"])).fetchall()
    weights = conn.execute("SELECT weights FROM corgipile.models WHERE model_name = %s",
                           (name,)).fetchone()[0]
    conn.execute("SELECT corgipile.drop_model(%s)", (name,))
    return rows, weights


def par_setting(conn: psycopg.Connection, run: dict, ds: dict, fstar: float) -> dict:
    """One (dataset, rate, seed, arm): trainings of 1, ..., E epochs with the
    same seed, as grab_setting does (under parallel_sync = average a seed and
    N give the same weights whatever max_epoch_num, so the e-epoch training's
    weights are the E-epoch one's after epoch e); the E-epoch training scores
    the test table after every epoch."""
    E = run["epochs"]
    gaps, full = [], None
    for e in range(1, E + 1):
        rows, w = par_train(conn, run, e, run["test_table"] if e == E else None)
        gaps.append(ds_f(ds)(np.array(w, dtype=float))[0] - fstar)
        if full is not None and [r[1] for r in rows[:-1]] != full:
            raise SystemExit(f"{run['model_name']}: the {e}-epoch training did not repeat the "
                             "shorter one's epochs; per-epoch weights cannot be taken this way")
        full = [r[1] for r in rows]
    return {**run, "epochs_out": [
        {"epoch": r[0], "loss": r[1], "validation_score": r[2], "seconds": r[3], "gap": g}
        for r, g in zip(rows, gaps)]}


def par_summary(results: list[dict], data: dict, args: argparse.Namespace) -> dict:
    settings, checks = [], []
    arms = [a["arm"] for a in par_arms(args.parallel_n)]
    for name in data:
        for rate, lr, decay in args.par_rates[name]:
            cell = {"dataset": name, "rate": rate, "learning_rate": lr, "decay": decay}
            for arm in arms:
                rs = sorted((r for r in results if r["dataset"] == name and r["rate"] == rate
                             and r["arm"] == arm), key=lambda r: r["seed"])
                g = np.array([[e["gap"] for e in r["epochs_out"]] for r in rs])
                a = np.array([[e["validation_score"] for e in r["epochs_out"]] for r in rs])
                cell[arm] = {"final_gap": g[:, -1].tolist(),
                             "final_gap_mean": float(g[:, -1].mean()),
                             "gap_per_epoch_mean": g.mean(axis=0).tolist(),
                             "final_accuracy": a[:, -1].tolist(),
                             "final_accuracy_mean": float(a[:, -1].mean()),
                             "accuracy_per_epoch_mean": a.mean(axis=0).tolist()}
            one = np.array(cell["corgipile N=1"]["final_accuracy"])
            for n in args.parallel_n:
                par = np.array(cell[f"corgipile N={n}"]["final_accuracy"])
                diff = 100 * float(par.mean() - one.mean())
                checks.append({"goal": f"corgipile N={n} held-out accuracy within 0.3 points of "
                                       "N=1 (or above it)",
                               "dataset": name, "rate": rate, "value": diff,
                               "noise": 100 * noise_bound(par, one),
                               "holds": round(diff, 6) >= -0.3})
            settings.append(cell)
    return {"arms": arms, "settings": settings, "checks": checks}


def par_markdown(summary: dict, report: dict) -> str:
    L = ["<!-- written by scripts/convergence_study.py --parallel; do not edit by hand -->", ""]
    p = report["protocol"]
    m = report["machine"]
    L.append(f"Generated {report['generated']} on {m['cpu']}, {m['cores']} cores (load average "
             f"at start {m['load_average_at_start'][0]:.1f}), in {report['total_seconds']:.0f} s. "
             f"Command: `{report['command']}`.")
    L.append("")
    L.append(f"{p['epochs']} epochs, seeds {p['seeds']}, batch size 1, engine default sizing "
             "(buffer 10%), corgipile.parallel_sync = average, standardize off; the GraB "
             "study's tables, rates and l2 (docs/grab.md). Gap = f(w) - f* after the epoch "
             "(mean over seeds); accuracy = held-out accuracy after the last epoch (%); "
             "noise = two standard errors of the difference of two means over seeds.")
    L.append("")
    for name, d in report["datasets"].items():
        L.append(f"- {name}: {d['what']}; {d['rows']} rows in {d['pages']} pages, "
                 f"{d['test_rows']} test rows; f* = {d['fstar']:.6g}")
    arms = summary["arms"]
    L += ["", "Final gap (mean over seeds):", "",
          "| dataset | rate | " + " | ".join(arms) + " |",
          "|---|---|" + "---:|" * len(arms)]
    for c in summary["settings"]:
        L.append(f"| {c['dataset']} | {c['rate']} | "
                 + " | ".join(f"{c[a]['final_gap_mean']:.2e}" for a in arms) + " |")
    L += ["", "Final held-out accuracy (%, mean over seeds; per seed in the JSON):", "",
          "| dataset | rate | " + " | ".join(arms) + " |",
          "|---|---|" + "---:|" * len(arms)]
    for c in summary["settings"]:
        L.append(f"| {c['dataset']} | {c['rate']} | "
                 + " | ".join(f"{100 * c[a]['final_accuracy_mean']:.2f}" for a in arms) + " |")
    E = p["epochs"]
    L += ["", "Gap per epoch (mean over seeds):", "",
          "| dataset | rate | arm | " + " | ".join(str(e) for e in range(1, E + 1)) + " |",
          "|---|---|---|" + "---:|" * E]
    for c in summary["settings"]:
        for a in arms:
            L.append(f"| {c['dataset']} | {c['rate']} | {a} | "
                     + " | ".join(f"{v:.1e}" for v in c[a]["gap_per_epoch_mean"]) + " |")
    L += ["", "Goal (issue 11 §3):", "", "| goal | dataset | rate | difference (points) | "
          "noise (2 se) | holds |", "|---|---|---|---:|---:|---|"]
    for c in summary["checks"]:
        L.append(f"| {c['goal']} | {c['dataset']} | {c['rate']} | {c['value']:+.2f} | "
                 f"{c['noise']:.2f} | {'yes' if c['holds'] else 'NO'} |")
    return "\n".join(L) + "\n"


def parallel_study(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    data = grab_data(args)
    args.par_rates = {name: [r for r in grab_rates(name) if r[0] in args.parallel_rates]
                      for name in data}
    tinfo, mach = load_study_tables(args, data, PAR_PREFIX, log)
    runs = []
    for name in data:
        for rate, lr, decay in args.par_rates[name]:
            for seed in range(1, args.seeds + 1):
                for arm in par_arms(args.parallel_n):
                    runs.append({
                        **arm, "dataset": name, "model": data[name]["model"], "rate": rate,
                        "learning_rate": lr, "decay": decay, "l2": data[name]["l2"],
                        "seed": seed, "epochs": args.epochs, "table": tinfo[name]["table"],
                        "test_table": tinfo[name]["test_table"],
                        "model_name": f"{PAR_PREFIX}{name}_{rate}_{arm['arm']}_s{seed}"
                                      .replace("-", "_").replace(" ", "_").replace("=", "")})

    def describe(r: dict) -> str:
        last = r["epochs_out"][-1]
        return (f"{r['dataset']} {r['rate']} {r['arm']:<16} seed {r['seed']}: gap "
                f"{last['gap']:.3e}, held-out {last['validation_score']:.4f}")

    results = run_settings(args, runs, par_setting, data, tinfo, describe, log)

    summary = par_summary(results, data, args)
    with open(out / "convergence-parallel.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "model", "rate", "learning_rate", "decay", "l2", "arm", "workers",
                    "strategy", "parallel_grab", "seed", "epoch", "train_loss_progressive", "gap",
                    "validation_score", "seconds"])
        for r in results:
            for e in r["epochs_out"]:
                w.writerow([r["dataset"], r["model"], r["rate"], r["learning_rate"], r["decay"],
                            r["l2"], r["arm"], r["workers"], r["strategy"], r["grab"] or "",
                            r["seed"], e["epoch"], e["loss"], e["gap"], e["validation_score"],
                            e["seconds"]])
    report = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "convergence_study.py " + " ".join(sys.argv[1:]),
        "protocol": {"epochs": args.epochs, "seeds": list(range(1, args.seeds + 1)),
                     "arms": par_arms(args.parallel_n), "quick": args.quick,
                     "rates": {k: v for k, v in args.par_rates.items()},
                     "parallel_sync": "average", "batch_size": 1, "buffer_size": "10%",
                     "fashion_train_rows": args.train_rows, "fashion_test_rows": args.test_rows,
                     "synthetic_rows": args.synthetic_rows,
                     "gap": "f(w) - f* after each epoch (the GraB study's objective and solver)",
                     "accuracy": "validation_score (test table) of the full-length training"},
        "machine": mach,
        "datasets": tinfo,
        "summary": summary, "runs": results,
        "total_seconds": time.monotonic() - started,
    }
    write_study(out, "convergence-parallel", report, par_markdown(summary, report),
                lambda v: f"{v:+.2f} points", log, started)
    return 0


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


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


def order_figure(args: argparse.Namespace, tinfo: dict, figures: list[dict]) -> list[dict]:
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        views = order_heatmaps(conn, tinfo["clustered-10"]["table"], args.sweep_buffer, seed=1)
    path = args.output_dir / "img" / "convergence-order.png"
    plot_order(views, f"Class of the rows fed to SGD along one epoch: fashion-10, "
                      f"clustered table ({tinfo['clustered-10']['rows']} rows), "
                      f"buffer {args.sweep_buffer}, seed 1", path)
    figures.append({"file": str(path.relative_to(args.output_dir)), "stage": "order"})
    return views


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.parallel:
        return parallel_study(args)
    if args.grab:
        return grab_study(args)
    out = args.output_dir
    img = out / "img"
    img.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(msg: str) -> None:
        print(msg, flush=True)

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        mach = machine(conn)
        log(f"Loading Fashion-MNIST ({args.train_rows or 60000} training, "
            f"{args.test_rows or 10000} test images)")
        data = load_fashion(args.train_rows, args.test_rows)
        tinfo = prepare_tables(conn, data, args.reuse_tables or args.order_only, log)
    if args.order_only:
        figures: list[dict] = []
        views = order_figure(args, tinfo, figures)
        jpath = out / "convergence-results.json"
        if jpath.exists():
            report = json.loads(jpath.read_text())
            report["feeding_order"] = views
            report["figures"] = [f for f in report["figures"] if f.get("stage") != "order"] + figures
            jpath.write_text(json.dumps(report, indent=1))
        log(f"Wrote {out / figures[0]['file']}")
        return 0
    task_specs = tasks(args)
    runner = Runner(args.dsn)
    lr_search: list[dict] = []
    try:
        if args.lr_search:
            log(f"Learning-rate search over {LR_GRID} (shuffle_once, seed 1, clustered)")
            grid = [make_run(t, spec, "clustered", "10%", None, "shuffle_once", 1, lr, args, tinfo,
                             f"lr{i}")
                    for t, spec in task_specs.items() for i, lr in enumerate(LR_GRID)]
            for r in run_all(runner, grid, args.jobs, log):
                lr_search.append({"task": r["task"], "model": r["model"],
                                  "learning_rate": r["learning_rate"], "error": r.get("error"),
                                  "final_validation_score": r["final_validation_score"],
                                  "validation_scores": [h["validation_score"] for h in r["history"]],
                                  "losses": [h["loss"] for h in r["history"]]})
            for t, spec in task_specs.items():
                best = max((s for s in lr_search if s["task"] == t),
                           key=lambda s: -1.0 if s["final_validation_score"] is None
                           else s["final_validation_score"])
                args.lr[spec["model"]] = best["learning_rate"]
                log(f"  {t} ({spec['model']}): learning rate {best['learning_rate']}")

        seeds = list(range(1, args.seeds + 1))
        runs = [make_run(t, spec, o, b, None, s, seed, args.lr[spec["model"]], args, tinfo, "main")
                for t, spec in task_specs.items() for o in args.orderings for b in args.buffers
                for seed in seeds for s in args.strategies]
        for bs in args.sweep_blocks:
            runs += [make_run(t, spec, o, args.sweep_buffer, bs, s, seed, args.lr[spec["model"]],
                              args, tinfo, "sweep")
                     for t, spec in task_specs.items() for o in args.orderings
                     for seed in seeds for s in args.sweep_strategies]
        log(f"{len(runs)} trainings of {args.epochs} epochs, {args.jobs} at a time")
        results = run_all(runner, runs, args.jobs, log)
    finally:
        runner.close()

    summary = summarise(results)
    checks = acceptance(summary, args)

    # ---- CSV: every epoch of every run (the data behind every plot)
    fields = ["stage", "task", "model", "ordering", "buffer", "block_size", "strategy", "seed",
              "learning_rate", "epoch", "tuples", "loss", "train_score", "validation_score",
              "seconds", "pages_per_block", "blocks_per_buffer", "n_blocks"]
    with open(out / "convergence-results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in results:
            for h in r["history"]:
                w.writerow({**{k: r[k] for k in fields if k in r}, **h, **r["engine_params"],
                            "block_size": r["block_size"] or "default"})
    if lr_search:
        with open(out / "convergence-lr-search.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["task", "model", "learning_rate", "epoch", "loss", "validation_score"])
            for s in lr_search:
                for e, (loss, v) in enumerate(zip(s["losses"], s["validation_scores"]), 1):
                    w.writerow([s["task"], s["model"], s["learning_rate"], e, loss, v])

    # ---- plots
    figures = []
    for task, spec in task_specs.items():
        for o in args.orderings:
            for b in args.buffers:
                group = [r for r in results if r["stage"] == "main" and r["task"] == task
                         and r["ordering"] == o and r["buffer"] == b]
                if not group:
                    continue
                path = img / f"convergence-{task}-{o}-{buffer_tag(b)}.png"
                rows = tinfo[spec["tables"][o]]["rows"]
                plot_group(group, f"{task} ({spec['model']}, lr {args.lr[spec['model']]}), "
                                  f"{o}, buffer {b}, {rows} training rows", path)
                figures.append({"file": str(path.relative_to(out)), "task": task, "ordering": o,
                                "buffer": b, "stage": "main"})
    if args.sweep_blocks:
        path = img / "convergence-block-size.png"
        plot_sweep(summary, args, path)
        figures.append({"file": str(path.relative_to(out)), "stage": "sweep"})

    order_views: list[dict] = []
    if "fashion-10" in task_specs and "clustered" in args.orderings:
        order_views = order_figure(args, tinfo, figures)

    # ---- JSON and markdown
    report = {
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
        "protocol": {
            "epochs": args.epochs, "seeds": list(range(1, args.seeds + 1)),
            "strategies": args.strategies, "buffers": args.buffers, "orderings": {
                "clustered": "sorted by the task's label (binary: -1 then +1; 10-class: 0..9), "
                             "ties in the file's order",
                "feature": "sorted by the image's mean pixel intensity (ascending), "
                           "ties in the file's order"},
            "learning_rates": args.lr, "decay": args.decay, "batch_size": 1,
            "block_size_main": "engine default (NULL)",
            "sweep": {"buffer": args.sweep_buffer, "block_sizes_pages": args.sweep_blocks,
                      "strategies": args.sweep_strategies},
            "tasks": task_specs, "train_rows": args.train_rows or 60000,
            "test_rows": args.test_rows or 10000, "quick": args.quick,
            "final_accuracy": "validation_score of the last epoch (accuracy of the model "
                              "after that epoch on the test table)",
        },
        "machine": mach, "datasets": tinfo, "lr_search": lr_search, "figures": figures,
        "summary": summary, "acceptance": checks, "feeding_order": order_views,
        "runs": results,
        "total_seconds": time.monotonic() - started,
    }
    with open(out / "convergence-results.json", "w") as f:
        json.dump(report, f, indent=1)
    (out / "convergence-results.md").write_text(markdown(summary, checks, args))
    log(f"Wrote {out / 'convergence-results.csv'}, .json, .md and {len(figures)} figure(s) "
        f"in {time.monotonic() - started:.0f} s")
    for c in checks:
        log(f"  {'ok ' if c['holds'] else 'NO '} {c['check']}: {c['task']} {c['ordering']} "
            f"{c['buffer']} {c['strategy']} gap {c['gap_pp']:+.2f} pp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
