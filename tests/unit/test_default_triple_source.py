"""The adapters' drop-in triple source: metadata, else store, else extractor, else nothing."""

from __future__ import annotations

import logging
import pickle

import pytest

from neocorrag_core import ConfigError, Passage, Triple
from neocorrag_core.triples import DefaultTripleSource, TripleStore
from neocorrag_core.triples.store import ExtractorKey


class CountingExtractor:
    """Deterministic: one triple per passage, '<title> - mentions -> <first word>'."""

    extractor_id = "test:counting"
    version = "1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(self, passages):
        self.seen.extend(p.id for p in passages)
        return [[Triple(p.title, "mentions", p.text.split()[0], (p.id,))] for p in passages]

    triples_for = extract


def raw(pid: str, title: str, text: str, **metadata) -> Passage:
    return Passage(id=pid, title=title, text=text, metadata=metadata)


PASSAGES = [
    raw("a", "Alpha", "Paris is a city."),
    raw("b", "Beta", "Lyon is a city."),
]


def test_metadata_wins_even_when_empty_and_the_extractor_is_not_asked(tmp_path):
    extractor = CountingExtractor()
    source = DefaultTripleSource(store=tmp_path / "s.sqlite", extractor=extractor)
    given = raw("m", "M", "Text here.", triples=[["M", "is", "given"]])
    none_given = raw("n", "N", "Other text.", triples=[])
    out = source.triples_for([given, none_given])
    assert [t.key() for t in out[0]] == [("M", "is", "given")]
    assert out[1] == []
    assert extractor.seen == []


def test_metadata_triples_none_counts_as_absent(tmp_path):
    extractor = CountingExtractor()
    source = DefaultTripleSource(store=tmp_path / "s.sqlite", extractor=extractor)
    passages = [raw("n", "N", "Nina sings.", triples=None), raw("e", "E", "Eve.", triples=[])]
    out = source.triples_for(passages)
    assert [t.key() for t in out[0]] == [("N", "mentions", "Nina")]
    assert out[1] == []  # an empty list still means "no triples"
    assert extractor.seen == ["n"]


def test_missing_passages_are_extracted_once_then_read_from_the_store(tmp_path):
    path = tmp_path / "s.sqlite"
    first = CountingExtractor()
    out = DefaultTripleSource(store=path, extractor=first).triples_for(PASSAGES)
    assert [[t.key() for t in ts] for ts in out] == [
        [("Alpha", "mentions", "Paris")],
        [("Beta", "mentions", "Lyon")],
    ]
    assert sorted(first.seen) == ["a", "b"]
    second = CountingExtractor()
    source = DefaultTripleSource(store=path, extractor=second)
    again = source.triples_for(PASSAGES)
    assert again == out and second.seen == []
    assert source.stats.hits == 2 and source.stats.extracted == 0


def test_mixed_batch_keeps_order(tmp_path):
    extractor = CountingExtractor()
    source = DefaultTripleSource(store=tmp_path / "s.sqlite", extractor=extractor)
    given = raw("m", "M", "Text here.", triples=[["M", "is", "given"]])
    out = source.triples_for([PASSAGES[0], given, PASSAGES[1]])
    assert [ts[0].source_ids for ts in out] == [("a",), ("m",), ("b",)]
    assert sorted(extractor.seen) == ["a", "b"]


def test_extract_off_reads_only_the_store_and_logs_one_warning(tmp_path, caplog):
    extractor = CountingExtractor()
    store = TripleStore(tmp_path / "s.sqlite")
    store.put_many([(PASSAGES[0], [Triple("Alpha", "in", "Paris")])], ExtractorKey.of(extractor))
    source = DefaultTripleSource(store=store, extractor=extractor, extract=False)
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.default"):
        out = source.triples_for(PASSAGES)
        source.triples_for(PASSAGES)
    assert [t.key() for t in out[0]] == [("Alpha", "in", "Paris")] and out[1] == []
    assert extractor.seen == []
    messages = [r.getMessage() for r in caplog.records]
    assert sum("extract=True" in m for m in messages) == 1, messages


def test_spacy_missing_reads_the_store_under_the_spacy_key(tmp_path, monkeypatch, caplog):
    import neocorrag_core.triples.default as default_module
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

    monkeypatch.setattr(default_module, "spacy_available", lambda: False)
    store = TripleStore(tmp_path / "s.sqlite")
    key = ExtractorKey.of(SpacyTripleExtractor())
    store.put_many([(PASSAGES[0], [Triple("Alpha", "in", "Paris")])], key)
    source = DefaultTripleSource(store=store)  # "spacy": indexed elsewhere, not installed here
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.default"):
        out = source.triples_for(PASSAGES)
    assert [t.key() for t in out[0]] == [("Alpha", "in", "Paris")] and out[1] == []
    assert any("neocorrag[spacy]" in r.getMessage() for r in caplog.records)


def test_a_store_that_cannot_be_opened_falls_back_to_memory_with_a_warning(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    extractor = CountingExtractor()
    source = DefaultTripleSource(store=blocker / "s.sqlite", extractor=extractor)
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.store"):
        out = source.triples_for(PASSAGES)
        source.triples_for(PASSAGES)
    assert [len(ts) for ts in out] == [1, 1]
    assert sorted(extractor.seen) == ["a", "b"]  # the in-memory store serves the second call
    messages = [r.getMessage() for r in caplog.records]
    assert sum("keep triples and vectors in memory" in m for m in messages) == 1, messages
    assert str(blocker / "s.sqlite") in messages[0]


def test_nothing_is_opened_at_construction_and_a_copy_pickles(tmp_path):
    path = tmp_path / "s.sqlite"
    source = DefaultTripleSource(store=path, extractor="spacy")
    assert not path.exists() and source.stats is None
    copy = pickle.loads(pickle.dumps(source))
    assert repr(copy) == repr(source)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"extractor": "nope"}, "unknown extractor"),
        ({"extractor": 3}, "spec string"),
        ({"extract": "yes"}, "extract"),
        ({"store": 3}, "store must be"),
        ({"metadata_key": ""}, "metadata_key"),
    ],
)
def test_bad_settings_raise_config_errors(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        DefaultTripleSource(**kwargs)
