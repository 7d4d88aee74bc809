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
  ``hasattr`` name) nor calls ``.complete(...)`` / ``.chat(...)``; the core asks a
  ``ChatModel`` (``ask``) and an encode function, and the adapters translate;
* no import cycle between the package's modules (function-level imports count too; only
  imports under ``if TYPE_CHECKING:`` are left out, since they never run);
* every module the README's "How it works" table names exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
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


def _walk_runtime(node: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk_runtime(other)
            continue
        yield child
        yield from _walk_runtime(child)


def imported_names(module: str, path: Path) -> set[str]:
    """Absolute names of everything ``module`` imports at run time (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _walk_runtime(tree):
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


def internal_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for imported in imported_names(name, path):
            # "a.b.c" imports a.b.c if it is a module, else the module a.b (c is a name in it)
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


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
    }
)  # fmt: skip
"""Members only a LangChain or LlamaIndex object has: no access to them in the core, by
attribute or by a ``getattr`` / ``hasattr`` / ``setattr`` name."""
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


def test_no_import_cycles():
    cycle = find_cycle(internal_graph())
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
