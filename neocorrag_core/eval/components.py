"""What a run loads before it computes anything: the embedder and LMs, the triple source,
the retriever over its pool, the methods (or their replayed contexts) and the reader.
Built only when something is left to compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neocorrag_core.chains.config import miner_settings
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.datasets import QAExample, load_corpus, load_qa
from neocorrag_core.eval.protocol import BuildContext, Method
from neocorrag_core.eval.reader import NO_READER, ChatReader, NoReader, Reader
from neocorrag_core.eval.records import ResultCache
from neocorrag_core.eval.registry import build_methods
from neocorrag_core.eval.replay import ReplayedMethod, replay_source
from neocorrag_core.eval.retrieval import Retriever, SearchRetriever, pooled_corpus
from neocorrag_core.eval.settings import EvalSettings


@dataclass
class Components:
    """The loaded models and objects a run needs (built only when work is left)."""

    retriever: Retriever | SearchRetriever
    methods: dict[str, Method]
    reader: Reader | ChatReader | NoReader


def build_components(
    settings: EvalSettings,
    examples: Sequence[QAExample],
    *,
    embedder: Any = None,
    lm: Any = None,
    reader_lm: Any = None,
    triple_source: Any = None,
    source: ResultCache | None = None,
    search: Any = None,
) -> Components:
    """Resolve models (the given objects win over the settings' specs) and build methods.

    With ``contexts_from``, ``source`` is the replayed run's cache (read again when not
    given). ``search`` (``search(query, k) -> passages``: the user's own retrieval) replaces
    the built-in retrieval; so does ``settings.collection`` (the user's Chroma collection).
    A ``reader_lm`` that is a :class:`~neocorrag_core.lm.chat.ChatModel` answers through
    :class:`~neocorrag_core.eval.reader.ChatReader`."""
    from neocorrag_core.models import resolve_embedder, resolve_lm

    given_embedder = embedder
    embedder = resolve_embedder(embedder if embedder is not None else settings.embedder)
    config, tuning = miner_settings(changes=settings.miner_overrides)
    lm_spec = lm if lm is not None else settings.lm
    miner = EvidenceChainMiner(
        config,
        tuning=tuning,
        embedder=embedder,
        lm=lm_spec,
        triple_source=triple_source or _triple_source(settings),
        show_progress=True,
    )
    no_reader = settings.reader == NO_READER and reader_lm is None
    if reader_lm is None and not no_reader:
        same = settings.reader == "default" and settings.lm is None and lm is None
        reader_lm = miner.lm if same else resolve_lm(settings.reader)
    corpus = None
    if settings.pool == "corpus":
        # The pool is every usable question of the file, whatever --limit says, so a run
        # resumed with a larger --limit (or replayed with a smaller one) searches the same pool.
        corpus = (
            load_corpus(settings.corpus)
            if settings.corpus
            else pooled_corpus(load_qa(settings.data)[0])
        )
    from neocorrag_core.models.bundled import default_cache_dir

    # A pooled corpus's vectors are kept between runs when the embedder is named by a
    # spec (the bundled default or a model name), which identifies its weights.
    named = given_embedder is None
    retriever: Retriever | SearchRetriever
    if search is None and settings.collection is not None:
        from neocorrag_core.eval.vector_store import collection_search

        assert settings.vector_store is not None  # EvalSettings checks it
        search = collection_search(Path(settings.vector_store), settings.collection, embedder)
    if search is not None:
        retriever = SearchRetriever(search)
    else:
        if settings.pool == "per-question" and examples and not any(e.passages for e in examples):
            raise ValueError(
                f"{settings.data} holds questions without passages: retrieve from your store "
                "(--vector-store DIR --collection NAME, or the Python API's search=) or from a "
                "corpus file (--pool corpus --corpus FILE)"
            )
        retriever = Retriever(
            settings.retriever,  # type: ignore[arg-type]
            embedder=embedder,
            pool=settings.pool,  # type: ignore[arg-type]
            corpus=corpus,
            vector_cache=default_cache_dir() / "eval-vectors" if named else None,
            vector_store=Path(settings.vector_store) if settings.vector_store else None,
        )
    if settings.contexts_from:
        source = source if source is not None else replay_source(settings)
        known = corpus if corpus is not None else pooled_corpus(examples)
        methods: list[Method] = [ReplayedMethod(name, source, known) for name in settings.methods]
    else:
        context = BuildContext(
            miner,
            embeddings_threshold=settings.embeddings_threshold,
            evireform_overrides=dict(settings.evireform_overrides),
            belief_overrides=dict(settings.belief_overrides),
            reader_lm=None if no_reader else reader_lm,
            reader=settings.reader,
            corpus=corpus if corpus is not None else pooled_corpus(examples),
        )
        methods = build_methods(settings.methods, context)
    from neocorrag_core.lm.chat import ChatModel

    reader: Reader | ChatReader | NoReader
    if no_reader:
        reader = NoReader()
    elif isinstance(reader_lm, ChatModel):
        reader = ChatReader(reader_lm)
    else:
        reader = Reader(resolve_lm(reader_lm), max_new_tokens=settings.max_new_tokens)
    return Components(retriever, {m.name: m for m in methods}, reader)


def _triple_source(settings: EvalSettings) -> Any:
    """The run's triple source: ``--triples``; over the user's own collection, without it,
    what the adapters use (metadata triples, else the triple store, else spaCy)."""
    if settings.collection is not None and settings.triples is None:
        from neocorrag_core.triples.default import DefaultTripleSource

        return DefaultTripleSource()
    return resolve_triple_source(settings.triples, settings.out)


def resolve_triple_source(spec: str | None, out: str) -> Any:
    """``None`` (passage metadata), a HippoRAG OpenIE file, or ``"spacy"`` (cached extractor)."""
    from neocorrag_core.triples import MetadataTripleSource, OpenIETripleSource

    if spec is None or spec == "none":
        return MetadataTripleSource()
    if spec == "spacy":
        try:
            from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
            from neocorrag_core.triples.store import CachedTripleSource, TripleStore
        except ImportError as exc:
            raise ImportError(f"--triples spacy needs the spaCy extractor ({exc})") from exc
        store = TripleStore(Path(out) / "triples.sqlite")
        return CachedTripleSource(store, SpacyTripleExtractor())
    return OpenIETripleSource.from_file(spec)
