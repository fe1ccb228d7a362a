"""The convergence study proper: every shuffle strategy of corgipile.train
on Fashion-MNIST after the CorgiPile paper's protocol (the default of
scripts/convergence_study.py; its options and outputs are in studies/cli.py)."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from corgipile import strategies

from .runner import (
    PREFIX,
    Runner,
    block_tag,
    buffer_tag,
    generated_line,
    load_fashion,
    machine,
    prepare_tables,
    run_all,
)

# the paper's strategies (all but GraB, which has its own study), in the
# engine's order, each with one colour and line style in every plot
STRATEGIES = strategies.PAPER
ORDERINGS = ("clustered", "feature")
TASKS = ("fashion-binary", "fashion-10")
LR_GRID = (0.1, 0.01, 0.001, 0.0001)
STYLE = {s: (strategies.STYLES[s]["color"], strategies.STYLES[s]["linestyle"]) for s in STRATEGIES}


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


def markdown(summary: list[dict], checks: list[dict], args: argparse.Namespace,
             report: dict) -> str:
    lines = ["<!-- written by scripts/convergence_study.py; do not edit by hand -->", "",
             generated_line(report), ""]
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
                          for a, b in zip(edges[:-1], edges[1:], strict=False)])
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
    for ax, v in zip(axes, views, strict=False):
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
    for ax, (task, ordering) in zip(axes[0], panels, strict=False):
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


def order_figure(args: argparse.Namespace, tinfo: dict, figures: list[dict]) -> list[dict]:
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        views = order_heatmaps(conn, tinfo["clustered-10"]["table"], args.sweep_buffer, seed=1)
    path = args.output_dir / "img" / "convergence-order.png"
    plot_order(views, f"Class of the rows fed to SGD along one epoch: fashion-10, "
                      f"clustered table ({tinfo['clustered-10']['rows']} rows), "
                      f"buffer {args.sweep_buffer}, seed 1", path)
    figures.append({"file": str(path.relative_to(args.output_dir)), "stage": "order"})
    return views


def paper_study(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """The convergence study proper (the default of convergence_study.py)."""
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
                for e, (loss, v) in enumerate(zip(s["losses"], s["validation_scores"], strict=False), 1):
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
    (out / "convergence-results.md").write_text(markdown(summary, checks, args, report))
    log(f"Wrote {out / 'convergence-results.csv'}, .json, .md and {len(figures)} figure(s) "
        f"in {time.monotonic() - started:.0f} s")
    for c in checks:
        log(f"  {'ok ' if c['holds'] else 'NO '} {c['check']}: {c['task']} {c['ordering']} "
            f"{c['buffer']} {c['strategy']} gap {c['gap_pp']:+.2f} pp")
    return 0
