"""PNG plots of a benchmark run (matplotlib, no display needed).

Per dataset and model:
  <name>-score-vs-time.png   held-out score against wall time, setup
                             included (like the paper's Fig. 7); time in
                             plain-scan units below, seconds above;
  <name>-loss-vs-epoch.png   mean training loss per epoch, as the methods
                             report it, and held-out score per epoch
                             (the paper's Fig. 8);
  <name>-epoch-time.png      epoch and setup time as ratios to a plain scan.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .. import strategies
from .results import OK, Run

# baselines: colours no strategy uses (strategies.STYLES)
_BY_SYSTEM = {"bismarck": "tab:olive", "madlib": "tab:pink", "sklearn": "tab:gray"}


def _style(run: Run) -> dict[str, Any]:
    if run.system == "engine":
        style = dict(strategies.STYLES.get(run.order, {"marker": "."}))
        style.pop("linestyle", None)  # one line style per system: solid
        if run.order == strategies.DEFAULT:
            style["linewidth"] = 2.2
        return style
    st: dict[str, Any] = dict(color=_BY_SYSTEM.get(run.system, None),
              marker="D" if run.order == "shuffle_once" else "P",
              linestyle="--" if run.order == "no_shuffle" else "-")
    return st


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def plot(runs: list[Run], scan_seconds: dict[str, float],
         targets: dict[tuple[str, str], float | None], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    keys: list[tuple[str, str]] = []
    for r in runs:
        if (r.dataset, r.model) not in keys:
            keys.append((r.dataset, r.model))
    for ds, model in keys:
        mine = [r for r in runs if (r.dataset, r.model) == (ds, model) and r.status == OK
                and r.epochs]
        if not mine:
            continue
        scan = scan_seconds.get(ds) or 1.0
        base = out / slug(f"{ds}-{model}")
        score_name = "R²" if model == "linear" else "accuracy"

        # score against wall time
        fig, ax = plt.subplots(figsize=(9.5, 4.8))
        for r in mine:
            xs = [t / scan for t in r.cumulative_seconds()]
            ys = [e.test_score for e in r.epochs]
            pts = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=r.method, markersize=4,
                    **_style(r))
            if r.setup_seconds > 0 and r.system != "engine":
                ax.axvline(r.setup_seconds / scan, color=_style(r).get("color"), alpha=0.25,
                           linestyle=":")
        target = targets.get((ds, model))
        if target is not None:
            ax.axhline(target, color="0.5", linewidth=0.8, linestyle="--", label="target")
        ax.set_xlabel("wall time, in plain scans of the table (setup included)")
        ax.set_ylabel(f"held-out {score_name}")
        def to_seconds(v: Any, scan: float = scan) -> Any:
            return v * scan

        def to_scans(v: Any, scan: float = scan) -> Any:
            return v / scan

        sec = ax.secondary_xaxis("top", functions=(to_seconds, to_scans))
        sec.set_xlabel(f"seconds (one scan = {scan:.3g} s)")
        ax.set_title(f"{ds} / {model}: {score_name} against time", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        p = base.with_name(base.name + "-score-vs-time.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

        # loss (and held-out score) against epoch
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
        for r in mine:
            pts = [(e.epoch, e.loss) for e in r.epochs if e.loss is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=r.method, markersize=4,
                        **_style(r))
            pts = [(e.epoch, e.test_score) for e in r.epochs if e.test_score is not None]
            if pts:
                ax2.plot([p[0] for p in pts], [p[1] for p in pts], label=r.method, markersize=4,
                         **_style(r))
        ax.set_xlabel("epoch")
        ax.set_ylabel("mean training loss, each row before its update")
        ax.set_title("training loss as reported during the epoch", fontsize=9)
        ax2.set_xlabel("epoch")
        ax2.set_ylabel(f"held-out {score_name} after the epoch")
        ax2.set_title(f"held-out {score_name}", fontsize=9)
        for a in (ax, ax2):
            a.grid(alpha=0.3)
        handles, labels = ax2.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, fontsize=7, loc="center right")
        fig.suptitle(f"{ds} / {model}: per epoch", fontsize=10)
        fig.tight_layout(rect=(0, 0, 0.82, 1))
        p = base.with_name(base.name + "-loss-vs-epoch.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

        # epoch and setup time relative to a scan
        with_summary = [r for r in mine if r.summary.get("epoch_ratio_to_scan") is not None]
        if with_summary:
            fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(with_summary) + 1.6))
            names = [r.method for r in with_summary]
            epoch = [r.summary["epoch_ratio_to_scan"] for r in with_summary]
            setup = [r.summary.get("setup_ratio_to_scan") or 0.0 for r in with_summary]
            ypos = range(len(names))
            ax.barh(ypos, epoch, color="tab:blue", label="one epoch")
            ax.barh(ypos, setup, left=epoch, color="tab:gray", alpha=0.6,
                    label="setup (shuffled copy, export)")
            ax.set_yticks(list(ypos), names, fontsize=8)
            ax.axvline(1.0, color="black", linewidth=0.8)
            ax.set_xlabel("time / plain scan of the same columns")
            ax.set_title(f"{ds} / {model}: epoch time relative to a scan", fontsize=10)
            ax.legend(fontsize=7)
            ax.invert_yaxis()
            fig.tight_layout()
            p = base.with_name(base.name + "-epoch-time.png")
            fig.savefig(p, dpi=110)
            plt.close(fig)
            written.append(p)
    return written
