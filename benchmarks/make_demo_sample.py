"""Rebuild ``neocorrag_core/data/demo_questions.json``, the sample ``neocorrag demo`` runs on.

Takes, in file order, the first MuSiQue questions (HippoRAG's 100-question train
subset in ../shared/data) whose gold paragraphs all land in the dense top-5 of
their own 20 paragraphs, so the demo shows refinement rather than retrieval
misses. Each question keeps its 20 paragraphs, and each paragraph the OpenIE
triples GPT-3.5 extracted for HippoRAG. The selection looks only at retrieval,
never at what neocorrag outputs.

    python benchmarks/make_demo_sample.py [--count 5]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from neocorrag_core.models import resolve_embedder
from neocorrag_core.rendering import render_passages
from neocorrag_core.triples import OpenIETripleSource
from neocorrag_core.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab, when not installed
from neocorrag_lab.cli_args import at_least_one

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "musique"
OUT = ROOT / "neocorrag_core" / "data" / "demo_questions.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=at_least_one, default=5)
    args = parser.parse_args()
    questions = json.loads((DATA / "hipporag_musique_train_100.json").read_text())
    openie = OpenIETripleSource.from_file(DATA / "hipporag_musique_train_openie_gpt35.json")
    embedder = resolve_embedder()
    sample = []
    for q in questions:
        paragraphs = q["paragraphs"]
        passages = [
            Passage(id=str(p["idx"]), text=p["paragraph_text"], title=p["title"])
            for p in paragraphs
        ]
        query_vec = embedder.embed([q["question"]])[0]
        doc_vecs = embedder.embed(render_passages(passages))
        top5 = set(np.argsort(-(doc_vecs @ query_vec), kind="stable")[:5].tolist())
        gold = {i for i, p in enumerate(paragraphs) if p["is_supporting"]}
        if not gold <= top5:
            continue
        triples = openie.triples_for(passages)
        sample.append(
            {
                "id": q["id"],
                "question": q["question"],
                "answer": q["answer"],
                "answer_aliases": q.get("answer_aliases", []),
                "paragraphs": [
                    {
                        "id": passage.id,
                        "title": passage.title,
                        "text": passage.text,
                        "is_supporting": paragraphs[i]["is_supporting"],
                        "triples": [[t.subject, t.relation, t.object] for t in triples[i]],
                    }
                    for i, passage in enumerate(passages)
                ],
            }
        )
        if len(sample) >= args.count:
            break
    payload = {
        "source": (
            "MuSiQue (Trivedi et al., 2022), CC BY 4.0, via the HippoRAG repository "
            "(OSU-NLP-Group/HippoRAG, legacy branch: data/musique_train.json); triples from "
            "HippoRAG's GPT-3.5 OpenIE output for the same corpus."
        ),
        "license": "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)",
        "selection": "first questions whose gold paragraphs all rank in the dense top-5",
        "questions": sample,
    }
    OUT.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(sample)} questions to {OUT}")


if __name__ == "__main__":
    main()
