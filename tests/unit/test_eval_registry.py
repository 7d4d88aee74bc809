"""The benchmark's method registry: lazy factories, plug-ins by entry point or at run time,
one signature, the product's methods only in a user's install."""

from __future__ import annotations

import sys

import pytest
from conftest import bag_of_words_embedder

from neocorrag_core import EvidenceChainMiner, Passage
from neocorrag_core.eval import BuildContext, MethodInput, available_methods, build_methods
from neocorrag_core.eval.registry import (
    BUILTIN_METHODS,
    LAB_METHOD_NAMES,
    MethodSpec,
    method_descriptions,
)


def test_builtin_methods_come_first_and_are_listed_without_importing_them():
    import subprocess

    names = list(available_methods())
    assert names[: len(BUILTIN_METHODS)] == [s.name for s in BUILTIN_METHODS]
    assert all(method_descriptions()[n] for n in names)
    # Listing the methods imports none of their modules (a fresh process: nothing cached),
    # a plug-in's (the lab's, where it is installed) included: only its declarations.
    factories = (
        "neocorrag_core.eval.refiners",
        "neocorrag_core.eval.evireform_methods",
        "neocorrag_core.eval.belief_methods",
        "neocorrag_lab.",
        "langchain",
    )
    code = (
        "import sys; from neocorrag_core.eval import available_methods; available_methods(); "
        f"bad = sorted(m for m in sys.modules if m.startswith({factories!r}) "
        "and m != 'neocorrag_lab.methods'); print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_products_methods_are_what_a_user_compares():
    names = [spec.name for spec in BUILTIN_METHODS]
    assert names == [
        "none",
        "neocorrag-recall",
        "neocorrag-balanced",
        "neocorrag-precise",
        "neocorrag-paper",
        "evireform",
        "evireform-refined",
        "graph",
        "belief",
        "belief-composed",
    ]
    # No product method is also a lab method, and the plug-in list names the lab's only.
    assert not set(names) & LAB_METHOD_NAMES


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
    names = ["none", "neocorrag-recall", "neocorrag-paper", "evireform"]
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
    assert searched  # EviReform searched again through the call's search
    assert context.shared["evireform"][0] is methods[3].reformulator
    assert methods[1].memo is methods[2].memo  # the miner methods share one mining memo


def test_methods_registered_at_run_time_and_by_entry_point(monkeypatch):
    from neocorrag_core.eval import registry

    monkeypatch.setattr(registry, "_REGISTERED", {})
    mine = MethodSpec("mine", "a method", f"{__name__}:build")
    registry.register_methods([mine, mine])  # registering again is harmless
    assert available_methods()["mine"] is mine
    with pytest.raises(ValueError, match="one of neocorrag's own"):
        registry.register_methods([MethodSpec("none", "shadows none", f"{__name__}:build")])
    with pytest.raises(TypeError, match="MethodSpec"):
        registry.register_methods(["mine"])  # type: ignore[list-item]

    class Point:
        def __init__(self, name, value):
            self.name, self.value = name, value

        def load(self):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    pack = (
        MethodSpec("a", "one", f"{__name__}:build"),
        MethodSpec("b", "two", f"{__name__}:build"),
    )
    points = [
        Point("mine", mine),  # the same spec as registered: one method
        Point("pack", pack),  # a sequence of specs: a package registering all at once
        Point("wrong-name", MethodSpec("other", "x", f"{__name__}:build")),
        Point("broken", ImportError("no such module")),
        Point("none", MethodSpec("none", "shadows none", f"{__name__}:build")),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    names = list(available_methods())
    assert names[len(BUILTIN_METHODS) :] == ["mine", "a", "b"]
    assert available_methods()["none"] is BUILTIN_METHODS[0]


def build(name, context):
    """Factory of this module's test methods."""
    return None


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

    names = ["none", "neocorrag-recall", "neocorrag-paper"]
    versions = method_versions(names)
    assert "none" not in versions  # no miner behind it
    assert versions["neocorrag-recall"].startswith(refiners.MINER_OUTPUT_VERSION + " ")
    assert versions["neocorrag-recall"] != versions["neocorrag-paper"]
    assert (
        refiners.miner_version({"keep": "recall", "chain_format": "full"})
        != (versions["neocorrag-recall"])
    )
    # A bumped output version (a changed default) reruns every miner method's records.
    monkeypatch.setattr(refiners, "MINER_OUTPUT_VERSION", "miner-test")
    bumped = method_versions(names)
    assert all(bumped[n] != versions[n] for n in versions)
