"""Requirement ids and the traceability matrix (conformance.engine.requirements, conformance.engine.matrix).

The spec's every MUST/SHOULD/MAY sentence carries a stable id and the checked-in matrix is current; the
tagging rules (next free number, never reuse, mentions are not requirements) hold on small specs.
"""

from __future__ import annotations

import json

import pytest

from conformance.engine.matrix import COMMAND, MATRIX_JSON, MutantInfo, build, generate, stale
from conformance.engine.requirements import level_of, next_numbers, parse, sentences, tag

SPEC = """# Title

## 1. Intro

### 1.2 Requirements language

The key words "MUST", "SHOULD" and "MAY" are to be read as in RFC 2119.

### 1.4 Things

A server MUST do one thing. It also does another. A client SHOULD listen (always).
Servers MAY rest. The `MUST` in code is a mention.

- item one MUST hold;
- item two is plain.

| Member | Rule |
|---|---|
| `a` | OPTIONAL |
| `b` | never |

```json
{"MUST": "not a requirement inside a code block"}
```

## 2. More

Every thing MUST be fine. [R2-4] A sentence that SHOULD NOT move.
"""


def test_tag_gives_every_normative_sentence_the_next_free_id_of_its_section() -> None:
    tagged, assigned = tag(SPEC)
    assert assigned == ["R1.4-1", "R1.4-2", "R1.4-3", "R1.4-4", "R1.4-5", "R2-5"]
    assert "A server MUST do one thing. [R1.4-1] It also does another." in tagged
    assert "A client SHOULD listen (always). [R1.4-2]\nServers MAY rest. [R1.4-3] The `MUST`" in tagged
    assert "- item one MUST hold; [R1.4-4]" in tagged and "| `a` | OPTIONAL [R1.4-5] |" in tagged
    assert "Every thing MUST be fine. [R2-4] A sentence that SHOULD NOT move. [R2-5]" in tagged
    assert '"MUST": "not a requirement' in tagged and "RFC 2119. [" not in tagged
    assert tag(tagged) == (tagged, [])  # idempotent


def test_parse_reads_levels_and_sentences_without_tags() -> None:
    requirements = parse(tag(SPEC)[0])
    by_id = {r.id: r for r in requirements}
    assert [r.level for r in requirements] == ["MUST", "SHOULD", "MAY", "MUST", "MAY", "MUST", "SHOULD"]
    assert by_id["R1.4-2"].text == "A client SHOULD listen (always)."
    assert by_id["R2-5"].keywords == ("SHOULD NOT",) and by_id["R2-5"].section == "2"
    assert level_of(["MAY", "SHOULD", "MUST NOT"]) == "MUST"


def test_ids_are_never_reused_and_survive_edits() -> None:
    tagged, _ = tag(SPEC)
    # A sentence is deleted and another added: the new one never gets the deleted one's number.
    edited = tagged.replace("Servers MAY rest. [R1.4-3] ", "").replace(
        "It also does another.", "It also does another. A new rule MUST apply."
    )
    again, assigned = tag(edited, retired=["R1.4-3"])
    assert assigned == ["R1.4-6"]
    assert "A new rule MUST apply. [R1.4-6] A client SHOULD listen (always). [R1.4-2]" in again
    # Rewording and moving keep the id.
    moved = again.replace("A server MUST do one thing.", "A server MUST do exactly one thing.")
    assert {r.id for r in parse(moved)} == {r.id for r in parse(again)}


def test_a_duplicate_id_from_two_branches_is_repaired_in_favour_of_the_recorded_sentence() -> None:
    tagged, _ = tag(SPEC)
    twice = tagged.replace("- item two is plain.", "- item two MUST be new; [R1.4-1]")
    with pytest.raises(ValueError, match=r"\[R1.4-1\] is also used"):
        parse(twice)
    repaired, assigned = tag(twice, known={"R1.4-1": "A server MUST do one thing."})
    assert assigned == ["R1.4-6"] and "- item two MUST be new; [R1.4-6]" in repaired
    assert "A server MUST do one thing. [R1.4-1]" in repaired


def test_untagged_and_keywordless_tags_are_reported_with_their_lines() -> None:
    with pytest.raises(ValueError, match="line 11: untagged normative sentence: A server MUST do one thing"):
        parse(SPEC)
    with pytest.raises(ValueError, match=r"\[R1.4-1\] tags a sentence without an RFC 2119 key word"):
        parse(tag(SPEC)[0].replace("A server MUST do one thing.", "A server does one thing."))


def test_next_numbers_count_every_id_ever_used() -> None:
    assert next_numbers(["R3.1-2", "R3.1-7", "R10-1", "RA-3"]) == {"3.1": 8, "10": 2, "A": 4}


def test_sentences_split_at_sentence_ends_only() -> None:
    text = "## 3. X\n\nSee §3.3. The rule (for example `a.b`) holds. it goes on, e.g. here.\n"
    assert [s.text for s in sentences(text)] == [
        "See §3.3.",
        "The rule (for example `a.b`) holds. it goes on, e.g. here.",
    ]


def test_matrix_counts_and_problems() -> None:
    from conformance.engine.case import Case, Level

    requirements = parse(tag(SPEC)[0])
    case = Case("1.4.1", "§1.4", Level.MUST, "q", "d", "e", requirements=("R1.4-1", "R9-9"))
    mutant = MutantInfo("m", "breaks it", ("R1.4-1",), ("1.4.1",))
    stray = MutantInfo("n", "breaks another", ("R1.4-4",), ("1.4.1",))
    data = build(requirements, [case], [mutant, stray], {"R2-4": "a client requirement"})
    rows = {row["id"]: row for row in data["requirements"]}
    assert rows["R1.4-1"]["status"] == "mutant" and rows["R1.4-1"]["cases"] == ["1.4.1"]
    assert rows["R2-4"]["status"] == "unobservable" and rows["R1.4-4"]["status"] == "open"
    assert data["counts"]["by_level"] == {"MUST": 3, "SHOULD": 2, "MAY": 2}
    assert data["counts"]["with_mutant"] == {"MUST": 1, "SHOULD": 0, "MAY": 0}
    assert data["gaps"] == ["R1.4-4: no case"]
    assert data["problems"] == [
        "case 1.4.1 declares R9-9, which the spec does not have",
        "mutant n breaks R1.4-4 but none of its cases ['1.4.1'] tests R1.4-4",
    ]


CONDITIONS = """## 4. Requests

### 4.2 Cancel

A cancel naming a request that is queued [R4.2-2a] or active [R4.2-2b] MUST cancel it. [R4.2-2] A plain
one MUST hold. [R4.2-3]

| Member | Refusal |
|---|---|
| `a` | `invalid_a` [R4.2-4a] |
| `b` | `invalid_b` [R4.2-4b] |

A server MUST refuse a member by its row: [R4.2-4]
"""


def test_conditions_follow_their_sentence_with_their_clause_and_level() -> None:
    requirements = parse(CONDITIONS)
    assert [r.id for r in requirements] == [
        "R4.2-2", "R4.2-2a", "R4.2-2b", "R4.2-3", "R4.2-4", "R4.2-4a", "R4.2-4b"
    ]  # fmt: skip
    by_id = {r.id: r for r in requirements}
    assert by_id["R4.2-2"].conditions == ("R4.2-2a", "R4.2-2b") and not by_id["R4.2-3"].conditions
    assert by_id["R4.2-2"].text == "A cancel naming a request that is queued or active MUST cancel it."
    assert by_id["R4.2-2a"].text == "A cancel naming a request that is queued"
    assert by_id["R4.2-2b"].text == "or active" and by_id["R4.2-2b"].sentence == "R4.2-2"
    assert by_id["R4.2-4b"].text == "(row `b`) `invalid_b`" and by_id["R4.2-4b"].level == "MUST"
    assert tag(CONDITIONS) == (CONDITIONS, [])  # condition tags neither cut nor need a sentence tag
    assert next_numbers(["R4.2-4b", "R4.2-2"]) == {"4.2": 5}


def test_a_single_or_orphan_condition_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"\[R4.2-3a\] is the only condition of R4.2-3"):
        parse(CONDITIONS.replace("A plain\none MUST hold.", "A plain\none MUST hold [R4.2-3a]."))
    with pytest.raises(ValueError, match=r"\[R4.2-9a\] names a condition of R4.2-9"):
        parse(CONDITIONS + "\nMore [R4.2-9a] text [R4.2-9b].\n")


def test_matrix_counts_conditions_and_refuses_citing_a_split_sentence() -> None:
    from conformance.engine.case import Case, Level

    requirements = parse(CONDITIONS)
    queued = Case("4.2.1", "§4.2", Level.MUST, "q", "d", "e", requirements=("R4.2-2a",))
    coarse = Case("4.2.2", "§4.2", Level.MUST, "q", "d", "e", requirements=("R4.2-2",))
    mutant = MutantInfo("m", "ignores a queued cancel", ("R4.2-2a",), ("4.2.1",))
    data = build(requirements, [queued, coarse], [mutant], {})
    rows = {row["id"]: row for row in data["requirements"]}
    assert rows["R4.2-2"]["status"] == "split" and rows["R4.2-2a"]["status"] == "mutant"
    assert data["counts"]["sentences"] == 3 and data["counts"]["conditions"] == 5
    assert data["counts"]["by_level"]["MUST"] == 5
    assert data["gaps"] == ["R4.2-2b: no case", "R4.2-3: no case", "R4.2-4a: no case", "R4.2-4b: no case"]
    assert data["problems"] == ["case 4.2.2 declares R4.2-2, which is split: cite R4.2-2a, R4.2-2b"]
    assert queued.clauses == ("R4.2-2", "R4.2-2a")  # findings are recorded on the sentence


# --- the real spec and matrix ----------------------------------------------------------------------------


def test_spec_is_tagged_and_the_matrix_is_current() -> None:
    problems = stale()
    hint = f"Run `{COMMAND}` from the repository root and commit the result."
    assert not problems, "\n".join([*problems, hint])


def test_matrix_references_only_existing_ids() -> None:
    data = generate().data
    assert data["problems"] == [], "\n".join(data["problems"])


def test_every_observable_must_condition_has_a_case_and_a_mutant_that_proves_it() -> None:
    """Issue 31 point 5: 0 observable MUST conditions (or unsplit sentences) without a case and a mutant."""
    data = generate().data
    assert data["gaps"] == [], "\n".join(data["gaps"])


def test_an_id_in_the_spec_is_never_listed_as_retired() -> None:
    from conformance.engine.case import REPO_ROOT

    data = json.loads((REPO_ROOT / MATRIX_JSON).read_text(encoding="utf-8"))
    live = {row["id"] for row in data["requirements"]}
    assert not live & set(data["retired"]), sorted(live & set(data["retired"]))


def test_checked_in_matrix_is_valid_json_with_counts() -> None:
    from conformance.engine.case import REPO_ROOT

    data = json.loads((REPO_ROOT / MATRIX_JSON).read_text(encoding="utf-8"))
    sentence_rows = [row for row in data["requirements"] if "sentence" not in row]
    assert data["counts"]["sentences"] == len(sentence_rows) >= 60
    split = [row for row in sentence_rows if row["status"] == "split"]
    assert data["counts"]["conditions"] == len(data["requirements"]) - len(split)
    assert {row["level"] for row in data["requirements"]} == {"MUST", "SHOULD", "MAY"}


def test_a_case_declares_the_tagged_sentence_it_quotes() -> None:
    """A case whose quoted requirement lies in (or contains) a tagged sentence declares that sentence's id
    (unless no client can observe that sentence: a case may quote a client's rule to explain itself)."""
    from conformance.engine.case import REPO_ROOT, catalogue, normalize_quote
    from conformance.engine.unobservable import UNOBSERVABLE

    requirements = parse((REPO_ROOT / "spec/PROTOCOL.md").read_text(encoding="utf-8"))
    sentences_by_id = {r.id: normalize_quote(r.text) for r in requirements if r.sentence is None}
    missing = {}
    for case in catalogue():
        if case.source != "spec/PROTOCOL.md":
            continue
        quote = normalize_quote(case.requirement)
        quoted = {rid for rid, text in sentences_by_id.items() if quote in text or text in quote}
        quoted -= set(UNOBSERVABLE)
        declared = {r.sentence for r in case.requirements}  # a condition declares its sentence
        if quoted - declared:
            missing[case.id] = sorted(quoted - declared)
    assert not missing, f"cases that quote a tagged sentence without declaring its id: {missing}"
