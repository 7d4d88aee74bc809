"""Benchmark harness behind ``neocorrag eval``: loaders, retrieval, methods, reader, metrics.

Modules, one job each: ``datasets`` (QA files -> :class:`QAExample`), ``retrieval``
(dense/BM25 top-k), ``methods`` (what each compared method hands the reader),
``langchain_baselines`` (imported only when those methods run), ``reader``
(short-answer generation), ``metrics``, ``runner`` (cached, resumable loop),
``report`` (report.md) and ``plots`` (PNGs, needs matplotlib).
"""

from neocorrag_core.eval.datasets import LoadReport, QAExample, load_corpus, load_qa
from neocorrag_core.eval.methods import METHODS
from neocorrag_core.eval.runner import DEFAULT_METHODS, EvalSettings, run_evaluation

__all__ = [
    "DEFAULT_METHODS",
    "METHODS",
    "EvalSettings",
    "LoadReport",
    "QAExample",
    "load_corpus",
    "load_qa",
    "run_evaluation",
]
