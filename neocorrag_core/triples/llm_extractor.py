"""``LLMTripleExtractor``: two-step (entities, then triples) extraction with an LLM.

Two kinds of LLM are accepted:

* a local Hugging Face causal LM (anything :func:`neocorrag_core.models.resolve_lm`
  takes; ``None`` = the bundled Qwen2.5-Coder-0.5B-Instruct): prompts run in batches
  (left padding, greedy) and every generated token is constrained by an Outlines JSON-schema
  logits processor, so the output always parses;
* a chat model (:class:`~neocorrag_core.lm.chat.ChatModel`; a LangChain chat model or a
  LlamaIndex LLM becomes one through its adapter's ``as_chat_model``, which uses the
  framework's own structured output where it offers one): asked for the step's schema;
  a text answer is parsed and validated, skipping malformed items with a warning.

Model output is only ever read with ``json``; nothing it says is executed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neocorrag_core.lm.chat import ChatModel, chat_model_or_none
from neocorrag_core.lm.prompt_budget import DEFAULT_TITLE_TOKENS, clip_to_tokens
from neocorrag_core.lm.structured import LocalJSONGenerator
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples.base import parse_triple
from neocorrag_core.triples.extractor import clean_triples, truncate_words
from neocorrag_core.triples.prompts import (
    ENTITY_SCHEMA,
    PROMPT_VERSION,
    TRIPLE_SCHEMA,
    entity_messages,
    triple_messages,
)
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_int

logger = logging.getLogger(__name__)

_SCHEMAS = {"entities": ENTITY_SCHEMA, "triples": TRIPLE_SCHEMA}
DEFAULT_MAX_WORDS = 350
DEFAULT_MAX_NEW_TOKENS = 384
# Other values of these two are part of the extractor id: they change the output.


@dataclass
class ExtractionStats:
    """Counters over the life of an extractor (the benchmark reports them)."""

    passages: int = 0
    llm_calls: int = 0
    invalid_outputs: int = 0
    """Outputs that were not valid JSON of the schema (only salvageable items kept)."""
    truncated_outputs: int = 0
    """Outputs cut by ``max_new_tokens``; their complete items are kept."""
    skipped_items: int = 0
    """Entities or triples that did not validate (wrong arity, empty, not strings)."""


class LLMTripleExtractor:
    """HippoRAG-style extraction: named entities first, then triples that use them.

    Args:
        lm: a local LM spec for :func:`~neocorrag_core.models.resolve_lm` (``None`` = the
            bundled default) or a :class:`~neocorrag_core.lm.chat.ChatModel` (a LangChain
            chat model or LlamaIndex LLM wrapped by its adapter's ``as_chat_model``; an
            unwrapped one is a :class:`~neocorrag_core.errors.ConfigError` naming that fix).
        batch_size: prompts per ``generate`` call (local LM only).
        max_new_tokens: token budget of the triple step (the entity step gets half);
            output cut by it keeps its complete items.
        max_words: longer passages are cut to this many words, with a warning.
        constrained: constrain the local LM with Outlines (turn off only to measure
            how often unconstrained output fails to parse).
        name: the LLM's name in the store key (default: derived from ``lm``: the preset's
            model name, a hub id as ``org/name``, a local folder by its last path part, a
            chat model's ``name``; the adapters' wrappers name the framework class and
            model, e.g. ``ChatOpenAI:gpt-4o-mini``).
            Two different local folders with the same last part (``/a/qwen``, ``/b/qwen``)
            share a store key unless you pass distinct names.
        show_progress: a progress bar over batches.

    The store key (:attr:`extractor_id`) is ``llm:<name>``, plus ``,w<N>`` / ``,t<N>`` for a
    non-default ``max_words`` / ``max_new_tokens`` (both change the output). Raises
    :class:`~neocorrag_core.errors.ConfigError` for a bad setting. The model and the Outlines
    index (a few seconds to build for a 150k vocabulary) are created on first use and cached
    on the instance.
    """

    def __init__(
        self,
        lm: Any = None,
        *,
        batch_size: int = 4,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        max_words: int = DEFAULT_MAX_WORDS,
        constrained: bool = True,
        name: str | None = None,
        show_progress: bool = False,
    ) -> None:
        owner = "LLMTripleExtractor"
        check_int(owner, "batch_size", batch_size, minimum=1)
        check_int(owner, "max_new_tokens", max_new_tokens, minimum=8)
        check_int(owner, "max_words", max_words, minimum=1)
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.max_words = max_words
        self.constrained = constrained
        self.show_progress = show_progress
        self.stats = ExtractionStats()
        self._chat = chat_model_or_none(owner, lm)
        self._lm_spec = lm
        self._name = name or _lm_name(lm)
        self._backend: LoadOnce[Any] = LoadOnce()

    @property
    def extractor_id(self) -> str:
        """Cache identity: the LLM (by name) that produced the triples, plus ``,w<N>`` /
        ``,t<N>`` for a non-default ``max_words`` / ``max_new_tokens``."""
        words = "" if self.max_words == DEFAULT_MAX_WORDS else f",w{self.max_words}"
        tokens = "" if self.max_new_tokens == DEFAULT_MAX_NEW_TOKENS else f",t{self.max_new_tokens}"
        return f"llm:{self._name}{words}{tokens}"

    @property
    def version(self) -> str:
        """Prompt version, plus whether decoding was constrained (it changes the output)."""
        return PROMPT_VERSION if self.constrained else f"{PROMPT_VERSION}-unconstrained"

    def __repr__(self) -> str:
        return f"LLMTripleExtractor({self._name!r})"

    @property
    def backend(self) -> Any:
        """The loaded generation backend (local constrained LM or chat model)."""
        return self._backend.get(self._make_backend)

    def _make_backend(self) -> Any:
        if self._chat is not None:
            return _ChatBackend(self._chat)
        from neocorrag_core.models import resolve_lm

        lm = resolve_lm(self._lm_spec, show_progress=self.show_progress)
        return _LocalBackend(lm, constrained=self.constrained)

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """Triples of each passage; empty text gives no triples and costs no LLM call."""
        passages = list(passages)
        texts = [
            truncate_words(
                " ".join(p.text.split()),
                self.max_words,
                passage_id=p.id,
                extractor="LLMTripleExtractor",
            )
            for p in passages
        ]
        result: list[list[Triple]] = [[] for _ in passages]
        todo = [i for i, text in enumerate(texts) if text.strip()]
        starts = range(0, len(todo), self.batch_size)
        if self.show_progress and len(starts) > 1:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="LLM triples", unit="batch")
        for start in starts:
            batch = todo[start : start + self.batch_size]
            for i, triples in zip(batch, self._extract_batch(passages, texts, batch), strict=True):
                result[i] = triples
        self.stats.passages += len(passages)
        return result

    triples_for = extract

    def _extract_batch(
        self, passages: list[Passage], texts: list[str], batch: list[int]
    ) -> list[list[Triple]]:
        backend = self.backend
        # Words bound the text only as long as words are short; with a local LM the passage
        # and its title are also cut on tokens (two per allowed word, and the prompts' title
        # budget), so one 20,000-character "word" cannot blow up the prompt.
        tokenizer = getattr(getattr(backend, "lm", None), "tokenizer", None)
        if tokenizer is not None:
            texts = list(texts)
            for i in batch:
                texts[i] = clip_to_tokens(tokenizer, texts[i], 2 * self.max_words)
            titles = {
                i: clip_to_tokens(tokenizer, passages[i].title, DEFAULT_TITLE_TOKENS) for i in batch
            }
        else:
            titles = {i: passages[i].title[:256] for i in batch}
        entity_prompts = [entity_messages(titles[i], texts[i]) for i in batch]
        raw = backend.generate(entity_prompts, "entities", self.max_new_tokens // 2)
        entities = [
            self._entities(text, passages[i].id) for i, text in zip(batch, raw, strict=True)
        ]
        # No named entity, no triple built on one: skip step 2 (saves a call per such passage).
        step2 = [k for k, ents in enumerate(entities) if ents]
        out: list[list[Triple]] = [[] for _ in batch]
        if not step2:
            return out
        triple_prompts = [
            triple_messages(titles[batch[k]], texts[batch[k]], entities[k]) for k in step2
        ]
        raw = backend.generate(triple_prompts, "triples", self.max_new_tokens)
        for k, text in zip(step2, raw, strict=True):
            pid = passages[batch[k]].id
            out[k] = clean_triples(self._triples(text, pid), pid)
        return out

    def _items(self, output: Any, key: str, passage_id: str) -> list[Any]:
        self.stats.llm_calls += 1
        if not isinstance(output, str):  # the schema's object, from a chat model
            return _items_of_object(output, key)
        items, complete = parse_json_items(output, key)
        if not complete:
            truncated = bool(items) or output.lstrip().startswith("{")
            if truncated:
                self.stats.truncated_outputs += 1
            else:
                self.stats.invalid_outputs += 1
            logger.warning(
                "LLM %s output for passage %r is not complete JSON; kept %d complete item(s)",
                key,
                passage_id,
                len(items),
            )
        return items

    def _entities(self, output: Any, passage_id: str) -> list[str]:
        items = self._items(output, "entities", passage_id)
        names = [" ".join(x.split()) for x in items if isinstance(x, str) and x.strip()]
        self._count_skipped(len(items) - len(names), "entities", passage_id)
        return list(dict.fromkeys(names))

    def _triples(self, output: Any, passage_id: str) -> list[Triple]:
        items = self._items(output, "triples", passage_id)
        triples = [t for item in items if (t := parse_triple(item, passage_id)) is not None]
        self._count_skipped(len(items) - len(triples), "triples", passage_id)
        return triples

    def _count_skipped(self, bad: int, what: str, passage_id: str) -> None:
        if bad:
            self.stats.skipped_items += bad
            logger.warning(
                "skipped %d malformed %s from the LLM for passage %r", bad, what, passage_id
            )


# ------------------------------------------------------------------------------------------
# Parsing (never eval)
# ------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_items(text: str, key: str) -> tuple[list[Any], bool]:
    """The list under ``key`` in a JSON answer, and whether the answer parsed whole.

    Accepts a bare list, code fences and prose around the object. When the JSON is cut
    off (``max_new_tokens``) or broken, returns the items that are complete before the
    break, read one at a time with ``json.JSONDecoder.raw_decode``.
    """
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        return [], False
    decoder = json.JSONDecoder()
    try:
        value, _ = decoder.raw_decode(body, start)
    except json.JSONDecodeError:
        return _salvage_items(body, key, decoder), False
    items = value.get(key) if isinstance(value, dict) else value
    if not isinstance(items, list):
        return [], False
    return items, True


def _salvage_items(body: str, key: str, decoder: json.JSONDecoder) -> list[Any]:
    match = re.search(rf'"{re.escape(key)}"\s*:\s*\[', body)
    pos = match.end() if match else body.find("[") + 1
    if pos <= 0:
        return []
    items: list[Any] = []
    while True:
        while pos < len(body) and body[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(body) or body[pos] == "]":
            return items
        try:
            item, pos = decoder.raw_decode(body, pos)
        except json.JSONDecodeError:
            return items
        items.append(item)


def _items_of_object(obj: Any, key: str) -> list[Any]:
    """Items of a structured answer (a pydantic model, a dict, or a bare list)."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump()
    if isinstance(obj, dict):
        obj = obj.get(key)
    return list(obj) if isinstance(obj, (list, tuple)) else []


# ------------------------------------------------------------------------------------------
# Local Hugging Face LM, constrained by Outlines
# ------------------------------------------------------------------------------------------


class _LocalBackend:
    """Batched greedy generation with an Outlines JSON-schema processor per output kind
    (:class:`~neocorrag_core.lm.structured.LocalJSONGenerator`)."""

    def __init__(self, lm: Any, *, constrained: bool) -> None:
        self.lm = lm
        self.constrained = constrained
        # The model's own generation config is kept (neutral=False): neutralizing it would
        # change the triples cached under the current PROMPT_VERSION.
        self._generator = LocalJSONGenerator(lm, constrained=constrained, neutral=False)

    def generate(
        self, conversations: list[list[dict[str, str]]], kind: str, budget: int
    ) -> list[str]:
        """Greedy completions of a batch of chats (left-padded), one JSON string each."""
        return self.generate_with_status(conversations, kind, budget)[0]

    def generate_with_status(
        self, conversations: list[list[dict[str, str]]], kind: str, budget: int
    ) -> tuple[list[str], list[bool]]:
        """Completions, and per row whether it ended on eos (False: cut by ``budget``)."""
        done = self._generator.generate(conversations, _SCHEMAS[kind], budget)
        return [c.text for c in done], [c.finished for c in done]


# ------------------------------------------------------------------------------------------
# Chat models (ChatModel.ask): a framework LLM arrives wrapped by its adapter
# ------------------------------------------------------------------------------------------


def _lm_name(lm: Any) -> str:
    from neocorrag_core.models import BUNDLED_LMS

    if lm is None or (isinstance(lm, str) and lm in BUNDLED_LMS):
        return BUNDLED_LMS[lm or "default"].name
    if isinstance(lm, str):
        return _model_path_name(lm)
    # A LanguageModel's name, or a chat model's own (the adapters' wrappers carry the
    # framework class and model name, e.g. "ChatOpenAI:gpt-4o-mini").
    name = getattr(lm, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(lm, (tuple, list)) and lm:
        path = getattr(getattr(lm[0], "config", None), "_name_or_path", "")
        return _model_path_name(str(path)) or "custom"
    return type(lm).__name__


def _model_path_name(spec: str) -> str:
    """The store-key name of an LM given by id or folder: a Hugging Face hub id whole
    (``org/name``: two organisations' fine-tunes of one base model are different models),
    a local folder by its last path part (portable across machines; two local folders with
    the same last part share it, so pass ``name=`` to tell them apart). Decided from the
    text alone, never from what exists on disk, so one spec has one key in every working
    directory and on every worker: a relative ``dir/name`` reads as a hub id (write
    ``./dir/name`` for a folder)."""
    from neocorrag_core.models.hf import _looks_like_local_path

    text = spec.strip()
    trimmed = text.rstrip("/\\")
    if not trimmed:
        return text
    if _looks_like_local_path(text):
        return re.split(r"[/\\]", trimmed)[-1] or trimmed
    return trimmed


def _pydantic_models() -> dict[str, Any]:
    from pydantic import BaseModel, Field

    class Entities(BaseModel):
        """Named entities of a passage."""

        entities: list[str] = Field(description="every named entity, as written")

    class Fact(BaseModel):
        """One knowledge-graph fact."""

        subject: str
        relation: str
        object: str

    class Facts(BaseModel):
        """Facts stated by a passage."""

        triples: list[Fact] = Field(description="every fact as subject, relation, object")

    return {"entities": Entities, "triples": Facts}


class _ChatBackend:
    """Asks a :class:`~neocorrag_core.lm.chat.ChatModel` for each step's pydantic schema;
    one call per chat (``budget`` is the chat model's own business)."""

    def __init__(self, chat: ChatModel) -> None:
        self.chat_model = chat
        self._models = _pydantic_models()

    def generate(
        self, conversations: list[list[dict[str, str]]], kind: str, budget: int
    ) -> list[Any]:
        """One answer per chat: the schema's object, or text to parse."""
        return [self.chat_model.ask(c, self._models[kind]).value for c in conversations]
