"""Table 2's "w/o Constrained Decoding" ablation: ``ablation-free-decoding``.

The same beams, prompt and candidates as ``neocorrag-beam``, without the prefix trie (see
:class:`FreeDecodingAblation`). Its records carry :data:`FREE_DECODING_VERSION` with the
miner's output version.
"""

from __future__ import annotations

import time

from neocorrag_core.chains.keep import refine_passages
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval import refiners
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.eval.refiners import mining_info
from neocorrag_core.lm.generation import input_ids_tensor, neutral_settings
from neocorrag_core.rendering import render_chains
from neocorrag_core.types import EvidenceChain, Passage, Triple

FREE_DECODING_VERSION = "free-decoding-2"
"""Bumped when ``ablation-free-decoding`` changes what it hands the reader.
``free-decoding-2``: its chains are written in the run's ``chain_format`` (before: the
full block always)."""


def free_decoding_version(name: str) -> str:
    """What a cached ``ablation-free-decoding`` record depends on beyond the run settings:
    :data:`FREE_DECODING_VERSION` and the miner's output version (its defaults, such as
    the chain format, shape the context)."""
    return f"{FREE_DECODING_VERSION} {refiners.MINER_OUTPUT_VERSION}"


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
            question, passages, decoding="none", beam_width=self.miner.tuning.num_candidates
        )
        timings = dict(searched.timings)
        timings.pop("refine", None)
        info = mining_info(searched)
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
        kept, dropped = refine_passages(passages, chains, config.kept_top_n, keep="paper")
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
                question, entities, passages, self.miner.tuning, candidates
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


def build_free_decoding(name: str, context: BuildContext) -> FreeDecodingAblation:
    """Factory of ``ablation-free-decoding``."""
    return FreeDecodingAblation(context.miner)


__all__ = [
    "FREE_DECODING_VERSION",
    "FreeDecodingAblation",
    "build_free_decoding",
    "free_decoding_version",
    "hop_text",
]
