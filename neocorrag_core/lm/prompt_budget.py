"""Token budgets for every prompt we build: untrusted text is cut on tokens, and a prompt
never passes the model's context window.

A question, a title, a passage or a fact in a prompt comes from users and documents, so its
length is unbounded; an 8,000-character question once made a 2,921-token decoding prompt. Each
piece is therefore cut to a token budget (:class:`TokenClipper`), counted with the same
special-token-free tokenization the prompt uses
(:func:`~neocorrag_core.lm.generation.text_token_ids`), and the whole prompt is fitted under
``min(max_prompt_tokens, context window - reserve)`` by showing fewer passages
(:func:`fit_prompt`); when even no passage fits, the caller takes its no-LM path and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from neocorrag_core.errors import InputError
from neocorrag_core.lm.generation import text_token_ids
from neocorrag_core.rendering import flatten

PieceKind = Literal["question", "title", "passage", "entity"]

DEFAULT_QUESTION_TOKENS = 128
DEFAULT_TITLE_TOKENS = 32
DEFAULT_PASSAGE_TOKENS = 256
DEFAULT_PROMPT_TOKENS = 2048
ELLIPSIS = " …"

# Text is cut to this many characters per allowed token before it is tokenized, so a
# megabyte of input costs no more than a budget's worth of tokenizer work. The characters
# are counted after whitespace is collapsed (a run of layout spaces costs one), and then no
# real tokenizer spends fewer than one token per 32 characters.
_CHARS_PER_TOKEN_BOUND = 32


class PromptTooLongError(InputError):
    """Even the smallest form of a prompt (no passages) exceeds the token limit."""


def clip_to_tokens(tokenizer: Any, text: str, max_tokens: int) -> str:
    """``text`` with collapsed whitespace, cut to at most ``max_tokens`` tokens, the
    ellipsis that marks a cut included (left out when it would leave no room for text).

    Cheap on any input: at most ``32 * max_tokens`` characters are ever tokenized.
    """
    flat, cut_early = flatten(text, max(1, max_tokens) * _CHARS_PER_TOKEN_BOUND)
    if not cut_early and len(flat) <= max_tokens:  # every token covers at least one character
        return flat
    ids = text_token_ids(tokenizer, flat)
    if not cut_early and len(ids) <= max_tokens:
        return flat
    room = max_tokens - len(text_token_ids(tokenizer, ELLIPSIS))
    if room < 1:  # a budget smaller than the ellipsis: the text alone, cut to the budget
        return _decoded_prefix(tokenizer, ids, max(0, max_tokens))
    if len(ids) <= room:  # cut_early, but what was read fits beside the ellipsis
        return flat + ELLIPSIS
    return _decoded_prefix(tokenizer, ids, room) + ELLIPSIS


def _decoded_prefix(tokenizer: Any, ids: list[int], count: int) -> str:
    """The text of the first ``count`` tokens, trailing space stripped."""
    kept = str(tokenizer.decode(ids[:count], clean_up_tokenization_spaces=False))
    # A byte-level BPE may split a character at the cut; drop its undecodable remnant.
    return kept.rstrip("\ufffd").rstrip()


@dataclass(frozen=True)
class TokenClipper:
    """Cuts each kind of prompt piece to its token budget with one tokenizer."""

    tokenizer: Any
    question: int = DEFAULT_QUESTION_TOKENS
    title: int = DEFAULT_TITLE_TOKENS
    passage: int = DEFAULT_PASSAGE_TOKENS

    @classmethod
    def for_config(cls, tokenizer: Any, config: Any) -> TokenClipper:
        """The budgets of a ``MinerConfig`` or ``ReformulationConfig`` (their
        ``max_question_tokens`` / ``max_title_tokens`` / ``max_passage_tokens``)."""
        return cls(
            tokenizer,
            question=config.max_question_tokens,
            title=config.max_title_tokens,
            passage=config.max_passage_tokens,
        )

    def __call__(self, text: str, kind: PieceKind) -> str:
        """``text`` cut to the budget of its ``kind`` (entities share the title budget)."""
        limit = {
            "question": self.question,
            "title": self.title,
            "entity": self.title,
            "passage": self.passage,
        }[kind]
        return clip_to_tokens(self.tokenizer, text, limit)


Clip = Callable[[str, PieceKind], str]
"""What prompt builders take to cut their pieces; ``None`` there means no token budget."""


def context_window(lm: Any) -> int | None:
    """Most tokens the model attends to (its position limit), or ``None`` when unknown."""
    config = getattr(getattr(lm, "model", None), "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(getattr(lm, "tokenizer", None), "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**7:  # tokenizers say 1e30 when they don't know
        return limit
    return None


def prompt_limit(lm: Any, max_prompt_tokens: int, reserve: int) -> int:
    """Tokens a prompt may take: ``max_prompt_tokens``, and never so many that ``reserve``
    more tokens (the candidate scored after it, or the tokens generated) pass the window."""
    window = context_window(lm)
    if window is None:
        return max_prompt_tokens
    return min(max_prompt_tokens, window - reserve)


def fit_prompt(
    build: Callable[[int], list[int]], passages: int, limit: int
) -> tuple[list[int], int]:
    """The prompt ``build(n)`` with the most passages ``n <= passages`` that fits ``limit``
    tokens, and that ``n``; :class:`PromptTooLongError` when not even ``build(0)`` fits."""
    for shown in range(passages, -1, -1):
        ids = build(shown)
        if len(ids) <= limit:
            return ids, shown
    raise PromptTooLongError(
        f"the prompt needs {len(ids)} tokens without any passage, more than the {limit} allowed"
    )


__all__ = [
    "DEFAULT_PASSAGE_TOKENS",
    "DEFAULT_PROMPT_TOKENS",
    "DEFAULT_QUESTION_TOKENS",
    "DEFAULT_TITLE_TOKENS",
    "Clip",
    "PromptTooLongError",
    "TokenClipper",
    "clip_to_tokens",
    "context_window",
    "fit_prompt",
    "prompt_limit",
]
