"""Access to the JSON Schemas of spec/schemas (PROTOCOL.md Appendix A).

The schema files are the normative shape of every JSON frame; the code validates against them as they
lie on disk and keeps no copies. Each file is self-contained (no ``$ref`` to another file) so that any
JSON Schema 2020-12 tool can use it alone.

``jsonschema`` is imported on first use, so importing :mod:`protocol` stays cheap.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["SCHEMA_DIR", "SCHEMA_SUFFIX", "load", "names", "path", "validate", "validator"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "spec" / "schemas"
"""Where the schema files live: ``<project root>/spec/schemas``, their one home. An installed wheel carries
``spec/`` as a data-only package beside ``protocol/`` (pyproject's package data), so the same path works."""

SCHEMA_SUFFIX = ".schema.json"

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def names() -> list[str]:
    """Names of all schema files, sorted (``"cancel"`` names ``cancel.schema.json``)."""
    return sorted(p.name.removesuffix(SCHEMA_SUFFIX) for p in SCHEMA_DIR.glob(f"*{SCHEMA_SUFFIX}"))


def path(name: str) -> Path:
    """The file of schema ``name``.

    Raises:
        KeyError: no schema has that name.
    """
    if not _NAME.fullmatch(name):
        raise KeyError(f"not a schema name: {name!r}")
    file = SCHEMA_DIR / f"{name}{SCHEMA_SUFFIX}"
    if not file.is_file():
        raise KeyError(f"no schema named {name!r} in {SCHEMA_DIR}")
    return file


@functools.cache
def _load(name: str) -> dict[str, Any]:
    return json.loads(path(name).read_text(encoding="utf-8"))


def load(name: str) -> dict[str, Any]:
    """Schema ``name`` as a dict (a fresh copy: the cached one stays untouched).

    Raises:
        KeyError: no schema has that name.
    """
    return copy.deepcopy(_load(name))


@functools.cache
def validator(name: str) -> Validator:
    """A Draft 2020-12 validator for schema ``name`` (cached; the schema is checked once).

    ``format`` is not asserted: every rule the protocol needs is a ``pattern`` or is checked in code.

    Raises:
        KeyError: no schema has that name.
        jsonschema.exceptions.SchemaError: the file is not a valid 2020-12 schema.
    """
    from jsonschema import Draft202012Validator

    schema = _load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate(name: str, instance: Any) -> None:
    """Validate ``instance`` against schema ``name``.

    Raises:
        jsonschema.exceptions.ValidationError: the most relevant failure (``jsonschema``'s best match).
        KeyError: no schema has that name.
    """
    from jsonschema.exceptions import best_match

    error = best_match(validator(name).iter_errors(instance))
    if error is not None:
        raise error
