"""Write the project's lock files (``make lock``): one hash-checked requirements file per install.

Each install of the project (the two ``make`` commands, the three images and the conformance kit) installs
from one file in this folder with ``pip install --require-hashes``, then the project itself with
``--no-deps``: what was tested is what installs, tomorrow as today. The files are written by
``uv pip compile --universal --generate-hashes`` from ``pyproject.toml`` (the extras of each install, plus
the build backend and pip) and are never edited by hand: each header carries the sha256 of the inputs it
was compiled from and of its own body, which ``tests/project/test_locks.py`` checks.

Consistency: ``test.txt`` (``make test``, every extra) is compiled first; every other lock is compiled
with it as a constraint, so one distribution has one version in every install and ``make test`` only adds
to what ``make conformance`` installed.

Usage::

    python locks/lock.py                      # re-lock after a pyproject.toml edit; keeps every other pin
    python locks/lock.py --upgrade-package av # move one distribution to its newest allowed release
    python locks/lock.py --upgrade            # move everything to the newest allowed releases

uv is the resolver (a universal resolution with hashes for every platform's files, in seconds); pip is
the installer everywhere (README "Installs"). ``holds.txt`` holds back releases on purpose, with reasons.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYPROJECT = ROOT / "pyproject.toml"
HOLDS = HERE / "holds.txt"
PYTHON_VERSION = "3.12"
# The resolver itself, pinned: a newer uv may resolve the same inputs differently.
UV = "uv==0.13.9"
UV_LOCK = HERE / "uv.txt"


@dataclass(frozen=True)
class Lock:
    """One install: the lock file's name, the extras it installs, and who installs from it."""

    name: str
    extras: tuple[str, ...]
    used_by: str

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.txt"


# test first: the others are constrained by it (module docstring).
LOCKS = (
    Lock(
        "test",
        ("all", "conformance", "demo", "dev", "crosscheck", "mutation", "quality"),
        "make test, on top of the main job",
    ),
    Lock("conformance", ("server", "agent", "demo", "conformance", "dev"), "make conformance, the main job"),
    Lock("kit", ("conformance",), "the conformance kit alone (README 'Certify your own container')"),
    Lock("image-cpu", ("server",), "reference_server/Dockerfile.cpu"),
    Lock("image-gpu", ("server", "torch"), "reference_server/Dockerfile"),
    Lock("image-agent", ("agent",), "reference_agent/Dockerfile"),
)
BY_NAME = {lock.name: lock for lock in LOCKS}

HEADER_INPUTS = "# inputs-sha256: "
HEADER_BODY = "# body-sha256: "


def build_requirements() -> list[str]:
    """What an install needs besides the extras: the build backend (``[build-system] requires``, for the
    project's own ``--no-build-isolation`` editable install) and pip, so the installer is locked too."""
    build = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["build-system"]["requires"]
    return [*build, "pip"]


def inputs_digest(lock: Lock) -> str:
    """sha256 over everything the lock is compiled from: the project's requirements for its extras
    (``dependencies``, every extra, so that a self-reference resolves the same), the build requirements,
    the holds and the resolver's version. A change in any of them means the lock is stale.
    """
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    material = {
        "extras": list(lock.extras),
        "dependencies": project["project"].get("dependencies", []),
        "optional-dependencies": project["project"].get("optional-dependencies", {}),
        "requires-python": project["project"].get("requires-python"),
        "build": build_requirements(),
        "holds": HOLDS.read_text(encoding="utf-8"),
        "constrained-by": None if lock.name == "test" else inputs_digest(BY_NAME["test"]),
        "python": PYTHON_VERSION,
        "uv": UV,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def split(text: str) -> tuple[list[str], str]:
    """A lock file's text → (its header lines, its body): the header is the leading comment block."""
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    return [line.rstrip("\n") for line in lines[:n]], "".join(lines[n:])


def body_digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def recorded(path: Path) -> tuple[str | None, str | None, str]:
    """(inputs digest, body digest, body) as written in the lock file at ``path``."""
    header, body = split(path.read_text(encoding="utf-8"))

    def field(prefix: str) -> str | None:
        return next((line.removeprefix(prefix) for line in header if line.startswith(prefix)), None)

    return field(HEADER_INPUTS), field(HEADER_BODY), body


def _uv() -> list[str]:
    found = Path(sys.executable).with_name("uv")
    if not found.exists():
        raise SystemExit(f"uv is not installed beside {sys.executable}: run `make lock` (it installs {UV})")
    return [str(found)]


def _uv_compile(sources: list[Path], out: Path, options: list[str]) -> str:
    """Run ``uv pip compile`` (universal, with hashes, for Python 3.12) of ``sources`` into ``out``; its body.

    ``out`` may hold an earlier body: uv keeps the pins it finds there unless ``options`` upgrade them.
    """
    command = [
        *_uv(),
        "pip",
        "compile",
        "--quiet",
        "--universal",
        "--generate-hashes",
        "--no-header",
        "--python-version",
        PYTHON_VERSION,
        "--output-file",
        str(out),
        *options,
        *map(str, sources),
    ]
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    return out.read_text(encoding="utf-8")


def compile_lock(lock: Lock, upgrade: list[str]) -> None:
    """Compile ``lock`` with uv into its file, keeping the pins already there unless ``upgrade`` says."""
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp) / "build.in"
        build.write_text("\n".join(build_requirements()) + "\n", encoding="utf-8")
        out = Path(tmp) / "out.txt"
        if lock.path.exists():  # uv keeps the pins of an existing output file: copy the body there
            out.write_text(recorded(lock.path)[2], encoding="utf-8")
        options = ["--constraints", str(HOLDS), *[arg for extra in lock.extras for arg in ("--extra", extra)]]
        if lock.name != "test":
            options += ["--constraints", str(BY_NAME["test"].path)]
        # Paths of temporary files in `# via` lines would make every run differ.
        body = _uv_compile([Path("pyproject.toml"), build], out, [*options, *upgrade])
        body = body.replace(str(build), "build requirements")
    header = [
        f"# Lock for {lock.used_by}: extras {','.join(lock.extras)} of pyproject.toml,",
        "# the build backend and pip; Python 3.12, every platform.",
        "# Written by `make lock` (locks/lock.py): do not edit.",
        "# Install: pip install --require-hashes -r locks/" + lock.path.name,
        "#          pip install --no-deps --no-build-isolation -e .",
        HEADER_INPUTS + inputs_digest(lock),
        HEADER_BODY + body_digest(body),
    ]
    lock.path.write_text("\n".join(header) + "\n" + body, encoding="utf-8")


def compile_uv_lock() -> None:
    """The resolver's own lock (``uv.txt``): what ``make lock`` installs before it runs this script."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "uv.in"
        source.write_text(UV + "\n", encoding="utf-8")
        body = _uv_compile([source], Path(tmp) / "out.txt", ["--no-annotate"])
    UV_LOCK.write_text(
        "# The resolver that writes the other locks (locks/lock.py). Written by `make lock`: do not edit.\n"
        + body,
        encoding="utf-8",
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``make lock`` (``python locks/lock.py``)."""
    parser = argparse.ArgumentParser(
        prog="python locks/lock.py",
        description="Write locks/*.txt, one hash-checked requirements file per install, from pyproject.toml. "
        "Pins that still fit are kept unless an upgrade option moves them.",
    )
    parser.add_argument("--upgrade", action="store_true", help="move every pin to its newest allowed release")
    parser.add_argument(
        "--upgrade-package",
        action="append",
        default=[],
        metavar="NAME",
        help="move this distribution (and what it needs) to its newest allowed release; repeatable "
        "(default: none)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    pinned = set().union(*(pinned_names(lock.path) for lock in LOCKS if lock.path.exists()))
    unknown = [name for name in args.upgrade_package if normalized(name) not in pinned]
    if unknown:
        parser.error(
            f"--upgrade-package {', '.join(unknown)}: no lock pins such a distribution (a new dependency "
            "needs no upgrade option: add it to pyproject.toml and run make lock)"
        )
    upgrade = [f"--upgrade-package={name}" for name in args.upgrade_package]
    if args.upgrade:
        upgrade = ["--upgrade"]
    compile_uv_lock()
    for lock in LOCKS:
        compile_lock(lock, upgrade)
        print(f"{lock.path.relative_to(ROOT)}: {count(lock.path)} distributions ({lock.used_by})")
    return 0


def normalized(name: str) -> str:
    """A distribution name in PEP 503's normal form (``Foo_Bar`` → ``foo-bar``), as uv writes pins."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_names(path: Path) -> set[str]:
    """The normalized names a lock file pins (one ``name==version`` line each, extras dropped)."""
    lines = recorded(path)[2].splitlines()
    return {normalized(line.split("==")[0].split("[")[0]) for line in lines if line and line[0] not in " #"}


def count(path: Path) -> int:
    """How many distributions a lock file pins (one ``name==version`` line each)."""
    return sum(1 for line in recorded(path)[2].splitlines() if line and line[0] not in " #")


if __name__ == "__main__":
    sys.exit(main())
