"""The rules over one parsed passage: raw subject-relation-object triples of a ``Doc``.

Rules, in the order they run over each sentence:

* verbs: every subject x every object (direct object, attribute, ``verb + preposition``
  object, passive agent), with conjunctions expanded on both sides; a participle that
  modifies a noun ("a film *directed by* X") takes that noun as subject, and the
  subject of the copula when the noun is its attribute ("F is a film directed by X");
* copula and apposition: "X is a Y", "X, a Y," -> ``(X, is, Y)``, and
  "X is the son of Y" -> ``(X, son of, Y)``;
* possessives: "His father was Y" / "Z's wife was Y" -> ``(owner, father, Y)``;
* the life-dates parenthesis of encyclopedic leads
  (:mod:`neocorrag_core.triples.spacy_life_dates`).

Mentions become names through :mod:`neocorrag_core.triples.spacy_mentions` (named
entities kept whole, references resolved to the passage's title).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from neocorrag_core.triples.spacy_life_dates import _life_dates
from neocorrag_core.triples.spacy_mentions import (
    _SUBJECT_DEPS,
    _add,
    _Context,
    _lead_nouns,
    _modifier_span,
    _phrase,
    _words,
)
from neocorrag_core.types import Triple

_OBJECT_DEPS = {"dobj", "attr", "oprd", "dative", "acomp"}
_PREP_DEPS = {"prep", "agent"}


def extract_from_doc(
    doc: Any, title: str = "", lemma: Callable[[Any], str] | None = None
) -> list[Triple]:
    """Raw triples of one parsed document (``title`` = the entity the passage is about).

    ``lemma``: how to read a token's lemma (default ``token.lemma_``; a document from
    :meth:`FastPipeline.pipe` has none set: pass :meth:`FastPipeline.lemma`).
    """
    words = _words(title)
    ctx = _Context(title=title, title_tokens=frozenset(words), title_words=words)
    if lemma is not None:
        ctx.lemma = lemma
    ents = {tok.i: ent for ent in doc.ents for tok in ent}
    sentences = list(doc.sents)
    if title and sentences:
        _lead_nouns(sentences[0], ctx)
    for sent in sentences:
        for tok in sent:
            if tok.pos_ in ("VERB", "AUX"):
                _verb_triples(tok, ents, ctx)
            elif tok.dep_ == "appos":
                _appos_triple(tok, ents, ctx)
    _life_dates(doc, ents, ctx)
    return ctx.triples


def _conjuncts(tok: Any) -> list[Any]:
    return [tok, *(c for c in tok.conjuncts if c.i > tok.i)]


def _subjects(verb: Any, ents: dict[int, Any], ctx: _Context) -> tuple[list[str], str]:
    """(subject phrases, relation prefix) of a verb; a possessed subject moves into the relation."""
    subs = [c for c in verb.children if c.dep_ in _SUBJECT_DEPS]
    if not subs and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
        return _subjects(verb.head, ents, ctx)
    if not subs and verb.dep_ in ("acl", "relcl") and verb.head.pos_ in ("NOUN", "PROPN"):
        noun = verb.head
        # "F is a film directed by X": the film is F (not "film").
        if noun.dep_ == "attr" and ctx.lemma(noun.head) == "be":
            inherited, _ = _subjects(noun.head, ents, ctx)
            if inherited:
                return inherited, ""
        return [p for p in (_phrase(noun, ents, ctx),) if p], ""
    names: list[str] = []
    prefix = ""
    for sub in subs:
        owner = next((c for c in sub.children if c.dep_ == "poss"), None)
        if owner is not None and sub.pos_ == "NOUN":
            owner_name = _phrase(owner, ents, ctx)
            if owner_name:
                names.append(owner_name)
                owner_ids = {t.i for t in owner.subtree}
                prefix = " ".join(t.text for t in _modifier_span(sub) if t.i not in owner_ids)
                continue
        names.extend(p for c in _conjuncts(sub) if (p := _phrase(c, ents, ctx)))
    return names, prefix


def _verb_text(verb: Any) -> str:
    parts = [c.text for c in verb.children if c.dep_ == "neg"]
    parts.append(verb.text)
    parts.extend(c.text for c in verb.children if c.dep_ == "prt")
    return " ".join(parts)


def _verb_triples(verb: Any, ents: dict[int, Any], ctx: _Context) -> None:
    subjects, prefix = _subjects(verb, ents, ctx)
    if not subjects:
        return
    copula = ctx.lemma(verb) == "be"
    base = _verb_text(verb)
    relation = prefix if (prefix and copula) else (f"{prefix} {base}".strip() if prefix else base)
    if copula and not prefix:
        relation = "is"
    for child in verb.children:
        if child.dep_ in _OBJECT_DEPS:
            for obj in _conjuncts(child):
                name = _phrase(obj, ents, ctx)
                for s in subjects:
                    _add(ctx, s, relation, name)
                if copula and obj.pos_ in ("NOUN", "PROPN"):
                    # "X was the son of Y" -> (X, son of, Y)
                    for prep in obj.children:
                        if prep.dep_ == "prep":
                            rel = f"{prefix + ' ' if prefix else ''}{ctx.lemma(obj)} {prep.text}"
                            _prep_objects(prep, subjects, rel, ents, ctx)
        elif child.dep_ in _PREP_DEPS:
            _prep_objects(child, subjects, f"{relation} {child.text}", ents, ctx)
        elif child.dep_ in ("npadvmod", "nummod") and child.ent_type_ == "DATE":
            # "X, born 1962, ..." / "born July 23, 1968"
            date = ents.get(child.i)
            for s in subjects:
                _add(ctx, s, relation, date.text if date is not None else child.text)


def _prep_objects(
    prep: Any, subjects: Iterable[str], relation: str, ents: dict[int, Any], ctx: _Context
) -> None:
    for pobj in prep.children:
        if pobj.dep_ != "pobj":
            continue
        for obj in _conjuncts(pobj):
            name = _phrase(obj, ents, ctx)
            for s in subjects:
                _add(ctx, s, relation, name)
            if obj.pos_ == "NOUN":  # "born in Bergen as the son of X" -> "born as son of"
                for inner in obj.children:
                    if inner.dep_ == "prep" and inner.lower_ == "of":
                        _prep_objects(inner, subjects, f"{relation} {ctx.lemma(obj)} of", ents, ctx)


def _appos_triple(tok: Any, ents: dict[int, Any], ctx: _Context) -> None:
    # Dates and numbers in apposition are life-date parentheses (handled below), and
    # "Montreal, Quebec" is one place, not "Montreal is Quebec".
    if tok.ent_type_ in ("DATE", "CARDINAL", "GPE") or tok.head.ent_type_ == "GPE":
        return
    head = _phrase(tok.head, ents, ctx)
    for obj in _conjuncts(tok):
        _add(ctx, head, "is", _phrase(obj, ents, ctx))
