"""Every input bounded (issue 64): a megabyte title, a crowd of documents and a slow search
each cost a bounded amount of work, and the cap that binds is named in the notes.

No test here measures time: the oversized inputs are checked by the work they cause (no
pattern compiled from a title, no triples read past the document cap, searches that run
concurrently because a barrier only opens when they do)."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from neocorrag_core import ConfigError, EvidenceChainMiner, MinerConfig, Passage, RetrievalError
from neocorrag_core.chains.links import mentions
from neocorrag_core.evireform import EvidenceReformulator, ReformulationConfig
from neocorrag_core.limits import WorkLimits
from neocorrag_core.pipeline import EvidencePipeline

QUESTION = "Where was the director of Film X born?"
BIG = "Big Title " * 100_000  # a megabyte


def _doc(pid: str, text: str, *triples: tuple[str, str, str], title: str = "") -> Passage:
    return Passage(pid, text, title=title, metadata={"triples": [list(t) for t in triples]})


FILM = _doc(
    "film",
    "Film X is a 1999 drama directed by Jane Roe and produced by John Doe.",
    ("Film X", "directed by", "Jane Roe"),
    ("Film X", "produced by", "John Doe"),
    title="Film X",
)
BIRTH = _doc(
    "birth", "Jane Roe was born in Oslo.", ("Jane Roe", "born in", "Oslo"), title="Jane Roe"
)
DOE = _doc(
    "doe", "John Doe was born in Bergen.", ("John Doe", "born in", "Bergen"), title="John Doe"
)
NOISE = [
    _doc(f"noise{i}", f"Film Y{i} is a comedy.", (f"Film Y{i}", "genre", "comedy"), title=f"Y{i}")
    for i in range(4)
]


def search(query: str, k: int) -> list[Passage]:
    """The second hops only for a query that names their bridge entity."""
    q = query.casefold()
    if "jane roe" in q:
        return [BIRTH, FILM][:k]
    if "john doe" in q:
        return [DOE, FILM][:k]
    return [FILM, *NOISE][:k]


NO_LM = ReformulationConfig(selection="embedding", residual_queries="entities")


@pytest.fixture
def long_patterns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of regex patterns over 10,000 characters compiled during the test."""
    seen: list[int] = []
    compile_ = re._compile  # type: ignore[attr-defined]

    def counting(pattern: object, flags: object) -> object:
        if isinstance(pattern, str) and len(pattern) > 10_000:
            seen.append(len(pattern))
        return compile_(pattern, flags)

    monkeypatch.setattr(re, "_compile", counting)
    return seen


# ---- oversized fields ---------------------------------------------------------------------


def test_mentions_matches_whole_phrases_as_the_regex_did() -> None:
    assert mentions("the film x is", "film x")
    assert not mentions("the film xy is", "film x")
    assert not mentions("afilm x", "film x")
    assert mentions("film x", "film x") and mentions("(film x)", "film x")
    assert mentions("a_film x, film x.", "film x")  # the second occurrence counts
    assert not mentions("film x_", "film x") and not mentions("fi", "fi")


def test_a_megabyte_title_is_matched_on_its_beginning_and_handed_back_whole(
    bow_embedder: object, long_patterns: list[int]
) -> None:
    passages = [FILM, *NOISE[:2], _doc("big", "Jane Roe was born in Oslo.", title=BIG + "Jane")]
    miner = EvidenceChainMiner(MinerConfig(keep="recall"), embedder=bow_embedder)
    result = miner.mine(QUESTION, passages)
    assert long_patterns == []
    assert any("WorkLimits.max_title_chars" in n for n in result.notes), result.notes
    by_id = {p.id: p for p in [*result.passages, *(d.passage for d in result.dropped)]}
    assert by_id["big"].title == BIG + "Jane"  # what the caller gave, not the cut
    assert set(by_id) == {p.id for p in passages}


def test_megabyte_titles_through_the_pipeline_are_bounded_and_handed_back_whole(
    bow_embedder: object, long_patterns: list[int]
) -> None:
    def titled(query: str, k: int) -> list[Passage]:
        return [Passage(p.id, p.text, BIG + p.title, metadata=p.metadata) for p in search(query, k)]

    miner = EvidenceChainMiner(embedder=bow_embedder)
    pipeline = EvidencePipeline(miner, EvidenceReformulator(NO_LM, models=miner.models))
    result = pipeline.retrieve(QUESTION, titled, k=5)
    assert long_patterns == []
    assert result.reformulation is not None
    assert any("max_title_chars" in n for n in result.reformulation.notes)
    assert all(p.title.startswith(BIG) for p in [*result.passages, *result.retrieved])
    assert all(p.title.startswith(BIG) for p in result.reformulation.pool)
    # the same ranking as with ordinary titles: the cut keeps every name the rules need
    plain = EvidencePipeline(miner, EvidenceReformulator(NO_LM, models=miner.models))
    assert [p.id for p in result.retrieved] == [
        p.id for p in plain.retrieve(QUESTION, search, k=5).retrieved
    ]


# ---- crowds of documents ------------------------------------------------------------------


class CountingSource:
    """A triple source that counts the passages it is asked about."""

    def __init__(self) -> None:
        self.asked = 0

    def triples_for(self, passages: list[Passage]) -> list[list[object]]:
        from neocorrag_core.triples import MetadataTripleSource

        self.asked += len(passages)
        return MetadataTripleSource().triples_for(passages)  # type: ignore[return-value]


def test_twenty_thousand_documents_are_read_to_the_document_cap(bow_embedder: object) -> None:
    crowd = [
        _doc(f"x{i}", f"Film Z{i} is a comedy.", (f"Film Z{i}", "genre", "comedy"))
        for i in range(20_000)
    ]
    source = CountingSource()
    miner = EvidenceChainMiner(
        MinerConfig(keep="recall"), embedder=bow_embedder, triple_source=source
    )
    result = miner.mine(QUESTION, [FILM, BIRTH, *crowd])
    cap = WorkLimits().max_documents
    assert source.asked == cap
    assert any("WorkLimits.max_documents" in n for n in result.notes), result.notes
    assert {"film", "birth"} <= {p.id for p in result.passages}  # the top-ranked are served
    unread = [d for d in result.dropped if d.rank > cap]
    assert len(unread) == 20_002 - cap
    assert [d.rank for d in unread] == list(range(cap + 1, 20_003))
    assert len(result.kept) + len(result.dropped) == 20_002


def test_the_document_cap_is_a_checked_setting(bow_embedder: object) -> None:
    miner = EvidenceChainMiner(embedder=bow_embedder, limits=WorkLimits(max_documents=2))
    result = miner.mine(QUESTION, [FILM, BIRTH, DOE])
    assert [d.passage.id for d in result.dropped if d.rank == 3] == ["doe"]
    for bad in (0, -1, 2.5, "3", True):
        with pytest.raises(ConfigError, match="max_documents"):
            WorkLimits(max_documents=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="max_title_chars"):
            WorkLimits(max_title_chars=bad)  # type: ignore[arg-type]


# ---- slow searches ------------------------------------------------------------------------


def _residual_queries(bow_embedder: object, config: ReformulationConfig) -> list[str]:
    found = EvidenceReformulator(config, embedder=bow_embedder).retrieve(QUESTION, search, 5)
    return [q.text for q in found.queries[1:]]


def test_a_rounds_sync_searches_run_concurrently(bow_embedder: object) -> None:
    residual = _residual_queries(bow_embedder, NO_LM)
    assert len(residual) >= 2  # the fixture names two bridges
    # Each residual search waits until all of them are running: one after another, the
    # first would wait alone until the barrier times out.
    barrier = threading.Barrier(len(residual), timeout=20)

    def gathered(query: str, k: int) -> list[Passage]:
        if query != QUESTION:
            barrier.wait()
        return search(query, k)

    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    result = reformulator.retrieve(QUESTION, gathered, 5)
    assert [q.text for q in result.queries[1:]] == residual
    assert {"birth", "doe"} <= {r.passage.id for r in result.passages}


def _blocking(release: threading.Event, *, first: bool = False):
    def blocked(query: str, k: int) -> list[Passage]:
        if first or query != QUESTION:
            release.wait(30)
        return search(query, k)

    return blocked


def test_a_timed_out_residual_search_ends_in_a_result_that_says_so(bow_embedder: object) -> None:
    release = threading.Event()
    config = ReformulationConfig(
        selection="embedding", residual_queries="entities", search_timeout=0.2
    )
    try:
        result = EvidenceReformulator(config, embedder=bow_embedder).retrieve(
            QUESTION, _blocking(release), 5
        )
    finally:
        release.set()
    assert [r.passage.id for r in result.passages][:1] == ["film"]
    assert "birth" not in {r.passage.id for r in result.passages}
    assert all(ids == [] for ids in result.query_results[1:])
    note = next(n for n in result.notes if "search_timeout" in n)
    assert "Jane Roe" in note


def test_the_first_search_is_waited_for_whatever_the_timeout(bow_embedder: object) -> None:
    """The first search is the user's own retrieval (a cold vector store may take long):
    the timeout bounds only what EviReform adds."""
    release = threading.Event()
    threading.Timer(0.5, release.set).start()
    config = ReformulationConfig(
        selection="embedding", residual_queries="entities", search_timeout=0.2
    )
    reformulator = EvidenceReformulator(config, embedder=bow_embedder)
    result = reformulator.retrieve(QUESTION, _blocking(release, first=True), 5)
    assert release.is_set()  # it answered after the timeout had passed, and counts
    assert {"film", "birth", "doe"} <= {r.passage.id for r in result.passages}
    assert not any("search_timeout" in n for n in result.notes)


def test_async_searches_past_the_deadline_are_cancelled(bow_embedder: object) -> None:
    cancelled: list[str] = []

    async def slow(query: str, k: int) -> list[Passage]:
        if query != QUESTION:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(query)
                raise
        return search(query, k)

    config = ReformulationConfig(
        selection="embedding", residual_queries="entities", search_timeout=0.2
    )
    reformulator = EvidenceReformulator(config, embedder=bow_embedder)
    result = asyncio.run(reformulator.aretrieve(QUESTION, slow, 5))
    assert sorted(cancelled) == sorted(q.text for q in result.queries[1:])
    assert any("search_timeout" in n for n in result.notes)


def test_max_searches_bounds_the_calls_of_the_search(bow_embedder: object) -> None:
    calls: list[str] = []

    def counted(query: str, k: int) -> list[Passage]:
        calls.append(query)
        return search(query, k)

    config = ReformulationConfig(selection="embedding", residual_queries="entities", max_searches=2)
    result = EvidenceReformulator(config, embedder=bow_embedder).retrieve(QUESTION, counted, 5)
    assert len(calls) == 2 and len(result.queries) == 2
    assert any("ReformulationConfig.max_searches" in n for n in result.notes)
    for bad in (0, 1.5, "2"):
        with pytest.raises(ConfigError, match="max_searches"):
            ReformulationConfig(max_searches=bad)  # type: ignore[arg-type]
    for bad in (0, -1.0, float("nan"), "1"):
        with pytest.raises(ConfigError, match="search_timeout"):
            ReformulationConfig(search_timeout=bad)  # type: ignore[arg-type]


def test_a_failing_concurrent_search_raises_after_the_round(bow_embedder: object) -> None:
    def failing(query: str, k: int) -> list[Passage]:
        if query != QUESTION:
            raise OSError("index gone")
        return search(query, k)

    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    with pytest.raises(RetrievalError, match="OSError: index gone"):
        reformulator.retrieve(QUESTION, failing, 5)


# ---- the adapters' side of the caps, metadata lists, long questions ------------------------


def test_the_compressor_makes_no_passage_of_a_document_past_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conftest import HashedBagOfWords
    from langchain_core.documents import Document

    from neocorrag_core.records import documents
    from neocorrag_integrations.langchain import NeocorRAGCompressor
    from neocorrag_integrations.metadata_keys import run_metadata

    made: list[str] = []
    real = documents.passage

    def counted(pid: str, fields: documents.Fields) -> Passage:
        made.append(pid)
        return real(pid, fields)

    monkeypatch.setattr(documents, "passage", counted)
    docs = [
        Document(id=p.id, page_content=p.text, metadata={"title": p.title, "triples": t})
        for p, t in (
            (FILM, [["Film X", "directed by", "Jane Roe"]]),
            (BIRTH, [["Jane Roe", "born in", "Oslo"]]),
        )
    ] + [Document(id=f"x{i}", page_content=f"Film Z{i} is a comedy.") for i in range(20_000)]
    compressor = NeocorRAGCompressor(embedder=HashedBagOfWords(), triple_source=None)
    out = compressor.compress_documents(docs, QUESTION)
    cap = WorkLimits().max_documents
    assert len(made) == cap
    run = run_metadata(out)
    assert any("WorkLimits.max_documents" in n for n in run["neocorrag_notes"])
    assert set(range(cap + 1, 20_003)) <= set(run["neocorrag_dropped_ranks"])
    assert {"film", "birth"} <= {d.id for d in out}


def test_a_metadata_list_is_parsed_only_to_the_per_passage_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from neocorrag_core.limits import collecting_notes
    from neocorrag_core.triples import DefaultTripleSource
    from neocorrag_core.triples import base as triples_base

    parsed = [0]
    real = triples_base.parse_triple

    def counted(item: object, source_id: str) -> object:
        parsed[0] += 1
        return real(item, source_id)

    monkeypatch.setattr(triples_base, "parse_triple", counted)
    huge = [[f"Entity {i}", "related to", f"Entity {i + 1}"] for i in range(100_000)]
    source = DefaultTripleSource(store=":memory:", extract=False)
    with collecting_notes() as notes:
        (triples,) = source.triples_for([Passage("big", "A list.", metadata={"triples": huge})])
    cap = WorkLimits().max_triples_per_passage
    assert len(triples) == cap and parsed[0] == cap
    assert any("max_triples_per_passage" in n for n in notes), notes


def test_a_huge_question_is_read_to_its_cap_and_handed_back_whole() -> None:
    import numpy as np

    from neocorrag_core.models import TextEmbedder

    longest = [0]

    def encode(texts: list[str]) -> np.ndarray:
        longest[0] = max([longest[0], *(len(t) for t in texts)])
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.casefold().split()[:64]:
                out[row, hash(word) % 16] += 1.0
        return out

    question = QUESTION + " and more" * 40_000  # 360 KB
    miner = EvidenceChainMiner(embedder=TextEmbedder(encode))
    result = miner.mine(question, [FILM, BIRTH])
    assert longest[0] <= WorkLimits().max_query_chars
    assert result.query == question
    assert any("WorkLimits.max_query_chars" in n for n in result.notes), result.notes


def test_the_new_texts_a_call_embeds_scale_with_its_documents() -> None:
    import numpy as np

    from neocorrag_core.models import TextEmbedder

    embedded = [0]

    def encode(texts: list[str]) -> np.ndarray:
        embedded[0] += len(texts)
        return np.ones((len(texts), 8), dtype=np.float32)

    listing = [[f"Name {i}", "member of", f"Band {i}"] for i in range(300)]
    passages = [
        Passage(f"c{j}", "The members were ...", metadata={"triples": listing}) for j in range(2)
    ]
    miner = EvidenceChainMiner(embedder=TextEmbedder(encode))
    result = miner.mine("Who was a member of Band 1?", passages)
    per_document = WorkLimits().max_new_texts_per_document
    assert embedded[0] <= 2 * per_document + 10  # two documents' worth, the question's few
    assert any("WorkLimits.max_new_texts_per_document" in n for n in result.notes)
