"""The ``local`` engine: the extractor runs in the driver's own process, batch after batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from neocorrag_core.indexing.base import Batch, check_aligned
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.store import ExtractorKey
from neocorrag_core.types import Triple


class LocalEngine:
    """Runs ``extractor`` in this process (any extractor object, not only spec strings)."""

    name = "local"

    def __init__(self, extractor: TripleExtractor) -> None:
        self.extractor = extractor
        self.key = ExtractorKey.of(extractor)

    def describe(self) -> str:
        """One line for the CLI."""
        return "local engine (this process)"

    def run(self, batches: Sequence[Batch]) -> Iterator[tuple[Batch, list[list[Triple]]]]:
        """Each batch with its triples, in order."""
        for batch in batches:
            triples = [list(found) for found in self.extractor.extract(batch)]
            check_aligned(batch, triples, f"{type(self.extractor).__name__}.extract")
            yield batch, triples

    def close(self, *, abort: bool = False) -> None:
        """Nothing to stop."""
