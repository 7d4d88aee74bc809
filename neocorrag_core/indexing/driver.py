"""The indexing loop: read the corpus in chunks, skip what is stored, extract, write.

One writer, no shards: only the driver (the process running this loop) writes to the
store, one transaction per batch as its results come back, whichever engine extracts.
Workers only ever see passages and return triples. So:

* resumable: each chunk is checked against the store (``contains``) before anything is
  sent to a worker, and every written batch is committed, so an interrupted run (Ctrl-C,
  ``kill -9``, a crash) loses at most the batches in flight, and the same command run
  again extracts only what is missing: nothing is lost, nothing is stored twice;
* one run at a time: the loop holds the store's indexer lock
  (:meth:`~neocorrag_core.triples.store.TripleStore.indexer_lock`), so a second run on
  the same store waits, then finds the first run's passages stored;
* bounded memory: one chunk of passages (``chunk_size``) at a time; the corpus is read
  as a stream (:func:`~neocorrag_core.indexing.corpus.open_corpus`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from neocorrag_core.errors import StoreError
from neocorrag_core.indexing.base import Engine, check_aligned
from neocorrag_core.indexing.stream import DEFAULT_CHUNK_SIZE, batched, chunked
from neocorrag_core.models.embedder import TextEmbedder
from neocorrag_core.triples.extractor import clean_triples
from neocorrag_core.triples.store import TripleStore
from neocorrag_core.triples.vectors import embed_graph_texts
from neocorrag_core.types import Passage


@dataclass
class IndexReport:
    """What one indexing run did."""

    passages: int = 0
    """Unique passages read from the corpus."""
    already_stored: int = 0
    """Of those, passages the store held already (not extracted again)."""
    extracted: int = 0
    """Passages extracted and written by this run."""
    triples_written: int = 0
    vectors_computed: int = 0
    """Node and triple texts embedded and stored by this run (0 without an embedder)."""
    seconds: float = 0.0
    interrupted: bool = False
    """Stopped by Ctrl-C: what was written is kept; the same run again resumes."""


def index_corpus(
    passages: Iterable[Passage],
    store: TripleStore,
    engine: Engine,
    *,
    batch_size: int = 16,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    show_progress: bool = True,
    on_wait: Callable[[int | None], None] | None = None,
    embedder: TextEmbedder | None = None,
) -> IndexReport:
    """Extract the triples of every passage not yet in ``store`` with ``engine``; write them.

    Args:
        passages: the corpus, as a stream of unique passages (e.g. ``open_corpus(path)``).
        store: the triple store; a read-only store is only checked (see below).
        engine: where extraction runs (:mod:`~neocorrag_core.indexing.local`,
            :mod:`~neocorrag_core.indexing.process`, :mod:`~neocorrag_core.indexing.ray_engine`);
            closed when the run ends.
        batch_size: passages per extraction call and per store transaction.
        chunk_size: passages read, checked against the store and dispatched at a time.
        show_progress: a progress bar (passages; the total is unknown for a stream).
        on_wait: called with the other run's pid if another indexer holds the store.
        embedder: when given (with an identity), the vectors of every stored passage's node
            and triple texts are computed too and kept in the store, so that queries over
            the corpus embed only the question; a passage stored before without them gets
            them now (:func:`~neocorrag_core.triples.vectors.embed_graph_texts`).

    A Ctrl-C during the run returns a report with ``interrupted`` set (what was written is
    kept); one while waiting for another indexer's lock propagates (nothing was done).
    Over a read-only store nothing is extracted: the run succeeds if every passage is
    stored already, else raises :class:`~neocorrag_core.errors.StoreError` counting the
    missing ones.
    """
    if batch_size < 1 or chunk_size < 1:
        raise ValueError("batch_size and chunk_size must be at least 1")
    started = time.perf_counter()
    if store.read_only:  # nothing to lock: it only reads, and fails if there is work
        try:
            report = _check_read_only(passages, store, engine, chunk_size)
        finally:
            engine.close()
    else:
        with store.indexer_lock(on_wait=on_wait):
            report = _index(
                passages, store, engine, batch_size, chunk_size, show_progress, embedder
            )
    report.seconds = time.perf_counter() - started
    return report


def _index(
    passages: Iterable[Passage],
    store: TripleStore,
    engine: Engine,
    batch_size: int,
    chunk_size: int,
    show_progress: bool,
    embedder: TextEmbedder | None,
) -> IndexReport:
    from tqdm.auto import tqdm

    vectors = embedder is not None and embedder.identity is not None

    report = IndexReport()
    finished = False
    with tqdm(unit="passage", desc="index", disable=not show_progress) as bar:
        try:
            for chunk in chunked(passages, chunk_size):
                # Read under the lock: what a run that held it before stored is skipped.
                todo = _missing(chunk, store, engine)
                report.passages += len(chunk)
                report.already_stored += len(chunk) - len(todo)
                if vectors and len(todo) < len(chunk):  # stored before: fill missing vectors
                    assert embedder is not None
                    pending = {id(p) for p in todo}
                    stored = [p for p in chunk if id(p) not in pending]
                    for batch in batched(stored, 256):
                        found = store.get_many(batch, engine.key)
                        report.vectors_computed += embed_graph_texts(
                            embedder, store, [f or [] for f in found], passages=batch
                        )
                bar.update(len(chunk) - len(todo))
                for batch, triples in engine.run(batched(todo, batch_size)):
                    check_aligned(batch, triples, f"the {engine.name} engine")
                    written = store.put_many(list(zip(batch, triples, strict=True)), engine.key)
                    report.extracted += len(batch)
                    report.triples_written += written
                    if vectors:
                        assert embedder is not None
                        cleaned = [
                            clean_triples(ts, p.id) for p, ts in zip(batch, triples, strict=True)
                        ]
                        report.vectors_computed += embed_graph_texts(
                            embedder, store, cleaned, passages=batch
                        )
                    bar.update(len(batch))
            finished = True
        except KeyboardInterrupt:
            report.interrupted = True
        finally:
            engine.close(abort=not finished)
    return report


def _missing(chunk: Sequence[Passage], store: TripleStore, engine: Engine) -> list[Passage]:
    done = store.contains(chunk, engine.key)
    return [p for p, stored in zip(chunk, done, strict=True) if not stored]


def _check_read_only(
    passages: Iterable[Passage], store: TripleStore, engine: Engine, chunk_size: int
) -> IndexReport:
    report = IndexReport()
    missing = 0
    for chunk in chunked(passages, chunk_size):
        missing += len(_missing(chunk, store, engine))
        report.passages += len(chunk)
    if missing:
        raise StoreError(
            f"the triple store {store.path} is read-only, and {missing} passage(s) are not "
            "in it yet: index into a writable --store (or NEOCORRAG_CACHE), or make the file "
            "and its folder writable"
        )
    report.already_stored = report.passages
    return report
