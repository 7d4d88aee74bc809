"""Bounded work from the first stage (issue 55): caps applied before anything is embedded
or parsed, each one that binds named in the result's notes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neocorrag_core import ConfigError, EvidenceChainMiner, MinerConfig, Passage, Triple
from neocorrag_core.limits import WorkLimits
from neocorrag_core.models import TextEmbedder
from neocorrag_core.triples import DefaultTripleSource
from neocorrag_core.triples.store import ExtractorKey, TripleStore


class CountingEncoder:
    def __init__(self) -> None:
        self.texts = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for row, text in enumerate(texts):
            for ch in text.encode("utf-8", "surrogatepass")[:64]:
                out[row, ch % 8] += 1.0
        return out


def miner_with(
    limits: WorkLimits | None = None, **kw: object
) -> tuple[EvidenceChainMiner, CountingEncoder]:
    enc = CountingEncoder()
    miner = EvidenceChainMiner(MinerConfig(), embedder=TextEmbedder(enc), limits=limits, **kw)  # type: ignore[arg-type]
    return miner, enc


def test_twenty_thousand_metadata_triples_in_one_document_are_cut_before_embedding() -> None:
    huge = [[f"Entity {i}", "related to", f"Entity {i + 1}"] for i in range(20_000)]
    passages = [
        Passage("big", "A list.", "Big", metadata={"triples": huge}),
        Passage(
            "p2", "Paris is in France.", "Paris", metadata={"triples": [["Paris", "in", "France"]]}
        ),
    ]
    miner, enc = miner_with()
    result = miner.mine("Where is Paris?", passages)
    limits = WorkLimits()
    assert enc.texts <= limits.max_new_texts + 10  # the graph's texts, the question's few
    assert any("max_triples_per_passage" in n for n in result.notes), result.notes
    assert result.kept  # still served


def test_two_thousand_documents_are_bounded_per_call_and_the_top_ranks_keep_their_triples() -> None:
    passages = [
        Passage(
            f"d{i}",
            f"Document {i}.",
            f"Doc {i}",
            metadata={"triples": [[f"Doc {i}", f"rel {j}", f"Thing {i}-{j}"] for j in range(5)]},
        )
        for i in range(2000)
    ]
    # every document read, so the per-call triple and text caps are the ones that bind
    limits = WorkLimits(max_triples=1000, max_new_texts=600, max_documents=2000)
    miner, enc = miner_with(limits)
    result = miner.mine("What is Doc 0 related to?", passages)
    notes = " ".join(result.notes)
    assert "WorkLimits.max_triples" in notes and "WorkLimits.max_new_texts" in notes
    assert enc.texts <= 600 + 10
    assert any(k.passage.id == "d0" for k in result.kept)


def test_new_texts_already_stored_cost_nothing_against_the_cap(tmp_path: Path) -> None:
    passages = [
        Passage(
            f"d{i}", f"Doc {i}.", f"Doc {i}", metadata={"triples": [[f"Doc {i}", "is", f"T{i}"]]}
        )
        for i in range(60)
    ]
    store = TripleStore(tmp_path / "s.sqlite")
    enc = CountingEncoder()
    embedder = TextEmbedder(enc, identity="count@1")
    tight = WorkLimits(max_new_texts=50)
    EvidenceChainMiner(embedder=embedder, vectors=store, limits=tight).mine(
        "What is Doc 1?", passages
    )
    first = enc.texts
    again = EvidenceChainMiner(embedder=embedder, vectors=store, limits=tight).mine(
        "What is Doc 1?", passages
    )
    # The second call embeds the next texts the first left out, not the same ones.
    assert enc.texts - first <= 50 + 5
    assert again.kept


class CountingExtractor:
    extractor_id = "test:chars"
    version = "1"

    def __init__(self) -> None:
        self.chars = 0
        self.seen: list[str] = []

    def extract(self, passages):
        self.chars += sum(len(p.text) for p in passages)
        self.seen.extend(p.id for p in passages)
        return [[Triple(p.title, "is", "long", (p.id,))] for p in passages]

    triples_for = extract


def test_query_time_extraction_is_bounded_per_passage_and_per_call(tmp_path: Path) -> None:
    extractor = CountingExtractor()
    limits = WorkLimits(max_extract_chars=1_000, max_extract_chars_per_call=3_000)
    source = DefaultTripleSource(store=tmp_path / "s.sqlite", extractor=extractor, limits=limits)
    passages = [Passage(f"p{i}", "word " * 2_000, f"Title {i}") for i in range(6)]
    miner, _ = miner_with(triple_source=source)
    result = miner.mine("What is long?", passages)
    assert extractor.chars <= 3_000  # each passage read to 1,000 characters, three of them
    assert extractor.seen == ["p0", "p1", "p2"]
    assert any("max_extract_chars_per_call" in n for n in result.notes), result.notes
    # Nothing is stored for the passages left out: the next call extracts them.
    store = TripleStore(tmp_path / "s.sqlite")
    assert store.contains(passages, ExtractorKey.of(extractor)) == [True] * 3 + [False] * 3
    miner.mine("What is long?", passages)
    assert extractor.seen == ["p0", "p1", "p2", "p3", "p4", "p5"]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", True])
def test_limits_are_checked(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_triples"):
        WorkLimits(max_triples=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="limits"):
        EvidenceChainMiner(limits={"max_triples": 3})  # type: ignore[arg-type]


def test_query_time_extraction_scales_with_the_documents_of_the_call(tmp_path: Path) -> None:
    """Five passages of 20,000 characters: a call over five documents extracts what five
    ordinary documents may (5 x 5,000 characters), not 100,000."""
    extractor = CountingExtractor()
    source = DefaultTripleSource(store=tmp_path / "s.sqlite", extractor=extractor)
    passages = [Passage(f"p{i}", "word " * 4_000, f"Title {i}") for i in range(5)]
    miner, _ = miner_with(triple_source=source)
    result = miner.mine("What is long?", passages)
    per_document = WorkLimits().max_extract_chars_per_document
    assert extractor.seen == ["p0"]  # the first always; the next would pass 25,000
    assert extractor.chars <= 5 * per_document
    assert any("max_extract_chars_per_document" in n for n in result.notes), result.notes
