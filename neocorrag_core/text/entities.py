"""The matching key of a name: :func:`normalize_entity`, and :func:`normalization_memo`.

One key for "the same entity" everywhere: the evidence graph's nodes (NeocorRAG), the links
and focus between passages, EviReform's and BeliefRAG's entity matching, and the triple
store's stored entity keys. It lives below all of them so that the store's keys do not
depend on a system's graph module (it was ``chains/graph.py``'s; that import path still
works).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A run of combining diacritical marks (U+0300-U+036F) on a Basic Latin..Latin Extended-B base.
_LATIN_ACCENTS = re.compile("(?<=[A-Za-z\u00c0-\u024f])[\u0300-\u036f]+")
# Stripped from both ends of a name. str.strip, not a regex: "[...]+$" tried at every offset
# of a long run of these characters is quadratic (". " * 16000 took 19 s), and passage texts
# and questions are normalized too, not only short entity names.
_EDGE_CHARS = " \"'`“”‘’.,;:!?()[]{}"


def _fold_latin_accents(text: str) -> str:
    """``text`` without the accents on Latin letters ("Aschenbrödel" -> "Aschenbrodel").

    Questions and passages spell the same name with and without diacritics (MuSiQue asks
    about "Aschenbrodel", the passage is titled "Aschenbrödel"). Only combining diacritics
    right after a Latin letter go: in Devanagari or Arabic the marks are part of the word.
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", _LATIN_ACCENTS.sub("", unicodedata.normalize("NFD", text)))


_MEMO: ContextVar[dict[tuple[str, bool], str] | None] = ContextVar(
    "neocorrag_normalize_memo", default=None
)


@contextmanager
def normalization_memo() -> Iterator[None]:
    """Remember :func:`normalize_entity`'s keys for the length of one call (this thread or
    task only): a call's graph, links, focus and entity matching normalize the same few
    hundred names over a thousand times. Outside such a block nothing is remembered."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def normalize_entity(name: str, *, fold_accents: bool = True) -> str:
    """Matching key of an entity: NFKC, Latin accents folded, case-folded, collapsed spaces,
    outer punctuation stripped.

    Only used to decide which mentions are the same node; the surface form is kept
    for display and for the chain text. ``fold_accents=False`` is the key before accents
    were folded, which the triple store's stored entity keys still use. Memoised inside a
    :func:`normalization_memo` block (the miner opens one per call).
    """
    memo = _MEMO.get()
    if memo is None:
        return _normalized(name, fold_accents)
    key = (name, fold_accents)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _normalized(name, fold_accents)
    return found


def _normalized(name: str, fold_accents: bool) -> str:
    text = unicodedata.normalize("NFKC", name)
    if fold_accents:
        text = _fold_latin_accents(text)
    text = " ".join(text.split())  # the only whitespace left is single inner spaces
    return text.strip(_EDGE_CHARS).casefold()


__all__ = ["normalization_memo", "normalize_entity"]
