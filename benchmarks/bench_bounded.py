"""Oversized inputs: does every call finish in a small multiple of a normal one of the same k?
(issues 55 and 64)

Three parts, each against its own normal call, all in one process:

* **cold** -- the drop-in ``NeocorRAGCompressor()`` (bundled MiniLM, spaCy) on a fresh store
  per call: triples extracted and every text embedded in the call. Normal: the dense top-5 of
  a HotpotQA dev question.
* **warm** -- the same compressor over one persistent store that already holds what the
  inputs need (untimed calls fill it, as ``neocorrag index`` would: again while a work cap
  left extraction or embedding for a later call); the embedder's
  in-memory cache is emptied before every timed call, so only the store helps. Normal: the
  same top-5 over the warm store.
* **pipeline** -- ``EvidencePipeline`` (EviReform, then the refiner) over a dense search of
  the file's pooled passages, warm store. Normal: the same question; oversized: every
  document the search returns carries a megabyte title. A slow search (``--slow`` seconds
  per call) measures the wall time against one search: the residual searches of a round run
  concurrently, and ``search_timeout`` bounds them.

Reported per case: seconds, the ratio to its normal call, and the caps the notes name.

    python benchmarks/bench_bounded.py --out benchmarks/results/bounded.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MEGABYTE_TITLE = "Big Title " * 100_000


def documents(passages: list[Any], **extra: Any) -> list[Any]:
    from langchain_core.documents import Document

    return [
        Document(id=p.id, page_content=p.text, metadata={"title": p.title, **extra})
        for p in passages
    ]


def crowd(normal: list[Any], n: int) -> list[Any]:
    """``n`` documents after the top-5: its texts, each made new by a number."""
    from langchain_core.documents import Document

    return [
        *normal,
        *(
            Document(id=f"d{i}", page_content=f"{normal[i % 5].page_content} ({i})")
            for i in range(n)
        ),
    ]


def retitled(docs: list[Any]) -> list[Any]:
    from langchain_core.documents import Document

    return [
        Document(
            id=d.id,
            page_content=d.page_content,
            metadata={**d.metadata, "title": MEGABYTE_TITLE + d.metadata.get("title", "")},
        )
        for d in docs
    ]


def cases(normal: list[Any]) -> dict[str, list[Any]]:
    from langchain_core.documents import Document

    chain = [[f"Entity {i}", "related to", f"Entity {i + 1}"] for i in range(100_000)]
    commas = ", ".join(f"Name{i} Surname{i}" for i in range(2_500))  # ~35 KB, few spaces
    return {
        "1,000 triples in one document's metadata": [
            Document(id="big", page_content="A list.", metadata={"triples": chain[:1_000]}),
            *normal,
        ],
        "20,000 triples in one document's metadata": [
            Document(id="big", page_content="A list.", metadata={"triples": chain[:20_000]}),
            *normal,
        ],
        "100,000 triples in one document's metadata": [
            Document(id="big", page_content="A list.", metadata={"triples": chain}),
            *normal,
        ],
        "the top-5 + 2,000 documents": crowd(normal, 2_000),
        "the top-5 + 20,000 documents": crowd(normal, 20_000),
        "the top-5 with 1 MB titles": retitled(normal),
        "five raw 35 KB comma lists (spaCy)": [
            Document(id=f"c{i}", page_content=f"The members were {commas} ({i}).") for i in range(5)
        ],
        "a 1 MB document with no spaces (spaCy)": [
            Document(id="nospace", page_content="x" * 1_000_000),
            *normal[:4],
        ],
        "a 300 KB question (the top-5)": normal,
    }


def caps_of(out: list[Any]) -> list[str]:
    from neocorrag_integrations.metadata_keys import run_metadata

    return [n for n in run_metadata(out).get("neocorrag_notes", []) if "work cap" in n]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return time.perf_counter() - started, out


def compressor_part(examples: list[Any], retriever: Any, warm: bool) -> dict[str, Any]:
    """The cold or warm compressor cases."""
    from neocorrag_integrations.langchain import NeocorRAGCompressor

    def fresh() -> Any:
        os.environ["NEOCORRAG_TRIPLE_STORE"] = str(Path(tempfile.mkdtemp()) / "s.sqlite")
        compressor = NeocorRAGCompressor()
        compressor.warm_up()  # models load outside the timing
        compressor.miner.triple_source.extractor.nlp  # noqa: B018 - spaCy too
        return compressor

    shared = fresh() if warm else None

    def run(docs: list[Any], question: str) -> tuple[float, list[Any]]:
        compressor = shared or fresh()
        if warm:  # fills the store: again while a cap left work for a later call
            for _ in range(10):
                caps = caps_of(compressor.compress_documents(docs, question))
                if not any("later call" in c or "this call" in c for c in caps):
                    break
            compressor.miner.embedder.clear_cache()
        return timed(lambda: compressor.compress_documents(docs, question))

    normal_docs = [(ex.question, documents(retriever.retrieve(ex, 5))) for ex in examples]
    normal = statistics.median(run(docs, q)[0] for q, docs in normal_docs)
    part = "warm" if warm else "cold"
    print(f"{part}: normal call (median of {len(examples)}): {normal:.3f} s", file=sys.stderr)
    question, docs = normal_docs[0]
    out: dict[str, Any] = {"normal_s": normal, "cases": {}}
    for name, case_docs in cases(docs).items():
        q = question * (300_000 // len(question)) if "question" in name else question
        seconds, refined = run(case_docs, q)
        out["cases"][name] = {
            "seconds": seconds,
            "ratio": seconds / normal,
            "kept": len(refined),
            "caps": caps_of(refined),
        }
        print(f"{part}: {name}: {seconds:.2f} s = {seconds / normal:.1f}x", file=sys.stderr)
    return out


def pipeline_part(examples: list[Any], slow: float) -> dict[str, Any]:
    """The pipeline with ordinary and megabyte titles, and over a slow search."""
    from neocorrag_core import EvidenceChainMiner
    from neocorrag_core.eval.retrieval import Retriever
    from neocorrag_core.evireform import EvidenceReformulator, ReformulationConfig
    from neocorrag_core.models import resolve_embedder
    from neocorrag_core.pipeline import EvidencePipeline
    from neocorrag_core.triples import DefaultTripleSource

    embedder = resolve_embedder(None)
    pooled = list({p.id: p for e in examples for p in e.passages}.values())
    retriever = Retriever("dense", embedder=embedder, pool="corpus", corpus=pooled)
    store = str(Path(tempfile.mkdtemp()) / "p.sqlite")
    miner = EvidenceChainMiner(embedder=embedder, triple_source=DefaultTripleSource(store=store))
    pipeline = EvidencePipeline(miner)
    search = retriever.search_fn(examples[0])

    def titled(query: str, k: int) -> list[Any]:
        return [replace(p, title=MEGABYTE_TITLE + p.title) for p in search(query, k)]

    def run(question: str, fn: Callable[[str, int], list[Any]]) -> tuple[float, Any]:
        pipeline.retrieve(question, fn, 5)  # fills the store
        embedder.clear_cache()
        return timed(lambda: pipeline.retrieve(question, fn, 5))

    out: dict[str, Any] = {"cases": {}}
    normal, big = [], []
    for ex in examples:  # alternated question by question
        normal.append(run(ex.question, search)[0])
        seconds, result = run(ex.question, titled)
        big.append(seconds)
    out["normal_s"] = statistics.median(normal)
    notes = [n for n in (result.reformulation.notes if result.reformulation else [])]
    out["cases"]["1 MB titles on every document"] = {
        "seconds": statistics.median(big),
        "ratio": statistics.median(big) / out["normal_s"],
        "caps": [n for n in notes if "work cap" in n],
    }
    print(
        f"pipeline: normal {out['normal_s']:.3f} s, 1 MB titles {statistics.median(big):.3f} s",
        file=sys.stderr,
    )

    def sleepy(query: str, k: int) -> list[Any]:
        time.sleep(slow)
        return search(query, k)

    question = examples[0].question
    pipeline.retrieve(question, search, 5)
    seconds, result = timed(lambda: pipeline.retrieve(question, sleepy, 5))
    searches = len(result.reformulation.queries) if result.reformulation else 1
    out["slow_search"] = {
        "search_s": slow,
        "searches": searches,
        "seconds": seconds,
        "ratio_to_one_search": seconds / slow,
    }
    try:
        bounded = EvidencePipeline(
            miner,
            EvidenceReformulator(
                ReformulationConfig(search_timeout=slow / 2),
                models=miner.models,
                triple_source=miner.triple_source,
                vectors=miner.vectors,
            ),
        )
        seconds, result = timed(lambda: bounded.retrieve(question, sleepy, 5))
        out["slow_search"]["with search_timeout"] = {
            "search_timeout_s": slow / 2,
            "seconds": seconds,
            "ratio_to_one_search": seconds / slow,
            "notes": [n for n in result.reformulation.notes if "search" in n],
        }
    except TypeError:  # a version without search_timeout
        pass
    print(f"pipeline: slow search {json.dumps(out['slow_search'])}", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--normal-questions", type=int, default=5)
    parser.add_argument("--slow", type=float, default=1.0, help="seconds per slow search")
    parser.add_argument("--parts", nargs="+", default=["cold", "warm", "pipeline"])
    args = parser.parse_args()

    from neocorrag_core.eval.datasets import load_qa
    from neocorrag_core.eval.retrieval import Retriever
    from neocorrag_core.eval.splits import in_split
    from neocorrag_core.models import resolve_embedder

    all_examples, _ = load_qa(DATA / "hotpotqa" / "meve_hotpotqa_dev_first100.json")
    examples = in_split(all_examples, "report")[: args.normal_questions]
    retriever = Retriever("dense", embedder=resolve_embedder(None))
    results: dict[str, Any] = {}
    if "cold" in args.parts:
        results["cold"] = compressor_part(examples, retriever, warm=False)
    if "warm" in args.parts:
        results["warm"] = compressor_part(examples, retriever, warm=True)
    if "pipeline" in args.parts:
        results["pipeline"] = pipeline_part(examples, args.slow)
    text = json.dumps(results, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
