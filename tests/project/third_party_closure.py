"""What each image installs, read from its lock file, and what THIRD_PARTY.md says.

An image installs exactly its lock (``pip install --require-hashes -r locks/image-<key>.txt``, README
"Installs"), then the project itself without dependencies. So the distributions an image ships are the
lock's entries whose environment marker holds on the image's platform (Linux, its machine, CPython 3.12):
the licence check follows the lock, and fails when a lock changes without its rows, not when an upstream
releases. Each distribution's declared licence is read from its metadata in this environment (``make test``
installs every extra, at the locked versions); :func:`suggested_licence` reads it the way a reviewer would:
``License-Expression``, else a short ``License``, else the licence classifiers.

Run as a script to print the rows THIRD_PARTY.md would need for every image::

    python tests/project/third_party_closure.py
"""

from __future__ import annotations

import importlib.metadata as md
import re
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
    """One shipped image: its heading key in THIRD_PARTY.md, its lock file, its platform."""

    key: str
    lock: str
    machine: str

    @property
    def lock_path(self) -> Path:
        return ROOT / "locks" / f"{self.lock}.txt"


IMAGES = (
    Image("cpu", "image-cpu", "x86_64"),
    Image("gpu", "image-gpu", "x86_64"),
    # AgentCore Runtime runs ARM64 images only (reference_agent/Dockerfile).
    Image("agent", "image-agent", "aarch64"),
    # The conformance kit (conformance/Dockerfile).
    Image("kit", "kit", "x86_64"),
)


def _environment(machine: str) -> dict[str, str]:
    """Marker variables of the images' interpreter: CPython 3.12 on Linux, on ``machine``."""
    env = default_environment()
    env.update(
        {
            "platform_machine": machine,
            "platform_system": "Linux",
            "sys_platform": "linux",
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "python_version": "3.12",
            "python_full_version": "3.12.12",
        }
    )
    return env


def lock_entries(path: Path) -> list[Requirement]:
    """The ``name==version ; marker`` entries of a lock file written by locks/lock.py (hashes dropped)."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line[0].isspace() and not line.startswith(("#", "-")):
            entries.append(Requirement(line.removesuffix("\\").strip()))
    return entries


def locked(image: Image) -> dict[str, str]:
    """What ``image`` installs: canonical name → locked version, for the entries its platform takes."""
    env = _environment(image.machine)
    found = {}
    for entry in lock_entries(image.lock_path):
        if entry.marker is None or entry.marker.evaluate(env):
            (spec,) = entry.specifier
            found[canonicalize_name(entry.name)] = spec.version
    return found


def _installed() -> dict[str, md.Distribution]:
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def closure(image: Image) -> tuple[dict[str, md.Distribution], set[str]]:
    """The distributions ``image`` installs (name → its metadata here), and locked names not installed here.

    The names are the lock's (:func:`locked`); the project itself is never in a lock: it is not third-party.
    """
    installed = _installed()
    names = locked(image)
    return {n: installed[n] for n in names if n in installed}, {n for n in names if n not in installed}


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
