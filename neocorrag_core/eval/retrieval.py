"""The retrieval step every method shares: dense or BM25 top-k over a question's pool.

The pool is either the question's own candidate passages (``per-question``) or
one corpus shared by all questions (``corpus``: a corpus file, or the union of
every question's candidates). All methods then refine the same top-k.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.rendering import render_passage
from neocorrag_core.types import Passage

PoolMode = Literal["per-question", "corpus"]
RetrieverKind = Literal["dense", "bm25"]

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens for BM25."""
    return _WORD.findall(text.casefold())


class BM25:
    """Okapi BM25 over a fixed list of texts (k1 = 1.5, b = 0.75, Lucene-style idf)."""

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(tokenize(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.avg_length = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        # The +1 inside the log keeps idf positive for terms in over half the documents.
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``."""
        out = np.zeros(len(self.docs))
        if not self.docs:
            return out
        norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.avg_length, 1e-9))
        for term in set(tokenize(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([doc.get(term, 0) for doc in self.docs], dtype=float)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def top_k(passages: Sequence[Passage], scores: np.ndarray, k: int) -> list[Passage]:
    """The ``k`` best passages (ties keep input order), each carrying its retrieval score."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return [replace(passages[i], score=float(scores[i])) for i in order]


class Retriever:
    """Dense (the embedder's cosine) or BM25 top-k over the per-question or pooled corpus."""

    def __init__(
        self,
        kind: RetrieverKind = "dense",
        *,
        embedder: Any = None,
        pool: PoolMode = "per-question",
        corpus: Sequence[Passage] | None = None,
        vector_cache: Path | None = None,
        vector_store: Path | None = None,
    ) -> None:
        if kind not in ("dense", "bm25"):
            raise ValueError(f"retriever must be 'dense' or 'bm25', got {kind!r}")
        if pool not in ("per-question", "corpus"):
            raise ValueError(f"pool must be 'per-question' or 'corpus', got {pool!r}")
        if kind == "dense" and embedder is None:
            raise ValueError("dense retrieval needs an embedder")
        if pool == "corpus" and not corpus:
            raise ValueError("pool='corpus' needs a non-empty corpus")
        self.kind, self.embedder, self.pool = kind, embedder, pool
        self.corpus = list(corpus or [])
        self._bm25: BM25 | None = None
        self._corpus_vecs: np.ndarray | None = None
        self.vector_cache = vector_cache
        """Folder where the pooled corpus's vectors are kept between runs (``None``: not
        kept). Embedding a pooled corpus takes minutes on a laptop CPU, once per run
        otherwise; only use it with an embedder whose name identifies its weights."""
        self.vector_store = vector_store
        """Folder of a persistent Chroma collection of the pooled corpus (dense only): the
        search then runs through the store (:mod:`neocorrag_core.eval.vector_store`)."""
        self._index: Any = None
        self._by_id: dict[str, Passage] = {}

    def retrieve(self, example: QAExample, k: int) -> list[Passage]:
        """The top-``k`` passages for the example's question, best first."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if self.vector_store is not None and self.pool == "corpus" and self.kind == "dense":
            return self._from_store(example.question, k)
        passages = self.corpus if self.pool == "corpus" else list(example.passages)
        return top_k(passages, self._scores(example.question, passages), k)

    def _from_store(self, question: str, k: int) -> list[Passage]:
        if self._index is None:
            from neocorrag_core.eval.vector_store import ChromaIndex

            assert self.vector_store is not None
            self._by_id = {p.id: p for p in self.corpus}
            texts = [render_passage(p) for p in self._by_id.values()]
            self._index = ChromaIndex(self.vector_store, list(self._by_id), texts, self.embedder)
        found = self._index.search(question, k)
        return [replace(self._by_id[pid], score=score) for pid, score in found]

    def search_fn(self, example: QAExample) -> Callable[[str, int], list[Passage]]:
        """``search(query, k)`` over the example's pool: what a method that retrieves again
        (EviReform) calls for its residual queries."""

        def search(query: str, k: int) -> list[Passage]:
            return self.retrieve(replace(example, question=query), k)

        return search

    def _scores(self, question: str, passages: list[Passage]) -> np.ndarray:
        pooled = self.pool == "corpus"
        if self.kind == "bm25":
            index = self._bm25 if pooled else None
            if index is None:
                index = BM25([render_passage(p) for p in passages])
                if pooled:
                    self._bm25 = index
            return index.scores(question)
        vecs = self._corpus_vecs if pooled else None
        if vecs is None:
            texts = [render_passage(p) for p in passages]
            vecs = self._stored_vectors(texts) if pooled else None
            if vecs is None:
                vecs = np.asarray(self.embedder.embed(texts))
                if pooled:
                    self._store_vectors(texts, vecs)
            if pooled:
                self._corpus_vecs = vecs
        return np.asarray(vecs @ self.embedder.embed([question])[0])

    def _vector_file(self, texts: Sequence[str]) -> Path | None:
        if self.vector_cache is None:
            return None
        digest = hashlib.sha256(str(getattr(self.embedder, "name", "")).encode())
        for text in texts:
            digest.update(b"\0" + text.encode("utf-8"))
        return self.vector_cache / f"{digest.hexdigest()[:32]}.npy"

    def _stored_vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        path = self._vector_file(texts)
        if path is None or not path.is_file():
            return None
        try:
            vecs = np.load(path, allow_pickle=False)
        except (OSError, ValueError):  # a torn or foreign file: embed again
            return None
        return vecs if vecs.ndim == 2 and len(vecs) == len(texts) else None

    def _store_vectors(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        path = self._vector_file(texts)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            with partial.open("wb") as handle:
                np.save(handle, vecs, allow_pickle=False)
            partial.replace(path)
        except OSError:  # a read-only cache only costs the next run the embedding again
            return


class SearchRetriever:
    """The retrieval step over a user's own search: ``search(query, k) -> passages`` (their
    vector store, their LangChain or LlamaIndex retriever, translated by the adapters).

    Every method sees what ``search`` returns for the question; methods that search again
    (EviReform) call the same ``search``. A failing search is a
    :class:`~neocorrag_core.errors.RetrievalError` naming the query.
    """

    def __init__(self, search: Callable[[str, int], Sequence[Passage]]) -> None:
        if not callable(search):
            raise TypeError(
                f"search must be callable as search(query, k), got {type(search).__name__}"
            )
        self.search = search

    def retrieve(self, example: QAExample, k: int) -> list[Passage]:
        """The search's top-``k`` for the example's question, best first."""
        return self.search_fn(example)(example.question, k)[:k]

    def search_fn(self, example: QAExample) -> Callable[[str, int], list[Passage]]:
        """The user's search, for methods that search again."""
        from neocorrag_core.search_calls import call_search

        def search(query: str, k: int) -> list[Passage]:
            return call_search(self.search, query, k)

        return search


def pooled_corpus(examples: Sequence[QAExample]) -> list[Passage]:
    """Every question's candidate passages, each paragraph once (ids are content hashes)."""
    return list({p.id: p for e in examples for p in e.passages}.values())


__all__ = ["BM25", "Retriever", "SearchRetriever", "pooled_corpus", "tokenize", "top_k"]
