"""Benchmark harness behind ``neocorrag eval``: loaders, retrieval, methods, reader, metrics.

Modules, one job each: ``datasets`` (QA files -> :class:`QAExample`), ``retrieval``
(dense/BM25 top-k), ``protocol`` (the :class:`Method` contract: ``MethodInput`` in,
``MethodOutput`` out), ``registry`` (method names -> lazily imported factories, plus
plug-ins from the ``neocorrag.eval_methods`` entry points, e.g. LangChain's filters in
``neocorrag_integrations.bench``), ``refiners`` (no refinement, the miner variants, the
Table 2 ablations), ``evireform_methods`` (methods that search again), ``reader``
(short-answer generation), ``metrics``, ``runner`` (cached, resumable loop), ``report``
(report.md) and ``plots`` (PNGs, needs matplotlib).
"""

from neocorrag_core.eval.datasets import LoadReport, QAExample, load_corpus, load_qa
from neocorrag_core.eval.protocol import BuildContext, Method, MethodInput, MethodOutput
from neocorrag_core.eval.registry import MethodSpec, available_methods, build_methods
from neocorrag_core.eval.runner import DEFAULT_METHODS, EvalSettings, run_evaluation

__all__ = [
    "DEFAULT_METHODS",
    "BuildContext",
    "EvalSettings",
    "LoadReport",
    "Method",
    "MethodInput",
    "MethodOutput",
    "MethodSpec",
    "QAExample",
    "available_methods",
    "build_methods",
    "load_corpus",
    "load_qa",
    "run_evaluation",
]
