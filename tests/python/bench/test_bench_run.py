"""`corgipile bench` end to end, small: the files it writes and their
contents, run as `python -m corgipile.bench` and through add_arguments/run
the way the main CLI registers it."""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import sys

import pytest

from corgipile import bench
from datagen import linear_task, load_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _runs(doc, model=None):
    return [r for r in doc["runs"] if model is None or r["model"] == model]


def _one(doc, model, method):
    found = [r for r in _runs(doc, model) if r["method"] == method]
    assert len(found) == 1, (model, method, [r["method"] for r in _runs(doc, model)])
    return found[0]


def test_module_run_writes_json_csv_and_plots(bconn, dsn, tmp_path, client_env):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "corgipile.bench", "--dsn", dsn, "--rows", "3000", "--dims", "8",
         "--epochs", "4", "--scan-repeat", "2", "--output", str(out),
         "--strategies", "corgipile,block_only,no_shuffle,shuffle_once,no_such_shuffle"],
        capture_output=True, text=True, env=client_env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== synthetic-3000x8-clustered / svm" in proc.stdout

    doc = json.loads((out / "results.json").read_text())
    (ds,) = doc["datasets"]
    assert ds["rows"] == 3000 and ds["dims"] == 8 and ds["test_rows"] == 600
    assert ds["order"] == "clustered" and ds["scored_on"] == "held-out table"
    assert ds["scan_seconds"] > 0 and len(ds["scan_seconds_before"]) == 2
    assert ds["shuffled_copy_seconds"] > 0
    assert 0 < ds["shuffled_copy_cpu_seconds"] <= ds["shuffled_copy_seconds"]
    assert len(ds["scan_cpu_seconds_before"]) == 2
    all_scans = ds["scan_seconds_before"] + ds["scan_seconds_between"] + ds["scan_seconds_after"]
    assert ds["scan_seconds"] == pytest.approx(statistics.median(all_scans))
    assert doc["meta"]["settings"]["epochs"] == 4
    assert doc["meta"]["server"]["server_version"].startswith("15")

    methods = {"corgipile", "block_only", "no_shuffle", "shuffle_once", "no_such_shuffle",
               "bismarck (shuffle_once)", "bismarck (no_shuffle)", "madlib (shuffle_once)",
               "madlib (no_shuffle)", "sklearn"}
    # logistic has MADlib's IRLS beside its IGD
    irls = {"madlib irls (shuffle_once)", "madlib irls (no_shuffle)"}
    assert {r["method"] for r in _runs(doc, "svm")} == methods
    assert {r["method"] for r in _runs(doc, "logistic")} == methods | irls
    assert len(doc["runs"]) == 2 * len(methods) + len(irls)
    assert doc["meta"]["server"]["madlib_version"] is None

    for r in doc["runs"]:
        if r["method"] == "no_such_shuffle":
            assert r["status"] == "skipped" and "unknown shuffle" in r["reason"]
        elif r["system"] == "madlib":
            assert r["status"] == "skipped" and "MADlib is not installed" in r["reason"]
        else:
            assert r["status"] == "ok", r
            assert [e["epoch"] for e in r["epochs"]] == [1, 2, 3, 4]
            cum = [e["cumulative_seconds"] for e in r["epochs"]]
            assert all(e["seconds"] > 0 for e in r["epochs"])
            assert cum == sorted(cum) and cum[0] >= r["setup_seconds"]
            assert all(0.0 <= e["test_score"] <= 1.0 for e in r["epochs"])
            assert all(e["loss"] is not None and e["loss"] >= 0 for e in r["epochs"])
            s = r["summary"]
            # each run against the plain scans taken just before and after it
            around = r["extra"]["scan_seconds_around"]
            assert len(around) == 2
            assert set(around) <= set(all_scans) | {statistics.median(ds["scan_seconds_before"])}
            assert s["scan_seconds"] == pytest.approx(sum(around) / 2)
            assert math.isfinite(s["epoch_ratio_to_scan"]) and s["epoch_ratio_to_scan"] > 0
            assert s["epoch_ratio_to_scan"] == pytest.approx(s["epoch_seconds"] / s["scan_seconds"])
            assert s["final_test_score"] == r["epochs"][-1]["test_score"]
            assert s["epoch_seconds_min"] == min(e["seconds"] for e in r["epochs"])
            assert s["epoch_min_ratio_to_scan_min"] == pytest.approx(
                s["epoch_seconds_min"] / min(all_scans))
            # the backend's CPU seconds (the server runs on this machine)
            scan_cpu = r["extra"]["scan_cpu_seconds_around"]
            assert len(scan_cpu) == 2 and all(0 < c for c in scan_cpu)
            if r["system"] == "bismarck":
                assert all(0 < e["cpu_seconds"] <= e["seconds"] for e in r["epochs"])
                assert s["epoch_cpu_ratio_to_scan_cpu"] == pytest.approx(
                    s["epoch_cpu_seconds"] / statistics.median(scan_cpu))
            elif r["system"] == "engine":
                # the whole call, helper thread included, in clock ticks (10 ms)
                call = r["extra"]["call_cpu_seconds"]
                assert 0 <= call <= 2 * r["extra"]["call_seconds"] + 0.02
                assert "epoch_cpu_seconds" not in s

    for model in ("svm", "logistic"):
        corgi = _one(doc, model, "corgipile")
        noshuf = _one(doc, model, "no_shuffle")
        bis_once = _one(doc, model, "bismarck (shuffle_once)")
        bis_none = _one(doc, model, "bismarck (no_shuffle)")
        sk = _one(doc, model, "sklearn")
        # clustered storage: no_shuffle is clearly worse than corgipile
        assert corgi["summary"]["final_test_score"] > noshuf["summary"]["final_test_score"] + 0.05
        assert bis_once["summary"]["final_test_score"] > bis_none["summary"]["final_test_score"] + 0.05
        # the aggregate over the table as stored is the engine's no_shuffle, bit for bit
        assert [e["loss"] for e in bis_none["epochs"]] == [e["loss"] for e in noshuf["epochs"]]
        assert bis_once["setup_seconds"] == ds["shuffled_copy_seconds"]
        assert sk["setup_seconds"] > 0 and sk["extra"]["rows_exported"] == 3000
        assert corgi["summary"]["epoch_ratio_to_corgipile"] == 1.0
        target = next(t["target_score"] for t in doc["targets"] if t["model"] == model)
        best = max(r["summary"]["final_test_score"] for r in _runs(doc, model) if r["summary"])
        assert target == pytest.approx(best - 0.01)
        assert corgi["summary"]["time_to_target_seconds"] is not None

    with (out / "epochs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(len(r["epochs"]) for r in doc["runs"])
    assert {r["method"] for r in rows} == methods - {"no_such_shuffle", "madlib (shuffle_once)",
                                                     "madlib (no_shuffle)"}
    first = next(r for r in rows if r["method"] == "corgipile" and r["model"] == "svm")
    assert float(first["seconds"]) > 0 and 0 <= float(first["test_score"]) <= 1
    with (out / "summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    assert len(summary) == len(doc["runs"])
    assert {r["status"] for r in summary} == {"ok", "skipped"}

    import matplotlib.image

    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(f"synthetic-3000x8-clustered-{m}-{k}.png" for m in ("svm", "logistic")
                          for k in ("score-vs-time", "loss-vs-epoch", "epoch-time"))
    for name in pngs:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC)
        img = matplotlib.image.imread(out / name)
        assert img.shape[0] > 200 and img.shape[1] > 400
        assert img.std() > 0.01  # not a blank canvas


def main_cli_parser() -> argparse.ArgumentParser:
    """A parser shaped like the main `corgipile` CLI: global --dsn and --json,
    then subcommands."""
    p = argparse.ArgumentParser(prog="corgipile")
    p.add_argument("--dsn")
    p.add_argument("--json", action="store_true")
    sub = p.add_subparsers(dest="command")
    bench.add_arguments(sub.add_parser("bench", help="benchmark"))
    return p


def test_named_tables_through_the_main_cli(bconn, dsn, tmp_path, capsys):
    conn = bconn
    x, y = linear_task(1200, 3, seed=6)
    # a quoted name, boolean labels and a list of feature columns
    for name, lo, hi in (('"Train Set"', 0, 1000), ("held_out", 1000, 1200)):
        load_table(conn, "tmp_load", x[lo:hi], y[lo:hi], order="label" if lo == 0 else "given")
        conn.execute(f"CREATE TABLE {name} AS SELECT id, label > 0 AS y, features[1] AS a, "
                     "features[2] AS b, features[3] AS c FROM tmp_load ORDER BY y, id")
        conn.execute("DROP TABLE tmp_load")

    args = main_cli_parser().parse_args(
        ["--dsn", dsn, "--json", "bench", "--table", '"Train Set":held_out', "--label", "y",
         "--features", "a, b, c", "--epochs", "3", "--strategies", "corgipile,no_shuffle",
         "--baselines", "bismarck,sklearn", "--baseline-orders", "shuffle_once",
         "--no-plots", "-q", "--output", str(tmp_path)])
    assert args.dsn == dsn and args.json
    assert bench.run(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (tmp_path / "results.json").exists() and not list(tmp_path.glob("*.png"))
    (ds,) = doc["datasets"]
    assert ds["table"] == '"Train Set"' and ds["test_table"] == "held_out"
    assert ds["dims"] == 3 and ds["rows"] == 1000 and not ds["generated"]
    assert [r["method"] for r in doc["runs"] if r["model"] == "svm"] == [
        "corgipile", "no_shuffle", "bismarck (shuffle_once)", "sklearn"]
    for r in doc["runs"]:
        assert r["status"] == "ok", r
        assert r["summary"]["final_test_score"] > 0.7 or r["method"] == "no_shuffle"
    # no shuffled copy left behind
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_shuffled%'")
    assert left.fetchone()[0] == 0


def test_dsn_after_the_subcommand_and_bad_arguments(bconn, dsn, tmp_path, capsys):
    p = main_cli_parser()
    args = p.parse_args(["bench", "--dsn", dsn, "--baselines", "oracle", "--output", str(tmp_path)])
    assert args.dsn == dsn
    assert bench.run(args) == 2
    assert "oracle" in capsys.readouterr().err
    args = p.parse_args(["--dsn", dsn, "bench"])
    assert args.dsn == dsn and args.rows == 100_000 and args.epochs == 20


def test_missing_optional_packages_are_named_at_the_start(conn, dsn, tmp_path, client_env):
    """Without matplotlib and scikit-learn (blocked in sys.modules), the
    bench says so before it runs anything, skips the plots and the sklearn
    baseline with that reason, and succeeds: no traceback at the end."""
    out = tmp_path / "out"
    code = ("import sys; sys.modules['matplotlib'] = None; sys.modules['sklearn'] = None; "
            "from corgipile.bench.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run(
        [sys.executable, "-c", code, "--dsn", dsn, "--rows", "500", "--dims", "4",
         "--epochs", "2", "--scan-repeat", "1", "--output", str(out), "--models", "svm",
         "--strategies", "corgipile", "--baselines", "sklearn"],
        capture_output=True, text=True, env=client_env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[:2]
    assert first[0].startswith("corgipile bench: note: matplotlib is not installed"), first
    assert "PNG plots will be skipped" in first[0] and "corgipile[bench]" in first[0]
    assert first[1].startswith("corgipile bench: note: scikit-learn is not installed"), first
    doc = json.loads((out / "results.json").read_text())
    skipped = _one(doc, "svm", "sklearn")
    assert skipped["status"] == "skipped" and "scikit-learn is not installed" in skipped["reason"]
    assert _one(doc, "svm", "corgipile")["status"] == "ok"
    assert not list(out.glob("*.png"))
