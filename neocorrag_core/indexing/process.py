"""The ``process`` engine: a pool of worker processes on this machine, one extractor each.

Workers are started with the ``spawn`` method (a fresh interpreter: no forked copy of
the driver's threads, locks or loaded models, and the same on every OS); each builds
its extractor once, from the spec string, in the pool's initializer, and loads the
model on its first batch. Consecutive batches travel together, in groups of at least
the extractor's batch (spaCy: 64 passages, :func:`~neocorrag_core.indexing.base.extract_size`),
and come back batch by batch; at most a few groups per worker are in flight, so a large
chunk is never queued at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress

from neocorrag_core.indexing.base import (
    Batch,
    check_aligned,
    extract_size,
    extractor_for,
    one_thread,
    resolve_spec,
    split_results,
)
from neocorrag_core.indexing.stream import grouped
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.factory import make_extractor
from neocorrag_core.triples.store import ExtractorKey
from neocorrag_core.types import Triple

IN_FLIGHT_PER_WORKER = 2
"""Groups of batches queued per worker: one running, one ready, so no worker waits on the
driver."""

_worker_extractor: TripleExtractor | None = None  # one per worker process


def _start_worker(spec: str, batch_size: int) -> None:
    """Pool initializer: build this worker's extractor; leave Ctrl-C to the driver."""
    global _worker_extractor
    # Ctrl-C reaches the whole process group; the driver stops the pool itself, so
    # workers must not die mid-batch printing tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    one_thread()
    _worker_extractor = extractor_for(spec, batch_size)


def _extract(passages: Batch) -> list[list[Triple]]:
    """Worker side: the triples of the passages of a group of batches, in order."""
    assert _worker_extractor is not None, "the pool initializer did not run"
    one_thread()  # the extractor's first batch may have loaded a library with its own pool
    triples = [list(found) for found in _worker_extractor.extract(passages)]
    check_aligned(passages, triples, f"{type(_worker_extractor).__name__}.extract")
    return triples


class ProcessEngine:
    """Extraction on ``workers`` local processes (``ProcessPoolExecutor``, spawn context).

    Args:
        spec: the extractor spec (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm:<lm>"``).
        workers: worker processes (default: the machine's CPU count). Each loads its own
            model, so memory grows with the workers (an LLM extractor: one LM each).
        batch_size: passages per batch (one ``extract`` call in a worker).
    """

    name = "process"

    def __init__(self, spec: str, *, workers: int | None = None, batch_size: int = 16) -> None:
        self.spec = resolve_spec(spec)
        extractor = make_extractor(self.spec)
        self.key = ExtractorKey.of(extractor)
        self.workers = workers or os.cpu_count() or 1
        self.batch_size = batch_size
        self.extract_size = extract_size(extractor, batch_size)
        self._pool: ProcessPoolExecutor | None = None

    def describe(self) -> str:
        """One line for the CLI."""
        return f"process engine ({self.workers} worker processes, {self.spec})"

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self.spec, self.batch_size),
            )
        return self._pool

    def run(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[list[Triple]]]]:
        """Each batch with its triples, as workers finish them."""
        if not batches:
            return
        pool = self._start()
        todo = iter(grouped(batches, self.extract_size))
        pending: dict[Future[list[list[Triple]]], list[Batch]] = {}

        def submit_next() -> None:
            group = next(todo, None)
            if group is not None:
                pending[pool.submit(_extract, [p for batch in group for p in batch])] = group

        for _ in range(self.workers * IN_FLIGHT_PER_WORKER):
            submit_next()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                group = pending.pop(future)
                try:
                    triples = future.result()
                except BrokenProcessPool:
                    raise RuntimeError(
                        "a worker of the process pool died (killed, or out of memory: try "
                        "fewer --workers); what was stored is kept: run the same command "
                        "again to resume"
                    ) from None
                submit_next()  # before handing back, so the worker is busy while we write
                yield from split_results(group, triples)

    def close(self, *, abort: bool = False) -> None:
        """Shut the pool down; ``abort``: cancel queued batches and end running workers."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if not abort:
            pool.shutdown(wait=True)
            return
        # Interrupted: batches still running are lost anyway (nothing stores them), so the
        # workers are ended rather than waited for (an LLM batch can take minutes).
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            with suppress(Exception):
                process.terminate()
