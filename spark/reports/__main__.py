"""Entry point: ``python -m spark.reports …`` or ``spark-submit
spark/reports/__main__.py …`` (``spark/reports/cli.py`` has the usage)."""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run as a file (spark-submit): Python put this directory first on
    # sys.path, where its modules would shadow top-level ones; the repository
    # root goes there instead, so ``spark.reports`` imports as a package.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent.parent))

from spark.reports.cli import main

if __name__ == "__main__":
    main()
