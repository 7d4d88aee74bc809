"""Text that is not valid Unicode, at every entry point: served with U+FFFD, never a raw error.

A lone surrogate (a code point U+D800-U+DFFF that encodes no character) is what
``json.loads('"\\ud800"')`` returns for an escape in a JSON file or a vector store's metadata,
and what a ``surrogateescape`` decode (file names, ``sys.argv``) makes of bytes that are not
UTF-8. Such a string is not UTF-8: a Hugging Face tokenizer raises ``TypeError`` on it and
``hashlib`` / SQLite raise ``UnicodeEncodeError``. Before, a lone surrogate in a query, a
passage's id, title or text, a triple, a document given to an ingestion transform, a data
file or a store import came out as one of those, from deep inside. Now each entry point
replaces it with U+FFFD (``neocorrag_core.validation.clean_text``) and serves the call.

The models here are as strict as real ones: :class:`StrictBagOfWords` raises the
tokenizer's ``TypeError`` on text that is not UTF-8, the tiny LM's tokenizer is a real one,
and the scripted belief components encode what they are shown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from adapter_fixtures import BRIDGE_NO_LM, CORPUS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core.retrievers import BaseRetriever as LlamaBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field
from tiny_models import build_tiny_lm

from neocorrag_core import (
    EvidenceChainMiner,
    EvidenceReformulator,
    MinerConfig,
    Passage,
    Triple,
)
from neocorrag_core.belief import (
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    DraftAnswer,
    Usage,
    VerifierReply,
)
from neocorrag_core.cli.app import load_demo_questions, main
from neocorrag_core.evireform import ReformulationQuery
from neocorrag_core.formats import read_json_or_lines
from neocorrag_core.indexing.corpus import load_corpus, open_corpus
from neocorrag_core.models import LanguageModel, resolve_embedder
from neocorrag_core.rendering import chain_text, result_context
from neocorrag_core.triples import (
    DefaultTripleSource,
    MetadataTripleSource,
    OpenIETripleSource,
)
from neocorrag_core.triples.store import (
    CachedTripleSource,
    ExtractorKey,
    TripleStore,
    text_sha256,
)
from neocorrag_core.validation import clean_text
from neocorrag_integrations.langchain import BeliefRAG, NeocorRAGCompressor
from neocorrag_integrations.langchain import (
    EvidenceReformulationRetriever as LCReformRetriever,
)
from neocorrag_integrations.langchain_ingest import TripleExtractorTransformer
from neocorrag_integrations.llama_index import (
    BeliefQueryEngine,
    NeocorRAGPostprocessor,
)
from neocorrag_integrations.llama_index import (
    EvidenceReformulationRetriever as LIReformRetriever,
)
from neocorrag_integrations.llama_index_ingest import TripleExtractorTransform

LONE = json.loads('"\\ud800"')  # exactly what a JSON escape gives
assert len(LONE) == 1 and 0xD800 <= ord(LONE) <= 0xDFFF
FFFD = "\ufffd"
FIELDS = ["id", "title", "text", "triple", "query"]
"""Where the lone surrogate goes: every passage's id, title, text or triples, or the query."""

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def strict(*texts: str) -> None:
    """What a real tokenizer does with text that is not UTF-8."""
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise TypeError(
                "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, "
                "InputSequence]]"
            ) from None


class StrictBagOfWords(HashedBagOfWords):
    """The tests' bag-of-words embedder, refusing invalid text as a real tokenizer does."""

    def __call__(self, texts: list[str]) -> Any:
        strict(*texts)
        return super().__call__(texts)


@functools.cache
def embedder() -> Any:
    return resolve_embedder(StrictBagOfWords())


@functools.cache
def tiny_lm() -> LanguageModel:
    model, tokenizer = build_tiny_lm(seed=0)
    return LanguageModel(model=model, tokenizer=tokenizer, name="tiny-unicode")


def rows(field: str) -> list[tuple[str, str, str, list[list[str]]]]:
    """The adapter fixture corpus with a lone surrogate in ``field`` of every passage."""
    out = []
    for pid, title, text, triples in CORPUS:
        triples = [list(t) for t in triples]
        if field == "id":
            pid += LONE
        elif field == "title":
            title += LONE
        elif field == "text":
            text += LONE
        elif field == "triple":  # in the relation, so that the entities still link
            triples = [[s, r + LONE, o] for s, r, o in triples]
        out.append((pid, title, text, triples))
    return out


def query_of(field: str) -> str:
    return QUERY + LONE if field == "query" else QUERY


def passages(field: str) -> list[Passage]:
    return [Passage(p, text, title, metadata={"triples": ts}) for p, title, text, ts in rows(field)]


def documents(field: str) -> list[Document]:
    return [
        Document(id=p, page_content=text, metadata={"title": title, "triples": ts})
        for p, title, text, ts in rows(field)
    ]


def nodes(field: str) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(id_=p, text=text, metadata={"title": title, "triples": ts}))
        for p, title, text, ts in rows(field)
    ]


def strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (dataclasses, mappings, sequences), but not the metadata a
    caller gave a passage, which neocorrag passes through as it is."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Passage):
        yield from (value.id, value.text, value.title)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from strings(item)


def assert_valid(value: Any) -> list[str]:
    """Every string of ``value`` encodes as UTF-8; returns them."""
    found = list(strings(value))
    for text in found:
        text.encode("utf-8")  # UnicodeEncodeError for a lone surrogate
    return found


def assert_replaced(found: Sequence[str], field: str) -> None:
    """The text with the surrogate reached the output, with U+FFFD in its place."""
    assert any(FFFD in text for text in found), f"no U+FFFD for the {field} in the output"


def added_metadata(items: Sequence[Any]) -> list[Any]:
    """What an adapter added to its outputs: the ``neocorrag_*`` metadata, and the chain
    document's text (the documents themselves are copies of the caller's, left as given)."""
    out: list[Any] = []
    for item in items:
        doc = getattr(item, "node", item)
        out.append({k: v for k, v in doc.metadata.items() if k.startswith("neocorrag_")})
        if doc.metadata.get("neocorrag_is_evidence_chains"):
            out.append(doc.get_content() if hasattr(doc, "get_content") else doc.page_content)
    return out


# ---------------------------------------------------------------- the shared function


def test_clean_text_replaces_lone_surrogates_and_returns_valid_text_itself():
    valid = "Aschenbrödel 😀 x"
    assert clean_text(valid) is valid and clean_text("abc") == "abc"
    assert clean_text(LONE) == FFFD
    assert clean_text("a\udc00b\udfff") == f"a{FFFD}b{FFFD}"
    assert clean_text("\ud83d\ude00") == "😀"  # two halves of one character: joined
    assert clean_text("\ude00\ud83d") == FFFD * 2  # in the wrong order: two lone ones


def test_passage_fields_are_cleaned_at_construction():
    passage = Passage(f"p{LONE}", f"text{LONE}", f"{LONE}title", metadata={"k": LONE})
    assert (passage.id, passage.text, passage.title) == (f"p{FFFD}", f"text{FFFD}", f"{FFFD}title")
    assert passage.metadata == {"k": LONE}  # the caller's metadata is not touched
    assert dataclasses.replace(passage, text=LONE).text == FFFD


# ---------------------------------------------------------------- core engines


@pytest.mark.parametrize("decoding", ["none", "beam"])
@pytest.mark.parametrize("field", FIELDS)
def test_miner_serves_invalid_text(field: str, decoding: str):
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=embedder(), lm=tiny_lm())
    result = miner.mine(query_of(field), passages(field), decoding=decoding, beam_width=2)
    assert result.kept
    found = assert_valid([result, result_context(result), chain_text(result)])
    if field != "triple" or result.chains:
        assert_replaced(found, field)
    if field == "triple":
        assert result.chains and FFFD in result.chains[0].text


@pytest.mark.parametrize("field", FIELDS)
def test_miner_serves_triples_a_source_of_the_users_returns(field: str):
    class RawSource:
        """A user's triple source: hands back whatever strings it holds."""

        def triples_for(self, ps: Sequence[Passage]) -> list[list[Triple]]:
            return [
                [Triple(s + LONE, r, o, (p.id,)) for s, r, o in p.metadata["triples"]] for p in ps
            ]

    miner = EvidenceChainMiner(
        MinerConfig(**MINER_CONFIG), embedder=embedder(), triple_source=RawSource()
    )
    result = miner.mine(QUERY, passages(field))
    found = assert_valid([result.chains, result.candidates, result.seed_nodes])
    assert_replaced(found, "triple")


@pytest.mark.parametrize("selection", ["embedding", "beam"])
@pytest.mark.parametrize("field", FIELDS)
def test_reformulator_serves_invalid_text(field: str, selection: str):
    reformulator = EvidenceReformulator(embedder=embedder(), lm=tiny_lm())
    pool = passages(field)
    asked: list[str] = []

    def search(query: str, k: int) -> list[Passage]:
        asked.append(query)
        strict(query)  # the user's search gets valid text
        return pool[:k]

    result = reformulator.retrieve(
        query_of(field), search, k=3, selection=selection, residual_queries="lm"
    )
    assert result.passages
    assert_replaced(assert_valid([result, asked]), field)


def test_reformulator_rerank_serves_invalid_queries():
    reformulator = EvidenceReformulator(embedder=embedder())
    queries = [
        ReformulationQuery(QUERY + LONE, "original", 0),
        ReformulationQuery(f"Mountrail County{LONE}", "entity", 1),
    ]
    ranked = reformulator.rerank(QUERY + LONE, queries, passages("text"), k=3)
    assert ranked
    assert_replaced(assert_valid(ranked), "text")


class StrictParts:
    """Scripted belief components that, like an LM, cannot read invalid text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _read(self, *texts: str, ps: Sequence[Passage] = ()) -> None:
        shown = [*texts, *(t for p in ps for t in (p.id, p.title, p.text))]
        strict(*shown)
        self.seen += shown

    def verify(self, question, passages, draft_answer):
        self._read(question, ps=passages)
        reply = VerifierReply(
            support=0.95, conflict=0.05, uncertainty=0.2, gap=0.1, missing_fact="", drop_ids=()
        )
        return reply, Usage(prompt_tokens=50, generated_tokens=5)

    def answer(self, question, passages):
        self._read(question, ps=passages)
        return DraftAnswer("Stanley", confidence=0.9), Usage(40, 3)

    def next_query(self, question, passages, missing_fact, asked):
        self._read(question, missing_fact, *asked, ps=passages)
        return "Mountrail County capital", Usage(30, 4)

    def rewrite(self, question, last_query, asked):
        self._read(question, last_query, *asked)
        return f"{last_query} again", Usage(20, 4)

    def relevance(self, question, passages):
        self._read(question, ps=passages)
        return 0.7


SUPPORT = AnswerabilityCalibrator(
    features=("support",), weights=(4.0,), bias=0.0, means=(0.5,), scales=(0.25,), version="t"
)
HOPEFUL = AnswerabilityCalibrator(
    features=("support",), weights=(0.0,), bias=2.944, means=(0.5,), scales=(0.25,), version="h"
)


def belief_controller(parts: StrictParts) -> BeliefController:
    return BeliefController(
        verifier=parts,
        generator=parts,
        writer=parts,
        relevance=parts,
        calibrator=SUPPORT,
        after_search=HOPEFUL,
        config=BeliefConfig(k=2),
    )


@pytest.mark.parametrize("field", FIELDS)
def test_belief_controller_serves_invalid_text(field: str):
    parts = StrictParts()
    pool = passages(field)

    def search(query: str, k: int) -> list[Passage]:
        strict(query)
        return pool[:k]

    result = belief_controller(parts).run(query_of(field), search)
    assert result.answer == "Stanley"
    found = assert_valid([result, result.trajectory])
    if field != "triple":  # the scripted parts never read triples
        assert_replaced(found + parts.seen, field)


# ---------------------------------------------------------------- triple sources and the store


def test_metadata_triples_given_as_a_json_string_with_an_escape():
    """What a vector store with flat metadata (Chroma) gives back for JSON triples."""
    passage = Passage("p", "x", metadata={"triples": '[["Oslo\\ud800", "capital of", "Norway"]]'})
    (triples,) = MetadataTripleSource().triples_for([passage])
    assert [t.key() for t in triples] == [(f"Oslo{FFFD}", "capital of", "Norway")]


def test_openie_records_with_invalid_text_match_the_cleaned_passage():
    data = {
        "docs": [
            {
                "title": f"Oslo{LONE}",
                "text": f"Oslo is the capital of Norway.{LONE}",
                "extracted_triples": [[f"Oslo{LONE}", "capital of", "Norway"]],
            }
        ]
    }
    source = OpenIETripleSource.from_records(data)
    passage = Passage("p", f"Oslo is the capital of Norway.{LONE}", f"Oslo{LONE}")
    assert [t.key() for t in source.lookup(passage) or []] == [
        (f"Oslo{FFFD}", "capital of", "Norway")
    ]


class RawExtractor:
    """An extractor whose output keeps a lone surrogate (a model would not; a rule might)."""

    extractor_id = "raw"
    version = "1"

    def extract(self, ps: Sequence[Passage]) -> list[list[Triple]]:
        for p in ps:
            strict(p.id, p.title, p.text)  # it reads valid text
        return [[Triple(f"{p.title or 'X'}{LONE}", "about", "Y", (p.id,))] for p in ps]

    triples_for = extract


def test_store_writes_clean_passages_and_triples(tmp_path: Path):
    store = TripleStore(tmp_path / "t.sqlite")
    key = ExtractorKey("fake", "1")
    passage = Passage(f"p{LONE}", f"text{LONE}", "T")
    raw = [Triple(f"A{LONE}", f"r{LONE}", "B")]
    assert store.put_many([(passage, raw)], key, link_ids=True) == 1
    assert store.get_many([passage], key) == [[Triple(f"A{FFFD}", f"r{FFFD}", "B", (passage.id,))]]
    assert store.document_hashes([f"p{FFFD}"]) == {f"p{FFFD}": [text_sha256(passage)]}
    source = CachedTripleSource(store, RawExtractor())
    (found,) = source.triples_for([Passage("q", f"other{LONE}", f"Title{LONE}")])
    assert [t.key() for t in found] == [(f"Title{FFFD}{FFFD}", "about", "Y")]


def test_store_document_ids_and_entity_lookups_take_invalid_text(tmp_path: Path):
    """``link_documents``, ``delete`` and ``find_entity`` handed their strings to SQLite as
    they were (a ``UnicodeEncodeError``); they need the ``store.py`` change of issue 55."""
    store = TripleStore(tmp_path / "t.sqlite")
    key = ExtractorKey("fake", "1")
    passage = Passage("p", "text", "T")
    store.put_many([(passage, [Triple("A", "r", "B")])], key)
    assert store.link_documents([(f"doc{LONE}", passage)]) == 1
    assert store.document_hashes([f"doc{FFFD}"]) == {f"doc{FFFD}": [text_sha256(passage)]}
    assert [t.key() for t in store.find_entity(f"A{LONE}")] == []
    assert store.delete(document_ids=[f"doc{LONE}"]).documents_found == 1


def test_store_import_of_escaped_invalid_text(tmp_path: Path):
    passage = Passage("p", "text", "T")
    entry = {
        "text_sha256": text_sha256(passage),
        "extractor": f"fake{LONE}",
        "version": "1",
        "triples": [[f"A{LONE}", "r", "B\udfff"]],
        "document_ids": [f"doc{LONE}"],
    }
    line = json.dumps(entry)  # escapes them: "\\ud800", as any JSON writer does
    assert "\\ud800" in line and LONE not in line
    export = tmp_path / "dump.jsonl"
    export.write_text(
        "\n".join(
            [
                json.dumps({"neocorrag_triple_store_export": 1}),
                line,
                json.dumps({"neocorrag_triple_store_export_end": 1}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    store = TripleStore(tmp_path / "t.sqlite")
    report = store.import_jsonl(export)
    assert (report.imported, report.invalid) == (1, 0)
    key = ExtractorKey(f"fake{FFFD}", "1")
    assert [t.key() for t in store.get_many([passage], key)[0] or []] == [
        (f"A{FFFD}", "r", f"B{FFFD}")
    ]
    assert store.document_hashes([f"doc{FFFD}"]) == {f"doc{FFFD}": [text_sha256(passage)]}
    assert main(["store", "import", str(export), "--store", str(tmp_path / "t2.sqlite")]) == 0


# ---------------------------------------------------------------- LangChain and LlamaIndex


def compressor() -> NeocorRAGCompressor:
    return NeocorRAGCompressor(
        embedder=embedder(),
        decoding="none",
        miner_config={**MINER_CONFIG, "chain_format": "linking"},
    )


def postprocessor() -> NeocorRAGPostprocessor:
    return NeocorRAGPostprocessor(
        embedder=embedder(),
        decoding="none",
        miner_config={**MINER_CONFIG, "chain_format": "linking"},
    )


@pytest.mark.parametrize("field", FIELDS)
def test_compressor_serves_invalid_text(field: str):
    docs = documents(field)
    out = compressor().compress_documents(docs, query_of(field))
    assert out
    assert_valid(added_metadata(out))
    out_async = asyncio.run(compressor().acompress_documents(docs, query_of(field)))
    assert [d.id for d in out_async] == [d.id for d in out]


@pytest.mark.parametrize("field", FIELDS)
def test_postprocessor_serves_invalid_text(field: str):
    items = nodes(field)
    out = postprocessor().postprocess_nodes(items, query_str=query_of(field))
    assert out
    assert_valid(added_metadata(out))
    out_async = asyncio.run(postprocessor().apostprocess_nodes(items, query_str=query_of(field)))
    assert [n.node.node_id for n in out_async] == [n.node.node_id for n in out]


@pytest.mark.parametrize("field", ["id", "title", "text"])
def test_adapters_serve_invalid_text_whose_triples_come_from_the_store(tmp_path: Path, field: str):
    """Documents without ``metadata["triples"]``: the default source looks their text up in
    the store (a content hash, once a ``UnicodeEncodeError``) and stores what it extracts."""
    source = DefaultTripleSource(store=tmp_path / "t.sqlite", extractor=RawExtractor())
    config = {**MINER_CONFIG, "chain_format": "linking"}
    lc = NeocorRAGCompressor(
        embedder=embedder(), decoding="none", miner_config=config, triple_source=source
    )
    docs = [Document(id=p, page_content=t, metadata={"title": h}) for p, h, t, _ in rows(field)]
    out = lc.compress_documents(docs, QUERY)
    assert out
    assert_valid(added_metadata(out))
    li = NeocorRAGPostprocessor(
        embedder=embedder(), decoding="none", miner_config=config, triple_source=source
    )
    items = [
        NodeWithScore(node=TextNode(id_=p, text=t, metadata={"title": h}))
        for p, h, t, _ in rows(field)
    ]
    assert li.postprocess_nodes(items, query_str=QUERY)
    assert TripleStore(tmp_path / "t.sqlite").count() == len(docs)


class ListRetriever(BaseRetriever):
    """A LangChain retriever over fixed documents that, like a dense index, embeds the query."""

    docs: list[Any] = Field(default_factory=list)
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        strict(query)  # the wrappers search with valid text only
        self.queries.append(query)
        return list(self.docs)


class ListNodeRetriever(LlamaBaseRetriever):
    def __init__(self, items: list[NodeWithScore]) -> None:
        super().__init__()
        self.items = items
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        strict(query_bundle.query_str)
        self.queries.append(query_bundle.query_str)
        return list(self.items)


@pytest.mark.parametrize("field", FIELDS)
def test_langchain_reformulation_retriever_serves_invalid_text(field: str):
    base = ListRetriever(docs=documents(field))
    wrapper = LCReformRetriever(retriever=base, config=BRIDGE_NO_LM, k=3, embedder=embedder())
    out = wrapper.invoke(query_of(field))
    assert out
    found = assert_valid([added_metadata(out), base.queries])
    if field == "query":
        assert_replaced(found, field)
    assert asyncio.run(wrapper.ainvoke(query_of(field)))


@pytest.mark.parametrize("field", FIELDS)
def test_llama_index_reformulation_retriever_serves_invalid_text(field: str):
    base = ListNodeRetriever(nodes(field))
    wrapper = LIReformRetriever(base, config=BRIDGE_NO_LM, k=3, embedder=embedder())
    out = wrapper.retrieve(query_of(field))
    assert out
    found = assert_valid([added_metadata(out), base.queries])
    if field == "query":
        assert_replaced(found, field)
    assert asyncio.run(wrapper.aretrieve(query_of(field)))


@pytest.mark.parametrize("field", FIELDS)
def test_belief_adapters_serve_invalid_text(field: str):
    parts = StrictParts()
    lc = BeliefRAG(ListRetriever(docs=documents(field)), controller=belief_controller(parts))
    out = lc.invoke(query_of(field))
    assert out["answer"] == "Stanley"
    assert_valid({k: v for k, v in out.items() if k != "documents"})
    li = BeliefQueryEngine(ListNodeRetriever(nodes(field)), controller=belief_controller(parts))
    response = li.query(query_of(field))
    assert str(response) == "Stanley"
    if field != "triple":
        assert_replaced(parts.seen, field)


@pytest.mark.parametrize("field", ["id", "title", "text"])
def test_langchain_ingestion_stores_invalid_text_cleaned(tmp_path: Path, field: str):
    store = tmp_path / "t.sqlite"
    docs = [
        Document(id=p, page_content=text, metadata={"title": title})
        for p, title, text, _ in rows(field)
    ]
    transformer = TripleExtractorTransformer(
        extractor=RawExtractor(), store=str(store), embedder=False
    )
    out = transformer.transform_documents(docs)
    assert [d.page_content for d in out] == [d.page_content for d in docs]  # as given
    assert all(FFFD in d.metadata["triples"][0][0] for d in out)
    opened = TripleStore(store)
    assert opened.count() == len(docs)
    first = Passage(clean_text(docs[0].id or "x"), docs[0].page_content, rows(field)[0][1])
    assert opened.document_hashes([first.id]) == {first.id: [text_sha256(first)]}


@pytest.mark.parametrize("field", ["id", "title", "text"])
def test_llama_index_ingestion_stores_invalid_text_cleaned(tmp_path: Path, field: str):
    store = tmp_path / "t.sqlite"
    items = [
        TextNode(id_=p, text=text, metadata={"title": title}) for p, title, text, _ in rows(field)
    ]
    transform = TripleExtractorTransform(extractor=RawExtractor(), store=str(store), embedder=False)
    out = transform(items)
    assert all(FFFD in n.metadata["triples"][0][0] for n in out)
    opened = TripleStore(store)
    assert opened.count() == len(items)
    first = Passage(clean_text(items[0].node_id), items[0].text, rows(field)[0][1])
    assert opened.document_hashes([first.id]) == {first.id: [text_sha256(first)]}


# ---------------------------------------------------------------- data files and the CLI


def test_data_files_with_escaped_invalid_text_are_read_cleaned(tmp_path: Path):
    rows_ = [{"title": f"Oslo{LONE}", "text": "Oslo is in Norway.\udc00"}]
    whole = tmp_path / "corpus.json"
    whole.write_text(json.dumps(rows_), encoding="utf-8")  # "\\ud800" escapes
    lines = tmp_path / "corpus.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in rows_) + "\n", encoding="utf-8")
    for path in (whole, lines):
        assert read_json_or_lines(path) == [
            {"title": f"Oslo{FFFD}", "text": f"Oslo is in Norway.{FFFD}"}
        ]
        (passage,) = load_corpus(path).passages
        assert (passage.title, passage.text) == (f"Oslo{FFFD}", f"Oslo is in Norway.{FFFD}")
        (streamed,) = list(open_corpus(path))
        assert streamed == passage
    demo = tmp_path / "demo.json"
    question = {
        "question": f"Where is Oslo?{LONE}",
        "paragraphs": [{"id": f"p{LONE}", "text": "Oslo is in Norway.", "title": "Oslo"}],
    }
    demo.write_text(json.dumps([question]), encoding="utf-8")
    (item,) = load_demo_questions(demo)
    assert (item["question"], item["paragraphs"][0]["id"]) == (f"Where is Oslo?{FFFD}", f"p{FFFD}")


def test_cli_store_delete_takes_an_id_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """``--id`` of bytes that are not UTF-8 reaches Python as a lone surrogate."""
    store = TripleStore(tmp_path / "t.sqlite")
    passage = Passage(f"doc{LONE}", "text", "T")  # stored under doc\ufffd
    store.put_many([(passage, [Triple("A", "r", "B")])], ExtractorKey("x", "1"), link_ids=True)
    store.close()
    argv_id = b"doc\xff".decode("utf-8", "surrogateescape")
    code = main(["store", "delete", "--store", str(tmp_path / "t.sqlite"), "--id", argv_id])
    assert code == 0, capsys.readouterr().err
    assert "deleted 1 stored passage(s)" in capsys.readouterr().out
