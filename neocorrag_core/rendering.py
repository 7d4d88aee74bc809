"""How passages and chains become text: one place for every reader, embedder and index.

A passage is rendered ``title: text`` (the text alone when it has no title) wherever it is
embedded, indexed, shown to a filter or read by the answering model, so a change of format
happens here once. Depends on nothing else in the package: it reads ``title``/``text`` and
``text`` attributes, so ``types`` can use it without an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol


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


CHAIN_BLOCK_HEADER = "Evidence chains:"


def render_passage(passage: TitledText) -> str:
    """A passage as it is embedded, indexed and read: ``title: text`` (or the text alone)."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


def render_passages(passages: Iterable[TitledText]) -> list[str]:
    """:func:`render_passage` of each passage, in order."""
    return [render_passage(p) for p in passages]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by a capital or a digit (a plain
    rule: it may split after an abbreviation, which only shortens a focus a little)."""
    flat = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(flat) if s] if flat else []


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


def render_chains(chains: Sequence[HasText]) -> str:
    """A numbered block of chain texts for the answering model; '' when there are none."""
    if not chains:
        return ""
    lines = [CHAIN_BLOCK_HEADER]
    lines.extend(f"{i}. {chain.text}" for i, chain in enumerate(chains, start=1))
    return "\n".join(lines)


def render_context(
    passages: Sequence[TitledText], chain_block: str = "", *, chains_first: bool = True
) -> str:
    """The answer-ready context: the chain block and the passages, blank-line separated."""
    blocks = render_passages(passages)
    if chain_block:
        blocks = [chain_block, *blocks] if chains_first else [*blocks, chain_block]
    return "\n\n".join(blocks)


__all__ = [
    "CHAIN_BLOCK_HEADER",
    "HasText",
    "TitledText",
    "focus_text",
    "render_chains",
    "render_context",
    "render_passage",
    "render_passages",
    "split_sentences",
]
