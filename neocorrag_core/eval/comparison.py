"""Evaluate your own pipeline: your questions, your retrieval, your LLM, side by side.

:func:`compare` runs the benchmark harness over a user's own QA file (``question``,
``answers``, optional ``gold_ids`` / ``gold_titles``; JSON lines, JSON or CSV) with their
own ``search(query, k)`` as the retrieval and their own chat model as the reader, and
compares no refinement, the refiner's dial settings, EviReform and the full pipeline:
EM/F1 against the answers, Recall/Chain where gold passages are named, reader tokens,
seconds per stage, paired bootstrap intervals against no refinement, report.md,
report.html and plots in ``out``. The adapters' ``evaluate`` translate a LangChain or
LlamaIndex retriever and LLM and call it; ``neocorrag eval --data FILE --vector-store DIR
--collection NAME`` is the same from the command line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.types import Passage

DEFAULT_COMPARISON = (
    "none",
    "neocorrag-recall",
    "neocorrag-balanced",
    "neocorrag-precise",
    "evireform",
    "evireform-refined",
)
"""What :func:`compare` runs by default: no refinement (the baseline every interval is
against), the refiner at three dial settings, EviReform, and EviReform then the refiner."""


def compare(
    questions: str | Path | Sequence[Mapping[str, Any]],
    search: Callable[[str, int], Sequence[Passage]],
    *,
    out: str | Path,
    reader: Any = "default",
    methods: Sequence[str] = DEFAULT_COMPARISON,
    k: int = 5,
    embedder: Any = None,
    triple_source: Any = None,
    limit: int | None = None,
    search_name: str = "search",
    show_progress: bool = True,
    plots: bool = True,
) -> dict[str, Any]:
    """Compare the methods on your questions over your retrieval; returns results.json's data.

    Parameters
    ----------
    questions:
        A file (JSON lines, JSON list or CSV with columns ``question``, ``answers``, and
        optionally ``gold_ids`` / ``gold_titles``; several values in a CSV cell separated by
        ``|``), or the rows themselves (written to ``out/questions.jsonl``).
    search:
        ``search(query, k) -> passages``: your retrieval (the adapters translate a LangChain or
        LlamaIndex retriever). Gold ids are compared with the passages' ids.
    out:
        Folder for the results; a run stopped in any way resumes when called again.
    reader:
        Who answers: a :class:`~neocorrag_core.lm.chat.ChatModel` (your LLM, translated by the
        adapters' ``as_chat_model``), a bundled reader (``"default"``, ``"qwen-1.5b"``), or
        ``"none"`` (retrieval scores only).
    methods:
        ``neocorrag eval`` method names (default :data:`DEFAULT_COMPARISON`).
    k:
        Passages the retrieval hands over (and EviReform returns).
    embedder, triple_source:
        The engine's (default: the bundled MiniLM; the adapters' default triple source:
        metadata triples, else the triple store, else spaCy).
    limit:
        The first ``limit`` questions only (a first look).
    search_name:
        A name for ``search`` kept in the run's signature: a resumed run with another name
        is refused.

    Returns
    -------
    dict
        The run's results (``methods``: per-method means; ``comparisons``: paired intervals).

    Examples
    --------
    >>> results = compare("my_questions.jsonl", my_search, out="runs/mine",  # doctest: +SKIP
    ...                   reader=as_chat_model(llm))
    >>> results["methods"]["evireform-refined"]["f1"]  # doctest: +SKIP
    """
    from neocorrag_core.eval.reader import READER_PRESETS
    from neocorrag_core.eval.runner import run_evaluation
    from neocorrag_core.eval.settings import EvalSettings
    from neocorrag_core.lm.chat import ChatModel

    if not callable(search):
        raise ConfigError(
            f"compare: search must be callable as search(query, k), got {type(search).__name__}"
        )
    folder = Path(out)
    data = _questions_file(questions, folder)
    chat = isinstance(reader, ChatModel)
    if not chat and reader not in READER_PRESETS:
        raise ConfigError(
            f"compare: reader must be a ChatModel or one of {', '.join(READER_PRESETS)}, got "
            f"{reader!r} (translate a LangChain or LlamaIndex LLM with as_chat_model)"
        )
    name = f"chat:{getattr(reader, 'name', '') or type(reader).__name__}" if chat else str(reader)
    settings = EvalSettings(
        data=str(data),
        out=str(folder),
        methods=tuple(methods),
        limit=limit,
        top_k=k,
        reader=name,
        search=search_name,
        plots=plots,
    )
    if triple_source is None:
        from neocorrag_core.triples.default import DefaultTripleSource

        triple_source = DefaultTripleSource()
    return run_evaluation(
        settings,
        embedder=embedder,
        reader_lm=reader if chat else None,
        triple_source=triple_source,
        show_progress=show_progress,
        search=search,
    )


def _questions_file(questions: Any, folder: Path) -> Path:
    """The questions as a file the harness reads: the path itself, or the rows written to
    ``folder/questions.jsonl``."""
    if isinstance(questions, (str, Path)):
        path = Path(questions)
        if not path.is_file():
            raise ConfigError(f"compare: no questions file at {path}")
        return path
    if isinstance(questions, Mapping) or not isinstance(questions, Sequence):
        raise ConfigError(
            "compare: questions must be a file path or a list of {question, answers} dicts, "
            f"got {type(questions).__name__}"
        )
    bad = next((i for i, row in enumerate(questions) if not isinstance(row, Mapping)), None)
    if bad is not None:
        raise ConfigError(
            f"compare: questions[{bad}] is a {type(questions[bad]).__name__}, not a "
            "{question, answers} dict"
        )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "questions.jsonl"
    lines = [json.dumps(dict(row), ensure_ascii=False) for row in questions]
    text = "\n".join(lines) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


__all__ = ["DEFAULT_COMPARISON", "compare"]
