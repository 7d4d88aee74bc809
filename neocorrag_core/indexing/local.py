"""The ``local`` engine: the extractor runs in the driver's own process, batch after batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from neocorrag_core.indexing.base import Batch, check_aligned, split_results
from neocorrag_core.indexing.stream import grouped
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.store import ExtractorKey
from neocorrag_core.types import Triple


class LocalEngine:
    """Runs ``extractor`` in this process (any extractor object, not only spec strings).

    Consecutive batches are joined into one ``extract`` call of at least the extractor's
    ``batch_size`` passages, where it has one (the spaCy extractor built for ``neocorrag
    index`` parses 64 at a time: :func:`~neocorrag_core.indexing.base.extract_size`); each
    batch is still handed back, and written, on its own.
    """

    name = "local"

    def __init__(self, extractor: TripleExtractor) -> None:
        self.extractor = extractor
        self.key = ExtractorKey.of(extractor)
        size = getattr(extractor, "batch_size", 1)
        self.extract_size = size if isinstance(size, int) and size > 0 else 1

    def describe(self) -> str:
        """One line for the CLI."""
        return "local engine (this process)"

    def run(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[list[Triple]]]]:
        """Each batch with its triples, in order."""
        for group in grouped(batches, self.extract_size):
            passages = [p for batch in group for p in batch]
            triples = self.extractor.extract(passages)
            check_aligned(passages, triples, f"{type(self.extractor).__name__}.extract")
            yield from split_results(group, triples)

    def close(self, *, abort: bool = False) -> None:
        """Nothing to stop."""
