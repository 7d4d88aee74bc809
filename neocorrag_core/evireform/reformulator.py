"""``EvidenceReformulator``: wires the EviReform stages around any search function.

The loop is written once, as a generator that *yields* the searches it needs and
receives their results; :meth:`EvidenceReformulator.retrieve` drives it with a
sync search and :meth:`~EvidenceReformulator.aretrieve` with an async one (running
the residual searches of a round concurrently and the LM steps in a worker thread).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from neocorrag_core.cost import Cost
from neocorrag_core.errors import InputError, RetrievalError
from neocorrag_core.limits import (
    DEFAULT_LIMITS,
    WorkLimits,
    cap_titles,
    cap_triples,
    check_limits,
    collecting_notes,
)
from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate, text_token_ids
from neocorrag_core.lm.prompt_budget import (
    PromptTooLongError,
    TokenClipper,
    fit_prompt,
    prompt_limit,
)
from neocorrag_core.models import LazyModels, VectorCache
from neocorrag_core.search_calls import (
    AsyncSearchFn,
    SearchFn,
    arun_searches,
    run_searches,
)
from neocorrag_core.text.capitals import all_capitals, question_spans
from neocorrag_core.text.entities import normalization_memo
from neocorrag_core.text.relations import open_relation_words, qualify
from neocorrag_core.timing import timed
from neocorrag_core.triples import TripleSource
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.triples.precomputed import triple_source_or_default, vector_cache_of
from neocorrag_core.types import Passage
from neocorrag_core.validation import clean_text

from .config import ReformulationConfig, ReformulationTuning
from .propositions import build_propositions, relation_sentences
from .ranking import (
    chain_links,
    chain_top_k,
    question_anchors,
    shared_names,
    title_named,
    title_pointers,
)
from .residual import (
    bridge_entities,
    bridge_entity_queries,
    match_key,
    names_entity,
    names_in_lower_case,
    parse_residual_queries,
    residual_prompt_text,
    unfound_question_entities,
)
from .scoring import aggregate_to_passages, mix_query_scores, propagate, shared_entity_neighbors
from .selection import (
    build_selection_prompt,
    evidence_order,
    proposition_focus,
    select_with_lm,
    selection_cost_bound,
)
from .types import (
    Proposition,
    QueryKind,
    RankedPassage,
    ReformulationQuery,
    ReformulationResult,
)

logger = logging.getLogger(__name__)


_Request = list[tuple[str, int]]
_Loop = Generator[_Request, list[list[Passage]], ReformulationResult]


@dataclass
class _State(Cost):
    """Mutable bookkeeping of one question's loop (never shared between calls), with its cost."""

    question: str
    queries: list[ReformulationQuery] = field(default_factory=list)
    pool: dict[str, Passage] = field(default_factory=dict)
    ranks: dict[str, dict[int, int]] = field(default_factory=dict)
    evidence: list[Proposition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    results: dict[int, list[str]] = field(default_factory=dict)
    rounds: int = 0
    evidence_upto: dict[int, int] = field(default_factory=dict)
    """Round -> how many leading ``evidence`` facts had been selected when it wrote queries."""
    limits: WorkLimits = DEFAULT_LIMITS
    given: dict[str, Passage] = field(default_factory=dict)
    """Passage id -> the passage as the search returned it; the pool holds it as the rules
    read it (its title within ``limits.max_title_chars``)."""

    def add_results(self, query_index: int, passages: Sequence[Passage]) -> list[Passage]:
        """Merge one query's results into the pool; returns the passages new to it."""
        self.results[query_index] = [p.id for p in passages]
        with collecting_notes() as capped:
            read = cap_titles(passages, self.limits)
        self.notes.extend(n for n in capped if n not in self.notes)
        new: list[Passage] = []
        for rank, (passage, given) in enumerate(zip(read, passages, strict=True)):
            seen = self.ranks.setdefault(passage.id, {})
            seen.setdefault(query_index, rank)
            kept = self.pool.get(passage.id)
            if kept is None:
                self.pool[passage.id] = passage
                self.given[passage.id] = given
                new.append(passage)
            elif (kept.text, kept.title) != (passage.text, passage.title):
                note = (
                    f"passage id {passage.id!r} came back with a different text; the first "
                    "one is kept (give distinct documents distinct ids)"
                )
                if note not in self.notes:
                    self.notes.append(note)
                    logger.warning(note)
        return new


class EvidenceReformulator:
    """Searches again for the evidence the first retrieval missed (EviReform).

    Args:
        config: what a user chooses (:class:`~neocorrag_core.evireform.ReformulationConfig`);
            defaults follow the paper (one round, three residual queries).
        tuning: the research settings
            (:class:`~neocorrag_core.evireform.config.ReformulationTuning`: evidence and
            ranking rules, half the score mass on the original question, half propagated).
        embedder / lm: anything :func:`neocorrag_core.models.resolve_embedder` /
            :func:`~neocorrag_core.models.resolve_lm` accepts; ``None`` = the bundled
            models. The LM is never loaded when the configuration needs none.
        triple_source: where the passages' triples come from (default: passage metadata);
            passages without triples take part through their lead sentence.
        models: share the lazily loaded models of another engine, e.g.
            ``EvidenceReformulator(models=miner.models)``; overrides embedder/lm.
        vectors: a persistent vector cache for the propositions' texts (see
            :class:`~neocorrag_core.EvidenceChainMiner`); ``None``: the triple source's own.
        limits: caps on the triples read per passage and per round
            (:class:`~neocorrag_core.limits.WorkLimits`); a cap that binds is in ``notes``.

    Thread-safe like :class:`~neocorrag_core.EvidenceChainMiner`: every call keeps its own
    state, and the LM's lock serializes generation.
    """

    def __init__(
        self,
        config: ReformulationConfig | None = None,
        *,
        tuning: ReformulationTuning | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        models: LazyModels | None = None,
        vectors: VectorCache | None = None,
        limits: WorkLimits | None = None,
        show_progress: bool = False,
    ) -> None:
        self.config = config or ReformulationConfig()
        self.tuning = tuning or ReformulationTuning()
        self.limits = check_limits(limits, "EvidenceReformulator")
        self.triple_source = triple_source_or_default(triple_source, "EvidenceReformulator")
        self.vectors = vector_cache_of(self.triple_source, vectors, "EvidenceReformulator")
        self.models = models or LazyModels(embedder, lm, show_progress=show_progress)

    def tuned(self, **research: Any) -> EvidenceReformulator:
        """This engine with research settings changed (:class:`ReformulationTuning`
        fields), sharing its models, triple source and caches: how the lab runs a variant
        beside the default (per-call overrides take ``config`` fields only)."""
        other = copy.copy(self)
        other.tuning = self.tuning.with_overrides(**research)
        return other

    # ------------------------------------------------------------------ drivers

    def retrieve(
        self, question: str, search: SearchFn, k: int = 5, **overrides: Any
    ) -> ReformulationResult:
        """The top-``k`` passages for ``question`` after evidence-guided reformulation.

        ``search(query, n)`` is called for the question and for each residual query.
        Keyword overrides change fields of ``config`` for this call only; a research setting
        (a :class:`~neocorrag_core.evireform.config.ReformulationTuning` field) is a
        ``ConfigError``: it belongs to the engine, ``EvidenceReformulator(tuning=...)``.
        Lone surrogates in ``question`` (text that is not valid Unicode) are replaced by
        U+FFFD before anything sees it, ``search`` included.
        """
        started = time.perf_counter()
        config, tuning = self._settings(overrides)
        loop = self._loop(question, k, config, tuning)
        step = _advance(loop, None)
        searching = 0.0
        deadline: float | None = None  # the first search is waited for, as without EviReform
        given_up: list[str] = []
        while not isinstance(step, ReformulationResult):
            before = time.perf_counter()
            found = run_searches(search, step, deadline)
            searching += time.perf_counter() - before
            deadline = deadline or _deadline(config)
            given_up += found.timed_out
            step = _advance(loop, found.results)
        return _finish(step, searching, started, given_up, config)

    async def aretrieve(
        self, question: str, search: AsyncSearchFn, k: int = 5, **overrides: Any
    ) -> ReformulationResult:
        """Async :meth:`retrieve`: one round's searches run concurrently, LM steps in a thread."""
        started = time.perf_counter()
        config, tuning = self._settings(overrides)
        loop = self._loop(question, k, config, tuning)
        step = await asyncio.to_thread(_advance, loop, None)
        searching = 0.0
        deadline: float | None = None  # the first search is waited for, as without EviReform
        given_up: list[str] = []
        while not isinstance(step, ReformulationResult):
            before = time.perf_counter()
            found = await arun_searches(search, step, deadline)
            searching += time.perf_counter() - before
            deadline = deadline or _deadline(config)
            given_up += found.timed_out
            step = await asyncio.to_thread(_advance, loop, found.results)
        return _finish(step, searching, started, given_up, config)

    def _settings(
        self, overrides: dict[str, Any]
    ) -> tuple[ReformulationConfig, ReformulationTuning]:
        """The call's settings: ``config`` with the per-call ``overrides`` (user fields only)."""
        config = self.config.with_overrides(**overrides) if overrides else self.config
        return config, self.tuning

    # ------------------------------------------------------------------ the loop

    def _loop(
        self, question: str, k: int, config: ReformulationConfig, tuning: ReformulationTuning
    ) -> _Loop:
        question = check_call(question, k)
        state = _State(question, limits=self.limits)
        state.queries.append(ReformulationQuery(question, "original", 0))
        (first,) = yield [(question, config.first_k or k)]
        fresh = state.add_results(0, first)
        first_pool_size = len(state.pool)
        sufficient = False
        props: list[Proposition] = []
        for round_number in range(1, config.rounds + 1):
            if not fresh:
                break
            props = self._propositions(list(state.pool.values()), state)
            written, sufficient = self._residual_round(
                state, props, fresh, round_number, config, tuning
            )
            written = _within_searches(state, written, config)
            if sufficient or not written:
                break
            start = len(state.queries)
            state.queries += [
                ReformulationQuery(t, kind, round_number, bridge) for t, kind, bridge in written
            ]
            texts = [t for t, _, _ in written]
            if not tuning.residual_retrieval:
                break  # the rerank control: the queries only re-score the first pool
            results = yield [(t, config.residual_k) for t in texts]
            state.rounds = round_number
            fresh = []
            for offset, passages in enumerate(results):
                fresh += state.add_results(start + offset, passages)
        pool = list(state.pool.values())
        ranked: list[RankedPassage] = []
        if pool:
            props = self._propositions(pool, state)
            with timed(state.timings, "score"):
                ranked = self._rank(state, props, pool, k, tuning)
        return ReformulationResult(
            question=question,
            passages=ranked,
            queries=state.queries,
            evidence=state.evidence,
            pool=[state.given.get(p.id, p) for p in pool],
            first_pool_size=first_pool_size,
            sufficient=sufficient,
            query_results=[state.results.get(i, []) for i in range(len(state.queries))],
            rounds=state.rounds,
            notes=state.notes,
            prompt_tokens=state.prompt_tokens,
            generated_tokens=state.generated_tokens,
            timings=state.timings,
        )

    def _propositions(self, pool: list[Passage], state: _State) -> list[Proposition]:
        # The store's keys and the extractor read the passages as the search returned them.
        given = [state.given.get(p.id, p) for p in pool]
        with timed(state.timings, "triples"), collecting_notes() as capped:
            per_passage = cap_triples(triples_per_passage(self.triple_source, given), self.limits)
        state.notes.extend(n for n in capped if n not in state.notes)
        return build_propositions(pool, per_passage)

    def _residual_round(
        self,
        state: _State,
        props: list[Proposition],
        fresh: list[Passage],
        round_number: int,
        config: ReformulationConfig,
        tuning: ReformulationTuning,
    ) -> tuple[list[tuple[str, QueryKind, str]], bool]:
        """Select evidence among the fresh passages' propositions, then write the queries;
        returns ``(query, kind, bridge)`` triples and whether the LM called the evidence
        sufficient. From the second round on, an adaptive loop stops here when the evidence
        covers every relation word of the question."""
        asked = [q.text for q in state.queries]
        if config.residual_queries == "repeat":
            return [(state.question, "repeat", "")], False
        fresh_ids = {p.id for p in fresh}
        chosen = {p.text for p in state.evidence}
        # What the question still asks for decides which facts come first (its bridges
        # are the ones to follow), and, with relation_evidence, adds the sentences that
        # state it when the triples missed them.
        wanted = (
            open_relation_words(state.question, [p.text for p in state.evidence])
            if tuning.relation_evidence
            else []
        )
        candidates = [
            p for p in props if p.text not in chosen and fresh_ids.intersection(p.passage_ids)
        ]
        taken = {p.text for p in candidates} | chosen
        candidates += [p for p in relation_sentences(fresh, wanted) if p.text not in taken]
        before = len(state.evidence)
        with timed(state.timings, "select"):
            state.evidence += self._select(state, candidates, fresh, wanted, config, tuning)
        state.evidence_upto[round_number] = len(state.evidence)
        # This round's facts first: the next hop starts from what the last search found.
        recent = state.evidence[before:] + state.evidence[:before]
        open_words = open_relation_words(state.question, [p.text for p in state.evidence])
        if round_number > 1 and config.adaptive_rounds and not open_words:
            state.notes.append(
                f"rounds: stopped before round {round_number} (the evidence covers the "
                "question's relation words)"
            )
            return [], False
        bridges = bridge_entities(state.question, recent, interleave=True)
        words = open_words[: tuning.max_relation_words] if tuning.relation_words else []
        queries: list[tuple[str, QueryKind, str]] = []
        if config.residual_queries == "lm":
            with timed(state.timings, "residual"):
                written = self._write_queries(state, asked, bridges, config, tuning)
            if written is not None:
                texts, sufficient = written
                if sufficient:
                    return [], True
                queries = [(t, "lm", _named_bridge(t, bridges)) for t in texts]
                if not texts:
                    state.notes.append("residual_queries: bridge entities (the LM wrote none)")
            if queries and not tuning.fill_with_entities:
                asked_first = self._question_entity_queries(
                    state, fresh, round_number, words, tuning
                )
                return asked_first + queries, False
        room = config.max_residual_queries - len(queries)
        entities = bridge_entity_queries(
            state.question,
            recent,
            asked=asked + [t for t, _, _ in queries],
            max_queries=room,
            interleave=True,
        )
        if not queries and not entities:
            state.notes.append("residual_queries: no bridge entity in the evidence")
        for entity in entities:
            text = qualify(entity, words)
            queries.append((text, "template" if text != entity else "entities", entity))
        asked_first = self._question_entity_queries(state, fresh, round_number, words, tuning)
        return asked_first + queries, False

    @staticmethod
    def _question_entity_queries(
        state: _State,
        fresh: list[Passage],
        round_number: int,
        words: list[str],
        tuning: ReformulationTuning,
    ) -> list[tuple[str, QueryKind, str]]:
        """The first round's queries for names of the question that the first search
        found nothing about (ours, not the paper's; on top of the bridge queries)."""
        if round_number != 1:
            return []
        missing = unfound_question_entities(
            state.question, fresh, max_entities=tuning.question_entity_queries
        )
        return [(qualify(e, words), "question", e) for e in missing]

    def _select(
        self,
        state: _State,
        candidates: list[Proposition],
        passages: list[Passage],
        wanted: list[str],
        config: ReformulationConfig,
        tuning: ReformulationTuning,
    ) -> list[Proposition]:
        if not candidates:
            return []
        vecs = self._embed([state.question], [p.text for p in candidates])
        named = question_spans(state.question)
        if all_capitals(state.question) or not any(ch.isupper() for ch in state.question):
            named = names_in_lower_case(state.question, passages)
        anchors = [*named, *(q.bridge for q in state.queries)]
        order = evidence_order(
            state.question,
            candidates,
            passages,
            np.asarray(vecs[1:]) @ np.asarray(vecs[0]),
            wanted=wanted,
            anchors=[a for a in anchors if a],
            margin=tuning.evidence_margin,
            first_hop=(
                [p.id for p in passages if title_named(state.question, p.title)]
                if tuning.first_hop_facts
                else ()
            ),
        )
        order = order[: tuning.max_selection_candidates]
        if config.selection == "embedding":
            return [candidates[i] for i in order[: tuning.max_evidence]]
        offered = [candidates[i] for i in order]
        # Show the LM the passages its candidates come from, best candidate first.
        by_id = {p.id: p for p in passages}
        shown_ids = dict.fromkeys(pid for c in offered for pid in c.passage_ids if pid in by_id)
        shown = [by_id[pid] for pid in shown_ids][: tuning.selection_passages]
        lm = self.models.lm
        with lm.lock:
            focus = proposition_focus(offered) if tuning.prompt_context == "sentences" else None
            clip = TokenClipper.for_config(lm.tokenizer, tuning)
            longest = (
                max((len(text_token_ids(lm.tokenizer, p.text)) for p in offered), default=0) + 1
            )
            try:
                prompt, _ = fit_prompt(
                    lambda n: build_selection_prompt(
                        lm, state.question, shown[:n], tuning.max_passage_chars, focus, clip
                    ),
                    len(shown),
                    prompt_limit(lm, tuning.max_prompt_tokens, longest),
                )
            except PromptTooLongError as err:
                state.notes.append(f"selection: skipped the LM ({err}); used the embedding order")
                return offered[: tuning.max_evidence]
            bound = selection_cost_bound(lm, prompt, offered, config.selection, tuning.max_evidence)
            if not self._affordable(state, bound, config, "selection"):
                return offered[: tuning.max_evidence]
            picked = select_with_lm(
                lm, prompt, offered, mode=config.selection, limit=tuning.max_evidence
            )
        state.add_tokens(picked.prompt_tokens, picked.generated_tokens)
        return [offered[i] for i in picked.indices]

    def _write_queries(
        self,
        state: _State,
        asked: list[str],
        bridges: list[str],
        config: ReformulationConfig,
        tuning: ReformulationTuning,
    ) -> tuple[list[str], bool] | None:
        """The LM's residual queries and whether it called the evidence sufficient;
        ``None`` when the budget does not allow the call."""
        lm = self.models.lm
        with lm.lock:
            clip = TokenClipper.for_config(lm.tokenizer, tuning)
            evidence = [p.text for p in state.evidence]
            try:
                # Facts are dropped from the end (the least similar) until the prompt fits.
                prompt, _ = fit_prompt(
                    lambda n: chat_prompt_ids(
                        lm,
                        residual_prompt_text(
                            state.question, evidence[:n], config.max_residual_queries, clip
                        ),
                    ),
                    len(evidence),
                    prompt_limit(lm, tuning.max_prompt_tokens, tuning.max_query_tokens),
                )
            except PromptTooLongError as err:
                state.notes.append(f"query: skipped the LM ({err}); used the no-LM fallback")
                return None
            if not self._affordable(state, len(prompt) + tuning.max_query_tokens, config, "query"):
                return None
            generated = greedy_generate(lm, prompt, tuning.max_query_tokens)
            reply = lm.tokenizer.decode(generated, skip_special_tokens=True)
        state.add_tokens(len(prompt), len(generated))
        parsed = parse_residual_queries(
            reply,
            state.question,
            [p.text for p in state.evidence],
            asked=asked,
            bridges=bridges,
            max_queries=config.max_residual_queries,
            max_words=tuning.max_query_words,
        )
        if parsed.rejected:
            logger.debug("skipped %d unusable residual query line(s): %r", parsed.rejected, reply)
        return parsed.queries, parsed.sufficient

    def _affordable(
        self, state: _State, bound: int, config: ReformulationConfig, step: str
    ) -> bool:
        if config.max_lm_tokens is None or state.lm_tokens + bound <= config.max_lm_tokens:
            return True
        state.notes.append(
            f"{step}: skipped the LM (up to {bound} tokens would pass the budget of "
            f"{config.max_lm_tokens}; {state.lm_tokens} spent); used the no-LM fallback"
        )
        return False

    # ------------------------------------------------------------------ scoring

    def _embed(self, queries: list[str], facts: list[str]) -> np.ndarray:
        """Vectors of ``queries`` then ``facts``: the facts are the passages' own texts
        (triples, sentences), read from the persistent cache when one is in use."""
        embedder = self.models.embedder
        known = embedder.embed(facts, cache=self.vectors)
        asked = embedder.embed(queries)
        return np.concatenate([asked, known]) if len(known) else asked

    def _rank(
        self,
        state: _State,
        props: list[Proposition],
        pool: list[Passage],
        k: int,
        tuning: ReformulationTuning,
    ) -> list[RankedPassage]:
        texts = [q.text for q in state.queries]
        vecs = self._embed(texts, [p.text for p in props])
        sims = np.asarray(vecs[len(texts) :]) @ np.asarray(vecs[: len(texts)]).T
        scores = rank_scores(sims, shared_entity_neighbors(props), tuning)
        by_passage = aggregate_to_passages(scores, props, tuning.aggregation)
        arrival = {p.id: i for i, p in enumerate(pool)}
        order = sorted(pool, key=lambda p: (-by_passage.get(p.id, 0.0), arrival[p.id]))
        top = order[:k]
        if tuning.ranking == "chains":
            by_id = {p.id: p for p in pool}
            links = chain_links(
                state.queries,
                state.results,
                state.evidence,
                by_id,
                order,
                evidence_upto=state.evidence_upto,
            )
            first_ranks = {pid: ranks[0] for pid, ranks in state.ranks.items() if 0 in ranks}
            anchors = question_anchors(state.question, order, first_ranks, limit=tuning.max_anchors)
            first_ids = state.results.get(0, [])
            ids = chain_top_k(
                [p.id for p in order],
                links,
                k,
                lead=tuning.chain_lead,
                anchors=anchors,
                pointers=title_pointers(order) if tuning.follow_titles else None,
                neighbours=(
                    shared_names(order, state.question, among=set(first_ids))
                    if tuning.follow_names
                    else None
                ),
                pages={p.id: match_key(p.title) for p in order},
                max_per_page=tuning.max_per_page,
            )
            top = [by_id[pid] for pid in ids]
        ranked = []
        for passage in top:
            seen = state.ranks.get(passage.id, {})
            ranked.append(
                RankedPassage(
                    state.given.get(passage.id, passage),
                    float(by_passage.get(passage.id, 0.0)),
                    found_by=min(seen) if seen else 0,
                    retrieval_ranks=tuple(sorted(seen.items())),
                )
            )
        return ranked

    def rerank(
        self,
        question: str,
        queries: Sequence[ReformulationQuery],
        passages: Sequence[Passage],
        k: int = 5,
    ) -> list[RankedPassage]:
        """Score ``passages`` with given queries (stages d-f only; no search, no LM).

        ``queries[0]`` must be the original question. This is the paper's *rerank*
        control when ``passages`` is the first pool and ``queries`` those a full run wrote.
        """
        question = check_call(question, k)
        if isinstance(queries, (str, bytes)) or not all(
            isinstance(q, ReformulationQuery) and isinstance(q.text, str) for q in queries
        ):
            raise InputError("queries must be a list of ReformulationQuery")
        queries = [replace(q, text=clean_text(q.text)) for q in queries]
        if not queries or queries[0].kind != "original":
            raise InputError("queries must start with the original question")
        if isinstance(passages, (str, bytes)) or not all(isinstance(p, Passage) for p in passages):
            raise InputError("passages must be a list of Passage")
        tuning = self.tuning
        state = _State(question, queries=list(queries), limits=self.limits)
        # The passages are the original question's results: shared names look among them.
        state.add_results(0, passages)
        pool = list(state.pool.values())
        if not pool:
            return []
        return self._rank(state, self._propositions(pool, state), pool, k, tuning)


def check_call(question: object, k: object) -> str:
    """The question of a call with lone surrogates replaced by U+FFFD (the loop, the
    searches and the result use it), or an :class:`InputError` for a bad question or ``k``."""
    if not isinstance(question, str) or not question.strip():
        raise InputError("question must be a non-empty string")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return clean_text(question)


def _named_bridge(query: str, bridges: Sequence[str]) -> str:
    """The first bridge entity a (LM-written) query names, or ""."""
    return next((b for b in bridges if names_entity(query, b)), "")


def rank_scores(
    similarities: np.ndarray, neighbors: Sequence[Sequence[int]], tuning: ReformulationTuning
) -> np.ndarray:
    """Proposition scores from a (propositions x queries) similarity matrix whose first
    column is the original question: normalize per query, mix, propagate once."""
    sims = np.asarray(similarities, dtype=float)
    if sims.ndim != 2 or sims.shape[1] < 1:
        raise ValueError("similarities must be a (propositions x queries) matrix")
    mixed = mix_query_scores(
        sims[:, 0],
        [sims[:, j] for j in range(1, sims.shape[1])],
        tuning.original_weight,
        tuning.score_temperature,
    )
    return propagate(mixed, neighbors, tuning.propagation_weight)


def _advance(loop: _Loop, results: list[list[Passage]] | None) -> _Request | ReformulationResult:
    """The loop's next search request, or its result. StopIteration must not cross into an
    asyncio future (it cannot be raised there), hence the conversion."""
    try:
        with normalization_memo():  # one step's entity keys, memoised
            return next(loop) if results is None else loop.send(results)
    except StopIteration as done:
        result: ReformulationResult = done.value
        return result


def _deadline(config: ReformulationConfig) -> float | None:
    """The :func:`time.monotonic` time by which the residual searches must have answered
    (taken when the first search has)."""
    if config.search_timeout is None:
        return None
    return time.monotonic() + config.search_timeout


def _within_searches(
    state: _State, written: list[tuple[str, QueryKind, str]], config: ReformulationConfig
) -> list[tuple[str, QueryKind, str]]:
    """``written`` cut to the searches ``config.max_searches`` leaves (the queries already
    asked count, the first search included); a cut is noted."""
    if config.max_searches is None:
        return written
    room = max(0, config.max_searches - len(state.queries))
    if len(written) > room:
        state.notes.append(
            f"searches: {len(written) - room} residual quer(ies) not searched "
            f"({config.max_searches} searches per question, ReformulationConfig.max_searches)"
        )
    return written[:room]


def _finish(
    result: ReformulationResult,
    searching: float,
    started: float,
    given_up: Sequence[str],
    config: ReformulationConfig,
) -> ReformulationResult:
    if given_up:
        result.notes.append(
            f"searches: gave up {len(given_up)} residual search(es) after "
            f"{config.search_timeout:g} s (ReformulationConfig.search_timeout): "
            + ", ".join(repr(q) for q in given_up)
        )
    result.timings["search"] = searching
    result.timings["total"] = time.perf_counter() - started
    return result


__all__ = [
    "AsyncSearchFn",
    "EvidenceReformulator",
    "RetrievalError",
    "SearchFn",
    "chain_links",
    "rank_scores",
]
