"""Load a script of ``benchmarks/`` as a module, for the tests of its functions and CLI.

The scripts are not a package (they are run as ``python benchmarks/NAME.py``), so each is
loaded from its file, once per test session, and registered in ``sys.modules``: their
dataclasses look their module up there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """The module of ``benchmarks/<name>.py`` (the one already loaded, if any), registered
    as ``benchmark_<name>`` so it cannot shadow an installed module of the same name."""
    key = f"benchmark_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]  # a script that failed to load is not cached half-made
        raise
    return module
