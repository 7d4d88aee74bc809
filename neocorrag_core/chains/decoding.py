"""Stage b: an LM picks evidence chains, constrained so every result is an exact candidate.

Two decoders share one contract: whatever they return is the index of one of the caller's
candidate strings, byte for byte, with a length-normalised log-probability (sum of the token
log-probs of the candidate and the end-of-turn token, divided by that number of tokens).

* :func:`beam_decode` runs Hugging Face beam search with a token trie as the prefix
  constraint, then re-checks every returned sequence against the trie and drops anything
  that is not exactly a candidate. It never returns unconstrained text; if generation fails
  or yields nothing valid it falls back to :func:`rank_candidates`.
* :func:`rank_candidates` scores every candidate exactly, reusing the prompt's KV cache.

Token accounting (``DecodingOutput.prompt_tokens`` / ``generated_tokens``):

* beam: ``prompt_tokens`` = prompt length (encoded once; its cache is shared by the beams);
  ``generated_tokens`` = decoding steps actually run × beams run.
* rank: ``prompt_tokens`` = prompt length + every candidate token scored (end tokens
  included); ``generated_tokens`` = 0.
* a beam run that fell back to rank reports the sum of both.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neocorrag_core.lm.generation import (
    chat_prompt_ids,
    model_device,
    neutral_settings,
    text_token_ids_batch,
)
from neocorrag_core.lm.prompt_budget import Clip, PieceKind
from neocorrag_core.models import LanguageModel, end_of_turn_token_id
from neocorrag_core.rendering import flatten, focus_text
from neocorrag_core.types import Passage

logger = logging.getLogger(__name__)

# HF beam search marks impossible beams with -1e9 offsets; a real log-prob sum never gets here.
_BOGUS_SUM = -1.0e8


class TokenTrie:
    """A prefix tree over candidate token sequences, so decoding can only spell out candidates."""

    __slots__ = ("_root",)

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        """Index ``sequences``; a sequence seen twice keeps the index of its first occurrence."""
        self._root = _TrieNode()
        for index, sequence in enumerate(sequences):
            node = self._root
            for token in sequence:
                token = int(token)
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _TrieNode()
                node = child
            if node.index is None:
                node.index = index

    def _walk(self, sequence: Sequence[int]) -> _TrieNode | None:
        """The node reached by ``sequence`` from the root, or None when it leaves the trie."""
        node: _TrieNode | None = self._root
        for token in sequence:
            node = node.children.get(int(token))  # type: ignore[union-attr]
            if node is None:
                return None
        return node

    def allowed_next(self, prefix: Sequence[int]) -> list[int]:
        """Tokens that continue ``prefix`` towards some candidate ([] if the prefix is unknown)."""
        node = self._walk(prefix)
        return [] if node is None else list(node.children)

    def lookup(self, sequence: Sequence[int]) -> int | None:
        """Index of the candidate whose full token sequence is exactly ``sequence``, else None."""
        node = self._walk(sequence)
        return None if node is None else node.index


@dataclass
class _TrieNode:
    """One trie node: its children by token id and the candidate index ending here, if any."""

    children: dict[int, _TrieNode] = field(default_factory=dict)
    index: int | None = None


@dataclass(frozen=True)
class DecodedChoice:
    """One chosen candidate: its index in the caller's list and its length-normalised log-prob."""

    index: int
    logprob: float


@dataclass
class DecodingOutput:
    """The chosen candidates (best first, distinct indices) and what choosing them cost."""

    choices: list[DecodedChoice]
    prompt_tokens: int
    generated_tokens: int


# ----------------------------------------------------------------------------- prompt


def build_prompt_ids(
    lm: LanguageModel,
    question: str,
    entities: Sequence[str],
    passages: Sequence[Passage],
    *,
    max_passage_chars: int = 700,
    include_passages: bool = True,
    focus: Mapping[str, Sequence[str]] | None = None,
    clip: Clip | None = None,
) -> list[int]:
    """Token ids of the instruction after which the candidate chain tokens are appended.

    ``focus`` (passage id -> entity names) shows each passage as only the sentences that
    mention its names (:func:`~neocorrag_core.rendering.focus_text`); ``None`` shows the
    passages cut to ``max_passage_chars``. ``clip`` cuts the question, each entity, title
    and passage to its token budget (:class:`~neocorrag_core.lm.prompt_budget.TokenClipper`).
    """
    text = _prompt_text(
        question,
        entities,
        passages if include_passages else (),
        max_passage_chars=max_passage_chars,
        focus=focus,
        clip=clip,
    )
    return chat_prompt_ids(lm, text, plain_suffix="\nEvidence chain:\n")


def _prompt_text(
    question: str,
    entities: Sequence[str],
    passages: Sequence[Passage],
    *,
    max_passage_chars: int,
    focus: Mapping[str, Sequence[str]] | None = None,
    clip: Clip | None = None,
) -> str:
    """The instruction body: task, question, key entities and the numbered, cut passages."""
    lines = [
        "Write the evidence chain that answers and supports the question below.",
        "An evidence chain links facts from a knowledge graph in the form "
        "`entity - relation -> entity - relation -> entity`.",
    ]
    if passages:
        lines.append("Use the facts stated in the passages.")
    lines += ["", f"Question: {_piece(question, 'question', clip)}"]
    names = [_piece(e, "entity", clip) for e in entities if e and e.strip()]
    if clip is not None:  # the entities of a huge question share the question's budget
        names = [clip("; ".join(names), "question")] if names else []
    if names:
        lines.append(f"Key entities: {'; '.join(names)}")
    if passages:
        lines += ["", "Passages:", *numbered_passages(passages, max_passage_chars, focus, clip)]
    lines += ["", "Reply with the evidence chain only."]
    return "\n".join(lines)


def numbered_passages(
    passages: Sequence[Passage],
    max_passage_chars: int,
    focus: Mapping[str, Sequence[str]] | None = None,
    clip: Clip | None = None,
) -> list[str]:
    """Prompt lines ``[n] title: text``, each passage's text flattened and cut to
    ``max_passage_chars`` characters (:func:`~neocorrag_core.rendering.flatten`; with
    ``focus``: only its sentences that mention the names given for its id) and, with
    ``clip``, to its token budget."""
    lines = []
    for number, passage in enumerate(passages, start=1):
        if focus is None:
            body = flatten(passage.text, max_passage_chars)[0]
        else:
            body = focus_text(passage.text, focus.get(passage.id, ()), max_passage_chars)
        body = _piece(body, "passage", clip)
        title = _piece(passage.title, "title", clip)
        lines.append(f"[{number}] {title}: {body}" if title else f"[{number}] {body}")
    return lines


def _piece(text: str, kind: PieceKind, clip: Clip | None) -> str:
    """One prompt piece: whitespace collapsed, and cut to its token budget when ``clip``."""
    return " ".join(text.split()) if clip is None else clip(text, kind)


# ----------------------------------------------------------------------------- helpers


def _encode_candidates(tokenizer: Any, candidates: Sequence[str], end_id: int) -> list[list[int]]:
    """Each candidate's tokens plus the end id; marker text in a candidate stays text
    (:func:`~neocorrag_core.lm.generation.text_token_ids`)."""
    return [[*ids, end_id] for ids in text_token_ids_batch(tokenizer, candidates)]


def _distinct(sequences: Sequence[Sequence[int]]) -> list[int]:
    """Indices of the first occurrence of each distinct token sequence, in input order."""
    seen: set[tuple[int, ...]] = set()
    keep = []
    for index, sequence in enumerate(sequences):
        key = tuple(sequence)
        if key not in seen:
            seen.add(key)
            keep.append(index)
    return keep


def _forward_params(model: Any) -> frozenset[str]:
    """Keyword names ``model.forward`` takes (empty when it cannot be inspected)."""
    try:
        return frozenset(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return frozenset()


def _cache_kwarg(model: Any) -> str:
    """The forward/generate keyword for a KV cache: ``cache`` (transformers 5.x) or the old name."""
    return "cache" if "cache" in _forward_params(model) else "past_key_values"


def _last_logits_only(model: Any) -> dict[str, int]:
    """Forward kwargs that skip the LM head on all but the last position, when supported."""
    params = _forward_params(model)
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def _output_cache(output: Any) -> Any:
    """The KV cache a forward pass returned, under either attribute name."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def _expanded_cache(cache: Any, batch: int) -> Any:
    """A private copy of a batch-1 prompt cache, repeated to ``batch`` rows."""
    clone = copy.deepcopy(cache)
    if batch > 1:
        clone.batch_repeat_interleave(batch)
    return clone


def _prompt_forward(lm: LanguageModel, prompt: Any) -> tuple[Any, Any]:
    """Run ``prompt`` (1 × P) once: its KV cache and the next-token log-probs after it."""
    import torch

    output = lm.model(input_ids=prompt, use_cache=True, **_last_logits_only(lm.model))
    logprobs = torch.log_softmax(output.logits[0, -1].float(), dim=-1)
    return _output_cache(output), logprobs


def _best_first(scored: dict[int, float], limit: int) -> list[DecodedChoice]:
    """The ``limit`` best (index, logprob) pairs, best first, ties broken by index."""
    order = sorted(scored.items(), key=lambda item: (-item[1], item[0]))
    return [DecodedChoice(index=i, logprob=float(lp)) for i, lp in order[: max(0, limit)]]


# ----------------------------------------------------------------------------- rank


def rank_candidates(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    candidates: Sequence[str],
    *,
    top_k: int = 5,
    batch_size: int = 16,
) -> DecodingOutput:
    """Score each candidate's exact length-normalised log-prob given the prompt; best top_k."""
    if not candidates or top_k <= 0:
        return DecodingOutput(choices=[], prompt_tokens=0, generated_tokens=0)
    if not prompt_ids:
        raise ValueError("rank_candidates needs a non-empty prompt")
    import torch

    with lm.lock, torch.inference_mode():
        end_id = end_of_turn_token_id(lm.tokenizer)
        sequences = _encode_candidates(lm.tokenizer, candidates, end_id)
        keep = _distinct(sequences)
        scores = _score_sequences(lm, list(prompt_ids), [sequences[i] for i in keep], batch_size)
    scored = {
        index: score for index, score in zip(keep, scores, strict=True) if math.isfinite(score)
    }
    scored_tokens = sum(len(sequences[i]) for i in keep)
    return DecodingOutput(
        choices=_best_first(scored, top_k),
        prompt_tokens=len(prompt_ids) + scored_tokens,
        generated_tokens=0,
    )


def _score_sequences(
    lm: LanguageModel, prompt_ids: list[int], sequences: list[list[int]], batch_size: int
) -> list[float]:
    """Length-normalised log-prob of each sequence after the prompt (prompt encoded once)."""
    import torch

    model = lm.model
    device = model_device(model)
    prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    cache, first = _prompt_forward(lm, prompt)
    results: list[float] = []
    step = max(1, int(batch_size))
    for start in range(0, len(sequences), step):
        batch = sequences[start : start + step]
        totals = torch.tensor([float(first[seq[0]]) for seq in batch], dtype=torch.float64)
        width = max(len(seq) for seq in batch) - 1  # the last token is scored, never fed
        if width > 0:
            # Right padding needs no attention mask: causal attention never looks ahead.
            rows = [seq[:-1] + [seq[-1]] * (width - len(seq) + 1) for seq in batch]
            inputs = torch.tensor(rows, dtype=torch.long, device=device)
            logits = None
            if cache is not None:
                try:
                    logits = _continuation_logits_cached(model, cache, inputs)
                except Exception:
                    logger.debug("scoring on the shared prompt cache failed", exc_info=True)
                    cache = None  # score the rest without it
            if logits is None:
                logits = _continuation_logits_uncached(model, prompt, inputs)
            for row, seq in enumerate(batch):
                # One row at a time keeps the float32 copy small (vocabularies are ~150k wide).
                targets = torch.tensor(seq[1:], dtype=torch.long, device=logits.device)
                logprobs = torch.log_softmax(logits[row, : len(targets)].float(), dim=-1)
                totals[row] += float(logprobs.gather(-1, targets[:, None]).double().sum())
            del logits
        results.extend(
            float(total) / len(seq) for total, seq in zip(totals.tolist(), batch, strict=True)
        )
    return results


def _continuation_logits_cached(model: Any, cache: Any, inputs: Any) -> Any:
    """Logits over ``inputs`` (B × W) run on a private, batch-expanded copy of the prompt cache."""
    output = model(
        input_ids=inputs,
        use_cache=True,
        **{_cache_kwarg(model): _expanded_cache(cache, inputs.shape[0])},
    )
    return output.logits


def _continuation_logits_uncached(model: Any, prompt: Any, inputs: Any) -> Any:
    """The same logits without a cache: the prompt is run again in front of every row."""
    import torch

    full = torch.cat([prompt.expand(inputs.shape[0], -1), inputs], dim=1)
    logits = model(input_ids=full, use_cache=False).logits
    return logits[:, prompt.shape[1] :]


# ----------------------------------------------------------------------------- beam


def beam_decode(
    lm: LanguageModel,
    prompt_ids: Sequence[int],
    candidates: Sequence[str],
    *,
    num_beams: int = 5,
    num_return: int | None = None,
) -> DecodingOutput:
    """Trie-constrained beam search over the candidates; returns only exact candidates."""
    if num_beams < 1:
        raise ValueError(f"num_beams must be at least 1, got {num_beams}")
    limit = num_beams if num_return is None else num_return
    if not candidates or limit <= 0:
        return DecodingOutput(choices=[], prompt_tokens=0, generated_tokens=0)
    if not prompt_ids:
        raise ValueError("beam_decode needs a non-empty prompt")
    with lm.lock:
        end_id = end_of_turn_token_id(lm.tokenizer)
        sequences = _encode_candidates(lm.tokenizer, candidates, end_id)
    distinct = len(_distinct(sequences))
    if distinct == 1:
        # Nothing to search; score the one candidate so its log-prob is real.
        return rank_candidates(lm, prompt_ids, candidates, top_k=limit)
    # With at least as many beams as candidates the search is exhaustive. HF's 1-beam path is
    # greedy search, which reports no sequence scores, so run at least 2 beams.
    beams = max(2, min(int(num_beams), distinct))
    prompt_tokens = len(prompt_ids)
    generated = 0
    try:
        scored, steps = _beam_search(lm, list(prompt_ids), sequences, end_id, beams)
        generated = steps * beams
    except Exception:
        logger.warning("constrained beam search failed; ranking the candidates", exc_info=True)
        scored = {}
    if scored:
        return DecodingOutput(
            choices=_best_first(scored, limit),
            prompt_tokens=prompt_tokens,
            generated_tokens=generated,
        )
    logger.debug("beam search returned no exact candidate; ranking instead")
    ranked = rank_candidates(lm, prompt_ids, candidates, top_k=limit)
    return DecodingOutput(
        choices=ranked.choices,
        prompt_tokens=prompt_tokens + ranked.prompt_tokens,
        generated_tokens=generated,
    )


def _beam_search(
    lm: LanguageModel,
    prompt_ids: list[int],
    sequences: list[list[int]],
    end_id: int,
    beams: int,
) -> tuple[dict[int, float], int]:
    """Run ``generate`` under the trie; valid candidate index -> best score, and steps run."""
    import torch

    trie = TokenTrie(sequences)
    prompt_len = len(prompt_ids)
    dead_end = [end_id]

    def allowed(_batch_id: int, tokens: Any) -> list[int]:
        # Never empty (HF raises on []): a prefix off the trie may only end, and is dropped later.
        return trie.allowed_next(tokens[prompt_len:].tolist()) or dead_end

    model = lm.model
    tokenizer = lm.tokenizer
    pad_id = getattr(tokenizer, "pad_token_id", None)
    kwargs: dict[str, Any] = neutral_settings(beams=True)
    kwargs.update(
        num_beams=beams,
        num_return_sequences=beams,
        eos_token_id=end_id,
        pad_token_id=end_id if pad_id is None else int(pad_id),
        max_new_tokens=max(len(seq) for seq in sequences),
        prefix_allowed_tokens_fn=allowed,
        output_scores=True,
        return_dict_in_generate=True,
    )
    with lm.lock, torch.inference_mode():
        device = model_device(model)
        prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        mask = torch.ones_like(prompt)
        output = None
        if prompt_len > 1:
            # Encode the prompt once and hand every beam a copy of its cache; generate then only
            # runs the last prompt token instead of the whole prompt once per beam.
            try:
                prefix = model(input_ids=prompt[:, :-1], use_cache=True, **_last_logits_only(model))
                cache = _output_cache(prefix)
                del prefix
                if cache is not None:
                    output = model.generate(
                        input_ids=prompt,
                        attention_mask=mask,
                        **{_cache_kwarg(model): _expanded_cache(cache, beams)},
                        **kwargs,
                    )
            except Exception:
                logger.debug("beam search with a shared prompt cache failed", exc_info=True)
                output = None
        if output is None:
            output = model.generate(input_ids=prompt, attention_mask=mask, **kwargs)
    steps = len(output.scores) if output.scores is not None else 0
    if output.sequences_scores is None:
        raise RuntimeError("generate returned no sequence scores")
    scored: dict[int, float] = {}
    for row, score in zip(output.sequences.tolist(), output.sequences_scores.tolist(), strict=True):
        generated = row[prompt_len:]
        if end_id not in generated:
            logger.debug("dropping a beam that never ended: %s", generated)
            continue
        generated = generated[: generated.index(end_id) + 1]
        index = trie.lookup(generated)
        if index is None or not math.isfinite(score) or score * len(generated) <= _BOGUS_SUM:
            # Not a candidate, or a copy of one scored from HF's -1e9 placeholder beams.
            logger.debug("dropping beam %s with score %s", generated, score)
            continue
        if index not in scored or score > scored[index]:
            scored[index] = float(score)
    return scored, steps
