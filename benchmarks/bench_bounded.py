"""Oversized inputs to the drop-in compressor: does every call finish in a small multiple of a
normal one? (issue 55, "bounded work from the first stage")

The normal call: ``NeocorRAGCompressor()`` (bundled MiniLM, spaCy, a fresh store) on the
dense top-5 of a HotpotQA dev question, cold (triples extracted, every text embedded). Each
oversized input replaces or joins those documents; every call runs in the same process
against a fresh store, so none is helped by what another stored. Reported: seconds, the
ratio to the normal cold call, and the work caps the call's notes name.

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
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def documents(passages: list[Any], **extra: Any) -> list[Any]:
    from langchain_core.documents import Document

    return [
        Document(id=p.id, page_content=p.text, metadata={"title": p.title, **extra})
        for p in passages
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
        "2,000 documents": [
            Document(id=f"d{i}", page_content=f"{normal[i % 5].page_content} ({i})")
            for i in range(2_000)
        ],
        "five raw 35 KB comma lists (spaCy)": [
            Document(id=f"c{i}", page_content=f"The members were {commas} ({i}).") for i in range(5)
        ],
        "a 1 MB document with no spaces (spaCy)": [
            Document(id="nospace", page_content="x" * 1_000_000),
            *normal[:4],
        ],
        "a 300 KB question (normal documents)": normal,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--normal-questions", type=int, default=5)
    args = parser.parse_args()

    from neocorrag_core.eval.datasets import load_qa
    from neocorrag_core.eval.retrieval import Retriever
    from neocorrag_core.eval.splits import in_split
    from neocorrag_core.models import resolve_embedder
    from neocorrag_integrations.langchain import NeocorRAGCompressor

    examples, _ = load_qa(DATA / "hotpotqa" / "meve_hotpotqa_dev_first100.json")
    examples = in_split(examples, "report")[: args.normal_questions]
    retriever = Retriever("dense", embedder=resolve_embedder(None))

    def fresh() -> Any:
        os.environ["NEOCORRAG_TRIPLE_STORE"] = str(Path(tempfile.mkdtemp()) / "s.sqlite")
        compressor = NeocorRAGCompressor()
        compressor.warm_up()  # models load outside the timing
        compressor.miner.triple_source.extractor.nlp  # noqa: B018 - spaCy too
        return compressor

    normal_times = []
    normal_docs = []
    for ex in examples:
        docs = documents(retriever.retrieve(ex, 5))
        normal_docs.append((ex.question, docs))
        compressor = fresh()
        started = time.perf_counter()
        compressor.compress_documents(docs, ex.question)
        normal_times.append(time.perf_counter() - started)
    normal = statistics.median(normal_times)
    print(f"normal cold call (median of {len(examples)}): {normal:.3f} s", file=sys.stderr)
    question, docs = normal_docs[0]
    results: dict[str, Any] = {"normal_cold_s": normal, "cases": {}}
    for name, case_docs in cases(docs).items():
        q = question * (300_000 // len(question)) if "question" in name else question
        compressor = fresh()
        started = time.perf_counter()
        out = compressor.compress_documents(case_docs, q)
        seconds = time.perf_counter() - started
        from neocorrag_integrations.metadata_keys import run_metadata

        run = run_metadata(out)
        notes = [n for n in run.get("neocorrag_notes", []) if "work cap" in n]
        results["cases"][name] = {
            "seconds": seconds,
            "ratio": seconds / normal,
            "kept": len(out),
            "caps": notes,
        }
        print(f"{name}: {seconds:.2f} s = {seconds / normal:.1f}x normal; {notes}", file=sys.stderr)
    text = json.dumps(results, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
