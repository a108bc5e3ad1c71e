"""What a conformance case is, and how its outcome becomes a verdict (Autobahn|Testsuite's model).

A case is a pytest test carrying a :class:`Case`: a stable id tied to a spec section (``"6.2.1"`` for
§6.2), the requirement quoted verbatim from ``spec/PROTOCOL.md``, its level (MUST, SHOULD, MAY), what is
done (``description``), what must be seen (``expectation``) and the ids of the spec's requirements it tests
(``requirements``, see :mod:`conformance.engine.requirements`). Mark a test with :func:`case`, or give each
row of a parametrized table its own case with :func:`param`.

A requirement a case tests is one of its *clauses*: the case fails on its own assertions and on findings
(:mod:`conformance.engine.observer`) on its clauses; findings on other requirements seen while it ran are
notes on it, judged by the cases that test those. So one defect of a server fails the cases of its
requirement, not every case that happens to see it. The run, though, is judged on every finding: a note that
breaks a MUST fails the run on its clause (:meth:`conformance.engine.report.Results.defects`), even when the
cases of that clause never take the path where it happens.

Verdicts (:class:`Verdict`), from the test's outcome and the case's level:

=================  =====================================================================================
``OK``             the expectation was met
``FAILED``         a MUST case failed (or a SHOULD case under ``--strict``); pytest reports a failure
``NON-STRICT``     a SHOULD case failed; pytest reports an expected failure unless ``--strict``
``INFORMATIONAL``  a MAY case failed; never a pytest failure
``UNIMPLEMENTED``  the server does not offer an OPTIONAL feature (the test raised :class:`Unimplemented`)
``SKIPPED``        the case cannot run against this target (for example it needs the simulator)
=================  =====================================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conformance.engine.ids import REQUIREMENT_ID, CaseId, RequirementId

__all__ = [
    "MARKER",
    "REPO_ROOT",
    "Case",
    "Level",
    "Unimplemented",
    "Verdict",
    "case",
    "cases_of",
    "catalogue",
    "normalize_quote",
    "param",
    "quote_found",
    "verdict_for",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root; a case's ``source`` is relative to it."""

MARKER = "conformance_case"
"""Name of the pytest marker that carries a :class:`Case`."""


class Level(StrEnum):
    """Requirement levels of RFC 2119 as PROTOCOL.md §1.2 uses them."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


class Verdict(StrEnum):
    """The verdict of one case (see the module docstring)."""

    OK = "OK"
    FAILED = "FAILED"
    NON_STRICT = "NON-STRICT"
    INFORMATIONAL = "INFORMATIONAL"
    UNIMPLEMENTED = "UNIMPLEMENTED"
    SKIPPED = "SKIPPED"


class Unimplemented(Exception):
    """Raised by a case when the server does not offer an OPTIONAL feature (PROTOCOL.md §1.5).

    The verdict is ``UNIMPLEMENTED`` and pytest reports the case as skipped.
    """


@dataclass(frozen=True)
class Case:
    """One conformance case.

    Attributes:
        id: stable id (:class:`~conformance.engine.ids.CaseId`): the spec section's numbers then a running
            number (``"3.3.4"``), ``.F<n>`` for property-based (fuzz) cases, or ``AGENT-<n>`` for the agent
            cases; a plain ``str`` given is checked and converted.
        section: the section it certifies, e.g. ``"§3.3"``.
        level: MUST, SHOULD or MAY.
        requirement: the requirement, quoted verbatim from ``source`` (whitespace, ``**`` and backticks
            may differ: see :func:`normalize_quote`).
        description: what the case does.
        expectation: what must be seen for the verdict ``OK``.
        source: the file the requirement is quoted from, relative to the repository root.
        requirements: the ids of the spec's normative sentences this case tests
            (:class:`~conformance.engine.ids.RequirementId`, ``"R3.3.1-2"``, see
            :mod:`conformance.engine.requirements`); the traceability matrix (``python -m
            conformance.matrix``) maps each id to the cases that declare it. They are the case's clauses:
            findings on them fail
            it, findings on other requirements are notes on it.

    Raises:
        ValueError: a malformed id, an empty requirement or a malformed requirement id.
    """

    id: CaseId
    section: str
    level: Level
    requirement: str
    description: str
    expectation: str
    source: str = "spec/PROTOCOL.md"
    requirements: tuple[RequirementId, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", CaseId(self.id))
        if not self.requirement.strip():
            raise ValueError(f"case {self.id} quotes no requirement")
        bad = [r for r in self.requirements if not REQUIREMENT_ID.fullmatch(r)]
        if bad:
            raise ValueError(f"case {self.id}: malformed requirement ids {bad} (expected e.g. 'R3.3.1-2')")
        object.__setattr__(self, "requirements", tuple(RequirementId(r) for r in self.requirements))

    @property
    def clauses(self) -> tuple[RequirementId, ...]:
        """The requirement ids whose findings decide this case's verdict: the sentence of each of its
        ``requirements`` (``R7.1-3`` for the condition ``R7.1-3a``), since findings are recorded on sentences
        (:mod:`conformance.engine.clauses`), then the conditions themselves. The first is where the case's
        own failed assertion is recorded."""
        sentences = [r.sentence for r in self.requirements]
        return tuple(dict.fromkeys([*sentences, *self.requirements]))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "id": self.id,
            "section": self.section,
            "level": self.level.value,
            "requirement": self.requirement,
            "description": self.description,
            "expectation": self.expectation,
            "source": self.source,
            "requirements": list(self.requirements),
        }


def case(
    id: str,
    section: str,
    level: Level,
    *,
    requirement: str,
    description: str,
    expectation: str,
    source: str = "spec/PROTOCOL.md",
    requirements: tuple[str, ...] = (),
) -> Any:
    """Decorator: make a test function the conformance case described by the arguments (see :class:`Case`).

    ``id`` becomes a :class:`~conformance.engine.ids.CaseId` and each of ``requirements`` a
    :class:`~conformance.engine.ids.RequirementId`.

    Raises:
        ValueError: a malformed id, an empty requirement or a malformed requirement id.
    """
    return getattr(pytest.mark, MARKER)(
        Case(
            CaseId(id),
            section,
            Level(level),
            requirement,
            description,
            expectation,
            source,
            tuple(requirements),
        )
    )


def param(value: Any, case: Case) -> Any:
    """One row of a parametrized case table: ``value`` is passed to the test, ``case`` is its identity."""
    return pytest.param(value, id=case.id, marks=getattr(pytest.mark, MARKER)(case))


def cases_of(module: ModuleType) -> list[Case]:
    """Every :class:`Case` a test module declares, with :func:`case` or as :func:`param` rows, in order.

    Reads the pytest marks the decorators leave on the module's ``test_*`` functions, so the catalogue can
    be checked without running (or collecting) the suite.
    """
    found: list[Case] = []
    for name, function in vars(module).items():
        if not name.startswith("test_") or not callable(function):
            continue
        for mark in getattr(function, "pytestmark", []):
            if mark.name == MARKER:
                found.append(mark.args[0])
            elif mark.name == "parametrize":
                for value in mark.args[1]:
                    found += [m.args[0] for m in getattr(value, "marks", ()) if m.name == MARKER]
    return found


def catalogue() -> list[Case]:
    """Every case of the suite, module by module (``conformance/cases/test_*.py``) in file order."""
    import importlib
    import pkgutil

    import conformance.cases

    found: list[Case] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(conformance.cases.__path__)):
        if module.startswith("test_"):
            found += cases_of(importlib.import_module(f"conformance.cases.{module}"))
    return found


def verdict_for(level: Level, passed: bool, *, strict: bool = False) -> Verdict:
    """The verdict of a case that ran to an outcome (not skipped, not unimplemented).

    A failed SHOULD case is ``NON-STRICT``, ``FAILED`` under ``--strict``; a failed MAY case is always
    ``INFORMATIONAL`` (a MAY is never an obligation).
    """
    if passed:
        return Verdict.OK
    if level is Level.MUST or (level is Level.SHOULD and strict):
        return Verdict.FAILED
    return Verdict.NON_STRICT if level is Level.SHOULD else Verdict.INFORMATIONAL


_EMPHASIS = re.compile(r"\*\*|`")
_SPACE = re.compile(r"\s+")
_REQUIREMENT_TAG = re.compile(r"\s*\[R(?:\d+(?:\.\d+)*|[A-Z])-\d+[a-z]?\]")


def normalize_quote(text: str) -> str:
    """``text`` with requirement and condition id tags (``[R3.3.1-2]``, ``[R4.2-2a]``), Markdown emphasis
    (``**``) and code marks (backticks) removed and whitespace collapsed.

    Quotes and the spec are compared in this form, so a quote may span a line break or an id tag of the spec.
    """
    return _SPACE.sub(" ", _EMPHASIS.sub("", _REQUIREMENT_TAG.sub("", text))).strip()


def quote_found(case: Case, root: Path = REPO_ROOT) -> bool:
    """Whether ``case.requirement`` occurs in ``case.source`` (both normalized by :func:`normalize_quote`)."""
    source = (root / case.source).read_text(encoding="utf-8")
    return normalize_quote(case.requirement) in normalize_quote(source)
