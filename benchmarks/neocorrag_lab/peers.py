"""Peer baselines: LangChain's own document filters, on the benchmark's local models.

Imported only when an ``lc-*`` method is built (the lab's ``peers`` extra:
``pip install -e "benchmarks[peers]"``); the methods are declared in
:mod:`neocorrag_lab.methods`, so neither listing them nor the product ever imports
LangChain here.

* ``lc-embeddings-filter``: ``EmbeddingsFilter`` with the benchmark's embedder (at
  ``--embeddings-threshold``; ``-0.3`` / ``-0.4`` / ``-0.6`` at fixed thresholds, the
  points of the recall/noise plot).
* ``lc-llm-filter``: ``LLMChainFilter.from_llm`` with the local LM wrapped as a LangChain
  ``LLM`` (chat template applied, greedy). Its ``BooleanOutputParser`` raises on an
  answer that holds neither YES nor NO; LangChain would fail the whole call, we drop
  that one document and count it (``info["parse_errors"]``).
* ``lc-llm-filter-logits``: the same prompt, but the decision is whether the LM's
  next-token logit for "YES" beats "NO" (one forward pass per document): a fairer
  reading of a small LM that rarely writes a clean YES.
* ``lc-multiquery-ef``: what a LangChain user tries for multi-hop retrieval instead of
  EviReform -> refiner: ``MultiQueryRetriever`` (the local LM writes 3 versions of the
  question; the question itself included) over the run's search at k, then
  ``EmbeddingsFilter`` (``--embeddings-threshold``, at most k documents, best first).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate, input_ids_tensor
from neocorrag_core.models import LanguageModel, TextEmbedder
from neocorrag_core.rendering import render_passage
from neocorrag_core.types import Passage

try:
    from langchain_classic.retrievers.document_compressors import (
        EmbeddingsFilter,
        LLMChainFilter,
    )
    from langchain_classic.retrievers.document_compressors.chain_filter_prompt import (
        prompt_template as LLM_FILTER_PROMPT,
    )
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models.llms import LLM
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the LangChain baselines need langchain-classic and langchain-community: "
        'pip install -e "benchmarks[peers]"'
    ) from exc


@dataclass
class TokenCounter:
    """Prompt and generated tokens of every LM call a baseline makes."""

    prompt: int = 0
    generated: int = 0


class LocalChatLLM(LLM):
    """A :class:`LanguageModel` as a LangChain LLM: chat template, greedy, counted tokens."""

    lm: Any
    counter: Any
    max_new_tokens: int = 8

    @property
    def _llm_type(self) -> str:
        return "neocorrag-local"

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> str:
        lm: LanguageModel = self.lm
        with lm.lock:
            ids = chat_prompt_ids(lm, prompt)
            new = greedy_generate(lm, ids, self.max_new_tokens)
            self.counter.prompt += len(ids)
            self.counter.generated += len(new)
            text = lm.tokenizer.decode(new, skip_special_tokens=True)
        for marker in stop or ():
            text = text.split(marker)[0]
        return text


class LangChainEmbeddings(Embeddings):
    """Our :class:`TextEmbedder` behind LangChain's ``Embeddings`` interface."""

    def __init__(self, embedder: TextEmbedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        return self.embedder.embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query."""
        return self.embedder.embed([text])[0].tolist()


def to_documents(passages: Sequence[Passage]) -> list[Document]:
    """Passages as LangChain documents (``title: text``), keeping the id in metadata."""
    return [Document(page_content=render_passage(p), metadata={"id": p.id}) for p in passages]


def _kept(passages: Sequence[Passage], documents: Sequence[Document]) -> list[Passage]:
    ids = {d.metadata["id"] for d in documents}
    return [p for p in passages if p.id in ids]


class EmbeddingsFilterMethod:
    """LangChain ``EmbeddingsFilter`` (cosine of query and document >= threshold)."""

    name = "lc-embeddings-filter"

    def __init__(
        self, embedder: TextEmbedder, threshold: float, name: str = "lc-embeddings-filter"
    ) -> None:
        self.name = name
        self.threshold = threshold
        self.filter = EmbeddingsFilter(
            embeddings=LangChainEmbeddings(embedder), similarity_threshold=threshold
        )

    def refine(self, call: MethodInput) -> MethodOutput:
        """Keep the documents whose embedding is similar enough to the question."""
        question, passages = call.question, call.passages
        started = time.perf_counter()
        kept = self.filter.compress_documents(to_documents(passages), question)
        seconds = time.perf_counter() - started
        return MethodOutput(
            passages=_kept(passages, kept),
            timings={"filter": seconds},
            info={"threshold": self.threshold},
        )


class LLMChainFilterMethod:
    """LangChain ``LLMChainFilter`` with the local LM; unparseable answers drop the document."""

    name = "lc-llm-filter"

    def __init__(self, lm: LanguageModel) -> None:
        self.counter = TokenCounter()
        self.filter = LLMChainFilter.from_llm(LocalChatLLM(lm=lm, counter=self.counter))

    def refine(self, call: MethodInput) -> MethodOutput:
        """Ask the LM YES/NO per document, as LangChain does."""
        question, passages = call.question, call.passages
        self.counter.prompt = self.counter.generated = 0
        started = time.perf_counter()
        kept: list[Document] = []
        parse_errors = 0
        for document in to_documents(passages):
            try:
                kept.extend(self.filter.compress_documents([document], question))
            except ValueError:  # BooleanOutputParser: neither YES nor NO in the answer
                parse_errors += 1
        return MethodOutput(
            passages=_kept(passages, kept),
            prompt_tokens=self.counter.prompt,
            generated_tokens=self.counter.generated,
            timings={"filter": time.perf_counter() - started},
            info={"parse_errors": parse_errors},
        )


def _first_token_ids(lm: LanguageModel, words: Sequence[str]) -> list[int]:
    ids = {lm.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in words}
    return sorted(ids)


class LogitsYesNoFilterMethod:
    """LLMChainFilter's prompt, decided by max logit over YES-like vs NO-like first tokens."""

    name = "lc-llm-filter-logits"

    def __init__(self, lm: LanguageModel) -> None:
        self.lm = lm
        self.yes = _first_token_ids(lm, ["YES", "Yes", " YES", " Yes"])
        self.no = _first_token_ids(lm, ["NO", "No", " NO", " No"])

    def refine(self, call: MethodInput) -> MethodOutput:
        """One forward pass per document; keep it when YES outscores NO."""
        question, passages = call.question, call.passages
        import torch

        started = time.perf_counter()
        kept: list[Passage] = []
        p_yes: list[float] = []
        prompt_tokens = 0
        for passage, document in zip(passages, to_documents(passages), strict=True):
            text = LLM_FILTER_PROMPT.format(question=question, context=document.page_content)
            with self.lm.lock:
                ids = chat_prompt_ids(self.lm, text)
                with torch.inference_mode():
                    logits = self.lm.model(input_ids_tensor(self.lm, [ids])).logits[0, -1].float()
            prompt_tokens += len(ids)
            yes, no = float(logits[self.yes].max()), float(logits[self.no].max())
            # P(YES | YES or NO) from the two best logits: how close each call came to YES.
            p_yes.append(round(1.0 / (1.0 + math.exp(no - yes)), 4))
            if yes > no:
                kept.append(passage)
        return MethodOutput(
            passages=kept,
            prompt_tokens=prompt_tokens,
            timings={"filter": time.perf_counter() - started},
            info={"p_yes": p_yes},
        )


class _SearchRetriever(BaseRetriever):
    """The run's ``search(query, k)`` as a LangChain retriever (documents keep the id)."""

    search: Any
    k: int = 5

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=render_passage(p), metadata={"id": p.id, "passage": p})
            for p in self.search(query, self.k)
        ]


class MultiQueryFilterMethod:
    """LangChain ``MultiQueryRetriever`` with the local LM, then ``EmbeddingsFilter``."""

    name = "lc-multiquery-ef"

    def __init__(self, lm: LanguageModel, embedder: TextEmbedder, threshold: float) -> None:
        self.counter = TokenCounter()
        self.llm = LocalChatLLM(lm=lm, counter=self.counter, max_new_tokens=96)
        self.embeddings = LangChainEmbeddings(embedder)
        self.threshold = threshold

    def refine(self, call: MethodInput) -> MethodOutput:
        """Search with the question and the LM's versions of it; keep the k most similar."""
        k = call.k or len(call.passages) or 5
        self.counter.prompt = self.counter.generated = 0
        started = time.perf_counter()
        retriever = MultiQueryRetriever.from_llm(
            retriever=_SearchRetriever(search=call.search, k=k),
            llm=self.llm,
            include_original=True,
        )
        pooled = retriever.invoke(call.question)
        searched = time.perf_counter()
        cut = EmbeddingsFilter(embeddings=self.embeddings, similarity_threshold=self.threshold, k=k)
        kept = cut.compress_documents(pooled, call.question)
        by_id = {p.id: p for p in [*call.passages, *_passages_of(pooled)]}
        return MethodOutput(
            passages=[by_id[d.metadata["id"]] for d in kept],
            prompt_tokens=self.counter.prompt,
            generated_tokens=self.counter.generated,
            timings={"multi_query": searched - started, "filter": time.perf_counter() - searched},
            info={"pooled": len(pooled), "threshold": self.threshold},
        )


def _passages_of(documents: Sequence[Document]) -> list[Passage]:
    """The passages :class:`_SearchRetriever` put in the documents' metadata."""
    return [d.metadata["passage"] for d in documents if "passage" in d.metadata]


def build(name: str, context: BuildContext) -> Any:
    """The baseline called ``name``, on the context miner's embedder and LM."""
    miner = context.miner
    if name == "lc-embeddings-filter":
        return EmbeddingsFilterMethod(miner.embedder, context.embeddings_threshold)
    if name.startswith("lc-embeddings-filter-"):
        threshold = float(name.removeprefix("lc-embeddings-filter-"))
        return EmbeddingsFilterMethod(miner.embedder, threshold, name)
    if name == "lc-llm-filter":
        return LLMChainFilterMethod(miner.lm)
    if name == "lc-llm-filter-logits":
        return LogitsYesNoFilterMethod(miner.lm)
    if name == "lc-multiquery-ef":
        return MultiQueryFilterMethod(miner.lm, miner.embedder, context.embeddings_threshold)
    raise ValueError(f"not a LangChain baseline: {name!r}")


__all__ = [
    "EmbeddingsFilterMethod",
    "LLMChainFilterMethod",
    "LangChainEmbeddings",
    "LocalChatLLM",
    "LogitsYesNoFilterMethod",
    "MultiQueryFilterMethod",
    "build",
]
