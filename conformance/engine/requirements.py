"""The normative sentences of spec/PROTOCOL.md and their stable ids (no I/O beyond reading a string).

Every sentence of the spec that uses an RFC 2119 key word in capitals (PROTOCOL.md §1.2: MUST, MUST NOT,
REQUIRED, SHALL, SHALL NOT, SHOULD, SHOULD NOT, RECOMMENDED, NOT RECOMMENDED, MAY, OPTIONAL) carries a
visible id at its end, ``[R<section>-<n>]``, for example ``[R3.3.1-2]``: the second requirement given an id
in §3.3.1. Code, cases, findings and reports cite requirements by that id (without the brackets).

Rules, so that ids stay stable while the spec changes:

* an id is assigned once, by :func:`tag`, and never changes: moving or rewording its sentence keeps it;
* a new sentence gets the next free number of the section it is in, counting every id that section has
  ever had (ids of deleted sentences are *retired*, never reused: the matrix keeps them);
* a key word in double quotes (``"MUST"``) or in a code span is a mention, not a requirement.

Conditions (PROTOCOL.md §1.2): a sentence that states several obligations a server can break one at a time
("queued *or* active", "one error frame *and* no synthesis_start") names each with the sentence's id and a
letter, ``[R4.2-2a]``, written right after the clause (or the table row, or the list item) it covers; the
sentence keeps its own tag at its end. A condition tag does not end a sentence. A condition's letters are
assigned by hand, in order, and like numbers are never changed nor reused; a sentence that has condition
ids is cited by them, not by its own id (:mod:`conformance.engine.matrix`). A sentence with one obligation
(an enumeration the server meets as one rule) gets none.

What a "sentence" is: the spec is cut into blocks (paragraphs, list items, table cells; headings and code
blocks are skipped) and each block into sentences at ``.``, ``!`` or ``?`` followed by white space and a
capital, a parenthesis, an emphasis or code mark, or the end of the block. An id tag always ends the
sentence it follows, so once tagged, a sentence's extent never depends on the heuristic again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.engine.ids import RequirementId

__all__ = [
    "CONDITION_TAG",
    "KEYWORD_LEVEL",
    "TAG",
    "Requirement",
    "Sentence",
    "conditions",
    "level_of",
    "next_numbers",
    "parse",
    "section_titles",
    "sentences",
    "tag",
]

TAG = re.compile(r"\[R(?P<section>\d+(?:\.\d+)*|[A-Z])-(?P<number>\d+)\]")
"""A requirement id tag as it appears in the spec: ``[R3.3.1-2]`` (``[RA-1]`` in Appendix A)."""

CONDITION_TAG = re.compile(r"\[R(?P<section>\d+(?:\.\d+)*|[A-Z])-(?P<number>\d+)(?P<letter>[a-z])\]")
"""A condition id tag: ``[R4.2-2a]``, after the clause of sentence ``R4.2-2`` it names (see above)."""

_ANY_TAG = re.compile(r"\[R(?:\d+(?:\.\d+)*|[A-Z])-\d+[a-z]?\]")

KEYWORD_LEVEL = {
    "MUST NOT": "MUST",
    "MUST": "MUST",
    "REQUIRED": "MUST",
    "SHALL NOT": "MUST",
    "SHALL": "MUST",
    "SHOULD NOT": "SHOULD",
    "SHOULD": "SHOULD",
    "NOT RECOMMENDED": "SHOULD",
    "RECOMMENDED": "SHOULD",
    "MAY": "MAY",
    "OPTIONAL": "MAY",
}
"""Each key word of RFC 2119 / RFC 8174 and the level it states (the three levels of
conformance.engine.case)."""

_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}
_KEYWORD = re.compile(
    r"(?<![A-Za-z])(MUST NOT|MUST|REQUIRED|SHALL NOT|SHALL|SHOULD NOT|SHOULD|NOT RECOMMENDED|RECOMMENDED|"
    r"MAY|OPTIONAL)(?![A-Za-z])"
)
_HEADING = re.compile(r"^(#{1,6})\s+(?:(?P<number>\d+(?:\.\d+)*)\.?\s|Appendix (?P<appendix>[A-Z])\b)?")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,})\s*$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}")
# A sentence ends at . ! or ? (and any closing marks) followed by white space; it is a boundary when the
# next text starts like a sentence (see _starts_sentence) or the block ends.
_END = re.compile(r"[.!?][)\"'*`\]]*(?=\s|$)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_QUOTED = re.compile(r"[\"“][^\"”\n]{0,40}[\"”]")


@dataclass(frozen=True)
class Sentence:
    """One sentence of the spec.

    Attributes:
        section: the number of the innermost numbered heading above it (``"3.3.1"``; ``"A"`` for
            Appendix A; ``"0"`` before the first numbered heading).
        start: offset of its first character in the spec text.
        end: offset just after its last character, before its tag (where :func:`tag` inserts one).
        text: the sentence as written, white space collapsed, its tag removed.
        id: its requirement id (``"R3.3.1-2"``), or ``None`` if it carries no tag.
        keywords: the RFC 2119 key words it uses, in order (mentions in quotes or code excluded).
        line: the 1-based line it starts on.
    """

    section: str
    start: int
    end: int
    text: str
    id: str | None
    keywords: tuple[str, ...]
    line: int

    @property
    def normative(self) -> bool:
        """Whether it uses a key word (and so needs an id)."""
        return bool(self.keywords)


@dataclass(frozen=True)
class Requirement:
    """A tagged normative sentence: what the matrix lists.

    Attributes:
        id: ``"R3.3.1-2"`` (:class:`~conformance.engine.ids.RequirementId`).
        section: ``"3.3.1"``.
        level: the strongest level its key words state: ``"MUST"``, ``"SHOULD"`` or ``"MAY"``.
        keywords: its key words, in order.
        text: the sentence (Markdown kept, white space collapsed, tag removed).
        line: the 1-based line of the spec it starts on.
        sentence: for a condition, the id of its sentence (``"R4.2-2"``); ``None`` for a sentence.
        conditions: for a sentence split into conditions, their ids in order (empty otherwise).
    """

    id: RequirementId
    section: str
    level: str
    keywords: tuple[str, ...]
    text: str
    line: int
    sentence: RequirementId | None = None
    conditions: tuple[RequirementId, ...] = ()


def level_of(keywords: Iterable[str]) -> str:
    """The strongest level among ``keywords`` (MUST before SHOULD before MAY).

    Raises:
        ValueError: no key word given.
    """
    levels = [KEYWORD_LEVEL[k] for k in keywords]
    if not levels:
        raise ValueError("no RFC 2119 key word")
    return min(levels, key=_ORDER.__getitem__)


def _keywords(text: str) -> tuple[str, ...]:
    # Mentions are not uses: blank out code spans and short quoted words ("MUST") before looking.
    masked = _QUOTED.sub(lambda m: " " * len(m.group()), _CODE_SPAN.sub(lambda m: " " * len(m.group()), text))
    masked = _ANY_TAG.sub(lambda m: " " * len(m.group()), masked)
    return tuple(m.group(1) for m in _KEYWORD.finditer(masked))


def _blocks(spec: str) -> list[tuple[str, int, int]]:
    """``(section, start, end)`` of every paragraph, list item and table cell, in order."""
    blocks: list[tuple[str, int, int]] = []
    section = "0"
    current: list[int] | None = None
    in_fence = False
    offset = 0

    def close() -> None:
        nonlocal current
        if current is not None:
            blocks.append((section, current[0], current[1]))
            current = None

    for line in spec.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        content_end = start + len(line.rstrip("\r\n"))
        stripped = line.strip()
        if _FENCE.match(line):
            close()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not stripped or _RULE.match(line):
            close()
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            if heading.group("number") or heading.group("appendix"):
                section = heading.group("number") or heading.group("appendix")
            continue
        if stripped.startswith("|"):
            close()
            if not _TABLE_SEPARATOR.match(line):
                blocks += [(section, a, b) for a, b in _cells(spec, start, content_end)]
            continue
        item = _LIST_ITEM.match(line)
        if item:
            close()
            current = [start + item.end(), content_end]
        elif current is not None:
            current[1] = content_end
        else:
            current = [start + len(line) - len(line.lstrip()), content_end]
    close()
    return blocks


def _cells(spec: str, start: int, end: int) -> list[tuple[int, int]]:
    """The cells of the table row ``spec[start:end]``, as offsets (pipes in code spans do not split)."""
    cells: list[tuple[int, int]] = []
    in_code = False
    cell_start: int | None = None
    i = start
    while i < end:
        char = spec[i]
        if char == "\\":
            i += 2
            continue
        if char == "`":
            in_code = not in_code
        elif char == "|" and not in_code:
            if cell_start is not None:
                cells.append((cell_start, i))
            cell_start = i + 1
        i += 1
    if cell_start is not None and spec[cell_start:end].strip():
        cells.append((cell_start, end))
    out = []
    for a, b in cells:
        text = spec[a:b]
        if text.strip():
            out.append((a + len(text) - len(text.lstrip()), b - (len(text) - len(text.rstrip()))))
    return out


def _starts_sentence(rest: str) -> bool:
    """Whether ``rest`` (the text after a candidate end, white space stripped) begins a new sentence."""
    if not rest:
        return True
    return rest[0].isupper() or rest[0] in '(*`"[“' or rest[0].isdigit()


def _split(spec: str, start: int, end: int) -> list[tuple[int, int, str | None]]:
    """Sentences of the block ``spec[start:end]``: ``(start, end_before_tag, id)``."""
    text = spec[start:end]
    cuts: list[tuple[int, int, str | None]] = []  # (sentence end before tag, cut position, id)
    tags = {m.start(): m for m in TAG.finditer(text)}
    for m in TAG.finditer(text):
        before = text[: m.start()].rstrip()
        cuts.append((len(before), m.end(), f"R{m.group('section')}-{m.group('number')}"))
    tagged_ends = {c[0] for c in cuts}
    for m in _END.finditer(text):
        after = text[m.end() :]
        rest = after.lstrip()
        next_at = m.end() + len(after) - len(rest)
        if next_at in tags or m.end() in tagged_ends:
            continue  # this sentence's tag follows: the tag is the cut
        if _starts_sentence(rest):
            cuts.append((m.end(), m.end(), None))
    cuts.sort(key=lambda c: c[1])
    found: list[tuple[int, int, str | None]] = []
    position = 0
    for sentence_end, cut, rid in cuts:
        if cut <= position:
            continue
        chunk = text[position:sentence_end]
        lead = len(chunk) - len(chunk.lstrip())
        if chunk.strip() or rid:
            found.append((start + position + lead, start + sentence_end, rid))
        position = cut
    tail = text[position:]
    if tail.strip():
        lead = len(tail) - len(tail.lstrip())
        found.append((start + position + lead, start + position + len(tail.rstrip()), None))
    return found


def _collapse(raw: str) -> str:
    """``raw`` without its tags, white space collapsed (no space left before punctuation a tag preceded)."""
    text = " ".join(TAG.sub(" ", raw).split())
    if CONDITION_TAG.search(text):
        text = re.sub(r"\s+([.,;:)])", r"\1", " ".join(CONDITION_TAG.sub(" ", text).split()))
    return text


def conditions(spec: str) -> list[tuple[str, str, str, int]]:
    """Every condition tag of ``spec``: ``(condition id, sentence id, clause text, line)``, in order.

    The clause a tag names is the text before it, back to the previous tag of its block, the start of its
    sentence or the start of its block (a list item, a table cell), whichever is nearest; in a table it is
    prefixed with the row's first cell, ``(row `speed`) out of range: `invalid_speed```, and the row's key
    words do not set the condition's level: its sentence's does.
    """
    line_starts = [0] + [i + 1 for i, c in enumerate(spec) if c == "\n"]
    starts = sorted(s.start for s in sentences(spec))
    out: list[tuple[str, str, str, int]] = []
    import bisect

    for _, block_start, block_end in _blocks(spec):
        previous = block_start
        for m in _ANY_TAG.finditer(spec, block_start, block_end):
            condition = CONDITION_TAG.fullmatch(m.group())
            if condition is not None:
                sentence_start = starts[max(0, bisect.bisect_right(starts, m.start()) - 1)]
                clause_start = max(previous, block_start, sentence_start)
                row_start = spec.rfind("\n", 0, m.start()) + 1
                clause = _collapse(spec[clause_start : m.start()]).strip(" ,;:")
                if spec[row_start : m.start()].lstrip().startswith("|"):  # a table row: name the row
                    head = _collapse(spec[row_start:block_end].split("|")[1]).strip()
                    clause = f"(row {head}) {clause}"
                sentence = f"R{condition.group('section')}-{condition.group('number')}"
                line = bisect.bisect_right(line_starts, m.start())
                out.append((sentence + condition.group("letter"), sentence, clause, line))
            previous = m.end()
    return out


def sentences(spec: str) -> list[Sentence]:
    """Every sentence of ``spec`` (the text of PROTOCOL.md), in order, normative or not."""
    line_starts = [0] + [i + 1 for i, c in enumerate(spec) if c == "\n"]
    out: list[Sentence] = []
    import bisect

    for section, block_start, block_end in _blocks(spec):
        for start, end, rid in _split(spec, block_start, block_end):
            raw = spec[start:end]
            text = _collapse(raw)
            line = bisect.bisect_right(line_starts, start)
            out.append(Sentence(section, start, end, text, rid, _keywords(raw), line))
    return out


def parse(spec: str) -> list[Requirement]:
    """The tagged normative sentences of ``spec``, in order, each followed by its conditions (if split).

    A condition's level is that of the key words in its clause, else its sentence's.

    Raises:
        ValueError: a normative sentence has no id (run :func:`tag` first), a tagged sentence uses no key
            word, an id occurs twice, a condition names no tagged sentence, or a sentence has a single
            condition; the message lists every such sentence with its line.
    """
    problems: list[str] = []
    found: list[Requirement] = []
    seen: dict[str, int] = {}
    for s in sentences(spec):
        if s.id is None:
            if s.normative:
                problems.append(f"line {s.line}: untagged normative sentence: {s.text[:100]}")
            continue
        if not s.normative:
            problems.append(f"line {s.line}: [{s.id}] tags a sentence without an RFC 2119 key word")
            continue
        if s.id in seen:
            problems.append(f"line {s.line}: [{s.id}] is also used on line {seen[s.id]}")
            continue
        seen[s.id] = s.line
        found.append(
            Requirement(RequirementId(s.id), s.section, level_of(s.keywords), s.keywords, s.text, s.line)
        )
    by_sentence: dict[str, list[Requirement]] = {}
    for cid, sid, clause, line in conditions(spec):
        if cid in seen:
            problems.append(f"line {line}: [{cid}] is also used on line {seen[cid]}")
            continue
        seen[cid] = line
        parent = next((r for r in found if r.id == sid), None)
        if parent is None:
            problems.append(
                f"line {line}: [{cid}] names a condition of {sid}, which is not a tagged sentence"
            )
            continue
        keywords = () if clause.startswith("(row ") else _keywords(clause)
        level = level_of(keywords) if keywords else parent.level
        by_sentence.setdefault(sid, []).append(
            Requirement(
                RequirementId(cid),
                parent.section,
                level,
                keywords or parent.keywords,
                clause,
                line,
                parent.id,
            )
        )
    for sid, items in by_sentence.items():
        if len(items) == 1:
            problems.append(f"line {items[0].line}: [{items[0].id}] is the only condition of {sid}: drop it")
    if problems:
        raise ValueError("\n".join(problems))
    out: list[Requirement] = []
    for r in found:
        items = sorted(by_sentence.get(r.id, []), key=lambda c: c.id)
        out.append(dataclasses.replace(r, conditions=tuple(c.id for c in items)) if items else r)
        out += items
    return out


def section_titles(spec: str) -> dict[str, str]:
    """Each numbered heading's number and title: ``{"3.3.1": "Format", "A": "JSON Schemas", ...}``."""
    titles: dict[str, str] = {}
    in_fence = False
    for line in spec.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading and (heading.group("number") or heading.group("appendix")):
            key = heading.group("number") or heading.group("appendix")
            titles[key] = line[heading.end() :].strip().lstrip(". ").strip()
    return titles


def _number(rid: str) -> tuple[str, int]:
    section, _, number = rid[1:].rpartition("-")
    return section, int(number.rstrip("abcdefghijklmnopqrstuvwxyz"))


def next_numbers(ids: Iterable[str]) -> dict[str, int]:
    """Per section, the next free requirement number given every id ever used (current and retired)."""
    top: dict[str, int] = {}
    for rid in ids:
        section, number = _number(rid)
        top[section] = max(top.get(section, 0), number)
    return {section: number + 1 for section, number in top.items()}


def tag(
    spec: str, *, retired: Iterable[str] = (), known: dict[str, str] | None = None
) -> tuple[str, list[str]]:
    """Give every untagged normative sentence of ``spec`` the next free id of its section.

    Also repairs an id that two sentences carry (two branches tagged new sentences alike): the sentence
    whose text ``known`` records for that id keeps it (else the first), the other gets a new id.

    Args:
        spec: the text of PROTOCOL.md.
        retired: ids no longer in the spec; their numbers are never given again.
        known: id -> sentence text as last recorded (the matrix), to settle duplicates.

    Returns:
        The new text and the ids assigned, in order of appearance.
    """
    all_sentences = sentences(spec)
    used = [s.id for s in all_sentences if s.id] + list(retired)
    free = next_numbers(used)
    known = known or {}
    owners: dict[str, Sentence] = {}
    for s in all_sentences:
        if s.id is None:
            continue
        holder = owners.get(s.id)
        if holder is None or (known.get(s.id) == s.text and known.get(s.id) != holder.text):
            owners[s.id] = s
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the original text
    assigned: list[str] = []
    for s in all_sentences:
        duplicate = s.id is not None and owners[s.id] is not s
        if not s.normative or (s.id is not None and not duplicate):
            continue
        number = free.get(s.section, 1)
        free[s.section] = number + 1
        rid = f"R{s.section}-{number}"
        assigned.append(rid)
        if duplicate:
            old = TAG.search(spec, s.end)
            assert old is not None
            edits.append((old.start(), old.end(), f"[{rid}]"))
        else:
            edits.append((s.end, s.end, f" [{rid}]"))
    for start, end, replacement in sorted(edits, reverse=True):
        spec = spec[:start] + replacement + spec[end:]
    return spec, assigned
