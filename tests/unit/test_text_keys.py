"""The word rules EviReform reads every pool's texts with, against their plain definitions:
the shortcuts they take (ASCII text, a translate table, compiled patterns kept, a word
index) must give exactly what the definitions give."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from neocorrag_core.evireform.propositions import _SEGMENT, _names_near, relation_sentences
from neocorrag_core.evireform.residual import (
    _DATE_WORDS,
    _MAX_CODE_POINTS,
    _NO_COMBINING,
    _WORD,
    is_date_or_number,
    match_key,
)
from neocorrag_core.text import relations
from neocorrag_core.text.capitals import _TOKEN, capitalized_spans, word_tokens
from neocorrag_core.types import Passage


def plain_match_key(text: str, *, fold_case: bool = True) -> str:
    plain = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in plain if not unicodedata.combining(ch))
    return " ".join(_WORD.findall(plain.casefold() if fold_case else plain))


def plain_word_tokens(text: str) -> list[str]:
    tokens = (re.sub(r"['’]s$", "", t) for t in _TOKEN.findall(text))
    return [t.rstrip(".'’") or t for t in tokens]


def plain_equivalents(word: str) -> set[str]:
    stems = {relations._stem(word)}
    for group in relations._EQUIVALENT:
        if word in group:
            stems.update(relations._stem(w) for w in group)
    return stems


def sample_texts() -> list[str]:
    rng = random.Random(7)
    fixed = [
        "",
        "Aschenbrödel",
        "Ångström's café in São Paulo",
        "ﬁnance ǅ ẞ İstanbul ½",
        "e\u0301 \u0301lead Nguyễn Thị",
        "Love's Labour's Lost’s",
        "It's 1990s, the ² and ٣",
        "Mountrail County capital",
    ]
    alphabet = "aZ's’S.-&\n 1²٣é\u0301ǅ"
    mixed = ["".join(rng.choice(alphabet) for _ in range(30)) for _ in range(400)]
    wide = ["".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(60)) for _ in range(200)]
    return fixed + mixed + wide


@pytest.mark.parametrize("fold_case", [True, False])
def test_match_key_is_its_definition(fold_case: bool) -> None:
    for text in sample_texts():
        assert match_key(text, fold_case=fold_case) == plain_match_key(text, fold_case=fold_case)


def test_match_key_table_stays_bounded() -> None:
    text = "".join(chr(c) for c in range(0x4E00, 0x4E00 + _MAX_CODE_POINTS + 2000)) + "e\u0301"
    assert match_key(text) == plain_match_key(text)
    assert len(_NO_COMBINING) <= _MAX_CODE_POINTS
    assert match_key(text) == plain_match_key(text)


def test_match_key_drops_accents_and_keeps_other_letters() -> None:
    assert match_key("Ångström's Café") == "angstrom s cafe"
    assert match_key("Nguyễn", fold_case=False) == "Nguyen"
    assert match_key("Über", fold_case=False) == "Uber"


def test_word_tokens_is_its_definition() -> None:
    for text in sample_texts():
        assert word_tokens(text) == plain_word_tokens(text)
    assert word_tokens("Love's Labour’s Lost, Inc.") == ["Love", "Labour", "Lost", "Inc"]


def test_is_date_or_number_counts_every_digit_str_isdigit_knows() -> None:
    assert is_date_or_number("1991")
    assert is_date_or_number("17 january 1969")
    assert not is_date_or_number("mountrail county")
    assert is_date_or_number("²")  # a superscript digit is a digit to str.isdigit
    keys = [*sample_texts(), "1990s", "january 2001", "3rd c", "²²", "١٩٩٠"]
    for key in keys:
        words = key.split()
        plain = any(ch.isdigit() for ch in key) and all(
            w in _DATE_WORDS or w.rstrip("sthndr").isdigit() or w.isdigit() for w in words
        )
        assert is_date_or_number(key) == plain


def test_equivalents_match_the_groups() -> None:
    words = {w for group in relations._EQUIVALENT for w in group}
    words |= {"birthday", "director", "xyz", "", "sons"}
    for word in words:
        assert relations._equivalents(word) == plain_equivalents(word)
    # A word in two groups stands for both.
    assert {"fathe", "mothe", "son", "daugh"} <= relations._equivalents("son")


def plain_names_near(sentence: str, at: int) -> tuple[str, ...]:
    after: list[str] = []
    before: list[str] = []
    position = 0
    for segment in _SEGMENT.split(sentence):
        start = sentence.find(segment, position) if segment else position
        position = max(position, start + len(segment))
        cursor = 0
        for span in capitalized_spans(segment):
            first_word = re.compile(rf"(?<!\w){re.escape(span.split()[0])}(?!\w)")
            found = first_word.search(segment, cursor)
            offset = found.start() if found else cursor
            cursor = found.end() if found else cursor
            (after if start + offset >= at else before).append(span)
    return tuple(dict.fromkeys([*after, *reversed(before)]))


def test_names_near_is_its_definition() -> None:
    sentence = "In 1950 his father, Thomas Stanley, left Stanleyville for Stanley (Idaho)."
    at = sentence.index("father")
    expected = ("Thomas Stanley", "Stanleyville", "Stanley", "Idaho", "1950")
    assert _names_near(sentence, at) == expected
    assert _names_near(sentence, at) == plain_names_near(sentence, at)  # patterns kept
    texts = [*sample_texts(), sentence, "Stanley met Stan; Stan's son Stanley II, of Stanley."]
    for text in texts:
        for at in (0, len(text) // 2, len(text)):
            assert _names_near(text, at) == plain_names_near(text, at)
    passage = Passage(id="p", text=sentence, title="Thomas Stanley")
    (found,) = relation_sentences([passage], ["father"])
    assert found.surface_entities == ("Thomas Stanley", "Stanleyville", "Stanley")
