"""Caps on what one call reads, extracts and embeds, applied before the work they bound.

The chain search has its own caps (``MinerTuning.max_expansions`` and the rest), but they
start after every node and triple of the retrieved passages has been embedded. A call over
documents nobody curated (a 20,000-triple metadata list, two thousand documents, a 35 KB
list of names) must not cost minutes: these caps bound the stages before the search. Each
is far above what the dev sets' documents need (``docs/robustness.md`` shows the numbers),
so they never change a normal call's result; when one binds, ``result.notes`` says which.

What a cap leaves out is left out of this call only: nothing is stored for it, so a
later call (or ``neocorrag index``) can still do that work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TypeVar

from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_int

T = TypeVar("T")

MAX_TITLE_CHARS = 1000
"""Characters of a title the matching rules and the extractors read (its beginning)."""


@dataclass(frozen=True)
class WorkLimits:
    """How much one call may read, extract and embed before the chain search.

    Args:
        max_triples_per_passage: triples read of one passage (its first ones).
        max_triples: triples read over all passages of a call; the lowest-ranked passages
            lose theirs first.
        max_new_texts: node and triple texts embedded in one call that no cache holds
            (each needs the embedder); triples needing more are left out, lowest-ranked
            passages first. Stored vectors are free.
        max_new_texts_per_document: the same, per document the call reads: a call over
            five documents embeds at most 500 new texts (a normal passage needs about 30,
            the densest of the dev sets about 250), so a few documents of comma lists cost
            what a few documents cost; the smaller of the two caps binds.
        max_extract_chars: characters of one passage a query-time extraction reads (the
            passage's beginning).
        max_extract_chars_per_call: characters extracted at query time over one call; the
            passages past it get no triples this call (they are not stored as empty).
        max_extract_chars_per_document: the same budget per document the call asks
            about: five documents extract at most 25,000 characters (the first passage is
            always read); the smaller of the two budgets binds.
        max_documents: documents one call reads, in rank order; the lower-ranked ones
            are not read (the miner drops them, unread, and keeps the top-ranked as
            always). It also bounds the link rules' passage pairs (its square).
        max_title_chars: characters of each title the matching rules read (the title's
            beginning); the documents handed back keep their whole title.
        max_query_chars: characters of the question the miner reads (its beginning; the
            embedder reads at most 256 tokens of it anyway); ``result.query`` is the whole.
    """

    max_triples_per_passage: int = 300
    max_triples: int = 4000
    max_new_texts: int = 2500
    max_new_texts_per_document: int = 100
    max_extract_chars: int = 20_000
    max_extract_chars_per_call: int = 100_000
    max_extract_chars_per_document: int = 5_000
    max_documents: int = 50
    max_title_chars: int = MAX_TITLE_CHARS
    max_query_chars: int = 8000

    def __post_init__(self) -> None:
        for name in (
            "max_triples_per_passage",
            "max_triples",
            "max_new_texts",
            "max_new_texts_per_document",
            "max_extract_chars",
            "max_extract_chars_per_call",
            "max_extract_chars_per_document",
            "max_documents",
            "max_title_chars",
            "max_query_chars",
        ):
            check_int("WorkLimits", name, getattr(self, name), minimum=1)


DEFAULT_LIMITS = WorkLimits()


def check_limits(limits: WorkLimits | None, owner: str) -> WorkLimits:
    """``limits``, or the defaults for ``None``; a :class:`~neocorrag_core.errors.ConfigError`
    naming ``owner`` for anything else."""
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, WorkLimits):
        from neocorrag_core.errors import ConfigError

        raise ConfigError(f"{owner}: limits must be a WorkLimits, got {type(limits).__name__}")
    return limits


_NOTES: ContextVar[list[str] | None] = ContextVar("neocorrag_call_notes", default=None)


@contextmanager
def collecting_notes() -> Iterator[list[str]]:
    """Collect the notes :func:`note` records in this context (this thread or task only)."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def note(text: str) -> None:
    """Record ``text`` for the call in progress (a no-op outside :func:`collecting_notes`)."""
    notes = _NOTES.get()
    if notes is not None and text not in notes:
        notes.append(text)


def cap_triples(per_passage: Sequence[Sequence[Triple]], limits: WorkLimits) -> list[list[Triple]]:
    """``per_passage`` within :attr:`WorkLimits.max_triples_per_passage` and
    :attr:`WorkLimits.max_triples` (passages in rank order keep theirs first); records a
    note for each cap that binds."""
    out: list[list[Triple]] = []
    cut_each = cut_total = 0
    room = limits.max_triples
    for triples in per_passage:
        kept = list(triples[: limits.max_triples_per_passage])
        cut_each += len(triples) - len(kept)
        if len(kept) > room:
            cut_total += len(kept) - room
            kept = kept[:room]
        room -= len(kept)
        out.append(kept)
    if cut_each:
        note(
            f"work cap: {cut_each} triple(s) past {limits.max_triples_per_passage} per "
            "passage were not read (WorkLimits.max_triples_per_passage)"
        )
    if cut_total:
        note(
            f"work cap: {cut_total} triple(s) of the lowest-ranked passages past "
            f"{limits.max_triples} per call were not read (WorkLimits.max_triples)"
        )
    return out


def cap_documents(passages: Sequence[T], limits: WorkLimits) -> list[T]:
    """The first :attr:`WorkLimits.max_documents` of ``passages`` (rank order; passages or
    an adapter's documents); records a note when the cap binds."""
    if len(passages) <= limits.max_documents:
        return list(passages)
    note(
        f"work cap: {len(passages) - limits.max_documents} lowest-ranked document(s) past "
        f"{limits.max_documents} per call were not read (WorkLimits.max_documents)"
    )
    return list(passages[: limits.max_documents])


def cap_query(query: str, limits: WorkLimits) -> str:
    """The first :attr:`WorkLimits.max_query_chars` characters of ``query``; records a note
    when the cap binds."""
    if len(query) <= limits.max_query_chars:
        return query
    note(
        f"work cap: the question's {len(query)} characters were read to their first "
        f"{limits.max_query_chars} (WorkLimits.max_query_chars)"
    )
    return query[: limits.max_query_chars]


def cap_titles(passages: Sequence[Passage], limits: WorkLimits) -> list[Passage]:
    """``passages`` as the matching rules read them: a title longer than
    :attr:`WorkLimits.max_title_chars` is cut to its beginning (a copy of that passage;
    the others are the same objects). Records a note when the cap binds. The triple
    store's keys and what a caller gets back use the whole title: see
    :func:`whole_titles`."""
    cap = limits.max_title_chars
    long = sum(len(p.title) > cap for p in passages)
    if not long:
        return list(passages)
    note(
        f"work cap: {long} title(s) longer than {cap} characters were matched on their "
        f"first {cap} (WorkLimits.max_title_chars)"
    )
    return [replace(p, title=p.title[:cap]) if len(p.title) > cap else p for p in passages]


def whole_titles(passages: Sequence[Passage], originals: Mapping[str, Passage]) -> list[Passage]:
    """``passages`` as their callers gave them (``originals``: passage id -> the passage as
    given) where :func:`cap_titles` cut their titles: the given passage itself, or, for a
    passage whose text a later stage cut too, that passage with the whole title. Other
    passages are returned as they are."""
    out = []
    for passage in passages:
        given = originals.get(passage.id)
        if given is not None and given.title != passage.title:
            passage = given if given.text == passage.text else replace(passage, title=given.title)
        out.append(passage)
    return out


def new_text_budget(limits: WorkLimits, documents: int) -> tuple[int, str]:
    """How many new texts a call over ``documents`` documents may embed, and the name of
    the cap that sets it."""
    scaled = limits.max_new_texts_per_document * max(1, documents)
    if scaled < limits.max_new_texts:
        return scaled, "WorkLimits.max_new_texts_per_document"
    return limits.max_new_texts, "WorkLimits.max_new_texts"


def within_new_texts(
    per_passage: Sequence[Sequence[Triple]],
    missing: set[str],
    limits: WorkLimits,
    texts_of: Callable[[Triple], Sequence[str]],
) -> list[list[Triple]]:
    """``per_passage`` with the triples left out whose texts would take the call past its
    budget of new texts to embed (:func:`new_text_budget`: ``max_new_texts``, or
    ``max_new_texts_per_document`` per passage; ``missing``: the texts no cache holds;
    ``texts_of``: the texts a triple needs). Passages in rank order go first, so a cut falls
    on the lowest-ranked ones; records a note when it binds."""
    budget_size, cap = new_text_budget(limits, len(per_passage))
    if len(missing) <= budget_size:
        return [list(triples) for triples in per_passage]
    budget: set[str] = set()
    out: list[list[Triple]] = []
    cut = 0
    for triples in per_passage:
        kept = []
        for triple in triples:
            new = {t for t in texts_of(triple) if t in missing and t not in budget}
            if len(budget) + len(new) > budget_size:
                cut += 1
                continue
            budget |= new
            kept.append(triple)
        out.append(kept)
    note(
        f"work cap: {cut} triple(s) of the lowest-ranked passages were left out, since "
        f"embedding them would pass {budget_size} new texts in one call ({cap}); what was "
        "embedded is kept, so a later call reads more"
    )
    return out


__all__ = [
    "DEFAULT_LIMITS",
    "MAX_TITLE_CHARS",
    "WorkLimits",
    "cap_documents",
    "cap_query",
    "cap_titles",
    "cap_triples",
    "check_limits",
    "collecting_notes",
    "new_text_budget",
    "note",
    "whole_titles",
    "within_new_texts",
]
