"""What every indexing engine shares: the engine protocol and the extractor built from a spec.

An engine turns batches of passages into their triples; it never touches the store. The
driver (:mod:`neocorrag_core.indexing.driver`) decides what to extract and writes what
comes back, so every engine stores exactly the same thing: the same extractor, built
from the same spec string, on the same batches, cleaned by the store's ``put_many``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import Protocol

from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.factory import extractor_spec, make_extractor
from neocorrag_core.triples.store import ExtractorKey
from neocorrag_core.types import Passage, Triple

Batch = list[Passage]
"""Passages extracted together (one ``extract`` call, one store transaction)."""


class Engine(Protocol):
    """Extracts the triples of batches of passages, locally or on workers."""

    name: str
    """``"local"``, ``"process"`` or ``"ray"``."""
    key: ExtractorKey
    """The store key of the extractor the engine runs."""

    def describe(self) -> str:
        """One line for the CLI: the engine and its workers."""
        ...

    def run(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[list[Triple]]]]:
        """Each batch with its triples (one list per passage), as batches finish: not
        necessarily in order. Workers start on the first call that has work."""
        ...

    def close(self, *, abort: bool = False) -> None:
        """Stop the workers; ``abort``: without waiting for batches still running."""
        ...


def resolve_spec(spec: str) -> str:
    """``spec`` with its defaults filled in, so every worker builds the same extractor.

    ``"spacy"`` picks an installed pipeline on the machine that builds it; resolved here,
    on the driver, it names that pipeline (``"spacy:en_core_web_sm"``), and a worker
    without it fails loudly instead of storing another pipeline's triples under this key.
    """
    return extractor_spec(make_extractor(spec)) or spec


SPACY_EXTRACT_SIZE = 64
"""Passages per ``extract`` call of the spaCy extractor in every engine (at least): its
parser and entity recognizer run faster on 64 passages at a time than on 16, the default
store batch (one core: 2 % on the pooled corpus of ``benchmarks/bench_index.py
--extraction``, up to 10 % on shorter passages)."""


def extract_size(extractor: object, batch_size: int) -> int:
    """Passages per ``extract`` call for ``extractor`` when the store batch is ``batch_size``:
    the engines join consecutive batches up to this size, and still write each batch on
    its own. ``batch_size`` itself for every extractor but spaCy's (an LLM's batch is its
    memory, and each of its batches is worth writing as soon as it is done)."""
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

    if isinstance(extractor, SpacyTripleExtractor):
        return max(batch_size, SPACY_EXTRACT_SIZE)
    return batch_size


def extractor_for(spec: str, batch_size: int) -> TripleExtractor:
    """The extractor ``spec`` names, reading the passages of ``batch_size`` per model call
    (spaCy: at least :data:`SPACY_EXTRACT_SIZE`, see :func:`extract_size`).

    Nothing is loaded: models load on the first ``extract``. The batch size is the one
    ``neocorrag index --batch-size`` sets; it does not change the extractors' output or
    their store key.
    """
    extractor = make_extractor(spec)
    if hasattr(extractor, "batch_size"):
        extractor.batch_size = extract_size(extractor, batch_size)
    return extractor


def split_results(
    group: Sequence[Batch], triples: Sequence[Sequence[Triple]]
) -> Iterator[tuple[Batch, list[list[Triple]]]]:
    """The triples of a joined group of batches (one list per passage, in order), handed
    back batch by batch."""
    start = 0
    for batch in group:
        yield batch, [list(found) for found in triples[start : start + len(batch)]]
        start += len(batch)


def one_thread() -> None:
    """Keep the math libraries of this process to one thread: N workers share the CPUs,
    and each starting a thread per core would slow all of them (numpy's BLAS, which the
    spaCy extractor multiplies with, and torch, which thinc imports)."""
    with suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def check_aligned(batch: Sequence[Passage], triples: Sequence[object], where: str) -> None:
    """Raise if an extractor returned a different number of lists than passages."""
    if len(triples) != len(batch):
        raise RuntimeError(
            f"{where} returned {len(triples)} triple lists for {len(batch)} passages"
        )
