"""Names by their capitals: the capitalised spans of a text, and whether it is typed ALL IN
CAPITALS (then its case marks no names).

NeocorRAG's query entities, EviReform's propositions, residual queries and ranking, and
BeliefRAG's query writer all read names this way; the rules lived in
``chains/query_entities.py`` (those import paths still work) and sit here, below the three
systems, so that none of them imports another for them.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[\w][\w'’.\-&]*", re.UNICODE)
STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or but is was are were be been being
    what which who whom whose when where why how that this these those it its as did do does
    than then there their they he she his her him them we you your i me my our us not no
    same also both either neither any all each other into onto about after before during
    over under between same much many more most one first second city county country""".split()
)
"""Words that never start a name at the head of a question, nor make an entity alone
(:func:`~neocorrag_core.chains.query_entities.ngram_entities`)."""


_POSSESSIVE_ENDS = ("'s", "’s")


def word_tokens(text: str) -> list[str]:
    """The words (and numbers) of ``text``, a possessive "'s" and trailing dots and
    apostrophes removed ("Love's" -> "Love", "Inc." -> "Inc")."""
    tokens = (t[:-2] if t.endswith(_POSSESSIVE_ENDS) else t for t in _TOKEN.findall(text))
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
    return upper and len(word_tokens(text)) > 1


def capitalized_spans(query: str) -> list[str]:
    """Runs of capitalized words and numbers ("Van Hook Township", "1962"), in order."""
    spans: list[str] = []
    current: list[str] = []
    for i, token in enumerate(word_tokens(query)):
        starts_upper = token[:1].isupper() or token[:1].isdigit()
        joiner = token.casefold() in {"of", "de", "the", "van", "von", "and"} and bool(current)
        if (starts_upper and not (i == 0 and token.casefold() in STOPWORDS)) or joiner:
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


__all__ = ["STOPWORDS", "all_capitals", "capitalized_spans", "question_spans", "word_tokens"]
