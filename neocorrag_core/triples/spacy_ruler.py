"""spaCy's attribute ruler memoized per token signature (:class:`_MemoAttributeRuler`):
the same attributes, set in the same order, with the ``Matcher`` run once per distinct
token signature instead of at every token. One of :class:`FastPipeline`'s speed-ups.
"""

from __future__ import annotations

import re
from typing import Any

_MEMO_LIMIT = 100_000
_RULER_KEYS = frozenset({"TAG", "LOWER", "DEP", "IS_SPACE"})


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
