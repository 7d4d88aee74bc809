"""Triples at ingestion: what the LangChain and LlamaIndex ingestion transforms share.

Users who build their own index (a LlamaIndex ``IngestionPipeline``, a LangChain
``vector_store.add_documents``) add the transform there: each document gets its triples in
``metadata["triples"]`` before it is embedded and stored, and the triples also go to the
:class:`~neocorrag_core.triples.store.TripleStore`, keyed by content hash, so that the
query-time source finds them even where a vector store drops or flattens metadata.

:class:`TripleAnnotator` is that shared part, framework-free. It holds only an extractor
spec (or a picklable extractor object), a store path and a few settings: it pickles
small, so a LlamaIndex ingestion worker process receives it and loads the extractor's
model and opens the store itself, on first use. Several processes may write one store at
the same time (WAL mode; the first writer of a passage wins).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from neocorrag_core.errors import ConfigError
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.factory import extractor_spec, make_extractor
from neocorrag_core.triples.precomputed import METADATA_KEY, has_metadata_triples
from neocorrag_core.triples.store import (
    CachedTripleSource,
    CacheStats,
    TripleStore,
    default_store_path,
)
from neocorrag_core.triples.vectors import embed_graph_texts
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_bool, check_choice, check_int

if TYPE_CHECKING:
    from neocorrag_core.models.embedder import TextEmbedder

logger = logging.getLogger(__name__)

MetadataFormat = Literal["list", "json"]
METADATA_FORMATS: tuple[str, ...] = get_args(MetadataFormat)
MEMORY_STORE = ":memory:"


def encode_triples(triples: Sequence[Triple], metadata_format: MetadataFormat = "list") -> Any:
    """The ``metadata["triples"]`` value for ``triples``: a list of ``[subject, relation,
    object]``, or with ``metadata_format="json"`` that list as one JSON string (for vector
    stores whose metadata values must be flat, e.g. Chroma).

    :class:`~neocorrag_core.triples.precomputed.MetadataTripleSource` reads both forms.
    """
    rows = [[t.subject, t.relation, t.object] for t in triples]
    return json.dumps(rows, ensure_ascii=False) if metadata_format == "json" else rows


class TripleAnnotator:
    """Gives passages their triples through a store: read it first, extract what it lacks.

    Args:
        extractor: a spec string (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm"``,
            ``"llm:<lm>"``; see :func:`~neocorrag_core.triples.factory.make_extractor`) or
            an extractor object. A spec is what travels to worker processes; an object must
            pickle to travel.
        store: the store file (``None``: :func:`~neocorrag_core.triples.store.default_store_path`,
            resolved now so every worker writes the same file). ``":memory:"`` is a private
            store of this object only; such an annotator cannot be pickled.
        metadata_format: ``"list"`` or ``"json"`` (see :func:`encode_triples`).
        batch_size: passages per extraction batch (and per store transaction).
        embedder: whose vectors of the node and triple texts are stored beside the triples
            (so queries over these documents embed only the question): ``None``, the
            bundled MiniLM the adapters use, or a sentence-transformers name or folder
            (what the query side's ``embedder=`` is); ``False`` stores no vectors. Without
            the bundled model's package the triples are still stored, with one warning.
        show_progress: a progress bar over the batches.
        owner: the name error messages use (the transform built on this annotator).

    Raises :class:`~neocorrag_core.errors.ConfigError` for a bad setting. Nothing is
    loaded or opened here: the store and the extractor's model are opened by the first
    :meth:`annotate`, once per process.
    """

    def __init__(
        self,
        extractor: str | TripleExtractor | None = "spacy",
        store: str | os.PathLike[str] | None = None,
        *,
        metadata_format: MetadataFormat = "list",
        batch_size: int = 32,
        embedder: str | Literal[False] | None = None,
        show_progress: bool = False,
        owner: str = "TripleAnnotator",
    ) -> None:
        check_choice(owner, "metadata_format", metadata_format, METADATA_FORMATS)
        check_int(owner, "batch_size", batch_size, minimum=1)
        check_bool(owner, "show_progress", show_progress)
        if store is not None and not isinstance(store, (str, os.PathLike)):
            raise ConfigError(
                f"{owner}.store must be a file path or None (the default store), got "
                f"{type(store).__name__}"
            )
        if isinstance(store, str) and not store.strip():
            raise ConfigError(f"{owner}.store must be a file path, got an empty string")
        if (
            embedder is not None
            and embedder is not False
            and (not isinstance(embedder, str) or not embedder.strip())
        ):
            raise ConfigError(
                f"{owner}.embedder must be None (the bundled MiniLM), a sentence-transformers "
                f"name or folder, or False (no vectors), got {type(embedder).__name__}"
            )
        try:
            built = make_extractor(extractor)  # a bad spec fails now; nothing loads
        except ConfigError as err:
            raise ConfigError(f"{owner}.extractor: {err}") from None
        # A spec where one exists: a pickled copy carries it instead of the object and
        # rebuilds the extractor where it runs. Here, the object itself is used (a model
        # the caller already loaded is not loaded again).
        self.extractor_spec: str | None = extractor_spec(
            extractor if extractor is not None else built
        )
        self._extractor: TripleExtractor | None = built
        self.store_path = os.fspath(default_store_path() if store is None else store)
        self.metadata_format: MetadataFormat = metadata_format
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.owner = owner
        self.embedder = embedder
        self._source: LoadOnce[CachedTripleSource] = LoadOnce()
        self._embedder: LoadOnce[TextEmbedder | None] = LoadOnce()

    @property
    def extractor(self) -> str | TripleExtractor:
        """The extractor spec, or the extractor object where it has no spec."""
        if self.extractor_spec is not None:
            return self.extractor_spec
        assert self._extractor is not None  # only a copy made from a spec lacks the object
        return self._extractor

    @property
    def in_memory(self) -> bool:
        """Whether the store is a private in-memory one (not shared, not persistent)."""
        return self.store_path == MEMORY_STORE

    def __repr__(self) -> str:
        return f"TripleAnnotator(extractor={self.extractor!r}, store={self.store_path!r})"

    def check_picklable(self) -> None:
        """Raise a ``TypeError`` that names the fix when this annotator cannot be sent to
        another process: an in-memory store, or an extractor object without a spec that
        does not pickle."""
        if self.in_memory:
            raise TypeError(
                f"{self.owner} with store=':memory:' cannot be pickled (a worker process would "
                "get an empty store of its own); pass a file path as store"
            )
        if self.extractor_spec is None and self._extractor is not None:
            try:
                pickle.dumps(self._extractor)
            except Exception as exc:
                raise TypeError(
                    f"{self.owner}: the extractor {self._extractor!r} cannot be pickled ({exc}), "
                    "so it cannot be sent to a worker process; pass a spec string such as "
                    "'spacy' or 'llm' instead, or run without worker processes"
                ) from None

    def __getstate__(self) -> dict[str, Any]:
        self.check_picklable()
        state = self.__dict__.copy()
        state["_source"] = LoadOnce()  # pickles empty: each process opens its own
        state["_embedder"] = LoadOnce()
        if self.extractor_spec is not None:
            state["_extractor"] = None  # rebuilt from the spec where the copy runs
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def source(self) -> CachedTripleSource:
        """The store-backed source (opens the store on first use; the model loads on the
        first passage the store lacks)."""
        return self._source.get(self._open)

    def _open(self) -> CachedTripleSource:
        extractor = self._extractor
        if extractor is None:
            extractor = make_extractor(self.extractor_spec)
        return CachedTripleSource(
            TripleStore(self.store_path), extractor, batch_size=self.batch_size
        )

    def _vector_embedder(self) -> TextEmbedder | None:
        if self.embedder is False:
            return None
        from neocorrag_core.errors import MissingDependencyError
        from neocorrag_core.models import resolve_embedder

        try:
            embedder = resolve_embedder(self.embedder)
        except MissingDependencyError as err:
            if self.embedder is not None:
                raise
            logger.warning(
                "%s: no vectors are stored beside the triples (%s); queries embed each text "
                "once instead, at first sight",
                self.owner,
                err,
            )
            return None
        return embedder if embedder.identity is not None else None

    @property
    def stats(self) -> CacheStats:
        """Store hits and extractions in this process so far (zeros before the first use)."""
        source = self._source.peek()
        return source.stats if source is not None else CacheStats()

    def annotate(
        self,
        passages: Sequence[Passage],
        document_ids: Sequence[Sequence[str]] | None = None,
    ) -> list[list[Triple] | None]:
        """The triples of each passage, or ``None`` for one whose metadata has
        ``"triples"`` already (kept as the user gave it, not extracted again; a ``None``
        value counts as absent, so that passage gets its triples).

        Stored passages are read; the others are extracted and written to the store, one
        batch at a time. ``document_ids[i]`` are the ids under which the framework knows
        passage ``i`` (a node id, its source document's id): they are recorded in the
        store with :meth:`~neocorrag_core.triples.store.TripleStore.link_documents`.

        Raises :class:`~neocorrag_core.errors.StoreError` when the store cannot be opened
        or written.
        """
        if document_ids is not None and len(document_ids) != len(passages):
            raise ValueError(
                f"document_ids has {len(document_ids)} entries for {len(passages)} passages"
            )
        out: list[list[Triple] | None] = [None] * len(passages)
        todo = [i for i, p in enumerate(passages) if not has_metadata_triples(p, METADATA_KEY)]
        if not todo:
            return out
        source = self.source
        starts: Any = range(0, len(todo), self.batch_size)
        if self.show_progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="Triples", unit="batch")
        for start in starts:
            batch = todo[start : start + self.batch_size]
            found = source.triples_for([passages[i] for i in batch])
            for i, triples in zip(batch, found, strict=True):
                out[i] = triples
            embedder = self._embedder.get(self._vector_embedder)
            if embedder is not None and not source.store.read_only:
                chosen = [passages[i] for i in batch]
                embed_graph_texts(embedder, source.store, found, passages=chosen)
            if document_ids is not None and not source.store.read_only:
                pairs = [(doc_id, passages[i]) for i in batch for doc_id in document_ids[i]]
                if pairs:
                    source.store.link_documents(pairs)
        return out

    def encode(self, triples: Sequence[Triple]) -> Any:
        """:func:`encode_triples` in this annotator's ``metadata_format``."""
        return encode_triples(triples, self.metadata_format)


__all__ = ["METADATA_FORMATS", "MetadataFormat", "TripleAnnotator", "encode_triples"]
