"""Constrained decoding: whatever comes back is an exact candidate, with honest log-probs."""

from __future__ import annotations

import copy
import functools
import math
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_models import build_tiny_lm, build_tiny_tokenizer

from neocorrag_core.chains import decoding
from neocorrag_core.chains.decoding import (
    DecodedChoice,
    DecodingOutput,
    TokenTrie,
    beam_decode,
    build_prompt_ids,
    rank_candidates,
)
from neocorrag_core.models import LanguageModel, end_of_turn_token_id
from neocorrag_core.types import Passage

os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTION = "What is the capital of the county that contains Van Hook Township?"
ENTITIES = ["Van Hook Township", "Mountrail County"]
PASSAGES = [
    Passage("p1", "Van Hook Township is located in Mountrail County, North Dakota.", "Van Hook"),
    Passage("p2", "Mountrail County's capital is Stanley.", "Mountrail County"),
]
CHAINS = [
    "Van Hook Township - located in -> Mountrail County",
    "Van Hook Township - located in -> Mountrail County - capital -> Stanley",
    "Mountrail County - capital -> Stanley",
    "Stanley",
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@functools.cache
def tiny_lm(seed: int = 0) -> LanguageModel:
    """One random tiny Llama per seed for the whole module (hypothesis can't use fixtures)."""
    model, tokenizer = build_tiny_lm(seed)
    return LanguageModel(model=model, tokenizer=tokenizer, name=f"tiny-{seed}")


@functools.cache
def tiny_prompt(seed: int = 0) -> tuple[int, ...]:
    """The prompt used by most tests, built once."""
    return tuple(build_prompt_ids(tiny_lm(seed), QUESTION, ENTITIES, PASSAGES))


def naive_scores(lm: LanguageModel, prompt: list[int], candidates: list[str]) -> list[float]:
    """Reference scorer: the full prompt + candidate through the model, no cache, one by one."""
    end = end_of_turn_token_id(lm.tokenizer)
    out = []
    for text in candidates:
        ids = lm.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        seq = [*ids, end]
        full = torch.tensor([prompt + seq])
        with torch.no_grad():
            logits = lm.model(input_ids=full, use_cache=False).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        positions = range(len(prompt) - 1, len(prompt) - 1 + len(seq))
        total = sum(float(logprobs[p, t]) for p, t in zip(positions, seq, strict=True))
        out.append(total / len(seq))
    return out


# ----------------------------------------------------------------------------- TokenTrie


def test_trie_allowed_next_and_lookup():
    trie = TokenTrie([[1, 2, 9], [1, 3, 9], [4, 9]])
    assert sorted(trie.allowed_next([])) == [1, 4]
    assert sorted(trie.allowed_next([1])) == [2, 3]
    assert trie.allowed_next([1, 2]) == [9]
    assert trie.allowed_next([1, 2, 9]) == []
    assert trie.lookup([1, 3, 9]) == 1
    assert trie.lookup([4, 9]) == 2
    assert trie.lookup([1, 3]) is None
    assert trie.lookup([]) is None


def test_trie_candidate_that_is_a_prefix_of_another():
    trie = TokenTrie([[5, 6, 7, 9], [5, 6, 9]])
    assert sorted(trie.allowed_next([5, 6])) == [7, 9]
    assert trie.lookup([5, 6, 9]) == 1
    assert trie.lookup([5, 6, 7, 9]) == 0


def test_trie_duplicates_map_to_first_index():
    trie = TokenTrie([[1, 9], [2, 9], [1, 9]])
    assert trie.lookup([1, 9]) == 0
    assert sorted(trie.allowed_next([])) == [1, 2]


def test_trie_unknown_prefix_and_empty():
    trie = TokenTrie([[1, 2, 9]])
    assert trie.allowed_next([7]) == []
    assert trie.allowed_next([1, 2, 9, 9]) == []
    assert trie.lookup([7, 9]) is None
    empty = TokenTrie([])
    assert empty.allowed_next([]) == []
    assert empty.lookup([]) is None


# ----------------------------------------------------------------------------- prompt


def test_prompt_contains_question_entities_and_cut_passages():
    lm = tiny_lm()
    long_text = "Mountrail County's capital is Stanley. " * 40
    passages = [*PASSAGES, Passage("p3", long_text, "Long")]
    ids = build_prompt_ids(lm, QUESTION, ENTITIES, passages, max_passage_chars=100)
    text = lm.tokenizer.decode(ids)
    assert QUESTION in text
    assert "Van Hook Township; Mountrail County" in text
    assert "[1] Van Hook: Van Hook Township is located in Mountrail County, North Dakota." in text
    assert "[2] Mountrail County: Mountrail County's capital is Stanley." in text
    body = " ".join(long_text.split())
    assert f"[3] Long: {body[:100]}\n" in text
    assert body[:101] not in text
    # Rendered by the chat template, ending with the generation prompt.
    assert text.startswith("<|user|>")
    assert text.endswith("</s><|assistant|>")


def test_prompt_without_passages():
    lm = tiny_lm()
    ids = build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES, include_passages=False)
    text = lm.tokenizer.decode(ids)
    assert QUESTION in text
    assert "Mountrail County" in text  # as an entity
    assert "[1]" not in text
    assert "located in Mountrail County, North Dakota" not in text


def test_prompt_without_chat_template_is_plain_text():
    _, tokenizer = build_tiny_lm()
    tokenizer.chat_template = None
    lm = LanguageModel(model=None, tokenizer=tokenizer)
    text = tokenizer.decode(build_prompt_ids(lm, QUESTION, [], PASSAGES))
    assert "<|user|>" not in text
    assert "Key entities" not in text
    assert text.rstrip().endswith("Evidence chain:")


# ----------------------------------------------------------------------------- no LM call


class _Untouchable(torch.nn.Module):
    """A model that fails the test if anything runs it."""

    def forward(self, *args, **kwargs):
        raise AssertionError("the LM must not be called")

    def generate(self, *args, **kwargs):
        raise AssertionError("the LM must not be called")


def test_empty_candidates_make_no_lm_call():
    _, tokenizer = build_tiny_lm()
    lm = LanguageModel(model=_Untouchable(), tokenizer=tokenizer)
    for out in (beam_decode(lm, [1, 2, 3], []), rank_candidates(lm, [1, 2, 3], [])):
        assert out == DecodingOutput(choices=[], prompt_tokens=0, generated_tokens=0)


# ----------------------------------------------------------------------------- rank


def test_rank_matches_naive_scoring_and_is_best_first():
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    candidates = [*CHAINS, "", "日本 😀 é"]
    out = rank_candidates(lm, prompt, candidates, top_k=10, batch_size=3)
    expected = naive_scores(lm, prompt, candidates)
    assert sorted(c.index for c in out.choices) == list(range(len(candidates)))
    for choice in out.choices:
        assert choice.logprob == pytest.approx(expected[choice.index], abs=1e-4)
    logprobs = [c.logprob for c in out.choices]
    assert logprobs == sorted(logprobs, reverse=True)
    # Accounting: the prompt plus every candidate token (end tokens included), nothing generated.
    end = end_of_turn_token_id(lm.tokenizer)
    seqs = decoding._encode_candidates(lm.tokenizer, candidates, end)
    assert out.prompt_tokens == len(prompt) + sum(map(len, seqs))
    assert out.generated_tokens == 0
    # The shared prompt cache is not mutated by a run: a second run gives the same numbers.
    again = rank_candidates(lm, prompt, candidates, top_k=10, batch_size=2)
    assert [c.index for c in again.choices] == [c.index for c in out.choices]
    for a, b in zip(again.choices, out.choices, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-5)


def test_rank_without_a_usable_cache_gives_the_same_scores(monkeypatch):
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    cached = rank_candidates(lm, prompt, CHAINS, top_k=4, batch_size=2)

    def no_cache(*args, **kwargs):
        raise TypeError("this model cannot reuse a cache")

    monkeypatch.setattr(decoding, "_expanded_cache", no_cache)
    uncached = rank_candidates(lm, prompt, CHAINS, top_k=4, batch_size=2)
    assert [c.index for c in uncached.choices] == [c.index for c in cached.choices]
    for a, b in zip(uncached.choices, cached.choices, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    # Beam search also survives: it retries generate without the shared cache.
    beam = beam_decode(lm, prompt, CHAINS, num_beams=4)
    assert beam.prompt_tokens == len(prompt)
    assert [c.index for c in beam.choices] == [c.index for c in cached.choices]


def test_rank_top_k_and_duplicates():
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    out = rank_candidates(lm, prompt, [CHAINS[0], CHAINS[2], CHAINS[0], CHAINS[3]], top_k=2)
    assert len(out.choices) == 2
    assert {c.index for c in out.choices} <= {0, 1, 3}


# ----------------------------------------------------------------------------- beam


def test_beam_with_enough_beams_equals_exact_ranking():
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    for num in (2, 3, 4):
        cands = CHAINS[:num]
        beam = beam_decode(lm, prompt, cands, num_beams=num)
        rank = rank_candidates(lm, prompt, cands, top_k=num)
        assert [c.index for c in beam.choices] == [c.index for c in rank.choices]
        for b, r in zip(beam.choices, rank.choices, strict=True):
            # HF's beam score is sum(logprobs) / generated_len**1.0: the same normalisation.
            assert b.logprob == pytest.approx(r.logprob, abs=1e-4)
        assert beam.prompt_tokens == len(prompt)
        assert beam.generated_tokens > 0
        assert beam.generated_tokens % num == 0


def test_more_beams_than_candidates_never_leaks_placeholder_beams():
    """HF fills spare beams from its -1e9 placeholders; those copies must be dropped."""
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    end = end_of_turn_token_id(lm.tokenizer)
    for cands in (["", "a"], ["Van Hook Township x", "Van Hook Township y"]):
        seqs = decoding._encode_candidates(lm.tokenizer, cands, end)
        scored, steps = decoding._beam_search(lm, prompt, seqs, end, beams=6)
        exact = naive_scores(lm, prompt, cands)
        assert set(scored) == {0, 1}
        for index, score in scored.items():
            assert score == pytest.approx(exact[index], abs=1e-4)
        assert steps == max(map(len, seqs))


def test_beam_num_return_limits_choices():
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    out = beam_decode(lm, prompt, CHAINS, num_beams=4, num_return=2)
    assert len(out.choices) == 2
    one = beam_decode(lm, prompt, CHAINS, num_beams=1)
    assert len(one.choices) == 1
    assert one.choices[0].index in range(len(CHAINS))


def test_beam_single_candidate_is_scored():
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    out = beam_decode(lm, prompt, [CHAINS[1], CHAINS[1]])
    assert [c.index for c in out.choices] == [0]
    assert out.choices[0].logprob == pytest.approx(naive_scores(lm, prompt, [CHAINS[1]])[0], 1e-4)


def _unigram_lm(preferred: str) -> tuple[LanguageModel, torch.Tensor]:
    """A tiny LM whose next-token distribution ignores context and loves ``preferred``'s tokens."""
    model, tokenizer = build_tiny_lm(seed=3)
    bias = torch.zeros(len(tokenizer))
    for token in tokenizer(preferred, add_special_tokens=False)["input_ids"]:
        bias[token] = 6.0
    head = torch.nn.Linear(model.config.hidden_size, len(tokenizer), bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(bias)
    model.lm_head = head
    return LanguageModel(model=model, tokenizer=tokenizer), torch.log_softmax(bias, dim=-1)


def test_forced_preference_is_found_by_beam_and_rank():
    candidates = ["Van Hook Township", "Mountrail County", "Stanley", "North Dakota"]
    lm, logprobs = _unigram_lm("Stanley")
    end = end_of_turn_token_id(lm.tokenizer)
    seqs = decoding._encode_candidates(lm.tokenizer, candidates, end)
    analytic = [float(logprobs[s].mean()) for s in seqs]
    assert max(range(4), key=analytic.__getitem__) == 2
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    rank = rank_candidates(lm, prompt, candidates, top_k=4)
    for choice in rank.choices:
        assert choice.logprob == pytest.approx(analytic[choice.index], abs=1e-4)
    for beams in (1, 2, 4):
        beam = beam_decode(lm, prompt, candidates, num_beams=beams)
        assert beam.choices[0].index == 2
        assert beam.choices[0].logprob == pytest.approx(analytic[2], abs=1e-4)


def test_beam_falls_back_to_rank_when_generate_fails():
    model, tokenizer = build_tiny_lm(seed=1)

    def broken(*args, **kwargs):
        raise RuntimeError("generate is broken")

    model.generate = broken
    lm = LanguageModel(model=model, tokenizer=tokenizer)
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    out = beam_decode(lm, prompt, CHAINS, num_beams=3)
    ranked = rank_candidates(lm, prompt, CHAINS, top_k=3)
    assert out.choices == ranked.choices
    assert out.generated_tokens == 0


def test_beam_encodes_the_prompt_once():
    """The prompt cache is shared by the beams: ~P tokens run, not num_beams × P."""
    model, tokenizer = build_tiny_lm(seed=2)
    lm = LanguageModel(model=model, tokenizer=tokenizer)
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    seen = []
    hook = model.model.embed_tokens.register_forward_hook(
        lambda _m, args, _o: seen.append(args[0].numel())
    )
    try:
        out = beam_decode(lm, prompt, CHAINS, num_beams=4)
    finally:
        hook.remove()
    assert out.choices
    assert sum(seen) < len(prompt) + out.generated_tokens + 8


def test_rank_encodes_the_prompt_once():
    """Exact ranking runs the prompt once and each candidate's tokens once, whatever the
    batch size: no candidate batch re-encodes the shared prompt."""
    model, tokenizer = build_tiny_lm(seed=2)
    lm = LanguageModel(model=model, tokenizer=tokenizer)
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    candidate_tokens = sum(len(tokenizer(c, add_special_tokens=False)["input_ids"]) + 1
                           for c in CHAINS)  # fmt: skip
    for batch_size in (1, 2, 16):
        seen = []
        hook = model.model.embed_tokens.register_forward_hook(
            lambda _m, args, _o, seen=seen: seen.append(args[0].shape[-1])
        )
        try:
            out = rank_candidates(lm, prompt, CHAINS, top_k=len(CHAINS), batch_size=batch_size)
        finally:
            hook.remove()
        assert len(out.choices) == len(CHAINS)
        assert sum(1 for width in seen if width >= len(prompt) - 1) == 1
        assert sum(seen) <= len(prompt) + candidate_tokens


# ----------------------------------------------------------------------------- property

_PIECES = [
    "Van",
    " Hook",
    " - located in -> ",
    "County",
    " capital",
    "é",
    "日本",
    "😀",
    "a",
    "b",
    " ",
]
_text = st.lists(st.sampled_from(_PIECES), min_size=0, max_size=5).map("".join)


@st.composite
def _candidate_sets(draw):
    base = draw(st.lists(_text, min_size=1, max_size=6))
    if draw(st.booleans()):  # one candidate is a (string and usually token) prefix of another
        base.append(draw(st.sampled_from(base)) + draw(_text.filter(bool)))
    if draw(st.booleans()):
        base.append(draw(st.sampled_from(base)))  # an exact duplicate
    return base[:8]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    candidates=_candidate_sets(),
    num_beams=st.integers(1, 6),
    num_return=st.none() | st.integers(1, 6),
)
def test_beam_only_returns_exact_candidates(candidates, num_beams, num_return):
    lm = tiny_lm()
    prompt = list(tiny_prompt())
    out = beam_decode(lm, prompt, candidates, num_beams=num_beams, num_return=num_return)
    indices = [c.index for c in out.choices]
    assert out.choices, "a non-empty candidate list yields at least one choice"
    if len(set(candidates)) > 1:
        assert out.prompt_tokens == len(prompt), "beam search itself succeeded (no rank fallback)"
    assert len(indices) == len(set(indices))
    assert len(indices) <= (num_beams if num_return is None else num_return)
    assert all(0 <= i < len(candidates) for i in indices)
    # Duplicates always map to their first occurrence.
    assert all(candidates.index(candidates[i]) == i for i in indices)
    assert all(math.isfinite(c.logprob) and c.logprob <= 0 for c in out.choices)
    assert [c.logprob for c in out.choices] == sorted(
        (c.logprob for c in out.choices), reverse=True
    )
    # Every reported log-prob is the candidate's exact score (no placeholder-beam scores leak).
    exact = {c.index: c.logprob for c in rank_candidates(lm, prompt, candidates, top_k=8).choices}
    for choice in out.choices:
        assert choice.logprob == pytest.approx(exact[choice.index], abs=1e-4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(candidates=_candidate_sets(), top_k=st.integers(1, 8))
def test_rank_returns_top_k_distinct_candidates(candidates, top_k):
    lm = tiny_lm()
    out = rank_candidates(lm, list(tiny_prompt()), candidates, top_k=top_k, batch_size=3)
    indices = [c.index for c in out.choices]
    assert len(indices) == min(top_k, len(set(candidates)))
    assert len(indices) == len(set(indices))
    assert all(candidates.index(candidates[i]) == i for i in indices)
    assert all(math.isfinite(c.logprob) and c.logprob <= 0 for c in out.choices)


# ----------------------------------------------------------------------------- Qwen2 shape


def _tiny_qwen2(dtype: torch.dtype = torch.float32) -> LanguageModel:
    """A random tiny Qwen2 with a ChatML template and ``<|im_end|>``, like the default LM."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    torch.manual_seed(5)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        use_sliding_window=False,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).eval().to(dtype)
    return LanguageModel(model=model, tokenizer=tokenizer, name="tiny-qwen2")


def test_qwen2_shaped_model_uses_im_end_and_agrees_with_rank():
    lm = _tiny_qwen2()
    im_end = lm.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert end_of_turn_token_id(lm.tokenizer) == im_end
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    assert lm.tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
    candidates = [*CHAINS, "fake <|im_end|> chain"]
    rank = rank_candidates(lm, prompt, candidates, top_k=5)
    expected = naive_scores(lm, prompt, candidates)
    for choice in rank.choices:
        assert choice.logprob == pytest.approx(expected[choice.index], abs=1e-4)
    beam = beam_decode(lm, prompt, candidates, num_beams=5)
    assert [c.index for c in beam.choices] == [c.index for c in rank.choices]


def test_bf16_model_runs():
    lm = _tiny_qwen2(torch.bfloat16)
    prompt = list(build_prompt_ids(lm, QUESTION, ENTITIES, PASSAGES))
    for out in (
        beam_decode(lm, prompt, CHAINS, num_beams=3),
        rank_candidates(lm, prompt, CHAINS, top_k=3),
    ):
        assert len(out.choices) == 3
        assert all(isinstance(c, DecodedChoice) and math.isfinite(c.logprob) for c in out.choices)


def test_model_state_untouched():
    lm = tiny_lm()
    before = copy.deepcopy(lm.model.generation_config.to_dict())
    beam_decode(lm, list(tiny_prompt()), CHAINS, num_beams=3)
    assert lm.model.generation_config.to_dict() == before
    assert not lm.model.training
