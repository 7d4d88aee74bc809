"""Prompts that hold the sentences the candidates come from, not whole passages."""

from __future__ import annotations

import pytest
from tiny_models import build_tiny_lm

from neocorrag_core import EvidenceChain, Passage, Triple
from neocorrag_core.chains.config import MinerTuning
from neocorrag_core.chains.decoding import build_prompt_ids
from neocorrag_core.chains.miner import candidate_focus
from neocorrag_core.evireform import ReformulationTuning
from neocorrag_core.evireform.selection import proposition_focus, selection_prompt_text
from neocorrag_core.evireform.types import Proposition
from neocorrag_core.models import LanguageModel
from neocorrag_core.rendering import focus_text, split_sentences

TEXT = (
    "Van Hook Township is a township in Mountrail County, North Dakota. It was organized "
    "in 1906. The population was 90 at the 2010 census. Stanley is the county seat."
)


def test_sentences_are_split_on_end_marks_before_a_capital_or_digit():
    assert split_sentences("A b. C d! 3 e? f g.") == ["A b.", "C d!", "3 e? f g."]
    assert split_sentences("   ") == []


def test_focus_keeps_the_sentences_that_name_an_entity_in_order():
    out = focus_text(TEXT, ["stanley", "Van Hook Township"], 1000)
    assert out == (
        "Van Hook Township is a township in Mountrail County, North Dakota. "
        "Stanley is the county seat."
    )
    assert focus_text(TEXT, ["Nowhere"], 1000).startswith("Van Hook Township is a township")
    assert focus_text(TEXT, ["Nowhere"], 1000).endswith("North Dakota.")  # lead sentence only
    assert len(focus_text(TEXT, ["Stanley", "Van Hook"], 30)) == 30


def test_candidate_focus_maps_each_source_passage_to_its_triples_entities():
    t1 = Triple("Van Hook Township", "located in", "Mountrail County", ("p1",))
    t2 = Triple("Mountrail County", "seat", "Stanley", ("p2", "p1"))
    chains = [EvidenceChain((t1, t2), "c", 1.0), EvidenceChain((t2,), "d", 0.5)]
    assert candidate_focus(chains) == {
        "p1": ["Van Hook Township", "Mountrail County", "Stanley"],
        "p2": ["Mountrail County", "Stanley"],
    }


def test_a_focused_prompt_is_shorter_and_keeps_the_supporting_sentence():
    model, tokenizer = build_tiny_lm(seed=0)
    lm = LanguageModel(model=model, tokenizer=tokenizer)
    passages = [Passage("p1", TEXT, "Van Hook"), Passage("p2", "Filler text. " * 30, "Other")]
    whole = build_prompt_ids(lm, "q?", ["Van Hook Township"], passages)
    focused = build_prompt_ids(lm, "q?", ["Van Hook Township"], passages, focus={"p1": ["Stanley"]})
    assert len(focused) < len(whole)
    text = tokenizer.decode(focused)
    assert "Stanley is the county seat." in text and "organized in 1906" not in text


def test_selection_prompt_focus_uses_the_propositions_entities():
    props = [
        Proposition("Mountrail County seat Stanley", ("p1",), ("mountrail county", "stanley"),
                    ("Mountrail County", "Stanley")),
    ]  # fmt: skip
    assert proposition_focus(props) == {"p1": ["Mountrail County", "Stanley"]}
    text = selection_prompt_text("q?", [Passage("p1", TEXT, "Van Hook")], 400,
                                 proposition_focus(props))  # fmt: skip
    assert "organized in 1906" not in text and "Stanley is the county seat." in text


def test_prompt_context_is_validated():
    with pytest.raises(ValueError, match="prompt_context"):
        MinerTuning(prompt_context="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_context"):
        ReformulationTuning(prompt_context="all")  # type: ignore[arg-type]
