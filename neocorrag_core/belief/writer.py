"""The query writers: the next search for what the evidence still lacks, and rewordings.

``next_query`` is EviReform's evidence-aware writer (:mod:`neocorrag_core.evireform.residual`:
the same prompt, worked example and validation, which keeps only lines that name an
entity the evidence revealed and the question did not), aimed at the verifier's missing
fact, in the spirit of BeliefRAG's ``query_refiner_v2`` (appendix C.3). ``rewrite`` is
BeliefRAG's ``query_rewrite_v1`` (appendix C.4): change the wording or target another
needed fact, never repeat a query. Both fall back to queries built without the LM when it
writes nothing usable, and neither ever returns a query already asked.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from neocorrag_core.evireform.propositions import build_propositions, relation_sentences
from neocorrag_core.evireform.residual import (
    bridge_entities,
    bridge_entity_queries,
    parse_residual_queries,
    residual_prompt_text,
)
from neocorrag_core.evireform.selection import evidence_order
from neocorrag_core.evireform.types import Proposition
from neocorrag_core.lm.chat import ChatModel, chat_model_or_none
from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate
from neocorrag_core.lm.prompt_budget import Clip, PromptTooLongError, fit_prompt, prompt_limit
from neocorrag_core.models import LazyModels
from neocorrag_core.text.capitals import capitalized_spans, question_spans
from neocorrag_core.text.relations import open_relation_words, qualify, relation_words
from neocorrag_core.triples import TripleSource
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.triples.precomputed import triple_source_or_default
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_int

from .components import Usage
from .verifier import PromptBudget

logger = logging.getLogger(__name__)

REWRITE_PROMPT_VERSION = "rewrite-v1"
"""Identifies the rewrite prompt below in run metadata; bump on any change."""

REWRITE_INSTRUCTION = (
    "A search for the question below found little new evidence. Write one new search "
    "query: change the wording, or target a different fact the question needs. Do not "
    "repeat an earlier query. Reply with the query only."
)
MAX_RELATION_WORDS = 3
"""Relation words a no-LM next-hop query adds to its bridge entity (EviReform's default)."""
# The version of entity_next_query's rules, bumped on any change, is the eval-cache key
# ENTITY_QUERY_VERSION in neocorrag_core/eval/belief_methods.py.
EVIDENCE_FACTS = 3
"""Facts of the ordered evidence whose relation words count as stated (EviReform's
``max_evidence``): the qualifying words are the question's relation words these leave open."""
MAX_MISSING_WORDS = 12
"""Words of the missing fact a no-LM query keeps (a search query, not a sentence)."""
_FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from by with and or is was are were be been what which
    who whom whose when where why how that this these those it its as did do does than
    there their they he she his her him them not no into about""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def query_key(text: str) -> str:
    """Comparison key of a query: accents removed, case-folded words (``"Oslo?"`` and
    ``"oslo"`` are the same query)."""
    plain = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in plain if not unicodedata.combining(ch))
    return " ".join(_WORD.findall(plain.casefold()))


def with_missing_fact(prompt: str, missing_fact: str) -> str:
    """EviReform's residual prompt with the verifier's missing fact stated just before the
    queries are asked for."""
    # The residual prompt has no slot for it; the line goes right above "Queries:", where
    # the small LM reads it last.
    if not missing_fact.strip():
        return prompt
    head, marker, tail = prompt.rpartition("\nQueries:")
    line = f"Still missing: {missing_fact}"
    return f"{head}\n{line}{marker}{tail}" if marker else f"{prompt}\n{line}"


def first_new(candidates: Sequence[str], asked: Sequence[str]) -> str:
    """The first candidate (whitespace collapsed) that is not empty and not an ``asked``
    query (by :func:`query_key`); ``""`` when there is none."""
    done = {query_key(a) for a in asked}
    for candidate in candidates:
        text = " ".join(candidate.split())
        key = query_key(text)
        if key and key not in done:
            return text
    return ""


def fallback_next_query(
    question: str, evidence: Sequence[Proposition], missing_fact: str, asked: Sequence[str]
) -> str:
    """The no-LM next query: a bridge entity of the evidence with the missing fact's words,
    or the missing fact alone; ``""`` when every such query was asked already."""
    missing = " ".join(missing_fact.split()[:MAX_MISSING_WORDS])
    candidates = []
    for bridge in bridge_entity_queries(question, evidence, asked=asked, max_queries=3):
        named = f" {query_key(bridge)} " in f" {query_key(missing)} "
        candidates.append(missing if named else f"{bridge} {missing}")
    candidates.append(missing)
    return first_new(candidates, asked)


def entity_next_query(
    question: str,
    passages: Sequence[Passage],
    triples: Sequence[Sequence[Triple]],
    asked: Sequence[str],
    *,
    max_relation_words: int = MAX_RELATION_WORDS,
    relation_first: bool = True,
) -> str:
    """The query for the next hop without the LM, as EviReform's no-LM residual queries: a
    bridge entity of the evidence that no ``asked`` query names, qualified by the relation
    words the question asks for and the first :data:`EVIDENCE_FACTS` facts do not state
    (``"Mountrail County capital"``); without a bridge, :func:`fallback_rewrite`'s
    rewording. Never empty, never one of ``asked``.

    ``passages`` are in the order the searches returned them (the workspace's order: by
    rank within a search, earlier searches first) and ``triples`` are theirs. With
    ``relation_first`` (the default) the evidence is ordered as EviReform orders it
    (:func:`relation_first_evidence`): a fact that states what the question asks about
    ("His father was Thomas Stanley" for "Who is the father of ...") gives the first
    bridge, and each fact gives its first bridge before any fact gives a second. Without
    it, the facts in passage order and all of the relation words the evidence leaves
    open (rules ``entity-query-1``).

    Known weakness: every relation word of the question counts as asked about, the last
    hop's too, so a first-hop passage that states the named entity's own "born ... in
    Leeds" can give "Leeds" for "Where was the father of Edward Smith born?"."""
    if relation_first:
        evidence = relation_first_evidence(question, passages, triples, asked)
        stated = [p.text for p in evidence[:EVIDENCE_FACTS]]
    else:
        evidence = build_propositions(passages, triples)
        stated = [p.text for p in evidence]
    words = open_relation_words(question, stated)[:max_relation_words]
    bridges = bridge_entity_queries(
        question, evidence, asked=asked, max_queries=3, interleave=relation_first
    )
    found = first_new([qualify(entity, words) for entity in bridges], asked)
    return found or fallback_rewrite(question, asked[-1] if asked else question, asked)


def relation_first_evidence(
    question: str,
    passages: Sequence[Passage],
    triples: Sequence[Sequence[Triple]],
    asked: Sequence[str] = (),
) -> list[Proposition]:
    """The facts of ``passages`` (their triples, and the sentences that state one of the
    question's relation words, which triple extractors miss) in EviReform's evidence order
    (:func:`~neocorrag_core.evireform.selection.evidence_order`): facts that state a
    relation word of the question and name a bridge first, one per passage in turn, then
    the rest by closeness. Only passages that name the question's entities or those of an
    ``asked`` query anchor a stating fact. No embedder here: a passage's place in
    ``passages`` (the order the searches returned them) stands in for EviReform's cosine
    to the question."""
    wanted = relation_words(question)
    props = build_propositions(passages, triples)
    known = {p.text for p in props}
    props += [p for p in relation_sentences(passages, wanted) if p.text not in known]
    rank: dict[str, int] = {}
    for i, passage in enumerate(passages):
        rank.setdefault(passage.id, i)
    last = len(passages)
    closeness = np.array(
        [-min((rank.get(pid, last) for pid in p.passage_ids), default=last) for p in props],
        dtype=float,
    )
    anchors = [*question_spans(question), *(s for text in asked for s in capitalized_spans(text))]
    order = evidence_order(question, props, passages, closeness, wanted=wanted, anchors=anchors)
    return [props[i] for i in order]


def fallback_rewrite(question: str, last_query: str, asked: Sequence[str]) -> str:
    """The no-LM rewording: the question's content words, then each name in the question
    or the last query on its own (another needed fact), then the content words with a
    broadening word. Never an ``asked`` query."""
    content = _content_words(question)
    candidates = [content, *question_spans(question), *capitalized_spans(last_query)]
    candidates += [_content_words(last_query)]
    candidates += [f"{content} {extra}" for extra in ("background", "facts", "history")]
    found = first_new(candidates, asked)
    n = 2
    while not found:  # every candidate was asked: number the content words until new
        found = first_new([f"{content or 'query'} {n}"], asked)
        n += 1
    return found


def _content_words(text: str) -> str:
    words = [w for w in re.findall(r"[\w'’-]+", text) if w.casefold() not in _FUNCTION_WORDS]
    return " ".join(words)


class LMQueryWriter:
    """Writes the next search query (or says SUFFICIENT) and rewordings, on a local LM or a
    chat model.

    Args:
        lm: a local LM spec for :func:`~neocorrag_core.models.resolve_lm` (``None`` = the
            bundled default) or a :class:`~neocorrag_core.lm.chat.ChatModel` (a LangChain
            or LlamaIndex LLM wrapped by its adapter's ``as_chat_model``).
        models: share the lazily loaded models of another engine (overrides a local ``lm``).
        triple_source: where the passages' triples come from for bridge entities (default:
            passage metadata; passages without triples offer their titles).
        budget: passages shown and token budgets of the prompt.
        max_queries: lines the LM is asked for (the first valid one is used).
        max_query_tokens: new-token cap of each call.
        max_query_words: longer lines are not queries and are skipped.
    """

    def __init__(
        self,
        lm: Any = None,
        *,
        models: LazyModels | None = None,
        triple_source: TripleSource | None = None,
        budget: PromptBudget | None = None,
        max_queries: int = 3,
        max_query_tokens: int = 64,
        max_query_words: int = 16,
    ) -> None:
        for name, value in (
            ("max_queries", max_queries),
            ("max_query_tokens", max_query_tokens),
            ("max_query_words", max_query_words),
        ):
            check_int("LMQueryWriter", name, value, minimum=1)
        self.budget = budget or PromptBudget()
        self.triple_source = triple_source_or_default(triple_source, "LMQueryWriter")
        self.max_queries = max_queries
        self.max_query_tokens = max_query_tokens
        self.max_query_words = max_query_words
        self.chat_model: ChatModel | None = chat_model_or_none("LMQueryWriter", lm)
        self.models = None if self.chat_model is not None else (models or LazyModels(lm=lm))

    def next_query(
        self,
        question: str,
        passages: Sequence[Passage],
        missing_fact: str,
        asked: Sequence[str],
    ) -> tuple[str | None, Usage]:
        """A query for the missing fact that names an entity the evidence revealed, or
        ``None`` when the LM judges the evidence sufficient; never one of ``asked``."""
        shown = list(passages)[: self.budget.max_passages]
        evidence = build_propositions(shown, triples_per_passage(self.triple_source, shown))
        with self._locked():
            clip = self._clip()
            facts = [
                clip(f"{p.title}: {p.text}" if p.title.strip() else p.text, "passage")
                for p in shown
            ]
            cut_question = clip(question, "question")
            missing = clip(missing_fact, "question") if missing_fact.strip() else ""

            def text(n: int) -> str:
                prompt = residual_prompt_text(cut_question, facts[:n], self.max_queries)
                return with_missing_fact(prompt, missing)

            reply, usage = self._ask(text, len(facts), "next query")
        if reply is not None:
            parsed = parse_residual_queries(
                reply,
                question,
                facts,
                asked=asked,
                bridges=bridge_entities(question, evidence),
                max_queries=self.max_queries,
                max_words=self.max_query_words,
            )
            if parsed.sufficient:
                return None, usage
            query = first_new(parsed.queries, asked)
            if query:
                return query, usage
            logger.debug("query writer wrote no usable query: %r", reply)
        return fallback_next_query(question, evidence, missing_fact, asked), usage

    def entity_query(self, question: str, passages: Sequence[Passage], asked: Sequence[str]) -> str:
        """The next-hop query without the LM (:func:`entity_next_query` over the triples
        of the passages the LM would be shown); used for searches scheduled before
        anything was measured (``BeliefConfig.min_searches``)."""
        shown = list(passages)[: self.budget.max_passages]
        triples = triples_per_passage(self.triple_source, shown)
        return entity_next_query(question, shown, triples, asked)

    def rewrite(self, question: str, last_query: str, asked: Sequence[str]) -> tuple[str, Usage]:
        """A reworded query (other wording, or another needed fact); never one of ``asked``."""
        with self._locked():
            clip = self._clip()
            cut_question = clip(question, "question")
            earlier = [clip(a, "title") for a in list(asked)[-6:]] or [clip(last_query, "title")]

            def text(n: int) -> str:
                lines = [REWRITE_INSTRUCTION, "", f"Question: {cut_question}", "Earlier queries:"]
                lines += [f"- {a}" for a in earlier]
                return "\n".join([*lines, "New query:"])

            reply, usage = self._ask(text, 0, "rewrite")
        if reply is not None:
            parsed = parse_residual_queries(
                reply,
                question,
                asked=asked,
                max_queries=1,
                max_words=self.max_query_words,
            )
            query = first_new(parsed.queries, asked)
            if query:
                return query, usage
            logger.debug("query rewriter wrote no usable query: %r", reply)
        return fallback_rewrite(question, last_query, asked), usage

    def _locked(self) -> AbstractContextManager[Any]:
        """The local LM's lock (its tokenizer too is used by one caller at a time)."""
        return nullcontext() if self.models is None else self.models.lm.lock

    def _clip(self) -> Clip:
        tokenizer = None if self.models is None else self.models.lm.tokenizer
        return self.budget.clipper(tokenizer)

    def _ask(
        self, text: Callable[[int], str], passages: int, step: str
    ) -> tuple[str | None, Usage]:
        """The LM's reply to the prompt ``text(n)`` with the most passages ``n`` that fit;
        ``None`` (and no cost) when not even ``text(0)`` fits."""
        if self.chat_model is not None:
            reply = self.chat_model.ask([{"role": "user", "content": text(passages)}], None)
            return str(reply.value), Usage(reply.prompt_tokens, reply.generated_tokens)
        assert self.models is not None
        lm = self.models.lm
        with lm.lock:
            try:
                prompt, _ = fit_prompt(
                    lambda n: chat_prompt_ids(lm, text(n)),
                    passages,
                    prompt_limit(lm, self.budget.max_prompt_tokens, self.max_query_tokens),
                )
            except PromptTooLongError as err:
                logger.warning("%s: skipped the LM (%s); used the no-LM fallback", step, err)
                return None, Usage()
            generated = greedy_generate(lm, prompt, self.max_query_tokens)
            reply = lm.tokenizer.decode(generated, skip_special_tokens=True)
        return reply, Usage(len(prompt), len(generated))


__all__ = [
    "MAX_RELATION_WORDS",
    "REWRITE_INSTRUCTION",
    "REWRITE_PROMPT_VERSION",
    "LMQueryWriter",
    "entity_next_query",
    "fallback_next_query",
    "fallback_rewrite",
    "first_new",
    "query_key",
    "relation_first_evidence",
    "with_missing_fact",
]
