#!/usr/bin/env python3
"""Print the tables of docs/benchmarks.md from a `corgipile bench` output
directory (its summary.csv, epochs.csv and results.json), so that the doc's
figures are copied from the run's files, not by hand.

Usage: scripts/bench_report.py benchmarks/results/synthetic-200k-x28-clustered-20-epochs
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

MODELS = {"svm": "SVM", "logistic": "Logistic regression"}


def num(v: str, fmt: str, zero: str | None = None) -> str:
    if v in ("", None):
        return "–"
    x = float(v)
    if zero is not None and x == 0:
        return zero
    return format(x, fmt)


def main(directory: str) -> int:
    d = Path(directory)
    doc = json.loads((d / "results.json").read_text())
    meta = doc["meta"]
    ranges: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(d / "epochs.csv") as f:
        for r in csv.DictReader(f):
            if r["test_score"]:
                ranges[(r["model"], r["method"])].append(float(r["test_score"]))
    with open(d / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    for ds in doc["datasets"]:
        scans = ds["scan_seconds_before"] + ds["scan_seconds_between"] + ds["scan_seconds_after"]
        print(f"{ds['name']}: {ds['rows']:,} rows, {ds['size_bytes'] / 2**20:.0f} MB; plain scan "
              f"{ds['scan_seconds']:.3f} s, fastest {min(scans):.3f} s; "
              f"shuffled copy {ds.get('shuffled_copy_seconds') or 0:.2f} s")
    m = meta["machine"]
    print(f"created {meta['created']}, {meta['bench_seconds']:.0f} s; {m.get('cpu_model')}, "
          f"{m.get('cpus')} cpus; load average at start {m.get('load_average_at_start')}, "
          f"at end {m.get('load_average_at_end')}; corgipile "
          f"{meta['server'].get('corgipile_version')}, madlib {meta['server'].get('madlib_version')}")
    targets = {t["model"]: t["target_score"] for t in doc["targets"]}
    for model, title in MODELS.items():
        mine = [r for r in rows if r["model"] == model]
        if not mine:
            continue
        print(f"\n{title}. The target is {targets[model]:.4f}.\n")
        print("| method | setup / scan | epoch / scan (median) | fastest epoch / fastest scan "
              "| final held-out acc. | range over epochs | time to target / scan "
              "| vs corgipile |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        skipped = [r for r in mine if r["status"] == "skipped"]
        for r in mine:
            if r["status"] == "skipped":
                continue
            if r["status"] != "ok":
                print(f"| {r['method']} | {r['status']}: {r['reason']} | | | | | | |")
                continue
            rng = ranges.get((model, r["method"]), [])
            span = f"{min(rng):.3f}–{max(rng):.3f}" if rng else "–"
            vs = num(r["time_to_target_ratio_to_corgipile"], ".2f")
            print(f"| {r['method']} | {num(r['setup_ratio_to_scan'], '.1f', '0')} "
                  f"| {num(r['epoch_ratio_to_scan'], '.2f')} "
                  f"| {num(r['epoch_min_ratio_to_scan_min'], '.2f')} "
                  f"| {num(r['final_test_score'], '.4f')} | {span} "
                  f"| {num(r['time_to_target_ratio_to_scan'], '.1f')} "
                  f"| {vs + '×' if vs != '–' else vs} |")
        if skipped:
            systems = sorted({r["system"] for r in skipped})
            for s in systems:
                print(f"| {s} (all orders) | skipped | | | | | | |")
            print("\nskipped: " + "; ".join(sorted({r["reason"] for r in skipped})))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1]))
