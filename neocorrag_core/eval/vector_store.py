"""The pooled corpus in a persistent vector store (Chroma), for ``neocorrag eval --pool corpus
--vector-store DIR``: retrieval runs through the store users keep, not an in-memory matrix.

Chroma is the store of the cookbooks and the benchmark: it is embedded (a folder, no server),
persists across processes, installs offline from PyPI wheels, has maintained LangChain
(``langchain-chroma``) and LlamaIndex (``llama-index-vector-stores-chroma``) integrations,
and the same package runs as a server (``chroma run --path DIR``) that the code reaches with
``chromadb.HttpClient`` instead of ``PersistentClient``. Its HNSW index is approximate, so
its top-k can differ from the exact cosine ranking of ``--retriever dense`` in rare ties.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import ConfigError

BATCH = 512
"""Passages embedded and added per batch while the collection is built."""


def collection_name(embedder_name: str, ids: Sequence[str]) -> str:
    """A name that changes with the corpus and the embedder (Chroma: 3-63 characters)."""
    digest = hashlib.sha256(embedder_name.encode("utf-8"))
    for pid in ids:
        digest.update(b"\0" + pid.encode("utf-8"))
    return f"neocorrag-{digest.hexdigest()[:40]}"


class ChromaIndex:
    """The texts ``texts`` (ids ``ids``) in a persistent Chroma collection under ``folder``,
    embedded with ``embedder`` on first use and reopened afterwards (cosine space).

    Raises :class:`~neocorrag_core.errors.ConfigError` when chromadb is not installed.
    """

    def __init__(
        self, folder: Path, ids: Sequence[str], texts: Sequence[str], embedder: Any
    ) -> None:
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError as err:
            raise ConfigError(
                "--vector-store needs chromadb: pip install 'neocorrag[chroma]'"
            ) from err
        self.embedder = embedder
        client = chromadb.PersistentClient(
            path=str(folder), settings=Settings(anonymized_telemetry=False)
        )
        name = collection_name(str(getattr(embedder, "name", "")), ids)
        self.collection = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"})
        if self.collection.count() != len(ids):
            self._add(list(ids), list(texts))

    def _add(self, ids: list[str], texts: list[str]) -> None:
        have = set(self.collection.get(include=[])["ids"]) if self.collection.count() else set()
        todo = [i for i, pid in enumerate(ids) if pid not in have]
        from tqdm.auto import tqdm

        batches = range(0, len(todo), BATCH)
        for start in tqdm(batches, desc="vector store", unit="batch", disable=not todo):
            chosen = todo[start : start + BATCH]
            vectors = np.asarray(self.embedder.embed([texts[i] for i in chosen]), dtype=np.float32)
            self.collection.add(
                ids=[ids[i] for i in chosen],
                embeddings=vectors,
                documents=[texts[i] for i in chosen],
            )

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest ids to ``query`` with their cosine similarity, best first."""
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        found = self.collection.query(
            query_embeddings=vector[None, :], n_results=k, include=["distances"]
        )
        ids = found["ids"][0]
        distances = (found.get("distances") or [[0.0] * len(ids)])[0]
        return [(pid, 1.0 - float(d)) for pid, d in zip(ids, distances, strict=True)]


def collection_search(folder: Path, name: str, embedder: Any) -> Any:
    """``search(query, k)`` over the user's own persistent Chroma collection ``name`` under
    ``folder``: the query embedded with ``embedder`` (the one the collection was built with:
    the bundled MiniLM for a collection built with ``NeocorRAGEmbeddings``), the hits as
    passages (id, document text, ``metadata["title"]`` when there is one).

    Raises :class:`~neocorrag_core.errors.ConfigError` when chromadb is not installed, the
    folder holds no Chroma database, or the collection does not exist (naming the ones
    that do), and when the collection's vectors have another dimension than the embedder's.
    """
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as err:
        raise ConfigError("--collection needs chromadb: pip install 'neocorrag[chroma]'") from err
    from neocorrag_core.types import Passage

    if not Path(folder).is_dir():
        raise ConfigError(
            f"--vector-store {folder}: no such folder (your Chroma persist_directory)"
        )
    client = chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )
    names = sorted(c if isinstance(c, str) else c.name for c in client.list_collections())
    if name not in names:
        have = ", ".join(names[:10]) or "none"
        raise ConfigError(
            f"--collection {name!r}: not in the Chroma store {folder} (collections: {have})"
        )
    collection = client.get_collection(name)

    def search(query: str, k: int) -> list[Passage]:
        vector = np.asarray(embedder.embed([query])[0], dtype=np.float32)
        try:
            found = collection.query(
                query_embeddings=vector[None, :],
                n_results=k,
                include=["documents", "metadatas", "distances"],
            )
        except Exception as err:  # chromadb raises its own errors (dimension, corrupt index)
            raise ConfigError(
                f"--collection {name!r}: the query failed ({err}); was the collection built "
                "with the same embedder (--embedder)?"
            ) from err
        ids = found["ids"][0]
        texts = (found.get("documents") or [[""] * len(ids)])[0]
        metas: list[Any] = list((found.get("metadatas") or [[{}] * len(ids)])[0])
        distances = (found.get("distances") or [[0.0] * len(ids)])[0]
        out = []
        for pid, text, meta, distance in zip(ids, texts, metas, distances, strict=True):
            meta = dict(meta or {})
            title = meta.get("title")
            out.append(
                Passage(
                    str(pid),
                    text or "",
                    title if isinstance(title, str) else "",
                    1.0 - float(distance),
                    meta,
                )
            )
        return out

    return search


__all__ = ["BATCH", "ChromaIndex", "collection_name", "collection_search"]
