"""Typed ids: a case's id and a requirement's id, each checked once when made and printed distinguishably.

A case id (``3.2.1``), a requirement id (``R3.2-1``) and a section (``§3.2``) look alike in a report. The
types keep them apart in code, and :func:`label` shows a case id as ``case 3.2.1`` wherever people read it
next to the others; a requirement id carries its ``R`` and a section its ``§`` already. Both types are
``str`` subclasses: they compare, hash and serialise as the bare id, so every report file (``index.json``,
``cases/<id>.json``, ``junit.xml``, ``matrix.json``) keeps its format.
"""

from __future__ import annotations

import re

__all__ = ["CASE_ID", "REQUIREMENT_ID", "CaseId", "RequirementId", "label"]

CASE_ID = re.compile(r"(?:\d+(?:\.\d+)*(?:\.F\d+)?|AGENT-\d+)")
"""A case id: the spec section's numbers then a running number (``3.3.4``), ``.F<n>`` for a property-based
case (``9.1.F1``), or ``AGENT-<n>`` for an agent case."""

REQUIREMENT_ID = re.compile(r"R(?:\d+(?:\.\d+)*|[A-Z])-\d+[a-z]?")
"""A requirement id, without its brackets: ``R`` and the section, ``-`` and a number (``R3.3.1-2``; ``RA-1``
in Appendix A), and for one condition of a sentence that has several, a letter (``R4.2-2a``); see
:mod:`conformance.engine.requirements`."""


class CaseId(str):
    """The id of one conformance case (:data:`CASE_ID`), e.g. ``CaseId("6.2.1")``.

    Raises:
        ValueError: ``value`` is not a case id (the message names it).
    """

    __slots__ = ()

    def __new__(cls, value: str) -> CaseId:
        if isinstance(value, CaseId):
            return value
        if not isinstance(value, str) or not CASE_ID.fullmatch(value):
            raise ValueError(f"malformed case id {value!r}")
        return super().__new__(cls, value)

    @property
    def label(self) -> str:
        """The id as people read it beside requirement ids and sections: ``case 6.2.1``."""
        return f"case {self}"

    def __repr__(self) -> str:
        return f"CaseId({str(self)!r})"


class RequirementId(str):
    """The id of one normative sentence of spec/PROTOCOL.md, or of one condition of it
    (:data:`REQUIREMENT_ID`), e.g. ``RequirementId("R3.3.1-2")``, ``RequirementId("R4.2-2a")``; printed as it
    is written in the spec's tag, ``R3.3.1-2``.

    Raises:
        ValueError: ``value`` is not a requirement id (the message names it).
    """

    __slots__ = ()

    def __new__(cls, value: str) -> RequirementId:
        if isinstance(value, RequirementId):
            return value
        if not isinstance(value, str) or not REQUIREMENT_ID.fullmatch(value):
            raise ValueError(f"malformed requirement id {value!r} (expected e.g. 'R3.3.1-2')")
        return super().__new__(cls, value)

    @property
    def label(self) -> str:
        """The id as people read it: ``R3.3.1-2`` (the ``R`` already tells it from a case or a section)."""
        return str(self)

    @property
    def sentence(self) -> RequirementId:
        """The id of the sentence it belongs to: itself for a sentence, ``R4.2-2`` for ``R4.2-2a``."""
        return RequirementId(self[:-1]) if self[-1].isalpha() else self

    @property
    def is_condition(self) -> bool:
        """Whether it names one condition of a sentence (it ends with a letter)."""
        return self[-1].isalpha()

    def __repr__(self) -> str:
        return f"RequirementId({str(self)!r})"


def label(key: str) -> str:
    """``key`` as people read it in a report: ``case 6.2.1`` for a case id, anything else unchanged (a
    requirement id, a section, or where a finding was seen outside any case)."""
    return CaseId(key).label if CASE_ID.fullmatch(key) else key
