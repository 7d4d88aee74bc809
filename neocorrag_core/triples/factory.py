"""Extractors named by a short spec string: the one place that turns ``"spacy"`` into an extractor.

A spec string pickles and prints, so everything that builds an extractor somewhere else
(an ingestion worker, a Ray actor, a process-pool worker, the default triple source, the
CLI) carries the spec and builds the extractor where it runs. Nothing is loaded here:
extractors load their models on first use.

Specs:

* ``"spacy"``: :class:`~neocorrag_core.triples.spacy_extractor.SpacyTripleExtractor` with
  its default pipeline (``en_core_web_sm`` where installed, else the ``spacy`` extra's copy);
* ``"spacy:<pipeline>"``: the same with a named spaCy pipeline or path;
* ``"llm"``: :class:`~neocorrag_core.triples.llm_extractor.LLMTripleExtractor` on the
  bundled LM; ``"llm:<lm>"``: on an LM preset, folder or hub id (as ``resolve_lm`` reads it).

An object that already is a :class:`~neocorrag_core.triples.extractor.TripleExtractor`
is returned as it is.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.triples.extractor import TripleExtractor

DEFAULT_EXTRACTOR = "spacy"
EXTRACTOR_KINDS = ("spacy", "llm")


def make_extractor(spec: str | TripleExtractor | None = None) -> TripleExtractor:
    """The extractor ``spec`` names (see the module docstring); ``None`` means ``"spacy"``.

    Raises :class:`~neocorrag_core.errors.ConfigError` for an unknown spec. A missing
    optional dependency is reported when the extractor first loads its model, as
    :class:`~neocorrag_core.errors.MissingDependencyError` naming the extra to install.
    """
    if spec is None:
        spec = DEFAULT_EXTRACTOR
    if not isinstance(spec, str):
        if isinstance(spec, TripleExtractor):
            return spec
        raise ConfigError(
            f"extractor must be a spec string ({', '.join(repr(k) for k in EXTRACTOR_KINDS)}, "
            f"optionally with ':<model>') or a TripleExtractor, got {type(spec).__name__}"
        )
    kind, _, arg = spec.strip().partition(":")
    kind, arg = kind.strip().casefold(), arg.strip()
    if kind == "spacy":
        from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

        return SpacyTripleExtractor(arg or None)
    if kind == "llm":
        from neocorrag_core.triples.llm_extractor import LLMTripleExtractor

        return LLMTripleExtractor(arg or None)
    raise ConfigError(
        f"unknown extractor {spec!r}: use one of {', '.join(repr(k) for k in EXTRACTOR_KINDS)}, "
        "optionally followed by ':<model>' (e.g. 'spacy:en_core_web_trf')"
    )


def extractor_spec(extractor: Any) -> str | None:
    """A spec string that rebuilds ``extractor`` elsewhere, or ``None`` if there is none
    (a custom extractor, or one with non-default settings): then the object itself must
    be sent (pickled) to where it runs."""
    if isinstance(extractor, str):
        return extractor
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

    if type(extractor) is SpacyTripleExtractor:
        fresh = SpacyTripleExtractor(extractor.model_name)
        same = (extractor.batch_size, extractor.max_words, extractor.use_title) == (
            fresh.batch_size,
            fresh.max_words,
            fresh.use_title,
        )
        return f"spacy:{extractor.model_name}" if same else None
    return None


def spacy_available() -> bool:
    """Whether spaCy and one of the default English pipelines are installed (the ``spacy``
    extra), without importing either."""
    from neocorrag_core.triples.spacy_extractor import PREFERRED_MODELS

    if importlib.util.find_spec("spacy") is None:
        return False
    return any(importlib.util.find_spec(name) is not None for name in PREFERRED_MODELS)
