"""The ``neocorrag`` command: ``app.py`` (demo, doctor, eval and the parser), ``index.py``
(``neocorrag index``) and ``store.py`` (``neocorrag store``)."""

from neocorrag_core.cli.app import main

__all__ = ["main"]
