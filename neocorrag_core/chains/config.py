"""Configuration of the miner: :class:`MinerConfig`, what a user chooses, and
:class:`MinerTuning`, the research settings (the paper's other hyper-parameters, work caps,
prompt budgets, the Table 2 ablation switches) that the lab varies and a user rarely touches.

The search numbers follow NeocorRAG Table 5 (MuSiQue/2Wiki/HotpotQA column); decoding, the
keep rule and the chain format differ on purpose (see :class:`MinerConfig`). The two share no
field name: :func:`miner_settings` applies flat ``name=value`` changes to whichever has it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from neocorrag_core.errors import ConfigError
from neocorrag_core.lm.prompt_budget import (
    DEFAULT_PASSAGE_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    DEFAULT_QUESTION_TOKENS,
    DEFAULT_TITLE_TOKENS,
)
from neocorrag_core.types import CHAIN_FORMATS, ChainFormat
from neocorrag_core.validation import (
    Settings,
    check_bool,
    check_choice,
    check_int,
    check_number,
    with_changes,
)

DecodingMode = Literal["beam", "rank", "none"]
EntityMode = Literal["auto", "ngram", "spacy"]
SearchMode = Literal["activated", "naive"]
PromptContext = Literal["passages", "sentences"]
KeepMode = Literal["recall", "balanced", "precise", "paper"]
PassageFocus = Literal["none", "linked", "all"]

KEEP_MODES: dict[str, tuple[int, bool, bool, bool]] = {
    "recall": (2, False, True, True),
    "balanced": (1, False, True, True),
    "precise": (1, False, False, True),
    "paper": (2, True, False, False),
}
"""Keep mode -> (default top_n, keep chain-cited passages, keep query-entity passages, keep
bridge passages); read only by :func:`keep_rule`. The operating points each mode
reached on the dev split are in docs/benchmarks.md ("Refinement that keeps the evidence")."""


@dataclass(frozen=True)
class KeepRule:
    """What the keep stage keeps, decoded once from a keep mode and its overrides."""

    top_n: int
    """Passages kept by retrieval rank alone."""
    chain_sources: bool
    """Below the top-N, keep the passages a chosen chain cites."""
    query_entities: bool
    """Below the top-N, keep the passages about something the question names."""
    bridges: bool
    """Below the top-N, keep the passages linked to an anchor passage."""

    @property
    def uses_links(self) -> bool:
        """Whether the rule keeps passages by their links, which need no chain."""
        return self.query_entities or self.bridges


def keep_rule(
    keep: KeepMode, *, top_n: int | None = None, chain_support: bool | None = None
) -> KeepRule:
    """The rule keep mode ``keep`` runs: its defaults, with ``top_n`` and ``chain_support``
    (``None``: the mode's own) in their place. The one place the mode table is read."""
    default_top_n, chain_sources, query_entities, bridges = KEEP_MODES[keep]
    return KeepRule(
        top_n=default_top_n if top_n is None else top_n,
        chain_sources=chain_sources if chain_support is None else chain_support,
        query_entities=query_entities,
        bridges=bridges,
    )


@dataclass(frozen=True)
class MinerTuning(Settings):
    """The miner's research settings: what the paper fixes (Table 5) and the lab varies.

    ``EvidenceChainMiner(config, tuning=MinerTuning(...))`` takes them; the adapters leave them
    at these defaults (share such a miner with ``miner=``). The lab's methods and the eval's
    ``--miner KEY=VALUE`` name a field of either object (:func:`miner_settings`).

    Stage a (candidate search; thresholds are :class:`MinerConfig`'s)
        search: ``"activated"`` (the paper's pruned DFS with Eq. 5 scoring) or ``"naive"``
            (ablation "w/ Naive Chain Search", Table 2: no tau_edge pruning and no Eq. 5;
            paths from the seeds are enumerated breadth-first, shortest first, and the
            first ``num_candidates`` are kept, so the query steers only the seeds).
        max_path_length: L of Eq. 5; paths longer than L are penalised by alpha.
        alpha: attenuation per hop beyond L (Eq. 5 length penalty).
        beta: activation reward base per triple with similarity >= tau_boost (Eq. 5).
        max_hops: K, the DFS depth limit. The paper leaves K open; 4 covers the
            2-4 hop questions of MuSiQue/2Wiki/HotpotQA, deeper search only spends
            the work caps. Set it above ``max_path_length`` to let the penalty act.
        num_candidates: M, top-scored paths handed to decoding (Table 5: 60).
        seed_fallback_per_entity: when nothing reaches tau_node, the best-matching
            nodes taken per query entity (our documented fallback to Eq. 2).
        seed_fallback_min_similarity: a fallback seed must still be this similar.
        max_seeds: cap on seed nodes, best first.
        max_expansions: cap on DFS edge expansions per query, so a dense graph cannot hang.
        max_paths: cap on paths scored per query (the heap keeps the best M).

    Stage b (the decoding prompt, with ``decoding="beam"`` or ``"rank"``)
        include_passages_in_prompt: put the retrieved passages in the decoding
            prompt; measured to matter when candidates differ in one entity.
        prompt_passages: how many passages (best-ranked first) go into the decoding
            prompt (Table 5, "Number of GCD Docs": 5); bounds prefill cost when 20-50
            passages are retrieved.
        max_passage_chars: each passage is cut to this length in the prompt.
        prompt_context: ``"passages"`` shows each prompt passage cut to
            ``max_passage_chars``; ``"sentences"`` shows only its sentences that mention
            an entity of a candidate triple it supplied (its lead sentence when none
            does), which is what the LM needs to judge the candidates, in fewer tokens.
        rank_batch_size: candidates scored per forward pass in ``"rank"`` mode.
        max_question_tokens / max_title_tokens / max_passage_tokens: token budgets of the
            question, of each title and key entity, and of each passage's text in the
            prompt (:mod:`neocorrag_core.lm.prompt_budget`); longer text is cut with an
            ellipsis, so an 8,000-character question costs what a 128-token one does.
        max_prompt_tokens: the whole prompt's budget, lowered further so that prompt plus
            the longest candidate fit the model's context window; passages are dropped
            from the end until it fits, and when even none fit decoding takes the search
            order (``result.notes`` says so).

    Stage c (ablations of the keep rule)
        chain_support: keep the passages a chosen chain cites; ``None`` (default) = the
            keep mode's (only ``"paper"``).
        filter_passages: ``False`` is the ablation "w/o Document Filtering" (Table 2):
            every passage is kept (marked passthrough) and the chains are still added.
    """

    search: SearchMode = "activated"
    max_path_length: int = 10
    alpha: float = 0.9
    beta: float = 1.1
    max_hops: int = 4
    num_candidates: int = 60
    seed_fallback_per_entity: int = 2
    seed_fallback_min_similarity: float = 0.5
    max_seeds: int = 16
    max_expansions: int = 20_000
    max_paths: int = 20_000

    include_passages_in_prompt: bool = True
    prompt_passages: int = 5
    max_passage_chars: int = 700
    prompt_context: PromptContext = "passages"
    rank_batch_size: int = 16
    max_question_tokens: int = DEFAULT_QUESTION_TOKENS
    max_title_tokens: int = DEFAULT_TITLE_TOKENS
    max_passage_tokens: int = DEFAULT_PASSAGE_TOKENS
    max_prompt_tokens: int = DEFAULT_PROMPT_TOKENS

    chain_support: bool | None = None
    filter_passages: bool = True

    def __post_init__(self) -> None:
        owner = "MinerTuning"
        check_choice(owner, "search", self.search, ("activated", "naive"))
        check_number(owner, "seed_fallback_min_similarity", self.seed_fallback_min_similarity,
                     low=-1.0, high=1.0)  # fmt: skip
        check_number(owner, "alpha", self.alpha, low=0.0, high=1.0, low_open=True)
        check_number(owner, "beta", self.beta, low=1.0)
        for name in (
            "max_path_length",
            "max_hops",
            "num_candidates",
            "seed_fallback_per_entity",
            "max_seeds",
            "max_expansions",
            "max_paths",
            "prompt_passages",
            "max_passage_chars",
            "rank_batch_size",
            "max_question_tokens",
            "max_title_tokens",
            "max_passage_tokens",
            "max_prompt_tokens",
        ):
            check_int(owner, name, getattr(self, name), minimum=1)
        for name in ("include_passages_in_prompt", "filter_passages"):
            check_bool(owner, name, getattr(self, name))
        check_bool(owner, "chain_support", self.chain_support, optional=True)
        check_choice(owner, "prompt_context", self.prompt_context, ("passages", "sentences"))
        self._plain_numbers()

    def keeps_chain_sources(self, keep: KeepMode) -> bool:
        """``chain_support``, or the keep mode ``keep``'s default when it is ``None``."""
        return keep_rule(keep, chain_support=self.chain_support).chain_sources


@dataclass(frozen=True)
class MinerConfig(Settings):
    """What a user chooses: the keep dial, how chains are chosen, what the reader gets, and
    the thresholds on the embedder's cosine scale. Research settings: :class:`MinerTuning`.

    Keep (stage c)
        keep: the recall/noise dial; every mode keeps the top-N by retrieval rank.
            ``"recall"`` (default, top-N 2) adds the passages about a query entity and the
            bridge passages linked to the best-ranked or a query-entity passage (a shared
            entity, or that passage names its topic; see :mod:`neocorrag_core.chains.links`);
            ``"balanced"`` is the same with top-N 1; ``"precise"`` (top-N 1) adds bridges
            only; ``"paper"`` is Eq. 8 as published: top-N 2 plus the passages a chosen
            chain cites. For a question shaped like a comparison ("X or Y?", "Are X and
            Y both ...?") with two or more passages titled after what it names,
            ``"recall"`` and ``"balanced"`` keep only the top-1, those passages and the
            passages they name (``refine_passages(comparison=...)``). Chain-cited passages
            add noise but rarely a gold passage the links have not kept already, so only
            ``"paper"`` keeps them by default. When the search finds no chain, the
            link modes keep one more passage by rank and their links; ``"paper"`` passes
            everything through.
        top_n: passages kept by retrieval rank alone; ``None`` (default) = the keep
            mode's (Table 5: 2).

    Chains (stages a and b)
        decoding: ``"none"`` (default: the best candidates by search score, no LM),
            ``"beam"`` (the paper's trie-constrained beam search) or ``"rank"`` (exact
            length-normalized log-likelihood of every candidate). Neither LM mode keeps
            more gold passages or gives better answers than ``"none"``, so the LM is
            opt-in: the default needs no LM and mines in milliseconds.
        beam_width: k beams, and the number of chains returned (Table 5: 5).
        query_entities: how E_q is found: ``"ngram"`` (default: query n-grams matched to
            graph nodes plus capitalized spans; no dependency, under 1 ms), ``"spacy"``
            (adds spaCy NER, needs the spacy extra, ~10-30 ms per query on 2 CPU cores),
            ``"auto"`` (spaCy when a model is installed, else n-grams). The default does
            not depend on what happens to be installed, so results are reproducible.
        tau_node: Eq. 2 threshold on cos(node, aggregated query entities).
        tau_edge: Eq. 4 pruning threshold on cos(triple, query).
        tau_boost: Eq. 5 activation threshold; the paper requires tau_boost >= tau_edge.
            The three are cosines of the embedder in use: with another embedder than the
            bundled MiniLM, set them on its scale.

    What the reader gets
        passage_focus: ``"all"`` (default) cuts every kept passage to its lead sentence,
            the sentences naming a question entity, an entity it shares with another kept
            passage or an entity of a chosen chain's triple it supplied, and the sentences
            stating one of the question's relation words
            (:mod:`neocorrag_core.chains.focus`); the cut ones keep their whole text in
            ``KeptPassage.full_text``. ``"linked"`` cuts only the passages kept below the
            top-N (about a query entity, a bridge, chain-cited); ``"none"`` hands on every
            kept passage whole. ``"all"`` is the default because the reader then reads
            about a third fewer tokens than the retrieved passages at no loss of answers.
            The cut is a word rule: a sentence that neither names a kept entity nor
            repeats a relation word of the question is lost ("Its population was 1,458"
            for "How many people live in Stanley?", "He passed away in 1999" for "When
            did X die?"); use ``"none"`` where such answers matter.
        chain_format: how the chain block handed to the reader is written, if at all.
            ``"none"`` (default) hands the reader no block: ``result_context(result)`` is
            the kept passages, the adapters add no chain document and put the chain
            metadata on the first kept document. The chains still pick
            the evidence sentences the kept passages are cut to (``passage_focus``) and
            stay in ``result.chains`` and the metadata; which passages are kept does not
            depend on the format (with ``keep="recall"`` they are kept by rank and links;
            only ``keep="paper"`` keeps the passages a chain cites). Why not the paper's
            block: with extracted triples a chain is a lossy paraphrase the reader
            over-trusts ("Garajonay National Park - located in -> center" turned "Canary
            Islands" into "center"), and the block costs reader tokens without raising
            F1. The other formats write one: ``"linking"`` leaves out the chains that one
            kept passage states whole (the reader reads that passage anyway) and
            states each remaining fact once: what remains are the chains that connect
            passages and those with a fact of a dropped passage, and the block is empty
            when there are none; ``"compact"`` keeps every chain, each line holding only
            the steps no earlier line stated (a chain with nothing new gets no line);
            ``"full"`` writes every chain whole, as the paper does. With an empty block the
            adapters add no chain document. The chains themselves are the same in every
            case. At the same F1, linking costs the reader fewer tokens than compact, and
            compact fewer than full.
        max_chain_lines: at most this many lines in the chain block (default 2) when
            ``chain_format`` writes one: the lines of the best-scored chains it shows;
            ``None`` shows every line (``chain_format="full",
            max_chain_lines=None`` is the paper's block). The lines after the second are
            the leftover steps of low-scored chains ("Majhli Didi - is -> 1967 Bollywood
            film"). Two lines keep the whole block's F1 in fewer reader tokens; one line
            loses answers.
    """

    research: ClassVar[type[Settings] | None] = MinerTuning

    keep: KeepMode = "recall"
    top_n: int | None = None
    decoding: DecodingMode = "none"
    beam_width: int = 5
    query_entities: EntityMode = "ngram"
    tau_node: float = 0.90
    tau_edge: float = 0.45
    tau_boost: float = 0.45
    passage_focus: PassageFocus = "all"
    chain_format: ChainFormat = "none"
    max_chain_lines: int | None = 2

    def __post_init__(self) -> None:
        # Types and finiteness first (ConfigError), so NaN, 2.5 beams or "no" never reach a
        # comparison that would let them through or crash deep inside a call.
        owner = "MinerConfig"
        check_choice(owner, "keep", self.keep, KEEP_MODES)
        check_int(owner, "top_n", self.top_n, minimum=0, optional=True)
        check_choice(owner, "decoding", self.decoding, ("beam", "rank", "none"))
        check_int(owner, "beam_width", self.beam_width, minimum=1)
        check_choice(owner, "query_entities", self.query_entities, ("auto", "ngram", "spacy"))
        for name in ("tau_node", "tau_edge", "tau_boost"):
            check_number(owner, name, getattr(self, name), low=-1.0, high=1.0)
        if self.tau_boost < self.tau_edge:
            raise ConfigError(
                f"tau_boost ({self.tau_boost}) must be >= tau_edge ({self.tau_edge}), "
                "as the paper requires: only triples that pass pruning may earn the reward"
            )
        check_choice(owner, "passage_focus", self.passage_focus, ("none", "linked", "all"))
        check_choice(owner, "chain_format", self.chain_format, CHAIN_FORMATS)
        check_int(owner, "max_chain_lines", self.max_chain_lines, minimum=1, optional=True)
        self._plain_numbers()

    @property
    def kept_top_n(self) -> int:
        """``top_n``, or the keep mode's default when it is ``None``."""
        return keep_rule(self.keep, top_n=self.top_n).top_n

    @property
    def keeps_links(self) -> bool:
        """Whether the keep mode keeps passages by their links (query entity or bridge),
        which need no chain."""
        return keep_rule(self.keep).uses_links


def miner_settings(
    config: MinerConfig | None = None,
    tuning: MinerTuning | None = None,
    changes: Mapping[str, Any] | None = None,
) -> tuple[MinerConfig, MinerTuning]:
    """``config`` and ``tuning`` (defaults when ``None``) with the flat ``changes`` (field
    name -> value, of either class) applied: what a per-call override, the eval's ``--miner``
    and a lab method name. An unknown name is a :class:`ConfigError`."""
    return with_changes(config or MinerConfig(), tuning or MinerTuning(), changes or {})
