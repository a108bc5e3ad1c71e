"""The traceability matrix shipped with the suite, read (``conformance/matrix.json``; no I/O beyond the read).

``python -m conformance.matrix`` (:mod:`conformance.engine.matrix`) writes the file; the reports
(:mod:`conformance.engine.report`, :mod:`conformance.engine.htmlreport`) and the expectations file's checks
(:mod:`conformance.engine.expectations`) read it here, so that none of them imports another to find it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MATRIX", "load_matrix", "requirement_ids", "section_titles"]

MATRIX = Path(__file__).resolve().parents[1] / "matrix.json"
"""The traceability matrix shipped with the suite: requirement id -> level, section, sentence."""


def _read(path: Path) -> dict[str, Any]:
    """The file's JSON object; empty if it is missing or not JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_matrix(path: Path = MATRIX) -> dict[str, dict[str, Any]]:
    """Requirement id -> matrix row (``level``, ``section``, ``text``, ...); empty if the file is missing."""
    return {row["id"]: row for row in _read(path).get("requirements", [])}


def section_titles(path: Path = MATRIX) -> dict[str, str]:
    """Section number -> its heading in the spec (``"3.3"`` -> ``"Audio frames"``); empty if missing."""
    return _read(path).get("sections", {})


def requirement_ids(path: Path = MATRIX) -> set[str]:
    """Every requirement id of the matrix (retired ones included).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON.
        KeyError: it has no ``requirements``.
    """
    return {row["id"] for row in json.loads(path.read_text(encoding="utf-8"))["requirements"]}
