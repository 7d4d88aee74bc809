"""The vectors of a passage's triples and facts, computed where the triples are stored.

A query embeds the texts of the graph it builds from the retrieved passages' triples: each
node's name and each triple's sentence form (``Triple.text``); EviReform and BeliefRAG also
score the passages' sentences as facts (and a passage without triples by its lead). This
module computes exactly those texts when the triples are first stored (``neocorrag index``,
the ingestion transforms), so that a query over stored passages finds every one of them in
the store's vector cache and embeds only its own queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from neocorrag_core.models.embedder import TextEmbedder, VectorCache
from neocorrag_core.rendering import fact_texts, lead_fact
from neocorrag_core.triples.base import bounded_triple
from neocorrag_core.types import Passage, Triple


def triple_texts(triple: Triple) -> tuple[str, str, str]:
    """The texts a graph embeds for one (length-capped) triple: its two names, its sentence."""
    return (triple.subject, triple.object, triple.text)


def graph_texts(triples: Iterable[Sequence[Triple]]) -> list[str]:
    """Every text a query's graph over these triples embeds, each once, in first-seen order:
    the subject and object names and the sentence form of each triple, after the same
    length caps the graph applies (:func:`~neocorrag_core.triples.base.bounded_triple`)."""
    texts: dict[str, None] = {}
    for group in triples:
        for raw in group:
            for text in triple_texts(bounded_triple(raw)):
                texts.setdefault(text)
    return list(texts)


def fact_texts_of(passages: Iterable[Passage], triples: Iterable[Sequence[Triple]]) -> list[str]:
    """The passages' sentences as facts (:func:`~neocorrag_core.rendering.fact_texts`), and
    the lead fact of each passage without triples, each once, in first-seen order."""
    texts: dict[str, None] = {}
    for passage, found in zip(passages, triples, strict=True):
        for text in fact_texts(passage.text):
            texts.setdefault(text)
        if not found:
            texts.setdefault(lead_fact(passage.title, passage.text))
    return [t for t in texts if t]


def embed_graph_texts(
    embedder: TextEmbedder,
    cache: VectorCache,
    triples: Sequence[Sequence[Triple]],
    *,
    passages: Sequence[Passage] | None = None,
    batch_size: int = 512,
) -> int:
    """Compute and store the vectors of :func:`graph_texts` (and, with ``passages``, the
    triples' passages in the same order, of :func:`fact_texts_of`) that ``cache`` lacks;
    returns how many texts were sent to the encoder (0 when every vector was stored already).

    Does nothing for an embedder without an identity (its vectors cannot be stored).
    """
    if embedder.identity is None:
        return 0
    texts = graph_texts(triples)
    if passages is not None:
        known = set(texts)
        texts += [t for t in fact_texts_of(passages, triples) if t not in known]
    before = embedder.cache_info().encoded
    for start in range(0, len(texts), batch_size):
        embedder.embed(texts[start : start + batch_size], cache=cache)
    return embedder.cache_info().encoded - before


__all__ = ["embed_graph_texts", "fact_texts_of", "graph_texts", "triple_texts"]
