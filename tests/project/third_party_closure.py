"""What each image installs, from the installed distributions' metadata, and what THIRD_PARTY.md says.

An image installs the project with some extras (``pip install -e ".[server]"``); pip then installs the
closure of ``Requires-Dist`` over those extras. The same closure is computed here: the project's own
requirements from pyproject.toml (so an edit counts before any reinstall), everything below them from the
metadata of the distributions in this environment (the shared venv has every extra installed), with each
requirement's environment marker evaluated for the image's platform. :func:`suggested_licence` reads a
distribution's declared licence the way a reviewer would: ``License-Expression``, else a short
``License``, else the licence classifiers.

Run as a script to print the rows THIRD_PARTY.md would need for every image::

    python tests/project/third_party_closure.py
"""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT / "THIRD_PARTY.md"
PROJECT = "kokoro-bidi-tts"


@dataclass(frozen=True)
class Image:
    """One shipped image: its heading key in THIRD_PARTY.md, the extras it installs, its platform."""

    key: str
    extras: tuple[str, ...]
    machine: str
    also: tuple[str, ...] = ()
    """Distributions the Dockerfile installs besides the project (e.g. a pinned torch)."""


IMAGES = (
    Image("cpu", ("server",), "x86_64"),
    Image("gpu", ("server", "torch"), "x86_64", also=("torch",)),
    # AgentCore Runtime runs ARM64 images only (reference_agent/Dockerfile).
    Image("agent", ("agent",), "aarch64"),
)


def _environment(machine: str, extra: str) -> dict[str, str]:
    env = default_environment()
    env.update({"platform_machine": machine, "platform_system": "Linux", "sys_platform": "linux"})
    env["extra"] = extra
    return env


def _installed() -> dict[str, md.Distribution]:
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def project_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's requirements for ``extras``, read from pyproject.toml (self-references expanded)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    found = [Requirement(line) for line in project.get("dependencies", [])]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in optional.get(extra, []):
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(PROJECT):
                pending += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found


def closure(image: Image) -> tuple[dict[str, md.Distribution], set[str]]:
    """The distributions ``image`` installs (name → distribution), and required names not installed here.

    The project itself is left out: it is not third-party.
    """
    installed = _installed()
    wanted: dict[str, set[str]] = {}
    missing: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = []
    for requirement in project_requirements(image.extras):
        marker = requirement.marker
        if marker is None or marker.evaluate(_environment(image.machine, "")):
            todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    todo += [(canonicalize_name(name), frozenset()) for name in image.also]
    while todo:
        name, extras = todo.pop()
        dist = installed.get(name)
        if dist is None:
            missing.add(name)
            continue
        before = wanted.get(name)
        if before is not None and extras <= before:
            continue
        active = (before or set()) | set(extras)
        wanted[name] = active
        for line in dist.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is not None and not any(
                marker.evaluate(_environment(image.machine, extra)) for extra in ("", *sorted(active))
            ):
                continue
            todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return {name: installed[name] for name in wanted}, missing


_CLASSIFIER_SPDX = {
    "MIT License": "MIT",
    "BSD License": "BSD",
    "Apache Software License": "Apache-2.0",
    "ISC License (ISCL)": "ISC",
    "Python Software Foundation License": "PSF-2.0",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "GNU Library or Lesser General Public License (LGPL)": "LGPL",
    "Other/Proprietary License": "proprietary",
}


def declared_licence_text(dist: md.Distribution) -> str:
    """Every licence statement in the metadata, joined (for the copyleft check)."""
    meta = dist.metadata
    parts = [meta.get("License-Expression") or "", (meta.get("License") or "")[:200]]
    parts += [c for c in meta.get_all("Classifier") or [] if c.startswith("License")]
    return " ".join(parts)


def suggested_licence(dist: md.Distribution) -> str:
    """The distribution's declared licence in a few words, for a THIRD_PARTY.md row."""
    meta = dist.metadata
    if expression := meta.get("License-Expression"):
        return expression
    text = (meta.get("License") or "").strip()
    if text and "\n" not in text and len(text) <= 40 and text.upper() != "UNKNOWN":
        return text
    licences = [c for c in meta.get_all("Classifier") or [] if c.startswith("License")]
    classifiers = [c.split("::")[-1].strip() for c in licences]
    if classifiers:
        return " OR ".join(_CLASSIFIER_SPDX.get(c, c) for c in classifiers)
    return "none declared: read its licence files"


def is_copyleft(text: str) -> bool:
    """A GPL, LGPL or AGPL licence is named in ``text``."""
    return re.search(r"\b(A|L)?GPL|General Public License", text) is not None


_HEADING = re.compile(r"^## Image `(?P<key>[a-z]+)`", re.MULTILINE)
_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<licence>[^|]+) \|", re.MULTILINE)


def listed(text: str) -> dict[str, dict[str, str]]:
    """THIRD_PARTY.md's tables: image key → {canonical distribution name → licence column}."""
    sections: dict[str, dict[str, str]] = {}
    headings = list(_HEADING.finditer(text))
    for i, heading in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
        body = text[heading.end() : end]
        # A level-2 heading without an image key ends the section too.
        stop = re.search(r"^## ", body, re.MULTILINE)
        if stop:
            body = body[: stop.start()]
        sections[heading["key"]] = {
            canonicalize_name(row["name"]): row["licence"].strip() for row in _ROW.finditer(body)
        }
    return sections


def rows(dists: Mapping[str, md.Distribution], names: Iterable[str]) -> str:
    """Markdown rows for ``names``, ready to paste (licence from the metadata; check it by hand)."""
    return "\n".join(
        f"| `{dists[n].metadata['Name']}` | {suggested_licence(dists[n])} | |" for n in sorted(names)
    )


if __name__ == "__main__":
    for image in IMAGES:
        dists, missing = closure(image)
        print(f"## {image.key}: {len(dists)} distributions; not installed here: {sorted(missing)}")
        print(rows(dists, dists))
