"""What every indexing engine shares: the engine protocol and the extractor built from a spec.

An engine turns batches of passages into their triples; it never touches the store. The
driver (:mod:`neocorrag_core.indexing.driver`) decides what to extract and writes what
comes back, so every engine stores exactly the same thing: the same extractor, built
from the same spec string, on the same batches, cleaned by the store's ``put_many``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


def extractor_for(spec: str, batch_size: int) -> TripleExtractor:
    """The extractor ``spec`` names, reading ``batch_size`` passages per model call.

    Nothing is loaded: models load on the first ``extract``. The batch size is the one
    ``neocorrag index --batch-size`` sets; it does not change the extractors' output or
    their store key.
    """
    extractor = make_extractor(spec)
    if hasattr(extractor, "batch_size"):
        extractor.batch_size = batch_size
    return extractor


def check_aligned(batch: Sequence[Passage], triples: Sequence[object], where: str) -> None:
    """Raise if an extractor returned a different number of lists than passages."""
    if len(triples) != len(batch):
        raise RuntimeError(
            f"{where} returned {len(triples)} triple lists for {len(batch)} passages"
        )
