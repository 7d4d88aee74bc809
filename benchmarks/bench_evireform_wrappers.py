"""EviReform through the framework wrappers, as a user runs it: Chain@k and Recall@k.

Every question of a QA file (one split of it) searches one pooled corpus, the union of all
its questions' passages, held in a LangChain ``InMemoryVectorStore`` and a LlamaIndex
``VectorStoreIndex`` (the bundled MiniLM embeds both). Per framework, three retrievers run
over the same store: the plain one (single-shot top-k), the EviReform wrapper with its
default settings, and the wrapper asking the question again (``residual_queries="repeat"``,
the paper's control). The passages' triples travel in the documents' metadata, as the
wrappers' default triple source expects. Each framework embeds as it does by default: the
LangChain store the document text, the LlamaIndex index the text with its ``title``
metadata (so single-shot differs a little between the two, and from ``neocorrag eval``,
which embeds ``title: text``).

    python benchmarks/bench_evireform_wrappers.py \\
        --data ../shared/data/2wikimultihopqa/migres_2wiki_dev_200.jsonl --triples spacy \\
        --split report --out runs/wrappers-2wiki

Writes ``<out>/per_question.jsonl`` and ``<out>/summary.md`` (also printed). Extracted
spaCy triples are cached in ``<out>/triples.sqlite``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from neocorrag_core.errors import NeocorragError
from neocorrag_core.eval import metrics as M
from neocorrag_core.eval.datasets import load_qa
from neocorrag_core.eval.retrieval import pooled_corpus
from neocorrag_core.eval.runner import resolve_triple_source
from neocorrag_core.eval.splits import in_split
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab, when not installed
from neocorrag_lab.cli_args import at_least_one

REPEAT = {"residual_queries": "repeat"}


def _metadata(passage: Passage, triples: Sequence[Any]) -> dict[str, Any]:
    return {"title": passage.title, "triples": [[t.subject, t.relation, t.object] for t in triples]}


def langchain_retrievers(
    passages: Sequence[Passage], triples: Sequence[Sequence[Any]], k: int
) -> dict[str, Callable[[str], list[str]]]:
    """Plain, EviReform and repeat retrievers over one ``InMemoryVectorStore``."""
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from neocorrag_integrations.langchain import EvidenceReformulationRetriever, NeocorRAGEmbeddings

    embeddings = NeocorRAGEmbeddings()
    docs = [
        Document(id=p.id, page_content=p.text, metadata=_metadata(p, t))
        for p, t in zip(passages, triples, strict=True)
    ]
    store = InMemoryVectorStore.from_documents(docs, embeddings)
    base = store.as_retriever(search_kwargs={"k": k})
    evireform = EvidenceReformulationRetriever(retriever=base, k=k, embedder=embeddings)
    repeat = EvidenceReformulationRetriever(retriever=base, k=k, config=REPEAT, embedder=embeddings)

    def ids(retriever: Any) -> Callable[[str], list[str]]:
        return lambda question: [str(d.id) for d in retriever.invoke(question)]

    return {"single-shot": ids(base), "evireform": ids(evireform), "repeat": ids(repeat)}


def llama_index_retrievers(
    passages: Sequence[Passage], triples: Sequence[Sequence[Any]], k: int
) -> dict[str, Callable[[str], list[str]]]:
    """Plain, EviReform and repeat retrievers over one ``VectorStoreIndex``."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from neocorrag_integrations.llama_index import (
        EvidenceReformulationRetriever,
        NeocorRAGEmbedding,
    )

    embedding = NeocorRAGEmbedding()
    nodes = [
        TextNode(id_=p.id, text=p.text, metadata=_metadata(p, t))
        for p, t in zip(passages, triples, strict=True)
    ]
    for node in nodes:  # LlamaIndex embeds "title: ..." with the text by default; not triples
        node.excluded_embed_metadata_keys = ["triples"]
        node.excluded_llm_metadata_keys = ["triples"]
    index = VectorStoreIndex(nodes, embed_model=embedding)
    base = index.as_retriever(similarity_top_k=k)
    evireform = EvidenceReformulationRetriever(base, k=k, embedder=embedding)
    repeat = EvidenceReformulationRetriever(base, k=k, config=REPEAT, embedder=embedding)

    def ids(retriever: Any) -> Callable[[str], list[str]]:
        return lambda question: [n.node.node_id for n in retriever.retrieve(question)]

    return {"single-shot": ids(base), "evireform": ids(evireform), "repeat": ids(repeat)}


def summary_table(rows: list[dict[str, Any]], k: int) -> str:
    """Markdown: per framework and retriever, Recall@k, Chain@k and seconds per question."""
    lines = [
        f"| framework | retriever | questions | Recall@{k} | Chain@{k} | s / q |",
        "|---|---|---:|---:|---:|---:|",
    ]
    keys = dict.fromkeys((r["framework"], r["retriever"]) for r in rows)
    for framework, retriever in keys:
        mine = [r for r in rows if r["framework"] == framework and r["retriever"] == retriever]
        n = len(mine)
        recall = 100 * sum(r["recall"] for r in mine) / n
        chain = 100 * sum(r["chain"] for r in mine) / n
        seconds = sum(r["seconds"] for r in mine) / n
        lines.append(
            f"| {framework} | {retriever} | {n} | {recall:.1f} | {chain:.1f} | {seconds:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="QA file (HotpotQA, 2Wiki, MuSiQue)")
    parser.add_argument(
        "--triples", default="spacy", help="'spacy' or a HippoRAG OpenIE file (as neocorrag eval)"
    )
    parser.add_argument("--split", choices=("tune", "report"), default="report")
    parser.add_argument(
        "--limit", type=at_least_one, default=None, help="first N questions of the split"
    )
    parser.add_argument("--top-k", type=at_least_one, default=5)
    parser.add_argument(
        "--frameworks", nargs="+", default=["langchain", "llama-index"],
        choices=("langchain", "llama-index"),
    )  # fmt: skip
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    out = Path(args.out)
    try:
        examples, _ = load_qa(args.data)
    except (OSError, NeocorragError) as exc:  # the message names the file and the fix
        parser.error(str(exc))
    out.mkdir(parents=True, exist_ok=True)
    corpus = pooled_corpus(examples)  # every question's passages, as --pool corpus
    questions = in_split(examples, args.split)[: args.limit]
    source = resolve_triple_source(args.triples, str(out))
    triples = triples_per_passage(source, corpus)
    builders = {"langchain": langchain_retrievers, "llama-index": llama_index_retrievers}
    rows: list[dict[str, Any]] = []
    with (out / "per_question.jsonl").open("w", encoding="utf-8") as sink:
        for framework in args.frameworks:
            retrievers = builders[framework](corpus, triples, args.top_k)
            for example in questions:
                gold = sorted(example.gold_ids)
                for name, retrieve in retrievers.items():
                    started = time.perf_counter()
                    ids = retrieve(example.question)
                    row = {
                        "framework": framework,
                        "retriever": name,
                        "qid": example.id,
                        "ids": ids,
                        "recall": M.recall_at_k(ids, gold, args.top_k),
                        "chain": M.chain_at_k(ids, gold, args.top_k),
                        "seconds": time.perf_counter() - started,
                    }
                    rows.append(row)
                    sink.write(json.dumps(row) + "\n")
    table = summary_table(rows, args.top_k)
    header = (
        f"EviReform through the wrappers: `{args.data}`, split {args.split}, "
        f"{len(questions)} questions, pooled corpus of {len(corpus)} passages, "
        f"triples: {args.triples}, MiniLM top-{args.top_k}.\n\n"
    )
    (out / "summary.md").write_text(header + table + "\n", encoding="utf-8")
    print(header + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
