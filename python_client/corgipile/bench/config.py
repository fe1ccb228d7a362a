"""Settings shared by every method of one benchmark run."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TrainSettings:
    """The same hyper-parameters for the engine and every baseline.

    The learning rate of epoch e (0-based) is learning_rate * decay**e, the
    engine's schedule; the baselines are driven epoch by epoch with it.
    """

    epochs: int = 20
    learning_rate: float = 0.1
    decay: float = 0.95
    l2: float = 0.0
    seed: int = 1
    buffer_size: str = "10%"
    block_size: str | None = None
    double_buffer: bool = True
    sklearn_shuffle: bool = True

    def rate(self, epoch: int) -> float:
        """The learning rate of 0-based epoch `epoch`, computed as the engine
        does (pow from the C library), so the baselines see the same bits."""
        return self.learning_rate * math.pow(self.decay, epoch)
