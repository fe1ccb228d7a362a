#!/usr/bin/env python3
"""Plot examples/torch_fashion_mnist.py's JSON (docs/torch_fashion_mnist.json)
into docs/torch_fashion_mnist.png and print the Markdown tables of docs/torch.md."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def curves(runs: list[list[dict]], key: str) -> np.ndarray:
    return np.array([[e[key] for e in run] for run in runs])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=str(ROOT / "docs" / "torch_fashion_mnist.json"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "torch_fashion_mnist.png"))
    args = ap.parse_args()
    r = json.loads(Path(args.json).read_text())
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels = [(axes[0], "A", "heldout_accuracy", "held-out accuracy"),
              (axes[1], "B", "train_loss", "training loss"),
              (axes[2], "B", "heldout_accuracy", "held-out accuracy")]
    for ax, part, key, label in panels:
        for name, runs in r[part].items():
            c = curves(runs, key)
            ep = np.arange(1, c.shape[1] + 1)
            m = c.mean(0)
            ax.plot(ep, m, marker="o", label=f"{name} (mean of {len(runs)})")
            ax.fill_between(ep, c.min(0), c.max(0), alpha=0.2)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_title("A: shuffle strategies (clustered table)")
    axes[1].set_title("B: CD-GraB vs D-RR, training loss")
    axes[2].set_title("B: CD-GraB vs D-RR, held-out")
    fig.suptitle(f"Fashion-MNIST {r['train_rows']} rows, {r['ranks']} ranks x "
                 f"{r['workers_per_rank']} workers, MLP 784-128-10 ({r['date']})")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}\n")
    for part in ("A", "B"):
        names = list(r[part])
        if not names:
            continue
        n_ep = len(r[part][names[0]][0])
        print("| epoch | " + " | ".join(f"{n} held-out (loss)" for n in names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for e in range(n_ep):
            cells = []
            for n in names:
                acc = curves(r[part][n], "heldout_accuracy")[:, e]
                loss = curves(r[part][n], "train_loss")[:, e]
                cells.append(f"{acc.mean():.4f} ± {acc.std():.4f} ({loss.mean():.3f})")
            print(f"| {e + 1} | " + " | ".join(cells) + " |")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
