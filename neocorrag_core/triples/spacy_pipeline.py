"""The loaded spaCy pipeline, run faster with the same output (:class:`FastPipeline`):
numpy's BLAS on one thread for the models' matrix products, the memoized attribute ruler
(:mod:`neocorrag_core.triples.spacy_ruler`), and lemmas computed only for the tokens the
rules read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from neocorrag_core.triples.spacy_ruler import _MEMO_LIMIT, _MemoAttributeRuler

_FAST_BLAS = ("openblas", "mkl", "accelerate")


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
