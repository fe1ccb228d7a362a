"""corgipile.torch: read PostgreSQL tables into PyTorch in CorgiPile order.

Needs the ``[torch]`` extra (``pip install corgipile[torch]``).
See docs/torch.md.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("corgipile.torch needs PyTorch: pip install 'corgipile[torch]'") from e

from .dataset import CorgiPileDataset
from .grab import DRR, CDGraB, pair_balance, reorder

__all__ = ["CorgiPileDataset", "CDGraB", "DRR", "pair_balance", "reorder"]
