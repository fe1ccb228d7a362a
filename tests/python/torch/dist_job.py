"""One rank of a multi-rank test, started by torchrun (see conftest.torchrun).

Writes what this rank saw to OUT/rank<R>.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from corgipile.torch import CDGraB, CorgiPileDataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dsn", required=True, action="append")
    ap.add_argument("--table", default="pts")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--grab", action="store_true")
    ap.add_argument("--even-shares", default="off", help="even_shares (off: plain coverage)")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = CorgiPileDataset(args.dsn, args.table, id_column="id", seed=7, buffer_size="20%",
                          even_shares=args.even_shares,
                          with_block=args.grab)
    result = {"rank": rank, "epochs": [], "orders": [], "blocks": [], "seed": ds.seed}
    grab = CDGraB(ds, dim=2) if args.grab else None
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        ids, blocks = [], []
        for batch in DataLoader(ds, batch_size=50, num_workers=args.workers):
            ids += batch[2].tolist()
            if grab is not None:
                for b in batch[3].tolist():
                    if b not in blocks:
                        blocks.append(b)
                for x, b in zip(batch[0], batch[3], strict=True):
                    grab.add(b, torch.stack([x[0], torch.tensor(1.0)]))
        result["epochs"].append(ids)
        result["blocks"].append(blocks)
        if grab is not None:
            result["orders"].append(grab.step())
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(result))
    ds.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
