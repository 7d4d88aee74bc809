"""Mentions to entity names, for the rules over one parsed passage: the entity or noun
phrase a token heads, and its resolution against the passage's title.

In a titled passage, pronouns, "the film"-style references to the lead noun, and
mentions that are part of the title resolve to the title (without a Wikipedia qualifier
such as "(2017 film)"), which links the facts of a passage to the entity it is about; a
longer name that goes on past the title ("Jack London" in the "London" passage) is
another entity. The per-passage state (:class:`_Context`) holds the title, the lead
nouns and subject, and the triples found so far.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.types import Triple

_SUBJECT_DEPS = {"nsubj", "nsubjpass"}
_MODIFIER_DEPS = {"compound", "amod", "nummod", "nmod", "quantmod", "poss", "case", "npadvmod"}
_PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "his", "its", "their", "hers"}
_SKIP_OBJECT_POS = {"PRON", "DET", "ADP", "CCONJ", "PUNCT", "SCONJ", "PART"}
_NAME_LABELS = {"PERSON", "ORG", "GPE", "WORK_OF_ART", "NORP", "FAC", "LOC", "EVENT"}
_NAME_SUFFIXES = {"jr", "sr", "ii", "iii", "iv", "v", "vi"}
_QUOTES = "\"'“”‘’`«»"


@dataclass
class _Context:
    """Per-passage state: the title entity and the lead noun ("film") that refers to it."""

    title: str
    title_tokens: frozenset[str]
    title_words: tuple[str, ...] = ()
    lead_nouns: set[str] = field(default_factory=set)
    lead_subject: int = -1
    triples: list[Triple] = field(default_factory=list)
    lemma: Callable[[Any], str] = operator.attrgetter("lemma_")
    """A token's lemma: ``token.lemma_``, or :meth:`FastPipeline.lemma` (the same lemma,
    computed only for the tokens the rules ask about)."""


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\w+", normalize_entity(text)))


def _lead_nouns(sent: Any, ctx: _Context) -> None:
    """Nouns the lead sentence uses for the title entity ("F is a 1960 *film*")."""
    for tok in sent:
        if tok.pos_ == "NOUN" and tok.dep_ == "attr" and ctx.lemma(tok.head) == "be":
            ctx.lead_nouns.add(ctx.lemma(tok).lower())
            ctx.lead_nouns.update(ctx.lemma(c).lower() for c in tok.conjuncts if c.pos_ == "NOUN")
    # The subject of the lead sentence is the entity the passage is about (Wikipedia style),
    # even when spelled differently from the title ("Mathilde" in "Matilda of Brabant").
    root = sent.root
    for child in root.children:
        if child.dep_ in _SUBJECT_DEPS and child.pos_ == "PROPN":
            ctx.lead_subject = child.i


def _add(ctx: _Context, subject: str | None, relation: str, obj: str | None) -> None:
    if subject and obj and relation:
        ctx.triples.append(Triple(subject, relation, obj))


def _phrase(tok: Any, ents: dict[int, Any], ctx: _Context) -> str | None:
    """The entity or noun phrase headed by ``tok``, resolved against the title."""
    low = tok.lower_
    if tok.pos_ == "PRON" or low in _PRONOUNS:
        return ctx.title if (ctx.title and low in _PRONOUNS) else None
    if tok.pos_ in _SKIP_OBJECT_POS:
        return None
    if ctx.title and _refers_to_title(tok, ents, ctx):
        return ctx.title
    ent = ents.get(tok.i)
    if ent is not None and len(ent) > 1:
        text = ent.text
    else:
        text = _modifier_span(tok).text
        # The head of a quoted title or a compound may sit inside a longer entity.
        for t in _modifier_span(tok):
            e = ents.get(t.i)
            if e is not None and e.start <= tok.i < e.end:
                text = e.text
                break
    if tok.ent_type_ == "GPE":
        # "Rosedale, Indiana": the place with its region, as one entity.
        region = next((c for c in tok.children if c.dep_ == "appos" and c.ent_type_ == "GPE"), None)
        if region is not None:
            region_ent = ents.get(region.i)
            text = f"{text}, {region_ent.text if region_ent is not None else region.text}"
    text = re.sub(r"[\"“”«»]", " ", text)  # quoted titles: keep the words, drop the marks
    text = re.sub(r"\s*['’]s$", "", " ".join(text.split())).strip(_QUOTES + " ,;:")
    text = re.sub(r"^(?:the|a|an)\s+", "", text, flags=re.IGNORECASE) if text else text
    if not text or not re.search(r"\w", text):
        return None
    if ctx.title_tokens and (tok.pos_ == "PROPN" or tok.ent_type_) and _names_title(text, ctx):
        return ctx.title
    return text


def _names_title(text: str, ctx: _Context) -> bool:
    """``text`` is a part of the title ("Levy" in the "Shawn Levy" passage), or a title of
    two or more words with words added before or inside it ("Shawn Adam Levy", "Benjamin
    Ben Pakulski") or a generational suffix ("Silas Daniels III"). A longer name that ends
    past the title is another entity: "Jack London" in the "London" passage (a one-word
    title is only ever itself), "New York Yankees" in the "New York" one. Version 1 of the
    extractor resolved every superset to the title."""
    # spaCy's entities often run on into a following parenthesis ("Bleddyn ap Cynfyn (Old
    # Welsh"): only the words before it are the name.
    words = _words(text.split("(", 1)[0]) or _words(text)
    if not words:
        return False
    if set(words) <= ctx.title_tokens:
        return True
    title = ctx.title_words
    if len(title) < 2:
        return False
    while len(words) > len(title) and words[-1] != title[-1] and words[-1] in _NAME_SUFFIXES:
        words = words[:-1]
    if words[-1] != title[-1]:
        return False
    rest = iter(words)
    return all(word in rest for word in title)  # the title's words in order


def _refers_to_title(tok: Any, ents: dict[int, Any], ctx: _Context) -> bool:
    """The lead subject, or a lead noun: "(a 1960 British crime) film", "the film"."""
    if tok.i == ctx.lead_subject:
        return True
    if tok.pos_ != "NOUN" or ctx.lemma(tok).lower() not in ctx.lead_nouns:
        return False
    if any(ents.get(t.i) is not None and ents[t.i].label_ in _NAME_LABELS for t in tok.lefts):
        return False  # "Hitchcock's film" is another film
    if tok.sent.start == 0:
        return False  # the lead's own "is a ... film" is the description, not a reference
    return any(c.dep_ == "det" and c.lower_ in ("the", "this") for c in tok.children) and not any(
        c.dep_ in ("amod", "compound", "poss") for c in tok.children
    )


def _modifier_span(tok: Any) -> Any:
    """``tok`` with its left modifiers (compounds, adjectives, numbers, possessors), no det."""
    lefts = [tok]
    stack = [tok]
    while stack:
        cur = stack.pop()
        for child in cur.lefts:
            if child.dep_ in _MODIFIER_DEPS and child.pos_ != "PRON":
                lefts.append(child)
                stack.append(child)
    start = min(t.i for t in lefts)
    # Right compounds of proper names ("Lothair I") belong to the name.
    end = tok.i
    for child in tok.rights:
        if child.dep_ in ("compound", "flat", "nummod") and child.i == end + 1:
            end = child.i
    return tok.doc[start : end + 1]
