"""The answer generator: a short answer from the evidence, and the LM's confidence in it.

BeliefRAG's ``answer_generator_v1`` (appendix C.5): answer from the documents, and give
the best short answer even when they lack it (so the answerability the controller
calibrates is "the generator answers right", which may use what the model knows). Greedy
and short. On a local LM the confidence is the mean probability of the generated answer
tokens, read from the same generation's logits (one call, no second pass); a chat model
(:class:`~neocorrag_core.lm.chat.ChatModel`) gives text only (``confidence=None``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from neocorrag_core.lm.chat import ChatModel, chat_model_or_none
from neocorrag_core.lm.generation import greedy_generate_scored
from neocorrag_core.lm.prompt_budget import Clip, PromptTooLongError
from neocorrag_core.models import LazyModels
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int

from .components import DraftAnswer, Usage
from .verifier import PromptBudget, fit_local_prompt, no_clip, numbered_documents

logger = logging.getLogger(__name__)

ANSWER_PROMPT_VERSION = "answer-v2"
"""Identifies the prompt below in run metadata; bump on any change."""

SYSTEM_PROMPT = "You answer questions from documents."
# The instruction comes first and the question last, in the eval reader's words: with the
# instruction after the question the bundled 0.5B answers in sentences, not short answers.
INSTRUCTION = (
    "Answer the question using the documents below. Reply with the answer only: a short "
    "phrase such as a name, a place, a date, a number, or yes/no. No explanation. If the "
    "documents do not contain the answer, give your best guess anyway."
)
MAX_ANSWER_CHARS = 200

_LABEL = re.compile(r"^\s*(?:final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


def answer_messages(question: str, passages: Sequence[Passage], clip: Clip) -> list[dict[str, str]]:
    """The answer generator's chat: documents, the question, then the instruction."""
    documents = numbered_documents(passages, clip) or ["(none)"]
    user = "\n".join(
        [INSTRUCTION, "", "Documents:", *documents, "", f"Question: {clip(question, 'question')}"]
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def clean_answer(text: str) -> str:
    """The short answer in a reply: its first non-empty line, without an ``Answer:`` label,
    surrounding quotes or a final period, cut to 200 characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = _LABEL.sub("", line).strip()
    for _ in range(2):  # '"Stanley".' and 'Stanley.' alike
        if line.endswith(".") and not line.endswith(".."):
            line = line[:-1].rstrip()
        line = line.strip("\"'`*").strip()
    return line[:MAX_ANSWER_CHARS]


def mean_probability(probabilities: Sequence[float]) -> float:
    """The mean of token probabilities, in ``[0, 1]``; 0.0 for an empty answer (nothing was
    said, so nothing is believed)."""
    if not probabilities:
        return 0.0
    return min(max(sum(probabilities) / len(probabilities), 0.0), 1.0)


class LMAnswerGenerator:
    """Short answers from the evidence, on a local LM or a chat model.

    Args:
        lm: a local LM spec for :func:`~neocorrag_core.models.resolve_lm` (``None`` = the
            bundled default) or a :class:`~neocorrag_core.lm.chat.ChatModel` (a LangChain
            or LlamaIndex LLM wrapped by its adapter's ``as_chat_model``).
        models: share the lazily loaded models of another engine (overrides a local ``lm``).
        budget: passages shown and token budgets of the prompt.
        max_new_tokens: generation budget of the answer (greedy).
    """

    def __init__(
        self,
        lm: Any = None,
        *,
        models: LazyModels | None = None,
        budget: PromptBudget | None = None,
        max_new_tokens: int = 24,
    ) -> None:
        check_int("LMAnswerGenerator", "max_new_tokens", max_new_tokens, minimum=1)
        self.budget = budget or PromptBudget()
        self.max_new_tokens = max_new_tokens
        self.chat_model: ChatModel | None = chat_model_or_none("LMAnswerGenerator", lm)
        self.models = None if self.chat_model is not None else (models or LazyModels(lm=lm))

    def answer(self, question: str, passages: Sequence[Passage]) -> tuple[DraftAnswer, Usage]:
        """A short answer to ``question`` from the first ``budget.max_passages`` passages."""
        shown = list(passages)[: self.budget.max_passages]
        if self.chat_model is not None:
            messages = answer_messages(question, shown, self.budget.clipper(None))
            reply = self.chat_model.ask(messages, None)
            text = clean_answer(str(reply.value))
            return DraftAnswer(text, None), Usage(reply.prompt_tokens, reply.generated_tokens)
        assert self.models is not None
        lm = self.models.lm
        with lm.lock:  # the tokenizer too is used by one caller at a time
            clip = self.budget.clipper(lm.tokenizer)
            pieces = [
                replace(p, text=clip(p.text, "passage"), title=clip(p.title, "title"))
                for p in shown
            ]
            cut_question = clip(question, "question")
            try:
                prompt, _ = fit_local_prompt(
                    lm,
                    lambda n: answer_messages(cut_question, pieces[:n], no_clip),
                    len(pieces),
                    self.budget,
                    self.max_new_tokens,
                )
            except PromptTooLongError as err:
                logger.warning("answer: skipped the LM (%s); no draft answer", err)
                return DraftAnswer("", 0.0), Usage()
            tokens, probabilities = greedy_generate_scored(lm, prompt, self.max_new_tokens)
        text = clean_answer(lm.tokenizer.decode(tokens, skip_special_tokens=True))
        confidence = mean_probability(probabilities) if text else 0.0
        return DraftAnswer(text, confidence), Usage(len(prompt), len(tokens))


__all__ = [
    "ANSWER_PROMPT_VERSION",
    "LMAnswerGenerator",
    "answer_messages",
    "clean_answer",
    "mean_probability",
]
