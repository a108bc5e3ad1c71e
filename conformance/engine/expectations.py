"""Expectations (``--expect FILE``): the cases and clauses a server is known to fail, each with its reason.

A server author records known failures in a TOML file, as web-platform-tests keeps expectation metadata
per implementation, and the run passes when exactly those fail::

    # conformance-expectations.toml
    [cases."4.2.4"]
    reason = "a running model pass is not interrupted yet"
    issue = "https://example.org/my-tts/issues/12"      # optional

    [clauses."R6.1-2"]                                 # a clause judged over the whole run (PROTOCOL.md §1)
    reason = "audio after the cancelled bracket; same issue"

Each entry needs a non-empty ``reason``; ``issue`` is optional. A case listed here that fails is
*expected* (reported, not counted against the run); one that passes is an *unexpected pass*, which fails
the run until the file is updated, so the file never outlives the defect it excuses. A case listed but not
run (``--cases``) is neither. Case ids are those of the suite's catalogue
(:func:`conformance.engine.case.catalogue`), clause ids those of the traceability matrix
(``conformance/matrix.json``); any other id, any other key and any entry without a reason is refused with
one line (:class:`ExpectationsError`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Expectations", "ExpectationsError", "Expected", "Judgement", "judge", "known_ids", "load"]

_ENTRY_KEYS = {"reason", "issue"}


class ExpectationsError(Exception):
    """The expectations file cannot be used; the message is one line naming the file and what is wrong."""


@dataclass(frozen=True)
class Expected:
    """One known failure: why it fails, and where that is tracked (``issue``, optional)."""

    reason: str
    issue: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"reason": self.reason, "issue": self.issue}


@dataclass(frozen=True)
class Expectations:
    """The parsed file: known failures by case id and by clause (requirement) id."""

    path: str
    cases: Mapping[str, Expected] = field(default_factory=dict)
    clauses: Mapping[str, Expected] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """A run held against its expectations.

    Attributes:
        expected: ids (cases and clauses) that failed as the file says.
        unexpected_failures: ids that failed and are not in the file.
        unexpected_passes: ids in the file that ran and did not fail.
    """

    expected: list[str]
    unexpected_failures: list[str]
    unexpected_passes: list[str]

    @property
    def passed(self) -> bool:
        """The run passes: exactly the expected ones failed."""
        return not self.unexpected_failures and not self.unexpected_passes


def known_ids() -> tuple[set[str], set[str]]:
    """(every case id of the suite, every requirement id of the spec's matrix)."""
    from conformance.engine.case import catalogue
    from conformance.engine.shipped import requirement_ids

    return {case.id for case in catalogue()}, requirement_ids()


def load(path: str | Path, known: tuple[set[str], set[str]] | None = None) -> Expectations:
    """Read and check an expectations file.

    Args:
        path: the TOML file.
        known: (case ids, clause ids) to check against; :func:`known_ids` when omitted.

    Raises:
        ExpectationsError: no such file, not TOML, an unknown table, key or id, or an entry without reason.
    """
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExpectationsError(f"{path}: no such expectations file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectationsError(f"{path}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExpectationsError(f"{path}: not TOML ({exc})") from None
    unknown = sorted(set(data) - {"cases", "clauses"})
    if unknown:
        raise ExpectationsError(f'{path}: unknown table {unknown[0]!r}: only [cases."ID"] and [clauses."ID"]')
    case_ids, clause_ids = known if known is not None else known_ids()
    tables = {}
    for kind, ids in (("cases", case_ids), ("clauses", clause_ids)):
        table = data.get(kind, {})
        if not isinstance(table, dict):
            raise ExpectationsError(f"{path}: {kind} must be a table of entries")
        tables[kind] = {key: _entry(path, kind, key, value, ids) for key, value in table.items()}
    return Expectations(str(path), tables["cases"], tables["clauses"])


def _entry(path: str | Path, kind: str, key: str, value: object, ids: set[str]) -> Expected:
    name = f'{kind}."{key}"'
    if key not in ids:
        what = "case" if kind == "cases" else "clause"
        raise ExpectationsError(f"{path}: [{name}]: there is no {what} {key!r} in this suite")
    if not isinstance(value, dict):
        raise ExpectationsError(f"{path}: [{name}] must be a table with a reason")
    extra = sorted(set(value) - _ENTRY_KEYS)
    if extra:
        raise ExpectationsError(f"{path}: [{name}]: unknown key {extra[0]!r} (reason, issue)")
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ExpectationsError(f"{path}: [{name}] needs a reason")
    issue = value.get("issue")
    if issue is not None and not isinstance(issue, str):
        raise ExpectationsError(f"{path}: [{name}]: issue must be a string (a link)")
    return Expected(reason.strip(), issue)


def judge(
    expectations: Expectations,
    *,
    failed_cases: Iterable[str],
    ran_cases: Iterable[str],
    failed_clauses: Iterable[str],
    judged_clauses: Iterable[str],
) -> Judgement:
    """Hold a run's failures against ``expectations``.

    Args:
        failed_cases: ids of the cases whose verdict fails the run.
        ran_cases: ids of every case that ran (a listed case that did not run is neither expected nor an
            unexpected pass).
        failed_clauses: ids of the clauses failed over the whole run.
        judged_clauses: ids of every clause the run could judge (those of the cases that ran).
    """
    failed = set(failed_cases) | set(failed_clauses)
    listed = set(expectations.cases) | set(expectations.clauses)
    ran = (set(ran_cases) & set(expectations.cases)) | (set(judged_clauses) & set(expectations.clauses))
    return Judgement(
        expected=sorted(failed & listed),
        unexpected_failures=sorted(failed - listed),
        unexpected_passes=sorted(ran - failed),
    )
