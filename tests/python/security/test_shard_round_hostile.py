"""A distributed training's worker entry points, called by a hostile role
with damaged inputs (scripts/fuzz_shard_round.py): every call ends in a
result or a clean error, never a lost connection, an XX000 or a restart."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from fuzz_shard_round import run


def test_damaged_round_inputs_end_in_clean_errors(dsn):
    out = run(dsn, cases=300, seed=11)
    assert out["lost"] == 0 and out["xx000"] == 0 and out["restarted"] is False, out
    # the cases reach the round itself, not only the input checks
    assert out["ok"] > 10 and out["errors"] > 100, out
