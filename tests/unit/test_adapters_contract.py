"""Contract tests that both framework adapters must pass, on tiny models.

Each test runs once per adapter through a small harness that builds the framework's
documents and reads them back, so the two adapters are held to exactly the same rules.
"""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from typing import Any

import pytest
from adapter_fixtures import CORPUS, DROPPED_IDS, KEPT_IDS, MINER_CONFIG, OTHER_QUERY, QUERY
from conftest import HashedBagOfWords
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

from neocorrag_core import (
    ConfigError,
    EvidenceChainMiner,
    InputError,
    MinerConfig,
    Passage,
    Triple,
)
from neocorrag_core.triples import DefaultTripleSource, MetadataTripleSource, TripleStore
from neocorrag_integrations.langchain import NeocorRAGCompressor
from neocorrag_integrations.llama_index import NeocorRAGPostprocessor
from neocorrag_integrations.metadata_keys import CHAINS, RUN_KEYS, run_metadata


class LangChainHarness:
    """Builds LangChain documents and reads the compressor's output."""

    name = "langchain"
    adapter_cls = NeocorRAGCompressor

    def docs(self, corpus=CORPUS, *, triples: bool = True) -> list[Document]:
        return [
            Document(
                id=pid,
                page_content=text,
                metadata={"title": title, "source": "wiki", **({"triples": t} if triples else {})},
            )
            for pid, title, text, t in corpus
        ]

    def run(self, adapter: Any, docs: list[Any], query: str) -> list[Any]:
        return list(adapter.compress_documents(docs, query))

    async def arun(self, adapter: Any, docs: list[Any], query: str) -> list[Any]:
        return list(await adapter.acompress_documents(docs, query))

    def id(self, doc: Any) -> str | None:
        return doc.id

    def text(self, doc: Any) -> str:
        return doc.page_content

    def metadata(self, doc: Any) -> dict[str, Any]:
        return doc.metadata

    def dump(self, docs: list[Any]) -> list[dict[str, Any]]:
        return [d.model_dump() for d in docs]


class LlamaIndexHarness:
    """Builds LlamaIndex nodes (scores falling with rank) and reads the postprocessor's output."""

    name = "llama_index"
    adapter_cls = NeocorRAGPostprocessor

    def docs(self, corpus=CORPUS, *, triples: bool = True) -> list[NodeWithScore]:
        return [
            NodeWithScore(
                node=TextNode(
                    id_=pid,
                    text=text,
                    metadata={
                        "title": title,
                        "source": "wiki",
                        **({"triples": t} if triples else {}),
                    },
                    excluded_llm_metadata_keys=["triples"],
                ),
                score=round(0.9 - 0.1 * rank, 2),
            )
            for rank, (pid, title, text, t) in enumerate(corpus)
        ]

    def run(self, adapter: Any, docs: list[Any], query: str) -> list[Any]:
        return adapter.postprocess_nodes(docs, query_str=query)

    async def arun(self, adapter: Any, docs: list[Any], query: str) -> list[Any]:
        return await adapter.apostprocess_nodes(docs, query_str=query)

    def id(self, doc: Any) -> str | None:
        return doc.node.node_id

    def text(self, doc: Any) -> str:
        return doc.node.get_content()

    def metadata(self, doc: Any) -> dict[str, Any]:
        return doc.node.metadata

    def dump(self, docs: list[Any]) -> list[dict[str, Any]]:
        return [d.model_dump() for d in docs]


HARNESSES = [LangChainHarness(), LlamaIndexHarness()]


@pytest.fixture(params=HARNESSES, ids=lambda h: h.name)
def h(request):
    return request.param


def make(h, **settings: Any) -> Any:
    """An adapter on the bag-of-words embedder; search scores only and the paper's keep
    rule (Eq. 8: top-2 plus chain-cited documents) unless told otherwise."""
    settings.setdefault("decoding", "none")
    settings.setdefault("keep", "paper")
    settings.setdefault("top_n", 2)
    settings.setdefault("miner_config", MINER_CONFIG)
    return h.adapter_cls(embedder=HashedBagOfWords(), **settings)


def ids(h, docs: list[Any]) -> list[str | None]:
    return [h.id(d) for d in docs]


def comparable(h, docs: list[Any]) -> list[dict[str, Any]]:
    """The output as plain data, less the stage timings (the one field that varies by run)."""
    dumped = h.dump(docs)
    for doc, data in zip(docs, dumped, strict=True):
        meta = data["node"]["metadata"] if "node" in data else data["metadata"]
        assert meta == h.metadata(doc)
        meta.pop("neocorrag_timings", None)
    return dumped


def chain_docs(h, docs: list[Any]) -> list[Any]:
    return [d for d in docs if h.metadata(d).get("neocorrag_evidence_chains") is True]


def test_keeps_supported_documents_in_retrieval_order_after_the_chain_document(h):
    out = h.run(make(h), h.docs(), QUERY)
    chain = out[0]
    assert h.metadata(chain)["neocorrag_evidence_chains"] is True
    assert h.text(chain).startswith("Evidence chains:\n1. Van Hook Township - located in ->")
    assert ids(h, out[1:]) == KEPT_IDS
    originals = {h.id(d): h.text(d) for d in h.docs()}
    assert all(h.text(d) == originals[h.id(d)] for d in out[1:])


def test_every_key_written_is_declared_in_metadata_keys(h):
    from neocorrag_integrations.metadata_keys import ALL_KEYS, REFINEMENT_KEYS

    assert len(set(ALL_KEYS)) == len(ALL_KEYS)
    assert all(key.startswith("neocorrag_") for key in ALL_KEYS)
    outputs = [h.run(make(h), h.docs(), QUERY), h.run(make(h), h.docs(triples=False), QUERY)]
    written = {
        key for out in outputs for doc in out for key in h.metadata(doc) if "neocorrag" in key
    }
    assert written and written <= set(REFINEMENT_KEYS)


def test_chain_document_goes_last_or_is_left_out_as_configured(h):
    last = h.run(make(h, chains_position="last"), h.docs(), QUERY)
    assert ids(h, last[:-1]) == KEPT_IDS
    assert chain_docs(h, last) == [last[-1]]
    without = h.run(make(h, include_chains=False), h.docs(), QUERY)
    assert ids(h, without) == KEPT_IDS
    assert chain_docs(h, without) == []


@pytest.mark.parametrize(
    ("settings", "corpus"),
    [
        ({"include_chains": False}, CORPUS),
        ({"miner_config": {**MINER_CONFIG, "chain_format": "none"}}, CORPUS),
        # The default since miner-8 is chain_format="none".
        ({"miner_config": {k: v for k, v in MINER_CONFIG.items() if k != "chain_format"}}, CORPUS),
        # p1, p3, p5: the only chain (Van Hook Township -> Mountrail County) is p1's alone.
        ({"miner_config": {**MINER_CONFIG, "chain_format": "linking"}}, CORPUS[::2]),
    ],
    ids=["include_chains=False", "chain_format=none", "default", "linking, nothing links"],
)
def test_without_a_chain_document_the_run_metadata_rides_on_the_first_kept_document(
    h, settings, corpus
):
    """The chains, dropped documents, counts and timings of a call are never lost: with no
    chain document they sit on the first kept document, and only there."""
    compact = make(h, miner_config={**MINER_CONFIG, "chain_format": "compact"})
    full = h.run(compact, h.docs(corpus), QUERY)
    assert chain_docs(h, full) == [full[0]]
    expected = {k: v for k, v in h.metadata(full[0]).items() if k in RUN_KEYS}
    out = h.run(make(h, **settings), h.docs(corpus), QUERY)
    assert chain_docs(h, out) == []
    assert ids(h, out) == ids(h, full[1:])
    first = {k: v for k, v in h.metadata(out[0]).items() if k in RUN_KEYS}
    assert set(first) == set(RUN_KEYS) and first[CHAINS]
    first.pop("neocorrag_timings"), expected.pop("neocorrag_timings")
    assert first == expected
    assert all(not set(h.metadata(d)) & set(RUN_KEYS) for d in out[1:])
    assert run_metadata(out) == {k: h.metadata(out[0])[k] for k in RUN_KEYS}
    assert run_metadata(full) == {k: h.metadata(full[0])[k] for k in RUN_KEYS}


def test_refining_an_output_again_leaves_one_calls_run_metadata_in_one_place(h):
    default = {k: v for k, v in MINER_CONFIG.items() if k != "chain_format"}
    once = h.run(make(h, miner_config=default), h.docs(), QUERY)  # run keys on once[0]
    assert CHAINS in h.metadata(once[0])
    twice = h.run(make(h), once, QUERY)  # the linking block: a chain document this time
    carriers = [d for d in twice if CHAINS in h.metadata(d)]
    assert carriers == chain_docs(h, twice) and len(carriers) == 1
    again = h.run(make(h, miner_config=default), once, QUERY)  # no chain document again
    assert [d for d in again if CHAINS in h.metadata(d)] == [again[0]]


def test_metadata_says_why_each_document_was_kept_and_which_chains_it_supports(h):
    every = {**MINER_CONFIG, "max_chain_lines": None}
    out = h.run(make(h, miner_config={**every, "chain_format": "compact"}), h.docs(), QUERY)
    chain_meta = h.metadata(out[0])
    chains = chain_meta["neocorrag_chains"]
    assert [c["number"] for c in chains] == list(range(1, len(chains) + 1))
    # The compact block states every fact of every chain; the first chain whole.
    block = h.text(out[0])
    assert block.splitlines()[1] == f"1. {chains[0]['text']}"
    for chain in chains:
        for t in chain["triples"]:
            assert t["subject"] in block and t["relation"] in block and t["object"] in block
    full = h.run(make(h, miner_config={**every, "chain_format": "full"}), h.docs(), QUERY)
    assert all(f"{c['number']}. {c['text']}" in h.text(full[0]) for c in chains)
    # Linking: only the chains no single kept document states whole get a line.
    linking = make(h, miner_config={**every, "chain_format": "linking"})
    kept_ranks = {h.metadata(d)["neocorrag_retrieval_rank"] for d in out[1:]}

    def inside_one_kept(chain: dict[str, Any]) -> bool:
        common = set(kept_ranks)
        for t in chain["triples"]:
            common &= set(t["source_ranks"])
        return bool(common)

    linked = h.run(linking, h.docs(), QUERY)
    shown = [c for c in chains if not inside_one_kept(c)]
    assert shown and len(shown) < len(chains)  # the fixture has both kinds
    assert ids(h, linked[1:]) == ids(h, out[1:])  # the same documents are kept
    numbers = [line.split(".", 1)[0] for line in h.text(linked[0]).splitlines()[1:]]
    assert numbers == [str(c["number"]) for c in shown]
    # MINER_CONFIG's linking block (the miner-7 default) is cut to its first two lines
    # (here it has two).
    assert comparable(h, h.run(make(h), h.docs(), QUERY)) == comparable(h, linked)
    capped = make(h, miner_config={**MINER_CONFIG, "chain_format": "full"})
    two_lines = h.run(capped, h.docs(), QUERY)
    every_line = h.text(full[0]).splitlines()
    assert len(every_line) > 3, "the fixture must have a line for the cap to drop"
    assert h.text(two_lines[0]).splitlines() == every_line[:3]
    assert h.metadata(two_lines[0])["neocorrag_chains"] == chains  # metadata: every chain
    assert h.metadata(linked[0])["neocorrag_chains"] == chains  # metadata: every chain
    assert chain_meta["neocorrag_dropped_ids"] == DROPPED_IDS
    assert chain_meta["neocorrag_dropped_ranks"] == [3, 5]
    assert chain_meta["neocorrag_num_candidates"] >= len(chains)
    by_id = {h.id(d): h.metadata(d) for d in out[1:]}
    for rank, (pid, title, _, triples) in enumerate(CORPUS, start=1):
        if pid not in by_id:
            continue
        meta = by_id[pid]
        # The caller's metadata survives untouched beside the neocorrag_ keys.
        assert meta["title"] == title and meta["source"] == "wiki" and meta["triples"] == triples
        assert meta["neocorrag_retrieval_rank"] == rank
        assert meta["neocorrag_fallback"] is None
        assert meta["neocorrag_kept_reason"] == ("top_n" if rank <= 2 else "chain")
        # A document's chain numbers are exactly the chains that list it as a source.
        expected = [c["number"] for c in chains if pid in c["source_ids"]]
        assert meta["neocorrag_chain_ids"] == expected
    assert by_id["p4"]["neocorrag_chain_ids"], "p4 is kept only because a chain uses it"
    two_hop = next(c for c in chains if c["source_ranks"] == [1, 4])
    assert two_hop["triples"] == [
        {"subject": "Van Hook Township", "relation": "located in", "object": "Mountrail County",
         "source_ranks": [1]},
        {"subject": "Mountrail County", "relation": "capital", "object": "Stanley",
         "source_ranks": [4]},
    ]  # fmt: skip


def test_never_mutates_the_callers_documents(h):
    docs = h.docs()
    before = h.dump(docs)
    out = h.run(make(h), docs, QUERY)
    assert h.dump(docs) == before
    assert not any(o is d for o in out for d in docs)
    # Changing what came back does not reach the caller's objects either.
    for o in out:
        h.metadata(o)["source"] = "changed"
        if "triples" in h.metadata(o):
            h.metadata(o)["triples"].append(["x", "y", "z"])
    assert h.dump(docs) == before


def test_metadata_that_cannot_be_deep_copied_is_shared_not_fatal(h):
    import threading

    docs = h.docs()
    lock = threading.Lock()  # a client handle, a lock, an IndexNode's sub-retriever ...
    for doc in docs:
        h.metadata(doc)["handle"] = lock
        h.metadata(doc)["tags"] = ["a"]
    out = h.run(make(h), docs, QUERY)
    kept = [o for o in out if h.id(o) in KEPT_IDS]
    assert kept and all(h.metadata(o)["handle"] is lock for o in kept)
    for o in kept:
        h.metadata(o)["tags"].append("changed")  # a copyable value is still the output's own
    assert all(h.metadata(d)["tags"] == ["a"] for d in docs)


def test_empty_input_gives_empty_output(h):
    assert h.run(make(h), [], QUERY) == []
    assert asyncio.run(h.arun(make(h), [], QUERY)) == []


def test_documents_without_triples_pass_through_unchanged_and_say_so(h):
    docs = h.docs(triples=False)
    out = h.run(make(h, triple_source=MetadataTripleSource()), docs, QUERY)
    assert ids(h, out) == ids(h, docs)
    assert [h.text(d) for d in out] == [h.text(d) for d in docs]
    assert chain_docs(h, out) == []
    for rank, doc in enumerate(out, start=1):
        meta = h.metadata(doc)
        assert meta["neocorrag_fallback"] == "no_triples"
        assert meta["neocorrag_kept_reason"] == "passthrough"
        assert meta["neocorrag_retrieval_rank"] == rank


def test_raw_documents_get_triples_from_spacy_by_default_and_from_the_store_after(
    h, tmp_path, monkeypatch
):
    """The quick start on ordinary documents: no wiring, yet chains are mined (spaCy), and
    the second call reads the triples back from the store instead of extracting again."""
    pytest.importorskip("spacy")
    monkeypatch.setenv("NEOCORRAG_TRIPLE_STORE", str(tmp_path / "t.sqlite"))
    adapter = make(h)
    docs = h.docs(triples=False)
    out = h.run(adapter, docs, QUERY)
    assert run_metadata(out)[CHAINS], "no chains mined from raw documents"
    assert all(h.metadata(d).get("neocorrag_fallback") is None for d in out)
    source = adapter.miner.triple_source
    assert isinstance(source, DefaultTripleSource)
    assert source.stats.extracted == len(docs) and source.stats.hits == 0
    again = h.run(make(h), docs, QUERY)  # a new adapter: only the store is shared
    assert ids(h, again) == ids(h, out)
    assert TripleStore(tmp_path / "t.sqlite").count() == len(docs)


def test_without_spacy_raw_documents_pass_through_with_one_warning_naming_the_extra(
    h, tmp_path, monkeypatch, caplog
):
    import neocorrag_core.triples.default as default_module

    monkeypatch.setattr(default_module, "spacy_available", lambda: False)
    monkeypatch.setenv("NEOCORRAG_TRIPLE_STORE", str(tmp_path / "t.sqlite"))
    adapter = make(h)
    docs = h.docs(triples=False)
    with caplog.at_level("WARNING", logger="neocorrag_core.triples.default"):
        out = h.run(adapter, docs, QUERY)
        h.run(adapter, docs, QUERY)
    assert ids(h, out) == ids(h, docs)
    assert {h.metadata(d)["neocorrag_fallback"] for d in out} == {"no_triples"}
    warnings = [r for r in caplog.records if "neocorrag[spacy]" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


class LookupExtractor:
    """A TripleSource standing in for an extractor or a triple store: triples by text."""

    def __init__(self) -> None:
        self.by_text = {text: triples for _, _, text, triples in CORPUS}
        self.calls = 0

    def triples_for(self, passages: list[Passage]) -> list[list[Triple]]:
        self.calls += 1
        return [
            [Triple(*t, source_ids=(p.id,)) for t in self.by_text.get(p.text, [])] for p in passages
        ]


def test_triples_come_from_the_configured_source_when_documents_carry_none(h):
    source = LookupExtractor()
    adapter = h.adapter_cls(
        embedder=HashedBagOfWords(), triple_source=source, decoding="none", top_n=2,
        miner_config=MINER_CONFIG,
    )  # fmt: skip
    out = h.run(adapter, h.docs(triples=False), QUERY)
    assert source.calls == 1
    assert chain_docs(h, out) == [out[0]]
    assert ids(h, out[1:]) == KEPT_IDS


def test_a_query_that_reaches_no_chain_passes_everything_through(h):
    out = h.run(make(h), h.docs(), "Quantum chromodynamics explains gluons")
    assert ids(h, out) == ids(h, h.docs())
    assert chain_docs(h, out) == []
    reasons = {h.metadata(d)["neocorrag_fallback"] for d in out}
    assert len(reasons) == 1 and reasons <= {"no_seed_nodes", "no_candidate_chains"}


def test_a_query_that_reaches_no_chain_is_still_refined_by_the_link_rules(h):
    docs = h.docs()
    out = h.run(make(h, keep="recall"), docs, "Quantum chromodynamics explains gluons")
    assert chain_docs(h, out) == []
    # No chain: top-2 plus one more by rank, and p4, whose topic (Mountrail County) the
    # best-ranked document names; p5 (Berlin) is linked to nothing and goes.
    assert ids(h, out) == ids(h, docs[:4])
    reasons = [h.metadata(d)["neocorrag_kept_reason"] for d in out]
    assert reasons == ["top_n", "top_n", "top_n", "bridge"]
    reasons = {h.metadata(d)["neocorrag_fallback"] for d in out}
    assert len(reasons) == 1 and reasons <= {"no_seed_nodes", "no_candidate_chains"}


def test_documents_without_or_with_repeated_ids_are_still_told_apart(h):
    docs = h.docs()
    if h.name == "langchain":
        docs[1] = docs[1].model_copy(update={"id": None})
        docs[3] = docs[3].model_copy(update={"id": "p1"})  # same id as rank 1
    else:
        docs[3] = NodeWithScore(node=docs[3].node.model_copy(update={"id_": "p1"}), score=0.5)
    out = h.run(make(h), docs, QUERY)
    ranks = [h.metadata(d)["neocorrag_retrieval_rank"] for d in out[1:]]
    assert ranks == [1, 2, 4]  # rank 4 still kept for its chain, under its own (repeated) id
    assert h.id(out[3]) == "p1"


@pytest.mark.parametrize("query", [None, 3, b"bytes", ["a list"], "", "  \n"])
def test_a_missing_non_string_or_empty_query_is_an_input_error(h, query):
    # As the engine does (miner.mine), before any work; it used to be an AttributeError
    # for None and a silent pass-through for an empty string.
    adapter = make(h)
    with pytest.raises(InputError, match="query"):
        h.run(adapter, h.docs(), query)
    with pytest.raises(InputError, match="query"):
        asyncio.run(h.arun(adapter, h.docs(), query))
    with pytest.raises(InputError, match="query"):
        h.run(adapter, [], query)  # even with nothing to refine


@pytest.mark.parametrize("decoding", ["none", "beam"])
def test_async_gives_what_sync_gives(h, decoding, tiny_lm):
    adapter = make(h, decoding=decoding, lm=tiny_lm, top_n=1)
    sync = h.run(adapter, h.docs(), QUERY)
    asynchronous = asyncio.run(h.arun(adapter, h.docs(), QUERY))
    assert chain_docs(h, sync)
    assert comparable(h, asynchronous) == comparable(h, sync)


def test_eight_simultaneous_async_calls_match_their_sync_results(h, tiny_lm):
    adapter = make(h, decoding="beam", lm=tiny_lm, top_n=1, beam_width=3)
    # Eight different inputs: two queries over four rotations of the corpus.
    cases = [(q, CORPUS[i:] + CORPUS[:i]) for q in (QUERY, OTHER_QUERY) for i in range(4)]
    expected = [comparable(h, h.run(adapter, h.docs(corpus), q)) for q, corpus in cases]

    async def all_at_once() -> list[list[Any]]:
        return await asyncio.gather(*(h.arun(adapter, h.docs(c), q) for q, c in cases))

    results = asyncio.run(all_at_once())
    assert [comparable(h, r) for r in results] == expected
    assert all(run_metadata(r)[CHAINS] for r in results)


def test_pickled_adapter_gives_the_same_output(h):
    adapter = make(h, chains_position="last", top_n=1)
    first = h.run(adapter, h.docs(), QUERY)  # models resolved: pickling must drop them
    clone = pickle.loads(pickle.dumps(adapter))
    assert clone.model_dump() == adapter.model_dump()
    assert clone.miner is not adapter.miner
    assert comparable(h, h.run(clone, h.docs(), QUERY)) == comparable(h, first)


def test_settings_round_trip_through_a_plain_dict(h):
    adapter = h.adapter_cls(
        embedder="some/embedder", lm="some/lm", top_n=3, decoding="rank", beam_width=4,
        miner_config={"tau_edge": 0.4}, include_chains=False, chains_position="last",
    )  # fmt: skip
    data = adapter.model_dump()
    assert data["embedder"] == "some/embedder" and data["lm"] == "some/lm"
    data.pop("class_name", None)
    rebuilt = h.adapter_cls(**data)
    assert rebuilt.model_dump() == adapter.model_dump()
    assert rebuilt.effective_config() == adapter.effective_config()
    assert rebuilt.effective_config().tau_edge == 0.4


def test_one_engine_serves_both_adapters_and_several_settings(tiny_lm):
    miner = EvidenceChainMiner(
        MinerConfig(query_entities="ngram", tau_edge=0.1, tau_boost=0.1, decoding="none"),
        embedder=HashedBagOfWords(),
    )
    lc, li = LangChainHarness(), LlamaIndexHarness()
    compressor = NeocorRAGCompressor(miner=miner, top_n=1, beam_width=1)
    postprocessor = NeocorRAGPostprocessor(miner=miner, top_n=2)
    assert compressor.miner is postprocessor.miner is miner
    # The engine's config has the default (no) chain block: only kept documents come back.
    kept_lc = [lc.id(d) for d in lc.run(compressor, lc.docs(), QUERY)]
    kept_li = [li.id(d) for d in li.run(postprocessor, li.docs(), QUERY)]
    assert kept_lc == ["p1", "p4"]  # top 1 plus the sources of the one best chain
    assert kept_li == KEPT_IDS
    assert miner.config.top_n is None and miner.config.beam_width == 5  # engine left as it was


def test_bad_settings_fail_at_construction_with_a_clear_message(h):
    with pytest.raises(ConfigError, match="unknown MinerConfig field"):
        h.adapter_cls(miner_config={"tau_nodes": 0.5})
    with pytest.raises(ConfigError, match="tau_boost"):
        h.adapter_cls(miner_config={"tau_edge": 0.6, "tau_boost": 0.5})
    miner = EvidenceChainMiner()
    with pytest.raises(ConfigError, match="belong"):
        h.adapter_cls(miner=miner, embedder=HashedBagOfWords())
    with pytest.raises(ConfigError, match="query_entities"):
        h.adapter_cls(miner=miner, miner_config={"query_entities": "nope"})
    h.adapter_cls(miner=miner, miner_config={"query_entities": "ngram"})  # applied per call
    with pytest.raises(ConfigError, match="miner must be an EvidenceChainMiner"):
        h.adapter_cls(miner="a miner")
    with pytest.raises(ConfigError, match="chains_position must be one of 'first', 'last'"):
        h.adapter_cls(chains_position="middle")
    with pytest.raises(ConfigError, match="top_n must be >= 0"):
        h.adapter_cls(top_n=-1)


NAME = {"langchain": "NeocorRAGCompressor", "llama_index": "NeocorRAGPostprocessor"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"top_n": 2.5}, r"top_n must be an integer or None, got float 2\.5"),
        ({"top_n": float("nan")}, "top_n must be an integer or None, got float nan"),
        ({"top_n": "3"}, "top_n must be an integer or None, got str '3'"),
        ({"top_n": 2.0}, "top_n must be an integer"),
        ({"beam_width": True}, "MinerConfig.beam_width must be an integer, got bool True"),
        ({"beam_width": 0}, "beam_width must be >= 1"),
        ({"include_chains": "yes"}, "include_chains must be True or False"),
        ({"include_chains": 1}, "include_chains must be True or False"),
        ({"keep": "everything"}, "keep must be one of 'recall'"),
        ({"decoding": 3}, "decoding must be one of 'beam', 'rank', 'none'"),
        ({"lm": ""}, "lm must be a model name or folder"),
        (
            {"miner_config": ["tau_edge"]},
            "miner_config must be a dict of MinerConfig fields, got list",
        ),
        ({"miner_config": {1: 0.5}}, "miner_config keys must be field names"),
        ({"miner_config": {"tau_edge": float("nan")}}, "miner_config: .*tau_edge"),
        ({"miner_config": {"tau_edge": float("inf")}}, "miner_config: .*tau_edge"),
    ],
)
def test_every_bad_field_is_a_config_error_naming_it(h, settings, message):
    # ConfigError, not pydantic's ValidationError: also a ValueError and a TypeError.
    with pytest.raises(ConfigError, match=message) as info:
        h.adapter_cls(**settings)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    assert str(info.value).startswith(NAME[h.name])


def test_valid_integer_types_are_kept_as_ints(h):
    import numpy as np

    adapter = h.adapter_cls(top_n=np.int64(2), beam_width=3)
    assert adapter.top_n == 2 and type(adapter.top_n) is int
    assert adapter.effective_config().top_n == 2


def test_a_document_with_non_string_text_is_named_and_none_metadata_is_empty(h):
    if h.name == "llama_index":
        pytest.skip("LlamaIndex nodes validate text and metadata on assignment too")
    docs = h.docs()
    docs[1].page_content = 123  # LangChain validates at construction, not on assignment
    with pytest.raises(InputError, match=r"documents\[1\] \(id 'p2'\): its text must be"):
        h.run(make(h), docs, QUERY)
    docs = h.docs(triples=False)
    docs[1].metadata = None
    out = h.run(make(h), docs, QUERY)
    assert out and all(isinstance(h.metadata(o), dict) for o in out)


def test_wrong_input_types_are_named(h):
    with pytest.raises(InputError, match=r"\[0\] is a str"):
        h.run(make(h), ["just a string"], QUERY)
    with pytest.raises(InputError, match=r"\[0\] is a str"):
        asyncio.run(h.arun(make(h), ["just a string"], QUERY))


@pytest.mark.parametrize("documents", [None, "a text", {"id": "p1"}, 3, iter(())])
def test_documents_that_are_not_a_list_are_an_input_error(h, documents):
    # None used to be a TypeError from list(), a str was split into characters.
    with pytest.raises(InputError, match="must be a list of"):
        h.run(make(h), documents, QUERY)
    with pytest.raises(InputError, match="must be a list of"):
        asyncio.run(h.arun(make(h), documents, QUERY))


def test_a_tuple_of_documents_is_accepted(h):
    assert ids(h, h.run(make(h), tuple(h.docs()), QUERY)[1:]) == KEPT_IDS


def test_nothing_heavy_loads_at_import_or_construction():
    code = (
        "import sys\n"
        "from neocorrag_integrations.langchain import NeocorRAGCompressor, NeocorRAGEmbeddings\n"
        "from neocorrag_integrations.llama_index import NeocorRAGPostprocessor, "
        "NeocorRAGEmbedding\n"
        "c = NeocorRAGCompressor(); p = NeocorRAGPostprocessor(miner=c.miner)\n"
        "NeocorRAGEmbeddings(); NeocorRAGEmbedding()\n"
        "heavy = ('torch', 'transformers', 'sentence_transformers', 'spacy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_keep_dial_reaches_the_engine_and_the_metadata(h):
    out = h.run(make(h, keep="recall", top_n=None), h.docs(), QUERY)
    reasons = {h.id(d): h.metadata(d)["neocorrag_kept_reason"] for d in out[1:]}
    assert set(reasons.values()) <= {"top_n", "query_entity", "bridge"}
    assert [r for r in reasons.values() if r == "top_n"] == ["top_n", "top_n"]
    with pytest.raises(ValueError):
        make(h, keep="everything")


def test_kept_documents_are_cut_to_their_evidence_sentences(h):
    from neocorrag_integrations.metadata_keys import FOCUSED

    long_p1 = CORPUS[0][2] + " Its post office closed in 1957."
    long_p4 = (
        "Mountrail County is a county in North Dakota. The county seat of Mountrail County is "
        "Stanley. The region grows wheat and barley."
    )
    long = {"p1": long_p1, "p4": long_p4}
    corpus = [(pid, t, long.get(pid, x), tr) for pid, t, x, tr in CORPUS]

    def run(focus: str | None) -> dict[str, Any]:
        config = MINER_CONFIG if focus is None else {**MINER_CONFIG, "passage_focus": focus}
        out = h.run(make(h, miner_config=config), h.docs(corpus), QUERY)
        return {h.id(d): d for d in out[1:]}

    # "linked": p4 is kept below the top-2 (it supplies the chain's second hop): its lead
    # and the sentence naming the chain's entities stay, the crop sentence goes; the top-2
    # documents stay whole.
    linked = run("linked")
    assert list(linked) == KEPT_IDS
    assert h.text(linked["p4"]) == (
        "Mountrail County is a county in North Dakota. The county seat of Mountrail County is "
        "Stanley."
    )
    assert h.metadata(linked["p4"])[FOCUSED] is True
    assert h.text(linked["p1"]) == long_p1 and FOCUSED not in h.metadata(linked["p1"])
    # The default ("all", miner-6) cuts the top-2 too: p1's post-office sentence names
    # nothing of the question or the other documents and states no relation word.
    default = run(None)
    assert list(default) == KEPT_IDS
    assert h.text(default["p1"]) == CORPUS[0][2] and h.metadata(default["p1"])[FOCUSED] is True
    assert h.text(default["p4"]) == h.text(linked["p4"])
    # "none" hands every document on whole.
    whole = run("none")
    assert h.text(whole["p4"]) == long_p4 and FOCUSED not in h.metadata(whole["p4"])
    assert h.text(whole["p1"]) == long_p1 and FOCUSED not in h.metadata(whole["p1"])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("chains_position", "middle", "chains_position must be one of 'first', 'last'"),
        ("include_chains", "no", "include_chains must be True or False"),
    ],
)
def test_an_output_setting_assigned_later_is_checked_on_the_next_call(h, field, value, message):
    adapter = make(h)
    setattr(adapter, field, value)
    with pytest.raises(ConfigError, match=message):
        h.run(adapter, h.docs(), QUERY)
