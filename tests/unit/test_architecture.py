"""The boundaries the README claims, checked on the imports themselves (AST, nothing run).

* ``neocorrag_core`` imports neither LangChain nor LlamaIndex, anywhere in its tree, not
  even lazily inside a function;
* neither package imports the development lab (``neocorrag_lab``, ``benchmarks/``), and
  ``neocorrag_core.belief`` does not import the benchmark harness (``neocorrag_core.eval``);
* the engine's stages a/b/c (``search``, ``decoding``, ``refine``) talk through plain data
  only: none imports another;
* ``neocorrag_core`` never duck-types a framework object either: no module reaches for a
  LangChain or LlamaIndex model's members (``invoke``, ``with_structured_output``,
  ``as_structured_llm``, ``embed_documents``, ``get_text_embedding_batch``,
  ``usage_metadata``, ``additional_kwargs``..., by attribute or by ``getattr`` /
  ``hasattr`` name) nor calls ``.complete(...)`` / ``.chat(...)``, nor the adapters' own
  embeddings objects (``text_embedder``); the core asks a ``ChatModel`` (``ask``) and an
  encode function (or a ``TextEmbedder`` / ``LazyEmbedder``), and the adapters translate;
* nor does ``neocorrag_core`` recognise a framework by name: no string in its code is a
  framework's name or module (``"langchain"``, ``"llama_index"``, ``"LangChain"``...), as a
  test of an object's class module or of ``sys.modules`` would need; docstrings and
  messages that name the adapters are longer strings and pass;
* no import cycle between the package's modules (function-level imports count too; only
  imports under ``if TYPE_CHECKING:`` are left out, since they never run);
* every module the README's "How it works" table names exists;
* the floors (issue 60): the shared text layer (``neocorrag_core.text``: entity keys,
  capitalised names, relation words) imports only the standard library and
  ``validation`` / ``errors``; it and ``neocorrag_core.triples`` import none of the three
  systems; the systems are layered ``chains`` < ``evireform`` < ``belief`` (each imports only
  those before it: no circle between two systems); ``neocorrag_core.types`` is plain data
  (imports neither ``rendering`` nor a system: rendering asks the types); nothing under
  ``benchmarks/`` imports the ``neocorrag`` command's internals (``neocorrag_core.cli``);
* the import paths the text layer and the plain types took names from still work.

Function-level imports count in every rule. The one exception, :data:`DEPRECATED_IMPORTS`,
is named, checked to stay inside functions, and goes when its deprecated members go.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

import neocorrag_core
import neocorrag_integrations

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("langchain", "langchain_core", "langchain_classic", "langchain_community",
              "llama_index")  # fmt: skip
LAB = "neocorrag_lab"
"""The development lab's package (``benchmarks/neocorrag_lab``): never imported by the product."""
STAGES = (
    "neocorrag_core.chains.path_search",
    "neocorrag_core.chains.decoding",
    "neocorrag_core.chains.keep",
)
SYSTEMS = ("neocorrag_core.chains", "neocorrag_core.evireform", "neocorrag_core.belief")
"""The three systems, in layering order: each may import only those before it (BeliefRAG
decides over EviReform's pipeline, EviReform hands NeocorRAG its passages), never one after
it, so no two systems import each other."""
TEXT_LAYER = "neocorrag_core.text"
"""The shared text layer, below the triples and the three systems."""
TEXT_LAYER_MAY_IMPORT = ("neocorrag_core.validation", "neocorrag_core.errors")
"""What of the package the text layer may import besides itself (and the standard library)."""
CLI = "neocorrag_core.cli"
CLI_ENTRY_POINT = "neocorrag_core.cli.main"
"""The ``neocorrag`` command itself (pyproject's ``[project.scripts]``): the one name of
``neocorrag_core.cli`` the lab may import (``python -m neocorrag_lab`` runs the command
with the lab's methods registered). Its argparse helpers are the command's internals."""
DEPRECATED_IMPORTS = frozenset({("neocorrag_core.types", "neocorrag_core.rendering")})
"""Imports that break a rule, allowed for one release only and only inside a function:
``MiningResult.chain_text`` and ``MiningResult.context()`` (deprecated for
``rendering.chain_text(result)`` / ``rendering.result_context(result)``) import rendering
when called. Remove the entry with those two members (a test fails once it is unused)."""


def package_dir(package: object) -> Path:
    return Path(package.__file__).parent  # type: ignore[attr-defined]


def modules() -> dict[str, Path]:
    """Every module of both packages (of the copy being tested: installed or checkout)."""
    found: dict[str, Path] = {}
    for package in (neocorrag_core, neocorrag_integrations):
        base = package_dir(package)
        for path in sorted(base.rglob("*.py")):
            parts = [package.__name__, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _walk_runtime(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node except the bodies of ``if TYPE_CHECKING:`` blocks, with whether it runs
    inside a function (or lambda) rather than when the module is imported."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other, in_function
                yield from _walk_runtime(other, in_function)
            continue
        yield child, in_function
        yield from _walk_runtime(child, in_function or isinstance(child, _FUNCTIONS))


def _names_imported_by(node: ast.AST, package: str) -> set[str]:
    """Absolute names one node imports (relative ones resolved against ``package``)."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        else:
            base = node.module or ""
        names.add(base)
        # "from pkg import sub" may import a submodule: record pkg.sub as well
        names.update(f"{base}.{alias.name}" for alias in node.names)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        names.add(node.args[0].value)
    return names


def scoped_imports(module: str, path: Path) -> tuple[set[str], set[str]]:
    """What ``module`` imports at run time: ``(on import, inside functions)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    on_import: set[str] = set()
    in_functions: set[str] = set()
    for node, in_function in _walk_runtime(tree):
        (in_functions if in_function else on_import).update(_names_imported_by(node, package))
    return on_import, in_functions


def imported_names(module: str, path: Path) -> set[str]:
    """Absolute names of everything ``module`` imports at run time (relative ones resolved)."""
    on_import, in_functions = scoped_imports(module, path)
    return on_import | in_functions


def internal_targets(name: str, imported: set[str], mods: Collection[str]) -> set[str]:
    """The package modules among the names ``name`` imports."""
    targets = set()
    for target in imported:
        # "a.b.c" imports a.b.c if it is a module, else the module a.b (c is a name in it)
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != name:
            targets.add(target)
    return targets


def internal_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (function-level imports included)."""
    mods = modules()
    return {
        name: internal_targets(name, imported_names(name, path), mods)
        for name, path in mods.items()
    }


def within(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or one of its submodules."""
    return module == package or module.startswith(package + ".")


def test_the_modules_are_found():
    mods = modules()
    assert "neocorrag_core.chains.miner" in mods
    assert "neocorrag_core.evireform.reformulator" in mods
    assert "neocorrag_integrations.langchain" in mods


def test_core_never_imports_a_framework():
    offenders = []
    for name, path in modules().items():
        if not name.startswith("neocorrag_core"):
            continue
        for imported in imported_names(name, path):
            if imported.split(".")[0] in FRAMEWORKS:
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_core_never_imports_the_integrations():
    graph = internal_graph()
    offenders = [
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name.startswith("neocorrag_core")
        for target in targets
        if target.startswith("neocorrag_integrations")
    ]
    assert offenders == []


FRAMEWORK_MEMBERS = frozenset(
    {
        # LangChain chat models and runnables
        "invoke", "ainvoke", "with_structured_output", "bind_tools", "usage_metadata",
        "additional_kwargs", "response_metadata", "page_content",
        # LangChain embeddings
        "embed_documents", "aembed_documents", "embed_query", "aembed_query",
        # LlamaIndex LLMs and embeddings
        "as_structured_llm", "acomplete", "achat", "stream_complete", "stream_chat",
        "is_function_calling_model", "get_text_embedding", "get_text_embedding_batch",
        "aget_text_embedding_batch", "get_query_embedding", "aget_query_embedding",
        "get_content",
        # the adapters' own embeddings objects (NeocorRAGEmbeddings, NeocorRAGEmbedding):
        # the adapters hand the core a LazyEmbedder over them
        "text_embedder",
    }
)  # fmt: skip
"""Members only a LangChain or LlamaIndex object (or an adapter's embeddings object) has: no
access to them in the core, by attribute or by a ``getattr`` / ``hasattr`` / ``setattr``
name."""
FRAMEWORK_CALLS = frozenset({"complete", "chat"})
"""Framework methods whose names are also plain words (a report's ``complete`` flag): no
call ``x.complete(...)`` / ``x.chat(...)`` in the core, nor a ``getattr`` of the name. Our
own protocol's method is ``ask`` and the local generator's ``generate``."""
_NAME_LOOKUPS = ("getattr", "hasattr", "setattr", "delattr")


def framework_member_uses(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every place ``source`` duck-types a framework object: an
    attribute in :data:`FRAMEWORK_MEMBERS`, a call of a method in :data:`FRAMEWORK_CALLS`,
    or either name looked up by string."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in FRAMEWORK_MEMBERS:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in FRAMEWORK_CALLS:
                found.append((node.lineno, f".{func.attr}(...)"))
            elif (
                isinstance(func, ast.Name)
                and func.id in _NAME_LOOKUPS
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in FRAMEWORK_MEMBERS | FRAMEWORK_CALLS
            ):
                found.append((node.lineno, f"{func.id}(..., {node.args[1].value!r})"))
    return sorted(found)


def test_core_never_duck_types_a_framework_object():
    offenders = [
        f"{name}:{line} uses {what}"
        for name, path in modules().items()
        if name.startswith("neocorrag_core")
        for line, what in framework_member_uses(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], (
        "the core takes a ChatModel (ask) and an encode function; translate framework "
        "objects in neocorrag_integrations (_langchain_models, _llama_index_models)"
    )


def test_the_duck_typing_check_finds_framework_members():
    source = """
def ask(llm, emb, report, chat_model):
    llm.invoke(messages)
    structured = llm.with_structured_output(schema)
    if hasattr(llm, "as_structured_llm"):
        pass
    encode = getattr(emb, "embed_documents", None)
    usage = answer.usage_metadata
    text = llm.complete(prompt).text
    done = report.complete  # a flag, not a call: allowed
    return chat_model.ask(messages, None), getattr(llm, "complete", None)
"""
    assert [what for _, what in framework_member_uses(source)] == [
        ".invoke",
        ".with_structured_output",
        "hasattr(..., 'as_structured_llm')",
        "getattr(..., 'embed_documents')",
        ".usage_metadata",
        ".complete(...)",
        "getattr(..., 'complete')",
    ]


FRAMEWORK_NAME = re.compile(r"(langchain\w*|llama_?index)(\.[\w.]*)?", re.IGNORECASE)
"""A string that is a framework's name or one of its modules (whole string): what code
recognising a framework by its class module (or by ``sys.modules``) compares with."""


def framework_name_uses(source: str) -> list[tuple[int, str]]:
    """``(line, string)`` for every string constant of ``source`` (f-string parts included)
    that is, whole, a framework's name or module name (:data:`FRAMEWORK_NAME`)."""
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and FRAMEWORK_NAME.fullmatch(node.value)
    )


def test_core_never_recognises_a_framework_by_name():
    offenders = [
        f"{name}:{line} names {value!r}"
        for name, path in modules().items()
        if name.startswith("neocorrag_core")
        for line, value in framework_name_uses(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], (
        "the core tells no framework apart: the adapters translate framework objects before "
        "calling it (neocorrag_integrations._translate, _models.framework_of)"
    )


def test_the_framework_name_check_finds_recognition():
    # The core's former framework_of and its refusal of framework embeddings.
    source = """
def framework_of(obj):
    \"\"\"``"LangChain"`` or ``"LlamaIndex"`` (a docstring naming them is fine).\"\"\"
    for cls in type(obj).__mro__:
        top = (getattr(cls, "__module__", None) or "").partition(".")[0]
        if top.startswith("langchain"):
            return "LangChain"
        if top == "llama_index":
            return "LlamaIndex"
    if "langchain_core.embeddings" in sys.modules:
        pass
    return None


def help(spec):
    return f"wrap it with neocorrag_integrations.langchain.as_embedder ({spec})"
"""
    assert [value for _, value in framework_name_uses(source)] == [
        "langchain",
        "LangChain",
        "llama_index",
        "LlamaIndex",
        "langchain_core.embeddings",
    ]
    old_resolve = """
def resolve_embedder(spec):
    provider = getattr(spec, "text_embedder", None)
    return spec.text_embedder()
"""
    assert [what for _, what in framework_member_uses(old_resolve)] == [
        "getattr(..., 'text_embedder')",
        ".text_embedder",
    ]


def test_the_product_never_imports_the_lab():
    offenders = [
        f"{name} imports {imported}"
        for name, path in modules().items()
        for imported in imported_names(name, path)
        if imported.split(".")[0] == LAB
    ]
    assert offenders == []


def test_the_lab_check_finds_a_lab_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from neocorrag_lab.fitting import fit_and_select\n")
    assert imported_names("neocorrag_core.m", module) >= {"neocorrag_lab.fitting"}


def test_belief_never_imports_the_benchmark_harness():
    graph = internal_graph()
    offenders = [
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name.startswith("neocorrag_core.belief")
        for target in targets
        if target == "neocorrag_core.eval" or target.startswith("neocorrag_core.eval.")
    ]
    assert offenders == []


def test_stages_a_b_c_do_not_import_each_other():
    graph = internal_graph()
    offenders = [
        f"{stage} imports {other}"
        for stage in STAGES
        for other in STAGES
        if other != stage and other in graph[stage]
    ]
    assert offenders == []


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            # A package's __init__ re-exporting its submodules is not a cycle with them.
            if target.startswith(node + "."):
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def without_deprecated(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` less the :data:`DEPRECATED_IMPORTS` edges (function-level, one release)."""
    return {name: {t for t in targets if (name, t) not in DEPRECATED_IMPORTS}
            for name, targets in graph.items()}  # fmt: skip


def test_no_import_cycles():
    cycle = find_cycle(without_deprecated(internal_graph()))
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert find_cycle({"p": {"p.x"}, "p.x": set()}) is None


def test_the_readme_layout_table_names_real_modules():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## How it works", 1)[1].split("\n## ", 1)[0]
    cited = set(
        re.findall(
            r"`((?:neocorrag_core|neocorrag_integrations)/[\w/]*\.py|"
            r"(?:neocorrag_core|neocorrag_integrations)/[\w/]+/)`",
            table,
        )
    )
    cited |= {f"neocorrag_core/{name}" for name in re.findall(r"`(\w+\.py)`", table)}
    assert cited, "the README's 'How it works' table cites no module"
    for entry in cited:
        assert (ROOT / entry).exists(), f"README cites {entry}, which does not exist"


@pytest.mark.parametrize("module", ["neocorrag_core", "neocorrag_core.eval"])
def test_importing_core_pulls_in_no_framework(module):
    import subprocess
    import sys

    forbidden = (*FRAMEWORKS, LAB)
    code = (
        f"import sys, {module}; "
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r}); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- floors (issue 60)


def under_the_systems_offenders(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a system by ``neocorrag_core.triples`` or the text layer: both sit below
    the three systems (the triple store's keys must not depend on a system's graph)."""
    return sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        if within(name, "neocorrag_core.triples") or within(name, TEXT_LAYER)
        for target in targets
        if any(within(target, system) for system in SYSTEMS)
    )


def system_layering_offenders(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a system by one before it in :data:`SYSTEMS` (``chains`` importing
    ``evireform`` or ``belief``, ``evireform`` importing ``belief``)."""
    found = []
    for name, targets in graph.items():
        for rank, system in enumerate(SYSTEMS):
            if not within(name, system):
                continue
            for target in targets:
                later = [s for s in SYSTEMS[rank + 1 :] if within(target, s)]
                if later:
                    found.append(f"{name} imports {target}")
    return sorted(found)


def text_layer_offenders(imports: dict[str, set[str]]) -> list[str]:
    """Imports by a text-layer module (``module -> every name it imports``) of anything but
    the standard library, the text layer and :data:`TEXT_LAYER_MAY_IMPORT`."""
    allowed = (TEXT_LAYER, *TEXT_LAYER_MAY_IMPORT)
    return sorted(
        f"{name} imports {imported}"
        for name, names in imports.items()
        if within(name, TEXT_LAYER)
        for imported in names
        if imported != "__future__"
        and imported.split(".")[0] not in sys.stdlib_module_names
        and not any(within(imported, a) or a.startswith(imported + ".") for a in allowed)
    )


def plain_types_offenders(
    on_import: set[str], in_functions: set[str], mods: Collection[str]
) -> list[str]:
    """What ``neocorrag_core.types`` must not import (``rendering`` or a system), given the
    names it imports on import and inside functions; the :data:`DEPRECATED_IMPORTS` of
    ``types`` pass inside functions only."""
    name = "neocorrag_core.types"
    forbidden = ("neocorrag_core.rendering", *SYSTEMS)
    found = []
    for where, imported in (("on import", on_import), ("in a function", in_functions)):
        for target in sorted(internal_targets(name, imported, mods)):
            if not any(within(target, f) for f in forbidden):
                continue
            if where == "in a function" and (name, target) in DEPRECATED_IMPORTS:
                continue
            found.append(f"{name} imports {target} {where}")
    return found


def lab_cli_offenders(imports: dict[str, set[str]]) -> list[str]:
    """Imports of ``neocorrag_core.cli`` by the lab (``file -> every name it imports``):
    the command's internals (its argparse helpers, its demo loader); the lab keeps its own
    (``neocorrag_lab.cli_args``). Only :data:`CLI_ENTRY_POINT` may be imported."""
    return sorted(
        f"{name} imports {imported}"
        for name, names in imports.items()
        for imported in names
        if within(imported, CLI) and imported not in (CLI, CLI_ENTRY_POINT)
    )


def lab_imports() -> dict[str, set[str]]:
    """``benchmarks/<path> -> every name it imports``, for every file of the lab (its
    package and its scripts)."""
    base = ROOT / "benchmarks"
    found: dict[str, set[str]] = {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(base).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[f"benchmarks/{path.relative_to(base)}"] = imported_names(module, path)
    return found


def _graph_of(tmp_path: Path, sources: dict[str, str]) -> dict[str, set[str]]:
    """The import graph of made-up modules (``module -> source``) among the real ones."""
    mods = {*modules(), *sources}
    graph = {}
    for name, source in sources.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        graph[name] = internal_targets(name, imported_names(name, path), mods)
    return graph


def test_triples_and_the_text_layer_import_no_system():
    assert under_the_systems_offenders(internal_graph()) == [], (
        "entity keys, capitalised names and relation words live in neocorrag_core.text"
    )


def test_the_floor_check_finds_a_system_imported_from_below(tmp_path):
    # The imports issue 60 found: the triple store's keys from NeocorRAG's graph module.
    graph = _graph_of(tmp_path, {
        "neocorrag_core.triples.store":
            "from neocorrag_core.chains.graph import normalize_entity\n",
        "neocorrag_core.triples.extractor":
            "def f():\n    from neocorrag_core.chains import graph\n",
        "neocorrag_core.text.x": "from neocorrag_core.evireform.relations import covers\n",
        "neocorrag_core.triples.ok":
            "from neocorrag_core.text.entities import normalize_entity\n",
    })  # fmt: skip
    assert under_the_systems_offenders(graph) == [
        "neocorrag_core.text.x imports neocorrag_core.evireform.relations",
        "neocorrag_core.triples.extractor imports neocorrag_core.chains",  # its __init__ runs
        "neocorrag_core.triples.extractor imports neocorrag_core.chains.graph",
        "neocorrag_core.triples.store imports neocorrag_core.chains.graph",
    ]


def test_the_systems_are_layered_with_no_circle():
    assert system_layering_offenders(internal_graph()) == [], (
        "layers: chains < evireform < belief; what two systems share goes to neocorrag_core.text"
    )


def test_the_layering_check_finds_a_system_importing_a_later_one(tmp_path):
    graph = _graph_of(tmp_path, {
        # The imports issue 60 found: NeocorRAG's focus borrowing EviReform's word rules.
        "neocorrag_core.chains.focus": (
            "from neocorrag_core.evireform.relations import covers, relation_words\n"
        ),
        "neocorrag_core.evireform.x": "def f():\n    import neocorrag_core.belief.writer\n",
        "neocorrag_core.belief.y": "from neocorrag_core.evireform import residual\n",  # allowed
    })  # fmt: skip
    assert system_layering_offenders(graph) == [
        "neocorrag_core.chains.focus imports neocorrag_core.evireform.relations",
        "neocorrag_core.evireform.x imports neocorrag_core.belief.writer",
    ]


def test_the_text_layer_imports_only_the_standard_library_validation_and_errors():
    text_modules = {n: p for n, p in modules().items() if within(n, TEXT_LAYER)}
    assert {f"{TEXT_LAYER}.entities", f"{TEXT_LAYER}.capitals", f"{TEXT_LAYER}.relations"} <= set(
        text_modules
    )
    imports = {name: imported_names(name, path) for name, path in text_modules.items()}
    assert text_layer_offenders(imports) == []


def test_the_text_layer_check_finds_what_it_may_not_import():
    imports = {
        # relations.py before issue 60 took all_capitals from NeocorRAG's query entities.
        "neocorrag_core.text.relations": {
            "neocorrag_core.chains.query_entities",
            "neocorrag_core.chains.query_entities.all_capitals",
        },
        # "from neocorrag_core import Passage": the name is caught, its package passes
        "neocorrag_core.text.x": {
            "numpy", "neocorrag_core.types", "neocorrag_core", "neocorrag_core.Passage",
        },
        "neocorrag_core.text.ok": {
            "__future__", "re", "unicodedata", "collections.abc", "neocorrag_core.errors",
            "neocorrag_core.validation.clean_text", "neocorrag_core.text.capitals",
        },
    }  # fmt: skip
    assert text_layer_offenders(imports) == [
        "neocorrag_core.text.relations imports neocorrag_core.chains.query_entities",
        "neocorrag_core.text.relations imports neocorrag_core.chains.query_entities.all_capitals",
        "neocorrag_core.text.x imports neocorrag_core.Passage",
        "neocorrag_core.text.x imports neocorrag_core.types",
        "neocorrag_core.text.x imports numpy",
    ]


def test_types_is_plain_data():
    name = "neocorrag_core.types"
    on_import, in_functions = scoped_imports(name, modules()[name])
    assert plain_types_offenders(on_import, in_functions, modules()) == [], (
        "rendering asks the types (rendering.chain_text(result)), never the reverse"
    )


def test_the_plain_types_check_finds_rendering_and_systems(tmp_path):
    mods = modules()
    # types.py before issue 60 rendered itself: rendering imported on import.
    old = tmp_path / "types_old.py"
    old.write_text(
        "from neocorrag_core.rendering import ChainFormat, render_chains, render_context\n"
    )
    assert plain_types_offenders(*scoped_imports("neocorrag_core.types", old), mods) == [
        "neocorrag_core.types imports neocorrag_core.rendering on import"
    ]
    other = tmp_path / "types_other.py"
    other.write_text(
        "def f():\n    from neocorrag_core.rendering import chain_text\n"  # the deprecated one
        "def g():\n    from neocorrag_core.chains.links import mentions\n"
    )
    assert plain_types_offenders(*scoped_imports("neocorrag_core.types", other), mods) == [
        "neocorrag_core.types imports neocorrag_core.chains.links in a function"
    ]


def test_the_deprecated_imports_stay_inside_functions_and_are_still_needed():
    mods = modules()
    for name, target in sorted(DEPRECATED_IMPORTS):
        on_import, in_functions = scoped_imports(name, mods[name])
        assert target not in internal_targets(name, on_import, mods), (
            f"{name} may import {target} inside a function only"
        )
        assert target in internal_targets(name, in_functions, mods), (
            f"{name} no longer imports {target}: remove it from DEPRECATED_IMPORTS"
        )


def test_the_lab_imports_none_of_the_commands_internals():
    imports = lab_imports()
    assert "benchmarks/neocorrag_lab/cli_args.py" in imports
    assert lab_cli_offenders(imports) == [], (
        "the lab takes the product's public API; argparse helpers: neocorrag_lab.cli_args"
    )


def test_the_lab_check_finds_a_cli_import():
    imports = {
        # The imports issue 60 found: the scripts borrowing the command's argparse helpers.
        "benchmarks/bench_index.py": {
            "neocorrag_core.cli.index", "neocorrag_core.cli.index.at_least_one",
        },
        "benchmarks/bench_lm_formats.py": {
            "neocorrag_core.cli.app", "neocorrag_core.cli.app.dense_top_k",
        },
        "benchmarks/x.py": {"neocorrag_core.cli.store"},
        "benchmarks/neocorrag_lab/__main__.py": {"neocorrag_core.cli", "neocorrag_core.cli.main"},
        "benchmarks/y.py": {"neocorrag_lab.cli_args", "neocorrag_lab.cli_args.at_least_one"},
    }  # fmt: skip
    assert lab_cli_offenders(imports) == [
        "benchmarks/bench_index.py imports neocorrag_core.cli.index",
        "benchmarks/bench_index.py imports neocorrag_core.cli.index.at_least_one",
        "benchmarks/bench_lm_formats.py imports neocorrag_core.cli.app",
        "benchmarks/bench_lm_formats.py imports neocorrag_core.cli.app.dense_top_k",
        "benchmarks/x.py imports neocorrag_core.cli.store",
    ]


MOVED = {
    # old home -> (new home, names): the old import paths keep working (issue 60)
    "neocorrag_core.chains.graph": (
        "neocorrag_core.text.entities", ("normalize_entity", "normalization_memo")
    ),
    "neocorrag_core.chains.query_entities": (
        "neocorrag_core.text.capitals", ("all_capitals", "capitalized_spans", "question_spans")
    ),
    "neocorrag_core.evireform.relations": (
        "neocorrag_core.text.relations",
        ("FUNCTION_WORDS", "PREFIX", "Coverage", "coverage", "covers", "open_relation_words",
         "qualify", "relation_position", "relation_words"),
    ),
    "neocorrag_core.rendering": ("neocorrag_core.types", ("ChainFormat", "CHAIN_FORMATS")),
}  # fmt: skip


@pytest.mark.parametrize("old", sorted(MOVED))
def test_moved_names_keep_their_old_import_path(old):
    import importlib

    new, names = MOVED[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), f"{old}.{name}"
