"""The open corpus of the pipeline benchmark (issue 54): every passage of the given QA files,
pooled by passage id, as a JSON list of ``{"title", "text"}``.

    D=../shared/data
    python benchmarks/make_open_corpus.py open_corpus.json $D/musique/kag_musique_dev_100.json \
        $D/hotpotqa/meve_hotpotqa_dev_first100.json $D/2wikimultihopqa/migres_2wiki_dev_200.jsonl \
        $D/musique/hipporag_musique_train_100.json $D/hotpotqa/hipporag_hotpotqa_train_100.json

(the file of docs/pipeline.md's runs: 6,999 passages, ``sha256:93b4c6ccfcb897ef`` in their
``run.json``). Passages are kept in first-seen order, files in the order given (a folder:
its files in sorted path order), so the output is the same on every machine. Files that are
not QA files (a bare corpus, triples) are skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from neocorrag_core.eval.datasets import QAExample, load_qa
from neocorrag_core.eval.retrieval import pooled_corpus


def qa_files(sources: Sequence[Path]) -> list[Path]:
    """``sources`` with each folder replaced by its ``.json`` / ``.jsonl`` files, sorted."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files.extend(sorted(p for p in source.rglob("*") if p.suffix in (".json", ".jsonl")))
        else:
            files.append(source)
    return files


def pooled_passages(sources: Sequence[Path]) -> list[dict[str, str]]:
    """The unique passages of the QA files in ``sources``, first seen first (the eval's
    :func:`~neocorrag_core.eval.retrieval.pooled_corpus` over every file's questions)."""
    examples: list[QAExample] = []
    for path in qa_files(sources):
        try:
            examples.extend(load_qa(path)[0])
        except ValueError as error:
            print(f"skipped {path}: {error}")
    return [{"title": p.title, "text": p.text} for p in pooled_corpus(examples)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("sources", type=Path, nargs="+", help="QA files or folders of them")
    args = parser.parse_args(argv)
    passages = pooled_passages(args.sources)
    args.out.write_text(json.dumps(passages), encoding="utf-8")
    print(f"{len(passages)} passages -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
