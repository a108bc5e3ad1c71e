"""The clauses findings cite: requirement ids of spec/PROTOCOL.md, by name (no I/O).

A *clause* is one requirement of the spec, named by its id (``"R5-1"``,
:mod:`conformance.engine.requirements`). Each case tests the requirements it declares (``Case.requirements``);
every deviation the suite sees is a *finding* on one requirement
(:class:`conformance.engine.observer.Finding`). A case's verdict depends only on the findings on its own
requirements and its own assertions; findings on other requirements are notes on it, judged by the cases that
declare those. Grouping findings by requirement gives the report's list of distinct defects, the clause rows:
each is judged over the whole run, and one with a finding at MUST level
fails the run wherever the finding was seen.

Code that records findings refers to requirements only through the names below (one line per rule: the
place to change when the spec moves a rule to another sentence). :data:`RULES` maps each rule the sans-I/O
reader checks (:class:`protocol.reader.OutputRule`) to its requirement.
"""

from __future__ import annotations

import re

from protocol.reader import OutputRule

# §2 transport
HANDSHAKE = "R2.3-1"
"""The handshake completes within 250 ms (a session that cannot open: the simulator's 424)."""

# §3 frames
CONTROL_IS_TEXT = "R3.2-4"
"""A control frame is a TEXT message holding one JSON object with a string ``type``."""
CONTROL_CEILING = "R3.2-2"
"""A control frame is at most 1 MiB (the 64 KiB SHOULD of the same sentence is judged by case 3.2.3)."""
AUDIO_IS_BINARY = "R3.3.1-5"
AUDIO_WHOLE_SAMPLES = "R3.3.1-1"
AUDIO_CEILING = "R3.3.1-6"
"""At most ``max_audio_frame_bytes``, never over 1 MiB."""
AUDIO_NOT_JSON = "R3.3.2-1"

# §5 server frames, §6 ordering
FRAME_VALID = "R5-1"
"""Every control frame validates against its schema (synthesis_start, synthesis_complete, error)."""
AUDIO_BYTES = "R5.3-2"
"""``audio_bytes`` is the sum of the request's audio frames; ``total_duration_s`` follows from it."""
ONE_BRACKET = "R6.1-1"
"""One ``synthesis_start`` and one ``synthesis_complete`` per accepted request, naming it."""
AUDIO_IN_BRACKET = "R6.1-2"
IN_ORDER = "R6.2-3"
ERROR_NAMES_REQUEST = "R6.3-3"
"""Error frames carry ``code`` and, when known, ``request_id`` (the refused message's id, §9.2)."""

# §7 session lifetime
SESSION_ENDS_ONLY_BY = "R7-1"
CLOSE_1000 = "R7.1-3"

# §4.4 describe
CAPABILITIES_ANSWER_DESCRIBE = "R4.4-4"
"""A server sends ``capabilities`` only in answer to ``describe``."""

# §15 utterances
REFUSAL_NAMES_MESSAGE = "R15.6-1"

# §5.5 marks (version 1.1, OPTIONAL)
MARKS_PER_SEGMENT = "R5.5-4"
"""One ``marks`` frame per segment whose audio is sent, numbered from 0, before any later segment's audio."""
MARKS_SPANS = "R5.5-6"
MARKS_ASKED = "R5.5-7"
"""``marks`` only for a request that asked for them, inside its bracket."""

RULES: dict[OutputRule, str] = {
    OutputRule.CONTROL_IS_TEXT: CONTROL_IS_TEXT,
    OutputRule.CONTROL_HAS_TYPE: CONTROL_IS_TEXT,
    OutputRule.CONTROL_CEILING: CONTROL_CEILING,
    OutputRule.AUDIO_IS_BINARY: AUDIO_IS_BINARY,
    OutputRule.AUDIO_WHOLE_SAMPLES: AUDIO_WHOLE_SAMPLES,
    OutputRule.AUDIO_CEILING: AUDIO_CEILING,
    OutputRule.AUDIO_NOT_JSON: AUDIO_NOT_JSON,
    OutputRule.START_VALID: FRAME_VALID,
    OutputRule.START_NAMES_REQUEST: ONE_BRACKET,
    OutputRule.COMPLETE_VALID: FRAME_VALID,
    OutputRule.COMPLETE_NAMES_REQUEST: ONE_BRACKET,
    OutputRule.AUDIO_BYTES: AUDIO_BYTES,
    OutputRule.ERROR_VALID: FRAME_VALID,
    OutputRule.ONE_BRACKET: ONE_BRACKET,
    OutputRule.AUDIO_IN_BRACKET: AUDIO_IN_BRACKET,
    OutputRule.IN_ORDER: IN_ORDER,
    OutputRule.REFUSAL_NAMES_MESSAGE: REFUSAL_NAMES_MESSAGE,
    OutputRule.CAPABILITIES_VALID: FRAME_VALID,
    OutputRule.CAPABILITIES_ANSWER_DESCRIBE: CAPABILITIES_ANSWER_DESCRIBE,
    OutputRule.MARKS_VALID: FRAME_VALID,
    OutputRule.MARKS_ASKED: MARKS_ASKED,
    OutputRule.MARKS_IN_ORDER: MARKS_PER_SEGMENT,
    OutputRule.MARKS_SPANS: MARKS_SPANS,
    OutputRule.MARKS_SENT: MARKS_PER_SEGMENT,
}
"""The requirement of each rule :class:`protocol.reader.StreamReader` checks."""


def recorded() -> dict[str, list[str]]:
    """Requirement id -> the names above that cite it: every clause a finding can be recorded on in any case
    (the reader's rules, how a session ends, the checks that do not stop a case), whichever case owns it.

    A finding on one of these, seen in a case that does not own the clause, is a note on that case and fails
    the run on the clause (issue 30); the traceability matrix lists them with the mutants that show it."""
    found: dict[str, list[str]] = {}
    for name, value in globals().items():
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"R[\d.]+-\d+", value):
            found.setdefault(value, []).append(name)
    return found


OBSERVED_ON_EVERY_SESSION: frozenset[str] = frozenset(
    {*RULES.values(), HANDSHAKE, SESSION_ENDS_ONLY_BY, CLOSE_1000, ERROR_NAMES_REQUEST}
)
"""The clauses the observer judges on every session of every case, whoever owns them: a run in which no
finding broke one of them has judged it (unexpected passes of ``--expect``,
:mod:`conformance.engine.expectations`).
"""
