#!/usr/bin/env python3
"""MADlib against the engine, measured: `corgipile bench` repeated, then the
figures of docs/benchmarks.md ("MADlib, measured") printed from its files.

    scripts/bench_madlib.py run [--repeats 3] [--rows 200000] [--dims 28] [--epochs 20]
                                [--dsn DSN] [--output DIR]
    scripts/bench_madlib.py report DIR

`run` needs a database with MADlib installed (madpack) and the Bismarck
baseline's extension; it runs `python -m corgipile.bench` --repeats times
into DIR/rep-N: corgipile, Bismarck and MADlib (svm; logistic with igd and
irls) over the table as stored (clustered by label) and over a copy
shuffled once. The repeats alternate the order of the models and of the
baselines, so that a load that comes and goes weighs on every method, and
every run is timed against plain scans taken just before and after it, in
wall and in the server backend's CPU seconds (from /proc). `report` prints
the medians over the repeats with their range (min-max): the figures are
copied from its output, not by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run(args: argparse.Namespace) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python_client"),
                                                    env.get("PYTHONPATH")) if p)
    for i in range(1, args.repeats + 1):
        models = "svm,logistic" if i % 2 else "logistic,svm"
        baselines = "madlib,bismarck" if i % 2 else "bismarck,madlib"
        cmd = [sys.executable, "-m", "corgipile.bench", "--rows", str(args.rows),
               "--dims", str(args.dims), "--epochs", str(args.epochs), "--models", models,
               "--strategies", "corgipile", "--baselines", baselines,
               "--baseline-orders", "shuffle_once,no_shuffle", "--no-plots",
               "--output", str(out / f"rep-{i}")]
        if args.dsn:
            cmd += ["--dsn", args.dsn]
        print(f"== repeat {i}/{args.repeats}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0:
            print(f"bench_madlib.py: repeat {i} failed (exit {proc.returncode})", file=sys.stderr)
            return proc.returncode
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    (out / "commit.txt").write_text(commit + (" (with uncommitted changes)" if dirty else "") + "\n")
    return report(out)


def _span(values: list[float], fmt: str) -> str:
    """median [min-max] of values, '–' when there are none."""
    if not values:
        return "–"
    med = format(statistics.median(values), fmt)
    if len(values) == 1 or min(values) == max(values):
        return med
    return f"{med} [{format(min(values), fmt)}–{format(max(values), fmt)}]"


def _same(values: list[Any], fmt: str) -> str:
    """The value every repeat gave (they are seeded), or all of them if not."""
    known = [v for v in values if v is not None]
    if not known:
        return "–"
    shown = sorted({format(v, fmt) for v in known})
    return shown[0] if len(shown) == 1 else "/".join(shown) + " (differ)"


def report(directory: Path) -> int:
    reps = sorted(directory.glob("rep-*/results.json"))
    if not reps:
        print(f"bench_madlib.py: no rep-*/results.json under {directory}", file=sys.stderr)
        return 2
    docs = [json.loads(p.read_text()) for p in reps]
    commit = (directory / "commit.txt").read_text().strip() if (directory / "commit.txt").exists() else "?"
    meta = docs[0]["meta"]
    m = meta["machine"]
    loads = [x for d in docs for key in ("load_average_at_start", "load_average_at_end")
             for x in [d["meta"]["machine"][key][0]]]
    # each repeat's "created" is its end
    first = docs[0]["meta"]
    start = (datetime.fromisoformat(first["created"])
             - timedelta(seconds=first["bench_seconds"])).isoformat(timespec="seconds")
    print(f"{len(docs)} repeats, {start} to {docs[-1]['meta']['created']}, commit {commit}; "
          f"{m['cpu_model']}, {m['cpus']} cpus; 1-minute load average {min(loads):.1f}-"
          f"{max(loads):.1f} at the repeats' starts and ends; PostgreSQL "
          f"{meta['server']['server_version']}, corgipile {meta['server']['corgipile_version']}; "
          f"{meta['server']['madlib_version']}")
    for d in docs:
        (ds,) = d["datasets"]
        scans = ds["scan_seconds_before"] + ds["scan_seconds_between"] + ds["scan_seconds_after"]
        cpus = [c for c in ds["scan_cpu_seconds_before"] + ds["scan_cpu_seconds_between"]
                + ds["scan_cpu_seconds_after"] if c is not None]
        print(f"  {ds['name']}: "
              f"scan {statistics.median(scans):.3f} s wall [{min(scans):.3f}–{max(scans):.3f}], "
              f"{statistics.median(cpus):.3f} s CPU [{min(cpus):.3f}–{max(cpus):.3f}]; "
              f"shuffled copy {ds['shuffled_copy_seconds']:.2f} s; "
              f"run {d['meta']['bench_seconds']:.0f} s")

    # CPU seconds do not depend on the load: the unit is the median CPU of
    # all the plain scans of a repeat (a single scan's CPU varies with what
    # the run before it left in shared_buffers)
    copy_cpu = {d["meta"]["created"]: d["datasets"][0].get("shuffled_copy_cpu_seconds")
                for d in docs}
    scan_cpu = {d["meta"]["created"]: statistics.median(
        c for c in d["datasets"][0]["scan_cpu_seconds_before"]
        + d["datasets"][0]["scan_cpu_seconds_between"]
        + d["datasets"][0]["scan_cpu_seconds_after"] if c is not None) for d in docs}
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    order: dict[str, list[str]] = defaultdict(list)
    targets: dict[str, list[float]] = defaultdict(list)
    for d in docs:
        for t in d["targets"]:
            targets[t["model"]].append(t["target_score"])
        for r in d["runs"]:
            r["scan_cpu"] = scan_cpu[d["meta"]["created"]]
            r["setup_cpu"] = (copy_cpu[d["meta"]["created"]] if r["setup_seconds"] else 0.0)
            by[(r["model"], r["method"])].append(r)
            if r["method"] not in order[r["model"]]:
                order[r["model"]].append(r["method"])
    for model, title in (("svm", "SVM"), ("logistic", "Logistic regression")):
        if model not in order:
            continue
        print(f"\n{title}. Target: {_same(targets[model], '.4f')} held-out accuracy.\n")
        print("| method | final held-out acc. | epochs to target | time to target / scan "
              "| time to target, CPU / scan CPU "
              "| vs corgipile | epoch / scan (wall) | epoch CPU s | epoch / scan (CPU) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        methods = sorted(order[model], key=lambda x: (not x.startswith("corgipile"),
                                                      "bismarck" in x, x))
        for method in methods:
            rs = by[(model, method)]
            bad = [r for r in rs if r["status"] != "ok"]
            if bad:
                print(f"| {method} | {bad[0]['status']}: {bad[0]['reason']} | | | | | | | |")
                continue
            s = [r["summary"] for r in rs]

            def col(key: str, s: list[dict[str, Any]] = s) -> list[float]:
                return [x[key] for x in s if x.get(key) is not None]

            vs = col("time_to_target_ratio_to_corgipile")
            pairs = [(x["epoch_cpu_seconds"], r["scan_cpu"]) for r, x in zip(rs, s, strict=False)
                     if x.get("epoch_cpu_seconds") is not None]
            mark = ""
            if not pairs:
                # the engine reports wall seconds per epoch: its CPU is the whole
                # call's (helper threads included) over the epochs
                pairs = [(r["extra"]["call_cpu_seconds"] / x["epochs"], r["scan_cpu"])
                         for r, x in zip(rs, s, strict=False) if r["extra"].get("call_cpu_seconds") is not None]
                mark = " †" if pairs else ""
            epoch_cpu = [c for c, _ in pairs]
            cpu = [c / scan for c, scan in pairs]
            # CPU until the target: the shuffled copy's, and the epochs' summed
            # up to the one that reached it (for MADlib, about the CPU of the
            # checkpoint call that reached it)
            to_target = []
            for r, x in zip(rs, s, strict=False):
                k = x.get("epochs_to_target")
                cpus = [e.get("cpu_seconds") for e in r["epochs"] if e["epoch"] <= (k or 0)]
                if k and cpus and None not in cpus and r["setup_cpu"] is not None:
                    to_target.append((r["setup_cpu"] + sum(cpus)) / r["scan_cpu"])
            print(f"| {method} | {_same(col('final_test_score'), '.4f')} "
                  f"| {_same([x.get('epochs_to_target') for x in s], 'd')} "
                  f"| {_span(col('time_to_target_ratio_to_scan'), '.1f')} "
                  f"| {_span(to_target, '.1f')} "
                  f"| {_span(vs, '.1f') + '×' if vs else '–'} "
                  f"| {_span(col('epoch_ratio_to_scan'), '.2f')} "
                  f"| {_span(epoch_cpu, '.3f')}{mark} | {_span(cpu, '.2f')}{mark} |")
        if any(m.startswith("corgipile") for m in methods):
            print("\n† the whole call's backend CPU (helper threads included) over its epochs: "
                  "the engine reports wall seconds per epoch only")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the repeats, then report")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--rows", type=int, default=200_000)
    r.add_argument("--dims", type=int, default=28)
    r.add_argument("--epochs", type=int, default=20)
    r.add_argument("--dsn", default=None, help="libpq connection string (default: PG* variables)")
    r.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "madlib-200k-x28-clustered"))
    rep = sub.add_parser("report", help="print the tables from a run's directory")
    rep.add_argument("directory")
    args = p.parse_args(argv)
    if args.command == "run":
        return run(args)
    return report(Path(args.directory))


if __name__ == "__main__":
    raise SystemExit(main())
