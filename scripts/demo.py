#!/usr/bin/env python3
"""make demo: why the two-level shuffle matters, on real data.

Loads Fashion-MNIST (Debian's dataset-fashion-mnist package) as a binary
task - upper-body clothing (T-shirt, pullover, dress, coat, shirt) against
trousers, shoes and bags - into a table stored clustered by label, the way
tables often are.  Then trains the same model twice from SQL: with
shuffle => 'no_shuffle', which reads the table in storage order, and with
CorgiPile's block and tuple shuffle.  Prints each epoch as the server
reports it, and the held-out accuracy of both.
"""

from __future__ import annotations

import argparse
import gzip
import re
import struct
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

# provenance.py stands beside this script, in the checkout and in the image
sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import load as load_average
from provenance import run_line

DATA = Path("/usr/share/datasets/fashion-mnist")
UPPER_BODY = {0, 2, 3, 4, 6}  # T-shirt/top, Pullover, Dress, Coat, Shirt
EPOCH = re.compile(r"epoch=(\d+)/(\d+) tuples=(\d+) loss=(\S+) score=(\S+) "
                   r"validation_score=(\S+) seconds=(\S+)")


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): magic, dimensions, then bytes."""
    with gzip.open(path, "rb") as f:
        _, _, dtype, ndim = struct.unpack(">BBBB", f.read(4))
        if dtype != 0x08:
            raise ValueError(f"{path}: expected unsigned bytes, got type {dtype:#x}")
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def load(conn: psycopg.Connection, table: str, images: np.ndarray, labels: np.ndarray,
         clustered: bool) -> None:
    y = np.where(np.isin(labels, list(UPPER_BODY)), 1, -1)
    x = (images.reshape(len(images), -1) / 255.0).astype(np.float32)
    order = np.argsort(y, kind="stable") if clustered else np.arange(len(y))
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, class int, label int, features float4[])")
    # keep the 784-float arrays compressed in the heap pages rather than in
    # TOAST, so that reading a block of pages reads its rows
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN features SET STORAGE MAIN")
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "int4", "float4[]"])
        for i in order:
            copy.write_row((int(i), int(labels[i]), int(y[i]), x[i].tolist()))
    conn.execute(f"ANALYZE {table}")


def ensure_data(conn: psycopg.Connection) -> None:
    have = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename IN "
                        "('fashion_train', 'fashion_test')").fetchone()[0]
    if have == 2:
        print("Using the Fashion-MNIST tables loaded earlier.")
        return
    if not DATA.is_dir():
        sys.exit(f"{DATA} is missing: install Debian's dataset-fashion-mnist package "
                 "(scripts/install_deps.sh does)")
    t0 = time.monotonic()
    load(conn, "fashion_train", read_idx(DATA / "train-images-idx3-ubyte.gz"),
         read_idx(DATA / "train-labels-idx1-ubyte.gz"), clustered=True)
    load(conn, "fashion_test", read_idx(DATA / "t10k-images-idx3-ubyte.gz"),
         read_idx(DATA / "t10k-labels-idx1-ubyte.gz"), clustered=False)
    print(f"Loaded 60,000 training and 10,000 test images in {time.monotonic() - t0:.1f} s; "
          "the training table is stored clustered by label (all negatives, then all positives).")


def train(conn: psycopg.Connection, shuffle: str, args: argparse.Namespace) -> float:
    name = f"demo_{shuffle}"
    conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models AS m"
                 " WHERE m.model_name = %s", (name,))
    print(f"\n-- SELECT * FROM corgipile.train('fashion_train', '{args.model}', "
          f"shuffle => '{shuffle}', max_epoch_num => {args.epochs}, "
          f"standardize => '{args.standardize}', ...)")
    print(f"{'epoch':>5} {'loss':>8} {'train acc':>9} {'held-out':>9} {'seconds':>8}")
    conn.execute(
        "SELECT * FROM corgipile.train('fashion_train', %s, model_name => %s, shuffle => %s, "
        "max_epoch_num => %s, learning_rate => %s, seed => %s, standardize => %s, "
        "validation => 'fashion_test')",
        (args.model, name, shuffle, args.epochs, args.learning_rate, args.seed,
         args.standardize)).fetchall()
    return conn.execute(
        "SELECT avg((corgipile.predict(%s, t) = t.label)::int)::float8 FROM fashion_test t",
        (name,)).fetchone()[0]


def on_notice(diag: psycopg.errors.Diagnostic) -> None:
    m = EPOCH.search(diag.message_primary or "")
    if m:
        e, _, _, loss, score, vscore, secs = m.groups()
        print(f"{e:>5} {float(loss):8.4f} {float(score):9.4f} {float(vscore):9.4f} "
              f"{float(secs):8.2f}", flush=True)
    elif (diag.message_primary or "").startswith("corgipile:"):
        print(f"NOTICE: {diag.message_primary}")


def connect(dsn: str, wait: float) -> psycopg.Connection:
    """Connect, retrying for up to `wait` seconds while the server is not
    there yet: no answer from a server at all (not started, its host name
    not resolvable yet, or a container's first start, when only a temporary
    server on the Unix socket runs while the database is initialised), or
    its FATAL "the database system is starting up" (or shutting down, or in
    recovery).  Any other answer, such as a wrong password or database,
    fails at once.  libpq reports no SQLSTATE for a failed connection, so
    the two cases are told apart by its message: a server's answer is a
    FATAL."""
    deadline = time.monotonic() + wait
    attempts, said = 0, False
    while True:
        attempts += 1
        try:
            return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as e:
            message = str(e)
            transient = "FATAL:" not in message or "the database system is" in message
            left = deadline - time.monotonic()
            if not transient or left <= 0:
                if transient and wait > 0:
                    sys.exit(f"demo: could not connect to the database in {wait:g} s "
                             f"({attempts} attempts): {message.strip()}\n"
                             "Is the server running, and do --dsn or PGHOST/PGPORT point at it? "
                             "(--wait SECONDS waits longer)")
                raise
            if not said:
                print(f"Waiting for the database (up to {wait:g} s): {message.strip()}", flush=True)
                said = True
            time.sleep(min(2.0, max(left, 0.1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="", help="libpq connection string (default: PG* variables)")
    parser.add_argument("--model", default="logistic", choices=["svm", "logistic"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--standardize", default="auto", choices=["auto", "off"],
                        help="train()'s standardize: 'off' trains on the raw pixels")
    parser.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                        help="keep trying to connect this long while the database starts "
                             "(default: 120; 0: one attempt)")
    args = parser.parse_args()
    if args.wait < 0:
        parser.error("--wait must be 0 or more seconds")

    with connect(args.dsn, args.wait) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        # a demo cluster kept from an earlier checkout has that version's
        # catalog: update it, or, if that checkout's scripts predate the
        # versions' final form, start the demo's extension afresh
        try:
            with conn.transaction():
                conn.execute("ALTER EXTENSION corgipile UPDATE")
        except psycopg.Error as e:
            print("The demo cluster's corgipile catalog cannot be updated "
                  f"({e.diag.message_primary}); recreating it (the demo's models are dropped).")
            conn.execute("DROP EXTENSION corgipile CASCADE")
            conn.execute("CREATE EXTENSION corgipile")
        conn.add_notice_handler(on_notice)
        ensure_data(conn)
        print(run_line(conn.execute("SHOW server_version").fetchone()[0]))
        results = {s: train(conn, s, args) for s in ("no_shuffle", "corgipile")}
    print("\nHeld-out accuracy on the 10,000 test images:")
    for shuffle, acc in results.items():
        print(f"  {shuffle:<11} {acc:.4f}")
    print(f"(load average at the end: {load_average()})")
    print("\nno_shuffle sees all of one class, then all of the other, so each epoch ends with a\n"
          "model pulled towards the last class it saw; its training accuracy, measured while it\n"
          "trains on one class at a time, looks perfect and means nothing.  CorgiPile reads\n"
          "random blocks of pages and shuffles the rows of a buffer of them, which is enough to\n"
          "train as if the table were shuffled, at about the cost of a sequential scan.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
