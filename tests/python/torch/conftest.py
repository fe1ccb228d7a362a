"""Fixtures of the corgipile.torch tests."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                    "(make test installs torch==2.13.0 from requirements-dev.txt)")

from torch_helpers import make_table  # noqa: E402


@pytest.fixture
def table(conn):
    make_table(conn)
    return "pts"
