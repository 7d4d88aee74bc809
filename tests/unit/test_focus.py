"""Cutting the kept passages to their evidence sentences (``passage_focus``)."""

from __future__ import annotations

import pytest

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.focus import (
    ALL_FOCUSED_REASONS,
    FOCUS_RULES,
    evidence_sentences,
    focus_kept,
)
from neocorrag_core.errors import ConfigError
from neocorrag_core.eval.refiners import method_version, miner_version
from neocorrag_core.types import EvidenceChain, KeepReason, KeptPassage, Passage, Triple

SNOW = Passage(
    "p2",
    title="Hank Snow (singer)",
    text="Hank Snow was a Canadian country singer. He moved to Nashville, Tennessee, in 1949. "
    "Snow joined the Grand Ole Opry in 1950. His horse was named Shawnee.",
)
SONG = Passage("p1", title="Hello Love", text="Hello Love is a 1974 single by Hank Snow.")
SEAT = Triple("Hank Snow", "moved to", "Nashville", ("p2",))
BY = Triple("Hello Love", "single by", "Hank Snow", ("p1",))
OPRY = Triple("Snow", "joined", "Grand Ole Opry", ("p2",))


def test_evidence_sentences_are_the_lead_and_those_naming_an_entity():
    # Whole words, case ignored: "snow" names "Snow joined ...", not "Snowfall".
    text = "A is first. Snowfall is heavy. The snow fell. Nothing here."
    assert evidence_sentences(text, ["Snow"]) == "A is first. The snow fell."
    assert evidence_sentences(text, []) == "A is first."
    assert evidence_sentences("", ["Snow"]) == ""


def test_sentences_that_state_a_relation_word_of_the_question_are_kept():
    # Hand-checked: "born" covers "birth" (a listed equivalent), "directed" covers
    # "director" (the same first five letters); the appearances sentence covers neither.
    text = (
        "Henry Edwards was an English actor. He appeared in 81 films. "
        "He also directed 67 films. He was born in Weston-super-Mare."
    )
    assert evidence_sentences(text, [], ["birth"]) == (
        "Henry Edwards was an English actor. He was born in Weston-super-Mare."
    )
    assert evidence_sentences(text, [], ["birth", "director"]) == (
        "Henry Edwards was an English actor. He also directed 67 films. "
        "He was born in Weston-super-Mare."
    )
    assert evidence_sentences(text, [], []) == "Henry Edwards was an English actor."


def test_focus_keeps_the_relation_the_question_asks_for():
    # "Who is the spouse of ...": "spouse" is a relation word, "married" its equivalent,
    # so the sentence that names only the subject's wife stays; without the question
    # (rules focus-1) it was cut.
    director = Passage(
        "p4",
        title="Jacques Rivette",
        text="Jacques Rivette was a French film director. He made 29 films. "
        "Rivette was briefly married to Marilù Parolini.",
    )
    kept = [KeptPassage(SONG, 1, KeepReason.TOP_N), KeptPassage(director, 2, KeepReason.BRIDGE)]
    question = "Who is the spouse of the director of film Up, Down, Fragile?"
    out = focus_kept(kept, {"p1": [BY], "p4": []}, ["Up, Down, Fragile"], [], question)
    assert out[1].passage.text == (
        "Jacques Rivette was a French film director. "
        "Rivette was briefly married to Marilù Parolini."
    )
    names_only = focus_kept(kept, {"p1": [BY], "p4": []}, ["Up, Down, Fragile"], [])
    assert names_only[1].passage.text == "Jacques Rivette was a French film director."


def test_cached_records_of_focused_methods_name_the_sentence_rules():
    assert FOCUS_RULES in miner_version({"keep": "recall", "passage_focus": "linked"})
    assert FOCUS_RULES in method_version("neocorrag-recall")  # the default cuts too
    assert FOCUS_RULES not in miner_version({"keep": "recall", "passage_focus": "none"})


def test_linked_passages_are_cut_and_top_n_ones_never():
    kept = [
        KeptPassage(SONG, 1, KeepReason.TOP_N),
        KeptPassage(SNOW, 2, KeepReason.BRIDGE),
    ]
    triples_of = {"p1": [BY], "p2": [SEAT, OPRY]}
    chains = [
        EvidenceChain(
            (BY, SEAT), "Hello Love - single by -> Hank Snow - moved to -> Nashville", 0.5
        )
    ]
    out = focus_kept(kept, triples_of, ["Hello Love", "performer"], chains)
    assert out[0] == kept[0]  # rank 1 stays whole
    # Lead; "Hank Snow" is shared with p1 and "Nashville" is in a chosen chain; the Opry and
    # the horse name neither ("Snow" alone is an entity of an unchosen triple of p2 only).
    assert out[1].passage.text == (
        "Hank Snow was a Canadian country singer. He moved to Nashville, Tennessee, in 1949."
    )
    assert out[1].full_text == SNOW.text
    assert out[1].passage.id == SNOW.id and out[1].passage.title == SNOW.title
    assert out[1].reason is KeepReason.BRIDGE and out[1].rank == 2


def test_a_passage_is_left_whole_when_the_cut_would_drop_nothing():
    short = Passage("p3", title="Nashville", text="Nashville is the capital of Tennessee.")
    kept = [KeptPassage(SONG, 1, KeepReason.TOP_N), KeptPassage(short, 2, KeepReason.QUERY_ENTITY)]
    out = focus_kept(kept, {"p1": [BY], "p3": []}, ["Nashville"], [])
    assert out == kept and out[1].full_text is None


def test_passage_focus_is_validated():
    assert MinerConfig().passage_focus == "all"
    with pytest.raises(ConfigError, match="passage_focus"):
        MinerConfig(passage_focus="every")  # type: ignore[arg-type]


def test_focus_all_cuts_the_top_n_passages_too():
    long_song = Passage(
        "p1",
        title="Hello Love",
        text="Hello Love is a 1974 single by Hank Snow. It reached number one. "
        "The B-side was a waltz.",
    )
    kept = [KeptPassage(long_song, 1, KeepReason.TOP_N), KeptPassage(SNOW, 2, KeepReason.BRIDGE)]
    triples_of = {"p1": [BY], "p2": [SEAT, OPRY]}
    question = "Who performed Hello Love?"
    linked = focus_kept(kept, triples_of, ["Hello Love"], [], question)
    assert linked[0] == kept[0]  # "linked" never cuts a top-N passage
    everything = focus_kept(kept, triples_of, ["Hello Love"], [], question, ALL_FOCUSED_REASONS)
    # Rank 1 keeps its lead (naming "Hello Love" and the shared "Hank Snow"); the chart and
    # B-side sentences name nothing and state no relation word ("performed").
    assert everything[0].passage.text == "Hello Love is a 1974 single by Hank Snow."
    assert everything[0].full_text == long_song.text
    assert everything[1] == linked[1]
    assert MinerConfig(passage_focus="all").passage_focus == "all"


def test_focus_all_never_cuts_a_passage_passed_through():
    # No filtering evidence: the passages pass through whole whatever the focus setting.
    kept = [KeptPassage(SNOW, 1, KeepReason.PASSTHROUGH)]
    out = focus_kept(kept, {"p2": [SEAT]}, ["Nashville"], [], "Who moved?", ALL_FOCUSED_REASONS)
    assert out == kept and out[0].full_text is None
