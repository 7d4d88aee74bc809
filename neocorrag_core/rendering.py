"""How passages and chains become text: one place for every reader, embedder and index.

A passage is rendered ``title: text`` (the text alone when it has no title) wherever it is
embedded, indexed, shown to a filter or read by the answering model, so a change of format
happens here once. A chain is linearized ``h - r -> t <- r2 - h2`` (:func:`linearize`), and
the chain block handed to the reader is built by :func:`render_chains`. It reads attributes
(``title``/``text``, ``subject``/``relation``/``object``, ``triples``/``forward``), so it
renders the package's types and look-alikes; a mining result is rendered by
:func:`chain_text` and :func:`result_context`. Rendering asks the types, never the reverse:
it imports :mod:`neocorrag_core.types` (plain data, which imports no rendering).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Protocol

# The chain formats are plain data (a field of MiningResult); these names stay importable
# from here.
from neocorrag_core.types import CHAIN_FORMATS as CHAIN_FORMATS
from neocorrag_core.types import ChainFormat as ChainFormat
from neocorrag_core.types import MiningResult


class TitledText(Protocol):
    """Anything with a ``title`` and a ``text`` (a :class:`~neocorrag_core.types.Passage`)."""

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


class HasText(Protocol):
    """Anything with a ``text`` (an :class:`~neocorrag_core.types.EvidenceChain`)."""

    @property
    def text(self) -> str: ...


class Fact(Protocol):
    """A ``(subject, relation, object)`` fact (a :class:`~neocorrag_core.types.Triple`)."""

    @property
    def subject(self) -> str: ...

    @property
    def relation(self) -> str: ...

    @property
    def object(self) -> str: ...


CHAIN_BLOCK_HEADER = "Evidence chains:"


def render_passage(passage: TitledText) -> str:
    """A passage as it is embedded, indexed and read: ``title: text`` (or the text alone)."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


def render_passages(passages: Iterable[TitledText]) -> list[str]:
    """:func:`render_passage` of each passage, in order."""
    return [render_passage(p) for p in passages]


def flatten(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` with each whitespace run made one space and its ends stripped, cut to its
    first ``max_chars`` characters; and whether that cut dropped anything.

    The cut counts characters of the flattened text, never of the raw one: text extracted
    from PDF or HTML can hold thousands of layout spaces, and a raw cut would spend the
    whole allowance on them and drop the fact after them. Only as much of ``text`` is read
    as the allowance needs (whitespace runs read through), so a megabyte of prose costs no
    more than a passage.
    """
    limit = max(0, max_chars)
    size = max(1, limit)
    while True:
        # The flattened form of a prefix is a prefix of the flattened text.
        flat = " ".join(text[:size].split())
        if len(flat) > limit or size >= len(text):
            break
        size *= 2  # whitespace took up the slice: read on (amortized, at most len(text))
    if len(flat) <= limit:
        return flat, False
    return flat[:limit].rstrip(), True


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by a capital or a digit (a plain
    rule: it may split after an abbreviation, which only shortens a focus a little)."""
    flat = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(flat) if s] if flat else []


_FACT_SPLIT = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\bJr\.)(?<!\bSt\.)(?<!\bDr\.)\s+")
_LEAD_END = re.compile(r"(?<=[.!?])\s+")
FACT_SENTENCE_CHARS = 200
"""Length of a sentence used as a fact (EviReform's sentence propositions, a passage's lead)."""


def fact_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that EviReform and BeliefRAG read as facts: whitespace
    collapsed, cut after ``.``, ``!`` or ``?`` but not after an initial ("José A.
    Ferreyra") or a common abbreviation. A fact's text is the sentence's first
    :data:`FACT_SENTENCE_CHARS` characters (:func:`fact_texts`)."""
    body = " ".join(text.split())
    return [s for s in _FACT_SPLIT.split(body) if s] if body else []


def fact_texts(text: str) -> list[str]:
    """:func:`fact_sentences` as the texts a fact is embedded as (cut to
    :data:`FACT_SENTENCE_CHARS`): what the ingestion computes vectors for, so that a query
    embeds none of them."""
    return [s[:FACT_SENTENCE_CHARS] for s in fact_sentences(text)]


def lead_fact(title: str, text: str) -> str:
    """A passage without triples as one fact: ``"<title>: <first sentence>"``."""
    body = " ".join(text.split())
    lead = _LEAD_END.split(body, maxsplit=1)[0][:FACT_SENTENCE_CHARS]
    title = " ".join(title.split())
    return f"{title}: {lead}" if title and lead else title or lead


def focus_text(text: str, names: Iterable[str], max_chars: int) -> str:
    """The sentences of ``text`` that mention one of ``names`` (case-insensitive), in order,
    or its first sentence when none does; cut to ``max_chars``.

    What an LM needs to judge a fact is the sentence stating it, not the whole passage:
    this keeps a prompt's passages to the sentences their candidate triples come from.
    """
    wanted = [n.casefold() for n in names if n and n.strip()]
    sentences = split_sentences(text)
    chosen = [s for s in sentences if any(n in s.casefold() for n in wanted)]
    body = " ".join(chosen or sentences[:1])
    return body[: max(0, max_chars)]


def linearize(triples: Sequence[Fact], forward: Sequence[bool]) -> str:
    """Chain text: ``h - r -> t - r2 -> t2``; a triple walked backwards reads ``t <- r - h``.

    Each triple keeps its own direction in the text, as the design requires.
    """
    if not triples:
        return ""
    first, first_forward = triples[0], forward[0]
    parts = [first.subject if first_forward else first.object]
    for triple, is_forward in zip(triples, forward, strict=True):
        if is_forward:
            parts.append(f" - {triple.relation} -> {triple.object}")
        else:
            parts.append(f" <- {triple.relation} - {triple.subject}")
    return "".join(parts)


def _new_steps(chain: HasText, stated: set[tuple[str, str, str]]) -> str:
    """The parts of ``chain`` whose facts are not in ``stated``, each a linearized run of
    consecutive new steps starting at the node it shares with what came before, joined by
    ``"; "``; '' when every fact was stated. Adds the chain's facts to ``stated``.

    A chain without its walk directions (``forward``) is shown whole, unless an earlier
    line showed the same text.
    """
    triples: Sequence[Fact] = getattr(chain, "triples", ())
    forward: Sequence[bool] = getattr(chain, "forward", ())
    if not triples or len(forward) != len(triples):
        whole = ("", "", chain.text)
        new = whole not in stated
        stated.add(whole)
        return chain.text if new else ""
    keys = [(t.subject, t.relation, t.object) for t in triples]
    fresh = [key not in stated for key in keys] + [False]  # the sentinel ends the last run
    runs: list[str] = []
    start: int | None = None
    for i, is_new in enumerate(fresh):
        if is_new and start is None:
            start = i
        elif not is_new and start is not None:
            runs.append(linearize(triples[start:i], forward[start:i]))
            start = None
    stated.update(keys)
    return "; ".join(runs)


def render_chains(
    chains: Sequence[HasText],
    *,
    chain_format: ChainFormat = "full",
    kept_ids: Collection[str] = (),
    max_lines: int | None = None,
) -> str:
    """A numbered block of chains for the answering model; '' when there are none.

    ``"full"`` writes every chain's text. ``"compact"`` writes each fact once: a chain's
    line holds only the steps no earlier line stated (from the node it shares with them),
    and a chain whose every step was stated gets no line. Chains found by one search
    share their first hops, so the full block repeats them on every line (five chains
    of ``Johnnycake - located in -> McDowell County - located in -> West Virginia <- ...``
    that differ in their last hop); compact keeps the same facts in about a third fewer
    tokens. ``"linking"`` is compact without the chains that one passage of ``kept_ids``
    (the passages the reader gets) states whole: such a chain only repeats a passage the
    reader reads anyway, while a chain that crosses passages tells it how they connect and
    one with a fact of a dropped passage tells it something it would not see; '' when no
    chain is left. The best-scored chain gets no exception: stated whole by one passage, it
    too only repeats what the reader reads.
    Lines keep the chain's number in every format, so chain numbers in document metadata
    still point at the right line. ``"none"``: no block ('').

    ``max_lines`` caps the block at its first lines (those of the best-scored chains the
    format shows); ``None`` shows them all.
    """
    if chain_format not in CHAIN_FORMATS:
        raise ValueError(f"chain_format must be one of {CHAIN_FORMATS}, got {chain_format!r}")
    if max_lines is not None and (
        isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 1
    ):
        raise ValueError(f"max_lines must be None or an int >= 1, got {max_lines!r}")
    if not chains or chain_format == "none":
        return ""
    kept = frozenset(kept_ids)
    lines = [CHAIN_BLOCK_HEADER]
    stated: set[tuple[str, str, str]] = set()
    for i, chain in enumerate(chains, start=1):
        if chain_format == "linking" and _within_one_passage(chain, kept):
            continue
        if max_lines is not None and len(lines) > max_lines:
            break
        body = chain.text if chain_format == "full" else _new_steps(chain, stated)
        if body:
            lines.append(f"{i}. {body}")
    return "\n".join(lines) if len(lines) > 1 else ""


def _within_one_passage(chain: HasText, passage_ids: frozenset[str]) -> bool:
    """Whether one of ``passage_ids`` supplied every fact of ``chain`` (facts without
    ``source_ids``, or a chain without ``triples``, never are)."""
    triples: Sequence[Fact] = getattr(chain, "triples", ())
    common = set(passage_ids)
    for triple in triples:
        common &= set(getattr(triple, "source_ids", ()))
        if not common:
            return False
    return bool(triples)


def render_context(
    passages: Sequence[TitledText], chain_block: str = "", *, chains_first: bool = True
) -> str:
    """The answer-ready context: the chain block and the passages, blank-line separated."""
    blocks = render_passages(passages)
    if chain_block:
        blocks = [chain_block, *blocks] if chains_first else [*blocks, chain_block]
    return "\n\n".join(blocks)


def chain_text(result: MiningResult) -> str:
    """A mining result's chains as the short block for the answering model ('' when none):
    :func:`render_chains` in the result's ``chain_format``, at most its ``max_chain_lines``
    lines (``"linking"`` leaves out the chains one kept passage states whole)."""
    return render_chains(
        result.chains,
        chain_format=result.chain_format,
        kept_ids=[k.passage.id for k in result.kept],
        max_lines=result.max_chain_lines,
    )


def result_context(result: MiningResult, *, chains_first: bool = True) -> str:
    """A mining result's answer-ready context: its chain block (:func:`chain_text`; none by
    default, ``chain_format="none"``) and its kept passages, blank-line separated."""
    return render_context(result.passages, chain_text(result), chains_first=chains_first)


__all__ = [
    "CHAIN_BLOCK_HEADER",
    "CHAIN_FORMATS",
    "ChainFormat",
    "Fact",
    "HasText",
    "TitledText",
    "chain_text",
    "flatten",
    "focus_text",
    "linearize",
    "render_chains",
    "render_context",
    "render_passage",
    "render_passages",
    "result_context",
    "split_sentences",
]
