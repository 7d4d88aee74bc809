"""``python -m neocorrag_lab eval ...``: the ``neocorrag`` command with the lab's methods
registered, for a checkout where the lab is not installed (run it from ``benchmarks/``,
or with ``benchmarks`` on ``PYTHONPATH``)."""

from __future__ import annotations

import sys

import neocorrag_lab  # noqa: F401  (registers the lab's methods)
from neocorrag_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
