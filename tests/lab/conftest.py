"""The lab's tests run against the installed lab (``pip install -e benchmarks``, as
``.ci/run`` does) or, where it is not installed, the checkout's ``benchmarks/`` folder;
importing :mod:`neocorrag_lab` registers its methods with ``neocorrag eval``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("neocorrag_lab") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import neocorrag_lab  # noqa: F401  (registers the lab's methods)
