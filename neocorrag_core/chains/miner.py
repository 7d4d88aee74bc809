"""``EvidenceChainMiner``: wires the three stages together; holds no algorithm of its own."""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any

from neocorrag_core.chains.config import MinerConfig, MinerTuning
from neocorrag_core.chains.diagnosis import loss_stages
from neocorrag_core.chains.focus import CUT_REASONS, focus_kept
from neocorrag_core.chains.graph import EvidenceGraph
from neocorrag_core.chains.keep import passthrough, rank_cut, refine_passages
from neocorrag_core.chains.links import is_comparison, link_passages
from neocorrag_core.chains.path_search import (
    naive_search_paths,
    search_paths,
    select_seeds,
    to_chain,
)
from neocorrag_core.chains.query_entities import QueryEntityExtractor
from neocorrag_core.errors import InputError, StoreError
from neocorrag_core.limits import (
    WorkLimits,
    cap_documents,
    cap_query,
    cap_titles,
    cap_triples,
    check_limits,
    collecting_notes,
    whole_titles,
    within_new_texts,
)
from neocorrag_core.lm.generation import text_token_ids
from neocorrag_core.lm.prompt_budget import (
    PromptTooLongError,
    TokenClipper,
    fit_prompt,
    prompt_limit,
)
from neocorrag_core.models import LazyModels, VectorCache, text_key
from neocorrag_core.text.entities import normalization_memo
from neocorrag_core.timing import timed
from neocorrag_core.triples import TripleSource
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.triples.precomputed import triple_source_or_default, vector_cache_of
from neocorrag_core.triples.vectors import graph_texts, triple_texts
from neocorrag_core.types import (
    DroppedPassage,
    EvidenceChain,
    MiningResult,
    Passage,
    Provenance,
    Triple,
)
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)


class EvidenceChainMiner:
    """Turns (question, retrieved passages) into evidence chains and a refined context.

    Args:
        config: what a user chooses (:class:`~neocorrag_core.chains.config.MinerConfig`: the
            keep dial, decoding, the reader's context, the thresholds; it says where the
            defaults differ from the paper's).
        tuning: the research settings (:class:`~neocorrag_core.chains.config.MinerTuning`:
            the paper's other hyper-parameters, work caps, prompt budgets, ablations).
        embedder: anything :func:`neocorrag_core.models.resolve_embedder` accepts;
            ``None`` means the bundled MiniLM.
        lm: anything :func:`neocorrag_core.models.resolve_lm` accepts; ``None`` means
            the bundled Qwen2.5-Coder-0.5B-Instruct. Never loaded when
            ``config.decoding == "none"``.
        triple_source: where triples come from; defaults to ``Passage.metadata["triples"]``.
        vectors: a persistent :class:`~neocorrag_core.models.VectorCache` for the vectors of
            node and triple texts (e.g. a :class:`~neocorrag_core.triples.store.TripleStore`).
            ``None``: the triple source's own (a
            :class:`~neocorrag_core.triples.DefaultTripleSource` keeps them in its store),
            else none. Only an embedder with an identity (the bundled MiniLM, a
            sentence-transformers folder or name) reads and writes it.
        limits: caps on what one call reads and embeds before the search
            (:class:`~neocorrag_core.limits.WorkLimits`; ``None``: the defaults).
        show_progress: show progress bars while the default models are prepared.

    Models are resolved on first use and cached on the instance, so constructing
    a miner is cheap and one miner can serve several adapters. It is thread-safe:
    models load once even when several threads ask at the same time, and the LM's
    lock serializes decoding. Pickling keeps the configuration and model specs but
    not the loaded models, which load again on first use.
    """

    def __init__(
        self,
        config: MinerConfig | None = None,
        *,
        tuning: MinerTuning | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        vectors: VectorCache | None = None,
        limits: WorkLimits | None = None,
        show_progress: bool = False,
    ) -> None:
        self.config = config or MinerConfig()
        self.tuning = tuning or MinerTuning()
        self.limits = check_limits(limits, "EvidenceChainMiner")
        self.triple_source = triple_source_or_default(triple_source, "EvidenceChainMiner")
        self.vectors = vector_cache_of(self.triple_source, vectors, "EvidenceChainMiner")
        self.models = LazyModels(embedder, lm, show_progress=show_progress)
        # One extractor per mode in use (a per-call ``query_entities`` override gets its
        # own, and its spaCy model loads once).
        self._extractors: dict[str, QueryEntityExtractor] = {}
        self._extractor(self.config.query_entities)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_extractors"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._extractors = {}
        self._extractor(self.config.query_entities)

    def _extractor(self, mode: str) -> QueryEntityExtractor:
        return self._extractors.setdefault(mode, QueryEntityExtractor(mode))

    def tuned(self, **research: Any) -> EvidenceChainMiner:
        """This miner with research settings changed (:class:`MinerTuning` fields), sharing
        its models, triple source and caches: how the lab runs an ablation beside the
        default (per-call overrides take ``config`` fields only)."""
        other = copy.copy(self)
        other.tuning = self.tuning.with_overrides(**research)
        return other

    def warm_up(self) -> None:
        """Load now what a call would load on first use: the embedder (and its first
        forward pass), the LM when the configuration decodes with one, the query-entity
        extractor, and the persistent vector cache (the triple store opens).

        Call it at service start so the first query costs what the next ones do; nothing
        else changes (calls work the same without it).
        """
        probe = "warm up"
        self.embedder.embed([probe])
        if self.config.decoding != "none":
            _ = self.lm
        self._extractor(self.config.query_entities)("warm up", [])
        identity = self.embedder.identity
        if self.vectors is not None and identity is not None:
            with suppress(StoreError):  # a cache that cannot open fails no call either
                self.vectors.get_vectors(identity, [text_key(probe)])

    @property
    def show_progress(self) -> bool:
        """Whether progress bars show while the default models are prepared."""
        return self.models.show_progress

    @property
    def embedder(self) -> Any:
        """The resolved :class:`~neocorrag_core.models.TextEmbedder` (loaded on first use)."""
        return self.models.embedder

    @property
    def lm(self) -> Any:
        """The resolved :class:`~neocorrag_core.models.LanguageModel` (loaded on first use)."""
        return self.models.lm

    def mine(
        self,
        query: str,
        passages: Sequence[Passage],
        *,
        diagnose: bool = False,
        provenance: Mapping[str, Provenance] | None = None,
        **overrides: Any,
    ) -> MiningResult:
        """Mine chains from ``passages`` (in retrieval order) and refine them for ``query``.

        Keyword overrides change fields of the miner's ``config`` for this call only, e.g.
        ``mine(q, ps, decoding="rank")``; a research setting (a
        :class:`~neocorrag_core.chains.config.MinerTuning` field) is a ``ConfigError``: it
        belongs to the miner, ``EvidenceChainMiner(config, tuning=...)``.

        Never returns an empty context for non-empty input: with no triples, the passages
        pass through unchanged; with no chain, the keep mode's link rules alone decide
        (``keep="paper"`` passes through); ``result.fallback`` says why either way.

        ``diagnose=True`` also says, for each dropped passage, at which stage the chain
        pipeline lost it (``DroppedPassage.stage``; what the benchmark reports); it is
        extra work a query does not need, so it is off by default.

        ``provenance`` (passage id -> :class:`~neocorrag_core.types.Provenance`) is what the
        retrieval step knows about the passages: a passage EviReform found on purpose, or
        that holds its selected evidence, is kept even when no link rule keeps it
        (:func:`~neocorrag_core.chains.keep.refine_passages`).
        """
        config = self.config.with_overrides(**overrides) if overrides else self.config
        query = _validate_inputs(query, passages)
        return self.mine_unchecked(
            query, list(passages), config, self.tuning, diagnose=diagnose, provenance=provenance
        )

    def mine_unchecked(
        self,
        query: str,
        passages: list[Passage],
        config: MinerConfig,
        tuning: MinerTuning | None = None,
        *,
        diagnose: bool = False,
        provenance: Mapping[str, Provenance] | None = None,
    ) -> MiningResult:
        """:meth:`mine` for a caller that checked its input where it received it (the
        adapters): ``query`` a non-empty string of valid Unicode, ``passages`` a list of
        :class:`~neocorrag_core.types.Passage` with unique ids, in retrieval order, and a
        ready ``config`` (``tuning``: the miner's when ``None``). Nothing is checked again."""
        timings: dict[str, float] = {}
        started = time.perf_counter()
        tuning = tuning or self.tuning
        # The work caps that bound (WorkLimits) are noted; entity keys are memoised per call.
        with collecting_notes() as capped, normalization_memo():
            read = cap_documents(passages, self.limits)
            asked = cap_query(query, self.limits)
            result = self._mine(asked, read, config, tuning, timings, diagnose, provenance or {})
        result.query = query
        _hand_back_whole(result, passages, len(read))
        if capped:
            result.notes = [*capped, *(n for n in result.notes if n not in capped)]
        timings["total"] = time.perf_counter() - started
        result.timings = timings
        return result

    def _mine(
        self,
        query: str,
        passages: list[Passage],
        config: MinerConfig,
        tuning: MinerTuning,
        timings: dict[str, float],
        diagnose: bool,
        provenance: Mapping[str, Provenance],
    ) -> MiningResult:
        def fallback(reason: str, num_candidates: int = 0, **extra: Any) -> MiningResult:
            return MiningResult(
                query, [], passthrough(passages), [], num_candidates, fallback=reason, **extra
            )

        if not passages:
            return MiningResult(query, [], [], [], 0, fallback="no_passages")

        with timed(timings, "triples"):
            # Bounded before anything is embedded: triples per passage and per call, then
            # the texts no cache holds (the embedder's work), lowest-ranked passages first.
            per_passage = cap_triples(
                triples_per_passage(self.triple_source, passages), self.limits
            )
            missing = self.embedder.missing(graph_texts(per_passage), cache=self.vectors)
            per_passage = within_new_texts(per_passage, missing, self.limits, triple_texts)
        # Past the store lookup (keyed on the whole title), the rules match a bounded title.
        passages = cap_titles(passages, self.limits)
        with timed(timings, "graph"):
            graph = EvidenceGraph.from_triples(t for ts in per_passage for t in ts)
        if not graph.triples:
            return fallback("no_triples")

        with timed(timings, "entities"):
            entities = self._extractor(config.query_entities)(query, graph.nodes)

        with timed(timings, "embed"):
            nodes = graph.nodes
            # Node and triple texts are the passages' own: their vectors persist (stored
            # passages were embedded when stored). The question and its entities are new.
            known = self.embedder.embed(
                [*(graph.surface[n] for n in nodes), *(t.text for t in graph.triples)],
                cache=self.vectors,
            )
            node_vecs, triple_vecs = known[: len(nodes)], known[len(nodes) :]
            asked = self.embedder.embed([query, *entities])
            query_vec, entity_vecs = asked[0], asked[1:]

        with timed(timings, "search"):
            seeds = select_seeds(nodes, node_vecs, entity_vecs, query_vec, config, tuning)
            # tuning.search == "naive" is the Table 2 ablation (unpruned BFS, no Eq. 5).
            search = search_paths if tuning.search == "activated" else naive_search_paths
            paths, stats = search(graph, seeds.nodes, triple_vecs, query_vec, config, tuning)
            candidates = _unique_by_text([to_chain(graph, p) for p in paths])
        notes: list[str] = []
        if stats.truncated:
            logger.info("chain search hit its work cap: %s", "; ".join(stats.notes))
            notes.append(f"chain search hit its work cap: {'; '.join(stats.notes)}")
        found: dict[str, Any] = {
            "query_entities": entities,
            "seed_nodes": [graph.surface[n] for n in seeds.nodes],
            "seed_fallback": seeds.fallback,
            "notes": notes,
        }

        def refine(chains: list[EvidenceChain], top_n: int, **extra: Any) -> MiningResult:
            """Stage c on ``chains`` (none when the search or decoding found none)."""
            with timed(timings, "refine"):
                links = link_passages(query, entities, passages, per_passage)
                comparison = is_comparison(query)
                kept, dropped = refine_passages(
                    passages,
                    chains,
                    top_n,
                    keep=config.keep,
                    links=links,
                    chain_support=tuning.keeps_chain_sources(config.keep),
                    comparison=comparison,
                    provenance=provenance,
                )
                if not tuning.filter_passages:  # Table 2 ablation: chains added, nothing dropped
                    kept, dropped = passthrough(passages), []
                triples_by_id: dict[str, Sequence[Triple]] = {
                    p.id: ts for p, ts in zip(passages, per_passage, strict=True)
                }
                if diagnose and dropped:
                    stages = loss_stages(
                        [d.passage for d in dropped],
                        triples_by_id,
                        graph,
                        seeds.nodes,
                        triple_vecs @ query_vec,
                        candidates,
                        chains,
                        # Naive search walks every edge: nothing it misses was pruned.
                        tau_edge=config.tau_edge if tuning.search != "naive" else -math.inf,
                        max_hops=tuning.max_hops,
                    )
                    dropped = [replace(d, stage=stages.get(d.passage.id)) for d in dropped]
                if config.passage_focus in CUT_REASONS:
                    cut = CUT_REASONS[config.passage_focus]
                    kept = focus_kept(kept, triples_by_id, entities, chains, query, cut)
            return MiningResult(
                query,
                chains,
                kept,
                dropped,
                len(candidates),
                candidates=candidates,
                chain_format=config.chain_format,
                max_chain_lines=config.max_chain_lines,
                top_n=rank_cut(top_n, keep=config.keep, links=links, comparison=comparison),
                **found,
                **extra,
            )

        # Without a chain, the keep modes that need none (query-entity and bridge links)
        # still apply, with one more passage kept by rank: the question's entities reached
        # no chain, so the retriever's order is trusted one step further (the plain top-N
        # with links loses gold passages that passing everything through would keep).
        # Eq. 8 (keep="paper") needs chains, so it passes everything through.
        # ``fallback`` says why no chain.
        def no_chain(reason: str, **cost: Any) -> MiningResult:
            if config.keeps_links:
                return refine([], config.kept_top_n + 1, fallback=reason, **cost)
            return fallback(reason, len(candidates), **found, **cost)

        if not seeds.nodes:
            return no_chain("no_seed_nodes")
        if not candidates:
            return no_chain("no_candidate_chains")

        with timed(timings, "decode"):
            chains, prompt_tokens, generated_tokens = self._decode(
                query, entities, passages, candidates, config, tuning, notes
            )
        cost = {"prompt_tokens": prompt_tokens, "generated_tokens": generated_tokens}
        if not chains:
            return no_chain("decoding_returned_no_chain", **cost)
        return refine(chains, config.kept_top_n, **cost)

    def decoding_prompt_ids(
        self,
        query: str,
        entities: list[str],
        passages: list[Passage],
        tuning: MinerTuning,
        candidates: Sequence[EvidenceChain] = (),
        *,
        reserve: int = 0,
    ) -> list[int]:
        """Stage b's prompt (question, entities, top passages) as ``tuning`` shapes it.

        Every piece is cut to its token budget; passages are dropped from the end until the
        prompt fits ``max_prompt_tokens`` and, with ``reserve`` more tokens (the longest
        candidate), the model's context window; :class:`PromptTooLongError` when none fits.
        With ``prompt_context="sentences"`` each passage shows only the sentences that
        mention an entity of a candidate triple it supplied. Callers must hold
        ``self.lm.lock``: the tokenizer is shared between threads.
        """
        from neocorrag_core.chains.decoding import build_prompt_ids

        lm = self.lm
        clip = TokenClipper.for_config(lm.tokenizer, tuning)
        focus = candidate_focus(candidates) if tuning.prompt_context == "sentences" else None
        shown = passages[: tuning.prompt_passages] if tuning.include_passages_in_prompt else []

        def build(n: int) -> list[int]:
            return build_prompt_ids(
                lm,
                query,
                entities,
                shown[:n],
                max_passage_chars=tuning.max_passage_chars,
                include_passages=n > 0,
                focus=focus,
                clip=clip,
            )

        limit = prompt_limit(lm, tuning.max_prompt_tokens, reserve)
        ids, used = fit_prompt(build, len(shown), limit)
        if used < len(shown):
            logger.info("decoding prompt: %d of %d passages fit %d tokens", used, len(shown), limit)
        return ids

    def _decode(
        self,
        query: str,
        entities: list[str],
        passages: list[Passage],
        candidates: list[EvidenceChain],
        config: MinerConfig,
        tuning: MinerTuning,
        notes: list[str],
    ) -> tuple[list[EvidenceChain], int, int]:
        """Stage b: pick chains among the candidates; returns (chains, prompt, generated tokens)."""
        if config.decoding == "none":
            return candidates[: config.beam_width], 0, 0
        from neocorrag_core.chains.decoding import beam_decode, rank_candidates

        lm = self.lm
        texts = [c.text for c in candidates]
        # One lock around the whole stage: the tokenizer and the model are shared by every
        # thread (async adapters run mining in worker threads), and neither is safe to share.
        with lm.lock:
            longest = max(len(text_token_ids(lm.tokenizer, t)) for t in texts) + 1
            try:
                prompt_ids = self.decoding_prompt_ids(
                    query, entities, passages, tuning, candidates, reserve=longest
                )
            except PromptTooLongError as err:
                notes.append(f"decoding used the search order: {err}")
                return candidates[: config.beam_width], 0, 0
            if config.decoding == "beam":
                output = beam_decode(lm, prompt_ids, texts, num_beams=config.beam_width)
            else:
                output = rank_candidates(
                    lm,
                    prompt_ids,
                    texts,
                    top_k=config.beam_width,
                    batch_size=tuning.rank_batch_size,
                )
        chains = [replace(candidates[c.index], lm_logprob=c.logprob) for c in output.choices]
        return chains, output.prompt_tokens, output.generated_tokens


def _hand_back_whole(result: MiningResult, passages: Sequence[Passage], read: int) -> None:
    """``result`` as the caller gave its passages: whole titles where
    :func:`~neocorrag_core.limits.cap_titles` cut them, and the documents past
    ``WorkLimits.max_documents`` (the first ``read`` were read) dropped, unread."""
    given = {p.id: p for p in passages[:read]}
    kept = whole_titles([k.passage for k in result.kept], given)
    result.kept = [
        k if p is k.passage else replace(k, passage=p)
        for k, p in zip(result.kept, kept, strict=True)
    ]
    dropped = whole_titles([d.passage for d in result.dropped], given)
    result.dropped = [
        d if p is d.passage else replace(d, passage=p)
        for d, p in zip(result.dropped, dropped, strict=True)
    ]
    result.dropped += [
        DroppedPassage(p, rank) for rank, p in enumerate(passages[read:], start=read + 1)
    ]


def _validate_inputs(query: str, passages: Sequence[Passage]) -> str:
    """The query to mine for, lone surrogates replaced by U+FFFD (:func:`clean_text`: the
    embedder's and the LM's tokenizers cannot take them), or an :class:`InputError` for a
    query or passages the miner cannot use. Passages cleaned their own text when built."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("query must be a non-empty string")
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise InputError("passages must be a sequence of Passage objects, in retrieval order")
    ids: set[str] = set()
    for i, passage in enumerate(passages):
        if not isinstance(passage, Passage):
            raise InputError(
                f"passages[{i}] is a {type(passage).__name__}; wrap documents as "
                "neocorrag_core.Passage(id=..., text=...)"
            )
        if passage.id in ids:
            raise InputError(
                f"duplicate passage id {passage.id!r}: ids must be unique, since kept passages "
                "are found by which passage a chain's triples came from"
            )
        ids.add(passage.id)
    return clean_text(query)


def _unique_by_text(chains: list[EvidenceChain]) -> list[EvidenceChain]:
    seen: set[str] = set()
    unique: list[EvidenceChain] = []
    for chain in chains:
        if chain.text not in seen:
            seen.add(chain.text)
            unique.append(chain)
    return unique


def candidate_focus(candidates: Sequence[EvidenceChain]) -> dict[str, list[str]]:
    """Passage id -> the entities of the candidate triples it supplied (first-seen order)."""
    focus: dict[str, list[str]] = {}
    for chain in candidates:
        for triple in chain.triples:
            for pid in triple.source_ids:
                names = focus.setdefault(pid, [])
                for name in (triple.subject, triple.object):
                    if name not in names:
                        names.append(name)
    return focus


__all__ = ["EvidenceChainMiner", "candidate_focus"]
