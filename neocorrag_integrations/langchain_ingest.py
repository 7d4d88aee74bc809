"""LangChain ingestion: :class:`TripleExtractorTransformer`, triples for each document as you index.

Run it on the documents before they go into your vector store::

    from neocorrag_integrations.langchain import TripleExtractorTransformer

    chunks = splitter.split_documents(documents)
    vector_store.add_documents(TripleExtractorTransformer().transform_documents(chunks))

Each document gets ``metadata["triples"]``, also written to the triple store under its
text, which the query-time compressor reads where the vector store lost the metadata.
Run it after splitting: the triples belong to the text they were extracted from.

Needs only ``langchain-core`` (``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

try:
    from langchain_core.documents import BaseDocumentTransformer, Document
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.langchain_ingest needs langchain-core: "
        "pip install 'neocorrag[langchain]'"
    ) from err

from neocorrag_core.records.documents import Fields, read_passages
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.ingest import (
    MetadataFormat,
    TripleAnnotator,
    check_items,
    recorded_ids,
)
from neocorrag_core.triples.precomputed import METADATA_KEY
from neocorrag_core.triples.store import CacheStats
from neocorrag_core.types import Passage
from neocorrag_integrations._common import detached_copy

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from neocorrag_core.triples.ingest import IngestSettings

__all__ = ["TripleExtractorTransformer", "document_fields", "document_passages"]


def document_fields(doc: Document) -> Fields:
    """What neocorrag reads of a LangChain document (id, ``page_content``, metadata): the one
    reading the compressor, the EviReform retriever and this transformer share, so the store
    key written at ingestion (the hash of title and text) is the one read at query time."""
    return doc.id, doc.page_content, doc.metadata, None


def document_passages(documents: Sequence[Document]) -> list[Passage]:
    """The engine passages of ``documents``, exactly as the compressor builds them."""
    return read_passages(documents, lambda _, d: document_fields(d))


class TripleExtractorTransformer(BaseDocumentTransformer):
    """A LangChain ``BaseDocumentTransformer`` that adds each document's triples to its metadata.

    Returns new documents (the input is not modified), in the same order, with the same
    ids. Documents that already have ``metadata["triples"]`` are returned unchanged (as
    copies). For the others, the triples come from the triple store when it has the
    document's text (from any earlier ingestion or query) and are otherwise extracted and
    written to it, with the document's ``id`` when set. Text that is not valid Unicode is
    stored with U+FFFD in place of lone surrogates; the returned copies keep it as given.
    ``atransform_documents`` runs in a worker thread, off the event loop.

    Keywords: :class:`~neocorrag_core.triples.ingest.IngestSettings` (``store=":memory:"``
    is a store private to this transformer).
    """

    def __init__(self, **settings: Unpack[IngestSettings]) -> None:
        self._annotator = TripleAnnotator.from_settings(type(self).__name__, settings)

    def __repr__(self) -> str:
        return (
            f"TripleExtractorTransformer(extractor={self.extractor!r}, store={self.store!r}, "
            f"metadata_format={self.metadata_format!r})"
        )

    @property
    def extractor(self) -> str | TripleExtractor:
        """The extractor spec, or the extractor object where it has no spec."""
        return self._annotator.extractor

    @property
    def store(self) -> str:
        """The triple store file (``":memory:"`` for a private store)."""
        return self._annotator.store_path

    @property
    def metadata_format(self) -> MetadataFormat:
        """``"list"`` or ``"json"``."""
        return self._annotator.metadata_format

    @property
    def stats(self) -> CacheStats:
        """Store hits and extractions so far."""
        return self._annotator.stats

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Copies of ``documents`` with ``metadata["triples"]`` added where it was missing."""
        documents = check_items(
            type(self).__name__,
            "documents",
            documents,
            Document,
            "langchain_core Documents",
            "langchain_core Document objects",
        )
        ids = [recorded_ids(doc.id) for doc in documents]
        values = self._annotator.metadata_values(document_passages(documents), ids)
        out = []
        for doc, value in zip(documents, values, strict=True):
            copy = detached_copy(doc)  # nested metadata must not be shared either
            if value is not None:
                copy.metadata[METADATA_KEY] = value
            out.append(copy)
        return out

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> list[Document]:
        """:meth:`transform_documents` in a worker thread (extraction and SQLite block)."""
        return await asyncio.to_thread(self.transform_documents, documents, **kwargs)
