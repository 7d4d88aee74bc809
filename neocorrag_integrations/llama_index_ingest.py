"""LlamaIndex ingestion: :class:`TripleExtractorTransform`, triples for each node as you index.

Add it to the pipeline that builds your index, after the splitter and before the embedding::

    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from neocorrag_integrations.llama_index import TripleExtractorTransform

    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=256), TripleExtractorTransform(), embed_model]
    )
    nodes = pipeline.run(documents=documents, num_workers=4)

Each node gets ``metadata["triples"]`` (hidden from the LLM and the embedding), and the
triples are written to the triple store keyed by the node's text, so the query-time
postprocessor reads them from the node or, if a vector store lost the metadata, from the
store: nothing is extracted at query time. Place it after the splitter: a splitter copies a
document's metadata to its chunks, so triples added before it would follow every chunk.

Needs ``llama-index-core`` (``pip install 'neocorrag[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Literal

try:
    from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
    from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.llama_index_ingest needs llama-index-core: "
        "pip install 'neocorrag[llamaindex]'"
    ) from err

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.ingest import MEMORY_STORE, MetadataFormat, TripleAnnotator
from neocorrag_core.triples.precomputed import METADATA_KEY
from neocorrag_core.triples.store import CacheStats
from neocorrag_core.types import Passage
from neocorrag_core.validation import clean_text
from neocorrag_integrations._common import Fields, check_sequence, read_fields, to_passages

__all__ = ["TripleExtractorTransform", "node_fields", "node_passages"]


def node_fields(node: BaseNode, score: float | None = None) -> Fields:
    """What neocorrag reads of a LlamaIndex node (id, its text without metadata, metadata):
    the one reading the postprocessor, the EviReform retriever and this transform share, so
    the store key written at ingestion (the hash of title and text) is the one read at
    query time."""
    return node.node_id, node.get_content(metadata_mode=MetadataMode.NONE), node.metadata, score


def node_passages(nodes: Sequence[BaseNode]) -> list[Passage]:
    """The engine passages of ``nodes``, exactly as the postprocessor builds them."""
    return to_passages([read_fields(i, node_fields(n)) for i, n in enumerate(nodes)])


class TripleExtractorTransform(TransformComponent):
    """A LlamaIndex ``TransformComponent`` that adds each node's triples to its metadata.

    Nodes that already have ``metadata["triples"]`` are left as they are. For the others,
    the triples come from the triple store when it has the node's text (any earlier
    ingestion or query, under any id) and are otherwise extracted and written to it; the
    node id and its source document's id (``ref_doc_id``) are recorded with them. Nodes are
    updated in place (as LlamaIndex's metadata extractors do) and returned. Text that is
    not valid Unicode (lone surrogates in the text, title or ids) is read, hashed and
    stored with U+FFFD in their place; the node keeps it as given.

    Works with ``IngestionPipeline.run(num_workers=N)``: the transform pickles with its
    settings only; each worker process loads the extractor and opens the store itself, and
    all of them write the one store file (the first writer of a text wins). ``acall`` runs
    the same work in a worker thread, off the event loop.

    Args:
        extractor: a spec (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm"``, ``"llm:<lm>"``)
            or an extractor object (which must pickle for ``num_workers``).
        store: the triple store file; ``None``: the default store (``NEOCORRAG_TRIPLE_STORE``
            / ``NEOCORRAG_CACHE``), the one the query-time adapters read. ``":memory:"`` is
            refused: worker processes could not share it and the query side could not read it.
        metadata_format: ``"list"`` (``[[subject, relation, object], ...]``) or ``"json"``
            (that list as a JSON string, for vector stores with flat metadata).
        batch_size: nodes per extraction batch and store transaction.
        embedder: whose vectors of the node and triple texts are stored beside the triples,
            so queries over these nodes embed only the question: ``None``, the bundled
            MiniLM the postprocessor uses by default; a sentence-transformers name or folder
            (the postprocessor's ``embedder=``); ``False`` for none.
        show_progress: a progress bar over the batches.

    Raises :class:`~neocorrag_core.errors.ConfigError` for a bad setting, and
    :class:`~neocorrag_core.errors.StoreError` when the store cannot be opened or written.
    """

    extractor: Any = Field(
        default="spacy",
        description="Extractor spec ('spacy', 'spacy:<pipeline>', 'llm', 'llm:<lm>') or object.",
    )
    store: str | None = Field(
        default=None, description="Triple store file; None = the default store."
    )
    metadata_format: MetadataFormat = Field(
        default="list", description="'list' of [s, r, o], or 'json' (one string)."
    )
    batch_size: int = Field(default=32, description="Nodes per extraction batch.")
    embedder: str | bool | None = Field(
        default=None,
        description="Whose vectors of the node and triple texts are stored with the triples: "
        "None = the bundled MiniLM, a sentence-transformers name or folder, False = none.",
    )
    show_progress: bool = Field(default=False, description="Show a progress bar.")

    _annotator: TripleAnnotator = PrivateAttr()

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
        owner = type(self).__name__
        if isinstance(store, str) and store.strip() == MEMORY_STORE:
            raise ConfigError(
                f"{owner}: store=':memory:' cannot be used: ingestion worker processes cannot "
                "share it and the query-time adapters cannot read it; pass a file path, or "
                "None for the default store"
            )
        # The annotator checks every setting (ConfigError) before pydantic sees them.
        annotator = TripleAnnotator(
            extractor,
            store,
            metadata_format=metadata_format,
            batch_size=batch_size,
            embedder=embedder,
            show_progress=show_progress,
            owner=owner,
        )
        fields: dict[str, Any] = {
            "extractor": extractor,
            "store": annotator.store_path,
            "metadata_format": metadata_format,
            "batch_size": batch_size,
            "embedder": embedder,
            "show_progress": show_progress,
        }
        super().__init__(**fields)
        self._annotator = annotator

    @classmethod
    def class_name(cls) -> str:
        """The serialization name LlamaIndex records for this component."""
        return "NeocorragTripleExtractorTransform"

    @property
    def stats(self) -> CacheStats:
        """Store hits and extractions of this process so far (a worker's stay there)."""
        return self._annotator.stats

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        """Add ``metadata["triples"]`` to each node that lacks it; returns the nodes."""
        nodes = check_sequence(type(self).__name__, "nodes", nodes, "llama_index nodes")
        for i, node in enumerate(nodes):
            if not isinstance(node, BaseNode):
                raise InputError(
                    f"nodes[{i}] is a {type(node).__name__}; TripleExtractorTransform takes "
                    "llama_index nodes (BaseNode), e.g. the output of a node parser"
                )
        ids = [_document_ids(node) for node in nodes]
        found = self._annotator.annotate(node_passages(nodes), ids)
        for node, triples in zip(nodes, found, strict=True):
            if triples is None:
                continue  # had metadata["triples"]: the user's, kept
            node.metadata[METADATA_KEY] = self._annotator.encode(triples)
            # New lists: a splitter may share one list object between sibling nodes.
            for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
                keys = getattr(node, attr)
                if METADATA_KEY not in keys:
                    setattr(node, attr, [*keys, METADATA_KEY])
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        """:meth:`__call__` in a worker thread (extraction and SQLite would block the loop)."""
        return await asyncio.to_thread(self.__call__, nodes, **kwargs)

    # Pickle like a plain pydantic model: LlamaIndex's BaseComponent drops any field that
    # does not pickle (with a warning) and rebuilds from the rest, which would silently
    # swap an unpicklable extractor for the default one. Here the annotator either pickles
    # (small: no model, no connection) or raises a TypeError that names the fix.
    def __getstate__(self) -> dict[Any, Any]:
        self._annotator.check_picklable()  # before pickle trips over the extractor field
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)


def _document_ids(node: BaseNode) -> list[str]:
    """The ids a node is known by: its own, and its source document's (lone surrogates
    replaced, as in the passage ids: :func:`~neocorrag_core.validation.clean_text`)."""
    ref = node.ref_doc_id
    ids = [node.node_id] if ref is None or ref == node.node_id else [node.node_id, ref]
    return [clean_text(doc_id) for doc_id in ids]
