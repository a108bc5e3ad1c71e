"""The case catalogue: ids, quotes, levels and the bad-input table, checked without running any case."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from conformance.engine import clauses
from conformance.engine.badinputs import ROWS
from conformance.engine.case import Case, Level, catalogue, normalize_quote, quote_found
from conformance.mutants import MUTANTS

CASES = catalogue()


def test_catalogue_is_large_and_ids_are_unique() -> None:
    ids = Counter(case.id for case in CASES)
    assert len(CASES) >= 150
    assert [i for i, n in ids.items() if n > 1] == []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_requirement_is_quoted_from_its_source(case: Case) -> None:
    assert quote_found(case), f"{case.id}: {case.requirement!r} does not occur in {case.source}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_id_matches_section(case: Case) -> None:
    if case.id.startswith("AGENT-"):
        assert case.section == "agent"
        return
    assert re.fullmatch(r"§\d+(\.\d+)*", case.section), case.section
    # An id starts with its section's number, except the §9 registry rows (each quotes its rule where §3 or
    # §4 states it) and cases that quote the sentence stating their rule in another section.
    quoted_elsewhere = ("9.1.", "9.2.", "4.1.1", "4.1.7", "4.1.8", "3.1.4")
    assert case.id.split(".")[0] == case.section[1:].split(".")[0] or case.id.startswith(quoted_elsewhere), (
        case.id
    )


def test_every_level_is_used_and_mostly_must() -> None:
    levels = Counter(case.level for case in CASES)
    assert set(levels) == {Level.MUST, Level.SHOULD, Level.MAY}
    assert levels[Level.MUST] > 0.9 * len(CASES)


def test_bad_input_table_has_at_least_forty_rows_each_with_its_own_case() -> None:
    assert len(ROWS) >= 40
    ids = {row.case.id for row in ROWS}
    assert len(ids) == len(ROWS) and ids <= {case.id for case in CASES}
    assert {row.data_type for row in ROWS} == {"BINARY", "UTF8"}
    for row in ROWS:
        if row.data_type == "UTF8":
            row.frame.decode("utf-8")  # invalid UTF-8 in a TEXT frame would fail the WebSocket (§2.5)


def test_every_mutant_is_caught_by_existing_cases() -> None:
    ids = {case.id for case in CASES}
    assert len([m for m in MUTANTS.values() if m.caught_by]) >= 8
    for mutant in MUTANTS.values():
        assert set(mutant.caught_by) <= ids and set(mutant.observed_by) <= ids, mutant.name
    # Only the controls may go uncaught: the unbroken server and those without OPTIONAL cancel,
    # utterances or lexicon (§1.5, §1.7). A mutant no case catches is caught by the run, on cases that see
    # it (issue 30).
    uncaught = {m.name for m in MUTANTS.values() if not m.caught_by and not m.observed_by}
    assert uncaught == {"base", "no-cancel", "no-utterances", "no-lexicon"}


def test_normalize_quote_ignores_emphasis_and_line_breaks() -> None:
    assert normalize_quote("a **MUST**\n   `b`") == "a MUST b"


def test_every_rule_of_the_reader_has_a_requirement_some_case_tests() -> None:
    """A finding of the observer always has a case that judges it (conformance.engine.clauses maps rule to
    id)."""
    from protocol.reader import OutputRule

    tested = {r.sentence for case in CASES for r in case.requirements}  # a condition tests its sentence
    assert set(clauses.RULES) == set(OutputRule)
    untested = {rule.name: rid for rule, rid in clauses.RULES.items() if rid not in tested}
    # The describe and marks rules are judged by their cases once they exist (issues 14, 15).
    assert set(untested.values()) <= {"R4.4-4", "R5.5-4", "R5.5-6", "R5.5-7"}, untested


def test_two_mutants_of_one_name_are_refused() -> None:
    """A second mutant of a name would replace the first in :data:`MUTANTS` silently, its checks with it."""
    from conformance.mutants import MUTANTS, _by_name

    first = MUTANTS["start-twice"]
    with pytest.raises(ValueError, match="two mutants are named 'start-twice'"):
        _by_name((first, MUTANTS["base"], first))
    assert list(_by_name((first, MUTANTS["base"]))) == ["start-twice", "base"]
