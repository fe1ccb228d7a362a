"""Real DistributedDataParallel training steps over CorgiPileDataset on 2
and 3 gloo ranks (torchrun processes on loopback), over a table whose
blocks hold very different numbers of rows.  Before even shares, rank 0 sat
in backward()'s all-reduce while rank 1 had run out of batches: a hang.
The job's collectives time out, and torchrun is killed after a timeout,
so a regression fails instead of hanging the suite."""

from __future__ import annotations

import pytest

TORCH_MISSING = ("corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                 "(make test installs torch==2.13.0 from requirements-dev.txt)")
torch = pytest.importorskip("torch", reason=TORCH_MISSING)

from torch_helpers import make_uneven_table, torchrun  # noqa: E402

# 2 workers per rank on a 2-core machine: torch warns, on purpose here
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


@pytest.mark.parametrize("nproc,even,batch_in", [(2, "pad", "dataset"), (3, "drop", "loader")])
def test_ddp_training_steps_on_unequal_shares(conn, dsn, tmp_path, nproc, even, batch_in):
    make_uneven_table(conn)
    live = {r[0] for r in conn.execute("SELECT id FROM uneven")}
    ranks = torchrun(tmp_path, nproc, "--dsn", dsn, "--even-shares", even, "--batch-in", batch_in,
                     "--workers", "2", "--epochs", "2", job="ddp_job.py", timeout=240)
    counts = ranks[0]["block_rows"]
    assert counts and min(counts) == 0 and max(counts) > 1.5 * sum(counts) / len(counts), \
        "the table's blocks should hold unequal row counts"
    for epoch in range(2):
        steps = [r["steps"][epoch] for r in ranks]
        assert len(set(steps)) == 1 and steps[0] > 0, f"epoch {epoch}: steps per rank {steps}"
        ids = [i for r in ranks for i in r["ids"][epoch]]
        if even == "pad":
            assert set(ids) == live, "a row was not read"
        else:
            assert len(ids) == len(set(ids)) and set(ids) <= live
        # padding repeats a rank's own rows only: the ranks' rows are disjoint
        sets = [set(r["ids"][epoch]) for r in ranks]
        assert sum(len(x) for x in sets) == len(set().union(*sets))
    # DDP kept the replicas in step: the same weights everywhere
    assert all(r["weights"] == ranks[0]["weights"] for r in ranks)
