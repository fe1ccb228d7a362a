"""The convergence studies behind scripts/convergence_study.py: one module
per study (paper.py, grab.py, parallel.py) over a shared runner
(runner.py); cli.py parses the options and picks the study."""

import os

# One BLAS thread: on a small, loaded machine (the study's 2 cores are shared)
# OpenBLAS's threads fight each other, and the exact solves of --grab ran 4x
# slower with them.  An explicit setting in the environment wins.  Set before
# any study imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
