"""The evidence verifier: one structured call per step that judges the current evidence.

In the spirit of BeliefRAG's ``verifier_v1`` (appendix C.2): the model sees the question,
the draft answer and the passages, numbered ``[1]..[n]`` (ids are never shown, so the
model cannot echo one wrongly), and judges support, conflict, uncertainty and the
evidence gap, naming the passages to drop and the fact still missing.

The reply is a small JSON object of categories, which a 0.5B model answers far more
reliably than free probabilities::

    {"support": "high|medium|low|none", "conflict": "yes|no", "confident": "yes|no",
     "missing": "yes|no", "drop": [1, 3], "missing_fact": "<= 20 words"}

mapped to numbers by :data:`SUPPORT_SCORES`, :data:`CONFLICT_SCORES`,
:data:`UNCERTAINTY_SCORES` and :data:`GAP_SCORES` (unfitted priors; the answerability
calibrator fitted over them decides what they are worth). ``missing_fact`` comes last so
that output cut by the token budget still carries every judgment.

On a local LM every token is constrained by the reply's JSON schema (Outlines); with a
chat model (:class:`~neocorrag_core.lm.chat.ChatModel`) the schema's object where it gives
one, else the JSON in its text. In every case the reply is validated (types, categories,
ranges, drop numbers within ``1..n``); an invalid reply becomes :data:`NEUTRAL_REPLY` with
a warning, never an exception.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from neocorrag_core.lm.chat import ChatModel, chat_model_or_none
from neocorrag_core.lm.generation import chat_ids
from neocorrag_core.lm.prompt_budget import (
    DEFAULT_PASSAGE_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    DEFAULT_QUESTION_TOKENS,
    DEFAULT_TITLE_TOKENS,
    ELLIPSIS,
    Clip,
    PieceKind,
    PromptTooLongError,
    TokenClipper,
    fit_prompt,
    prompt_limit,
)
from neocorrag_core.lm.structured import (
    CHARS_PER_TOKEN,
    LocalJSONGenerator,
    as_plain_data,
    parse_json_object,
)
from neocorrag_core.models import LazyModels
from neocorrag_core.once import LoadOnce
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_bool, check_int

from .components import Usage, VerifierReply

logger = logging.getLogger(__name__)

VERIFIER_PROMPT_VERSION = "verifier-v1"
"""Identifies the prompt, schema and mapping below in run metadata; bump on any change."""

SUPPORT_SCORES: Mapping[str, float] = {"high": 0.9, "medium": 0.65, "low": 0.35, "none": 0.1}
"""``support`` category -> support diagnostic."""
CONFLICT_SCORES: Mapping[str, float] = {"yes": 0.85, "no": 0.1}
"""``conflict`` category -> conflict diagnostic."""
UNCERTAINTY_SCORES: Mapping[str, float] = {"yes": 0.2, "no": 0.75}
"""``confident`` (is the draft answer right?) category -> uncertainty diagnostic."""
GAP_SCORES: Mapping[str, float] = {"yes": 0.8, "no": 0.15}
"""``missing`` (is a needed fact missing?) category -> gap diagnostic."""
NEUTRAL_REPLY = VerifierReply(support=0.5, conflict=0.5, uncertainty=0.5, gap=0.5)
"""What an invalid or impossible verifier call yields: no information either way (and no
passage dropped, so no correction can follow from it)."""
MAX_MISSING_WORDS = 20

SYSTEM_PROMPT = (
    "You check retrieved documents as evidence for a question. Use only the documents and "
    "the draft answer shown. Reply with one JSON object and nothing else."
)
INSTRUCTION = (
    "Judge the documents as evidence for the question and the draft answer:\n"
    '- "support": how well the documents support an answer to the question: "high", '
    '"medium", "low" or "none".\n'
    '- "conflict": "yes" if documents contradict each other or the draft answer, else "no".\n'
    '- "confident": "yes" if the documents show that the draft answer is right, else "no".\n'
    '- "missing": "yes" if a fact needed to answer the question is not in the documents, '
    'else "no".\n'
    '- "drop": the numbers of the documents that are irrelevant or misleading ([] if none).\n'
    f'- "missing_fact": the fact still needed, in at most {MAX_MISSING_WORDS} words ("" if '
    "none)."
)
_FIELDS = ("support", "conflict", "confident", "missing", "drop", "missing_fact")


# ------------------------------------------------------------------------------------------
# Prompt budgets and the numbered documents (shared by the answer generator and the writer)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptBudget:
    """How much of the evidence a model call shows.

    ``max_passages`` passages at most, each piece cut to its token budget (question, title,
    passage); with a local LM the whole prompt is fitted under ``max_prompt_tokens`` (and
    the context window) by showing fewer passages, from the end.
    """

    max_passages: int = 8
    max_prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    max_question_tokens: int = DEFAULT_QUESTION_TOKENS
    max_title_tokens: int = DEFAULT_TITLE_TOKENS
    max_passage_tokens: int = DEFAULT_PASSAGE_TOKENS

    def __post_init__(self) -> None:
        for name in (
            "max_passages",
            "max_prompt_tokens",
            "max_question_tokens",
            "max_title_tokens",
            "max_passage_tokens",
        ):
            check_int("PromptBudget", name, getattr(self, name), minimum=1)

    def clipper(self, tokenizer: Any) -> Clip:
        """Cuts pieces on the tokenizer's tokens (``None``: a chat model, no tokenizer:
        on characters, :data:`~neocorrag_core.lm.structured.CHARS_PER_TOKEN` per token)."""
        if tokenizer is None:
            return functools.partial(_char_clip, self)
        return TokenClipper(
            tokenizer,
            question=self.max_question_tokens,
            title=self.max_title_tokens,
            passage=self.max_passage_tokens,
        )


def _char_clip(budget: PromptBudget, text: str, kind: PieceKind) -> str:
    tokens = {
        "question": budget.max_question_tokens,
        "title": budget.max_title_tokens,
        "entity": budget.max_title_tokens,
        "passage": budget.max_passage_tokens,
    }[kind]
    limit = tokens * CHARS_PER_TOKEN
    flat = " ".join(text[: limit * 2].split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + ELLIPSIS


def numbered_documents(passages: Sequence[Passage], clip: Clip) -> list[str]:
    """``[1] Title: text`` lines, one per passage, each piece cut by ``clip``."""
    lines = []
    for i, passage in enumerate(passages, start=1):
        title = clip(passage.title, "title") if passage.title.strip() else ""
        text = clip(passage.text, "passage")
        lines.append(f"[{i}] {title}: {text}" if title else f"[{i}] {text}")
    return lines


def no_clip(text: str, kind: PieceKind) -> str:
    """A :data:`~neocorrag_core.lm.prompt_budget.Clip` that keeps ``text`` as it is (for pieces
    already cut once, while a prompt is fitted)."""
    return text


def fit_local_prompt(
    lm: Any,
    build: Callable[[int], list[dict[str, str]]],
    passages: int,
    budget: PromptBudget,
    reserve: int,
) -> tuple[list[int], int]:
    """The chat prompt ``build(n)`` (as safe token ids) with the most passages that fit the
    budget and the context window with ``reserve`` tokens left to generate, and that ``n``;
    :class:`~neocorrag_core.lm.prompt_budget.PromptTooLongError` when none fits."""
    return fit_prompt(
        lambda n: chat_ids(lm.tokenizer, build(n)),
        passages,
        prompt_limit(lm, budget.max_prompt_tokens, reserve),
    )


# ------------------------------------------------------------------------------------------
# The reply: schema, parsing, validation
# ------------------------------------------------------------------------------------------


def verifier_schema(max_passages: int) -> dict[str, Any]:
    """The reply's JSON schema; drop numbers are bounded by ``max_passages`` (the prompt's
    most), and validation bounds them again by the passages actually shown."""
    yes_no = {"enum": ["yes", "no"]}
    return {
        "type": "object",
        "properties": {
            "support": {"enum": list(SUPPORT_SCORES)},
            "conflict": yes_no,
            "confident": yes_no,
            "missing": yes_no,
            "drop": {
                "type": "array",
                "items": {"enum": list(range(1, max_passages + 1))},
                "maxItems": max_passages,
            },
            # Unbounded on purpose (length-bounded strings blow up outlines-core's index on
            # large vocabularies); the token budget bounds it and validation cuts it.
            "missing_fact": {"type": "string"},
        },
        "required": list(_FIELDS),
        "additionalProperties": False,
    }


def verifier_messages(
    question: str, passages: Sequence[Passage], draft_answer: str, clip: Clip
) -> list[dict[str, str]]:
    """The verifier's chat: system prompt, then the documents, question, draft answer and
    the judging instruction (last, nearest the answer, where a small model follows it)."""
    documents = numbered_documents(passages, clip) or ["(none)"]
    draft = clip(draft_answer, "title") if draft_answer.strip() else "(none)"
    user = "\n".join(
        [
            "Documents:",
            *documents,
            "",
            f"Question: {clip(question, 'question')}",
            f"Draft answer: {draft}",
            "",
            INSTRUCTION,
        ]
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


# An escape sequence cut short at the end (a lone backslash, or backslash-u and up to three
# hex digits), after any number of whole escaped backslashes.
_CUT_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\(?:u[0-9a-fA-F]{0,3})?$")
_CUT_KEY = re.compile(r',\s*(?:"[a-z_]*)?$')
"""An object key cut short at the end (``, "missing_f``), or not begun (``,``)."""
_CLOSINGS = ('"}', "}", '""}', ': ""}')
"""What closes a reply cut in the trailing ``missing_fact``: inside its string, after it,
after its colon, right after its key."""


def parse_reply_text(text: str, finished: bool = True) -> dict[str, Any] | None:
    """The reply object in a model's text; output cut in the trailing ``missing_fact``
    (the token budget ran out: in its key, right after it, after its colon, inside its
    string or one of its escape sequences) is closed and kept, so that complete judgments
    are not lost to a cut fact."""
    data = parse_json_object(text)
    if data is not None or finished or not isinstance(text, str):
        return data
    body = text.rstrip()
    if '"missing_fact"' not in body:
        key = _CUT_KEY.search(body)
        if key is None or not '"missing_fact"'.startswith(body[key.start() + 1 :].strip()):
            return None
        data = parse_json_object(body[: key.start()] + "}")
        # Kept only when every field before missing_fact is whole (the cut key is its).
        return data if data is not None and set(_FIELDS[:-1]) <= set(data) else None
    body = _CUT_ESCAPE.sub(r"\1", body)
    for suffix in _CLOSINGS:
        data = parse_json_object(body + suffix)
        if data is not None:
            return data
    return None


def read_reply(data: Any, shown_ids: Sequence[str]) -> tuple[VerifierReply, list[str]]:
    """Validate a reply object against the passages shown (``shown_ids[i]`` was number
    ``i + 1``); returns the reply and what was wrong with it.

    Categories are matched case-insensitively (punctuation ignored); ``true``/``false``
    count as yes/no, and a number in ``[0, 1]`` is taken as the probability itself (a large
    LLM may write one). A missing or invalid judgment makes the whole reply
    :data:`NEUTRAL_REPLY`; drop numbers outside ``1..n`` are discarded one by one. Never
    raises on what the model wrote.
    """
    try:
        return _read_reply(data, shown_ids)
    except (RecursionError, ValueError) as exc:  # a reply nested or sized past reading
        return NEUTRAL_REPLY, [f"the reply cannot be read ({type(exc).__name__})"]


def _read_reply(data: Any, shown_ids: Sequence[str]) -> tuple[VerifierReply, list[str]]:
    data = as_plain_data(data)
    if not isinstance(data, Mapping):
        return NEUTRAL_REPLY, [f"the reply is not a JSON object ({type(data).__name__})"]
    problems: list[str] = []
    support = _score(data.get("support"), SUPPORT_SCORES)
    conflict = _score(data.get("conflict"), CONFLICT_SCORES)
    confident = _score(data.get("confident"), UNCERTAINTY_SCORES, invert_number=True)
    gap = _score(data.get("missing"), GAP_SCORES)
    for name, value in (
        ("support", support),
        ("conflict", conflict),
        ("confident", confident),
        ("missing", gap),
    ):
        if value is None:
            problems.append(f"{name}={_show(data.get(name))} is not a valid judgment")
    if support is None or conflict is None or confident is None or gap is None:
        return NEUTRAL_REPLY, problems
    drop_ids = _drop_ids(data.get("drop"), shown_ids, problems)
    missing_fact = _missing_fact(data.get("missing_fact")) if gap >= 0.5 else ""
    reply = VerifierReply(
        support=support,
        conflict=conflict,
        uncertainty=confident,
        gap=gap,
        missing_fact=missing_fact,
        drop_ids=drop_ids,
    )
    return reply, problems


def _word(value: str) -> str:
    return re.sub(r"[\W_]+", "", value.casefold())


def _score(value: Any, scores: Mapping[str, float], *, invert_number: bool = False) -> float | None:
    if isinstance(value, bool):
        value = "yes" if value else "no"
    if isinstance(value, str):
        return scores.get(_word(value))
    if isinstance(value, (int, float)):
        number = float(value)
        if math.isfinite(number) and 0.0 <= number <= 1.0:
            return 1.0 - number if invert_number else number
    return None


def _drop_ids(value: Any, shown_ids: Sequence[str], problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        problems.append(f"drop={_show(value)} is not a list of document numbers")
        return ()
    picked: list[str] = []
    for item in value:
        number = _document_number(item)
        if number is None or not 1 <= number <= len(shown_ids):
            problems.append(f"drop names {_show(item)}, not a document number 1..{len(shown_ids)}")
            continue
        picked.append(shown_ids[number - 1])
    return tuple(dict.fromkeys(picked))


def _document_number(item: Any) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float) and item.is_integer():
        return int(item)
    if isinstance(item, str):
        # ASCII digits only: str.isdigit() also accepts "²" or "①", which int() refuses.
        match = _DOCUMENT_NUMBER.fullmatch(item.strip().strip("[]").strip())
        return int(match.group()) if match else None
    return None


_DOCUMENT_NUMBER = re.compile(r"[0-9]{1,9}")


_NOTHING = {"", "none", "nothing", "na", "null", "no"}


def _missing_fact(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    words = value.split()
    if _word(" ".join(words)) in _NOTHING:
        return ""
    return " ".join(words[:MAX_MISSING_WORDS])


def _show(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@functools.cache
def _judgment_model() -> Any:
    """The reply as a pydantic model, the schema a chat model is asked for (``None``
    without pydantic: the text answer is parsed instead)."""
    try:
        from typing import Literal

        from pydantic import BaseModel, Field
    except ImportError:
        return None

    class EvidenceJudgment(BaseModel):
        """A judgment of retrieved documents as evidence for a question."""

        support: Literal["high", "medium", "low", "none"] = Field(
            description="how well the documents support an answer to the question"
        )
        conflict: Literal["yes", "no"] = Field(
            description="whether documents contradict each other or the draft answer"
        )
        confident: Literal["yes", "no"] = Field(
            description="whether the documents show that the draft answer is right"
        )
        missing: Literal["yes", "no"] = Field(
            description="whether a fact needed to answer is not in the documents"
        )
        drop: list[int] = Field(
            default_factory=list,
            description="numbers of the documents that are irrelevant or misleading",
        )
        missing_fact: str = Field(
            default="", description=f"the fact still needed, at most {MAX_MISSING_WORDS} words"
        )

    return EvidenceJudgment


# ------------------------------------------------------------------------------------------
# The verifier
# ------------------------------------------------------------------------------------------


@dataclass
class VerifierStats:
    """Counters over the life of a verifier (benchmarks report them)."""

    calls: int = 0
    invalid_replies: int = 0
    """Replies that were not a valid judgment (replaced by the neutral reply)."""
    truncated_replies: int = 0
    """Local outputs cut by ``max_new_tokens`` (kept when the judgments were complete)."""
    discarded_drops: int = 0
    """Drop numbers outside the documents shown."""
    unshown_passages: int = 0
    """Passages left out of prompts to fit the token budget."""


class LMVerifier:
    """BeliefRAG's verifier on a local LM (schema-constrained) or a chat model.

    Args:
        lm: a local LM spec for :func:`~neocorrag_core.models.resolve_lm` (``None`` = the
            bundled default) or a :class:`~neocorrag_core.lm.chat.ChatModel` (a LangChain
            or LlamaIndex LLM wrapped by its adapter's ``as_chat_model``); anything else
            is a :class:`~neocorrag_core.errors.ConfigError`.
        models: share the lazily loaded models of another engine (overrides a local ``lm``).
        budget: passages shown and token budgets of the prompt.
        max_new_tokens: generation budget of the reply (local LM); output cut by it keeps
            its judgments when only ``missing_fact`` was cut.
        constrained: constrain the local LM by the reply schema (Outlines; turn off only to
            measure unconstrained failures).

    The local LM and the schema's processor are created on first use.
    """

    def __init__(
        self,
        lm: Any = None,
        *,
        models: LazyModels | None = None,
        budget: PromptBudget | None = None,
        max_new_tokens: int = 96,
        constrained: bool = True,
    ) -> None:
        check_int("LMVerifier", "max_new_tokens", max_new_tokens, minimum=16)
        check_bool("LMVerifier", "constrained", constrained)
        self.budget = budget or PromptBudget()
        self.max_new_tokens = max_new_tokens
        self.constrained = constrained
        self.stats = VerifierStats()
        self.chat_model: ChatModel | None = chat_model_or_none("LMVerifier", lm)
        self.models = None if self.chat_model is not None else (models or LazyModels(lm=lm))
        self._generator: LoadOnce[LocalJSONGenerator] = LoadOnce()

    @property
    def schema(self) -> dict[str, Any]:
        """The reply's JSON schema (see :func:`verifier_schema`)."""
        return verifier_schema(self.budget.max_passages)

    def verify(
        self, question: str, passages: Sequence[Passage], draft_answer: str
    ) -> tuple[VerifierReply, Usage]:
        """Judge ``passages`` (the first ``budget.max_passages``) as evidence for
        ``question`` and the draft answer; never raises on what the model writes."""
        self.stats.calls += 1
        shown = list(passages)[: self.budget.max_passages]
        if self.chat_model is not None:
            return self._verify_chat(question, shown, draft_answer)
        return self._verify_local(question, shown, draft_answer)

    def _verify_local(
        self, question: str, shown: list[Passage], draft_answer: str
    ) -> tuple[VerifierReply, Usage]:
        assert self.models is not None
        lm = self.models.lm
        generator = self._generator.get(
            lambda: LocalJSONGenerator(lm, constrained=self.constrained)
        )
        with lm.lock:  # the tokenizer too is used by one caller at a time
            clip = self.budget.clipper(lm.tokenizer)
            # Pieces are cut once; fitting the prompt only changes how many passages it shows.
            pieces = [
                replace(p, text=clip(p.text, "passage"), title=clip(p.title, "title"))
                for p in shown
            ]
            cut_question, cut_draft = clip(question, "question"), clip(draft_answer, "title")

            def build(n: int) -> list[dict[str, str]]:
                return verifier_messages(cut_question, pieces[:n], cut_draft, no_clip)

            try:
                prompt, n = fit_local_prompt(
                    lm, build, len(pieces), self.budget, self.max_new_tokens
                )
            except PromptTooLongError as err:
                self.stats.invalid_replies += 1
                logger.warning("verifier: skipped the LM (%s); neutral judgment", err)
                return NEUTRAL_REPLY, Usage()
            [done] = generator.generate_ids([prompt], self.schema, self.max_new_tokens)
        self.stats.unshown_passages += len(pieces) - n
        if not done.finished:
            self.stats.truncated_replies += 1
        data = parse_reply_text(done.text, done.finished)
        reply = self._validated(data, [p.id for p in shown[:n]], done.text)
        return reply, Usage(done.prompt_tokens, done.generated_tokens)

    def _verify_chat(
        self, question: str, shown: list[Passage], draft_answer: str
    ) -> tuple[VerifierReply, Usage]:
        assert self.chat_model is not None
        messages = verifier_messages(question, shown, draft_answer, self.budget.clipper(None))
        answer = self.chat_model.ask(messages, _judgment_model())
        data = answer.value if answer.structured else parse_reply_text(answer.value)
        reply = self._validated(data, [p.id for p in shown], answer.value)
        return reply, Usage(answer.prompt_tokens, answer.generated_tokens)

    def _validated(self, data: Any, shown_ids: list[str], raw: Any) -> VerifierReply:
        reply, problems = read_reply(data, shown_ids)
        if reply is NEUTRAL_REPLY:
            self.stats.invalid_replies += 1
            logger.warning(
                "verifier reply is not a valid judgment (%s); neutral judgment used: %s",
                "; ".join(problems) or "no JSON object",
                _show(raw, 200),
            )
        elif problems:
            self.stats.discarded_drops += sum(p.startswith("drop") for p in problems)
            logger.warning("verifier reply: %s", "; ".join(problems))
        return reply


__all__ = [
    "CONFLICT_SCORES",
    "GAP_SCORES",
    "NEUTRAL_REPLY",
    "SUPPORT_SCORES",
    "UNCERTAINTY_SCORES",
    "VERIFIER_PROMPT_VERSION",
    "LMVerifier",
    "PromptBudget",
    "VerifierStats",
    "fit_local_prompt",
    "no_clip",
    "numbered_documents",
    "parse_reply_text",
    "read_reply",
    "verifier_messages",
    "verifier_schema",
]
