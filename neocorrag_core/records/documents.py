"""Reading an adapter's documents into engine passages, and copying what it hands back.

Every adapter checks the query and the documents once, where it receives them
(:func:`check_query`, :func:`check_sequence`, :func:`check_call_k`), reads each framework
document once into :data:`Fields` (its :data:`Reader`), and writes the engine's result once
into copies of the caller's objects. What is the same in every framework is here: the
checks, the fields as valid Unicode (:func:`read_fields`), the passages and their ids
(:func:`to_passages`: unique within a call, so the engine finds a kept passage by id), and
the metadata of a copy (:func:`copied_value`, :func:`kept_metadata`). The adapter's part is
reading its objects' fields and building its objects.
"""

from __future__ import annotations

import copy
import reprlib
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral
from typing import Any

from neocorrag_core.errors import InputError
from neocorrag_core.records.keys import RUN_KEYS
from neocorrag_core.types import Passage
from neocorrag_core.validation import clean_text

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60

Fields = tuple[Any, Any, Any, Any]
"""What an adapter reads of one framework document: its id, text, metadata and score."""
Reader = Callable[[int, Any], Fields]
"""An adapter's reading of the document at a position; an ``InputError`` for a foreign object."""


# ---- the edge: a query, documents, a per-call k


def check_query(owner: str, query: Any) -> str:
    """``query`` as valid Unicode (:func:`~neocorrag_core.validation.clean_text`), or an
    :class:`~neocorrag_core.errors.InputError` when it is not a non-empty string."""
    if not isinstance(query, str):
        raise InputError(
            f"{owner}: the query must be a non-empty string, got {type(query).__name__} "
            f"{_short.repr(query)}"
        )
    if not query.strip():
        raise InputError(f"{owner}: the query is empty or only whitespace; pass the question")
    return clean_text(query)


def check_sequence(owner: str, name: str, documents: Any, kind: str) -> list[Any]:
    """``documents`` as a list, or an ``InputError`` unless it is a list or tuple."""
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise InputError(
            f"{owner}: {name} must be a list of {kind}, got {type(documents).__name__}"
        )
    return list(documents)


def check_texts(owner: str, texts: Any) -> list[str]:
    """``texts`` as a list of strings (an embeddings object's input), else ``InputError``."""
    checked: list[str] = check_sequence(owner, "texts", texts, "strings")
    for i, text in enumerate(checked):
        if not isinstance(text, str):
            raise InputError(f"{owner}: texts[{i}] is a {type(text).__name__}, not a string")
    return checked


def check_call_k(owner: str, k: Any) -> int:
    """A per-call number of results: a positive integer (not a bool), else ``InputError``."""
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise InputError(
            f"{owner}: k must be a positive integer, got {type(k).__name__} {_short.repr(k)}"
        )
    return int(k)


# ---- documents into passages


def read_fields(position: int, fields: Fields) -> Fields:
    """One document's fields, checked and as valid Unicode (id, text, ``metadata["title"]``;
    ``None`` metadata is ``{}``): a text that is not a string or metadata that is not a
    mapping is an ``InputError`` naming the document (a LangChain ``Document`` checks them
    at construction only). The caller's objects are not changed."""
    doc_id, text, metadata, score = fields
    metadata = {} if metadata is None else metadata
    if not isinstance(text, str) or not isinstance(metadata, Mapping):
        what, value, expected = (
            ("text", text, "a string")
            if not isinstance(text, str)
            else ("metadata", metadata, "a dict")
        )
        raise InputError(
            f"documents[{position}] (id {doc_id!r}): its {what} must be {expected}, got "
            f"{type(value).__name__}"
        )
    title = metadata.get("title")
    if isinstance(title, str) and clean_text(title) is not title:
        metadata = {**metadata, "title": clean_text(title)}
    doc_id = clean_text(doc_id) if isinstance(doc_id, str) else doc_id
    return doc_id, clean_text(text), metadata, score


def passage(pid: str, fields: Fields) -> Passage:
    """The engine passage of a document's (checked) fields, under the id ``pid``."""
    _, text, metadata, score = fields
    title = metadata.get("title")
    return Passage(pid, text, title if isinstance(title, str) else "", score, dict(metadata))


def to_passages(fields: Sequence[Fields]) -> list[Passage]:
    """Passages in input order; a missing or repeated document id becomes ``#<rank>`` (the
    engine finds a kept passage by the passage a triple came from, so ids are unique)."""
    out: list[Passage] = []
    used: set[str] = set()
    for rank, item in enumerate(fields, start=1):
        doc_id = item[0]
        pid = doc_id if isinstance(doc_id, str) and doc_id and doc_id not in used else f"#{rank}"
        while pid in used:  # a real id that happens to look like "#<rank>"
            pid = f"#{pid}"
        used.add(pid)
        out.append(passage(pid, item))
    return out


def read_passages(documents: Sequence[Any], read: Reader) -> list[Passage]:
    """The passages of framework ``documents`` read by ``read`` (ids as :func:`to_passages`
    gives them)."""
    return to_passages([read_fields(i, read(i, d)) for i, d in enumerate(documents)])


def search_over(
    fetch: Callable[[str], Sequence[Any]], read: Reader
) -> Callable[[str, int], list[Passage]]:
    """``search(query, k)`` over a framework retriever's ``fetch(query) -> documents``: the
    first ``k`` as passages (ids: the documents' own, as :func:`to_passages` gives them)."""

    def search(query: str, k: int) -> list[Passage]:
        return read_passages(list(fetch(query)), read)[:k]

    return search


# ---- the metadata of a copy


def copied_value(value: Any) -> Any:
    """A metadata value as a copy may hold it without sharing it with the caller's object:
    JSON-like data copied directly, anything else deep-copied where possible (a lock or a
    client handle, which ``deepcopy`` cannot copy, is shared)."""
    plain = _plain_copy(value)
    if plain is not _NOT_PLAIN:
        return plain
    try:
        return copy.deepcopy(value)
    except Exception:  # deepcopy of arbitrary user objects can raise anything: share it
        return value


_ATOMS = (str, int, float, bool, type(None))
_NOT_PLAIN = object()


def _plain_copy(value: Any, depth: int = 0) -> Any:
    """A copy of JSON-like metadata (lists, tuples and dicts of strings, numbers, ``None``)
    built directly, as ``deepcopy`` would make it but without its bookkeeping (a
    100,000-triple list copies in a tenth of the time); ``_NOT_PLAIN`` for anything else
    or anything nested deeper than 32 levels, which ``deepcopy`` then copies."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if depth > 32:
        return _NOT_PLAIN
    if kind is list or kind is tuple:
        if all(type(item) in _ATOMS for item in value):
            return list(value) if kind is list else value
        items = []
        for item in value:
            inner = type(item)
            if inner is list and all(type(part) in _ATOMS for part in item):
                items.append(list(item))  # a triple, mostly: copied without a call
                continue
            copied = item if inner in _ATOMS else _plain_copy(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(copied)
        return items if kind is list else tuple(items)
    if kind is dict:
        copied = {key: _plain_copy(item, depth + 1) for key, item in value.items()}
        if any(type(key) not in _ATOMS or item is _NOT_PLAIN for key, item in copied.items()):
            return _NOT_PLAIN
        return copied
    return _NOT_PLAIN


def kept_metadata(original: Mapping[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """A kept copy's metadata: the original's without the run keys an earlier refinement left
    (so one call's chains sit in one place), then this call's ``added`` keys."""
    return {**{k: v for k, v in original.items() if k not in RUN_KEYS}, **added}


__all__ = [
    "Fields",
    "Reader",
    "check_call_k",
    "check_query",
    "check_sequence",
    "check_texts",
    "copied_value",
    "kept_metadata",
    "passage",
    "read_fields",
    "read_passages",
    "search_over",
    "to_passages",
]
