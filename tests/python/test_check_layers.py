"""scripts/check_layers.py: the layer rules of docs/engine.md hold for this
checkout, and the checker does catch an upward include, a sideways one,
corgipile.h outside corgipile.c, postgres.h in core/, an include circle and
the Python counterparts (it is run by tests/run_tests.sh too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def test_this_checkout_has_no_arrow_up_and_no_circle():
    proc = run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("C (extension/): ") and lines[0].endswith("arrows up: 0, circles: 0")
    assert lines[1].startswith("Python (corgipile): ") and "arrows up: 0, circles: 0" in lines[1]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_bad_trees_are_caught(tmp_path):
    write(tmp_path, {
        "extension/corgipile.c": '#include "corgipile.h"\n#include "nodes/sgd.h"\n',
        "extension/corgipile.h": "",
        "extension/core/a.h": '#include "postgres.h"\n',
        "extension/params/params.h": '#include "nodes/parallel.h"\n',       # up
        "extension/nodes/parallel.h": '#include "params/params.h"\n',       # circle
        "extension/nodes/sgd.h": '#include "functions/evaluate.h"\n',       # sideways
        "extension/functions/evaluate.h": "",
        "extension/io/layout.c": '#include "corgipile.h"\n#include "model/models.h"\n',
        "extension/model/models.h": "",
        "python_client/corgipile/__init__.py": "",
        "python_client/corgipile/errors.py": "from . import client\n",             # up
        "python_client/corgipile/client.py": "from .statements import x\n",
        "python_client/corgipile/statements.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .client import y\n"),
        "python_client/corgipile/proxy_wire.py": "def f():\n    from .torch import plan\n",
        "python_client/corgipile/torch/__init__.py": "",
        "python_client/corgipile/torch/plan.py": "",
    })
    proc = run("--root", str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "core/a.h: core/ includes postgres.h" in out
    assert 'params/params.h: includes "nodes/parallel.h" (params/ -> nodes/)' in out
    assert 'nodes/sgd.h: includes "functions/evaluate.h" (nodes/ -> functions/)' in out
    assert 'io/layout.c: includes "corgipile.h" (only corgipile.c does)' in out
    assert 'io/layout.c: includes "model/models.h" (io/ -> model/)' in out
    assert "circle: nodes/parallel <-> params/params" in out
    assert "corgipile.errors imports corgipile.client (up" in out
    assert "corgipile.proxy_wire imports corgipile.torch.plan (sideways: proxy -> torch)" in out
    assert "circle: corgipile.client <-> corgipile.statements" in out
    assert "arrows up: 0" not in out
