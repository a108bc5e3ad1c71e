"""The mutated tree: a copy of the server's packages in which mutmut 3 has written every mutant.

mutmut rewrites each mutated function as a *trampoline* that calls either the original or one of its
mutants, chosen at call time by the environment variable ``MUTANT_UNDER_TEST``
(``"protocol.session.xǁServerSessionǁreceive__mutmut_3"``). So one tree serves every mutant: a server
started with ``PYTHONPATH=<tree>`` and that variable set *is* that mutant, and any number of them can run
at once. Without the variable every function is the original; with ``MUTANT_UNDER_TEST=fail`` every
mutated function raises (mutmut's own check that the variable reaches the code).

mutmut leaves type annotations, docstrings and lines marked ``# pragma: no mutate`` alone.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.mutation import ROOT

__all__ = ["MUTANT_ENV", "Mutant", "MutationToolMissing", "build", "diffs", "load_or_build"]

MUTANT_ENV = "MUTANT_UNDER_TEST"
"""The variable mutmut's trampolines read (mutmut 3)."""

_DATA = ("spec",)
"""Folders of the checkout the server reads at run time, copied into every tree."""

_SEPARATOR = "ǁ"  # mutmut's class separator in mangled names: xǁClassǁmethod


class MutationToolMissing(RuntimeError):
    """mutmut is not installed (the ``mutation`` extra; ``make test`` installs it)."""


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutant of the mutated tree.

    Attributes:
        name: what ``MUTANT_UNDER_TEST`` says to run it: ``<module>.<mangled function>__mutmut_<n>``.
        path: the mutated file, relative to the checkout (``protocol/session.py``).
        function: the function or method mutated (``ServerSession.receive``).
        line: the line of that function's ``def`` in the checkout's file.
        diff: the mutation as a unified diff of the function (original → mutant).
    """

    name: str
    path: str
    function: str
    line: int
    diff: str


def _mutmut():
    try:
        from mutmut.mutation.file_mutation import mutate_file_contents
    except ImportError:
        raise MutationToolMissing(
            "mutmut is not installed: pip install -e '.[mutation]' (make test installs it)"
        ) from None
    return mutate_file_contents


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every def of ``tree`` by its name (nested ones included; later ones win, as Python binds them)."""
    return {
        node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _origin(key: str) -> tuple[str, str | None]:
    """``xǁClassǁmethod`` → ``("method", "Class")``; ``x_function`` → ``("function", None)``."""
    if _SEPARATOR in key:
        _, cls, func = key.split(_SEPARATOR)
        return func, cls
    return key.removeprefix("x_"), None


def _def_lines(source: str) -> dict[str, int]:
    """``"Class.method"`` and ``"function"`` → line of its ``def`` in ``source`` (top level and classes)."""
    lines: dict[str, int] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines[f"{node.name}.{item.name}"] = item.lineno
    return lines


def diffs(code: str, mutants: Sequence[str]) -> dict[str, str]:
    """Each mutant's unified diff against the original function, both read from mutmut's output ``code``.

    Args:
        code: a file as mutmut rewrote it (originals as ``<key>__mutmut_orig``, mutants beside them).
        mutants: mangled names with their ``__mutmut_<n>`` suffix.

    Returns:
        name → diff (``""`` for a name whose functions are not found).
    """
    defs = _functions(ast.parse(code))
    lines = code.splitlines(keepends=True)

    def body(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str, key: str) -> list[str]:
        return [line.replace(name, key) for line in lines[node.lineno - 1 : node.end_lineno]]

    found = {}
    for mutant in mutants:
        key = mutant.rsplit("__mutmut_", 1)[0]
        original, changed = defs.get(f"{key}__mutmut_orig"), defs.get(mutant)
        if original is None or changed is None:
            found[mutant] = ""
            continue
        before, after = body(original, f"{key}__mutmut_orig", key), body(changed, mutant, key)
        found[mutant] = "".join(difflib.unified_diff(before, after, "original", "mutant", n=1))
    return found


def _stamp(paths: Sequence[str], root: Path) -> dict[str, str]:
    """What a tree was built from: the sha256 of each file it copies, and mutmut's version."""
    from importlib.metadata import version

    folders = [*sorted({Path(path).parts[0] for path in paths}), *_DATA]
    files = sorted(f for folder in folders for f in (root / folder).rglob("*") if f.is_file())
    files = [f for f in files if "__pycache__" not in f.parts]
    stamp = {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    return {**stamp, "mutmut": version("mutmut"), "mutated": ",".join(paths)}


def load_or_build(paths: Sequence[str], dest: Path, *, root: Path = ROOT) -> list[Mutant]:
    """:func:`build`, or the tree already in ``dest`` when it was built from the same files by the same
    mutmut (``dest/mutants.json`` records both)."""
    record = dest / "mutants.json"
    stamp = _stamp(paths, root)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        saved = json.loads(record.read_text(encoding="utf-8"))
        if saved["stamp"] == stamp:
            return [Mutant(**m) for m in saved["mutants"]]
    mutants = build(paths, dest, root=root)
    payload = {"stamp": stamp, "mutants": [dataclasses.asdict(m) for m in mutants]}
    record.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return mutants


def build(paths: Sequence[str], dest: Path, *, root: Path = ROOT) -> list[Mutant]:
    """Write the mutated tree into ``dest`` (replaced): the top-level packages of ``paths``, copied, with
    every file of ``paths`` rewritten by mutmut.

    Args:
        paths: files relative to ``root`` (``protocol/session.py``), each in a package the server imports.
        dest: the tree's folder; run the server with ``PYTHONPATH=dest``.
        root: the checkout to copy.

    Returns:
        Every mutant, in file order, then mutmut's order within each file.

    Raises:
        MutationToolMissing: mutmut is not installed.
        FileNotFoundError: a path is not a file of ``root``.
    """
    mutate = _mutmut()
    for path in paths:
        if not (root / path).is_file() or not path.endswith(".py"):
            raise FileNotFoundError(f"{path}: not a Python file of {root}")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    # The packages, and the JSON Schemas protocol.schemas reads from the checkout's spec/ beside them.
    for folder in [*sorted({Path(path).parts[0] for path in paths}), *_DATA]:
        shutil.copytree(root / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    mutants: list[Mutant] = []
    with _cwd(root):  # mutmut reads its settings ([tool.mutmut]) from the working directory
        for path in paths:
            source = (root / path).read_text(encoding="utf-8")
            mutated = mutate(path, source)
            (dest / path).write_text(mutated.code, encoding="utf-8")
            module = path.removesuffix(".py").replace("/", ".")
            lines, changes = _def_lines(source), diffs(mutated.code, mutated.mutant_names)
            for name in mutated.mutant_names:
                func, cls = _origin(name.rsplit("__mutmut_", 1)[0])
                function = f"{cls}.{func}" if cls else func
                mutants.append(
                    Mutant(f"{module}.{name}", path, function, lines.get(function, 0), changes[name])
                )
    return mutants
