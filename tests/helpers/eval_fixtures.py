"""The small QA fixture of the ``neocorrag eval`` tests (a MuSiQue-format file and its
OpenIE triples), run settings over it, and a test plug-in method.

Shared by the product's eval tests (``tests/unit/test_eval_*.py``) and the lab's
(``tests/lab``). ``first-two`` is registered at run time (:func:`register_methods`), as a
package outside neocorrag would add a method: the product's runner tests use it where
they need a method with no miner behind it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import bag_of_words_embedder

from neocorrag_core.eval import BuildContext, MethodInput, MethodOutput, MethodSpec
from neocorrag_core.eval.registry import register_methods
from neocorrag_core.eval.runner import EvalSettings, run_evaluation
from neocorrag_core.models import resolve_embedder

FACTS = [
    (
        "Van Hook Township",
        "Van Hook Township is in Mountrail County.",
        [["Van Hook Township", "located in", "Mountrail County"]],
    ),
    (
        "Mountrail County",
        "Mountrail County's capital is Stanley.",
        [["Mountrail County", "capital", "Stanley"]],
    ),
    ("Paris", "Paris is the capital of France.", [["Paris", "capital of", "France"]]),
    ("Berlin", "Berlin is the capital of Germany.", [["Berlin", "capital of", "Germany"]]),
    (
        "Lake Sakakawea",
        "Lake Sakakawea borders Mountrail County.",
        [["Lake Sakakawea", "borders", "Mountrail County"]],
    ),
    ("Stanley", "Stanley has a population of 2321.", [["Stanley", "population", "2321"]]),
]
QUESTIONS = [
    ("q1", "What is the capital of the county where Van Hook Township is located?", "Stanley"),
    ("q2", "Which county borders Lake Sakakawea?", "Mountrail County"),
    ("q3", "What is the population of the capital of Mountrail County?", "2321"),
]
# The linking chain block (the default has none) so that records carry a block.
MINER = {
    "tau_edge": 0.1,
    "tau_boost": 0.1,
    "beam_width": 2,
    "num_candidates": 8,
    "chain_format": "linking",
}


class FirstTwo:
    """A plug-in method: the first two passages by retrieval rank."""

    name = "first-two"

    def refine(self, call: MethodInput) -> MethodOutput:
        """Keep the best-ranked two."""
        return MethodOutput(list(call.passages[:2]))


def build_first_two(name: str, context: BuildContext) -> FirstTwo:
    """Factory of ``first-two``."""
    return FirstTwo()


FIRST_TWO = MethodSpec(
    "first-two", "the first two passages (a test plug-in)", "eval_fixtures:build_first_two"
)
register_methods([FIRST_TWO])


def write_fixture(folder: Path) -> tuple[Path, Path]:
    """A MuSiQue-format QA file and a HippoRAG OpenIE file for its passages."""
    gold = {"q1": {0, 1}, "q2": {4}, "q3": {1, 5}}
    rows = [
        {
            "id": qid,
            "question": question,
            "answer": answer,
            "paragraphs": [
                {"idx": i, "title": t, "paragraph_text": text, "is_supporting": i in gold[qid]}
                for i, (t, text, _) in enumerate(FACTS)
            ],
        }
        for qid, question, answer in QUESTIONS
    ]
    docs = [{"title": t, "text": text, "extracted_triples": tr} for t, text, tr in FACTS]
    qa, openie = folder / "qa.json", folder / "openie.json"
    qa.write_text(json.dumps(rows))
    openie.write_text(json.dumps({"docs": docs}))
    return qa, openie


def settings_for(
    tmp_path: Path, methods: tuple[str, ...], miner: dict[str, Any] | None = None, **extra: Any
) -> EvalSettings:
    """Settings over the fixture in ``tmp_path`` (triples from its OpenIE file, a short
    answer, few resamples, the :data:`MINER` settings updated by ``miner``)."""
    qa, openie = write_fixture(tmp_path)
    return EvalSettings(
        data=str(qa),
        out=str(tmp_path / "out"),
        methods=methods,
        triples=str(openie),
        max_new_tokens=3,
        bootstrap=50,
        miner_overrides={**MINER, **(miner or {})},
        **extra,
    )


def run(settings: EvalSettings, tiny_lm: Any, **kwargs: Any) -> dict[str, Any]:
    """Run with the bag-of-words embedder and the tiny LM as decoding LM and reader."""
    return run_evaluation(
        settings,
        embedder=resolve_embedder(bag_of_words_embedder()),
        lm=tiny_lm,
        reader_lm=tiny_lm,
        show_progress=False,
        **kwargs,
    )


def run_without_reader(settings: EvalSettings, **kwargs: Any) -> dict[str, Any]:
    """A ``--reader none`` run: methods that do not decode need no LM at all."""
    return run_evaluation(
        settings,
        embedder=resolve_embedder(bag_of_words_embedder()),
        show_progress=False,
        **kwargs,
    )
