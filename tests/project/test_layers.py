"""The layout of ARCHITECTURE.md, enforced: no package imports one above it, no modules import each other in
a circle, and no source file grows past 1,000 lines.

Every module of every top-level package is read with :mod:`ast` (nothing is imported), so an import inside a
function, made lazily to keep start-up light, counts as much as one at the top of a file. The allowed
arrows below are the ones ARCHITECTURE.md draws; a new package, or a new arrow, is a decision to write
down there first, then here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: package -> the project packages it may import (ARCHITECTURE.md, "Layers").
ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "speech": frozenset({"protocol"}),
    "sagemaker_transport": frozenset(),
    "reference_server": frozenset({"protocol", "speech"}),
    "simulator": frozenset({"protocol", "sagemaker_transport"}),
    "reference_agent": frozenset({"protocol", "speech", "sagemaker_transport", "simulator"}),
    "conformance": frozenset(
        {"protocol", "speech", "sagemaker_transport", "simulator", "reference_server", "reference_agent"}
    ),
    "bench": frozenset(
        {
            "protocol",
            "speech",
            "sagemaker_transport",
            "simulator",
            "reference_server",
            "reference_agent",
            "conformance",
        }
    ),
    "infra": frozenset({"protocol", "reference_server"}),
}

#: (package, imported package) -> the only folders of the package that may import it.
ONLY_UNDER: dict[tuple[str, str], tuple[str, ...]] = {
    # The suite certifies any server; only its mutants (defects injected into a tone-backed server built on
    # the shipped encoders) and the mutation tool (which runs the shipped server) touch the reference one.
    ("conformance", "reference_server"): ("conformance/mutants/", "conformance/mutation/"),
}

MAX_LINES = 1_000
"""The longest a source file may be (ARCHITECTURE.md, "File sizes"); none is exempt today."""


def packages() -> list[str]:
    """Top-level folders of the repository that are Python packages (have an ``__init__.py``)."""
    return sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())


def project_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level package)`` of every absolute import in *path* that names a project package."""
    own = set(packages())
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend((node.lineno, name.split(".")[0]) for name in names if name.split(".")[0] in own)
    return found


def test_every_package_has_a_layer():
    """A new top-level package must be placed in the table (and in ARCHITECTURE.md) before it lands."""
    assert sorted(set(packages()) - set(ALLOWED)) == []


def test_architecture_names_every_package():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert [name for name in ALLOWED if f"`{name}/`" not in text] == []


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_package_imports_upward(package: str):
    if not (ROOT / package / "__init__.py").is_file():
        pytest.skip(f"{package}/ is not in this tree")
    upward = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, target in project_imports(path)
        if target != package
        and (
            target not in ALLOWED[package]
            or not str(path.relative_to(ROOT)).startswith(ONLY_UNDER.get((package, target), ("",)))
        )
    ]
    assert upward == [], f"{package}/ may import only {sorted(ALLOWED[package])} (and see ONLY_UNDER)"


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    modules = {}
    for package in packages():
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from a.b import c`` names ``a.b.c`` when that is a
    module, else ``a.b``), lazy and ``TYPE_CHECKING`` imports included."""
    own = set(packages())

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                resolved = resolve(target) if target.split(".")[0] in own else None
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle():
    assert circles(import_graph(_modules())) == []


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_source_file_is_over_the_limit():
    sources = [p for package in packages() for p in (ROOT / package).rglob("*") if p.suffix in (".py", ".js")]
    sources += [p for p in (ROOT / "tests").rglob("*.py")]
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"carve these by concept (ARCHITECTURE.md): {long}"


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path):
    """The reader finds an import made inside a function, as the lazy imports of the project are."""
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from reference_server import app\n    import simulator.client\n")
    assert project_imports(module) == [(2, "reference_server"), (3, "simulator")]
