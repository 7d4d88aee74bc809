"""The benchmark's method registry: lazy factories, plug-ins by entry point, one signature."""

from __future__ import annotations

import sys

import pytest
from conftest import bag_of_words_embedder

from neocorrag_core import EvidenceChainMiner, Passage
from neocorrag_core.eval import BuildContext, MethodInput, available_methods, build_methods
from neocorrag_core.eval.registry import BUILTIN_METHODS, MethodSpec, method_descriptions


def test_builtin_and_plugin_methods_are_listed_without_importing_them():
    for module in [m for m in sys.modules if m.startswith("neocorrag_integrations.bench.")]:
        del sys.modules[module]
    names = list(available_methods())
    assert names[: len(BUILTIN_METHODS)] == [s.name for s in BUILTIN_METHODS]
    # LangChain's filters come from neocorrag_integrations.bench through entry points
    assert {"lc-embeddings-filter", "lc-llm-filter", "lc-llm-filter-logits"} <= set(names)
    assert "neocorrag_integrations.bench.langchain_filters" not in sys.modules
    assert all(method_descriptions()[n] for n in names)


def test_every_method_is_built_with_one_signature_and_runs_on_method_input():
    passages = [
        Passage("p1", "Van Hook Township is in Mountrail County.", "Van Hook",
                metadata={"triples": [["Van Hook Township", "in", "Mountrail County"]]}),
        Passage("p2", "Stanley is the seat of Mountrail County.", "Stanley",
                metadata={"triples": [["Mountrail County", "seat", "Stanley"]]}),
    ]  # fmt: skip
    miner = EvidenceChainMiner(embedder=bag_of_words_embedder())
    context = BuildContext(miner, evireform_overrides={"selection": "embedding",
                                                       "residual_queries": "entities"})  # fmt: skip
    names = ["none", "neocorrag-none", "evireform", "evireform-rerank", "lc-embeddings-filter"]
    methods = build_methods(names, context)
    searched = []

    def search(query: str, k: int) -> list[Passage]:
        searched.append(query)
        return passages[:k]

    call = MethodInput("Where is the seat of the county of Van Hook Township?", passages, search, 2)
    for name, method in zip(names, methods, strict=True):
        assert method.name == name
        out = method.refine(call)
        assert out.passages and all(isinstance(p, Passage) for p in out.passages)
        assert out.lm_tokens == out.prompt_tokens + out.generated_tokens == 0  # no LM here
    assert searched  # the EviReform methods searched again through the call's search
    assert context.shared["evireform"][0] is methods[2].reformulator is methods[3].reformulator


def test_unknown_methods_and_missing_extras_are_named():
    miner = EvidenceChainMiner(embedder=bag_of_words_embedder())
    with pytest.raises(ValueError, match=r"unknown method.*nope"):
        build_methods(["nope"], BuildContext(miner))
    spec = MethodSpec("x", "a method", "neocorrag_missing_module:build", "'neocorrag[x]'")
    with pytest.raises(ImportError, match=r"method 'x' cannot be built.*neocorrag\[x\]"):
        spec.load_factory()


def test_the_plugin_example_in_the_docs_works():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "eval.md").read_text(encoding="utf-8")
    section = doc.split("## Methods are plug-ins", 1)[1]
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        exec(compile(block, "docs/eval.md", "exec"), namespace)
    spec = namespace["KEEP_FIRST_TWO"]
    assert isinstance(spec, MethodSpec) and spec.name == "keep-first-two"
    method = namespace["build"]("keep-first-two", None)
    passages = [Passage(f"p{i}", f"text {i}") for i in range(4)]
    out = method.refine(MethodInput("q", passages, lambda q, k: [], 4))
    assert [p.id for p in out.passages] == ["p0", "p1"]


def test_peer_operating_points_are_registered():
    from neocorrag_core.eval.registry import available_methods

    names = set(available_methods())
    assert {"top-2", "top-3", "top-4"} <= names
    assert {f"neocorrag-{m}" for m in ("recall", "balanced", "precise", "paper")} <= names
    assert {f"lc-embeddings-filter-{t}" for t in ("0.3", "0.4", "0.6")} <= names


def name_only_version(name: str) -> str:
    return f"{name} v1"


def reader_version(name: str, reader: str = "default") -> str:
    return f"{name} for {reader}"


def overrides_version(name: str, reader: str = "default", belief_overrides=None) -> str:
    return f"{name} for {reader} with {sorted(belief_overrides.items())}"


def test_version_functions_get_the_reader_only_when_they_take_it():
    module = __name__
    old = MethodSpec("a", "a method", f"{module}:build", version=f"{module}:name_only_version")
    new = MethodSpec("b", "a method", f"{module}:build", version=f"{module}:reader_version")
    assert old.current_version("qwen-1.5b") == old.current_version() == "a v1"
    assert new.current_version() == "b for default"
    assert new.current_version("qwen-1.5b") == "b for qwen-1.5b"
    assert MethodSpec("c", "a method", f"{module}:build").current_version("qwen-1.5b") == ""
    # --belief settings reach only the version functions that declare them.
    assert new.current_version("qwen-1.5b", {"min_searches": 2}) == "b for qwen-1.5b"
    full = MethodSpec("d", "a method", f"{module}:build", version=f"{module}:overrides_version")
    assert full.current_version() == "d for default with []"
    assert full.current_version("x", {"min_searches": 2}) == "d for x with [('min_searches', 2)]"


def test_miner_methods_are_versioned_by_output_version_and_changes(monkeypatch):
    from neocorrag_core.eval import refiners
    from neocorrag_core.eval.registry import method_versions

    names = ["none", "neocorrag-recall", "neocorrag-recall-full-chains"]
    versions = method_versions(names)
    assert "none" not in versions  # no miner behind it
    assert versions["neocorrag-recall"].startswith(refiners.MINER_OUTPUT_VERSION + " ")
    assert versions["neocorrag-recall"] != versions["neocorrag-recall-full-chains"]
    # A bumped output version (a changed default) reruns every miner method's records.
    monkeypatch.setattr(refiners, "MINER_OUTPUT_VERSION", "miner-test")
    bumped = method_versions(names)
    assert all(bumped[n] != versions[n] for n in versions)
