"""The mutated tree: a copy of the server's packages in which mutmut 3 has written every mutant.

mutmut rewrites each mutated function as a *trampoline* that calls either the original or one of its
mutants, chosen at call time by the environment variable ``MUTANT_UNDER_TEST``
(``"protocol.server_session.xǁServerSessionǁreceive__mutmut_3"``). So one tree serves every mutant: a server
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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.mutation import ROOT

__all__ = ["MUTANT_ENV", "Mutant", "MutationToolMissing", "Tree", "build", "diffs", "load_or_build", "stamp"]

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
        path: the mutated file, relative to the checkout (``protocol/server_session.py``).
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


def stamp(folders: Sequence[str], root: Path = ROOT, *, exclude: Sequence[str] = ()) -> str:
    """A digest of every file under ``folders`` of ``root`` (caches: built from the same files?), leaving
    out those whose path relative to ``root`` starts with one of ``exclude``."""
    digest = hashlib.sha256()
    for folder in sorted(folders):
        for f in sorted((root / folder).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                if f.relative_to(root).as_posix().startswith(tuple(exclude)):
                    continue
                digest.update(f"{f.relative_to(root)}\0".encode() + hashlib.sha256(f.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class Tree:
    """A mutated tree's mutants, and those mutmut would write on lines the suite never runs.

    Attributes:
        mutants: every mutant written (on lines the suite runs, when coverage was given).
        not_run: path → function → how many mutants its lines that the suite never runs would have had.
    """

    mutants: list[Mutant]
    not_run: dict[str, dict[str, int]]


def load_or_build(
    paths: Sequence[str], dest: Path, *, root: Path = ROOT, covered: Mapping[str, Sequence[int]] | None = None
) -> Tree:
    """:func:`build`, or the tree already in ``dest`` when it was built from the same files, lines and
    mutmut (``dest/mutants.json`` records them)."""
    from importlib.metadata import version

    record = dest / "mutants.json"
    folders = [*sorted({Path(path).parts[0] for path in paths}), *_DATA]
    key = {
        "files": stamp(folders, root),
        "mutmut": version("mutmut"),
        "mutated": list(paths),
        "covered": None if covered is None else {p: list(covered[p]) for p in paths},
    }
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        saved = json.loads(record.read_text(encoding="utf-8"))
        if saved["key"] == key:
            return Tree([Mutant(**m) for m in saved["mutants"]], saved["not_run"])
    tree = build(paths, dest, root=root, covered=covered)
    payload = {"key": key, "mutants": [dataclasses.asdict(m) for m in tree.mutants], "not_run": tree.not_run}
    record.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return tree


def _function_of(name: str) -> str:
    func, cls = _origin(name.rsplit("__mutmut_", 1)[0])
    return f"{cls}.{func}" if cls else func


def build(
    paths: Sequence[str], dest: Path, *, root: Path = ROOT, covered: Mapping[str, Sequence[int]] | None = None
) -> Tree:
    """Write the mutated tree into ``dest`` (replaced): the top-level packages of ``paths``, copied, with
    every file of ``paths`` rewritten by mutmut.

    Args:
        paths: files relative to ``root`` (``protocol/server_session.py``),
            each in a package the server imports.
        dest: the tree's folder; run the server with ``PYTHONPATH=dest``.
        root: the checkout to copy.
        covered: path → the lines the suite runs (:func:`conformance.mutation.covered.measure`); only those
            are mutated. ``None``: every line.

    Returns:
        The mutants, in file order, then mutmut's order within each file, and what was not mutated.

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
    not_run: dict[str, dict[str, int]] = {}
    with _cwd(root):  # mutmut reads its settings ([tool.mutmut]) from the working directory
        for path in paths:
            source = (root / path).read_text(encoding="utf-8")
            lines = set(covered[path]) if covered is not None else None
            mutated = mutate(path, source, lines)
            (dest / path).write_text(mutated.code, encoding="utf-8")
            module = path.removesuffix(".py").replace("/", ".")
            defs, changes = _def_lines(source), diffs(mutated.code, mutated.mutant_names)
            for name in mutated.mutant_names:
                function = _function_of(name)
                mutants.append(
                    Mutant(f"{module}.{name}", path, function, defs.get(function, 0), changes[name])
                )
            if lines is not None:
                every = Counter(_function_of(n) for n in mutate(path, source).mutant_names)
                written = Counter(_function_of(n) for n in mutated.mutant_names)
                missing = {f: n - written[f] for f, n in sorted(every.items()) if n > written[f]}
                not_run[path] = missing
    return Tree(mutants, not_run)
