"""The layers of ARCHITECTURE.md, enforced: no package imports one above it.

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
    "sagemaker_transport": frozenset({"protocol"}),
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
        if target != package and target not in ALLOWED[package]
    ]
    assert upward == [], f"{package}/ may import only {sorted(ALLOWED[package])}"


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path):
    """The reader finds an import made inside a function, as the lazy imports of the project are."""
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from reference_server import app\n    import simulator.client\n")
    assert project_imports(module) == [(2, "reference_server"), (3, "simulator")]
