"""The parallel study: scripts/convergence_study.py --parallel [--quick]
(issue 11 §3).

train(workers => N) on the GraB study's label-clustered tables: corgipile at
N = 1 and 2, and grab with CD-GraB's PairBalance against one walk per worker.
docs/parallel.md reads what it writes."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
import time

import numpy as np
import psycopg

from .grab import grab_rates
from .runner import (
    ds_f,
    generated_line,
    grab_data,
    load_study_tables,
    noise_bound,
    run_settings,
    write_study,
)

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
        for r, g in zip(rows, gaps, strict=False)]}


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
    L.append(generated_line(report))
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
                     "rates": dict(args.par_rates),
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
