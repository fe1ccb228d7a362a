"""One rank of a DDP training test, started by torchrun (torch_helpers.torchrun).

The standard loop: a DistributedDataParallel model, ds.set_epoch(e), a
DataLoader, loss.backward(), opt.step().  Collectives time out (and the
rank fails) instead of hanging.  Writes OUT/rank<R>.json: the steps of
each epoch, the rows seen and the final weights.
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from corgipile.torch import CorgiPileDataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--table", default="uneven")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--even-shares", default="pad")
    ap.add_argument("--batch-in", default="dataset", choices=["dataset", "loader"])
    args = ap.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=40))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    bs = 32
    ds = CorgiPileDataset(args.dsn, args.table, id_column="id", seed=7, buffer_size="20%",
                          even_shares=args.even_shares,
                          batch_size=bs if args.batch_in == "dataset" else None)
    result = {"rank": rank, "steps": [], "ids": [], "sizing": list(ds.sizing.__dict__.values()),
              "block_rows": ds._block_rows}
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        dl = (DataLoader(ds, batch_size=None, num_workers=args.workers)
              if args.batch_in == "dataset" else
              DataLoader(ds, batch_size=bs, num_workers=args.workers))
        steps, ids = 0, []
        for x, y, i in dl:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x / 5000.0), y)
            loss.backward()
            opt.step()
            steps += 1
            ids += i.tolist()
        result["steps"].append(steps)
        result["ids"].append(ids)
    result["weights"] = [p.detach().flatten().tolist() for p in model.parameters()]
    Path(args.out, f"rank{rank}.json").write_text(json.dumps(result))
    ds.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
