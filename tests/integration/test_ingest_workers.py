"""``TripleExtractorTransform`` in ``IngestionPipeline.run(num_workers=2)``: spawned worker
processes receive pickled copies, load spaCy and the embedder themselves and write one
SQLite store (triples and vectors; the embedder is a tiny sentence-transformers folder, so
the test needs no weight package).

Separate from ``tests/unit/test_ingest_transforms.py`` because each spawned worker imports
LlamaIndex, neocorrag and spaCy from scratch (the installed package, as users run it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from tiny_models import save_tiny_embedder

from neocorrag_core.models import resolve_embedder
from neocorrag_core.triples import TripleStore, spacy_available
from neocorrag_integrations.llama_index import TripleExtractorTransform

pytestmark = pytest.mark.skipif(not spacy_available(), reason="needs the spacy extra")


def test_two_worker_processes_annotate_and_share_one_store(tmp_path: Path) -> None:
    store = tmp_path / "triples.sqlite"
    # The same text twice, under two ids, at both ends: the node batcher puts them in two
    # batches, one per worker, so two processes may extract it and write it; the first
    # writer wins and both nodes get the same triples.
    same = "Ada Lovelace wrote the first program. Charles Babbage designed the Analytical Engine."
    documents = [
        Document(text=same, id_="first"),
        Document(text="Marie Curie discovered polonium.", id_="curie"),
        Document(text="Paris is the capital of France.", id_="paris"),
        Document(text=same, id_="last"),
    ]
    embedder = str(save_tiny_embedder(tmp_path / "tiny_embedder"))
    transform = TripleExtractorTransform(
        extractor="spacy", store=store, batch_size=2, embedder=embedder
    )
    pipeline = IngestionPipeline(
        transformations=[
            # A whitespace tokenizer: the default (tiktoken) is pickled by name and a spawned
            # worker re-downloads its vocabulary, which fails offline (and hangs the pool).
            SentenceSplitter(chunk_size=512, chunk_overlap=0, tokenizer=str.split),
            transform,
            MockEmbedding(embed_dim=4),
        ]
    )
    nodes = pipeline.run(documents=documents, num_workers=2)

    assert len(nodes) == len(documents)
    assert transform.stats.extracted == 0  # the work ran in the workers, on copies
    by_doc = {n.ref_doc_id: n for n in nodes}
    assert by_doc["first"].metadata["triples"] == by_doc["last"].metadata["triples"] != []
    assert ["Marie Curie", "discovered", "polonium"] in by_doc["curie"].metadata["triples"]
    assert all(n.embedding is not None for n in nodes)
    assert all("triples" in n.excluded_embed_metadata_keys for n in nodes)
    written = TripleStore(store)
    [counts] = written.stats().values()
    assert counts["passages"] == 3  # the repeated text is stored once
    hashes = written.document_hashes(["first", "last", "curie", "paris"])
    assert hashes["first"] == hashes["last"]
    assert len({h for found in hashes.values() for h in found}) == 3
    # The workers stored the vectors of the texts beside the triples, under the embedder's
    # identity (the repeated text's once).
    vectors = written.vector_summary()[resolve_embedder(embedder).identity]["vectors"]
    assert vectors >= 3
