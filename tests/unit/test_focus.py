"""Cutting the passages kept by a link to their evidence sentences (``passage_focus``)."""

from __future__ import annotations

import pytest

from neocorrag_core.config import MinerConfig
from neocorrag_core.errors import ConfigError
from neocorrag_core.focus import evidence_sentences, focus_kept
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
    assert MinerConfig().passage_focus == "none"
    with pytest.raises(ConfigError, match="passage_focus"):
        MinerConfig(passage_focus="all")  # type: ignore[arg-type]
