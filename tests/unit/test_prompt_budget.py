"""Cutting untrusted text for prompts: whitespace runs cost nothing, budgets hold exactly."""

from __future__ import annotations

import pytest
from tiny_models import build_tiny_lm, build_tiny_tokenizer

from neocorrag_core.chains.decoding import build_prompt_ids
from neocorrag_core.lm.generation import text_token_ids
from neocorrag_core.lm.prompt_budget import ELLIPSIS, TokenClipper, clip_to_tokens
from neocorrag_core.models import resolve_lm
from neocorrag_core.rendering import flatten
from neocorrag_core.types import Passage

# What PDF or HTML extraction leaves: a header, a run of layout whitespace, then the fact.
FACT = "Stanley is the capital of Mountrail County."


def test_flatten_counts_flattened_characters():
    assert flatten("Alpha" + " " * 9000 + FACT, 200) == ("Alpha " + FACT, False)
    assert flatten("  a \n\t b  c d ", 5) == ("a b c", True)
    assert flatten("a b c", 2) == ("a", True)  # a cut on a space leaves no trailing space
    assert flatten("a b", 3) == ("a b", False)
    assert flatten(" \n ", 4) == ("", False)
    assert flatten("word", 0) == ("", True)
    ordinary = "Van Hook Township is located in Mountrail County, North Dakota. " * 20
    for limit in (1, 10, 64, 700, 5000):
        flat = " ".join(ordinary.split())
        assert flatten(ordinary, limit) == (flat[:limit].rstrip(), len(flat) > limit)


def test_a_whitespace_run_does_not_use_up_the_clip_window():
    tok = build_tiny_tokenizer()
    text = "Alpha" + " " * 9000 + FACT
    assert clip_to_tokens(tok, text, 256) == "Alpha " + FACT
    # Only the flattened characters count: the cost bound still holds on a megabyte.
    assert len(clip_to_tokens(tok, "x " * 500_000, 16)) <= 16 * 32 + len(ELLIPSIS)


@pytest.mark.parametrize("clipped", [False, True], ids=["chars", "tokens"])
def test_a_whitespace_run_does_not_drop_the_fact_after_it(clipped: bool):
    model, tok = build_tiny_lm()
    lm = resolve_lm((model, tok))
    passage = Passage("p1", "Mountrail County." + " " * 3000 + "Its capital is Stanley.", "County")
    clip = TokenClipper(tok) if clipped else None
    ids = build_prompt_ids(lm, "What is the capital?", ["Mountrail County"], [passage], clip=clip)
    assert "[1] County: Mountrail County. Its capital is Stanley." in tok.decode(ids)


def test_a_long_passage_is_still_cut_to_max_passage_chars():
    model, tok = build_tiny_lm()
    lm = resolve_lm((model, tok))
    passage = Passage("p1", "Stanley  is   the seat. " * 100)
    text = tok.decode(build_prompt_ids(lm, "Where?", [], [passage], max_passage_chars=40))
    assert "[1] Stanley is the seat. Stanley is the seat\n" in text  # 40 characters


@pytest.mark.parametrize("budget", [1, 2, 3, 4, 5, 6, 8, 12, 40])
def test_a_clipped_piece_never_passes_its_budget(budget: int):
    tok = build_tiny_tokenizer()
    ellipsis = len(text_token_ids(tok, ELLIPSIS))
    for text in ("Mountrail County's capital is Stanley. " * 50, "x" * 5000, "é" * 300):
        clipped = clip_to_tokens(tok, text, budget)
        assert len(text_token_ids(tok, clipped)) <= budget, (budget, clipped)
        # The ellipsis marks the cut whenever there is room for it and some text.
        assert clipped.endswith("…") == (budget > ellipsis), (budget, clipped)
