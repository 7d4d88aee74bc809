"""The corpus graph (issue 61): built from the store, following it, and choosing a passage no
query returned when the graph links it to the evidence."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import sparse

from neocorrag_core.errors import ConfigError
from neocorrag_core.graph import (
    CorpusGraphCache,
    GraphRetriever,
    GraphSettings,
    build_corpus_graph,
    fetch_by_document_ids,
    graph_of,
    local_pagerank,
    personalized_pagerank,
    rank_passages,
)
from neocorrag_core.triples import MetadataTripleSource, TripleStore
from neocorrag_core.triples.cached import CachedTripleSource
from neocorrag_core.triples.keys import text_sha256
from neocorrag_core.types import Passage, Triple

QUESTION = "Who is the mother of the director of Moon Harbor?"
FILM = Passage("film", "Moon Harbor is a film directed by Tom Reyes.", "Moon Harbor")
MOTHER = Passage("mother", "Tom Reyes is the son of Ana Lima.", "Tom Reyes")
NOISE = [
    Passage(f"noise{i}", f"Sun Valley {i} is a town in Spain.", f"Sun Valley {i}") for i in range(4)
]
TRIPLES = {
    FILM.text: [("Moon Harbor", "directed by", "Tom Reyes")],
    MOTHER.text: [("Tom Reyes", "son of", "Ana Lima")],
    **{p.text: [(p.title, "located in", "Spain")] for p in NOISE},
}


class TableExtractor:
    """Triples from a fixed table (a stand-in for spaCy: the graph reads what is stored)."""

    extractor_id = "table"
    version = "1"

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        return [[Triple(*t, (p.id,)) for t in TRIPLES.get(p.text, [])] for p in passages]


@pytest.fixture
def source(tmp_path):
    store = TripleStore(tmp_path / "triples.sqlite")
    source = CachedTripleSource(store, TableExtractor())
    corpus = [FILM, MOTHER, *NOISE]
    store.put_many(
        [(p, TableExtractor().extract([p])[0]) for p in corpus], source.key, link_ids=True
    )
    return source


def test_graph_holds_entities_passages_and_fact_edges():
    graph = build_corpus_graph(
        [("p1", "Ada", "London"), ("p2", "London", "England"), ("p3", "", "")]
    )
    assert graph.entities == ("ada", "london", "england")
    assert graph.passages == ("p1", "p2", "p3")
    assert graph.passage_entities.toarray().tolist() == [[1, 1, 0], [0, 1, 1], [0, 0, 0]]
    assert graph.entity_links[0, 1] == graph.entity_links[1, 0] == 1
    columns = np.asarray(graph.transition.sum(axis=0)).ravel()
    assert np.allclose(columns[:5], 1.0) and columns[5] == 0  # p3 has no edge


def test_pagerank_restarts_at_the_seed_and_sums_to_one():
    ring = sparse.csr_matrix(np.array([[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]))
    scores = personalized_pagerank(ring, np.array([1.0, 0, 0]), damping=0.5)
    assert scores.sum() == pytest.approx(1.0)
    assert scores[0] > scores[1] == pytest.approx(scores[2])
    assert not personalized_pagerank(ring, np.zeros(3)).any()
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(ring, np.ones(3), damping=1.0)


def test_the_graph_follows_the_store(source):
    cache = CorpusGraphCache(source.store, source.key)
    first = cache.get()
    assert cache.get() is first  # unchanged store: the same graph, not rebuilt
    assert text_sha256(MOTHER) in first.passage_index
    assert first.documents[text_sha256(MOTHER)] == ("mother",)
    source.store.delete(document_ids=["mother"])
    second = cache.get()
    assert text_sha256(MOTHER) not in second.passage_index
    assert "ana lima" not in second.entity_index  # no stale edge or node is left
    # the document re-ingested with a new text: only the new text's edges exist
    edited = Passage("mother", "Tom Reyes is the son of Rosa Vidal.", "Tom Reyes")
    source.store.put_many(
        [(edited, [Triple("Tom Reyes", "son of", "Rosa Vidal")])], source.key, link_ids=True
    )
    third = cache.get()
    assert "rosa vidal" in third.entity_index and "ana lima" not in third.entity_index
    assert third.documents[text_sha256(edited)] == ("mother",)


def _search(passages: Sequence[Passage]):
    def search(query: str, k: int) -> list[Passage]:
        return [p.__class__(p.id, p.text, p.title, 0.5, dict(p.metadata)) for p in passages[:k]]

    return search


def test_a_passage_no_query_returned_is_chosen_when_the_graph_links_it(source, bow_embedder):
    corpus = {text_sha256(p): p for p in [FILM, MOTHER, *NOISE]}
    retriever = GraphRetriever(triple_source=source, embedder=bow_embedder, candidates=5)
    search = _search([FILM, *NOISE])  # the mother's page is never returned

    def fetch(hashes, graph):
        return {h: corpus[h] for h in hashes if h in corpus}

    chosen = retriever.retrieve(QUESTION, search, k=2, fetch=fetch)
    assert [p.id for p in chosen.passages] == ["film", "mother"]
    assert chosen.found_by_graph == {"mother"}
    via = chosen.picks[1].via
    assert via and via[0] == "Tom Reyes"  # the shared entity that brought it
    # without a fetch only returned passages can be chosen
    alone = retriever.retrieve(QUESTION, search, k=2)
    assert "mother" not in [p.id for p in alone.passages]
    assert alone.found_by_graph == set()


def test_fetch_by_document_ids_reads_the_linked_ids(source, bow_embedder):
    asked: list[list[str]] = []

    def get_by_ids(ids: list[str]) -> list[Passage]:
        asked.append(ids)
        return [p for p in [FILM, MOTHER, *NOISE] if p.id in ids]

    retriever = GraphRetriever(triple_source=source, embedder=bow_embedder)
    chosen = retriever.retrieve(
        QUESTION, _search([FILM, *NOISE]), k=2, fetch=fetch_by_document_ids(get_by_ids)
    )
    assert "mother" in [p.id for p in chosen.passages]
    assert asked and all("mother" in ids or ids for ids in asked)


def test_async_equals_sync(source, bow_embedder):
    retriever = GraphRetriever(triple_source=source, embedder=bow_embedder)
    passages = [FILM, *NOISE]

    async def asearch(query: str, k: int) -> list[Passage]:
        return _search(passages)(query, k)

    sync = retriever.retrieve(QUESTION, _search(passages), k=3)
    async_ = asyncio.run(retriever.aretrieve(QUESTION, asearch, k=3))
    assert [p.id for p in sync.passages] == [p.id for p in async_.passages]
    assert [p.score for p in sync.picks] == pytest.approx([p.score for p in async_.picks])


def test_inputs_are_not_mutated(source, bow_embedder):
    passages = [FILM, *NOISE]
    before = [(p.id, p.text, p.score, dict(p.metadata)) for p in passages]
    GraphRetriever(triple_source=source, embedder=bow_embedder).retrieve(
        QUESTION, lambda q, k: passages, k=2
    )
    assert [(p.id, p.text, p.score, dict(p.metadata)) for p in passages] == before


def test_bad_settings_and_sources_name_the_field():
    with pytest.raises(ValueError, match=r"GraphSettings\.damping"):
        GraphSettings(damping=1.5)
    with pytest.raises(ValueError, match=r"GraphSettings\.facts"):
        GraphSettings(facts=-1)
    with pytest.raises(ConfigError, match="triple store"):
        graph_of(MetadataTripleSource())
    with pytest.raises(ConfigError, match="candidates"):
        GraphRetriever(triple_source=MetadataTripleSource(), candidates=0)


def test_langchain_graph_retriever_fetches_by_id_and_marks_it(source, bow_embedder):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from neocorrag_integrations.langchain import CorpusGraphRetriever
    from neocorrag_integrations.metadata_keys import FOUND_BY_GRAPH, GRAPH_KEYS, GRAPH_VIA

    def document(p: Passage) -> Document:
        return Document(page_content=p.text, id=p.id, metadata={"title": p.title})

    stored = {p.id: document(p) for p in [FILM, MOTHER, *NOISE]}

    class Returns(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [stored[p.id] for p in [FILM, *NOISE]]

    before = {i: (d.page_content, dict(d.metadata)) for i, d in stored.items()}
    retriever = CorpusGraphRetriever.from_retriever(
        Returns(),
        k=2,
        get_by_ids=lambda ids: [stored[i] for i in ids if i in stored],
        embedder=bow_embedder,
        triple_source=source,
    )
    found = retriever.invoke(QUESTION)
    assert [d.id for d in found] == ["film", "mother"]
    assert all(set(GRAPH_KEYS) <= set(d.metadata) for d in found)
    assert [d.metadata[FOUND_BY_GRAPH] for d in found] == [False, True]
    assert found[1].metadata[GRAPH_VIA][0] == "Tom Reyes"
    assert asyncio.run(retriever.ainvoke(QUESTION))[1].id == "mother"
    assert {i: (d.page_content, dict(d.metadata)) for i, d in stored.items()} == before


def test_llama_index_graph_retriever_fetches_by_id_and_marks_it(source, bow_embedder):
    pytest.importorskip("llama_index.core")
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from neocorrag_integrations.llama_index import CorpusGraphRetriever
    from neocorrag_integrations.metadata_keys import FOUND_BY_GRAPH, GRAPH_VIA

    stored = {
        p.id: TextNode(id_=p.id, text=p.text, metadata={"title": p.title})
        for p in [FILM, MOTHER, *NOISE]
    }

    class Returns(BaseRetriever):
        def _retrieve(self, query_bundle):
            return [NodeWithScore(node=stored[p.id], score=0.5) for p in [FILM, *NOISE]]

    retriever = CorpusGraphRetriever(
        Returns(),
        k=2,
        get_nodes=lambda node_ids: [stored[i] for i in node_ids if i in stored],
        embedder=bow_embedder,
        triple_source=source,
    )
    found = retriever.retrieve(QUESTION)
    assert [n.node.node_id for n in found] == ["film", "mother"]
    assert [n.node.metadata[FOUND_BY_GRAPH] for n in found] == [False, True]
    assert found[1].node.metadata[GRAPH_VIA][0] == "Tom Reyes"
    assert FOUND_BY_GRAPH in found[1].node.excluded_llm_metadata_keys
    assert asyncio.run(retriever.aretrieve(QUESTION))[1].node.node_id == "mother"
    assert FOUND_BY_GRAPH not in stored["mother"].metadata


def _random_graph(
    seed: int = 0, size: int = 120, isolated: int = 3
) -> tuple[sparse.csc_matrix, np.ndarray]:
    """A random weighted undirected graph (weights >= 1) with a few isolated nodes: its
    column-stochastic transition (by columns) and each node's weighted degree."""
    rng = np.random.default_rng(seed)
    linked = size - isolated
    a = rng.integers(0, linked, 3 * linked)
    b = rng.integers(0, linked, 3 * linked)
    keep = a != b
    w = rng.integers(1, 4, keep.sum()).astype(np.float64)
    adjacency = sparse.coo_matrix(
        (np.r_[w, w], (np.r_[a[keep], b[keep]], np.r_[b[keep], a[keep]])), shape=(size, size)
    ).tocsc()
    degree = np.asarray(adjacency.sum(axis=0)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return (adjacency @ sparse.diags(inverse)).tocsc(), degree


@pytest.mark.parametrize("damping", [0.5, 0.8])
def test_local_walk_is_within_its_stated_bound_of_the_global_walk(damping):
    transition, degree = _random_graph()
    epsilon = 1e-4
    seeds = np.array([0, 5, 5, 40, transition.shape[0] - 1])  # a repeat, an isolated node
    weights = np.array([1.0, 0.5, 0.5, 2.0, 0.3])
    reset = np.bincount(seeds, weights=weights, minlength=transition.shape[0])
    exact = personalized_pagerank(
        transition, reset, damping=damping, tolerance=1e-15, max_iterations=2000
    )
    walk = local_pagerank(transition, seeds, weights, damping=damping, epsilon=epsilon)
    local = np.zeros_like(exact)
    local[walk.nodes] = walk.scores
    gap = exact - local
    assert gap.min() > -1e-12  # never above the exact score
    assert gap.sum() == pytest.approx(walk.error, abs=1e-10)  # the L1 error, exactly
    assert walk.error == pytest.approx(1.0 - walk.scores.sum(), abs=1e-10)
    assert (gap <= damping * epsilon * degree / (1 - damping) + 1e-12).all()
    assert walk.work <= 1 / ((1 - damping) * epsilon)
    assert list(walk.nodes) == sorted(walk.nodes) and (walk.scores > 0).all()
    # smaller epsilon, closer; the dense form is the same walk
    finer = local_pagerank(transition, seeds, weights, damping=damping, epsilon=1e-8)
    assert finer.error < walk.error
    dense = personalized_pagerank(transition, reset, damping=damping, epsilon=epsilon)
    assert np.allclose(dense, local, rtol=0, atol=1e-15)
    # another sparse format is converted, not misread
    by_rows = local_pagerank(transition.tocsr(), seeds, weights, damping=damping, epsilon=epsilon)
    assert np.array_equal(by_rows.nodes, walk.nodes)
    assert np.allclose(by_rows.scores, walk.scores, rtol=0, atol=1e-15)


def test_epsilon_zero_is_exactly_the_global_walk(source):
    transition, _ = _random_graph(seed=1)
    reset = np.zeros(transition.shape[0])
    reset[[2, 7]] = [1.0, 3.0]
    assert np.array_equal(
        personalized_pagerank(transition, reset, epsilon=0.0),
        personalized_pagerank(transition, reset),
    )
    with pytest.raises(ValueError, match="epsilon"):
        personalized_pagerank(transition, reset, epsilon=-1.0)
    with pytest.raises(ValueError, match=r"GraphSettings\.epsilon"):
        GraphSettings(epsilon=-1e-7)
    # the graph stage: the local walk (default) picks what the global one picks
    graph = CorpusGraphCache(source.store, source.key).get()
    reset = np.zeros(graph.num_nodes)
    reset[graph.entity_index["moon harbor"]] = 1.0
    exact = rank_passages(graph, reset, settings=GraphSettings(epsilon=0.0), limit=6)
    local = rank_passages(graph, reset, settings=GraphSettings(), limit=6)
    assert [(p.passage, p.via) for p in local] == [(p.passage, p.via) for p in exact]
    assert [p.score for p in local] == pytest.approx([p.score for p in exact], abs=1e-6)
    assert text_sha256(MOTHER) in [p.passage for p in local]


def test_local_walk_never_gives_mass_to_a_component_without_seeds():
    first, _ = _random_graph(seed=2, size=60, isolated=0)
    second, _ = _random_graph(seed=3, size=50, isolated=0)
    transition = sparse.block_diag([first, second], format="csc")
    walk = local_pagerank(transition, [0, 10], [1.0, 1.0], epsilon=1e-12)
    assert walk.nodes.max() < 60 and walk.reached <= 60
    assert walk.scores.sum() == pytest.approx(1.0, abs=1e-9)
    reset = np.zeros(110)
    reset[[0, 10]] = 1.0
    assert not personalized_pagerank(transition, reset, epsilon=1e-6)[60:].any()


def test_the_walks_do_not_mutate_their_inputs():
    transition, _ = _random_graph(seed=4)
    before = [transition.data.copy(), transition.indices.copy(), transition.indptr.copy()]
    nodes = np.array([3, 9, 9])
    weights = np.array([2.0, 1.0, 1.0])
    reset = np.zeros(transition.shape[0])
    reset[[3, 9]] = [2.0, 2.0]
    kept = (nodes.copy(), weights.copy(), reset.copy())
    local_pagerank(transition, nodes, weights, epsilon=1e-6)
    local_pagerank(transition.tocsr(), nodes, weights, epsilon=1e-6)
    personalized_pagerank(transition, reset, epsilon=1e-6)
    personalized_pagerank(transition, reset)
    after = [transition.data, transition.indices, transition.indptr]
    assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(kept, (nodes, weights, reset), strict=True))
    assert transition.format == "csc"
    # no seed weight: nothing, as the global walk
    empty = local_pagerank(transition, [1], [0.0])
    assert len(empty.nodes) == 0 and empty.error == 0.0
    with pytest.raises(ValueError, match="non-negative"):
        local_pagerank(transition, [1], [-1.0])
    with pytest.raises(ValueError, match="epsilon"):
        local_pagerank(transition, [1], [1.0], epsilon=0.0)
