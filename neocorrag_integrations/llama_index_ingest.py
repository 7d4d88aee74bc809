"""LlamaIndex ingestion: :class:`TripleExtractorTransform`, triples for each node as you index.

Add it to the pipeline that builds your index, after the splitter and before the embedding::

    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from neocorrag_integrations.llama_index import TripleExtractorTransform

    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=256), TripleExtractorTransform(), embed_model]
    )
    nodes = pipeline.run(documents=documents, num_workers=4)

Each node gets ``metadata["triples"]`` (hidden from the LLM and the embedding), also
written to the triple store under its text, which the query-time postprocessor reads where
a vector store lost the metadata. Place it after the splitter: a splitter copies a
document's metadata to its chunks, so triples added before it would follow every chunk.

Needs ``llama-index-core`` (``pip install 'neocorrag[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

try:
    from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
    from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.llama_index_ingest needs llama-index-core: "
        "pip install 'neocorrag[llamaindex]'"
    ) from err

from neocorrag_core.records.documents import Fields, read_passages
from neocorrag_core.triples.ingest import (
    MetadataFormat,
    TripleAnnotator,
    check_items,
    recorded_ids,
)
from neocorrag_core.triples.precomputed import METADATA_KEY
from neocorrag_core.triples.store import CacheStats
from neocorrag_core.types import Passage

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from neocorrag_core.triples.ingest import IngestSettings

__all__ = ["TripleExtractorTransform", "node_fields", "node_passages"]


def node_fields(node: BaseNode, score: float | None = None) -> Fields:
    """What neocorrag reads of a LlamaIndex node (id, its text without metadata, metadata):
    the one reading the postprocessor, the EviReform retriever and this transform share, so
    the store key written at ingestion (the hash of title and text) is the one read at
    query time."""
    return node.node_id, node.get_content(metadata_mode=MetadataMode.NONE), node.metadata, score


def node_passages(nodes: Sequence[BaseNode]) -> list[Passage]:
    """The engine passages of ``nodes``, exactly as the postprocessor builds them."""
    return read_passages(nodes, lambda _, n: node_fields(n))


class TripleExtractorTransform(TransformComponent):
    """A LlamaIndex ``TransformComponent`` that adds each node's triples to its metadata.

    Nodes that already have ``metadata["triples"]`` are left as they are. For the others,
    the triples come from the triple store when it has the node's text (from any earlier
    ingestion or query) and are otherwise extracted and written to it, with the node id
    and its source document's id (``ref_doc_id``). Nodes are updated in place (as
    LlamaIndex's metadata extractors do) and returned. Text that is not valid Unicode is
    stored with U+FFFD in place of lone surrogates; the node keeps it as given.

    Works with ``IngestionPipeline.run(num_workers=N)``: the transform pickles with its
    settings only; each worker process loads the extractor and opens the store itself, and
    all of them write the one store file (the first writer of a text wins). ``acall`` runs
    in a worker thread, off the event loop.

    Keywords: :class:`~neocorrag_core.triples.ingest.IngestSettings` (``store=":memory:"``
    is a ``ConfigError``).
    """

    # The settings as pydantic fields, for to_dict / from_dict; __init__ sets every one.
    extractor: Any = Field(description="Extractor spec ('spacy', 'llm', ...) or object.")
    store: str = Field(description="Triple store file.")
    metadata_format: MetadataFormat = Field(description="'list' of [s, r, o], or 'json'.")
    batch_size: int = Field(description="Nodes per extraction batch.")
    embedder: str | bool | None = Field(description="Vectors stored: None = MiniLM, False = none.")
    show_progress: bool = Field(description="Show a progress bar.")

    _annotator: TripleAnnotator = PrivateAttr()

    def __init__(self, **settings: Unpack[IngestSettings]) -> None:
        # The annotator checks every setting (ConfigError) before pydantic sees them.
        annotator = TripleAnnotator.from_settings(type(self).__name__, settings, shared=True)
        fields: dict[str, Any] = {
            "extractor": settings.get("extractor", annotator.extractor),  # an object stays one
            "store": annotator.store_path,
            "metadata_format": annotator.metadata_format,
            "batch_size": annotator.batch_size,
            "embedder": annotator.embedder,
            "show_progress": annotator.show_progress,
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
        nodes = check_items(
            type(self).__name__,
            "nodes",
            nodes,
            BaseNode,
            "llama_index nodes",
            "llama_index nodes (BaseNode), e.g. the output of a node parser",
        )
        ids = [recorded_ids(node.node_id, node.ref_doc_id) for node in nodes]
        values = self._annotator.metadata_values(node_passages(nodes), ids)
        for node, value in zip(nodes, values, strict=True):
            if value is None:
                continue  # had metadata["triples"]: the user's, kept
            node.metadata[METADATA_KEY] = value
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
