"""What a benchmark run measures, the figures derived from it, and the files.

Every run (one method on one dataset and model) records its per-epoch
training seconds, mean training loss and scores, plus the setup time it
needs before the first epoch (the shuffled copy, the export).  The derived
figures are ratios to quantities measured in the same run, chiefly the time
of a plain sequential scan of the same columns, so that they hold on a noisy
or shared machine where absolute seconds do not.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK = "ok"
SKIPPED = "skipped"
FAILED = "failed"


@dataclass
class Epoch:
    """One epoch of one run.

    seconds: training time of the epoch alone (no scoring).
    loss: mean training loss, each row's loss taken just before the model
      updates on it (the engine's, the aggregate's and scikit-learn's
      "Avg. loss" are all this quantity); None when the method does not
      report it.
    train_score: accuracy (R^2 for regression) measured the same way.
    test_score: accuracy (R^2) on the held-out table with the weights at the
      end of the epoch.
    cpu_seconds: CPU seconds the server backend spent on the epoch (from
      /proc, when the server runs on this machine); None when unknown.
    """

    epoch: int
    seconds: float
    loss: float | None = None
    train_score: float | None = None
    test_score: float | None = None
    cpu_seconds: float | None = None


@dataclass
class Run:
    dataset: str
    model: str
    method: str            # what the plots and tables call it, e.g. "bismarck (shuffle_once)"
    system: str            # engine | bismarck | madlib | sklearn
    order: str             # the data order it trains in: a shuffle strategy name
    status: str = OK
    reason: str | None = None
    setup_seconds: float = 0.0
    setup: str | None = None   # what the setup time is
    epochs: list[Epoch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def skipped(cls, dataset: str, model: str, method: str, system: str, order: str,
                reason: str) -> Run:
        return cls(dataset, model, method, system, order, status=SKIPPED, reason=reason)

    def cumulative_seconds(self) -> list[float]:
        out, t = [], self.setup_seconds
        for e in self.epochs:
            t += e.seconds
            out.append(t)
        return out

    def per_epoch(self, values: list[float]) -> float:
        """One epoch's cost from per-entry costs (wall or CPU seconds): the
        median when there is an entry per epoch; when entries span several
        epochs (MADlib's checkpoints, each a call from scratch), the slope of
        their running sum against the epoch number (least squares), which
        leaves out what every call pays once (MADlib's setup of its tables)."""
        ks = [e.epoch for e in self.epochs]
        if len(ks) == ks[-1]:
            return statistics.median(values)
        if len(ks) < 2:
            return sum(values) / ks[-1]
        cum = [sum(values[:i + 1]) for i in range(len(values))]
        mk, mc = statistics.fmean(ks), statistics.fmean(cum)
        return (sum((k - mk) * (c - mc) for k, c in zip(ks, cum, strict=False))
                / sum((k - mk) ** 2 for k in ks))


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def summarize(runs: list[Run], scan_seconds: dict[str, float], target_gap: float,
              reference: str = "corgipile", scan_min: dict[str, float] | None = None
              ) -> dict[tuple[str, str], float | None]:
    """Fill each run's summary figures; return the target score of each
    (dataset, model).

    The target is the best final held-out score of any method on that
    dataset and model, less target_gap: "time to accuracy" is the wall time
    (setup included) until a method's held-out score first reaches it.
    """
    targets: dict[tuple[str, str], float | None] = {}
    for run in runs:
        key = (run.dataset, run.model)
        final = run.epochs[-1].test_score if run.epochs else None
        if run.status == OK and final is not None and _finite(final):
            cur = targets.get(key)
            targets[key] = final if cur is None else max(cur, final)
        else:
            targets.setdefault(key, None)
    targets = {k: (None if v is None else v - target_gap) for k, v in targets.items()}

    for run in runs:
        if run.status != OK or not run.epochs:
            continue
        # the run's own reference: the scans just before and after it, else
        # the dataset's median scan
        around = run.extra.get("scan_seconds_around")
        scan = statistics.median(around) if around else scan_seconds.get(run.dataset)
        target = targets.get((run.dataset, run.model))
        s: dict[str, Any] = {}
        n_epochs = run.epochs[-1].epoch
        secs = [e.seconds for e in run.epochs]
        s["epoch_seconds"] = run.per_epoch(secs)
        # the fastest epoch: a steadier figure than the median when other
        # processes compete for the machine (not for multi-epoch entries)
        s["epoch_seconds_min"] = min(secs) if len(run.epochs) == n_epochs else s["epoch_seconds"]
        s["epochs"] = n_epochs
        s["setup_seconds"] = run.setup_seconds
        cum = run.cumulative_seconds()
        s["total_seconds"] = cum[-1]
        last = run.epochs[-1]
        s["final_loss"] = last.loss
        s["final_train_score"] = last.train_score
        s["final_test_score"] = last.test_score
        scores = [e.test_score for e in run.epochs
                  if e.test_score is not None and _finite(e.test_score)]
        s["best_test_score"] = max(scores) if scores else None
        s["target_score"] = target
        s["time_to_target_seconds"] = None
        s["epochs_to_target"] = None
        if target is not None:
            for e, t in zip(run.epochs, cum, strict=False):
                if e.test_score is not None and _finite(e.test_score) and e.test_score >= target:
                    s["time_to_target_seconds"] = t
                    s["epochs_to_target"] = e.epoch
                    break
        if scan and scan > 0:
            s["scan_seconds"] = scan
            s["epoch_ratio_to_scan"] = s["epoch_seconds"] / scan
            if scan_min and scan_min.get(run.dataset):
                s["scan_seconds_min"] = scan_min[run.dataset]
                s["epoch_min_ratio_to_scan_min"] = s["epoch_seconds_min"] / scan_min[run.dataset]
            s["setup_ratio_to_scan"] = run.setup_seconds / scan
            s["total_ratio_to_scan"] = s["total_seconds"] / scan
            tt = s["time_to_target_seconds"]
            s["time_to_target_ratio_to_scan"] = None if tt is None else tt / scan
        # the same ratio in the backend's CPU seconds, which the load of a
        # shared machine does not inflate
        cpus = [e.cpu_seconds for e in run.epochs]
        scan_cpu = run.extra.get("scan_cpu_seconds_around")
        if scan_cpu and all(c is not None for c in cpus) and statistics.median(scan_cpu) > 0:
            s["epoch_cpu_seconds"] = run.per_epoch([c for c in cpus if c is not None])
            s["scan_cpu_seconds"] = statistics.median(scan_cpu)
            s["epoch_cpu_ratio_to_scan_cpu"] = s["epoch_cpu_seconds"] / s["scan_cpu_seconds"]
        run.summary = s

    # relative to the reference method (the engine's corgipile) in the same run
    for run in runs:
        if not run.summary:
            continue
        ref = next((r for r in runs if r.dataset == run.dataset and r.model == run.model
                    and r.method == reference and r.summary), None)
        if ref is None:
            continue
        run.summary["epoch_ratio_to_" + reference] = (
            run.summary["epoch_seconds"] / ref.summary["epoch_seconds"]
            if ref.summary["epoch_seconds"] > 0 else None)
        mine, theirs = run.summary["time_to_target_seconds"], ref.summary["time_to_target_seconds"]
        run.summary["time_to_target_ratio_to_" + reference] = (
            mine / theirs if mine is not None and theirs else None)
    return targets


EPOCH_COLUMNS = ["dataset", "model", "method", "system", "order", "epoch", "seconds",
                 "cumulative_seconds", "loss", "train_score", "test_score", "cpu_seconds"]
SUMMARY_COLUMNS = [
    "dataset", "model", "method", "system", "order", "status", "reason", "epochs",
    "scan_seconds", "setup_seconds", "epoch_seconds", "total_seconds",
    "epoch_ratio_to_scan", "setup_ratio_to_scan", "total_ratio_to_scan",
    "scan_seconds_min", "epoch_seconds_min", "epoch_min_ratio_to_scan_min",
    "epoch_ratio_to_corgipile", "final_loss", "final_train_score", "final_test_score",
    "best_test_score", "target_score", "time_to_target_seconds", "epochs_to_target",
    "time_to_target_ratio_to_scan", "time_to_target_ratio_to_corgipile",
    "scan_cpu_seconds", "epoch_cpu_seconds", "epoch_cpu_ratio_to_scan_cpu",
]


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def to_document(meta: dict[str, Any], datasets: list[dict[str, Any]], runs: list[Run],
                targets: dict[tuple[str, str], float | None]) -> dict[str, Any]:
    doc_runs = []
    for r in runs:
        d = asdict(r)
        cum = r.cumulative_seconds()
        for e, t in zip(d["epochs"], cum, strict=False):
            e["cumulative_seconds"] = t
        doc_runs.append(d)
    doc: dict[str, Any] = _jsonable({
        "meta": meta,
        "datasets": datasets,
        "targets": [{"dataset": k[0], "model": k[1], "target_score": v}
                    for k, v in sorted(targets.items())],
        "runs": doc_runs,
    })
    return doc


def write_files(doc: dict[str, Any], runs: list[Run], out: Path) -> list[Path]:
    """results.json (everything), epochs.csv (one row per epoch of each run)
    and summary.csv (one row per run)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    p = out / "results.json"
    p.write_text(json.dumps(doc, indent=2) + "\n")
    written.append(p)

    p = out / "epochs.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(EPOCH_COLUMNS)
        for r in runs:
            for e, t in zip(r.epochs, r.cumulative_seconds(), strict=False):
                w.writerow([r.dataset, r.model, r.method, r.system, r.order, e.epoch,
                            _num(e.seconds), _num(t), _num(e.loss), _num(e.train_score),
                            _num(e.test_score), _num(e.cpu_seconds)])
    written.append(p)

    p = out / "summary.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_COLUMNS)
        for r in runs:
            row = {"dataset": r.dataset, "model": r.model, "method": r.method,
                   "system": r.system, "order": r.order, "status": r.status,
                   "reason": r.reason or "", **r.summary}
            w.writerow([_num(row.get(c)) if c not in ("reason",) else row.get(c, "")
                        for c in SUMMARY_COLUMNS])
    written.append(p)
    return written


def _num(x: Any) -> Any:
    if x is None:
        return ""
    if isinstance(x, float):
        return repr(x) if math.isfinite(x) else ("nan" if math.isnan(x) else repr(x))
    return x


def format_table(runs: list[Run], targets: dict[tuple[str, str], float | None]) -> str:
    """A readable summary, one block per dataset and model."""
    lines: list[str] = []
    keys = []
    for r in runs:
        if (r.dataset, r.model) not in keys:
            keys.append((r.dataset, r.model))
    for ds, model in keys:
        target = targets.get((ds, model))
        lines.append(f"== {ds} / {model}"
                     + (f"  (target held-out score {target:.4f})" if target is not None else ""))
        lines.append(f"{'method':<28} {'setup/scan':>10} {'epoch/scan':>10} {'(fastest)':>9} "
                     f"{'final loss':>10} {'final score':>11} {'to target/scan':>14} "
                     f"{'vs corgipile':>12}")
        for r in runs:
            if (r.dataset, r.model) != (ds, model):
                continue
            if r.status != OK:
                lines.append(f"{r.method:<28} {r.status}: {r.reason}")
                continue
            s = r.summary
            lines.append(
                f"{r.method:<28} {_fmt(s.get('setup_ratio_to_scan'), '.2f'):>10} "
                f"{_fmt(s.get('epoch_ratio_to_scan'), '.2f'):>10} "
                f"{_fmt(s.get('epoch_min_ratio_to_scan_min'), '.2f'):>9} "
                f"{_fmt(s.get('final_loss'), '.4f'):>10} "
                f"{_fmt(s.get('final_test_score'), '.4f'):>11} "
                f"{_fmt(s.get('time_to_target_ratio_to_scan'), '.1f'):>14} "
                f"{_fmt(s.get('time_to_target_ratio_to_corgipile'), '.2f', 'x'):>12}")
        lines.append("")
    return "\n".join(lines)


def _fmt(x: Any, spec: str, suffix: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec) + suffix
