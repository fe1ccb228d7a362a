#!/usr/bin/env python3
"""The convergence studies (scripts/studies/): the CorgiPile paper's protocol
on Fashion-MNIST (default), --grab and --parallel.  `--help` lists the
options; docs/convergence.md describes the studies."""

import sys
from pathlib import Path

# the studies package lives beside this file (also under python -P)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from studies.cli import main

if __name__ == "__main__":
    sys.exit(main())
