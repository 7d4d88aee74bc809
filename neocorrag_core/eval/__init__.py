"""Benchmark harness behind ``neocorrag eval``: compare settings on your own QA file.

Your own pipeline: :func:`compare` (your questions, your ``search``, your chat model).

Modules, one job each: ``comparison`` (:func:`compare`), ``estimate`` (a run's
time before it starts), ``datasets`` (QA files -> :class:`QAExample`), ``retrieval``
(dense/BM25 top-k), ``protocol`` (the :class:`Method` contract: ``MethodInput`` in,
``MethodOutput`` out), ``registry`` (method names -> lazily imported factories, plus
plug-ins from the ``neocorrag.eval_methods`` entry points or :func:`register_methods`),
``refiners`` (no refinement and the keep dial), ``evireform_methods`` (EviReform),
``belief_methods`` (the evidence-state controller), ``reader`` (short-answer
generation), ``metrics``, ``splits`` (the tune/report halves), ``runner`` (cached,
resumable loop), ``settings`` (:class:`EvalSettings`, the run.json signature), ``records``
(the per-method cache files and run.json), ``components`` (models, retriever, methods,
reader), ``replay`` (``--contexts-from``), ``scoring`` (one question's record),
``summary`` (aggregates, comparisons, results.json), ``report`` (report.md) and
``plots`` (PNGs, needs matplotlib).

The ablations, paper variants and peer baselines are not here: they are the development
lab's (``benchmarks/neocorrag_lab`` in a checkout), which registers them as plug-ins.
"""

from neocorrag_core.eval.comparison import DEFAULT_COMPARISON, compare
from neocorrag_core.eval.datasets import LoadReport, QAExample, load_corpus, load_qa
from neocorrag_core.eval.protocol import BuildContext, Method, MethodInput, MethodOutput
from neocorrag_core.eval.registry import (
    MethodSpec,
    available_methods,
    build_methods,
    register_methods,
)
from neocorrag_core.eval.runner import DEFAULT_METHODS, EvalSettings, run_evaluation

__all__ = [
    "DEFAULT_COMPARISON",
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
    "compare",
    "load_corpus",
    "load_qa",
    "register_methods",
    "run_evaluation",
]
