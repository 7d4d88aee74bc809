"""Precomputed triple sources: metadata, HippoRAG OpenIE import, chaining, bad input."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import SHARED_DATA, bag_of_words_embedder

from neocorrag_core.errors import InputError
from neocorrag_core.triples import (
    ChainedTripleSource,
    MetadataTripleSource,
    OpenIETripleSource,
    TripleSource,
    parse_triple,
)
from neocorrag_core.triples.precomputed import text_key
from neocorrag_core.types import Passage, Triple


def test_parse_triple_accepts_lists_and_dicts_and_rejects_garbage():
    assert parse_triple([" A ", "r", 1962], "p") == Triple("A", "r", "1962", ("p",))
    assert parse_triple({"subject": "A", "relation": "r", "object": "B"}, "p").object == "B"
    for bad in (["A", "r"], ["A", "", "B"], [None, "r", "B"], "A r B", 42, ["A", "r", "B", "C"]):
        assert parse_triple(bad, "p") is None


def test_metadata_source_skips_bad_items_with_one_warning(caplog):
    passages = [
        Passage("p1", "x", metadata={"triples": [["A", "r", "B"], ["bad"], ["A", "r", "B"]]}),
        Passage("p2", "y"),
        Passage("p3", "z", metadata={"triples": "not a list"}),
    ]
    with caplog.at_level(logging.WARNING):
        result = MetadataTripleSource().triples_for(passages)
    assert result == [[Triple("A", "r", "B", ("p1",))], [], []]
    assert "skipped 1 malformed" in caplog.text
    assert isinstance(MetadataTripleSource(), TripleSource)


def test_metadata_triples_given_back_as_a_numpy_array_are_read():
    # Arrow- or pandas-backed vector stores return a stored list of lists as an array.
    import numpy as np

    stored = np.array([["A", "r", "B"], ["B", "s", "C"]], dtype=object)
    (found,) = MetadataTripleSource().triples_for(
        [Passage("p1", "x", metadata={"triples": stored})]
    )
    assert [t.key() for t in found] == [("A", "r", "B"), ("B", "s", "C")]


def test_openie_source_matches_by_text_or_title_and_text(tmp_path):
    path = tmp_path / "openie.json"
    docs = [
        {
            "title": "Stanley",
            "text": "Stanley is  the capital.",
            "passage": "Stanley\nStanley is the capital.",
            "extracted_triples": [["Stanley", "capital of", "Mountrail County"], ["x"]],
        },
        {"title": "Broken", "text": "no triples key"},
    ]
    path.write_text(json.dumps({"docs": docs}))
    source = OpenIETripleSource.from_file(path)
    hit = Passage("p1", "Stanley is the capital.", title="Stanley")
    miss = Passage("p2", "Unknown text")
    assert source.triples_for([hit, miss]) == [
        [Triple("Stanley", "capital of", "Mountrail County", ("p1",))],
        [],
    ]


def test_openie_texts_shared_by_two_titles_are_matched_on_the_title(caplog):
    # The real case: HotpotQA's "Tara Strong" and "Tara Strong filmography" share one text.
    text = "Tara Lyn Strong is a Canadian-American actress."
    docs = [
        {"title": t, "text": text, "passage": f"{t}\n{text}", "extracted_triples": [[t, "r", o]]}
        for t, o in (("Tara Strong", "first"), ("Tara Strong filmography", "second"))
    ]
    docs.append(
        {"title": "Solo", "text": "Only  one doc.", "extracted_triples": [["Solo", "r", "x"]]}
    )
    with caplog.at_level(logging.WARNING):
        source = OpenIETripleSource.from_records({"docs": docs})
    assert "1 text(s) belong to 2 documents with different titles" in caplog.text
    assert len(source) == 3
    passages = [
        Passage("a", text, "Tara Strong filmography"),  # listed second: still its own doc
        Passage("b", text, "Tara Strong"),
        Passage("c", text, "Another title"),  # shared text, unknown title: ambiguous
        Passage("d", "Only one doc.", "Renamed"),  # text of exactly one doc: matched
        Passage("e", "Solo\nOnly one doc."),  # the doc's title and text, as one text
    ]
    found = [[t.key() for t in ts] for ts in source.triples_for(passages)]
    assert found == [
        [("Tara Strong filmography", "r", "second")],
        [("Tara Strong", "r", "first")],
        [],
        [("Solo", "r", "x")],
        [("Solo", "r", "x")],
    ]
    # Built from a text map alone (the constructor's first argument), as before.
    by_text = OpenIETripleSource({text_key("Only one doc."): [("A", "r", "B")]})
    assert [t.key() for t in by_text.lookup(Passage("f", "Only one doc.", "T"))] == [
        ("A", "r", "B")
    ]


def test_openie_source_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="OpenIE file not found"):
        OpenIETripleSource.from_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json is neither JSON"):
        OpenIETripleSource.from_file(bad)
    bad.write_bytes(b"\x93not utf-8")
    with pytest.raises(InputError, match=r"bad\.json is not UTF-8"):
        OpenIETripleSource.from_file(bad)
    bad.write_text(json.dumps({"something": 1}))
    with pytest.raises(ValueError, match="docs"):
        OpenIETripleSource.from_file(bad)


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data not present")
def test_openie_source_on_the_shipped_musique_file():
    source = OpenIETripleSource.from_file(
        SHARED_DATA / "musique" / "hipporag_musique_train_openie_gpt35.json"
    )
    corpus = json.loads(
        (SHARED_DATA / "musique" / "hipporag_musique_train_corpus.json").read_text()
    )
    passages = [Passage(str(i), d["text"], d["title"]) for i, d in enumerate(corpus[:50])]
    found = source.triples_for(passages)
    assert sum(1 for ts in found if ts) >= 45
    assert all(t.source_ids == (p.id,) for p, ts in zip(passages, found, strict=True) for t in ts)


def test_chained_source_takes_first_non_empty():
    class Fixed:
        def __init__(self, answers):
            self.answers = answers
            self.asked: list[str] = []

        def triples_for(self, passages):
            self.asked.extend(p.id for p in passages)
            return [list(self.answers.get(p.id, [])) for p in passages]

    first = Fixed({"p1": [Triple("A", "r", "B", ("p1",))]})
    second = Fixed({"p2": [Triple("C", "r", "D", ("p2",))]})
    passages = [Passage("p1", "a"), Passage("p2", "b"), Passage("p3", "c")]
    result = ChainedTripleSource(first, second).triples_for(passages)
    assert [len(ts) for ts in result] == [1, 1, 0]
    assert second.asked == ["p2", "p3"]
    with pytest.raises(ValueError):
        ChainedTripleSource()


def test_openie_records_of_the_wrong_shape_are_an_input_error():
    with pytest.raises(InputError, match="does not look like HippoRAG OpenIE output"):
        OpenIETripleSource.from_records({"doc": []})


def test_an_empty_source_is_kept_not_swapped_for_the_metadata_source():
    """Only ``None`` means "not given": an OpenIE source with no triples is falsy (its
    ``len`` is 0) but is still the user's source, so the passages' metadata triples must
    not be read instead."""
    from neocorrag_core import EvidenceChainMiner
    from neocorrag_core.belief.writer import LMQueryWriter
    from neocorrag_core.evireform import EvidenceReformulator

    empty = OpenIETripleSource({})
    assert len(empty) == 0
    owners = [
        EvidenceChainMiner(triple_source=empty, embedder=bag_of_words_embedder()),
        EvidenceReformulator(triple_source=empty),
        LMQueryWriter(triple_source=empty),
    ]
    assert all(owner.triple_source is empty for owner in owners)
    passage = Passage(
        id="p1", text="Paris is in France.", metadata={"triples": [["Paris", "in", "France"]]}
    )
    result = owners[0].mine("Where is Paris?", [passage])
    assert result.fallback == "no_triples"
    assert all(
        isinstance(o.triple_source, MetadataTripleSource)
        for o in (EvidenceChainMiner(), EvidenceReformulator(), LMQueryWriter())
    )


def test_the_query_writer_rejects_a_wrong_triple_source():
    from neocorrag_core.belief.writer import LMQueryWriter
    from neocorrag_core.errors import ConfigError

    with pytest.raises(ConfigError, match="LMQueryWriter: triple_source must be a TripleSource"):
        LMQueryWriter(triple_source={"not": "a source"})
