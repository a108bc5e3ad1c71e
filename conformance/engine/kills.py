"""Kill sets: which mutants each conformance case kills, and the rule that they only shrink with a reason
(issue 31, point 6: "cheaper must not mean weaker").

Two records feed them, both checked in:

* ``conformance/mutants/isolation.json``: per hand-written mutant, the cases the whole suite FAILED against it
  (``python -m conformance.mutants.teeth --isolation``);
* ``conformance/mutation/kills.json`` (:data:`RECORD`): per automatic mutant of the shipped server, the cases
  (and run-level clause rows) that FAILED against it, every one of them, from the cases that make the server
  run its line (``python -m conformance.mutation --record``). An automatic mutant is keyed by its file and
  function and its change, as ``survivors.toml`` matches them (mutmut's numbers move; the change does not),
  and named by :func:`mutant_id`, a digest of that key.

A kill set shrinks when a (mutant, case) pair a record holds is no longer a kill. Neither ``--record`` nor
``python -m conformance.mutants.teeth --isolation`` drops such a pair by itself: each keeps it, prints it and
exits 1, unless :data:`CHANGES`
(``conformance/kills-changes.toml``) gives the pair a reason::

    [[shrink]]
    mutant = "3f2a9c1d"        # an automatic mutant's id, or a hand-written mutant's name
    case = "9.1.12"
    reason = "case 9.1.12 no longer sends a BOM: §9.1 dropped that sentence (#40)"

``make test`` re-runs a fixed sample of recorded pairs (``tests/conformance/test_kills.py``): each must still
FAIL, or be listed there.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CHANGES",
    "ISOLATION",
    "RECORD",
    "KillsError",
    "Shrink",
    "automatic_kills",
    "by_case",
    "hand_kills",
    "keep_hand_kills",
    "load_changes",
    "load_record",
    "lost_pairs",
    "markdown",
    "merge",
    "mutant_id",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
ISOLATION = "conformance/mutants/isolation.json"
RECORD = "conformance/mutation/kills.json"
CHANGES = "conformance/kills-changes.toml"

Key = tuple[str, str]
"""An automatic mutant: ``("path function", change)`` (``conformance.mutation.report.triage_key``)."""


class KillsError(ValueError):
    """A kill record or the changes file is not valid: the message names the file and the entry."""


@dataclass(frozen=True, slots=True)
class Shrink:
    """One (mutant, case) pair a record held that is no longer a kill, and why (empty: no reason given)."""

    mutant: str
    case: str
    reason: str = ""


def mutant_id(function: str, change: str) -> str:
    """The short, stable name of an automatic mutant: 8 hex digits of the SHA-256 of its key."""
    return hashlib.sha256(f"{function}\n{change}".encode()).hexdigest()[:8]


def load_record(path: Path) -> dict[Key, dict[str, Any]]:
    """The automatic mutants' record (:data:`RECORD`): key → entry (``id``, ``function``, ``change``,
    ``status``, ``cases``, ``clauses``). A missing file is an empty record.

    Raises:
        KillsError: not JSON, or an entry without ``function``, ``change``, ``status`` or ``cases``.
    """
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["mutants"]
    except (ValueError, KeyError, TypeError) as exc:
        raise KillsError(f"{path}: not a kill record ({exc})") from None
    found: dict[Key, dict[str, Any]] = {}
    for number, entry in enumerate(entries, 1):
        needed = ("function", "change", "status", "cases")
        if not isinstance(entry, dict) or not all(k in entry for k in needed):
            raise KillsError(f"{path}: mutant {number}: needs function, change, status and cases")
        found[(entry["function"], entry["change"])] = {**entry, "clauses": list(entry.get("clauses", []))}
    return found


def write_record(path: Path, record: Mapping[Key, Mapping[str, Any]], about: str) -> None:
    """Write ``record`` (key → entry) to ``path``, entries in key order; ``about`` says how it was made."""
    entries = [
        {
            "id": mutant_id(*key),
            "function": key[0],
            "change": key[1],
            "status": entry["status"],
            "cases": sorted(entry["cases"]),
            "clauses": sorted(entry.get("clauses", [])),
        }
        for key, entry in sorted(record.items())
    ]
    text = json.dumps({"about": about, "mutants": entries}, indent=1, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")


def load_changes(path: Path) -> dict[tuple[str, str], Shrink]:
    """The reasons kill sets may shrink (:data:`CHANGES`): (mutant, case) → :class:`Shrink`. A missing file
    gives none.

    Raises:
        KillsError: not TOML, a ``[[shrink]]`` without ``mutant``, ``case`` or ``reason``, or a pair twice.
    """
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise KillsError(f"{path}: {exc}") from None
    found: dict[tuple[str, str], Shrink] = {}
    for number, entry in enumerate(data.get("shrink", []), 1):
        values = [str(entry.get(k, "")).strip() for k in ("mutant", "case", "reason")]
        if not all(values):
            raise KillsError(f"{path}: shrink {number}: needs mutant, case and reason")
        pair = (values[0], values[1])
        if pair in found:
            raise KillsError(f"{path}: shrink {number}: {pair[0]} / {pair[1]} is listed twice")
        found[pair] = Shrink(*values)
    return found


def lost_pairs(
    mutant: str, recorded: Iterable[str], failed: Iterable[str], changes: Mapping[tuple[str, str], Shrink]
) -> list[Shrink]:
    """The recorded kills of ``mutant`` (case ids or clause rows) that ``failed`` no longer holds, each with
    its reason from ``changes`` (``""`` when none: a shrink that fails the check)."""
    now = set(failed)
    return [
        changes.get((mutant, case), Shrink(mutant, case)) for case in sorted(set(recorded)) if case not in now
    ]


def merge(
    old: Mapping[Key, Mapping[str, Any]],
    new: Mapping[Key, Mapping[str, Any]],
    changes: Mapping[tuple[str, str], Shrink],
) -> tuple[dict[Key, dict[str, Any]], list[Shrink]]:
    """The record after a run: ``old`` with the entries of ``new`` replacing theirs, except that a kill
    ``old`` held and ``new`` lost stays unless ``changes`` gives it a reason.

    Returns:
        The merged record, and every lost kill (those with ``reason == ""`` were kept).
    """
    merged = {key: dict(entry) for key, entry in old.items()}
    lost: list[Shrink] = []
    for key, entry in new.items():
        row = {**entry, "cases": list(entry["cases"]), "clauses": list(entry.get("clauses", []))}
        before = old.get(key)
        if before is not None:
            ident = mutant_id(*key)
            for field in ("cases", "clauses"):
                gone = lost_pairs(ident, before.get(field, []), row[field], changes)
                lost += gone
                row[field] = sorted({*row[field], *(s.case for s in gone if not s.reason)})
            if (row["cases"] or row["clauses"]) and row["status"] == "survived":
                row["status"] = before["status"]  # kills kept without a reason: the record still claims them
        merged[key] = row
    return merged, lost


def keep_hand_kills(
    previous: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    changes: Mapping[tuple[str, str], Shrink],
) -> tuple[dict[str, dict[str, Any]], list[Shrink]]:
    """``isolation.json``'s entries after ``--isolation`` ran the mutants of ``new`` (name → ``{"row",
    "failed", ...}``): as :func:`merge`, a case ``previous`` recorded FAILED that the new run did not fail
    stays in ``failed`` unless ``changes`` gives the pair a reason.

    Returns:
        The merged entries, and every lost kill (those with ``reason == ""`` were kept).
    """
    merged = {name: dict(entry) for name, entry in previous.items()}
    lost: list[Shrink] = []
    for name, entry in new.items():
        gone = lost_pairs(name, previous.get(name, {}).get("failed", []), entry["failed"], changes)
        lost += gone
        kept = {s.case for s in gone if not s.reason}
        merged[name] = {**entry, "failed": sorted({*entry["failed"], *kept})}
    return merged, lost


def hand_kills(isolation: Mapping[str, Any]) -> dict[str, list[str]]:
    """Case id → the hand-written mutants it FAILED under the whole suite (``isolation.json`` inverted)."""
    found: dict[str, set[str]] = {}
    for name, entry in isolation.get("mutants", {}).items():
        for case in entry.get("failed", []):
            found.setdefault(case, set()).add(name)
    return {case: sorted(names) for case, names in found.items()}


def automatic_kills(record: Mapping[Key, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Case id → the ids (:func:`mutant_id`) of the automatic mutants it FAILED (clause rows left out)."""
    found: dict[str, set[str]] = {}
    for key, entry in record.items():
        for case in entry["cases"]:
            found.setdefault(case, set()).add(mutant_id(*key))
    return {case: sorted(ids) for case, ids in found.items()}


def by_case(case_ids: Sequence[str], root: Path = REPO_ROOT) -> dict[str, dict[str, list[str]]]:
    """Per case of ``case_ids``, its kill set from the checked-in records: ``{"hand": [mutant names],
    "automatic": [mutant ids]}``.

    Raises:
        KillsError: a record is not valid.
    """
    path = root / ISOLATION
    try:
        isolation = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError as exc:
        raise KillsError(f"{path}: {exc}") from None
    hand, automatic = hand_kills(isolation), automatic_kills(load_record(root / RECORD))
    return {c: {"hand": hand.get(c, []), "automatic": automatic.get(c, [])} for c in case_ids}


def markdown(kills: Mapping[str, Mapping[str, Sequence[str]]]) -> list[str]:
    """The matrix's "Kill sets" section: per case, how many mutants of each kind it kills, and which."""
    killing = sum(1 for k in kills.values() if k["hand"] or k["automatic"])
    lines = [
        "## Kill sets",
        "",
        f"{killing} of {len(kills)} cases kill at least one mutant. Hand-written mutants: "
        f"`{ISOLATION}` (whole suite per mutant); automatic ones (mutmut, by id): `{RECORD}`. "
        f"A kill set shrinks only with a reason in `{CHANGES}`.",
        "",
        "| case | hand | automatic | mutants |",
        "|---|---|---|---|",
    ]
    for case, k in kills.items():
        names = ", ".join([*k["hand"], *k["automatic"]]) or "none"
        lines.append(f"| {case} | {len(k['hand'])} | {len(k['automatic'])} | {names} |")
    return [*lines, ""]
