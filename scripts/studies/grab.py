"""The GraB study: scripts/convergence_study.py --grab [--quick] (issue 10 §3).

shuffle_once, corgipile and grab on label-clustered and feature-ordered
tables, at a constant and a decaying learning rate, several seeds; the
optimality gap f(w) - f* per epoch and the held-out accuracy; grab's epochs
timed against corgipile's.  docs/grab.md reads what it writes."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
import time

import numpy as np
import psycopg

from .runner import (
    DEFAULT_LR,
    ds_f,
    generated_line,
    grab_data,
    load_study_tables,
    noise_bound,
    run_settings,
    write_study,
)

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
        for r, g in zip(rows, gaps, strict=False)],
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
    L.append(generated_line(report))
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
    L += ["", "Epoch time (median over epochs 2.. of the trainings without validation, "
              "constant rate, all seeds; the strategies alternate, "
              "so they share the machine's load):", "",
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
        "datasets": {k: dict(v) for k, v in tinfo.items()},
        "summary": summary, "runs": results,
        "total_seconds": time.monotonic() - started,
    }
    write_study(out, "convergence-grab", report, grab_markdown(summary, report),
                lambda v: f"{v:.3g}", log, started)
    return 0
