#!/usr/bin/env python3
"""A small MLP on Fashion-MNIST read straight from PostgreSQL with
corgipile.torch, on 2 ranks x 2 DataLoader workers:

    torchrun --nproc_per_node 2 examples/torch_fashion_mnist.py --dsn "dbname=ml"

The training table is stored clustered by label (all T-shirts, then all
trousers, ...), the way tables often are.  Part A trains the same MLP
with shuffle='corgipile', 'shuffle_once' (a fully shuffled copy) and
'no_shuffle' and reports held-out accuracy per epoch.  Part B compares
block orders across ranks on the same table: CD-GraB (PairBalance over all
ranks' per-block gradients) against D-RR (each rank reshuffles its own
blocks), for several seeds.  Rank 0 writes the figures as JSON and a plot.

Gradients are averaged across ranks by hand (all_reduce), which is what
DDP does, so that ranks with fewer rows left in an epoch can still take
part in every step and CD-GraB can see each rank's own gradients.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader

from corgipile.torch import CDGraB, DRR, CorgiPileDataset

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from demo import DATA, read_idx  # noqa: E402  (the demo's IDX reader)


def load_tables(dsn: str, train_rows: int) -> tuple[str, str]:
    """Rank 0: a class-stratified subset of the training images, stored
    sorted by class, and the 10,000 test images (once)."""
    train, test = f"fmnist_train_{train_rows}", "fmnist_test"
    with psycopg.connect(dsn, autocommit=True) as conn:
        have = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_catalog.pg_tables WHERE tablename IN (%s, %s)", (train, test))}
        for name, split, rows in ((train, "train", train_rows), (test, "t10k", None)):
            if name in have:
                continue
            images = read_idx(DATA / f"{split}-images-idx3-ubyte.gz")
            labels = read_idx(DATA / f"{split}-labels-idx1-ubyte.gz")
            idx = np.arange(len(labels))
            if rows and rows < len(labels):
                rng = np.random.default_rng(0)
                per = rows // 10
                idx = np.concatenate([rng.choice(np.flatnonzero(labels == c), per, replace=False)
                                      for c in range(10)])
            idx = idx[np.argsort(labels[idx], kind="stable")]  # clustered by label
            x = images.reshape(len(images), -1).astype(np.float32) / 255.0
            conn.execute(f"CREATE TABLE {name} (id int, label int, features float4[])")
            conn.execute(f"ALTER TABLE {name} ALTER COLUMN features SET STORAGE MAIN")
            with conn.cursor().copy(f"COPY {name} FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "int4", "float4[]"])
                for i in idx:
                    copy.write_row((int(i), int(labels[i]), x[i].tolist()))
            conn.execute(f"VACUUM ANALYZE {name}")
    return train, test


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def train(ds: CorgiPileDataset, args: argparse.Namespace, seed: int, test: tuple,
          sorter_kind: str | None = None) -> list[dict]:
    torch.manual_seed(seed)  # the same initial model on every rank
    model = mlp()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=args.lr)
    # cosine decay to 0 over the run, so that the last epoch's model is not
    # just the one tilted towards the last few batches
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs)
    dim = sum(p.numel() for p in params)
    sorter = None
    if sorter_kind == "cd-grab":
        sorter = CDGraB(ds, dim=dim, projection_dim=args.projection)
    elif sorter_kind == "d-rr":
        sorter = DRR(ds, seed=seed)
    history = []
    for epoch in range(args.epochs):
        t0 = time.monotonic()
        ds.set_epoch(epoch)
        it = iter(DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers))
        stats = torch.zeros(2, dtype=torch.float64)  # loss sum, rows
        while True:
            batch = next(it, None)
            alive = torch.tensor([0.0 if batch is None else 1.0])
            dist.all_reduce(alive)
            if alive.item() == 0:
                break
            opt.zero_grad(set_to_none=False)
            for p in params:
                p.grad = torch.zeros_like(p) if p.grad is None else p.grad.zero_()
            n = 0
            if batch is not None:
                x, y = batch[0], batch[1]
                n = len(y)
                if sorter is None:
                    loss = F.cross_entropy(model(x), y, reduction="sum")
                    loss.backward()
                    stats[0] += loss.item()
                else:
                    blocks = batch[2]
                    for b in torch.unique(blocks).tolist():
                        m = blocks == b
                        before = flat_grad(model).clone()
                        loss = F.cross_entropy(model(x[m]), y[m], reduction="sum")
                        loss.backward()
                        sorter.add(b, flat_grad(model) - before)
                        stats[0] += loss.item()
            stats[1] += n
            g = torch.cat([flat_grad(model), torch.tensor([float(n)])])
            dist.all_reduce(g)
            g = g[:-1] / max(1.0, g[-1].item())
            offset = 0
            for p in params:
                p.grad.copy_(g[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            opt.step()
        sched.step()
        if sorter is not None:
            sorter.step()
        dist.all_reduce(stats)
        acc = None
        if dist.get_rank() == 0:
            with torch.no_grad():
                acc = (model(test[0]).argmax(1) == test[1]).double().mean().item()
        history.append({"epoch": epoch + 1, "train_loss": stats[0].item() / stats[1].item(),
                        "heldout_accuracy": acc, "seconds": time.monotonic() - t0})
        if dist.get_rank() == 0:
            print(f"  epoch {epoch + 1}: loss {history[-1]['train_loss']:.4f} "
                  f"held-out {acc:.4f} ({history[-1]['seconds']:.1f} s)", flush=True)
    return history


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--train-rows", type=int, default=20000, help="stratified subset (60000 = all)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.1, help="initial; cosine decay to 0")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    ap.add_argument("--seeds", type=int, default=3, help="seeds (model init and order)")
    ap.add_argument("--block-size", default="4 pages", help="part B's block size")
    ap.add_argument("--projection", type=int, default=1024,
                    help="CD-GraB: count-sketch the gradients to this many dimensions")
    ap.add_argument("--parts", default="A,B")
    ap.add_argument("--out", default=str(ROOT / "docs" / "torch_fashion_mnist.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        load_tables(args.dsn, args.train_rows)
    dist.barrier()
    train_table, test_table = f"fmnist_train_{args.train_rows}", "fmnist_test"
    test = None
    if rank == 0:
        tds = CorgiPileDataset(args.dsn, test_table, shuffle="no_shuffle", rank=0, world_size=1)
        rows = list(tds)
        tds.close()
        test = (torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows]))
    results = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "machine": f"{platform.node()} {platform.machine()} {platform.processor()}, "
                          f"{torch.get_num_threads()} torch thread(s)/rank",
               "ranks": world, "workers_per_rank": args.workers, "train_rows": args.train_rows,
               "epochs": args.epochs, "batch_size_per_rank": args.batch_size, "lr": args.lr,
               "A": {}, "B": {}}
    parts = {p.strip().upper() for p in args.parts.split(",")}
    if "A" in parts:
        for shuffle in ("corgipile", "shuffle_once", "no_shuffle"):
            results["A"][shuffle] = []
            for seed in range(args.seeds):
                if rank == 0:
                    print(f"A: shuffle={shuffle} seed={seed}", flush=True)
                # one shuffled copy serves every seed of shuffle_once
                # a tenth of the table buffered: what CorgiPile claims is
                # that this trains as well as the full shuffle beside it
                ds = CorgiPileDataset(args.dsn, train_table, shuffle=shuffle, seed=seed,
                                      buffer_size="10%",
                                      shuffled_table=f"{train_table}_shuffled")
                results["A"][shuffle].append(train(ds, args, seed, test))
                ds.close()
    if "B" in parts:
        for kind in ("cd-grab", "d-rr"):
            results["B"][kind] = []
            for seed in range(args.seeds):
                if rank == 0:
                    print(f"B: {kind} seed={seed}", flush=True)
                ds = CorgiPileDataset(args.dsn, train_table, shuffle="block_only", seed=seed,
                                      block_size=args.block_size, with_block=True)
                results["B"][kind].append(train(ds, args, seed, test, kind))
                ds.close()
    if rank == 0:
        Path(args.out).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.out}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
