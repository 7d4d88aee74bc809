"""LangChain ingestion: :class:`TripleExtractorTransformer`, triples for each document as you index.

Run it on the documents before they go into your vector store::

    from neocorrag_integrations.langchain import TripleExtractorTransformer

    chunks = splitter.split_documents(documents)
    vector_store.add_documents(TripleExtractorTransformer().transform_documents(chunks))

Each document gets ``metadata["triples"]`` and the triples are written to the triple store
keyed by the document's text, so the query-time compressor reads them from the document
or, if the vector store lost the metadata, from the store: nothing is extracted at query
time. Run it after splitting: the triples belong to the text they were extracted from.

Needs only ``langchain-core`` (``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Literal

try:
    from langchain_core.documents import BaseDocumentTransformer, Document
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.langchain_ingest needs langchain-core: "
        "pip install 'neocorrag[langchain]'"
    ) from err

from neocorrag_core.errors import InputError
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.ingest import MetadataFormat, TripleAnnotator
from neocorrag_core.triples.precomputed import METADATA_KEY
from neocorrag_core.triples.store import CacheStats
from neocorrag_core.types import Passage
from neocorrag_core.validation import clean_text
from neocorrag_integrations._common import (
    Fields,
    check_sequence,
    detached_copy,
    read_fields,
    to_passages,
)

__all__ = ["TripleExtractorTransformer", "document_fields", "document_passages"]


def document_fields(doc: Document) -> Fields:
    """What neocorrag reads of a LangChain document (id, ``page_content``, metadata): the one
    reading the compressor, the EviReform retriever and this transformer share, so the store
    key written at ingestion (the hash of title and text) is the one read at query time."""
    return doc.id, doc.page_content, doc.metadata, None


def document_passages(documents: Sequence[Document]) -> list[Passage]:
    """The engine passages of ``documents``, exactly as the compressor builds them."""
    return to_passages([read_fields(i, document_fields(d)) for i, d in enumerate(documents)])


class TripleExtractorTransformer(BaseDocumentTransformer):
    """A LangChain ``BaseDocumentTransformer`` that adds each document's triples to its metadata.

    Returns new documents (the input is not modified), in the same order, with the same
    ids. Documents that already have ``metadata["triples"]`` are returned unchanged (as
    copies). Text that is not valid Unicode (lone surrogates in the text, title or id) is
    read, hashed and stored with U+FFFD in their place; the returned copies keep it as
    given. For the others, the triples come from the triple store when it has the
    document's text (any earlier ingestion or query, under any id) and are otherwise
    extracted and written to it; a document's ``id``, when set, is recorded with them.
    ``atransform_documents`` runs the same work in a worker thread, off the event loop.

    Args:
        extractor: a spec (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm"``, ``"llm:<lm>"``)
            or an extractor object.
        store: the triple store file; ``None``: the default store (``NEOCORRAG_TRIPLE_STORE``
            / ``NEOCORRAG_CACHE``), the one the query-time adapters read. ``":memory:"``
            keeps the triples in a store private to this transformer (the metadata still
            carries them); such a transformer cannot be pickled.
        metadata_format: ``"list"`` (``[[subject, relation, object], ...]``) or ``"json"``
            (that list as a JSON string, for vector stores with flat metadata, e.g. Chroma).
        batch_size: documents per extraction batch and store transaction.
        embedder: whose vectors of the node and triple texts are stored beside the triples,
            so queries over these documents embed only the question: ``None``, the bundled
            MiniLM the compressor uses by default; a sentence-transformers name or folder
            (the compressor's ``embedder=``); ``False`` for none.
        show_progress: a progress bar over the batches.

    Raises :class:`~neocorrag_core.errors.ConfigError` for a bad setting, and
    :class:`~neocorrag_core.errors.StoreError` when the store cannot be opened or written.
    """

    def __init__(
        self,
        *,
        extractor: str | TripleExtractor = "spacy",
        store: str | os.PathLike[str] | None = None,
        metadata_format: MetadataFormat = "list",
        batch_size: int = 32,
        embedder: str | Literal[False] | None = None,
        show_progress: bool = False,
    ) -> None:
        self._annotator = TripleAnnotator(
            extractor,
            store,
            metadata_format=metadata_format,
            batch_size=batch_size,
            embedder=embedder,
            show_progress=show_progress,
            owner=type(self).__name__,
        )

    def __repr__(self) -> str:
        a = self._annotator
        return (
            f"TripleExtractorTransformer(extractor={a.extractor!r}, store={a.store_path!r}, "
            f"metadata_format={a.metadata_format!r})"
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
        owner = type(self).__name__
        documents = check_sequence(owner, "documents", documents, "langchain_core Documents")
        for i, doc in enumerate(documents):
            if not isinstance(doc, Document):
                raise InputError(
                    f"documents[{i}] is a {type(doc).__name__}; {owner} takes langchain_core "
                    "Document objects"
                )
        ids = [
            [clean_text(doc.id)] if isinstance(doc.id, str) and doc.id else [] for doc in documents
        ]
        found = self._annotator.annotate(document_passages(documents), ids)
        out = []
        for doc, triples in zip(documents, found, strict=True):
            copy = detached_copy(doc)  # nested metadata must not be shared either
            if triples is not None:
                copy.metadata[METADATA_KEY] = self._annotator.encode(triples)
            out.append(copy)
        return out

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> list[Document]:
        """:meth:`transform_documents` in a worker thread (extraction and SQLite block)."""
        return await asyncio.to_thread(self.transform_documents, documents, **kwargs)
