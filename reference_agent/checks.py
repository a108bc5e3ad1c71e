"""Checks for an agent's SSE stream: the rules of ``reference_agent.events`` as code, with no I/O.

Feed the raw response body (in any pieces: the framing is checked however the transport split it) to
:func:`check_stream`, or already decoded events to :func:`check_events`, and get back a list of
:class:`AgentFinding` — one per broken rule, empty for a conforming stream. The conformance suite's
``AGENT-*`` cases and the demo are built on these; each :class:`AgentRule` value is the id of one check.

Rules (``events.py`` and ``spec/schemas/agent_*.schema.json`` hold the contract):

* ``AGENT-SSE-FRAMING``: every event is exactly ``data: <one-line JSON>\\n\\n`` (the framing of
  ``BedrockAgentCoreApp``, REFERENCE.md §5), UTF-8, and the body ends on an event boundary.
* ``AGENT-JSON``: each event is a JSON object with a known ``type``.
* ``AGENT-SCHEMA``: each event validates against its schema.
* ``AGENT-SEQ``: ``seq`` counts 0, 1, 2 … with no gap.
* ``AGENT-TIME``: ``t_ms`` is 0 at ``agent_start`` and never decreases.
* ``AGENT-ORDER``: ``agent_start`` first; ``audio_stream_start`` once, before any ``audio_chunk``;
  ``audio_stream_end`` once, after every chunk; no ``text_delta`` after ``audio_stream_end``;
  ``agent_end`` only after the audio stream ended; nothing after the terminal event.
* ``AGENT-TERMINAL``: the stream ends with ``agent_end`` or ``error`` (never a silent stop), and with
  the one the caller expected.
* ``AGENT-BASE64``: each ``audio_chunk.data`` is canonical padded standard base64, decoded on its own.
* ``AGENT-PCM``: each decoded chunk is non-empty whole PCM16 samples.
* ``AGENT-AUDIO-TOTALS``: ``audio_stream_end`` agrees with the chunks (``total_chunks``,
  ``audio_bytes``, ``duration_s``, the segments' ``audio_bytes``).
* ``AGENT-SPOKEN``: every word of the reply was sent to the TTS, the last ones included, and a reply
  with words has audio; a reply the listener interrupted (``agent_end.interrupted``) promises neither.
* ``AGENT-TTS-AUDIO``: (when the TTS's output is known) the decoded audio is exactly what the TTS made.
* ``AGENT-BATCH``: in ``batch`` mode, one synthesis and no audio before the reply is complete.
* ``AGENT-STREAM``: in ``stream`` mode, the whole reply went to the TTS as one utterance (one segment,
  PROTOCOL.md §15).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from protocol import schemas
from protocol.sse import decode_base64_strict
from reference_agent.events import EVENT_TYPES, TERMINAL_TYPES, schema_name
from speech.chunker import strip_markdown

__all__ = [
    "MAX_FINDINGS_PER_RULE",
    "AgentFinding",
    "AgentRule",
    "AgentSSEDecoder",
    "check_events",
    "check_stream",
    "decode_audio",
    "reply_words",
]

MAX_FINDINGS_PER_RULE = 5
"""Findings kept per rule; a summary finding counts the rest (one broken rule can repeat per event)."""

DURATION_TOLERANCE_S = 0.001
"""``duration_s`` may differ from ``audio_bytes / 2 / sample_rate`` by rounding, up to 1 ms."""


class AgentRule(StrEnum):
    """The checks; each value is a rule id (see the module docstring)."""

    SSE_FRAMING = "AGENT-SSE-FRAMING"
    JSON = "AGENT-JSON"
    SCHEMA = "AGENT-SCHEMA"
    SEQ = "AGENT-SEQ"
    TIME = "AGENT-TIME"
    ORDER = "AGENT-ORDER"
    TERMINAL = "AGENT-TERMINAL"
    BASE64 = "AGENT-BASE64"
    PCM = "AGENT-PCM"
    AUDIO_TOTALS = "AGENT-AUDIO-TOTALS"
    SPOKEN = "AGENT-SPOKEN"
    TTS_AUDIO = "AGENT-TTS-AUDIO"
    BATCH = "AGENT-BATCH"
    STREAM = "AGENT-STREAM"


@dataclass(frozen=True, slots=True)
class AgentFinding:
    """One broken rule: its id, what was seen, and the ``seq`` (stream index) of the event if one."""

    rule: AgentRule
    message: str
    index: int | None = None

    def __str__(self) -> str:
        where = f" [event {self.index}]" if self.index is not None else ""
        return f"{self.rule}{where}: {self.message}"


class _AgentFindings:
    def __init__(self) -> None:
        self.items: list[AgentFinding] = []
        self._counts: Counter[AgentRule] = Counter()

    def add(self, rule: AgentRule, message: str, index: int | None = None) -> None:
        self._counts[rule] += 1
        if self._counts[rule] <= MAX_FINDINGS_PER_RULE:
            self.items.append(AgentFinding(rule, message, index))

    def result(self) -> list[AgentFinding]:
        extra = [
            AgentFinding(rule, f"{count - MAX_FINDINGS_PER_RULE} more finding(s) of this rule")
            for rule, count in self._counts.items()
            if count > MAX_FINDINGS_PER_RULE
        ]
        return self.items + extra


# --- framing -------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class AgentSSEDecoder:
    """Strict incremental decoder of the agent's SSE body (rule ``AGENT-SSE-FRAMING``, ``AGENT-JSON``).

    Unlike a general SSE parser (:class:`protocol.sse.SSEDecoder`, which accepts every framing the
    WHATWG standard allows) this one accepts only what the agent must send: blocks of exactly
    ``data: <JSON>`` separated by one blank line, LF line ends. :meth:`feed` takes bytes split
    anywhere (inside a UTF-8 character, inside ``\\n\\n``) and returns the events completed so far;
    blocks that break the framing are reported in :attr:`findings` and skipped.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._blocks = 0
        self._closed = False
        self.findings: list[AgentFinding] = []
        """Framing and JSON problems seen so far (``index`` is the block's position)."""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Take the next bytes of the body; return the events whose blocks are now complete."""
        if self._closed:
            raise RuntimeError("feed() after close()")
        self._buffer += data
        events = []
        while (end := self._buffer.find(b"\n\n")) != -1:
            block = bytes(self._buffer[:end])
            del self._buffer[: end + 2]
            event = self._parse(block, self._blocks)
            self._blocks += 1
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[AgentFinding]:
        """The body ended: report bytes after the last complete event; return every finding."""
        if not self._closed:
            self._closed = True
            if self._buffer:
                self.findings.append(
                    AgentFinding(
                        AgentRule.SSE_FRAMING,
                        f"the body ends inside an event: {len(self._buffer)} byte(s) after the last "
                        f"blank line ({bytes(self._buffer[:40])!r})",
                        self._blocks,
                    )
                )
        return self.findings

    def _parse(self, block: bytes, index: int) -> dict[str, Any] | None:
        if not block.startswith(b"data: "):
            self.findings.append(
                AgentFinding(
                    AgentRule.SSE_FRAMING, f"block does not start with 'data: ': {block[:40]!r}", index
                )
            )
            return None
        body = block[6:]
        if b"\n" in body or b"\r" in body:
            self.findings.append(
                AgentFinding(
                    AgentRule.SSE_FRAMING, "an event must be one 'data:' line; this block has more", index
                )
            )
            return None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.findings.append(AgentFinding(AgentRule.SSE_FRAMING, f"event is not UTF-8: {exc}", index))
            return None
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:
            self.findings.append(
                AgentFinding(AgentRule.JSON, f"data is not JSON: {exc}: {text[:60]!r}", index)
            )
            return None
        if not isinstance(value, dict):
            self.findings.append(
                AgentFinding(AgentRule.JSON, f"data is not a JSON object: {text[:60]!r}", index)
            )
            return None
        return value


# --- events --------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def reply_words(text: str) -> list[str]:
    """The words of ``text``, case-folded: what must be spoken, whatever the punctuation or spacing."""
    return _WORD.findall(text.casefold())


def decode_audio(events: Sequence[dict[str, Any]]) -> bytes:
    """The stream's audio: each ``audio_chunk.data`` decoded on its own, concatenated in order.

    Chunks that do not decode are skipped (the checks report them).
    """
    out = bytearray()
    for event in events:
        if (
            isinstance(event, dict)
            and event.get("type") == "audio_chunk"
            and isinstance(event.get("data"), str)
        ):
            try:
                out += decode_base64_strict(event["data"])
            except ValueError:
                continue
    return bytes(out)


def _describe_difference(reply: list[str], spoken: list[str]) -> str:
    common = 0
    for a, b in zip(reply, spoken, strict=False):
        if a != b:
            break
        common += 1
    if common == len(spoken) and common < len(reply):
        missing = " ".join(reply[common:])
        return f"the last {len(reply) - common} word(s) of the reply were never spoken: {missing[:80]!r}"
    if common == len(reply) and common < len(spoken):
        return f"words that are not in the reply were spoken: {' '.join(spoken[common:])[:80]!r}"
    return (
        f"spoken text differs from the reply at word {common}: "
        f"reply {' '.join(reply[common : common + 6])!r}, spoken {' '.join(spoken[common : common + 6])!r}"
    )


def check_events(
    events: Sequence[Any],
    *,
    expect: str | None = None,
    tts_audio: bytes | None = None,
    tts_texts: Sequence[str] | None = None,
) -> list[AgentFinding]:
    """Check decoded agent events against every rule but the framing.

    Args:
        events: the events in stream order (dicts decoded from each ``data:`` line).
        expect: ``"success"`` (must end with ``agent_end``), ``"error"`` (must end with ``error``), or
            ``None`` (either).
        tts_audio: the PCM the TTS produced for this stream, if known (a test's TTS stand-in, a
            simulator log): the decoded audio must equal it byte for byte.
        tts_texts: the texts the TTS was asked to speak, if known: together they must hold every word
            of the reply.

    Returns:
        The findings, grouped by rule and at most :data:`MAX_FINDINGS_PER_RULE` per rule (plus a count).
    """
    if expect not in (None, "success", "error"):
        raise ValueError(f"expect must be 'success', 'error' or None, not {expect!r}")
    found = _AgentFindings()
    typed: list[tuple[int, str, dict[str, Any]]] = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            found.add(AgentRule.JSON, f"event is not a JSON object: {event!r:.60}", index)
            continue
        type_ = event.get("type")
        if not isinstance(type_, str):
            hint = " (BedrockAgentCoreApp's fallback frame: the handler raised)" if "error" in event else ""
            found.add(AgentRule.JSON, f"event has no string 'type'{hint}: {json.dumps(event)[:80]}", index)
            continue
        if type_ not in EVENT_TYPES:
            found.add(AgentRule.JSON, f"unknown event type {type_!r}", index)
            continue
        typed.append((index, type_, event))
        _check_schema(found, index, type_, event)
        seq = event.get("seq")
        if seq != index:
            found.add(AgentRule.SEQ, f"seq is {seq!r}, expected {index} (contiguous from 0)", index)
    _check_times(found, events)
    terminal = _check_order(found, events, typed)
    _check_terminal(found, events, terminal, expect)
    audio = _check_audio(found, typed)
    _check_totals(found, typed, audio)
    succeeded = terminal is not None and terminal[1] == "agent_end"
    _check_spoken(found, typed, audio, succeeded, tts_texts)
    if tts_audio is not None and audio != tts_audio:
        found.add(AgentRule.TTS_AUDIO, _describe_audio_difference(tts_audio, audio))
    _check_batch(found, typed)
    _check_stream(found, typed)
    return found.result()


def _check_schema(found: _AgentFindings, index: int, type_: str, event: dict[str, Any]) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(schemas.validator(schema_name(type_)).iter_errors(event))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or type_
        found.add(AgentRule.SCHEMA, f"{type_} {where}: {error.message[:120]}", index)


def _check_times(found: _AgentFindings, events: Sequence[Any]) -> None:
    previous: float | None = None
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            continue
        t_ms = event.get("t_ms")
        if isinstance(t_ms, bool) or not isinstance(t_ms, int | float):
            found.add(AgentRule.TIME, f"t_ms is {t_ms!r}, not a number", index)
            continue
        if index == 0 and t_ms != 0:
            found.add(AgentRule.TIME, f"agent_start has t_ms {t_ms}, expected 0", index)
        if previous is not None and t_ms < previous:
            found.add(AgentRule.TIME, f"t_ms went back from {previous} to {t_ms}", index)
        previous = t_ms


def _check_order(
    found: _AgentFindings, events: Sequence[Any], typed: list[tuple[int, str, dict[str, Any]]]
) -> tuple[int, str] | None:
    """Order rules; returns ``(index, type)`` of the first terminal event, if any."""
    if not events:
        found.add(AgentRule.ORDER, "the stream has no events")
        return None
    first = events[0]
    if not (isinstance(first, dict) and first.get("type") == "agent_start"):
        found.add(AgentRule.ORDER, "the first event is not agent_start", 0)
    terminal: tuple[int, str] | None = None
    stream_start: int | None = None
    stream_end: int | None = None
    for index, type_, _ in typed:
        if terminal is not None:
            found.add(
                AgentRule.ORDER, f"{type_} after the terminal {terminal[1]} (event {terminal[0]})", index
            )
            continue
        if type_ == "agent_start" and index != 0:
            found.add(AgentRule.ORDER, "agent_start again", index)
        elif type_ == "audio_stream_start":
            if stream_start is not None:
                found.add(AgentRule.ORDER, f"audio_stream_start again (first at event {stream_start})", index)
            else:
                stream_start = index
        elif type_ == "audio_chunk":
            if stream_start is None:
                found.add(AgentRule.ORDER, "audio_chunk before audio_stream_start", index)
            if stream_end is not None:
                found.add(AgentRule.ORDER, f"audio_chunk after audio_stream_end (event {stream_end})", index)
        elif type_ == "audio_stream_end":
            if stream_start is None:
                found.add(AgentRule.ORDER, "audio_stream_end before audio_stream_start", index)
            if stream_end is not None:
                found.add(AgentRule.ORDER, f"audio_stream_end again (first at event {stream_end})", index)
            else:
                stream_end = index
        elif type_ == "text_delta" and stream_end is not None:
            found.add(
                AgentRule.ORDER,
                f"text_delta after audio_stream_end (event {stream_end}) is never spoken",
                index,
            )
        elif type_ == "agent_end" and stream_end is None:
            found.add(AgentRule.ORDER, "agent_end before the audio stream ended (no audio_stream_end)", index)
        if type_ in TERMINAL_TYPES:
            terminal = (index, type_)
    # Events that are not typed (unparseable) after the terminal one also break the order.
    if terminal is not None:
        for index in range(terminal[0] + 1, len(events)):
            if not (isinstance(events[index], dict) and isinstance(events[index].get("type"), str)):
                found.add(AgentRule.ORDER, f"an event follows the terminal {terminal[1]}", index)
    return terminal


def _check_terminal(
    found: _AgentFindings, events: Sequence[Any], terminal: tuple[int, str] | None, expect: str | None
) -> None:
    if terminal is None:
        found.add(AgentRule.TERMINAL, "the stream stopped without agent_end or error (a silent stop)")
        return
    wanted = {"success": "agent_end", "error": "error"}.get(expect or "")
    if wanted is not None and terminal[1] != wanted:
        detail = ""
        if terminal[1] == "error":
            last = events[terminal[0]]
            detail = f": {last.get('code')}: {str(last.get('message'))[:120]}"
        found.add(
            AgentRule.TERMINAL,
            f"expected the stream to end with {wanted}, it ended with {terminal[1]}{detail}",
        )


def _check_audio(found: _AgentFindings, typed: list[tuple[int, str, dict[str, Any]]]) -> bytes:
    audio = bytearray()
    for index, type_, event in typed:
        if type_ != "audio_chunk":
            continue
        data = event.get("data")
        if not isinstance(data, str):
            found.add(AgentRule.BASE64, f"data is {type(data).__name__}, not a base64 string", index)
            continue
        try:
            pcm = decode_base64_strict(data)
        except ValueError as exc:
            found.add(AgentRule.BASE64, f"{exc} (data starts {data[:24]!r})", index)
            continue
        if not pcm:
            found.add(AgentRule.PCM, "audio_chunk carries no audio", index)
        elif len(pcm) % 2:
            found.add(AgentRule.PCM, f"audio_chunk of {len(pcm)} bytes is not whole PCM16 samples", index)
        audio += pcm
    return bytes(audio)


def _first(typed: list[tuple[int, str, dict[str, Any]]], type_: str) -> tuple[int, dict[str, Any]] | None:
    return next(((index, event) for index, t, event in typed if t == type_), None)


def _check_totals(found: _AgentFindings, typed: list[tuple[int, str, dict[str, Any]]], audio: bytes) -> None:
    end = _first(typed, "audio_stream_end")
    if end is None:
        return
    index, event = end
    chunks = sum(1 for _, t, _ in typed if t == "audio_chunk")
    if event.get("total_chunks") != chunks:
        found.add(
            AgentRule.AUDIO_TOTALS,
            f"total_chunks is {event.get('total_chunks')!r}, {chunks} chunks came",
            index,
        )
    if "audio_bytes" in event and event["audio_bytes"] != len(audio):
        found.add(
            AgentRule.AUDIO_TOTALS, f"audio_bytes is {event['audio_bytes']!r}, {len(audio)} bytes came", index
        )
    start = _first(typed, "audio_stream_start")
    rate = start[1].get("sample_rate") if start else None
    duration = event.get("duration_s")
    if (
        isinstance(rate, int)
        and rate > 0
        and isinstance(duration, int | float)
        and not isinstance(duration, bool)
    ):
        actual = len(audio) / 2 / rate
        if abs(duration - actual) > DURATION_TOLERANCE_S:
            found.add(
                AgentRule.AUDIO_TOTALS,
                f"duration_s is {duration}, the chunks hold {actual:.6f} s at {rate} Hz",
                index,
            )
    segments = event.get("segments")
    if isinstance(segments, list) and all(isinstance(s, dict) for s in segments):
        declared = [s.get("audio_bytes") for s in segments]
        if all(isinstance(n, int) for n in declared) and sum(declared) != len(audio):  # type: ignore[arg-type]
            found.add(
                AgentRule.AUDIO_TOTALS,
                f"the segments' audio_bytes sum to {sum(declared)}, {len(audio)} bytes came",  # type: ignore[arg-type]
                index,
            )


def _check_spoken(
    found: _AgentFindings,
    typed: list[tuple[int, str, dict[str, Any]]],
    audio: bytes,
    succeeded: bool,
    tts_texts: Sequence[str] | None,
) -> None:
    # Only a stream that claims success promises the whole reply was spoken; a barge-in cut it short.
    if not succeeded or any(t == "agent_end" and e.get("interrupted") is True for _, t, e in typed):
        return
    text = "".join(str(e.get("text", "")) for _, t, e in typed if t == "text_delta")
    reply = reply_words(text)
    # An agent may speak the reply as written or with its markdown markers removed (as ours does).
    readings = (reply, reply_words(strip_markdown(text)))
    end = _first(typed, "audio_stream_end")
    if end is not None:
        segments = end[1].get("segments")
        if isinstance(segments, list):
            spoken = reply_words(" ".join(str(s.get("text", "")) for s in segments if isinstance(s, dict)))
            if spoken not in readings:
                found.add(
                    AgentRule.SPOKEN,
                    "audio_stream_end.segments: " + _describe_difference(reply, spoken),
                    end[0],
                )
        else:
            found.add(
                AgentRule.SPOKEN,
                "audio_stream_end lists no segments: the spoken text cannot be checked",
                end[0],
            )
    if tts_texts is not None:
        spoken = reply_words(" ".join(tts_texts))
        if spoken not in readings:
            found.add(AgentRule.SPOKEN, "text the TTS received: " + _describe_difference(reply, spoken))
    if reply and not audio:
        found.add(AgentRule.SPOKEN, f"the reply has {len(reply)} word(s) but the stream carries no audio")


def _describe_audio_difference(expected: bytes, actual: bytes) -> str:
    common = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b), None)
    if common is None:
        return f"the stream carries {len(actual)} audio bytes, the TTS produced {len(expected)}"
    return (
        f"the stream's audio differs from the TTS's at byte {common} ({len(actual)} vs {len(expected)} bytes)"
    )


def _check_batch(found: _AgentFindings, typed: list[tuple[int, str, dict[str, Any]]]) -> None:
    start = _first(typed, "agent_start")
    if start is None or start[1].get("mode") != "batch":
        return
    last_text = max((index for index, t, _ in typed if t == "text_delta"), default=None)
    first_audio = next((index for index, t, _ in typed if t == "audio_chunk"), None)
    if last_text is not None and first_audio is not None and first_audio < last_text:
        found.add(
            AgentRule.BATCH, f"batch audio at event {first_audio} before the reply ended (event {last_text})"
        )
    end = _first(typed, "audio_stream_end")
    segments = end[1].get("segments") if end else None
    if isinstance(segments, list) and len(segments) > 1:
        found.add(
            AgentRule.BATCH, f"batch mode made {len(segments)} synthesis requests, expected one", end[0]
        )  # type: ignore[index]


def _check_stream(found: _AgentFindings, typed: list[tuple[int, str, dict[str, Any]]]) -> None:
    start = _first(typed, "agent_start")
    if start is None or start[1].get("mode") != "stream":
        return
    end = _first(typed, "audio_stream_end")
    segments = end[1].get("segments") if end else None
    if isinstance(segments, list) and len(segments) > 1:
        found.add(
            AgentRule.STREAM,
            f"stream mode made {len(segments)} synthesis requests, expected one utterance",
            end[0],  # type: ignore[index]
        )


def check_stream(
    body: bytes | Iterable[bytes],
    *,
    expect: str | None = None,
    tts_audio: bytes | None = None,
    tts_texts: Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], list[AgentFinding]]:
    """Decode and check a whole response body.

    Args:
        body: the body, whole or as the pieces the transport delivered.
        expect, tts_audio, tts_texts: as for :func:`check_events`.

    Returns:
        ``(events, findings)``: the events that decoded, and every finding (framing first).
    """
    decoder = AgentSSEDecoder()
    events: list[dict[str, Any]] = []
    for piece in [body] if isinstance(body, bytes | bytearray) else body:
        events += decoder.feed(bytes(piece))
    framing = decoder.close()
    return events, framing + check_events(events, expect=expect, tts_audio=tts_audio, tts_texts=tts_texts)
