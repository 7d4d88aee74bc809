"""The ``neocorrag`` command: ``app.py`` (demo, doctor, eval and the parser), ``index.py``
(``neocorrag index``), ``store.py`` (``neocorrag store``) and ``failures.py`` (the one line
an error prints, and a quiet end when the output pipe closes early)."""

from neocorrag_core.cli.app import main

__all__ = ["main"]
