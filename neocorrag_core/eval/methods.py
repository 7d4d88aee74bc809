"""The methods compared on the same retrieved top-k: what each hands to the reader.

* ``none``: the retrieved passages unchanged.
* ``neocorrag-beam`` / ``-rank`` / ``-none``: the miner with that decoding mode; its
  kept passages plus the evidence chain block.
* Ablations of the paper's Table 2, all with beam decoding:
  ``ablation-naive-search`` (``MinerConfig.search="naive"``),
  ``ablation-free-decoding`` (beam search without the trie, see
  :class:`FreeDecodingAblation`), ``ablation-no-filter`` (``filter_passages=False``).
* LangChain baselines (imported only when asked for): ``lc-embeddings-filter``,
  ``lc-llm-filter`` and ``lc-llm-filter-logits``; see ``langchain_baselines``.
* EviReform methods, which search again instead of refining the top-k: ``evireform``,
  its controls ``evireform-repeat`` and ``evireform-rerank``, and ``evireform-neocorrag``;
  see ``evireform_methods``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from neocorrag_core.miner import EvidenceChainMiner
from neocorrag_core.refine import passthrough, refine_passages, render_chains
from neocorrag_core.types import EvidenceChain, MiningResult, Passage, Triple

METHODS: dict[str, str] = {
    "none": "no refinement: the retrieved top-k",
    "neocorrag-beam": "neocorrag, trie-constrained beam decoding",
    "neocorrag-rank": "neocorrag, exact candidate ranking",
    "neocorrag-none": "neocorrag, search scores only (no LM)",
    "ablation-naive-search": "neocorrag-beam with naive chain search (Table 2)",
    "ablation-free-decoding": "neocorrag-beam without constrained decoding (Table 2)",
    "ablation-no-filter": "neocorrag-beam without document filtering (Table 2)",
    "lc-embeddings-filter": "LangChain EmbeddingsFilter (same embedder)",
    "lc-llm-filter": "LangChain LLMChainFilter (same LM, generated YES/NO)",
    "lc-llm-filter-logits": "LLMChainFilter prompt, YES/NO read from next-token logits",
    "evireform": "EviReform: residual queries, mixing, propagation",
    "evireform-repeat": "EviReform control: the original question asked again",
    "evireform-rerank": "EviReform control: residual queries re-score the first pool only",
    "evireform-neocorrag": "EviReform top-k, then neocorrag-beam refinement",
}
EVIREFORM_METHOD_NAMES = (
    "evireform",
    "evireform-repeat",
    "evireform-rerank",
    "evireform-neocorrag",
)
NEOCORRAG_METHODS: dict[str, dict[str, Any]] = {
    "neocorrag-beam": {"decoding": "beam"},
    "neocorrag-rank": {"decoding": "rank"},
    "neocorrag-none": {"decoding": "none"},
    "ablation-naive-search": {"decoding": "beam", "search": "naive"},
    "ablation-no-filter": {"decoding": "beam", "filter_passages": False},
}
LANGCHAIN_METHODS = ("lc-embeddings-filter", "lc-llm-filter", "lc-llm-filter-logits")


@dataclass
class MethodOutput:
    """What a method gives the reader, and what producing it cost."""

    passages: list[Passage]
    chain_text: str = ""
    prompt_tokens: int = 0
    generated_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    """Refines a question's retrieved passages for the reader."""

    name: str

    def refine(self, question: str, passages: Sequence[Passage]) -> MethodOutput:
        """The reader's context for ``question`` from the retrieved ``passages``."""
        ...


class NoRefinement:
    """The baseline: the retrieved passages go to the reader unchanged."""

    name = "none"

    def refine(self, question: str, passages: Sequence[Passage]) -> MethodOutput:
        """Pass everything through."""
        return MethodOutput(list(passages))


def _mining_info(result: MiningResult) -> dict[str, Any]:
    return {
        "fallback": result.fallback,
        "seed_fallback": result.seed_fallback,
        "num_candidates": result.num_candidates,
        "num_chains": len(result.chains),
        "dropped": len(result.dropped),
    }


class NeocorragMethod:
    """The miner with per-method config overrides (decoding mode, ablation switches).

    Methods built together share ``memo``: the last mining result per question and
    config. ``filter_passages`` only changes stage c, so ``ablation-no-filter`` reuses
    the chains ``neocorrag-beam`` mined for the same question (decoding is
    deterministic, so they are the chains it would mine itself) and reports that
    call's tokens and timings as its own cost.
    """

    def __init__(
        self,
        name: str,
        miner: EvidenceChainMiner,
        memo: dict[Any, MiningResult] | None = None,
        **overrides: Any,
    ) -> None:
        self.name = name
        self.miner = miner
        self.overrides = overrides
        self.memo = memo if memo is not None else {}

    def _mine(self, question: str, passages: list[Passage]) -> MiningResult:
        filtered = {**self.overrides, "filter_passages": True}
        key = (question, tuple(p.id for p in passages), tuple(sorted(filtered.items())))
        if any(old[0] != question for old in self.memo):
            self.memo.clear()  # the runner goes question by question: keep memory flat
        result = self.memo.get(key)
        if result is None:
            result = self.miner.mine(question, passages, **filtered)
            self.memo[key] = result
            return result
        # A reused result: its recorded timings, not this call's ~0 s, are the method's cost.
        return replace(result, timings={**result.timings, "reused": 1.0})

    def refine(self, question: str, passages: Sequence[Passage]) -> MethodOutput:
        """Mine chains; the kept passages and the chain block go to the reader."""
        result = self._mine(question, list(passages))
        reused = result.timings.pop("reused", None) is not None
        if not self.overrides.get("filter_passages", True) and not result.fallback:
            result = replace(result, kept=passthrough(list(passages)), dropped=[])
        info = {**_mining_info(result), "reused_chains": reused}
        return MethodOutput(
            result.passages,
            result.chain_text,
            result.prompt_tokens,
            result.generated_tokens,
            dict(result.timings),
            info,
        )


def hop_text(triple: Triple) -> tuple[str, str]:
    """The two ways a triple appears inside a linearized chain (forward, backward)."""
    forward = f"{triple.subject} - {triple.relation} -> {triple.object}"
    backward = f"{triple.object} <- {triple.relation} - {triple.subject}"
    return forward, backward


class FreeDecodingAblation:
    """Table 2 "w/o Constrained Decoding": the same beams, prompt and candidates, no trie.

    The paper says removing the prefix-tree constraint "allows the generation of
    numerous unfaithful chains from the refined candidate set". So stage a runs as
    usual (activated search, the same candidates), then the LM generates
    ``beam_width`` chains with plain beam search from the same decoding prompt.
    The generated text goes to the reader as it is, unfaithful or not; for
    filtering, a passage supports a generated chain only if one of its candidate
    triples appears verbatim as a hop (``h - r -> t`` or ``t <- r - h``) in the text.
    We do not snap generations to the nearest candidate: that would be a
    different method. ``info["faithful"]`` counts generations equal to a candidate.
    """

    name = "ablation-free-decoding"

    def __init__(self, miner: EvidenceChainMiner, max_new_tokens: int = 64) -> None:
        self.miner = miner
        self.max_new_tokens = max_new_tokens

    def refine(self, question: str, passages: Sequence[Passage]) -> MethodOutput:
        """Search candidates, generate chains freely, filter by the hops they contain."""
        config = self.miner.config
        # decoding="none" with beam_width = M returns every candidate of stage a.
        searched = self.miner.mine(
            question, list(passages), decoding="none", beam_width=config.num_candidates
        )
        timings = dict(searched.timings)
        timings.pop("refine", None)
        info = _mining_info(searched)
        if searched.fallback:
            return MethodOutput(list(passages), timings=timings, info=info)
        started = time.perf_counter()
        texts, prompt_tokens, generated_tokens = self._generate(
            question, searched.query_entities, list(passages)
        )
        timings["decode"] = time.perf_counter() - started
        candidates = searched.chains
        triples = {t.key(): t for c in candidates for t in c.triples}.values()
        chains = [
            EvidenceChain(
                tuple(t for t in triples if any(h in text for h in hop_text(t))), text, 0.0
            )
            for text in texts
        ]
        started = time.perf_counter()
        kept, dropped = refine_passages(list(passages), chains, config.top_n)
        timings["refine"] = time.perf_counter() - started
        candidate_texts = {c.text for c in candidates}
        info.update(
            num_chains=len(chains),
            dropped=len(dropped),
            faithful=sum(text in candidate_texts for text in texts),
            generated_chains=texts,
        )
        return MethodOutput(
            [k.passage for k in kept],
            render_chains(chains),
            prompt_tokens,
            generated_tokens,
            timings,
            info,
        )

    def _generate(
        self, question: str, entities: list[str], passages: list[Passage]
    ) -> tuple[list[str], int, int]:
        import torch

        config, lm = self.miner.config, self.miner.lm
        with lm.lock:
            prompt = self.miner.decoding_prompt_ids(question, entities, passages, config)
            end_id = lm.end_of_turn_id
            inputs = torch.tensor([prompt])
            beams = max(2, config.beam_width)
            with torch.inference_mode():
                output = lm.model.generate(
                    inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    num_beams=beams,
                    num_return_sequences=config.beam_width,
                    early_stopping="never",
                    length_penalty=1.0,
                    repetition_penalty=1.0,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    eos_token_id=end_id,
                    pad_token_id=lm.tokenizer.pad_token_id or end_id,
                )
            steps = output.shape[1] - len(prompt)
            texts = []
            for row in output[:, len(prompt) :].tolist():
                raw = lm.tokenizer.decode(row, skip_special_tokens=True)
                line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
                if line and line not in texts:
                    texts.append(line)
        return texts, len(prompt), steps * beams


def build_methods(
    names: Sequence[str],
    miner: EvidenceChainMiner,
    *,
    embeddings_threshold: float = 0.5,
    evireform_overrides: dict[str, Any] | None = None,
) -> list[Method]:
    """Method objects for ``names`` (see :data:`METHODS`), sharing the miner's models."""
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise ValueError(
            f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}"
        )
    methods: list[Method] = []
    memo: dict[Any, MiningResult] = {}
    evireform: dict[str, Any] = {}
    if any(n in EVIREFORM_METHOD_NAMES for n in names):
        from neocorrag_core.eval.evireform_methods import build_evireform_methods
        from neocorrag_core.evireform import ReformulationConfig

        config = ReformulationConfig().with_overrides(**(evireform_overrides or {}))
        evireform = build_evireform_methods(names, miner, config)
    for name in names:
        if name in evireform:
            methods.append(evireform[name])
        elif name == "none":
            methods.append(NoRefinement())
        elif name in NEOCORRAG_METHODS:
            methods.append(NeocorragMethod(name, miner, memo, **NEOCORRAG_METHODS[name]))
        elif name == "ablation-free-decoding":
            methods.append(FreeDecodingAblation(miner))
        else:
            # LangChain is a benchmark-only dependency: imported only when its methods run.
            from neocorrag_core.eval import langchain_baselines

            methods.append(
                langchain_baselines.build(name, miner, embeddings_threshold=embeddings_threshold)
            )
    return methods


__all__ = [
    "LANGCHAIN_METHODS",
    "METHODS",
    "FreeDecodingAblation",
    "Method",
    "MethodOutput",
    "NeocorragMethod",
    "NoRefinement",
    "build_methods",
]
