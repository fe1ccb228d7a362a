"""Distributed training on Citus against one node and scikit-learn
(docs/distributed.md): accuracy, CPU, the cost of rounds, the coordinator's
overhead and the bytes that cross per round.

    CORGIPILE_CITUS_CLUSTER=DIR .venv/bin/python scripts/bench_distributed.py [--rows N]

DIR is a cluster started by scripts/citus_cluster.sh (with this checkout's
corgipile installed).  The table is synthetic: 28 standard normal features,
a label from a seeded linear rule with 10% of the labels flipped, loaded
ORDER BY label (every shard's rows start with one class), distributed in 4
shards over the 2 workers; a local copy of the same rows, in the same order,
trains on one node; 20% more rows, not trained on, score every model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import psycopg
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import run_line

SEEDS = [1, 2, 3, 4, 5]
FEATURES = 28
TICKS = os.sysconf("SC_CLK_TCK")


def read_env(path: Path) -> dict[str, str]:
    env = {}
    for line in (path / "env").read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value.strip('"')
    return env


def backend_cpu(pid: int) -> float:
    """User + system CPU seconds of a server process on this machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def make_data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2026)
    x = rng.standard_normal((n, FEATURES))
    w = rng.standard_normal(FEATURES)
    y = (x @ w + 0.5 * rng.standard_normal(n) > 0).astype(int)
    flip = rng.random(n) < 0.10
    y[flip] = 1 - y[flip]
    return x, y


def load(conn: psycopg.Connection, table: str, x: np.ndarray, y: np.ndarray, first_id: int) -> None:
    cols = ", ".join(f"f{j} float8" for j in range(FEATURES))
    conn.execute(f"CREATE TABLE {table} (id int, {cols}, label int)")
    order = np.argsort(y, kind="stable")  # stored by label
    with conn.cursor().copy(f"COPY {table} FROM STDIN") as copy:
        for i in order:
            copy.write_row([first_id + int(i), *map(float, x[i]), int(y[i])])


def accuracy(conn: psycopg.Connection, model: str) -> float:
    return conn.execute(
        "SELECT avg((corgipile.predict_class(%s, t.*)::int = t.label)::int)::float8 FROM bench_test t",
        (model,)).fetchone()[0]


def train(conn: psycopg.Connection, table: str, name: str, seed: int, extra: str = "") -> list[tuple]:
    feats = ",".join(f"f{j}" for j in range(FEATURES))
    return conn.execute(
        f"SELECT epoch, tuples, seconds FROM corgipile.train('{table}', 'logistic', "
        f"features => '{feats}', model_name => '{name}', seed => {seed}{extra})").fetchall()


def explain_train(conn: psycopg.Connection, table: str, name: str, seed: int, extra: str) -> dict:
    feats = ",".join(f"f{j}" for j in range(FEATURES))
    plan = conn.execute(
        f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM corgipile.train('{table}', 'logistic', "
        f"features => '{feats}', model_name => '{name}', seed => {seed}{extra})").fetchone()[0]
    return plan[0]["Plan"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000, help="training rows")
    ap.add_argument("--epochs", type=int, default=10, help="epochs of the CPU comparison")
    ap.add_argument("--local-epochs", type=int, nargs="+", default=[1, 2, 4],
                    help="local epochs per round to compare")
    args = ap.parse_args()
    cluster = os.environ.get("CORGIPILE_CITUS_CLUSTER")
    if not cluster:
        sys.exit("set CORGIPILE_CITUS_CLUSTER to a cluster started by scripts/citus_cluster.sh")
    env = read_env(Path(cluster))
    dsn = f"host=127.0.0.1 port={env['COORDINATOR_PORT']} user={env['PGUSER']} dbname=postgres"
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET client_min_messages = warning")
    server = conn.execute("SHOW server_version").fetchone()[0]
    print(run_line(server))

    n_test = args.rows // 5
    x, y = make_data(args.rows + n_test)
    xtr, ytr, xte, yte = x[:args.rows], y[:args.rows], x[args.rows:], y[args.rows:]
    for t in ("bench_dist", "bench_local", "bench_test"):
        conn.execute(f"DROP TABLE IF EXISTS {t}")
    conn.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                 "WHERE model_name LIKE 'bench_%'")
    cols = ", ".join(f"f{j} float8" for j in range(FEATURES))
    conn.execute(f"CREATE TABLE bench_dist (id int, {cols}, label int)")
    conn.execute("SELECT create_distributed_table('bench_dist', 'id', shard_count => 4)")
    load(conn, "bench_local", xtr, ytr, 0)
    conn.execute("INSERT INTO bench_dist SELECT * FROM bench_local")
    load(conn, "bench_test", xte, yte, args.rows)
    conn.execute("VACUUM ANALYZE bench_local")
    conn.execute("VACUUM ANALYZE bench_test")

    mean, std = xtr.mean(axis=0), xtr.std(axis=0)
    sk = LogisticRegression(C=1.0, max_iter=1000).fit((xtr - mean) / std, ytr)
    sk_acc = sk.score((xte - mean) / std, yte)

    print(f"\n{args.rows} training rows x {FEATURES} features stored by label, 4 shards on 2 workers; "
          f"{n_test} held-out rows\n")
    print("| seed | distributed | single node | scikit-learn | dist - single | dist - sklearn "
          "| dist epochs | single epochs |")
    print("|---|---|---|---|---|---|---|---|")
    gaps_single, gaps_sk = [], []
    for seed in SEEDS:
        d = train(conn, "bench_dist", f"bench_d{seed}", seed)
        s = train(conn, "bench_local", f"bench_s{seed}", seed)
        ad, as_ = accuracy(conn, f"bench_d{seed}"), accuracy(conn, f"bench_s{seed}")
        gaps_single.append(ad - as_)
        gaps_sk.append(ad - sk_acc)
        print(f"| {seed} | {ad:.4f} | {as_:.4f} | {sk_acc:.4f} | {100 * (ad - as_):+.2f} pt | "
              f"{100 * (ad - sk_acc):+.2f} pt | {len(d)} | {sum(1 for r in s if r[0] is not None)} |")
    print(f"\nmedian gap to single node {100 * statistics.median(gaps_single):+.2f} pt "
          f"(worst {100 * max(gaps_single, key=abs):+.2f}); to scikit-learn "
          f"{100 * statistics.median(gaps_sk):+.2f} pt (worst {100 * max(gaps_sk, key=abs):+.2f})")

    # local epochs per round: the default's choice, measured
    print("\nlocal epochs per round (corgipile.distributed_local_epochs), default trainings, "
          "seeds 1-5:\n")
    print("| local epochs | median accuracy | worst gap to single node | median epochs | "
          "median rounds | median wall s |")
    print("|---|---|---|---|---|---|")
    for local in args.local_epochs:
        conn.execute(f"SET corgipile.distributed_local_epochs = {local}")
        accs, gaps, epochs, rounds, walls = [], [], [], [], []
        for seed in SEEDS:
            d = train(conn, "bench_dist", f"bench_l{local}_{seed}", seed)
            a = accuracy(conn, f"bench_l{local}_{seed}")
            accs.append(a)
            gaps.append(a - accuracy(conn, f"bench_s{seed}"))
            epochs.append(len(d))
            rounds.append(-(-len(d) // local))
            walls.append(sum(r[2] for r in d))
        print(f"| {local} | {statistics.median(accs):.4f} | {100 * max(gaps, key=abs):+.2f} pt | "
              f"{statistics.median(epochs)} | {statistics.median(rounds)} | "
              f"{statistics.median(walls):.2f} |")
    conn.execute("RESET corgipile.distributed_local_epochs")

    # CPU, the same rows and epochs (explicit epochs: no stopping rule, no polish)
    extra = f", max_epoch_num => {args.epochs}"
    pid = conn.info.backend_pid
    before = backend_cpu(pid)
    single_rows = train(conn, "bench_local", "bench_cpu_s", 1, extra)
    single_cpu = backend_cpu(pid) - before
    before = backend_cpu(pid)
    plan = explain_train(conn, "bench_dist", "bench_cpu_d", 1, extra)
    coord_cpu = backend_cpu(pid) - before
    dist_rows = train(conn, "bench_dist", "bench_cpu_d2", 1, extra)
    worker_cpu = plan["Worker CPU Seconds"]
    first_s, later_s = single_rows[0][2], statistics.median(r[2] for r in single_rows[1:])
    first_d, later_d = dist_rows[0][2], statistics.median(r[2] for r in dist_rows[1:])
    print(f"\n{args.epochs} epochs of the same rows, seed 1:\n")
    print("| | single node | distributed (4 shards, 2 workers) |")
    print("|---|---|---|")
    print(f"| CPU seconds | {single_cpu:.2f} (its backend) | {worker_cpu:.2f} summed over the "
          f"shards' backends ({worker_cpu / single_cpu:.2f}x), + {coord_cpu:.2f} coordinator |")
    print(f"| epoch / round 1, seconds | {first_s:.3f} | {first_d:.3f} |")
    print(f"| later epochs / rounds, median seconds | {later_s:.3f} | {later_d:.3f} |")
    print(f"| later / first | {later_s / first_s:.2f} | {later_d / first_d:.2f} |")
    print(f"| slowest shard per round, ms | | {plan['Slowest Shard ms per Round']:.1f} |")
    print(f"| coordinator per round (round - slowest shard), ms | | "
          f"{plan['Coordinator ms per Round']:.1f} |")
    print(f"| bytes per round, sent / received (all shards) | | {plan['Bytes Sent per Round']} / "
          f"{plan['Bytes Received per Round']} |")
    wall = sum(r[2] for r in dist_rows)
    print(f"\nwall time, 2 workers: {wall:.2f} s for {len(dist_rows)} rounds; on N machines each "
          f"holding one shard a round costs the slowest shard + "
          f"{plan['Coordinator ms per Round']:.1f} ms")
    print(json.dumps({"rounds": plan["Rounds"], "epochs": plan["Epochs Trained"]}))
    print(run_line(server))


if __name__ == "__main__":
    main()
