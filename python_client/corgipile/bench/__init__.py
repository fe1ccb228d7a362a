"""`corgipile bench`: the engine's shuffle strategies against MADlib, a
Bismarck-style aggregate and scikit-learn.

The main CLI registers the subcommand with::

    from corgipile import bench
    bench.add_arguments(subparsers.add_parser("bench", help=...))
    ... return bench.run(args)

and ``python -m corgipile.bench`` runs it on its own.  Only psycopg, numpy,
scikit-learn and matplotlib are needed (the last two on demand).
"""

from .cli import add_arguments, main, run

__all__ = ["add_arguments", "run", "main"]
