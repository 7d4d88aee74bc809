"""How passages and chains become text: one place for every reader, embedder and index.

A passage is rendered ``title: text`` (the text alone when it has no title) wherever it is
embedded, indexed, shown to a filter or read by the answering model, so a change of format
happens here once. Depends on nothing else in the package: it reads ``title``/``text`` and
``text`` attributes, so ``types`` can use it without an import cycle.
"""

from __future__ import annotations

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
    "render_chains",
    "render_context",
    "render_passage",
    "render_passages",
]
