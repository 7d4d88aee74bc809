"""Property-based fuzzing of the engine and both adapters, on hostile input.

Text with control characters, NULs, chat special tokens, right-to-left and zero-width marks,
emoji, very long words and lone surrogates; ``metadata["triples"]`` of any shape;
configurations with NaN, infinities, negatives, floats for ints and wrong types (strategies:
``fuzz_strategies``). Through the miner (``decoding="none"`` and ``"beam"`` on the tiny LM),
the LangChain compressor, the LlamaIndex postprocessor and both EviReform retrievers (over
fake retrievers), every call must:

* return a valid result or raise a documented error (a :class:`NeocorragError`); a raw
  ``AttributeError``, ``KeyError``, ``TypeError``... from inside is a defect;
* never return an empty context for non-empty input (documents in, at least one out);
* leave its inputs as they were (compared with deep copies taken before, metadata included).

A configuration is either built and usable (a call with it returns a valid result) or
rejected with :class:`ConfigError`. Every "served or rejected" property also draws inputs
that are valid by construction (or meet the documented validity rule it states), and those
must be served: a rejection there is a defect, so none of these properties would pass if
the code rejected every input. Bag-of-words embeddings, no downloads. Examples are
few and derandomized, so the file runs in well under a minute and CI is reproducible.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import math
import re
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from adapter_fixtures import BRIDGE_CORPUS, BRIDGE_NO_LM, BRIDGE_QUESTION, CORPUS, QUERY
from conftest import HashedBagOfWords
from fuzz_strategies import (
    DIAL,
    adapter_miner_config_kwargs,
    adapter_reformulation_config_kwargs,
    doc_ids,
    hostile_text,
    metadata_dicts,
    miner_config_kwargs,
    oversized_titles,
    raw_documents,
    reformulation_config_kwargs,
    scores,
    text_or_vocab,
    title_value,
    valid_adapter_reformulation_config_kwargs,
    valid_config_kwargs,
    valid_miner_config_kwargs,
    valid_reformulation_config_kwargs,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core.retrievers import BaseRetriever as LlamaBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import Field
from tiny_models import build_tiny_lm

from neocorrag_core import (
    ConfigError,
    EvidenceChainMiner,
    EvidenceReformulator,
    InputError,
    KeepReason,
    MinerConfig,
    MiningResult,
    MissingDependencyError,
    NeocorragError,
    Passage,
    ReformulationConfig,
    RetrievalError,
)
from neocorrag_core.chains import links
from neocorrag_core.chains import query_entities as entities
from neocorrag_core.chains.config import MinerTuning, miner_settings
from neocorrag_core.chains.graph import normalize_entity
from neocorrag_core.chains.path_search import activated_score
from neocorrag_core.evireform.config import ReformulationTuning, reformulation_settings
from neocorrag_core.models import LanguageModel, TextEmbedder, resolve_embedder
from neocorrag_core.rendering import chain_text, result_context
from neocorrag_core.text import entities as text_entities
from neocorrag_integrations.langchain import EvidenceReformulationRetriever as LCReformRetriever
from neocorrag_integrations.langchain import NeocorRAGCompressor, is_evidence_chain_document
from neocorrag_integrations.llama_index import EvidenceReformulationRetriever as LIReformRetriever
from neocorrag_integrations.llama_index import NeocorRAGPostprocessor, is_evidence_chain_node
from neocorrag_integrations.metadata_keys import RUN_KEYS

# Loose thresholds so bag-of-words similarities let chains form (the later stages run).
LOOSE = {"tau_node": 0.5, "tau_edge": 0.0, "tau_boost": 0.0, "seed_fallback_min_similarity": 0.0}
ADAPTER_LOOSE = {k: v for k, v in LOOSE.items() if k in MinerConfig.field_names()}
"""What of LOOSE an adapter takes (its ``miner_config``; the fallback floor is research)."""


def fuzz(max_examples: int) -> settings:
    """Bounded, derandomized settings: the same examples on every run and in CI."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------- shared, built once


@functools.cache
def tiny_lm() -> LanguageModel:
    """One tiny random Llama for the module (hypothesis cannot use function fixtures)."""
    model, tokenizer = build_tiny_lm(seed=0)
    return LanguageModel(model=model, tokenizer=tokenizer, name="tiny-fuzz")


@functools.cache
def embedder() -> TextEmbedder:
    """One bag-of-words embedder (and its cache) for every engine in the module."""
    return resolve_embedder(HashedBagOfWords())


@functools.cache
def miner_for(query_entities: str = "ngram", *, with_lm: bool = False) -> EvidenceChainMiner:
    """One miner per entity mode, so spaCy loads at most once; calls override the rest."""
    return EvidenceChainMiner(
        MinerConfig(query_entities=query_entities),
        embedder=embedder(),
        lm=tiny_lm() if with_lm else None,
    )


def mine_with(miner: EvidenceChainMiner, query: Any, passages: Any, **changes: Any) -> Any:
    """``miner.mine`` with flat changes of either settings object: the research ones on a
    tuned copy of the miner (a call takes ``MinerConfig`` fields only)."""
    research = {k: v for k, v in changes.items() if k in MinerTuning.field_names()}
    user = {k: v for k, v in changes.items() if k not in research}
    return (miner.tuned(**research) if research else miner).mine(query, passages, **user)


@functools.cache
def compressor(chain_format: str = "none") -> NeocorRAGCompressor:
    config = {**ADAPTER_LOOSE, "chain_format": chain_format}
    return NeocorRAGCompressor(embedder=embedder(), decoding="none", miner_config=config)


@functools.cache
def postprocessor(chain_format: str = "none") -> NeocorRAGPostprocessor:
    config = {**ADAPTER_LOOSE, "chain_format": chain_format}
    return NeocorRAGPostprocessor(embedder=embedder(), decoding="none", miner_config=config)


chain_formats = st.sampled_from(["none", "linking"])
"""The default (no chain document) and a format that adds one."""


# ---------------------------------------------------------------- comparing inputs


def same(a: Any, b: Any) -> bool:
    """Deep equality that takes NaN as equal to NaN (metadata may hold NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


def dumps(items: Sequence[Any]) -> list[Any]:
    """What a framework object holds (pydantic models), or the object itself."""
    return [item.model_dump() if hasattr(item, "model_dump") else item for item in items]


def assert_unchanged(items: Sequence[Any], before: Sequence[Any]) -> None:
    assert same(dumps(items), dumps(before)), "an input was modified"


# ---------------------------------------------------------------- inputs

queries = st.one_of(
    st.sampled_from([QUERY, BRIDGE_QUESTION, "Who directed Film X?", "Stanley"]),
    hostile_text(),
    st.builds(
        lambda q, junk: f"{q} {junk}",
        st.sampled_from([QUERY, BRIDGE_QUESTION]),
        hostile_text(max_pieces=3),
    ),
)
"""Any string: questions, hostile text, empty and whitespace-only strings."""
usable_queries = queries.filter(str.strip)
"""Any string the engine must answer: not empty or whitespace-only."""

non_string_queries = st.sampled_from([None, 3, 2.5, b"query", ["query"], {"q": 1}])


@st.composite
def passage_lists(draw: st.DrawFn, *, min_size: int = 0, max_size: int = 6) -> list[Passage]:
    """Engine passages with unique, sometimes hostile ids and arbitrary metadata."""
    passages: list[Passage] = []
    used: set[str] = set()
    for i, raw in enumerate(draw(raw_documents(min_size=min_size, max_size=max_size))):
        pid = raw["id"] if isinstance(raw["id"], str) and raw["id"] else f"p{i}"
        title = draw(st.one_of(text_or_vocab(), st.just("")))
        score = raw["score"] if isinstance(raw["score"], float) else None
        passage = Passage(pid, raw["text"], title, score, raw["metadata"])
        # Unique as the Passage keeps them: "\ud800" and "\udc00" are both stored as U+FFFD.
        while passage.id in used:
            passage = dataclasses.replace(passage, id=passage.id + "'")
        used.add(passage.id)
        passages.append(passage)
    return passages


def fixture_documents(corpus: list[tuple[str, str, str, list[list[str]]]]) -> list[dict]:
    """A fixture corpus as document records (scores falling with rank)."""
    return [
        {"id": pid, "text": text, "metadata": {"title": title, "triples": ts}, "score": 1 - i / 10}
        for i, (pid, title, text, ts) in enumerate(corpus)
    ]


def lc_documents(raw: list[dict]) -> list[Document]:
    return [Document(id=r["id"], page_content=r["text"], metadata=r["metadata"]) for r in raw]


def li_nodes(raw: list[dict]) -> list[NodeWithScore]:
    nodes = []
    for i, r in enumerate(raw):
        score = None if r["score"] is None else float(r["score"])
        node = TextNode(
            id_=r["id"] if r["id"] is not None else f"n{i}",
            text=r["text"],
            metadata=r["metadata"],
            excluded_llm_metadata_keys=["triples"],
        )
        nodes.append(NodeWithScore(node=node, score=score))
    return nodes


def repeated(items: list[Any], repeat: bool) -> list[Any]:
    """``items``, with its first object once more at the end when ``repeat``."""
    return [*items, *items[:1]] if repeat else items


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def by_overlap(query: str, items: Sequence[Any], text: Callable[[Any], str]) -> list[Any]:
    """``items`` ranked by words shared with ``query`` (stable), the same objects."""
    words = _words(query)
    return sorted(items, key=lambda item: -len(words & _words(text(item))))


class ListRetriever(BaseRetriever):
    """A fake LangChain retriever: its documents, ranked by word overlap with the query."""

    docs: list[Any] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return by_overlap(query, self.docs, lambda d: d.page_content)


class ListNodeRetriever(LlamaBaseRetriever):
    """A fake LlamaIndex retriever: its nodes, ranked by word overlap with the query."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return by_overlap(query_bundle.query_str, self.nodes, lambda n: n.node.get_content())


class Offline(ConnectionError):
    """What a wrapped retriever raises when its index is down."""


JUNK = [
    None,
    "text",
    {"d1": "text"},
    3,
    [None],
    ["text"],
    [Passage("p", "x")],
    Offline("down"),
    KeyError("k"),
    ZeroDivisionError("0"),
    AttributeError("a"),
]
"""What a broken wrapped retriever returns or raises (exceptions are raised)."""


def go_bad(calls: list[int], fail_at: int, junk: Any, good: Callable[[], list[Any]]) -> Any:
    """The ``fail_at``-th call onwards (0-based) returns or raises ``junk``."""
    calls.append(1)
    if len(calls) > fail_at:
        if isinstance(junk, BaseException):
            raise junk
        return junk
    return good()


class BrokenRetriever(BaseRetriever):
    """A LangChain retriever that answers ``fail_at`` queries, then breaks."""

    docs: list[Any] = Field(default_factory=list)
    junk: Any = None
    fail_at: int = 0
    calls: list[int] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        good = functools.partial(by_overlap, query, self.docs, lambda d: d.page_content)
        return go_bad(self.calls, self.fail_at, self.junk, good)


class BrokenNodeRetriever(ListNodeRetriever):
    """A LlamaIndex retriever that answers ``fail_at`` queries, then breaks."""

    def __init__(self, nodes: list[NodeWithScore], junk: Any, fail_at: int) -> None:
        super().__init__(nodes)
        self.junk, self.fail_at, self.calls = junk, fail_at, []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        good = functools.partial(super()._retrieve, query_bundle)
        return go_bad(self.calls, self.fail_at, self.junk, good)


def attempt(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Exception | None]:
    """``(result, None)``, or ``(None, error)`` for a documented error. Anything else (a raw
    ``TypeError``, ``KeyError``...) propagates, so hypothesis reports and shrinks it."""
    try:
        return call(*args, **kwargs), None
    except NeocorragError as err:
        return None, err


def valid_or_any(
    valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]
) -> st.SearchStrategy[tuple[Any, bool]]:
    """``(value, True)`` for a value valid by construction (it must be served), or
    ``(value, False)`` for one drawn from ``anything`` (served or rejected, either is fine)."""
    return st.one_of(valid.map(lambda v: (v, True)), anything.map(lambda v: (v, False)))


def assert_served(err: Exception | None, valid: bool, what: Any) -> None:
    """A valid input was served: no error, documented or not."""
    if valid:
        assert err is None, f"a valid input was rejected: {what!r}: {err!r}"


# ---------------------------------------------------------------- result checks


def assert_blank_query_only(err: Exception, query: str) -> None:
    """The adapters answer every string query but an empty or whitespace-only one, which
    they reject with ``InputError`` (there is no question to tie the documents to)."""
    assert isinstance(err, InputError), repr(err)
    assert not query.strip(), f"a usable query was rejected: {err!r}"


def check_mining_result(result: Any, passages: Sequence[Passage], config: MinerConfig) -> None:
    assert isinstance(result, MiningResult)
    if passages:
        assert result.kept, "non-empty input gave an empty context"
    ranks = [k.rank for k in result.kept] + [d.rank for d in result.dropped]
    assert sorted(ranks) == list(range(1, len(passages) + 1))
    assert [k.rank for k in result.kept] == sorted(k.rank for k in result.kept)
    for item in [*result.kept, *result.dropped]:
        assert item.passage is passages[item.rank - 1]
    candidates = {c.text for c in result.candidates}
    assert len(result.chains) <= config.beam_width
    for chain in result.chains:
        assert chain.text in candidates
        assert math.isfinite(chain.search_score)
        assert chain.lm_logprob is None or math.isfinite(chain.lm_logprob)
    if result.fallback is not None:
        assert not result.chains
        assert all(k.reason is KeepReason.PASSTHROUGH for k in result.kept)
    assert isinstance(result_context(result), str) and isinstance(chain_text(result), str)


def check_refined_docs(out: Sequence[Any], inputs: Sequence[Any], *, is_chain, key) -> None:
    """Adapter output: copies of inputs in retrieval order, at most one chain item, and
    never empty for non-empty input."""
    out = list(out)
    chains = [item for item in out if is_chain(item)]
    kept = [item for item in out if not is_chain(item)]
    assert len(chains) <= 1
    if inputs:
        assert kept, "documents went in and none came out"
    carrier = chains[0] if chains else kept[0] if kept else None
    if carrier is not None:  # the call's chains, dropped ids, counts, timings: one place
        assert set(RUN_KEYS) <= set(carrier.metadata)
        assert all(not set(RUN_KEYS) & set(item.metadata) for item in out if item is not carrier)
    originals = [key(item) for item in inputs]
    positions = []
    for item in kept:
        assert all(item is not original for original in inputs), "an input came back uncopied"
        assert key(item) in originals
        positions.append(item.metadata["neocorrag_retrieval_rank"])
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    for rank, item in zip(positions, kept, strict=True):
        assert key(item) == originals[rank - 1]


def check_reformed(out: Sequence[Any], inputs: Sequence[Any], k: int, *, key) -> None:
    """Retriever output: at most ``k`` copies of distinct inputs, best first, never empty
    when the wrapped retriever found something."""
    out = list(out)
    assert len(out) <= k
    if inputs:
        assert out, "the wrapped retriever found documents and none came out"
    originals = [key(item) for item in inputs]
    for item in out:
        assert all(item is not original for original in inputs), "an input came back uncopied"
        assert key(item) in originals
    metas = [item.metadata for item in out]
    assert [m["neocorrag_evireform_rank"] for m in metas] == list(range(1, len(out) + 1))
    for meta in metas:
        score = meta["neocorrag_evireform_score"]
        assert score is None or math.isfinite(score)


def lc_key(doc: Document) -> tuple[Any, str]:
    return (doc.id, doc.page_content)


def li_key(item: NodeWithScore) -> tuple[str, str]:
    return (item.node.node_id, item.node.get_content())


# ================================================================ core engine


@fuzz(40)
@given(
    pid=st.one_of(doc_ids(), st.integers(), st.just(b"id")),
    text=st.one_of(hostile_text(), st.none(), st.integers()),
    title=title_value,
    score=st.one_of(scores, st.just("0.5"), st.booleans()),
    metadata=st.one_of(metadata_dicts(), st.none(), st.just([("triples", [])]), st.just("m")),
)
def test_passage_is_built_or_rejected_with_input_error(pid, text, title, score, metadata):
    passage, err = attempt(Passage, pid, text, title, score, metadata)
    # The documented fields: id a non-empty string, text and title strings, score a number
    # or None, metadata a mapping or None. Exactly these are built.
    valid = (
        isinstance(pid, str)
        and pid != ""
        and isinstance(text, str)
        and isinstance(title, str)
        and (score is None or (isinstance(score, (int, float)) and not isinstance(score, bool)))
        and (metadata is None or isinstance(metadata, Mapping))
    )
    assert_served(err, valid, (pid, text, title, score, metadata))
    if err is not None:
        assert isinstance(err, InputError)
        return
    assert isinstance(passage.id, str) and passage.id and isinstance(passage.text, str)
    assert isinstance(passage.metadata, dict) or hasattr(passage.metadata, "get")


@fuzz(40)
@given(query=usable_queries, passages=passage_lists())
def test_mine_without_lm_returns_a_valid_result_and_leaves_inputs_alone(query, passages):
    miner = miner_for()
    config, _ = miner_settings(miner.config, miner.tuning, LOOSE)
    before = copy.deepcopy(passages)
    result = mine_with(miner, query, passages, **LOOSE)
    assert_unchanged(passages, before)
    check_mining_result(result, passages, config)


@fuzz(15)
@given(
    query=usable_queries,
    passages=passage_lists(min_size=1, max_size=3),
    titles=st.lists(oversized_titles, min_size=1, max_size=3),
    crowd=st.integers(0, 400),
)
def test_mine_serves_oversized_titles_and_crowds_within_the_caps(query, passages, titles, crowd):
    """Titles past the cap and more documents than a call reads: the result is the usual
    one over the caller's own objects, and each cap that bound is named."""
    titled = [dataclasses.replace(p, title=titles[i % len(titles)]) for i, p in enumerate(passages)]
    extra = [Passage(f"crowd {i}", f"Film Y{i} is a comedy.", "") for i in range(crowd)]
    everything = [*titled, *extra]
    miner = miner_for()
    config, _ = miner_settings(miner.config, miner.tuning, LOOSE)
    limits = miner.limits
    result = mine_with(miner, query, everything, **LOOSE)
    check_mining_result(result, everything, config)
    notes = " ".join(result.notes)
    if len(everything) > limits.max_documents:
        assert "WorkLimits.max_documents" in notes
    read = everything[: limits.max_documents]
    if any(len(p.title) > limits.max_title_chars for p in read):
        assert "WorkLimits.max_title_chars" in notes


@fuzz(15)
@given(query=usable_queries, passages=passage_lists(min_size=1, max_size=4))
def test_mine_with_beam_decoding_on_the_tiny_lm(query, passages):
    miner = miner_for(with_lm=True)
    overrides = {**LOOSE, "decoding": "beam", "beam_width": 3, "num_candidates": 8}
    before = copy.deepcopy(passages)
    result = mine_with(miner, query, passages, **overrides)
    assert_unchanged(passages, before)
    check_mining_result(result, passages, miner_settings(miner.config, miner.tuning, overrides)[0])


@fuzz(30)
# Once a bare ValueError (miner._validate_inputs), as were a non-sequence and a repeated id.
@example(query="", passages=[])
@example(query=QUERY, passages="a string")
@given(
    query=st.one_of(queries, non_string_queries),
    passages=st.one_of(
        passage_lists(max_size=3).map(lambda ps: ps + ps[:1]),  # a repeated passage id
        passage_lists(max_size=3).map(tuple),
        passage_lists(max_size=3).map(lambda ps: [*ps, {"id": "x", "text": "not a Passage"}]),
        st.sampled_from(["a string", None, 3, {"id": "p1"}]),
    ),
)
def test_mine_rejects_unusable_input_with_input_error(query, passages):
    """Whatever the query and passages, the miner answers or raises a documented error; it
    answers exactly the usable ones: a non-blank string query and a list or tuple of
    Passages with unique ids (an empty one included)."""
    result, err = attempt(mine_with, miner_for(), query, passages, **LOOSE)
    usable = (
        isinstance(query, str)
        and bool(query.strip())
        and isinstance(passages, (list, tuple))
        and all(isinstance(p, Passage) for p in passages)
        and len({p.id for p in passages}) == len(passages)
    )
    assert_served(err, usable, (query, passages))
    if err is not None:
        assert isinstance(err, InputError)
    else:
        assert usable, f"unusable input was served: {query!r}, {passages!r}"
        miner = miner_for()
        config, _ = miner_settings(miner.config, miner.tuning, LOOSE)
        check_mining_result(result, list(passages), config)


@fuzz(50)
@given(drawn=valid_or_any(valid_miner_config_kwargs, miner_config_kwargs))
def test_miner_config_is_usable_or_rejected_with_config_error(drawn):
    kwargs, valid = drawn
    settings_, err = attempt(miner_settings, changes=kwargs)
    assert_served(err, valid, kwargs)
    if err is not None:
        assert isinstance(err, ConfigError)
        with pytest.raises(ConfigError):  # overriding valid settings rejects the same values
            miner_settings(MinerConfig(), MinerTuning(), kwargs)
        return
    config, tuning = settings_
    assert MinerConfig(**config.to_dict()) == config
    assert MinerTuning(**tuning.to_dict()) == tuning
    assert isinstance(config.kept_top_n, int) and config.kept_top_n >= 0
    assert isinstance(tuning.keeps_chain_sources(config.keep), bool)
    passages = [
        Passage(pid, text, title, metadata={"triples": triples})
        for pid, title, text, triples in CORPUS
    ]
    EvidenceChainMiner(config, tuning=tuning, embedder=embedder(), lm=tiny_lm())  # loads nothing
    # The same settings, from a miner that has loaded spaCy (if needed) already.
    miner = miner_for(config.query_entities, with_lm=config.decoding != "none")
    overrides = {**config.to_dict(), **tuning.to_dict()}
    del overrides["query_entities"]
    overrides["num_candidates"] = min(tuning.num_candidates, 8)  # keep LM decoding fast
    result = mine_with(miner, QUERY, passages, **overrides)
    check_mining_result(result, passages, config)


@fuzz(50)
@given(drawn=valid_or_any(valid_reformulation_config_kwargs, reformulation_config_kwargs))
def test_reformulation_config_is_usable_or_rejected_with_config_error(drawn):
    kwargs, valid = drawn
    settings_, err = attempt(reformulation_settings, changes=kwargs)
    assert_served(err, valid, kwargs)
    if err is not None:
        assert isinstance(err, ConfigError)
        with pytest.raises(ConfigError):
            reformulation_settings(ReformulationConfig(), ReformulationTuning(), kwargs)
        return
    config, tuning = settings_
    assert ReformulationConfig(**config.to_dict()) == config
    assert ReformulationTuning(**tuning.to_dict()) == tuning
    corpus = [
        Passage(pid, text, title, metadata={"triples": triples})
        for pid, title, text, triples in BRIDGE_CORPUS
    ]

    def search(query: str, k: int) -> list[Passage]:
        return by_overlap(query, corpus, lambda p: p.text)[:k]

    engine = EvidenceReformulator(
        config,
        tuning=tuning.with_overrides(max_query_tokens=min(tuning.max_query_tokens, 16)),
        embedder=embedder(),
        lm=tiny_lm(),
    )
    result = engine.retrieve(BRIDGE_QUESTION, search, k=3)
    assert 1 <= len(result.passages) <= 3
    assert all(math.isfinite(p.score) for p in result.passages)


# ================================================================ LangChain


@fuzz(40)
@given(query=queries, raw=raw_documents(), repeat=st.booleans(), chain_format=chain_formats)
def test_compressor_returns_copies_and_never_an_empty_context(query, raw, repeat, chain_format):
    docs = lc_documents(raw)
    docs = repeated(docs, repeat)
    before = copy.deepcopy(docs)
    out, err = attempt(compressor(chain_format).compress_documents, docs, query)
    assert_unchanged(docs, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    check_refined_docs(out, docs, is_chain=is_evidence_chain_document, key=lc_key)


@fuzz(10)
@given(query=non_string_queries, raw=raw_documents(min_size=1, max_size=3))
def test_compressor_rejects_a_non_string_query_with_input_error(query, raw):
    docs = lc_documents(raw)
    _, err = attempt(compressor().compress_documents, docs, query)
    assert isinstance(err, InputError)


def _unusable(items: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[Any]:
    """What is not a list of framework documents: a string, a mapping, a one-pass
    iterator, None, or a list holding something else (a Passage, a dict, a string...)."""
    odd_item = st.sampled_from(
        [None, "text", {"page_content": "x"}, Passage("p", "x"), ("d1", "text"), 3]
    )
    return st.one_of(
        st.sampled_from(["a document", {"d1": "text"}, None, 3, b"bytes"]),
        items.map(iter),
        st.tuples(items, odd_item, st.integers(0, 3)).map(
            lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]]
        ),
    )


@fuzz(20)
@given(query=usable_queries, documents=_unusable(raw_documents(max_size=3).map(lc_documents)))
def test_compressor_rejects_what_is_not_a_list_of_documents_with_input_error(query, documents):
    _, err = attempt(compressor().compress_documents, documents, query)
    assert isinstance(err, InputError)


@fuzz(20)
@given(query=usable_queries, nodes=_unusable(raw_documents(max_size=3).map(li_nodes)))
def test_postprocessor_rejects_what_is_not_a_list_of_nodes_with_input_error(query, nodes):
    _, err = attempt(postprocessor().postprocess_nodes, nodes, query_str=query)
    assert isinstance(err, InputError)


_adapter_fields = st.fixed_dictionaries(
    {},
    optional={
        "top_n": st.one_of(st.integers(-2, 4), st.sampled_from([None, 2.5, "1", math.nan])),
        "beam_width": st.one_of(st.integers(-1, 4), st.sampled_from([None, 1.5, math.inf])),
        "keep": st.sampled_from(["recall", "paper", "precise", "all", None, 3]),
        "decoding": st.sampled_from(["none", "rank", "beam", "greedy", None]),
        "include_chains": st.sampled_from([True, False, "no", None]),
        "chains_position": st.sampled_from(["first", "last", "middle"]),
        "miner_config": st.one_of(
            adapter_miner_config_kwargs.map(lambda kw: {**ADAPTER_LOOSE, **kw}).filter(
                lambda kw: "query_entities" not in kw  # spaCy loads per miner
            ),
            st.sampled_from([None, "tau_edge=0.1", [("tau_edge", 0.1)]]),
        ),
    },
)


_valid_adapter_fields = st.fixed_dictionaries(
    {},
    optional={
        "top_n": st.one_of(st.none(), st.integers(0, 4)),
        "beam_width": st.one_of(st.none(), st.integers(1, 4)),
        "keep": st.sampled_from([None, "recall", "balanced", "precise", "paper"]),
        "decoding": st.sampled_from([None, "none", "rank", "beam"]),
        "include_chains": st.booleans(),
        "chains_position": st.sampled_from(["first", "last"]),
        "miner_config": st.one_of(
            st.none(),
            valid_config_kwargs(MinerConfig, base=ADAPTER_LOOSE, exclude=DIAL)
            .filter(lambda kw: "query_entities" not in kw)  # spaCy loads per miner
            .map(lambda kw: {**ADAPTER_LOOSE, **kw}),
        ),
    },
)
"""Adapter fields as documented: each must be accepted."""


@fuzz(40)
@given(drawn=valid_or_any(_valid_adapter_fields, _adapter_fields), use_llama=st.booleans())
def test_adapter_fields_are_usable_or_rejected_with_config_error(drawn, use_llama):
    fields, valid = drawn
    cls = NeocorRAGPostprocessor if use_llama else NeocorRAGCompressor
    adapter, err = attempt(cls, embedder=embedder(), lm=tiny_lm(), **fields)
    assert_served(err, valid, fields)
    if err is not None:
        assert isinstance(err, ConfigError), f"{type(err).__name__}: {err}"
        return
    assert isinstance(adapter.effective_config(), MinerConfig)
    raw = fixture_documents(CORPUS)
    if use_llama:
        nodes = li_nodes(raw)
        out = adapter.postprocess_nodes(nodes, query_str=QUERY)
        check_refined_docs(out, nodes, is_chain=is_evidence_chain_node, key=li_key)
    else:
        docs = lc_documents(raw)
        out = adapter.compress_documents(docs, QUERY)
        check_refined_docs(out, docs, is_chain=is_evidence_chain_document, key=lc_key)


@fuzz(30)
@given(query=queries, raw=raw_documents(), repeat=st.booleans())
def test_langchain_reformulation_retriever_returns_copies_of_what_it_found(query, raw, repeat):
    docs = lc_documents(raw)
    docs = repeated(docs, repeat)
    before = copy.deepcopy(docs)
    wrapper = LCReformRetriever(
        retriever=ListRetriever(docs=docs), config=BRIDGE_NO_LM, k=3, embedder=embedder()
    )
    out, err = attempt(wrapper.invoke, query)
    assert_unchanged(docs, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    check_reformed(out, docs, 3, key=lc_key)


@fuzz(12)
@given(
    query=queries,
    raw=raw_documents(min_size=1, max_size=4),
    selection=st.sampled_from(["embedding", "beam", "rank"]),
)
def test_langchain_reformulation_with_the_tiny_lm(query, raw, selection):
    docs = lc_documents(raw)
    before = copy.deepcopy(docs)
    engine = EvidenceReformulator(
        ReformulationConfig(selection=selection, residual_queries="lm"),
        tuning=ReformulationTuning(max_query_tokens=12),
        embedder=embedder(),
        lm=tiny_lm(),
    )
    wrapper = LCReformRetriever(retriever=ListRetriever(docs=docs), k=2, reformulator=engine)
    out, err = attempt(wrapper.invoke, query)
    assert_unchanged(docs, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    check_reformed(out, docs, 2, key=lc_key)


@fuzz(10)
@given(query=non_string_queries, raw=raw_documents(min_size=1, max_size=3))
def test_langchain_reformulation_rejects_a_non_string_query_with_input_error(query, raw):
    wrapper = LCReformRetriever(
        retriever=ListRetriever(docs=lc_documents(raw)), config=BRIDGE_NO_LM, embedder=embedder()
    )
    _, err = attempt(wrapper.invoke, query)
    assert isinstance(err, InputError)


@fuzz(30)
@given(
    drawn=valid_or_any(
        st.tuples(
            st.integers(1, 4), st.one_of(st.none(), valid_adapter_reformulation_config_kwargs)
        ),
        st.tuples(
            st.one_of(st.integers(-1, 4), st.sampled_from([2.5, "3", None, math.nan])),
            st.one_of(adapter_reformulation_config_kwargs, st.sampled_from([None, "k=3", [1]])),
        ),
    ),
    use_llama=st.booleans(),
)
def test_reformulation_retriever_fields_are_usable_or_rejected(drawn, use_llama):
    (k, config), valid = drawn
    raw = fixture_documents(BRIDGE_CORPUS)
    if use_llama:
        base: Any = ListNodeRetriever(li_nodes(raw))
        make: Callable[..., Any] = functools.partial(LIReformRetriever, base)
    else:
        base = ListRetriever(docs=lc_documents(raw))
        make = functools.partial(LCReformRetriever, retriever=base)
    wrapper, err = attempt(make, k=k, config=config, embedder=embedder(), lm=tiny_lm())
    assert_served(err, valid, (k, config))
    if err is not None:
        assert isinstance(err, ConfigError), f"{type(err).__name__}: {err}"
        return
    effective = (wrapper.settings if use_llama else wrapper).effective_config()
    assert isinstance(effective, ReformulationConfig)
    out = wrapper.retrieve(BRIDGE_QUESTION) if use_llama else wrapper.invoke(BRIDGE_QUESTION)
    inputs = base.nodes if use_llama else base.docs
    check_reformed(out, inputs, wrapper.k, key=li_key if use_llama else lc_key)


# ================================================================ LlamaIndex


@fuzz(40)
@given(query=queries, raw=raw_documents(), repeat=st.booleans(), chain_format=chain_formats)
def test_postprocessor_returns_copies_and_never_an_empty_context(query, raw, repeat, chain_format):
    nodes = li_nodes(raw)
    nodes = repeated(nodes, repeat)
    before = copy.deepcopy(nodes)
    out, err = attempt(postprocessor(chain_format).postprocess_nodes, nodes, query_str=query)
    assert_unchanged(nodes, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    check_refined_docs(out, nodes, is_chain=is_evidence_chain_node, key=li_key)


@fuzz(10)
@given(query=non_string_queries, raw=raw_documents(min_size=1, max_size=3))
def test_postprocessor_rejects_a_missing_or_non_string_query_with_input_error(query, raw):
    _, err = attempt(postprocessor().postprocess_nodes, li_nodes(raw), query_str=query)
    assert isinstance(err, InputError)


@fuzz(30)
@given(query=queries, raw=raw_documents(), repeat=st.booleans())
def test_llama_index_reformulation_retriever_returns_copies_of_what_it_found(query, raw, repeat):
    nodes = li_nodes(raw)
    nodes = repeated(nodes, repeat)
    before = copy.deepcopy(nodes)
    wrapper = LIReformRetriever(
        ListNodeRetriever(nodes), config=BRIDGE_NO_LM, k=3, embedder=embedder()
    )
    out, err = attempt(wrapper.retrieve, query)
    assert_unchanged(nodes, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    check_reformed(out, nodes, 3, key=li_key)


@fuzz(30)
@given(
    query=usable_queries,
    raw=raw_documents(min_size=1, max_size=4),
    junk=st.sampled_from(JUNK),
    fail_at=st.integers(0, 2),
    use_llama=st.booleans(),
)
def test_reformulation_retrievers_turn_a_broken_retriever_into_retrieval_error(
    query, raw, junk, fail_at, use_llama
):
    if use_llama:
        nodes = li_nodes(raw)
        if isinstance(junk, list) and junk and isinstance(junk[0], Passage):
            junk = [n.node for n in nodes]  # nodes without NodeWithScore around them
        base: Any = BrokenNodeRetriever(nodes, junk, fail_at)
        wrapper: Any = LIReformRetriever(base, config=BRIDGE_NO_LM, k=3, embedder=embedder())
        out, err = attempt(wrapper.retrieve, query)
    else:
        base = BrokenRetriever(docs=lc_documents(raw), junk=junk, fail_at=fail_at)
        wrapper = LCReformRetriever(retriever=base, config=BRIDGE_NO_LM, k=3, embedder=embedder())
        out, err = attempt(wrapper.invoke, query)
    if len(base.calls) > fail_at:  # the retriever broke during the call
        assert isinstance(err, RetrievalError), repr(err)
        assert "query" in str(err)  # it names the query that broke the retriever
    else:
        assert err is None, repr(err)
        check_reformed(
            out, base.nodes if use_llama else base.docs, 3, key=li_key if use_llama else lc_key
        )


def _async_call(kind: str, query: str, raw: list[dict]) -> tuple[list[Any], Callable[..., Any]]:
    """(inputs, a function running the async entry point of ``kind``)."""
    if kind in ("compressor", "lc_retriever"):
        items: list[Any] = lc_documents(raw)
    else:
        items = li_nodes(raw)
    if kind == "compressor":
        return items, lambda: compressor().acompress_documents(items, query)
    if kind == "postprocessor":
        return items, lambda: postprocessor().apostprocess_nodes(items, query_str=query)
    if kind == "lc_retriever":
        wrapper: Any = LCReformRetriever(
            retriever=ListRetriever(docs=items), config=BRIDGE_NO_LM, k=3, embedder=embedder()
        )
        return items, lambda: wrapper.ainvoke(query)
    wrapper = LIReformRetriever(
        ListNodeRetriever(items), config=BRIDGE_NO_LM, k=3, embedder=embedder()
    )
    return items, lambda: wrapper.aretrieve(query)


@fuzz(30)
@given(
    kind=st.sampled_from(["compressor", "postprocessor", "lc_retriever", "li_retriever"]),
    query=queries,
    raw=raw_documents(max_size=4),
)
def test_async_entry_points_keep_the_same_promises(kind, query, raw):
    inputs, run = _async_call(kind, query, raw)
    before = copy.deepcopy(inputs)
    out, err = attempt(lambda: asyncio.run(run()))
    assert_unchanged(inputs, before)
    if err is not None:
        assert_blank_query_only(err, query)
        return
    if kind == "compressor":
        check_refined_docs(out, inputs, is_chain=is_evidence_chain_document, key=lc_key)
    elif kind == "postprocessor":
        check_refined_docs(out, inputs, is_chain=is_evidence_chain_node, key=li_key)
    else:
        check_reformed(out, inputs, 3, key=lc_key if kind == "lc_retriever" else li_key)


# ================================================================ regressions (fixed)


def _old_normalize_entity(name: str) -> str:
    """``graph.normalize_entity`` before the fix (a regex; quadratic on long runs)."""
    edge = re.compile(r"^[\s\"'`“”‘’.,;:!?()\[\]{}]+|[\s\"'`“”‘’.,;:!?()\[\]{}]+$")
    return edge.sub("", " ".join(unicodedata.normalize("NFKC", name).split())).casefold()


@fuzz(60)
@given(name=st.one_of(hostile_text(), st.text(" .,;:!?()[]{}\"'`“”‘’a\n\u00a0\u200b", max_size=30)))
def test_normalize_entity_strips_what_the_old_regex_stripped(name):
    # Since then Latin accents are folded first ("Aschenbrödel" ~ "Aschenbrodel").
    folded = text_entities._fold_latin_accents(unicodedata.normalize("NFKC", name))
    assert normalize_entity(name) == _old_normalize_entity(folded)


@fuzz(60)
@given(
    title=st.one_of(
        title_value.filter(lambda t: isinstance(t, str)), st.text(" ()a,\n\t", max_size=20)
    )
)
def test_title_qualifier_is_cut_as_the_old_regex_cut_it(title):
    old = re.compile(r"\s*\([^)]*\)\s*$").sub("", title)
    assert links._without_qualifier(title) == old


def test_long_runs_of_punctuation_or_spaces_cost_linear_time():
    """``". " * 16000`` took 19 s in ``normalize_entity`` (it normalizes whole passage texts
    and questions in ``links``), and 16,000 spaces in a title 1.4 s in ``passage_topic``."""
    started = time.perf_counter()
    assert normalize_entity("a" + ". " * 200_000 + "b") == "a" + ". " * 199_999 + ". b"
    assert normalize_entity(". " * 200_000) == ""
    title = "Oslo" + " " * 200_000 + "(" * 200_000 + "x)"
    assert links.passage_topic(Passage("p", "x", title), []) == "oslo"
    passages = [
        Passage(
            "p1",
            "Jane Roe" + ". " * 50_000 + "was born in Oslo.",
            "Jane Roe" + " " * 50_000,
            metadata={"triples": [["Jane Roe", "born in", "Oslo"]]},
        ),
        Passage(
            "p2",
            "Oslo is in Norway.",
            "(" * 50_000 + "Oslo)",
            metadata={"triples": [["Oslo", "capital of", "Norway"]]},
        ),
    ]
    result = mine_with(miner_for(), "Where was Jane Roe born?" + " ." * 50_000, passages, **LOOSE)
    assert result.chains and len(result.kept) == 2
    assert time.perf_counter() - started < 10.0  # quadratic was minutes; linear is well under 1 s


def test_a_huge_beta_saturates_the_path_score_instead_of_overflowing():
    """``beta=1e200`` is a valid config, and two boosted triples made ``beta ** 2`` raise a
    bare ``OverflowError`` from ``search.activated_score``."""
    tuning = MinerTuning(beta=1e200)
    q = np.ones(4, dtype=np.float32) / 2
    assert math.isfinite(activated_score(2, np.stack([q, q]).sum(axis=0), 2, q, tuning))
    passages = [
        Passage(pid, text, title, metadata={"triples": triples})
        for pid, title, text, triples in CORPUS
    ]
    result = miner_for().tuned(beta=1e300).mine(QUERY, passages, tau_edge=0.0, tau_boost=0.0)
    assert result.chains and all(math.isfinite(c.search_score) for c in result.chains)
    scores = [c.search_score for c in result.chains]
    assert scores == sorted(scores, reverse=True)


def test_a_missing_spacy_is_a_missing_dependency_error(monkeypatch):
    """``query_entities="spacy"`` without spaCy raised a bare ``ImportError``."""
    monkeypatch.setattr(entities.importlib.util, "find_spec", lambda name, *a, **k: None)
    extractor = entities.QueryEntityExtractor("spacy")
    with pytest.raises(MissingDependencyError, match="pip install"):
        extractor("Who directed Film X?", ["film x"])
    with pytest.raises(ConfigError):
        entities.QueryEntityExtractor("llm")


# ================================================================ found by fuzzing, fixed


# Refining an already refined list used to mine the old chain document as a retrieved
# passage (it took the rank-1 top-N slot) and add a second chain document.
@pytest.mark.parametrize("use_llama", [False, True], ids=["langchain", "llama_index"])
def test_refining_twice_keeps_one_chain_document(use_llama):
    raw = fixture_documents(CORPUS)
    config = {**ADAPTER_LOOSE, "chain_format": "linking"}  # a chain document (default: none)
    if use_llama:
        post = NeocorRAGPostprocessor(embedder=embedder(), decoding="none", miner_config=config)
        once = post.postprocess_nodes(li_nodes(raw), query_str=QUERY)
        twice = post.postprocess_nodes(once, query_str=QUERY)
        is_chain: Callable[[Any], bool] = is_evidence_chain_node
    else:
        comp = NeocorRAGCompressor(embedder=embedder(), decoding="none", miner_config=config)
        once = list(comp.compress_documents(lc_documents(raw), QUERY))
        twice = list(comp.compress_documents(once, QUERY))
        is_chain = is_evidence_chain_document
    assert sum(map(is_chain, once)) == 1
    assert sum(map(is_chain, twice)) == 1
