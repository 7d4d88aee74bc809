"""Stage c: residual queries for what the selected evidence leaves unresolved.

The LM writes them from the question and the evidence (or says the evidence is
sufficient); its output is parsed line by line and validated, never trusted. The
no-LM fallback searches for *bridge entities*: names the evidence introduces that
the question does not mention, which is where the next hop usually starts.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from neocorrag_core.lm.prompt_budget import Clip, PieceKind
from neocorrag_core.text.capitals import capitalized_spans, question_spans
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.text.relations import FUNCTION_WORDS
from neocorrag_core.types import Passage

from .types import Proposition

RESIDUAL_INSTRUCTION = (
    "Some evidence for a question has been found. Write up to {n} short search queries, one "
    "per line, for the information that is still missing. Each query must name an entity "
    "from the evidence that the question does not name. Do not repeat the question. If the "
    "evidence already answers the question, reply SUFFICIENT."
)
# One worked example: the 0.5B LM otherwise tends to copy the question as its "query".
EXAMPLE_QUERIES = ("Jane Roe birthplace", "Jane Roe early life")
RESIDUAL_EXAMPLE = (
    "Question: Where was the director of Film X born?\n"
    "Evidence:\n- Film X directed by Jane Roe\n"
    "Queries:\n" + "\n".join(EXAMPLE_QUERIES)
)

# A number bullet ends in "." or ")": "2001: A Space Odyssey composer" is a query, not item 2001.
_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+\s*[.)]|\(\d+\))\s*")
_LABEL = re.compile(r"^\s*(?:search\s+)?query\s*\d*\s*[:\-]\s*", re.IGNORECASE)
_WORD = re.compile(r"\w+", re.UNICODE)
_SUFFICIENT = re.compile(r"^\W*sufficient\b", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedQueries:
    """Valid queries found in the LM's reply, and whether it declared the evidence sufficient."""

    queries: list[str]
    sufficient: bool = False
    rejected: int = 0


def residual_prompt_text(
    question: str, evidence: Sequence[str], max_queries: int = 3, clip: Clip | None = None
) -> str:
    """The instruction, one worked example, the question and the evidence found so far
    (with ``clip``: the question and each fact cut to their token budgets)."""

    def piece(text: str, kind: PieceKind) -> str:
        return " ".join(text.split()) if clip is None else clip(text, kind)

    lines = [RESIDUAL_INSTRUCTION.format(n=max_queries), "", "Example:", RESIDUAL_EXAMPLE, ""]
    lines += [f"Question: {piece(question, 'question')}", "Evidence:"]
    lines += [f"- {piece(text, 'passage')}" for text in evidence] or ["- (none)"]
    lines += ["Queries:"]
    return "\n".join(lines)


_MONTHS = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
}
_DATE_WORDS = _MONTHS | {"ad", "bc", "bce", "ce", "st", "nd", "rd", "th", "s", "c", "circa"}


def match_key(text: str, *, fold_case: bool = True) -> str:
    """Comparison key: accents removed, case-folded (unless ``fold_case=False``: a name as
    written) words joined by single spaces.

    ASCII text is its own NFKD form and has no combining marks, so it skips both steps;
    other text drops its marks through one ``str.translate`` (the rankings call this on
    every passage text of the pool)."""
    plain = text
    if not text.isascii():
        plain = unicodedata.normalize("NFKD", text).translate(_NO_COMBINING)
    return " ".join(_WORD.findall(plain.casefold() if fold_case else plain))


class _CombiningMarks(dict[int, int | None]):
    """A ``str.translate`` table that deletes combining characters and keeps the others,
    filled as characters are met (a code point is looked up in :mod:`unicodedata` once),
    up to :data:`_MAX_CODE_POINTS` of them (text made of more distinct characters gets
    the rest looked up each time)."""

    def __missing__(self, code: int) -> int | None:
        kept = None if unicodedata.combining(chr(code)) else code
        if len(self) < _MAX_CODE_POINTS:
            self[code] = kept
        return kept


_MAX_CODE_POINTS = 16384


_NO_COMBINING = _CombiningMarks()


def is_date_or_number(key: str) -> bool:
    """``1991``, ``17 january 1969``, ``1990s``, ``january 2001``: no use as a search."""
    words = key.split()
    if not any(map(str.isdigit, key)):
        return False
    return all(w in _DATE_WORDS or w.rstrip("sthndr").isdigit() or w.isdigit() for w in words)


def is_name_key(key: str) -> bool:
    """Whether a :func:`match_key` can stand for a name: not empty, not a number or a date,
    not only function words ("It", "The Of")."""
    words = key.split()
    return (
        bool(words) and not is_date_or_number(key) and not all(w in FUNCTION_WORDS for w in words)
    )


def parse_residual_queries(
    reply: str,
    question: str,
    evidence: Sequence[str] = (),
    *,
    asked: Sequence[str] = (),
    bridges: Sequence[str] = (),
    max_queries: int = 3,
    max_words: int = 16,
) -> ParsedQueries:
    """Queries from the LM's reply: one per line, bullets and labels stripped.

    A line is skipped when it is empty, longer than ``max_words`` words, a query already
    ``asked``, a restatement of the question or of an evidence fact (at least 3/4 of the
    words of the two together are shared), or, when the evidence has ``bridges``
    (entities the question does not name), when it names none of them: a residual query
    searches from what the evidence revealed, and the small LM otherwise tends to ask
    for the first hop again. A reply
    that says SUFFICIENT and holds no valid query means no residual search; the small LM
    often writes SUFFICIENT and then queries anyway, and then the queries count.
    """
    banned = {
        match_key(question),
        *(match_key(e) for e in evidence),
        *(match_key(a) for a in asked),
    }
    banned.update(match_key(line) for line in EXAMPLE_QUERIES)  # copied from the prompt's example
    facts = [set(match_key(e).split()) for e in (question, *evidence)]
    bridge_words = [match_key(b).split() for b in bridges]
    bridge_words = [words for words in bridge_words if words]
    queries: list[str] = []
    rejected = 0
    said_sufficient = False
    for raw in reply.splitlines():
        line = _LABEL.sub("", _BULLET.sub("", raw)).strip().strip("\"'`*").strip()
        if not line:
            continue
        if _SUFFICIENT.match(line):
            said_sufficient = True
            continue
        key = match_key(line)
        if (
            not key
            or len(key.split()) > max_words
            or key in banned
            or _restates(key, facts)
            or (bridge_words and not _names_any(key, bridge_words))
        ):
            rejected += 1
            continue
        banned.add(key)
        queries.append(line)
        if len(queries) == max_queries:
            break
    return ParsedQueries(queries, sufficient=said_sufficient and not queries, rejected=rejected)


def _restates(key: str, facts: Sequence[set[str]], overlap: float = 0.75) -> bool:
    """Whether a query mostly repeats one known fact (word-set Jaccard >= ``overlap``);
    the small LM often "asks" for exactly what the evidence already says."""
    words = set(key.split())
    return any(len(words & fact) >= overlap * len(words | fact) for fact in facts if fact)


def _looks_like_a_name(surface: str) -> bool:
    """Names start with a capital (``Jane Roe``, ``iPhone`` as one word); descriptions
    (``one of the largest grocery chains``) and quantities (``1,231 retail locations``)
    make poor searches."""
    words = surface.split()
    if not words:
        return False
    first = words[0]
    if first[0].isdigit() and len(words) > 1:
        return False
    if len(words) == 1:
        return any(ch.isupper() for ch in first)
    return not first.islower()


def _names_any(key: str, entities: Sequence[list[str]]) -> bool:
    """Whether the query names one of the entities: it holds at least 2/3 of the entity's
    words, a repeated word as often as the entity repeats it ("Duran Duran" is named by
    "Duran Duran is a band", not by "Roberto Duran")."""
    words = key.split()
    distinct = set(words)
    for entity in entities:
        if len(set(entity)) == len(entity):  # the common case: no word repeats
            found = len(distinct.intersection(entity))
        else:
            have = Counter(words)
            found = sum(min(have[w], n) for w, n in Counter(entity).items())
        if found * 3 >= 2 * len(entity):
            return True
    return False


def names_entity(text: str, entity: str) -> bool:
    """Whether ``text`` names ``entity``: it holds at least 2/3 of the entity's words
    (accents and case ignored)."""
    words = match_key(entity).split()
    return bool(words) and _names_any(match_key(text), [words])


def fact_bridges(question: str, prop: Proposition) -> list[str]:
    """The entities of one fact, in order, that could start the next hop: names (not
    descriptions, numbers or dates) that the question does not already name."""
    question_key = f" {match_key(question)} "
    question_words = set(question_key.split())
    found: list[str] = []
    for surface in prop.surface_entities:
        key = match_key(surface)
        if not key or is_date_or_number(key):
            continue
        if f" {key} " in question_key or set(key.split()) <= question_words:
            continue
        if _looks_like_a_name(surface):
            found.append(" ".join(surface.split()))
    return found


def bridge_entities(
    question: str, evidence: Sequence[Proposition], *, interleave: bool = False
) -> list[str]:
    """Entities of the evidence that the question does not already name, in evidence order;
    with ``interleave``, the first bridge of every fact, then the second of every fact, and
    so on, so that two facts (one per compared entity, say) each get a search before either
    gets two.

    Numbers and dates are skipped: a year links everything and finds nothing.
    """
    per_fact = [fact_bridges(question, prop) for prop in evidence]
    if interleave:
        depth = max((len(b) for b in per_fact), default=0)
        ordered = [b[i] for i in range(depth) for b in per_fact if i < len(b)]
    else:
        ordered = [name for bridges in per_fact for name in bridges]
    found: list[str] = []
    seen: set[str] = set()
    for name in ordered:
        norm = normalize_entity(name)
        if norm not in seen:
            seen.add(norm)
            found.append(name)
    return found


def bridge_entity_queries(
    question: str,
    evidence: Sequence[Proposition],
    *,
    asked: Sequence[str] = (),
    max_queries: int = 3,
    interleave: bool = False,
) -> list[str]:
    """Up to ``max_queries`` bridge entities (:func:`bridge_entities`), each one a query,
    skipping any that an ``asked`` query already names."""
    done = [f" {match_key(a)} " for a in asked]
    fresh = [
        e
        for e in bridge_entities(question, evidence, interleave=interleave)
        if not any(f" {match_key(e)} " in d for d in done)
    ]
    return fresh[: max(0, max_queries)]


def unfound_question_entities(
    question: str, passages: Sequence[Passage], *, max_entities: int = 1
) -> list[str]:
    """Up to ``max_entities`` names the question gives (its capitalised spans, in order)
    that no passage of ``passages`` names, in its title or its text.

    A multi-hop chain starts from the question's own entity; when the first search
    returned nothing about it ("the place that employed Said Ashour" finds pages about
    university rankings), no bridge of the evidence can lead there. Skipped: numbers and
    dates, spans of function words only, and a single word that opens the question
    ("According to ..."), which is capitalised as the sentence's first word."""
    if max_entities <= 0:
        return []
    first_word = match_key(question).split()[:1]
    found: list[str] = []
    for span in question_spans(question):
        key = match_key(span)
        if not is_name_key(key) or key.split() == first_word:
            continue
        if any(names_entity(p.title, span) or names_entity(p.text, span) for p in passages):
            continue
        found.append(" ".join(span.split()))
        if len(found) == max_entities:
            break
    return found


def names_in_lower_case(question: str, passages: Sequence[Passage]) -> list[str]:
    """The passages' names (titles, capitalised spans of their texts) that a question typed
    without capitals names ("where was the director of film x born?" names "Film X"), in
    passage order. They stand in for the question's own names, so that a stray passage
    saying "directors" still cannot supply the bridge; function words, numbers and dates
    never count; a question typed ALL IN CAPITALS is matched the same way. (Only for a
    question whose case marks no names: one whose names are all
    lower-case words, "When did the state whose official sport is jousting ...", would
    take any capitalised "Sport" of a passage as its name.)"""
    question_key = f" {match_key(question)} "
    found: dict[str, str] = {}
    for passage in passages:
        for name in (passage.title, *capitalized_spans(passage.text)):
            key = match_key(name)
            if is_name_key(key) and f" {key} " in question_key:
                found.setdefault(key, " ".join(name.split()))
    return list(found.values())


__all__ = [
    "RESIDUAL_EXAMPLE",
    "RESIDUAL_INSTRUCTION",
    "ParsedQueries",
    "bridge_entities",
    "bridge_entity_queries",
    "fact_bridges",
    "is_date_or_number",
    "is_name_key",
    "match_key",
    "names_entity",
    "names_in_lower_case",
    "parse_residual_queries",
    "residual_prompt_text",
    "unfound_question_entities",
]
