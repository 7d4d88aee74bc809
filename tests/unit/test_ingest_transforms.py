"""Triples at ingestion: the LlamaIndex transform and the LangChain transformer, on the real
frameworks (an ``IngestionPipeline``, an ``InMemoryVectorStore``) and the real spaCy
extractor on a few handwritten passages. The pipeline with worker processes is in
``tests/integration/test_ingest_workers.py`` (each worker imports LlamaIndex and spaCy).

What matters most: a passage annotated at ingestion is found in the store at query time,
under the key the adapters compute, so nothing is extracted twice.

The transforms store vectors beside the triples, by default the bundled MiniLM's: here
``embedder=False`` (none), or a tiny sentence-transformers folder where the vectors are
checked (the bundled model is for ``tests/integration``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("spacy")
pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LlamaDocument
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from tiny_models import save_tiny_embedder

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.models import resolve_embedder
from neocorrag_core.records.documents import read_passages, to_passages
from neocorrag_core.triples import MetadataTripleSource, SpacyTripleExtractor, TripleAnnotator
from neocorrag_core.triples.store import CachedTripleSource, TripleStore, text_sha256
from neocorrag_core.types import Passage, Triple
from neocorrag_integrations import langchain as lc_adapter
from neocorrag_integrations import llama_index as li_adapter
from neocorrag_integrations.langchain import TripleExtractorTransformer
from neocorrag_integrations.langchain_ingest import document_passages
from neocorrag_integrations.llama_index import TripleExtractorTransform
from neocorrag_integrations.llama_index_ingest import node_passages


def adapter_passages(adapter: Any, documents: list[Any]) -> list[Passage]:
    """The passages a query-time adapter reads of ``documents``."""
    return read_passages(documents, adapter._read)


TEXTS = {
    "curie": ("Marie Curie", "Marie Curie discovered polonium and radium. She was born in Warsaw."),
    "paris": ("Paris", "Paris is the capital of France. The Seine flows through Paris."),
    "seine": ("", "The Seine flows into the English Channel."),
}


@pytest.fixture(scope="module")
def spacy_extractor() -> SpacyTripleExtractor:
    """One spaCy pipeline for the module; the transforms reuse the loaded object."""
    extractor = SpacyTripleExtractor()
    try:
        extractor.nlp  # noqa: B018 - load once
    except ImportError as exc:
        pytest.skip(str(exc))
    return extractor


@pytest.fixture(scope="module")
def tiny_embedder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny sentence-transformers folder: the embedder whose vectors ingestion stores."""
    return str(save_tiny_embedder(tmp_path_factory.mktemp("tiny_embedder")))


def triple_keys(value: object) -> list[tuple[str, str, str]]:
    """The (s, r, o) of a metadata value in either format."""
    rows = json.loads(value) if isinstance(value, str) else value
    assert isinstance(rows, list)
    return [tuple(row) for row in rows]  # type: ignore[misc]


def llama_documents() -> list[LlamaDocument]:
    return [
        LlamaDocument(text=text, id_=f"doc-{name}", metadata={"title": title} if title else {})
        for name, (title, text) in TEXTS.items()
    ]


def lc_documents() -> list[Document]:
    return [
        Document(page_content=text, id=f"doc-{name}", metadata={"title": title} if title else {})
        for name, (title, text) in TEXTS.items()
    ]


def query_time_source(store_path: Path, extractor: SpacyTripleExtractor) -> CachedTripleSource:
    return CachedTripleSource(TripleStore(store_path), extractor)


def without_triples(passages: list[Passage]) -> list[Passage]:
    """The passages as a vector store that dropped the metadata would give them back."""
    return [
        Passage(
            p.id, p.text, p.title, p.score, {k: v for k, v in p.metadata.items() if k != "triples"}
        )
        for p in passages
    ]


# ---- LlamaIndex -------------------------------------------------------------------------


def test_llama_pipeline_annotates_nodes_and_the_query_side_reads_the_store(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor, tiny_embedder: str
) -> None:
    store = tmp_path / "triples.sqlite"
    transform = TripleExtractorTransform(
        extractor=spacy_extractor, store=store, embedder=tiny_embedder
    )
    pipeline = IngestionPipeline(
        transformations=[
            SentenceSplitter(chunk_size=64, chunk_overlap=0),
            transform,
            MockEmbedding(embed_dim=8),
        ]
    )
    nodes = pipeline.run(documents=llama_documents())
    assert len(nodes) >= len(TEXTS)
    assert transform.stats.extracted == len({n.get_content() for n in nodes})
    for node in nodes:
        assert node.embedding is not None and len(node.embedding) == 8
        assert isinstance(node.metadata["triples"], list)
        assert "triples" in node.excluded_llm_metadata_keys
        assert "triples" in node.excluded_embed_metadata_keys
        for mode in (MetadataMode.EMBED, MetadataMode.LLM):  # hidden from both
            assert "triples" not in node.get_content(metadata_mode=mode)
    curie = next(n for n in nodes if n.ref_doc_id == "doc-curie")
    assert ("Marie Curie", "discovered", "polonium") in triple_keys(curie.metadata["triples"])

    # Query time: the postprocessor's own conversion of the retrieved nodes, metadata lost.
    retrieved = [NodeWithScore(node=n, score=0.5) for n in nodes]
    passages = without_triples(adapter_passages(li_adapter, retrieved))
    source = query_time_source(store, spacy_extractor)
    found = source.triples_for(passages)
    assert source.stats.extracted == 0 and source.stats.hits == len(passages)
    for node, triples in zip(nodes, found, strict=True):
        assert [t.key() for t in triples] == triple_keys(node.metadata["triples"])

    # Node ids and source-document ids are linked to the stored texts.
    hashes = TripleStore(store).document_hashes(["doc-curie", curie.node_id])
    assert text_sha256(node_passages([curie])[0]) in hashes["doc-curie"]
    assert hashes[curie.node_id] == [text_sha256(node_passages([curie])[0])]

    # The vectors of the node and triple texts are stored beside the triples, under the
    # embedder's identity (the one a query-side adapter with embedder=tiny_embedder has).
    identity = resolve_embedder(tiny_embedder).identity
    assert TripleStore(store).vector_summary()[identity]["vectors"] >= len(nodes)


def test_llama_second_ingestion_extracts_nothing(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    store = tmp_path / "triples.sqlite"
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    first = TripleExtractorTransform(extractor=spacy_extractor, store=store, embedder=False)
    before = IngestionPipeline(transformations=[splitter, first]).run(documents=llama_documents())
    second = TripleExtractorTransform(extractor=spacy_extractor, store=store, embedder=False)
    after = IngestionPipeline(transformations=[splitter, second]).run(documents=llama_documents())
    assert first.stats.extracted > 0
    assert second.stats.extracted == 0 and second.stats.hits == len(after)
    assert [n.metadata["triples"] for n in after] == [n.metadata["triples"] for n in before]


def test_llama_acall_equals_call_and_keeps_given_triples(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    transform = TripleExtractorTransform(
        extractor=spacy_extractor,
        store=tmp_path / "t.sqlite",
        metadata_format="json",
        embedder=False,
    )

    def make_nodes() -> list[TextNode]:
        return [
            TextNode(text=TEXTS["curie"][1], id_="a", metadata={"title": "Marie Curie"}),
            TextNode(text=TEXTS["paris"][1], id_="b", metadata={"triples": [["X", "is", "Y"]]}),
        ]

    synced = transform(make_nodes())
    awaited = asyncio.run(transform.acall(make_nodes()))
    assert [n.metadata for n in awaited] == [n.metadata for n in synced]
    assert isinstance(synced[0].metadata["triples"], str)  # json format
    assert synced[1].metadata["triples"] == [["X", "is", "Y"]]  # the user's, untouched
    assert "triples" not in synced[1].excluded_llm_metadata_keys
    assert transform.stats.extracted == 1  # "b" never went to the extractor


def test_llama_transform_pickles_small_and_refuses_what_cannot_travel(tmp_path: Path) -> None:
    transform = TripleExtractorTransform(store=tmp_path / "t.sqlite")
    copy = pickle.loads(pickle.dumps(transform))
    assert copy.store == transform.store and copy.extractor == "spacy"
    assert copy.to_dict() == transform.to_dict()

    class Unpicklable:
        extractor_id, version = "custom", "1"
        fn = staticmethod(lambda: None)

        def extract(self, passages: list[Passage]) -> list[list[Triple]]:
            return [[] for _ in passages]

    custom = TripleExtractorTransform(
        extractor=Unpicklable(), store=tmp_path / "t.sqlite", embedder=False
    )
    custom([TextNode(text="Some text.")])  # fine in this process
    with pytest.raises(TypeError, match="spec string"):
        pickle.dumps(custom)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"store": ":memory:"}, "memory"),
        ({"metadata_format": "yaml"}, "metadata_format"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "3"}, "batch_size"),
        ({"show_progress": "yes"}, "show_progress"),
        ({"extractor": "nltk"}, "unknown extractor"),
        ({"extractor": 42}, "extractor"),
        ({"store": 3}, "store"),
    ],
)
def test_bad_settings_raise_config_error(settings: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        TripleExtractorTransform(**settings)  # type: ignore[arg-type]
    if settings != {"store": ":memory:"}:  # the LangChain transformer allows a private store
        with pytest.raises(ConfigError, match=match):
            TripleExtractorTransformer(**settings)  # type: ignore[arg-type]


def test_llama_transform_rejects_non_nodes(tmp_path: Path) -> None:
    transform = TripleExtractorTransform(store=tmp_path / "t.sqlite")
    with pytest.raises(InputError, match="nodes"):
        transform(["plain text"])  # type: ignore[list-item]


# ---- LangChain --------------------------------------------------------------------------


def test_langchain_vector_store_gets_triples_and_the_query_side_reads_the_store(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    store = tmp_path / "triples.sqlite"
    transformer = TripleExtractorTransformer(extractor=spacy_extractor, store=store, embedder=False)
    docs = [*lc_documents(), Document(page_content="Marie Curie won the Nobel Prize.")]
    originals = [d.model_copy(deep=True) for d in docs]
    annotated = transformer.transform_documents(docs)
    assert docs == originals  # input not modified
    # ... and not later through the output: nested metadata is copied, not shared
    docs[0].metadata["tags"] = ["x"]
    again = transformer.transform_documents(docs[:1])
    again[0].metadata["tags"].append("y")
    again[0].metadata["triples"].append(["changed", "in", "output"])
    assert docs[0].metadata["tags"] == ["x"] and "triples" not in docs[0].metadata
    assert [d.id for d in annotated] == [d.id for d in docs]
    assert [d.page_content for d in annotated] == [d.page_content for d in docs]

    vectors = InMemoryVectorStore.from_documents(annotated, DeterministicFakeEmbedding(size=8))
    stored = vectors.get_by_ids(["doc-curie", "doc-paris", "doc-seine"])
    assert [d.id for d in stored] == ["doc-curie", "doc-paris", "doc-seine"]
    assert ("Marie Curie", "discovered", "polonium") in triple_keys(stored[0].metadata["triples"])
    assert all(isinstance(d.metadata["triples"], list) for d in stored)

    # Query time: the compressor's own conversion, with the metadata triples lost.
    hits = vectors.similarity_search("Marie Curie", k=4)
    passages = without_triples(adapter_passages(lc_adapter, hits))
    source = query_time_source(store, spacy_extractor)
    found = source.triples_for(passages)
    assert source.stats.extracted == 0 and source.stats.hits == 4
    for doc, triples in zip(hits, found, strict=True):
        assert [t.key() for t in triples] == triple_keys(doc.metadata["triples"])
    assert TripleStore(store).document_hashes(["doc-curie"])["doc-curie"] == [
        text_sha256(document_passages(annotated[:1])[0])
    ]


def test_langchain_async_equals_sync_and_second_run_extracts_nothing(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    store = tmp_path / "triples.sqlite"
    first = TripleExtractorTransformer(extractor=spacy_extractor, store=store, embedder=False)
    synced = first.transform_documents(lc_documents())
    assert first.stats.extracted == len(TEXTS)
    second = TripleExtractorTransformer(extractor=spacy_extractor, store=store, embedder=False)
    awaited = asyncio.run(second.atransform_documents(lc_documents()))
    assert awaited == synced
    assert second.stats.extracted == 0 and second.stats.hits == len(TEXTS)


def test_langchain_keeps_given_triples_and_json_round_trips(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    docs = [*lc_documents(), Document(page_content="Paris is big.", metadata={"triples": "[]"})]
    as_list = TripleExtractorTransformer(
        extractor=spacy_extractor, store=tmp_path / "a.sqlite", embedder=False
    )
    as_json = TripleExtractorTransformer(
        extractor=spacy_extractor,
        store=tmp_path / "b.sqlite",
        metadata_format="json",
        embedder=False,
    )
    listed, flat = as_list.transform_documents(docs), as_json.transform_documents(docs)
    assert listed[-1].metadata == flat[-1].metadata == {"triples": "[]"}  # kept as given
    assert as_json.stats.extracted == len(TEXTS)
    assert all(isinstance(d.metadata["triples"], str) for d in flat)
    source = MetadataTripleSource()
    from_list = source.triples_for(document_passages(listed))
    from_json = source.triples_for(document_passages(flat))
    assert [[t.key() for t in ts] for ts in from_json] == [
        [t.key() for t in ts] for ts in from_list
    ]
    assert any(from_json)


def test_langchain_private_memory_store_and_bad_input(
    spacy_extractor: SpacyTripleExtractor,
) -> None:
    transformer = TripleExtractorTransformer(
        extractor=spacy_extractor, store=":memory:", embedder=False
    )
    [doc] = transformer.transform_documents([Document(page_content=TEXTS["curie"][1])])
    assert doc.metadata["triples"]
    with pytest.raises(TypeError, match="memory"):
        pickle.dumps(transformer)
    with pytest.raises(InputError, match="Document"):
        transformer.transform_documents(["text"])  # type: ignore[list-item]
    with pytest.raises(InputError, match="list"):
        transformer.transform_documents(Document(page_content="x"))  # type: ignore[arg-type]


# ---- the conversion both sides share ------------------------------------------------------


def test_ingestion_builds_passages_exactly_as_the_adapters_do() -> None:
    lc_docs = [*lc_documents(), Document(page_content="  No   id,\n odd  spacing. ")]
    assert [text_sha256(p) for p in document_passages(lc_docs)] == [
        text_sha256(p) for p in to_passages([lc_adapter._read(i, d) for i, d in enumerate(lc_docs)])
    ]
    nodes = [
        TextNode(text=text, metadata={"title": title, "year": 1900})
        for title, text in TEXTS.values()
    ]
    scored = [NodeWithScore(node=n) for n in nodes]
    query_side = to_passages([li_adapter._read(i, n) for i, n in enumerate(scored)])
    assert node_passages(nodes) == query_side


# ---- the framework-free part --------------------------------------------------------------


def test_metadata_source_reads_json_strings_and_warns_on_bad_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    passages = [
        Passage("a", "t", metadata={"triples": '[["A", "r", "B"], {"subject": "C", '
                                    '"relation": "s", "object": "D"}]'}),
        Passage("b", "t", metadata={"triples": "[['A', 'r', 'B']]"}),  # Python, not JSON
        Passage("c", "t", metadata={"triples": '{"A": "B"}'}),
        Passage("d", "t", metadata={"triples": "__import__('os').system('true')"}),
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING):
        found = MetadataTripleSource().triples_for(passages)
    assert [t.key() for t in found[0]] == [("A", "r", "B"), ("C", "s", "D")]
    assert found[1:] == [[], [], []]
    assert sum("not JSON" in r.getMessage() for r in caplog.records) == 2
    assert any("not a list" in r.getMessage() for r in caplog.records)


def test_annotator_links_ids_and_skips_passages_with_triples(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    annotator = TripleAnnotator(
        spacy_extractor, tmp_path / "t.sqlite", batch_size=1, embedder=False
    )
    passages = [
        Passage("p1", TEXTS["curie"][1], "Marie Curie"),
        Passage("p2", "Given.", metadata={"triples": []}),
    ]
    found = annotator.annotate(passages, [["p1", "source-doc"], ["p2"]])
    assert found[1] is None and found[0]
    assert annotator.stats.extracted == 1
    links = annotator.source.store.document_hashes(["source-doc", "p2"])
    assert links == {"source-doc": [text_sha256(passages[0])]}  # p2 was not annotated
    copy = pickle.loads(pickle.dumps(annotator))
    assert copy.extractor == annotator.extractor and not copy.stats.hits
    assert copy.annotate(passages[:1]) == found[:1]
    assert copy.stats.hits == 1


def test_annotator_and_transformer_treat_none_triples_as_absent(
    tmp_path: Path, spacy_extractor: SpacyTripleExtractor
) -> None:
    annotator = TripleAnnotator(spacy_extractor, tmp_path / "t.sqlite", embedder=False)
    curie = TEXTS["curie"][1]
    passages = [
        Passage("p1", curie, "Marie Curie", metadata={"triples": None}),
        Passage("p2", "Given.", metadata={"triples": []}),
    ]
    found = annotator.annotate(passages)
    assert found[0] and found[1] is None
    transformer = TripleExtractorTransformer(
        extractor=spacy_extractor, store=tmp_path / "t.sqlite", embedder=False
    )
    [doc] = transformer.transform_documents(
        [Document(page_content=curie, metadata={"title": "Marie Curie", "triples": None})]
    )
    assert triple_keys(doc.metadata["triples"]) == [t.key() for t in found[0]]
