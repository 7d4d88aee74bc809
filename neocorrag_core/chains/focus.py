"""Stage c, last step: cut the kept passages to their evidence sentences.

The keep rules (:mod:`neocorrag_core.chains.keep`) decide *which* passages stay; a kept passage
is usually a whole encyclopedia paragraph of which one or two sentences carry the hop, so
whole passages spend much of the reader's tokens on sentences no hop needs. A cut passage
keeps its lead sentence (what the passage is about), the sentences that name a question
entity, an entity it shares with another kept passage, or an entity of a chosen chain's
triple it supplied, and the sentences that state one of the question's relation words.
``MinerConfig(passage_focus="all")`` (the default) cuts every kept passage,
``"linked"`` only those kept below the top-N (about a query entity, a bridge,
chain-cited), ``"none"`` none. A passage is left whole when the cut would drop nothing,
and a pass-through (no filtering evidence) is never cut. Pure string work on the triples
the miner already has; no model call.

Why the relation words: a hop's answer is often a sentence that names nothing but the
relation, with the passage's subject as a pronoun: "He was born in Weston-super-Mare" for
"the place of birth of the director of film ..."; a cut by names alone loses it.
A sentence covers a relation word as EviReform's residual queries test it
(:func:`neocorrag_core.text.relations.covers`: the same first five letters, or a
listed equivalent such as "married" for "spouse"); a name inside a sentence ("Neil Young")
covers one only by its own letters, never through an equivalent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from neocorrag_core.chains.links import entity_keys, is_name, mentions
from neocorrag_core.rendering import split_sentences
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.text.relations import covers, relation_words
from neocorrag_core.types import EvidenceChain, KeepReason, KeptPassage, Triple

FOCUSED_REASONS = (KeepReason.QUERY_ENTITY, KeepReason.BRIDGE, KeepReason.CHAIN)
"""The keep reasons whose passages ``passage_focus="linked"`` cuts (not ``TOP_N``)."""

ALL_FOCUSED_REASONS = (KeepReason.TOP_N, *FOCUSED_REASONS)
"""``passage_focus="all"`` (the default): the top-N passages are cut too (never
``PASSTHROUGH``)."""

CUT_REASONS = {"linked": FOCUSED_REASONS, "all": ALL_FOCUSED_REASONS}
"""The keep reasons each ``MinerConfig.passage_focus`` setting cuts (``"none"``: none)."""

FOCUS_RULES = "focus-3"
"""Names the sentence rules; a cached eval record of a focused method is rerun when it
changes, so it is bumped whenever they change."""


def evidence_sentences(text: str, names: Iterable[str], relations: Sequence[str] = ()) -> str:
    """The lead sentence of ``text`` and every later sentence that names one of ``names``
    (whole words, case and spacing ignored) or covers one of the relation words
    ``relations`` (:func:`~neocorrag_core.text.relations.covers`), in order, joined by
    single spaces."""
    keys = {normalize_entity(n) for n in names} - {""}
    sentences = split_sentences(text)
    chosen = [
        s
        for i, s in enumerate(sentences)
        if i == 0
        or any(mentions(normalize_entity(s), key) for key in keys)
        or (bool(relations) and covers(s, relations))
    ]
    return " ".join(chosen)


def focus_kept(
    kept: Sequence[KeptPassage],
    triples_of: Mapping[str, Sequence[Triple]],
    query_entities: Sequence[str],
    chains: Sequence[EvidenceChain],
    question: str = "",
    reasons: Collection[KeepReason] = FOCUSED_REASONS,
) -> list[KeptPassage]:
    """``kept`` with each passage kept for one of ``reasons`` cut to its
    :func:`evidence_sentences`; the cut ones carry their whole text in ``full_text``.

    Args:
        kept: the refined passages (:func:`~neocorrag_core.chains.keep.refine_passages`).
        triples_of: each passage id's triples, as the triple source returned them.
        query_entities: the names the miner found in the question (lower-case ones, the
            common nouns the n-gram matcher also finds, are not names and are ignored).
        chains: the chosen chains.
        question: the question; the sentences that state one of its relation words
            (:func:`~neocorrag_core.text.relations.relation_words`) are kept. Empty:
            names only.
        reasons: the keep reasons whose passages are cut (:data:`FOCUSED_REASONS`, or
            :data:`ALL_FOCUSED_REASONS` to cut the top-N passages too).
    """
    questions = {e for e in query_entities if is_name(e)}
    relations = relation_words(question) if question else []
    chain_triples = {t.key() for chain in chains for t in chain.triples}
    # In how many kept passages each entity occurs: 2 or more means shared with another.
    spread = Counter(key for k in kept for key in entity_keys(triples_of.get(k.passage.id, ())))
    out: list[KeptPassage] = []
    for item in kept:
        if item.reason not in reasons:
            out.append(item)
            continue
        own = triples_of.get(item.passage.id, ())
        shared = {e for e in entity_keys(own) if spread[e] > 1}
        cited = entity_keys(t for t in own if t.key() in chain_triples)
        text = evidence_sentences(item.passage.text, questions | shared | cited, relations)
        if len(text) >= len(" ".join(item.passage.text.split())):
            out.append(item)
            continue
        out.append(
            replace(item, passage=replace(item.passage, text=text), full_text=item.passage.text)
        )
    return out


__all__ = [
    "ALL_FOCUSED_REASONS",
    "CUT_REASONS",
    "FOCUSED_REASONS",
    "FOCUS_RULES",
    "evidence_sentences",
    "focus_kept",
]
