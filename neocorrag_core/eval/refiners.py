"""The benchmark methods that refine the shared top-k (registered in ``registry``).

* ``none``: the retrieved passages unchanged.
* ``top-2`` / ``top-3`` / ``top-4``: plain truncation by retrieval rank (a peer baseline).
* ``neocorrag-beam`` / ``-rank`` / ``-none``: the miner with that decoding mode; its
  kept passages plus the evidence chain block the run's ``chain_format`` writes (none by
  default since ``miner-8``; ``--miner chain_format=full max_chain_lines=None`` gives the
  paper's block, for its Table 2).
* ``neocorrag-recall`` / ``-balanced`` / ``-precise`` / ``-paper``: the miner at each
  setting of the recall/noise dial (``MinerConfig.keep``), default decoding;
  ``neocorrag-recall-full-chains``: the default with the paper's full chain block
  (``chain_format="full"``) and ``neocorrag-recall-no-chains`` without a chain block
  (``"none"``), to measure what the compact block saves and what the block buys;
  ``neocorrag-recall-linking-chains``: only the chains that no kept passage states whole
  (``"linking"``, the default format of ``miner-4`` to ``miner-7``, named for runs that
  compare formats);
  ``neocorrag-recall-compact-chains``: every chain, each fact once (``"compact"``, the
  default before); these three show every line of their block (``max_chain_lines=None``,
  the default before ``miner-7``), so they compare formats alone;
  ``neocorrag-recall-one-chain`` / ``-two-chains``: the linking block cut to its first
  line / two lines (``max_chain_lines``; two lines of it were the default block of
  ``miner-7``; since ``miner-8`` the default has no block, so ``-two-chains`` is the
  miner-7 default and ``-no-chains`` the same context as ``neocorrag-recall``);
  ``neocorrag-recall-focused`` (``-no-chains``): the passages kept below the top-N cut to
  their evidence sentences (``passage_focus="linked"``, the default of ``miner-5``), with
  the default block (without a block; the compact block until ``miner-4``, none since
  ``miner-8``);
  ``neocorrag-recall-focused-all``: every kept passage cut (``passage_focus="all"``, the
  default since ``miner-6``); ``neocorrag-recall-whole``: every kept passage whole
  (``passage_focus="none"``, the default before ``miner-5``).
* Since ``miner-6`` every miner method above cuts its kept passages to their evidence
  sentences (the default ``passage_focus="all"``) except ``neocorrag-recall-whole``;
  ``ablation-free-decoding`` keeps whole passages (it refines without the miner), so
  compare it with ``--miner passage_focus=none`` runs, and ``neocorrag-paper`` is Eq. 8's
  keep rule with the cut, not the published context.
* Ablations of the paper's Table 2, all with beam decoding:
  ``ablation-naive-search`` (``MinerConfig.search="naive"``),
  ``ablation-free-decoding`` (beam search without the trie, see
  :class:`FreeDecodingAblation`), ``ablation-no-filter`` (``filter_passages=False``).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from neocorrag_core.chains.config import KEEP_MODES, MinerConfig
from neocorrag_core.chains.focus import CUT_REASONS, FOCUS_RULES
from neocorrag_core.chains.keep import passthrough, refine_passages
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.lm.generation import input_ids_tensor, neutral_settings
from neocorrag_core.rendering import render_chains
from neocorrag_core.types import EvidenceChain, MiningResult, Passage, Triple

NEOCORRAG_METHODS: dict[str, dict[str, Any]] = {
    "neocorrag-beam": {"decoding": "beam"},
    "neocorrag-rank": {"decoding": "rank"},
    "neocorrag-none": {"decoding": "none"},
    **{f"neocorrag-{mode}": {"keep": mode} for mode in KEEP_MODES},
    "ablation-naive-search": {"decoding": "beam", "search": "naive"},
    "ablation-no-filter": {"decoding": "beam", "filter_passages": False},
    "neocorrag-recall-full-chains": {
        "keep": "recall",
        "chain_format": "full",
        "max_chain_lines": None,
    },
    "neocorrag-recall-no-chains": {"keep": "recall", "chain_format": "none"},
    "neocorrag-recall-linking-chains": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": None,
    },
    "neocorrag-recall-compact-chains": {
        "keep": "recall",
        "chain_format": "compact",
        "max_chain_lines": None,
    },
    "neocorrag-recall-one-chain": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": 1,
    },
    "neocorrag-recall-two-chains": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": 2,
    },
    "neocorrag-recall-whole": {"keep": "recall", "passage_focus": "none"},
    "neocorrag-recall-focused": {"keep": "recall", "passage_focus": "linked"},
    "neocorrag-recall-focused-all": {"keep": "recall", "passage_focus": "all"},
    "neocorrag-recall-focused-no-chains": {
        "keep": "recall",
        "passage_focus": "linked",
        "chain_format": "none",
    },
}
"""The miner's per-method config overrides."""


MINER_OUTPUT_VERSION = "miner-8"
"""Bumped when a default of the miner changes what it hands the reader (a keep rule, the
chain block), so the cached records of every miner method rerun; a new setting that is
off by default needs no bump. ``miner-1``: the compact chain block; ``miner-2``: Latin
accents folded in entity keys, link keep rules applied when no chain is found;
``miner-3``: comparison questions keep the compared passages (``refine_passages``);
``miner-4``: the linking chain block (``chain_format="linking"``) by default;
``miner-5``: linked passages cut to their evidence sentences
(``passage_focus="linked"``) by default; ``miner-6``: every kept passage cut
(``passage_focus="all"``) by default; ``miner-7``: at most two chain lines
(``max_chain_lines=2``) by default; ``miner-8``: no chain block (``chain_format="none"``)
by default."""


FREE_DECODING_VERSION = "free-decoding-2"
"""Bumped when ``ablation-free-decoding`` changes what it hands the reader.
``free-decoding-2``: its chains are written in the run's ``chain_format`` (before: the
full block always)."""


def free_decoding_version(name: str) -> str:
    """What a cached ``ablation-free-decoding`` record depends on beyond the run settings:
    :data:`FREE_DECODING_VERSION` and the miner's output version (its defaults, such as
    the chain format, shape the context)."""
    return f"{FREE_DECODING_VERSION} {MINER_OUTPUT_VERSION}"


def method_version(name: str) -> str:
    """What a cached record of miner method ``name`` depends on beyond the run settings:
    :data:`MINER_OUTPUT_VERSION`, the method's own config changes and, for a method that
    cuts passages, the sentence rules (:data:`~neocorrag_core.chains.focus.FOCUS_RULES`)."""
    overrides = NEOCORRAG_METHODS[name]
    version = f"{MINER_OUTPUT_VERSION} {json.dumps(overrides, sort_keys=True)}"
    if MinerConfig().with_overrides(**overrides).passage_focus in CUT_REASONS:
        return f"{version} {FOCUS_RULES}"
    return version


class Truncation:
    """Peer baseline: the first ``n`` passages by retrieval rank (what a smaller k gives)."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def refine(self, call: MethodInput) -> MethodOutput:
        """Keep the best-ranked ``n``."""
        return MethodOutput(list(call.passages[: self.n]))


class NoRefinement:
    """The baseline: the retrieved passages go to the reader unchanged."""

    name = "none"

    def refine(self, call: MethodInput) -> MethodOutput:
        """Pass everything through."""
        return MethodOutput(list(call.passages))


def _mining_info(result: MiningResult) -> dict[str, Any]:
    return {
        "fallback": result.fallback,
        "seed_fallback": result.seed_fallback,
        "num_candidates": result.num_candidates,
        "num_chains": len(result.chains),
        "dropped": len(result.dropped),
        # Per passage: why it was kept, and where the chain pipeline lost a dropped one
        # (the runner turns these into the loss diagnosis of the gold passages).
        "keep_reasons": {k.passage.id: k.reason.value for k in result.kept},
        "drop_stages": {
            d.passage.id: d.stage.value if d.stage is not None else "unknown"
            for d in result.dropped
        },
    }


_BLOCK = ("chain_format", "max_chain_lines")
"""The config fields that only change how the chain block is written (``MiningResult``
carries both), not what is mined."""


class NeocorragMethod:
    """The miner with per-method config overrides (decoding mode, ablation switches).

    Methods built together share ``memo``: the last mining result per question and
    config. ``filter_passages`` only changes stage c and ``chain_format`` and
    ``max_chain_lines`` only the chain block, so ``ablation-no-filter`` reuses the chains
    ``neocorrag-beam`` mined for the same question, and ``neocorrag-recall-full-chains``
    those of ``neocorrag-recall`` (decoding is deterministic, so they are the chains it
    would mine itself); each reports that call's tokens and timings as its own cost.
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
        # None of these switches changes the mining: stage c's ablation and the chain
        # block's format and line cap are applied to the shared result.
        shared = {**self.overrides, "filter_passages": True}
        block = {name: shared.pop(name, getattr(self.miner.config, name)) for name in _BLOCK}
        key = (question, tuple(p.id for p in passages), tuple(sorted(shared.items())))
        if any(old[0] != question for old in self.memo):
            self.memo.clear()  # the runner goes question by question: keep memory flat
        result = self.memo.get(key)
        if result is None:
            result = self.miner.mine(question, passages, diagnose=True, **shared)
            self.memo[key] = result
            return replace(result, **block)
        # A reused result: its recorded timings, not this call's ~0 s, are the method's cost.
        timings = {**result.timings, "reused": 1.0}
        return replace(result, timings=timings, **block)

    def refine(self, call: MethodInput) -> MethodOutput:
        """Mine chains; the kept passages and the chain block go to the reader."""
        passages = list(call.passages)
        result = self._mine(call.question, passages)
        reused = result.timings.pop("reused", None) is not None
        if not self.overrides.get("filter_passages", True):
            # The ablation hands the reader every passage, with or without a chain.
            result = replace(result, kept=passthrough(passages), dropped=[])
        info = {**_mining_info(result), "reused_chains": reused}
        return MethodOutput(
            passages=result.passages,
            chain_text=result.chain_text,
            prompt_tokens=result.prompt_tokens,
            generated_tokens=result.generated_tokens,
            timings=dict(result.timings),
            info=info,
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

    def refine(self, call: MethodInput) -> MethodOutput:
        """Search candidates, generate chains freely, filter by the hops they contain."""
        question, passages = call.question, list(call.passages)
        config = self.miner.config
        # decoding="none" with beam_width = M returns every candidate of stage a.
        searched = self.miner.mine(
            question, passages, decoding="none", beam_width=config.num_candidates
        )
        timings = dict(searched.timings)
        timings.pop("refine", None)
        info = _mining_info(searched)
        if searched.fallback:
            return MethodOutput(passages=passages, timings=timings, info=info)
        started = time.perf_counter()
        candidates = searched.chains
        texts, prompt_tokens, generated_tokens = self._generate(
            question, searched.query_entities, passages, candidates
        )
        timings["decode"] = time.perf_counter() - started
        triples = {t.key(): t for c in candidates for t in c.triples}.values()
        chains = [
            EvidenceChain(
                tuple(t for t in triples if any(h in text for h in hop_text(t))), text, 0.0
            )
            for text in texts
        ]
        started = time.perf_counter()
        kept, dropped = refine_passages(passages, chains, config.kept_top_n)
        timings["refine"] = time.perf_counter() - started
        candidate_texts = {c.text for c in candidates}
        info.update(
            num_chains=len(chains),
            dropped=len(dropped),
            faithful=sum(text in candidate_texts for text in texts),
            generated_chains=texts,
        )
        # The generated chains reach the reader in the run's chain format, as the miner
        # methods' chains do (none by default since miner-8; the paper's Table 2 puts them
        # in the context: --miner chain_format=full max_chain_lines=None).
        block = render_chains(
            chains,
            chain_format=config.chain_format,
            kept_ids=[k.passage.id for k in kept],
            max_lines=config.max_chain_lines,
        )
        return MethodOutput(
            passages=[k.passage for k in kept],
            chain_text=block,
            prompt_tokens=prompt_tokens,
            generated_tokens=generated_tokens,
            timings=timings,
            info=info,
        )

    def _generate(
        self,
        question: str,
        entities: list[str],
        passages: list[Passage],
        candidates: list[EvidenceChain],
    ) -> tuple[list[str], int, int]:
        import torch

        config, lm = self.miner.config, self.miner.lm
        with lm.lock:
            prompt = self.miner.decoding_prompt_ids(
                question, entities, passages, config, candidates
            )
            end_id = lm.end_of_turn_id
            inputs = input_ids_tensor(lm, [prompt])
            beams = max(2, config.beam_width)
            with torch.inference_mode():
                output = lm.model.generate(
                    inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=self.max_new_tokens,
                    num_beams=beams,
                    num_return_sequences=config.beam_width,
                    eos_token_id=end_id,
                    pad_token_id=lm.tokenizer.pad_token_id or end_id,
                    **neutral_settings(beams=True),
                )
            steps = output.shape[1] - len(prompt)
            texts = []
            for row in output[:, len(prompt) :].tolist():
                raw = lm.tokenizer.decode(row, skip_special_tokens=True)
                line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
                if line and line not in texts:
                    texts.append(line)
        return texts, len(prompt), steps * beams


def build_none(name: str, context: BuildContext) -> NoRefinement:
    """Factory of ``none``."""
    return NoRefinement()


def build_truncation(name: str, context: BuildContext) -> Truncation:
    """Factory of ``top-2`` / ``top-3`` / ``top-4`` (the number is read from the name)."""
    return Truncation(name, int(name.removeprefix("top-")))


def build_miner(name: str, context: BuildContext) -> NeocorragMethod:
    """Factory of the miner variants (:data:`NEOCORRAG_METHODS`); they share one memo."""
    memo: dict[Any, MiningResult] = context.shared.setdefault("mining_memo", {})
    return NeocorragMethod(name, context.miner, memo, **NEOCORRAG_METHODS[name])


def build_free_decoding(name: str, context: BuildContext) -> FreeDecodingAblation:
    """Factory of ``ablation-free-decoding``."""
    return FreeDecodingAblation(context.miner)


__all__ = [
    "FREE_DECODING_VERSION",
    "MINER_OUTPUT_VERSION",
    "NEOCORRAG_METHODS",
    "FreeDecodingAblation",
    "NeocorragMethod",
    "NoRefinement",
    "Truncation",
    "build_free_decoding",
    "build_miner",
    "build_none",
    "build_truncation",
    "free_decoding_version",
    "hop_text",
    "method_version",
]
