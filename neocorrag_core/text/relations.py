"""What the question still asks for: its relation words that the evidence has not covered.

"What is the capital of the county that contains Van Hook Township?" with the evidence
"Van Hook Township located in Mountrail County" leaves ``capital`` (and ``contains``)
open. Appended to a bridge entity they make the relation-qualified residual query
"Mountrail County capital contains", which reaches the county's page where the bare
"Mountrail County" also matches every passage that mentions the county. The same words
decide whether another round is needed: once the evidence covers them, the chain is
resolved as far as words can tell.

Pure word rules, no LM: relation words are the question's lower-case content words
(capitalized words are names, and names are what the bridge entity replaces); a word is
covered when an evidence word shares its first five letters or a listed equivalent
("born" covers "birth").

A capitalised word inside a sentence is read as part of a name, the same way: it covers a
relation word by its own first five letters ("Mountrail County" covers "county", "United
States" covers "state") but never through the listed equivalents, so "Neil Young" does not
answer "born", nor "Die Hard" or "Grateful Dead" "died". And the comparatives are answered
one way: a date of birth or an age tells who is "older", but "older" says nothing about
when someone was born.

NeocorRAG's passage focus (which sentences state a relation the question asks about),
EviReform (residual queries, selection, propositions) and BeliefRAG's query writer all use
these rules; they lived in ``evireform/relations.py`` (that import path still works) and sit
in the shared text layer so that NeocorRAG does not import EviReform for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from neocorrag_core.text.capitals import all_capitals

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?", re.UNICODE)
# What may stand between a sentence's end and its first word: spaces, quotes, brackets.
_OPENING = re.compile(r"[\s\"'“”‘’(\[]*")
_SENTENCE_END = re.compile(r"[.!?;:]" + _OPENING.pattern + r"$")

# Function words and question words: never a relation. Kept short and explicit so a
# reader can see why a word was dropped.
FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from by with and or but nor is was are were be been being
    am what which who whom whose when where why how that this these those it its as did do
    does done than then there their they he she his her him them we you your i me my our us
    not no also both either neither any all each other into onto about after before during
    over under between same much many more most one ones has have had having can could will
    would shall should may might must if so such name named called kind type sort known
    place date year time day number
    person people someone something thing things film movie song album book work""".split()
)

# A few surface forms of the same relation that share no five-letter prefix. Used in
# both directions ("birth" is covered by "born", "born" by "birth").
_EQUIVALENT = (
    ("birth", "born", "birthplace"),
    ("death", "died", "dies", "dead", "die"),
    ("married", "spouse", "wife", "husband", "marry", "consort", "widow"),
    ("stepchild", "stepson", "stepdaughter", "stepfather", "stepmother", "stepchildren"),
    ("father", "son", "daughter", "child", "children", "parent"),
    ("mother", "son", "daughter", "child", "children", "parent"),
    ("directed", "director", "direct"),
    ("written", "wrote", "writer", "author"),
    ("located", "location", "situated", "lies"),
    ("capital", "seat"),
    ("founded", "founder", "established"),
    ("released", "release", "premiered"),
)

# One way only: the words on the right answer the relation word on the left, not the
# reverse (a birth date answers "older"; "younger" does not answer "born", and the name
# "Young" must not either).
_ANSWERED_BY = {
    "older": ("born", "birth", "age"),
    "younger": ("born", "birth", "age"),
}

PREFIX = 5
"""Two words with the same first five letters count as one (``director``/``directed``)."""


def _stem(word: str) -> str:
    return word[:PREFIX]


def _group_stems() -> dict[str, frozenset[str]]:
    """Word of :data:`_EQUIVALENT` -> the stems of every group it is in."""
    index: dict[str, frozenset[str]] = {}
    for group in _EQUIVALENT:
        stems = frozenset(_stem(w) for w in group)
        for word in group:
            index[word] = index.get(word, frozenset()) | stems
    return index


_GROUP_STEMS = _group_stems()
"""Looked up once per word of a text: the rules read every word of every sentence of a pool."""


def _equivalents(word: str) -> set[str]:
    """The stems a word of a text stands for: its own and its equivalents'."""
    stems = {_stem(word)}
    stems.update(_GROUP_STEMS.get(word, ()))
    return stems


def _asked(word: str) -> set[str]:
    """The stems that cover a relation word: its equivalents and what answers it."""
    return _equivalents(word) | {_stem(w) for w in _ANSWERED_BY.get(word, ())}


def _words(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(offset, casefolded word, is part of a name)`` for each word of ``text``: a
    capitalised word that does not start a sentence is part of a name (in a text typed
    ALL IN CAPITALS nothing is)."""
    shouting = all_capitals(text)
    previous = 0
    for match in _WORD.finditer(text):
        word, start = match.group(0), match.start()
        # Only the gap since the previous word can end a sentence (linear in the text).
        gap = text[previous:start]
        opens = _SENTENCE_END.search(gap) or (previous == 0 and _OPENING.fullmatch(gap))
        previous = match.end()
        yield start, word.casefold(), not shouting and not word.islower() and not opens


@dataclass(frozen=True)
class Coverage:
    """What a set of texts covers: the stems of their words (with equivalents) and,
    apart, the stems of their names, which cover only by their own letters."""

    stems: frozenset[str]
    names: frozenset[str]

    def covers(self, word: str) -> bool:
        """Whether the texts cover the relation word ``word``."""
        return _stem(word) in self.names or bool(_asked(word) & self.stems)


def relation_words(question: str) -> list[str]:
    """The question's lower-case content words in order, without repeats: what it asks
    about, once the names are set aside. A question typed ALL IN CAPITALS is read as if
    typed in lower case (its names then count too, as in a lower-case question)."""
    if all_capitals(question):
        question = question.lower()
    words: list[str] = []
    for match in _WORD.finditer(question):
        word = match.group(0)
        if not word.islower():
            continue  # a name, or a sentence-initial question word
        key = word.replace("’", "'").split("'")[0]
        if len(key) < 3 or key in FUNCTION_WORDS or key in words:
            continue
        words.append(key)
    return words


def coverage(texts: Iterable[str]) -> Coverage:
    """What the words of ``texts`` cover (see :class:`Coverage`)."""
    stems: set[str] = set()
    names: set[str] = set()
    for text in texts:
        for _, word, name in _words(text):
            if name:
                names.add(_stem(word))
            else:
                stems.update(_equivalents(word))
    return Coverage(frozenset(stems), frozenset(names))


def open_relation_words(
    question: str, evidence: Sequence[str], *, max_words: int | None = None
) -> list[str]:
    """The question's relation words that no evidence text covers, in question order
    (at most ``max_words``; ``None``: all)."""
    covered = coverage(evidence)
    open_words = [w for w in relation_words(question) if not covered.covers(w)]
    return open_words if max_words is None else open_words[: max(0, max_words)]


def covers(text: str, words: Sequence[str]) -> bool:
    """Whether ``text`` covers at least one of ``words`` (prefix or listed equivalent; a
    name inside a sentence by its own letters only)."""
    return relation_position(text, words) >= 0


def relation_position(text: str, words: Sequence[str]) -> int:
    """Character offset of the first word of ``text`` that covers one of ``words``, or -1."""
    wanted: set[str] = set()
    for word in words:
        wanted |= _asked(word)
    own = {_stem(word) for word in words}
    for offset, word, name in _words(text):
        # A name covers by its own letters only, as in Coverage.covers.
        hit = _stem(word) in own if name else bool(_equivalents(word) & wanted)
        if hit:
            return offset
    return -1


def qualify(entity: str, words: Sequence[str]) -> str:
    """``"Mountrail County"`` + ``["capital", "county"]`` -> ``"Mountrail County capital"``;
    words the entity already covers are not repeated."""
    have = coverage([entity])
    extra = [w for w in words if not have.covers(w)]
    return " ".join([" ".join(entity.split()), *extra]).strip()


__all__ = [
    "FUNCTION_WORDS",
    "PREFIX",
    "Coverage",
    "coverage",
    "covers",
    "open_relation_words",
    "qualify",
    "relation_position",
    "relation_words",
]
