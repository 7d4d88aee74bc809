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

The transforms' keywords are :class:`IngestSettings`, documented here once;
:meth:`TripleAnnotator.from_settings` checks them. :func:`check_items` and
:func:`recorded_ids` are the rest of what a transform does before it hands the annotator
its passages.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, get_args

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.once import LoadOnce
from neocorrag_core.records.documents import check_sequence
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
from neocorrag_core.validation import check_bool, check_choice, check_int, clean_text

if TYPE_CHECKING:
    from neocorrag_core.models.embedder import TextEmbedder

logger = logging.getLogger(__name__)

MetadataFormat = Literal["list", "json"]
METADATA_FORMATS: tuple[str, ...] = get_args(MetadataFormat)
MEMORY_STORE = ":memory:"


class IngestSettings(TypedDict, total=False):
    """The keywords of both ingestion transforms, LangChain's ``TripleExtractorTransformer``
    and LlamaIndex's ``TripleExtractorTransform`` (each a :class:`TripleAnnotator` setting).
    A bad setting is a :class:`~neocorrag_core.errors.ConfigError`; a store that cannot be
    opened or written is a :class:`~neocorrag_core.errors.StoreError` at the first call."""

    extractor: str | TripleExtractor
    """A spec (``"spacy"``, the default; ``"spacy:<pipeline>"``, ``"llm"``, ``"llm:<lm>"``)
    or an extractor object (which must pickle to reach LlamaIndex worker processes)."""
    store: str | os.PathLike[str] | None
    """The triple store file; ``None`` (default): the default store (``NEOCORRAG_TRIPLE_STORE``
    / ``NEOCORRAG_CACHE``), the one the query-time adapters read. ``":memory:"`` keeps the
    triples in a store private to a LangChain transformer (the metadata still carries them;
    such a transformer cannot be pickled); LlamaIndex refuses it, as worker processes could
    not share it and the query side could not read it."""
    metadata_format: MetadataFormat
    """``"list"`` (default: ``[[subject, relation, object], ...]``) or ``"json"`` (that list as
    one JSON string, for vector stores with flat metadata, e.g. Chroma)."""
    batch_size: int
    """Documents (nodes) per extraction batch and store transaction; default 32."""
    embedder: str | Literal[False] | None
    """Whose vectors of the node and triple texts are stored beside the triples, so queries
    over these documents embed only the question: ``None`` (default), the bundled MiniLM the
    query-time adapters use by default; a sentence-transformers name or folder (their
    ``embedder=``); ``False`` for none."""
    show_progress: bool
    """A progress bar over the batches; default ``False``."""


def check_items(owner: str, name: str, items: Any, cls: type, kind: str, takes: str) -> list[Any]:
    """``items`` as a list, each an instance of ``cls``: an
    :class:`~neocorrag_core.errors.InputError` unless ``items`` is a list or tuple (of
    ``kind``), or naming the first item that is no ``cls`` (``owner`` takes ``takes``)."""
    checked = check_sequence(owner, name, items, kind)
    for i, item in enumerate(checked):
        if not isinstance(item, cls):
            raise InputError(f"{name}[{i}] is a {type(item).__name__}; {owner} takes {takes}")
    return checked


def recorded_ids(*ids: object) -> list[str]:
    """The ids a passage is recorded under in the store (its own, its source document's):
    each of ``ids`` that is a non-empty string, once, with lone surrogates replaced as in
    the passage ids (:func:`~neocorrag_core.validation.clean_text`)."""
    out: list[str] = []
    for doc_id in ids:
        if isinstance(doc_id, str) and doc_id and clean_text(doc_id) not in out:
            out.append(clean_text(doc_id))
    return out


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

    The settings are those of :class:`IngestSettings`, plus ``owner``, the name error
    messages use (the transform built on this annotator). A spec extractor (see
    :func:`~neocorrag_core.triples.factory.make_extractor`) is what travels to worker
    processes; an object must pickle to travel. ``store=None`` is resolved now
    (:func:`~neocorrag_core.triples.store.default_store_path`), so every worker writes the
    same file; with ``":memory:"`` the annotator cannot be pickled. Without the bundled
    embedder's package the triples are still stored, with one warning.

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

    @classmethod
    def from_settings(
        cls, owner: str, settings: Mapping[str, Any], *, shared: bool = False
    ) -> TripleAnnotator:
        """The annotator of the ingestion transform ``owner``, from its keywords
        (:class:`IngestSettings`): an unknown one is a ``TypeError``, a bad value a
        ``ConfigError``. ``shared``: the store must be one that worker processes and the
        query side can open, so ``":memory:"`` is refused."""
        unknown = sorted(set(settings) - set(IngestSettings.__annotations__))
        if unknown:
            raise TypeError(f"{owner}() got unexpected keyword argument(s): {', '.join(unknown)}")
        store = settings.get("store")
        if shared and isinstance(store, str) and store.strip() == MEMORY_STORE:
            raise ConfigError(
                f"{owner}: store=':memory:' cannot be used: ingestion worker processes cannot "
                "share it and the query-time adapters cannot read it; pass a file path, or "
                "None for the default store"
            )
        return cls(**settings, owner=owner)

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

    def metadata_values(
        self, passages: Sequence[Passage], document_ids: Sequence[Sequence[str]] | None = None
    ) -> list[Any]:
        """:meth:`annotate`, each passage's triples as its ``metadata["triples"]`` value
        (:meth:`encode`), or ``None`` for one that keeps the value it has."""
        found = self.annotate(passages, document_ids)
        return [None if triples is None else self.encode(triples) for triples in found]


__all__ = [
    "METADATA_FORMATS",
    "IngestSettings",
    "MetadataFormat",
    "TripleAnnotator",
    "check_items",
    "encode_triples",
    "recorded_ids",
]
