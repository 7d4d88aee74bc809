"""Indexing a corpus into the triple store: ``neocorrag index`` without the command line.

The driver (:func:`index_corpus`) streams the corpus in chunks, skips passages already
stored, sends the rest to an engine and writes the results as they come back; it is the
store's only writer. Engines: :class:`LocalEngine` (this process),
:class:`~neocorrag_core.indexing.process.ProcessEngine` (a local process pool) and
:class:`~neocorrag_core.indexing.ray_engine.RayEngine` (Ray Data, the ``ray`` extra).

    from neocorrag_core.indexing.corpus import open_corpus
    from neocorrag_core.indexing import index_corpus, make_engine
    from neocorrag_core.triples import TripleStore

    report = index_corpus(open_corpus("corpus.jsonl"), TripleStore("triples.sqlite"),
                          make_engine("process", "spacy", workers=4))
"""

from __future__ import annotations

from neocorrag_core.errors import ConfigError
from neocorrag_core.indexing.base import Engine, extractor_for, resolve_spec
from neocorrag_core.indexing.driver import IndexReport, index_corpus
from neocorrag_core.indexing.local import LocalEngine
from neocorrag_core.indexing.stream import DEFAULT_CHUNK_SIZE, DEFAULT_RAY_CHUNK_SIZE
from neocorrag_core.validation import check_int

ENGINES = ("local", "process", "ray")


def make_engine(
    name: str,
    spec: str,
    *,
    workers: int | None = None,
    batch_size: int = 16,
    address: str | None = None,
) -> Engine:
    """The engine ``name`` running the extractor ``spec`` (nothing starts until there is work).

    ``workers`` applies to ``process`` and ``ray``, ``address`` to ``ray`` only.
    ``workers`` (``None``: one per CPU) and ``batch_size`` must be integers >= 1: checked
    here, before any store is locked or worker started.
    """
    check_int("make_engine", "workers", workers, minimum=1, optional=True)
    check_int("make_engine", "batch_size", batch_size, minimum=1)
    if name == "local":
        return LocalEngine(extractor_for(resolve_spec(spec), batch_size))
    if name == "process":
        from neocorrag_core.indexing.process import ProcessEngine

        return ProcessEngine(spec, workers=workers, batch_size=batch_size)
    if name == "ray":
        from neocorrag_core.indexing.ray_engine import RayEngine

        return RayEngine(spec, workers=workers, batch_size=batch_size, address=address)
    raise ConfigError(f"unknown indexing engine {name!r}: use one of {', '.join(ENGINES)}")


def default_chunk_size(engine: str) -> int:
    """Passages per driver chunk for ``engine`` (Ray starts its actors once per chunk)."""
    return DEFAULT_RAY_CHUNK_SIZE if engine == "ray" else DEFAULT_CHUNK_SIZE


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_RAY_CHUNK_SIZE",
    "ENGINES",
    "Engine",
    "IndexReport",
    "LocalEngine",
    "default_chunk_size",
    "extractor_for",
    "index_corpus",
    "make_engine",
    "resolve_spec",
]
