"""Hypothesis strategies for the fuzz tests: hostile text, malformed triples, bad configs.

Text mixes a small shared vocabulary (so random triples still link into chains and the
search, decoding and refine stages run, not only the early fallbacks) with what real
documents and users send: control characters, NULs, chat special tokens, right-to-left and
zero-width marks, emoji, very long words, and lone surrogates (what ``json.loads`` makes of a
``"\\ud800"`` escape: not valid UTF-8; every entry point serves them as U+FFFD). The fake
embedder copes with them: it hashes ``\\w+`` words, which never hold a surrogate.
"""

from __future__ import annotations

import math
import typing
from dataclasses import fields
from typing import Any

from hypothesis import strategies as st

from neocorrag_core import MinerConfig, ReformulationConfig, Triple
from neocorrag_core.chains.config import MinerTuning
from neocorrag_core.evireform.config import ReformulationTuning

NAN, INF = math.nan, math.inf

CONTROL_CHARS = [*(chr(c) for c in range(32)), "\x7f", "\x85", "\u2028", "\u2029"]
SPECIAL_TOKENS = [
    "<|im_end|>",
    "<|im_start|>system",
    "<|im_start|>",
    "<|eot_id|>",
    "<|start_header_id|>system<|end_header_id|>",
    "<|endoftext|>",
    "</s>",
    "<s>",
    "<pad>",
    "[INST]",
    "<|assistant|>",
]
RTL_MARKS = ["\u202e", "\u200f", "\u202b", "\u2067", "\u061c"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\ufeff", "\u2060"]
EMOJI = ["😀", "👩‍👩‍👧", "🇳🇴", "🏳️‍🌈", "🔥", "🧬"]
SURROGATES = ["\ud800", "\udfff", "\udc00", "\ud83d", "Oslo\ud800", "\ud83d\ude00"]
"""Lone surrogates, and one character written as its two UTF-16 halves (the last)."""
VOCAB = [
    "Film X",
    "Jane Roe",
    "Oslo",
    "Norway",
    "director",
    "born in",
    "directed by",
    "capital of",
    "Mountrail County",
    "Stanley",
    "Van Hook Township",
    "located in",
    "the",
    "of",
    "?",
    ".",
    "-",
    "->",
    "<-",
]
ATOMS = (
    CONTROL_CHARS + SPECIAL_TOKENS + RTL_MARKS + ZERO_WIDTH + EMOJI + SURROGATES + VOCAB + ["\x00"]
)

_unicode = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.text(st.characters(categories=["Cs", "Lu", "Ll", "Zs"]), max_size=6),  # surrogates
)
long_words = st.builds(
    lambda letter, n: letter * n,
    st.sampled_from(["x", "é", "界", "\x00", "😀", "ab", ". ", "(", " -"]),
    st.integers(200, 1500),
)


def hostile_text(*, max_pieces: int = 6) -> st.SearchStrategy[str]:
    """Strings made of vocabulary words and hostile pieces, joined by odd separators."""
    piece = st.one_of(st.sampled_from(ATOMS), _unicode, long_words)
    separator = st.sampled_from([" ", "", "\n", "\t", "\u200b", "\x00", " - "])
    return st.one_of(
        st.sampled_from(ATOMS),
        _unicode,
        st.builds(
            lambda sep, parts: sep.join(parts), separator, st.lists(piece, max_size=max_pieces)
        ),
    )


def text_or_vocab() -> st.SearchStrategy[str]:
    """Mostly vocabulary entries (so facts connect), sometimes hostile text."""
    return st.one_of(st.sampled_from(VOCAB[:12]), hostile_text(max_pieces=3))


# ---- triples in metadata

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
triple_part = st.one_of(text_or_vocab(), text_or_vocab(), _junk)
"""A subject, relation or object: usually a string, sometimes anything at all."""

_ENTITIES = ["Film X", "Jane Roe", "Oslo", "Norway", "Mountrail County", "Stanley"]
_RELATIONS = ["directed by", "born in", "capital of", "located in", "capital"]
_entity = st.one_of(
    st.sampled_from(_ENTITIES), st.sampled_from(_ENTITIES), hostile_text(max_pieces=3)
)
_relation = st.one_of(st.sampled_from(_RELATIONS), hostile_text(max_pieces=2))
good_triple = st.builds(
    lambda pair, relation: [pair[0], relation, pair[1]],
    st.lists(_entity, min_size=2, max_size=2, unique=True),
    _relation,
)
"""``[subject, relation, object]`` of strings: mostly shared names (so facts link), two
different entities, sometimes hostile text."""
triple_item = st.one_of(
    good_triple,
    good_triple,
    st.tuples(triple_part, triple_part, triple_part),
    st.lists(triple_part, min_size=3, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "subject": triple_part,
            "relation": triple_part,
            "object": triple_part,
            "extra": _junk,
        },
    ),
    st.lists(triple_part, max_size=6),  # wrong arity (mostly)
    st.builds(Triple, text_or_vocab(), text_or_vocab(), text_or_vocab()),
    text_or_vocab(),  # a bare string, not a triple
    _junk,
)
"""One item of ``metadata["triples"]``: well-formed, malformed, or not a triple at all."""

triples_value = st.one_of(
    st.lists(triple_item, max_size=6),
    st.lists(triple_item, max_size=6).map(tuple),
    st.lists(good_triple, min_size=1, max_size=5),
    hostile_text(max_pieces=2),  # a string instead of a list
    st.dictionaries(st.text(max_size=3), good_triple, max_size=2),  # a dict instead of a list
    _junk,
)
"""The whole ``metadata["triples"]`` value: a list of items, or not a list."""

mostly_good_triples = st.lists(
    st.one_of(good_triple, good_triple, good_triple, triple_item), min_size=1, max_size=5
)
"""A list of triples most of which parse, so graphs form and every stage runs."""

_meta_value = st.recursive(
    st.one_of(_junk, hostile_text(max_pieces=2)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
oversized_titles = st.builds(
    lambda unit, n, tail: unit * n + tail,
    st.sampled_from(["Film X ", "(", " ", "x", "Jane Roe, ", "界"]),
    st.integers(1_500, 30_000),
    st.sampled_from(["", "Jane Roe", " (film)", ")"]),
)
"""Titles far past ``WorkLimits.max_title_chars``: repeated names, runs of one character,
parentheses (what a quadratic pattern chokes on)."""
title_value = st.one_of(text_or_vocab(), text_or_vocab(), _junk, oversized_titles)


def metadata_dicts(*, with_title: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Document metadata: ``triples`` (mostly parseable, sometimes any shape, sometimes
    absent), maybe a ``title`` (any type), other keys."""
    optional: dict[str, st.SearchStrategy[Any]] = {"source": _meta_value, "nested": _meta_value}
    if with_title:
        optional["title"] = title_value
    with_triples = st.fixed_dictionaries({"triples": mostly_good_triples}, optional=optional)
    odd_triples = st.fixed_dictionaries({"triples": triples_value}, optional=optional)
    no_triples = st.fixed_dictionaries({}, optional=optional)
    # Weighted by hand (hypothesis has no weights): 6 in 10 parse, 3 odd shapes, 1 none.
    return st.integers(0, 9).flatmap(
        lambda i: with_triples if i < 6 else odd_triples if i < 9 else no_triples
    )


# ---- document lists, framework-free


def doc_ids() -> st.SearchStrategy[str | None]:
    """Ids as retrievers return them: none, empty, short (so duplicates occur) or hostile."""
    return st.one_of(
        st.none(),
        st.just(""),
        st.sampled_from(["d1", "d2", "#1", "#2", "##1"]),
        hostile_text(max_pieces=2),
    )


scores = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5))


@st.composite
def raw_documents(draw: st.DrawFn, *, min_size: int = 0, max_size: int = 6) -> list[dict]:
    """Framework-free document records ``{"id", "text", "metadata", "score"}``."""
    n = draw(st.integers(min_size, max_size))
    return [
        {
            "id": draw(doc_ids()),
            "text": draw(hostile_text()),
            "metadata": draw(metadata_dicts()),
            "score": draw(scores),
        }
        for _ in range(n)
    ]


# ---- configuration values

_bad_any = st.sampled_from([None, "3", "0.5", "no", b"1", [1], {"a": 1}, (), object])
_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([NAN, INF, -INF, -0.0, 1e-300, 1e300]),
    st.integers(-3, 3),
)
_ints = st.one_of(
    st.integers(-2, 8),
    st.sampled_from([0, -1, 10**6, True, False, 2.0, 2.5, NAN, INF, -INF]),
    st.floats(allow_nan=True, allow_infinity=True, min_value=None),
)
_bools = st.one_of(st.booleans(), st.sampled_from([0, 1, "no", "yes", None, NAN]))


def _choices(valid: tuple[str, ...]) -> st.SearchStrategy[Any]:
    odd = [v.upper() for v in valid] + ["", " " + valid[0], None, 3]
    return st.one_of(st.sampled_from(valid), st.sampled_from(odd))


def _literal_choices(cls: type) -> dict[str, tuple[str, ...]]:
    """The fields of ``cls`` typed as a ``Literal`` of strings, and their allowed values."""
    hints = typing.get_type_hints(cls)
    return {
        name: typing.get_args(hint)
        for name, hint in hints.items()
        if typing.get_origin(hint) is typing.Literal
    }


_GROUPS: dict[type, tuple[type, ...]] = {
    MinerConfig: (MinerConfig, MinerTuning),
    ReformulationConfig: (ReformulationConfig, ReformulationTuning),
}
"""A system's user config and its research settings: flat names reach the one that has them."""


def _choices_of(classes: tuple[type, ...]) -> dict[str, tuple[str, ...]]:
    return {name: c for cls in classes for name, c in _literal_choices(cls).items()}


def _fields_of(classes: tuple[type, ...], exclude: tuple[str, ...]) -> list[Any]:
    return [f for cls in classes for f in fields(cls) if f.name not in exclude]


def _weighted(plausible: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> Any:
    """``plausible`` 6 times in 10, else ``odd`` (hypothesis has no weights of its own)."""
    return st.integers(0, 9).flatmap(lambda i: plausible if i < 6 else odd)


def _field_strategy(field: Any, choices: dict[str, tuple[str, ...]]) -> Any:
    """Values for one field: plausible ones (mostly valid) or odd ones (mostly not)."""
    name, default = field.name, field.default
    if name in choices:
        return _weighted(
            st.sampled_from(choices[name]), st.one_of(_choices(choices[name]), _bad_any)
        )
    if isinstance(default, bool) or name == "chain_support":
        return _weighted(st.booleans(), st.one_of(_bools, _bad_any))
    if isinstance(default, float):
        return _weighted(st.floats(0.0, 1.5), st.one_of(_floats, _bad_any))
    return _weighted(st.integers(0, 8), st.one_of(_ints, _bad_any))  # ints, int-or-None


def config_kwargs(
    *classes: type, max_fields: int = 4, exclude: tuple[str, ...] = ()
) -> st.SearchStrategy[dict[str, Any]]:
    """A few fields of ``classes`` (a user config, with its research settings for the
    engine's flat names) set to values drawn from valid ones, NaN, infinities, negatives,
    floats for ints and wrong types; ``exclude``: names left out."""
    choices = _choices_of(classes)
    per_field = {f.name: _field_strategy(f, choices) for f in _fields_of(classes, exclude)}
    names = st.lists(st.sampled_from(sorted(per_field)), max_size=max_fields, unique=True)
    return names.flatmap(lambda chosen: st.fixed_dictionaries({n: per_field[n] for n in chosen}))


DIAL = ("keep", "top_n", "decoding", "beam_width")
"""The MinerConfig fields that are the refiner adapters' own (not in ``miner_config``)."""

miner_config_kwargs = config_kwargs(*_GROUPS[MinerConfig])
reformulation_config_kwargs = config_kwargs(*_GROUPS[ReformulationConfig])
adapter_miner_config_kwargs = config_kwargs(MinerConfig, exclude=DIAL)
adapter_reformulation_config_kwargs = config_kwargs(ReformulationConfig)


# ---- valid configuration values: each must be accepted

_VALID_FLOATS: dict[type, dict[str, st.SearchStrategy[float]]] = {
    MinerConfig: {
        "tau_node": st.floats(-1.0, 1.0),
        "tau_edge": st.floats(-1.0, 1.0),
        "tau_boost": st.floats(-1.0, 1.0),
        "seed_fallback_min_similarity": st.floats(-1.0, 1.0),
        "alpha": st.floats(0.0, 1.0, exclude_min=True),
        "beta": st.floats(1.0, 1e6),
    },
    ReformulationConfig: {
        "evidence_margin": st.floats(0.0, 2.0),
        "original_weight": st.floats(0.0, 1.0),
        "propagation_weight": st.floats(0.0, 1.0),
        "score_temperature": st.floats(0.0, 2.0, exclude_min=True),
        # Any positive number is valid; one the search cannot beat ends in a RetrievalError
        # by design, so the draws leave a search of the fuzz corpus time to answer.
        "search_timeout": st.floats(5.0, 600.0),
    },
}
"""The documented range of each float field (the settings' docstrings); every other field is
an int (each accepts 1..8), a flag or a choice."""


def _valid_field(user: type, field: Any, choices: dict[str, tuple[str, ...]]) -> Any:
    """Values the field's documented type and range allow (``None`` where it is optional)."""
    name = field.name
    optional = "None" in str(field.type)
    if name in choices:
        values: st.SearchStrategy[Any] = st.sampled_from(choices[name])
    elif "bool" in str(field.type):
        values = st.booleans()
    elif "float" in str(field.type):
        values = _VALID_FLOATS[user][name]  # a KeyError: a new float field needs its range
    else:
        assert "int" in str(field.type), f"{user.__name__}.{name}: {field.type}"
        values = st.integers(1, 8)
    return st.one_of(st.none(), values) if optional else values


def valid_config_kwargs(
    *classes: type,
    max_fields: int = 4,
    base: dict[str, Any] | None = None,
    exclude: tuple[str, ...] = (),
) -> st.SearchStrategy[dict[str, Any]]:
    """A few fields of ``classes`` set to values they must accept: valid by construction, so
    a ``ConfigError`` for one of them is a defect. ``base``: fields set besides them (the
    cross-field rule ``tau_boost >= tau_edge`` must hold over ``base`` and the draw)."""
    user, choices = classes[0], _choices_of(classes)
    per_field = {f.name: _valid_field(user, f, choices) for f in _fields_of(classes, exclude)}
    names = st.lists(st.sampled_from(sorted(per_field)), max_size=max_fields, unique=True)
    drawn = names.flatmap(lambda chosen: st.fixed_dictionaries({n: per_field[n] for n in chosen}))
    if user is not MinerConfig:
        return drawn
    default = MinerConfig()

    def ordered(kwargs: dict[str, Any]) -> bool:
        merged = {**(base or {}), **kwargs}
        return merged.get("tau_boost", default.tau_boost) >= merged.get(
            "tau_edge", default.tau_edge
        )

    return drawn.filter(ordered)


valid_miner_config_kwargs = valid_config_kwargs(*_GROUPS[MinerConfig])
valid_reformulation_config_kwargs = valid_config_kwargs(*_GROUPS[ReformulationConfig])
valid_adapter_reformulation_config_kwargs = valid_config_kwargs(ReformulationConfig)

__all__ = [
    "ATOMS",
    "SPECIAL_TOKENS",
    "SURROGATES",
    "VOCAB",
    "config_kwargs",
    "doc_ids",
    "hostile_text",
    "metadata_dicts",
    "miner_config_kwargs",
    "mostly_good_triples",
    "oversized_titles",
    "raw_documents",
    "reformulation_config_kwargs",
    "scores",
    "text_or_vocab",
    "title_value",
    "triple_item",
    "triples_value",
    "valid_config_kwargs",
    "valid_miner_config_kwargs",
    "valid_reformulation_config_kwargs",
]
