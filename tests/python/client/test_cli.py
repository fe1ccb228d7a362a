"""The corgipile command, run in a subprocess against the test database
through the PG* variables, as a user would run it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest

from client_helpers import backend_state, linear_task, make_table


@pytest.fixture
def csv_file(tmp_path):
    x, y = linear_task(300, 3, seed=21)
    path = tmp_path / "points.csv"
    lines = ["f1,f2,f3,y"] + [",".join(repr(float(v)) for v in x[i]) + f",{y[i]}"
                              for i in range(len(y))]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_help_is_there_for_every_command(cli):
    top = cli("--help").stdout
    for command in ("train", "predict", "evaluate", "models", "load", "sql", "bench"):
        assert command in top
    assert "PGHOST" in top and "a first session" in top
    for command, words in [("train", ["--learning-rate", "--epochs", "--where", "--set"]),
                           ("predict", ["--vector", "--columns"]),
                           ("evaluate", ["corgipile.evaluate"]),
                           ("models", ["export", "import", "rename"]),
                           ("load", ["libsvm", "--order", "clustered by label"]),
                           ("sql", ["TRAIN BY", "PREDICT BY"])]:
        text = cli(command, "--help").stdout
        assert all(w in text for w in words), (command, text)
    assert cli("--version").stdout.startswith("corgipile ")
    assert cli(check=False).returncode == 2


def test_load_train_evaluate_predict_models(cli, csv_file, conn, tmp_path):
    out = cli("load", "pts", csv_file, "--label", "y", "--order", "label").stdout
    assert "loaded 300 rows into pts (array layout, 3 features)" in out
    # the label keeps its name, so the suggested command names it
    assert "corgipile train pts svm --label y" in out and "two classes" in out
    labels = [r[0] for r in conn.execute("SELECT y FROM pts ORDER BY ctid").fetchall()]
    assert labels == sorted(labels)

    out = cli("train", "pts", "svm", "--name", "demo", "--epochs", "4", "--seed", "1",
              "--lr", "0.05", "--label", "y").stdout
    lines = out.splitlines()
    assert lines[0].split() == ["epoch", "|", "tuples", "|", "loss", "|", "score", "|",
                                "validation_score", "|", "seconds"]
    assert "(4 rows)" in out and 'model "demo" stored: svm, 3 features' in out
    assert conn.execute("SELECT params->>'learning_rate', params->>'max_epoch_num' FROM "
                        "corgipile.models WHERE model_name = 'demo'").fetchone() == ("0.05", "4")

    doc = json.loads(cli("--json", "train", "pts", "logistic", "--name", "lr1", "--epochs", "2",
                         "--where", "id < 200", "--set", "l2=0.001", "--label", "y").stdout)
    assert doc["model_name"] == "lr1" and [h["tuples"] for h in doc["history"]] == [200, 200]
    assert doc["params"]["l2"] == 0.001 and doc["params"]["source_filter"] == "id < 200"

    metrics = json.loads(cli("evaluate", "demo", "pts", "--json").stdout)
    assert 0.8 < metrics["accuracy"] <= 1
    table = cli("evaluate", "demo", "pts").stdout
    assert "accuracy" in table and "metric" in table

    out = cli("predict", "demo", "pts", "--columns", "id,y", "--where", "id < 3",
              "--limit", "2").stdout
    assert out.splitlines()[0].split() == ["id", "|", "y", "|", "prediction"]
    assert "(2 rows)" in out
    rows = json.loads(cli("predict", "demo", "pts", "--json", "--columns", "id").stdout)
    direct = dict(conn.execute("SELECT id, corgipile.predict('demo', p) FROM pts p").fetchall())
    assert {r["id"]: r["prediction"] for r in rows} == direct
    csv_out = cli("predict", "demo", "pts", "--csv", "--limit", "1").stdout.splitlines()
    assert csv_out[0] == "id,y,features,prediction" and csv_out[1].count("{") == 1
    one = cli("predict", "demo", "--vector", "0.5,-0.25,1").stdout.strip()
    assert float(one) == conn.execute(
        "SELECT corgipile.predict('demo', ARRAY[0.5,-0.25,1]::float8[])").fetchone()[0]

    listing = cli("models").stdout
    assert "demo" in listing and "lr1" in listing and "(2 rows)" in listing
    assert [m["name"] for m in json.loads(cli("models", "list", "--json").stdout)] == \
        ["demo", "lr1"]
    show = cli("models", "show", "demo").stdout
    assert "n_features       3" in show and "(4 rows)" in show and "weights" not in show
    assert "weights" in cli("models", "show", "demo", "--weights").stdout
    cli("models", "rename", "lr1", "lr2")
    exported = tmp_path / "demo.json"
    cli("models", "export", "demo", "-o", exported)
    assert json.loads(exported.read_text())["model_name"] == "demo"
    cli("models", "import", exported, "--name", "demo_copy")
    stdin_doc = cli("models", "export", "demo").stdout
    assert "imported model \"demo_stdin\"" in cli("models", "import", "-", "--name",
                                                   "demo_stdin", stdin=stdin_doc).stdout
    assert conn.execute("SELECT count(*) FROM corgipile.models a JOIN corgipile.models b "
                        "ON a.weights = b.weights WHERE a.model_name = 'demo' "
                        "AND b.model_name IN ('demo_copy', 'demo_stdin')").fetchone() == (2,)
    cli("models", "drop", "demo_copy", "demo_stdin", "lr2")
    assert [r[0] for r in conn.execute("SELECT model_name FROM corgipile.models").fetchall()] \
        == ["demo"]


def test_load_other_formats(cli, conn, tmp_path):
    svm = tmp_path / "a.svm"
    svm.write_text("+1 1:0.5 3:1\n-1 2:1\n")
    assert "sparse layout, 3 features" in cli("load", "s1", svm).stdout
    out = cli("load", "s2", svm, "--layout", "dense", "--json").stdout
    doc = json.loads(out)
    assert doc["rows"] == 2 and doc["train_params"] == {"features": "features",
                                                        "label": "label"}
    assert conn.execute("SELECT features FROM s2 ORDER BY id").fetchall() == [
        ([0.5, 0.0, 1.0],), ([0.0, 1.0, 0.0],)]
    import numpy as np

    x, y = linear_task(40, 2, seed=1)
    np.savez(tmp_path / "arr.npz", X=x, y=y)
    assert "loaded 40 rows" in cli("load", "n1", tmp_path / "arr.npz", "--float4").stdout
    assert conn.execute("SELECT pg_typeof(features)::text FROM n1 LIMIT 1").fetchone() == (
        "real[]",)


def test_sql_command_translates_train_by_and_predict_by(cli, points):
    out = cli("sql", "SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 2, "
                     "model_name = 's1'").stdout
    assert "(2 rows)" in out and 'model "s1" stored' in out
    rows = json.loads(cli("sql", "--json", "SELECT id FROM points WHERE id < 3 ORDER BY id "
                                           "PREDICT BY s1").stdout)
    assert [r["id"] for r in rows] == [0, 1, 2] and all("prediction" in r for r in rows)
    assert cli("sql", "CREATE TABLE t2 (a int)").stdout.strip() == "CREATE TABLE"
    err = cli("sql", "SELECT * FORM points TRAIN BY svm", check=False)
    assert err.returncode == 1
    assert 'syntax error at or near "FORM"' in err.stderr and "         ^" in err.stderr


def test_errors_are_one_clear_line(cli, points):
    proc = cli("train", "nowhere", "svm", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith('corgipile: error: relation "nowhere" does not exist')
    proc = cli("train", "points", "bogus", check=False)
    assert proc.returncode == 1 and 'unknown model "bogus"' in proc.stderr
    assert "HINT" in proc.stderr
    proc = cli("train", "points", "svm", "--set", "nonsense=1", check=False)
    assert proc.returncode == 1 and "unknown training parameter 'nonsense'" in proc.stderr
    proc = cli("evaluate", "missing", "points", check=False)
    assert proc.returncode == 1 and 'model "missing" does not exist' in proc.stderr
    proc = cli("load", "t", "/no/such/file.csv", check=False)
    assert proc.returncode == 1 and "no such file" in proc.stderr
    proc = cli("predict", "m", check=False)
    assert proc.returncode == 1 and "--vector" in proc.stderr


def test_dsn_option_overrides_the_environment(cli, cli_env, dsn, points):
    env = dict(cli_env, PGDATABASE="no_such_database_here")
    assert cli("models", env=env, check=False).returncode == 1
    assert "(0 rows)" in cli("--dsn", dsn, "models", env=env).stdout
    assert "(0 rows)" in cli("models", "--dsn", dsn, env=env).stdout


def test_bench_is_delegated(cli):
    text = cli("bench", "--help").stdout
    assert "--dsn" in text
    try:
        import corgipile.bench  # noqa: F401
    except ImportError:
        assert "not available" in text
    else:
        assert "--table" in text  # the bench module's own options


def test_bench_missing_module_message(cli_env, tmp_path):
    """Without corgipile.bench (blocked in sys.modules), `corgipile bench`
    says so and exits 2; the other commands still work."""
    code = ("import sys; sys.modules['corgipile.bench'] = None; "
            "from corgipile.cli import main; sys.exit(main(sys.argv[1:]))")

    def run(*args):
        return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=cli_env,
                              capture_output=True, text=True, timeout=60)

    proc = run("bench", "--rows", "10")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "corgipile bench is not available in this installation" in proc.stderr
    assert run("--help").returncode == 0
    assert run("models", "--json").stdout.strip() == "[]"


def test_console_script(cli_env, tmp_path):
    script = Path(sys.executable).with_name("corgipile")
    if not script.exists():
        pytest.skip("the client is not pip-installed in this environment")
    proc = subprocess.run([str(script), "models", "--json"], env=cli_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_ctrl_c_cancels_the_training(cli_env, conn, dsn, tmp_path):
    x, y = linear_task(4000, 8, seed=5)
    make_table(conn, "slow", x, y)
    proc = subprocess.Popen([sys.executable, "-m", "corgipile", "train", "slow", "svm",
                             "--epochs", "1000000", "--name", "never"],
                            cwd=tmp_path, env=cli_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with psycopg.connect(dsn, autocommit=True) as watch:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                active = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                    "AND query LIKE '%corgipile.train%' AND pid <> pg_backend_pid()"
                ).fetchone()[0]
                if active:
                    break
                time.sleep(0.1)
            else:
                proc.kill()
                pytest.fail("the training never started: " + "".join(proc.communicate()))
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                # what the training's backend was doing, before giving up
                pids = [r[0] for r in watch.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE '%corgipile.train%' "
                    "AND pid <> pg_backend_pid()").fetchall()]
                states = [backend_state(dsn, p) for p in pids]
                proc.kill()
                out, err = proc.communicate()
                pytest.fail(f"the CLI did not stop within 30 s of Ctrl-C: {states}; "
                            f"stderr {err[-2000:]!r}")
            assert proc.returncode == 130, (out, err)
            assert "interrupted" in err and "cancelled" in err and "Traceback" not in err
            still = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                "AND query LIKE '%corgipile.train%' AND pid <> pg_backend_pid()").fetchone()[0]
            assert still == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone() == (0,)


def test_progress_bar_on_a_terminal(cli_env, points, tmp_path):
    """Under a pseudo-terminal the bar is on by default; --no-progress
    switches it off."""
    pty = pytest.importorskip("pty")

    import fcntl
    import struct
    import termios

    def run(*extra):
        out = b""
        pid, fd = pty.fork()
        if pid == 0:  # child: a 24x120 terminal, like a user's
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
            os.chdir(tmp_path)
            os.execvpe(sys.executable, [sys.executable, "-m", "corgipile", "train", "points",
                                        "svm", "--epochs", "3", *extra], cli_env)
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        return out.decode(errors="replace")

    with_bar = run("--name", "tty1")
    assert "tty1: 100%" in with_bar and "3/3" in with_bar
    without = run("--name", "tty2", "--no-progress")
    assert "100%" not in without and 'model "tty2" stored' in without


def test_predict_on_a_model_with_text_classes(cli, conn):
    """PREDICT BY answers text-class models through predict_class; so does
    `corgipile predict`, on a table and on one vector."""
    rng = np.random.default_rng(4)
    centers = np.array([[2.0, 0.0], [-2.0, 2.0], [0.0, -2.0]])
    k = rng.integers(0, 3, size=300)
    x = centers[k] + 0.3 * rng.normal(size=(300, 2))
    conn.execute("CREATE TABLE pets (id int, kind text, features float8[])")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO pets VALUES (%s, %s, %s)",
                        [(i, ["cat", "dog", "eel"][k[i]], x[i].tolist()) for i in range(300)])
    cli("train", "pets", "softmax", "--name", "pets", "--label", "kind", "--epochs", "5",
        "--seed", "1")
    rows = json.loads(cli("predict", "pets", "pets", "--columns", "id,kind", "--json").stdout)
    direct = dict(conn.execute("SELECT id, corgipile.predict_class('pets', p) FROM pets p"
                               ).fetchall())
    assert {r["id"]: r["prediction"] for r in rows} == direct
    assert np.mean([r["prediction"] == r["kind"] for r in rows]) > 0.9
    assert cli("predict", "pets", "--vector", "2,0").stdout.strip() == "cat"
    assert json.loads(cli("predict", "pets", "--vector=-2,2", "--json").stdout
                      )["prediction"] == "dog"


def test_load_columns_exclude_and_the_suggested_model(cli, conn, tmp_path):
    path = tmp_path / "shop.csv"
    rows = ["customer,age,visits,note,segment,spend"]
    rng = np.random.default_rng(2)
    for i in range(60):
        age, visits = rng.uniform(18, 80), rng.integers(0, 20)
        rows.append(f"c{i},{age:.1f},{visits},free text {i},{['gold', 'silver', 'bronze'][i % 3]},"
                    f"{0.5 * visits + 0.01 * age + rng.normal():.3f}")
    path.write_text("\n".join(rows) + "\n")
    out = cli("load", "seg", path, "--label", "segment", "--exclude", "customer,note,spend"
              ).stdout
    assert "(array layout, 2 features)" in out
    assert "corgipile train seg softmax --label segment" in out and "3 text classes" in out
    assert conn.execute("SELECT pg_typeof(segment)::text, segment FROM seg WHERE id = 0"
                        ).fetchone() == ("text", "gold")
    out = cli("load", "spend", path, "--label", "spend", "--columns", "visits,age",
              "--layout", "columns").stdout
    assert "corgipile train spend linear --features" in out and "continuous" in out
    assert conn.execute("SELECT pg_typeof(spend)::text FROM spend LIMIT 1").fetchone() == (
        "double precision",)
    assert [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'spend'::regclass AND attnum > 0 "
        "ORDER BY attnum").fetchall()] == ["id", "age", "visits", "spend"]  # the file's order
    # the suggested command works as printed
    suggested = shlex.split(out.split("train it with: ")[1].split("   #")[0])
    assert suggested[:4] == ["corgipile", "train", "spend", "linear"]
    cli(*suggested[1:], "--epochs", "2", "--lr", "0.0001", "--name", "sp")
    proc = cli("load", "x", path, "--label", "spend", "--exclude", "nope", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("corgipile: error: no column 'nope'")
    proc = cli("load", "seg", path, "--label", "segment", "--exclude", "customer,note",
               check=False)
    assert proc.returncode == 1 and 'relation "seg" already exists' in proc.stderr
    assert "HINT: pass --if-exists replace" in proc.stderr


def test_error_hints_name_the_option_that_fixes_it(cli, points, tmp_path):
    cli("train", "points", "svm", "--name", "twice", "--epochs", "1")
    proc = cli("train", "points", "svm", "--name", "twice", "--epochs", "1", check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        'corgipile: error: model "twice" already exists',
        "HINT: pass --replace to overwrite it, or choose another --name "
        "(`corgipile models` lists the stored models)"]
    cli("train", "points", "svm", "--name", "twice", "--epochs", "1", "--replace")
    exported = tmp_path / "twice.json"
    cli("models", "export", "twice", "-o", exported)
    proc = cli("models", "import", exported, check=False)
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        'corgipile: error: model "twice" already exists',
        "HINT: pass --replace to overwrite it, or --name to store it under another name"]
    cli("models", "import", exported, "--replace")
    proc = cli("models", "show", "nothing", check=False)
    assert proc.stderr.splitlines() == ['corgipile: error: model "nothing" does not exist',
                                        "HINT: `corgipile models` lists the stored models"]
    proc = cli("predict", "twice", "points", "--vector", "1,2,3,4", check=False)
    assert proc.stderr.startswith("corgipile: error: give either a table or --vector")
    proc = cli("--dsn", "host=/nonexistent-socket-dir port=1", "models", check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("corgipile: error: ")
    assert "HINT: give the database with --dsn" in proc.stderr


def test_a_null_metric_is_null_at_every_door(cli, client, conn, points):
    """svm's log_loss (no probabilities): NULL in SQL, None in Python, an
    empty cell in the CLI's table (as psql shows NULL) and null in --json;
    never NaN (docs/cli.md says why)."""
    conn.execute("SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'sv', "
                 "max_epoch_num => 2, seed => 1)")
    assert conn.execute("SELECT value FROM corgipile.evaluate('sv', 'heldout') "
                        "WHERE metric = 'log_loss'").fetchone() == (None,)
    got = client.evaluate("sv", "heldout")
    assert got["log_loss"] is None and isinstance(got["accuracy"], float)
    # the client's own figures for a query: an R² of no variance is None too
    conn.execute("CREATE TABLE flat AS SELECT id, 1.0::float8 AS label, features FROM points")
    conn.execute("SELECT count(*) FROM corgipile.train('flat', 'linear', model_name => 'ln', "
                 "max_epoch_num => 1, seed => 1)")
    assert client.evaluate("ln", "SELECT * FROM flat")["r2"] is None
    assert json.loads(cli("evaluate", "sv", "heldout", "--json").stdout)["log_loss"] is None
    table = cli("evaluate", "sv", "heldout").stdout
    cells = {line.split("|")[0].strip(): line.split("|")[1].strip()
             for line in table.splitlines() if "|" in line}
    assert cells["log_loss"] == "" and cells["accuracy"] != ""
    assert "NaN" not in table and "nan" not in table


def test_missing_reaches_train_by_and_the_cli(cli, client, conn):
    """train()'s missing and missing_indicator come from its signature in
    pg_proc: TRAIN BY ... WITH takes them, and the CLI has options."""
    conn.execute("CREATE TABLE holes AS SELECT i AS id, i % 2 AS label, "
                 "CASE WHEN i % 4 = 0 THEN NULL ELSE i * 0.5 END AS a, (i % 7)::float8 AS b "
                 "FROM generate_series(1, 300) i")
    client.execute("SELECT * FROM holes TRAIN BY logistic WITH features = 'a, b', "
                   "missing = median, missing_indicator = true, model_name = 'via_sql', "
                   "max_epoch_num = 2, seed = 1").fetchall()
    cli("train", "holes", "logistic", "--features", "a,b", "--missing", "median",
        "--missing-indicator", "--name", "via_cli", "--epochs", "2", "--seed", "1")
    rows = conn.execute("SELECT model_name, n_features, params->>'missing', preprocess, weights "
                        "FROM corgipile.models ORDER BY model_name").fetchall()
    assert [r[:3] for r in rows] == [("via_cli", 3, "median"), ("via_sql", 3, "median")]
    assert rows[0][3] == rows[1][3] and rows[0][4] == rows[1][4]
    assert "NULL number" in cli("train", "--help").stdout


def test_evaluate_says_what_it_scored_and_skipped(cli, client, conn):
    """evaluate()'s rows scored and skipped (and why) reach Python as ints,
    the CLI's table and --json."""
    conn.execute("CREATE TABLE ev AS SELECT i AS id, "
                 "CASE WHEN i % 10 = 0 THEN NULL ELSE i % 2 END AS label, "
                 "CASE WHEN i % 7 = 0 THEN NULL ELSE i * 0.1 END AS a FROM generate_series(1, 140) i")
    conn.execute("SELECT count(*) FROM corgipile.train('ev', 'logistic', model_name => 'evm', "
                 "features => 'a', max_epoch_num => 2, seed => 1)")
    null_label = sum(i % 10 == 0 for i in range(1, 141))
    null_a = sum(i % 7 == 0 and i % 10 != 0 for i in range(1, 141))
    want = {"rows": 140 - null_label - null_a, "skipped_null_label": null_label,
            "skipped_null_features": null_a}
    got = client.evaluate("evm", "ev")
    assert {k: got[k] for k in want} == want and all(type(got[k]) is int for k in want)
    doc = json.loads(cli("evaluate", "evm", "ev", "--json").stdout)
    assert {k: doc[k] for k in want} == want
    table = cli("evaluate", "evm", "ev").stdout
    cells = {line.split("|")[0].strip(): line.split("|")[1].strip()
             for line in table.splitlines() if "|" in line}
    assert {k: cells[k] for k in want} == {k: str(v) for k, v in want.items()}
