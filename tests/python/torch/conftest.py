"""Fixtures of the corgipile.torch tests.  Each test module skips itself
(with the reason) when PyTorch is not installed."""

from __future__ import annotations

import pytest

from torch_helpers import make_table


@pytest.fixture
def table(conn):
    make_table(conn)
    return "pts"
