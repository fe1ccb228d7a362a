"""The engine's shuffle strategies: one list for the bench, its plots and the
studies (scripts/studies/).

The names are the engine's, in its order: ``extension/params/shuffles.h`` is
the list the server is built from, and ``tests/python/test_shuffles.py``
holds this module equal to it (names, order, which may run in parallel) and
checks that the server accepts exactly these names.
"""

from __future__ import annotations

from typing import Any

#: every strategy train(shuffle => ...) accepts, in the engine's order
ALL: tuple[str, ...] = ("corgipile", "block_only", "no_shuffle", "sliding_window", "mrs",
                        "shuffle_once", "epoch_shuffle", "grab")

#: the strategies that may train with workers > 1 (CP_SHUFFLE_PARALLEL)
PARALLEL: tuple[str, ...] = ("corgipile", "block_only", "no_shuffle", "grab")

#: train()'s default
DEFAULT = "corgipile"

#: the strategies of CorgiPile's comparison (the paper's): all but GraB, which
#: has a study of its own
PAPER: tuple[str, ...] = tuple(s for s in ALL if s != "grab")

#: one colour, line style and marker per strategy, the same in every plot
STYLES: dict[str, dict[str, Any]] = {
    "corgipile": dict(color="tab:blue", linestyle="-", marker="o"),
    "block_only": dict(color="tab:orange", linestyle="--", marker="s"),
    "no_shuffle": dict(color="tab:red", linestyle=":", marker="x"),
    "sliding_window": dict(color="tab:purple", linestyle="-.", marker="<"),
    "mrs": dict(color="tab:brown", linestyle="--", marker=">"),
    "shuffle_once": dict(color="black", linestyle="-", marker="^"),
    "epoch_shuffle": dict(color="tab:green", linestyle=":", marker="v"),
    "grab": dict(color="tab:cyan", linestyle="-", marker="D"),
}

