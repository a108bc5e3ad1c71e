"""Defects that each break one condition of a split sentence (issue 31 point 5): the conditions that no row
of :mod:`conformance.mutants.defects.table` broke alone, so that every observable MUST condition has a case
and a mutant that proves it. Each row names its condition ids; the cases that must catch it are those citing
them (:func:`conformance.mutants.catching.must_catch`)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from starlette.responses import Response, StreamingResponse

from conformance.mutants.defects.audio import _g711_brackets
from conformance.mutants.defects.core import (
    DROP,
    Defect,
    DefectConnection,
    DefectServer,
    Frame,
    dump,
    error_frame,
    is_request,
    json_object,
    map_controls,
    refuse,
    stall_after,
    twice_if,
)
from conformance.mutants.defects.invocations import _g711_body, _http_rewrite
from conformance.mutants.defects.run_level import _counting, _on_cancelled
from protocol.encodings import decode_to_pcm16, encode_pcm16
from protocol.voices import KOKORO_VOICES

_TYPES = ("synthesize", "cancel", "close", "describe", "utterance", "append", "flush", "end", "lexicon")
_PLAIN_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_IN_ORDER = ("request_id", "text", "voice", "speed", "sample_rate", "request_timestamp")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _blank(obj: dict[str, Any]) -> bool:
    text = obj.get("text")
    return text is None or (isinstance(text, str) and not text.strip())


def _unknown_voice(obj: dict[str, Any]) -> bool:
    voice = obj.get("voice")
    return isinstance(voice, str) and voice not in KOKORO_VOICES and not set(voice) & set("+()")


def _set_member(member: str, value: Any) -> Any:
    """An ``incoming`` hook that hands the session the request with ``member`` set to ``value`` (``DROP``:
    without the member) whenever the message has it."""

    def hook(session: DefectConnection, obj: dict[str, Any]) -> Any:
        if not is_request(obj) or member not in obj:
            return None
        return {k: v for k, v in obj.items() if k != member} if value is DROP else {**obj, member: value}

    return hook


def _string_stamp_ignored(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Reads only numeric request_timestamp values: a string one is taken as absent, valid or not (§4.1).
    if is_request(obj) and isinstance(obj.get("request_timestamp"), str):
        return {k: v for k, v in obj.items() if k != "request_timestamp"}
    return None


def _assigns_from_zero(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Assigns r0, r1, ... to requests without an id (§4.1 counts from r1).
    if not is_request(obj) or obj.get("request_id") is not None:
        return None
    number = getattr(session, "assigned_from_zero", 0)
    session.assigned_from_zero = number + 1  # type: ignore[attr-defined]
    return {**obj, "request_id": f"r{number}"}


def _refusal_code(member: str, value: Any) -> str | None:
    """The code §4.1 refuses ``member`` with when its value is ``value`` (``None``: valid)."""
    if member == "request_id":
        return None if isinstance(value, str) and 0 < len(value) <= 128 else "invalid_field"
    if member == "text":
        if not isinstance(value, str):
            return "text_required" if value is None else "invalid_field"
        return "text_required" if not value.strip() else None
    if member == "voice":
        return (
            "invalid_field"
            if not isinstance(value, str)
            else ("invalid_voice" if value not in KOKORO_VOICES else None)
        )
    if member == "speed":
        return "invalid_field" if not _number(value) else (None if 0.5 <= value <= 2.0 else "invalid_speed")
    if member == "sample_rate":
        if not _number(value):
            return "invalid_field"
        return None if value in (8000, 16000, 22050, 24000) else "invalid_sample_rate"
    if _number(value) and value < 1e9:  # request_timestamp: far in the past is stale
        return "request_stale"
    return None


def _members_last_first(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Checks a request's members in the reverse of §9.2's order: of two bad members, the later one's code.
    if not is_request(obj):
        return None
    for member in reversed(_IN_ORDER):
        if member in obj or member == "text":
            code = _refusal_code(member, obj.get(member))
            if code is not None:
                session.send(error_frame(code, obj.get("request_id")))
                return DROP
    return None


def _segments_from_one(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "segment": obj["segment"] + 1} if obj.get("type") == "marks" else obj


def _duplicate_cancels_first(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Refuses a duplicate request_id, and cancels the first request of that id as well (§4.1: unaffected).
    rid = obj.get("request_id")
    if not is_request(obj) or rid not in session.session.pending_ids:
        return None
    session.send(error_frame("duplicate_request_id", rid))
    return {"type": "cancel", "request_id": rid}


def _cancel_refused(where: str) -> Any:
    """An ``incoming`` hook: a cancel naming the queued (``where="queued"``) or the active request is refused
    with ``unknown_request`` as if it named no request (§4.2)."""

    def hook(session: DefectConnection, obj: dict[str, Any]) -> Any:
        pending = session.session.pending_ids
        named = pending[1:] if where == "queued" else pending[:1]
        if obj.get("type") != "cancel" or obj.get("request_id") not in named:
            return None
        session.send(error_frame("unknown_request", obj.get("request_id")))
        return DROP

    return hook


def _second_cancel_ignored(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A cancel naming a request already cancelled is swallowed, not refused with unknown_request (§4.2).
    if obj.get("type") != "cancel" or obj.get("request_id") is None:
        return None
    cancelled = session.__dict__.setdefault("cancelled_ids", set())
    if obj["request_id"] in cancelled:
        return DROP
    cancelled.add(obj["request_id"])
    return None


def _refusal_with_bracket(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # After each per-message refusal that names a request, a synthesis_start and a failed
    # synthesis_complete for it, as if the refused request had been accepted (§6.3).
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        obj = json_object(frame)
        if obj is None or obj.get("type") != "error" or obj.get("fatal") or not obj.get("request_id"):
            continue
        rid = obj["request_id"]
        start = {"type": "synthesis_start", "request_id": rid, "sample_rate": 24000, "encoding": "pcm_s16le"}
        complete = {"type": "synthesis_complete", "request_id": rid, "status": "failed", "audio_bytes": 0}
        out += [
            dump({**start, "voice": "af_heart", "speed": 1.0}),
            dump({**complete, "total_duration_s": 0.0}),
        ]
    return out


def _g711_as_pcm16(session: DefectConnection, encoding: str, frame: bytes, first: bool) -> list[Frame]:
    # The bracket says pcm_mulaw or pcm_alaw; its audio frames are PCM16 (§4.1, §5.1).
    return [decode_to_pcm16(frame, encoding)]


def _alaw_as_mulaw(session: DefectConnection, encoding: str, frame: bytes, first: bool) -> list[Frame]:
    if encoding != "pcm_alaw":
        return [frame]
    return [encode_pcm16(decode_to_pcm16(frame, "pcm_alaw"), "pcm_mulaw")]


def _alaw_as_audio_basic(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if _g711_body(request) != "pcm_alaw":
        return None
    return body, isinstance(response, StreamingResponse), {"content-type": "audio/basic"}


async def _refusal_as_500(server: DefectServer, request: dict[str, Any], response: Response) -> Response:
    # Answers every refusal of POST /invocations with 500 instead of its §9.1 status.
    if 400 <= response.status_code < 500:
        response.status_code = 500
    return response


def _json(raw: bytes) -> Any:
    """``raw`` parsed as JSON the way Python does (lenient: NaN, duplicates), or ``DROP`` when it is not."""
    try:
        return json.loads(raw)
    except ValueError:  # UnicodeDecodeError included
        return DROP


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _syntax_as_not_an_object(raw: bytes) -> bytes | object:
    # A message that is not JSON (a syntax error, trailing garbage) is refused with not_an_object.
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    if raw.strip() and not raw.startswith(b"\xef\xbb\xbf") and _json(raw) is DROP:
        return b"[]"
    return raw


def _utf8_before_size(raw: bytes) -> bytes | object:
    # Decodes a message before it checks its size: a long message that is not UTF-8 gets invalid_utf8.
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return b"\xff" if len(raw) > 65_536 else raw
    return raw


def _duplicates_last_wins(raw: bytes) -> bytes | object:
    # Reads duplicate member names as Python does, the last one winning, instead of refusing them.
    value = _json(raw)
    return dump(value).encode() if isinstance(value, dict) else raw


_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")


def _frame_limit_understated(obj: dict[str, Any]) -> dict[str, Any]:
    # Advertises a max_audio_frame_bytes of 16,384 (a valid setting, §10) but cuts audio at 32,768 bytes.
    limits = obj.get("limits")
    if obj.get("type") != "capabilities" or not isinstance(limits, dict):
        return obj
    return {**obj, "limits": {**limits, "max_audio_frame_bytes": 16_384}}


def _marks_at_complete(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # Holds a request's marks frames back until its synthesis_complete: still inside the bracket and in
    # order, but segment 0's marks come after segment 1's audio (§5.5).
    held: list[Frame] = getattr(session, "held_marks", [])
    session.held_marks = held  # type: ignore[attr-defined]
    out: list[Frame] = []
    for frame in frames:
        kind = (json_object(frame) or {}).get("type")
        if kind == "marks":
            held.append(frame)
            continue
        if kind == "synthesis_complete":
            out += held
            held.clear()
        out.append(frame)
    return out


class _KeepsDroppedSlot(DefectConnection):
    """A session dropped mid-synthesis (no ``close``) never gives its place in ``max_sessions`` back
    (§7.4)."""

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self.session.pending_ids:  # requests still open: the client went away, not a drained close
                self.slot_released = True  # the server then never counts the place free


def _queued_cancel_member(member: str, value: Any) -> Any:
    """An ``outgoing`` hook that sets ``member`` to ``value`` in the ``synthesis_complete`` of each request
    cancelled while queued (status ``cancelled``, no audio sent: ``audio_bytes`` 0)."""

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        queued = obj.get("type") == "synthesis_complete" and obj.get("status") == "cancelled"
        return {**obj, member: value} if queued and obj.get("audio_bytes") == 0 else obj

    return map_controls(change)


def _answers_after_close_if(kind: str, code: str) -> Any:
    """An ``incoming`` hook: after ``close``, a message of ``kind`` (``request``, ``cancel`` or ``close``) is
    refused with ``code`` instead of ignored (§7.1); every other one is ignored, as it should be."""

    def hook(session: DefectConnection, obj: dict[str, Any]) -> Any:
        seen = "request" if is_request(obj) else obj.get("type")
        if session.close_seen and seen == kind:
            rid = obj.get("request_id")
            session.send(error_frame(code, rid if isinstance(rid, str) else None))
            return DROP
        if obj.get("type") == "close":
            session.close_seen = True
        return None

    return hook


class _ActiveNotCounted(DefectConnection):
    """Counts only the queued requests against ``max_queue``: with one active, it accepts one more than
    ``capabilities.limits`` lists (§4.1)."""

    def __init__(self, server: Any, websocket: Any) -> None:
        super().__init__(server, websocket)
        self.session.limits = replace(self.session.limits, max_queue=self.session.limits.max_queue + 1)


def _queue_full_before_duplicate(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # With the queue full, refuses a request whose id is already queued with queue_full, not
    # duplicate_request_id: the session rules checked in the wrong order (§9.2).
    pending = session.session.pending_ids
    if not is_request(obj) or obj.get("request_id") not in pending:
        return None
    if len(pending) < session.server.limits.max_queue:
        return None
    session.send(error_frame("queue_full", obj.get("request_id")))
    return DROP


def _whole_g711_without_rate(request: dict[str, Any], response: Response, body: bytes) -> Any:
    # A G.711 body answered whole (stream: false) is labelled audio/PCMU or audio/PCMA without the rate
    # parameter RFC 4856 requires (§11.3); a streamed one keeps it.
    encoding = _g711_body(request)
    if encoding is None or request.get("stream", True) is not False or response.status_code != 200:
        return None
    return body, False, {"content-type": {"pcm_mulaw": "audio/PCMU", "pcm_alaw": "audio/PCMA"}[encoding]}


CONDITION_DEFECTS: tuple[Defect, ...] = (
    # §3.3.1 audio frames
    Defect(
        "frame-limit-understated",
        "Lists max_audio_frame_bytes 16,384 in capabilities.limits but sends audio frames of 32,768 bytes "
        "(§3.3.1)",
        ("R3.3.1-6a",),
        outgoing=map_controls(_frame_limit_understated),
    ),
    # §3.1 the checks of a message
    Defect(
        "over-max-invalid-json",
        "Refuses a message longer than max_message_bytes with invalid_json instead of message_too_large "
        "(§3.1)",
        ("R3.1-3a",),
        raw=lambda raw: b"{" if len(raw) > 65_536 else raw,
    ),
    Defect(
        "exact-max-refused",
        "Refuses a message of exactly max_message_bytes as too large (§3.1: only a longer one is)",
        ("R3.1-3k",),
        raw=lambda raw: raw + b" " if len(raw) == 65_536 else raw,
    ),
    Defect(
        "lenient-utf8",
        "Reads a message that is not valid UTF-8 with replacement characters instead of refusing it (§3.1)",
        ("R3.1-3b",),
        raw=lambda raw: raw.decode("utf-8", errors="replace").encode(),
    ),
    Defect(
        "blank-message-ignored",
        "Swallows an empty or whitespace-only message instead of refusing it with invalid_json (§3.1)",
        ("R3.1-3c",),
        raw=lambda raw: DROP if not raw.strip() else raw,
    ),
    Defect(
        "syntax-error-not-an-object",
        "Refuses a message with a JSON syntax error with not_an_object instead of invalid_json (§3.1)",
        ("R3.1-3e",),
        raw=_syntax_as_not_an_object,
    ),
    Defect(
        "nan-read-as-zero",
        "Reads the literals NaN and Infinity, and 1e400, as numbers instead of refusing them (§3.1)",
        ("R3.1-3f",),
        raw=lambda raw: re.sub(rb"-?Infinity|NaN|1e400", b"0", raw),
    ),
    Defect(
        "duplicates-last-wins",
        "Reads duplicate member names, the last one winning, instead of refusing them (invalid_json, §3.1)",
        ("R3.1-3g",),
        raw=_duplicates_last_wins,
    ),
    Defect(
        "any-depth-read",
        "Reads JSON nested deeper than max_json_depth, dropping the deep member, instead of refusing it "
        "(§3.1)",
        ("R3.1-3h",),
        raw=lambda raw: (
            dump({k: v for k, v in value.items() if _depth(v) < 31}).encode()
            if isinstance(value := _json(raw), dict) and _depth(value) > 32
            else raw
        ),
    ),
    Defect(
        "lone-surrogate-read",
        "Reads an escaped lone surrogate as '?' instead of refusing the message with invalid_json (§3.1)",
        ("R3.1-3i",),
        raw=lambda raw: _LONE_SURROGATE.sub(b"?", raw),
    ),
    Defect(
        "non-object-invalid-json",
        "Refuses a JSON value that is not an object with invalid_json instead of not_an_object (§3.1)",
        ("R3.1-3j",),
        raw=lambda raw: b"{" if (value := _json(raw)) is not DROP and not isinstance(value, dict) else raw,
    ),
    # §4 the type member
    Defect(
        "synthesize-type-refused",
        'Refuses a request whose type is "synthesize" with unknown_type (§4)',
        ("R4-1b",),
        incoming=refuse("unknown_type", lambda o: o.get("type") == "synthesize"),
    ),
    Defect(
        "unknown-type-invalid-field",
        "Refuses a message of an unknown type with invalid_field instead of unknown_type (§4)",
        ("R4-1c",),
        incoming=refuse(
            "invalid_field", lambda o: isinstance(o.get("type"), str) and o["type"] not in _TYPES
        ),
    ),
    Defect(
        "type-number-unknown-type",
        "Refuses a message whose type is not a string with unknown_type instead of invalid_field (§4)",
        ("R4-1d",),
        incoming=refuse(
            "unknown_type", lambda o: o.get("type") is not None and not isinstance(o["type"], str)
        ),
    ),
    # §4.1 the members of a request
    Defect(
        "blank-text-invalid-field",
        "Refuses a request without text, or with blank text, with invalid_field, not text_required (§4.1)",
        ("R4.1-5a",),
        incoming=refuse("invalid_field", lambda o: is_request(o) and _blank(o)),
    ),
    Defect(
        "text-type-text-required",
        "Refuses a text that is not a string with text_required instead of invalid_field (§4.1)",
        ("R4.1-5b",),
        incoming=refuse(
            "text_required",
            lambda o: is_request(o) and o.get("text") is not None and not isinstance(o["text"], str),
        ),
    ),
    Defect(
        "long-text-truncated",
        "Speaks the first 100 characters of a text over max_text_chars instead of refusing it (§4.1)",
        ("R4.1-5c",),
        incoming=lambda s, o: (
            {**o, "text": o["text"][:100]}
            if is_request(o) and isinstance(o.get("text"), str) and len(o["text"]) > 10_000
            else None
        ),
    ),
    Defect(
        "voice-type-invalid-voice",
        "Refuses a voice that is not a string with invalid_voice instead of invalid_field (§4.1)",
        ("R4.1-5d",),
        incoming=refuse(
            "invalid_voice",
            lambda o: is_request(o) and o.get("voice") is not None and not isinstance(o["voice"], str),
        ),
    ),
    Defect(
        "unknown-voice-default",
        "Speaks a request naming a voice it does not have in the default voice instead of refusing it (§4.1)",
        ("R4.1-5e", "R4.4-5b"),
        incoming=lambda s, o: {**o, "voice": "af_heart"} if is_request(o) and _unknown_voice(o) else None,
    ),
    Defect(
        "speed-type-invalid-speed",
        "Refuses a speed that is not a number with invalid_speed instead of invalid_field (§4.1)",
        ("R4.1-5g",),
        incoming=refuse(
            "invalid_speed", lambda o: is_request(o) and "speed" in o and not _number(o["speed"])
        ),
    ),
    Defect(
        "rate-type-invalid-rate",
        "Refuses a sample_rate that is not a number with invalid_sample_rate instead of invalid_field (§4.1)",
        ("R4.1-5i",),
        incoming=refuse(
            "invalid_sample_rate",
            lambda o: is_request(o) and o.get("sample_rate") is not None and not _number(o["sample_rate"]),
        ),
    ),
    Defect(
        "odd-rate-invalid-field",
        "Refuses a sample_rate it does not offer with invalid_field instead of invalid_sample_rate (§4.1)",
        ("R4.1-5j",),
        incoming=refuse(
            "invalid_field",
            lambda o: (
                is_request(o)
                and _number(o.get("sample_rate"))
                and o["sample_rate"] not in (8000, 16000, 22050, 24000)
            ),
        ),
    ),
    Defect(
        "longest-id-refused",
        "Refuses a request_id of 128 characters, the longest allowed (§4.1)",
        ("R4.1-5l",),
        incoming=refuse(
            "invalid_field", lambda o: isinstance(o.get("request_id"), str) and len(o["request_id"]) == 128
        ),
    ),
    Defect(
        "bad-id-invalid-json",
        "Refuses a request_id that is empty, not a string or over 128 characters with invalid_json (§4.1)",
        ("R4.1-5m",),
        incoming=refuse(
            "invalid_json",
            lambda o: (
                is_request(o)
                and "request_id" in o
                and o["request_id"] is not None
                and not (isinstance(o["request_id"], str) and 0 < len(o["request_id"]) <= 128)
            ),
        ),
    ),
    Defect(
        "plain-stamps-only",
        "Refuses every request_timestamp string but YYYY-MM-DDTHH:MM:SSZ: no fractions, offsets or lower "
        "case (§4.1)",
        ("R4.1-5n",),
        incoming=refuse(
            "invalid_field",
            lambda o: (
                isinstance(o.get("request_timestamp"), str)
                and not _PLAIN_STAMP.fullmatch(o["request_timestamp"])
            ),
        ),
    ),
    Defect(
        "bool-stamp-ignored",
        "Takes a request_timestamp that is neither a number nor a string as absent, not refused (§4.1)",
        ("R4.1-5p",),
        incoming=lambda s, o: (
            {k: v for k, v in o.items() if k != "request_timestamp"}
            if is_request(o) and isinstance(o.get("request_timestamp"), (bool, list, dict))
            else None
        ),
    ),
    Defect(
        "string-stamp-ignored",
        "Takes every request_timestamp string as absent: invalid date-times are spoken, not refused (§4.1)",
        ("R4.1-5s",),
        incoming=_string_stamp_ignored,
    ),
    Defect(
        "queued-duplicate-accepted",
        "Refuses a duplicate request_id only while the first request is active: a duplicate of a queued one "
        "is swallowed, neither refused nor answered (§4.1)",
        ("R4.1-7a",),
        incoming=lambda s, o: (
            DROP if is_request(o) and o.get("request_id") in s.session.pending_ids[1:] else None
        ),
    ),
    Defect(
        "duplicate-cancels-first",
        "Refuses a duplicate request_id and cancels the first request of that id too (§4.1)",
        ("R4.1-7c",),
        incoming=_duplicate_cancels_first,
    ),
    Defect(
        "active-not-counted",
        "Counts only the queued requests against max_queue, not the active one: it accepts max_queue + 1 "
        "(§4.1)",
        ("R4.1-11b",),
        server={"connection_class": _ActiveNotCounted},
    ),
    # §4.2 cancel
    Defect(
        "cancelled-bytes-miscounted",
        "Counts 2 bytes more than it sent in a cancelled request's audio_bytes (§4.2)",
        ("R4.2-6c",),
        outgoing=_on_cancelled(lambda s, o: [_counting(s, o, 2)]),
    ),
    Defect(
        "queued-cancel-refused",
        "Refuses a cancel naming a queued request with unknown_request (§4.2)",
        ("R4.2-2a",),
        incoming=_cancel_refused("queued"),
    ),
    Defect(
        "active-cancel-refused",
        "Refuses a cancel naming the active request with unknown_request (§4.2)",
        ("R4.2-2b",),
        incoming=_cancel_refused("active"),
    ),
    Defect(
        "second-cancel-ignored",
        "Swallows a cancel naming a request it already cancelled instead of refusing it (§4.2)",
        ("R4.2-2c",),
        incoming=_second_cancel_ignored,
    ),
    Defect(
        "queued-cancel-completed",
        "Closes the bracket of a request cancelled while queued with status completed, not cancelled (§4.2)",
        ("R4.2-7b",),
        outgoing=_queued_cancel_member("status", "completed"),
    ),
    Defect(
        "queued-cancel-bytes",
        "Reports audio_bytes 2 for a request cancelled while queued, which carried no audio (§4.2)",
        ("R4.2-7c",),
        outgoing=_queued_cancel_member("audio_bytes", 2),
    ),
    Defect(
        "assigns-from-zero",
        "Assigns r0, r1, ... to requests without request_id instead of r1, r2, ... (§4.1)",
        ("R4.1-8a",),
        incoming=_assigns_from_zero,
    ),
    Defect(
        "speed-ignored",
        "Speaks every request at speed 1.0 whatever its speed (§5.1)",
        ("R5.1-1c",),
        incoming=_set_member("speed", DROP),
    ),
    Defect(
        "g711-frames-as-pcm16",
        "Sends PCM16 audio frames in a bracket whose synthesis_start says pcm_mulaw or pcm_alaw (§4.1, §5.1)",
        ("R4.1-14a", "R5.1-1e"),
        outgoing=_g711_brackets(_g711_as_pcm16),
    ),
    Defect(
        "alaw-as-mulaw",
        "Answers a pcm_alaw request with μ-law codes: the wrong companding table (§4.1)",
        ("R4.1-13b",),
        outgoing=_g711_brackets(_alaw_as_mulaw),
    ),
    Defect(
        "weighted-blend-refused",
        "Refuses every blend with explicit weights, af_bella(3)+af_sky(1), with invalid_voice: it reads only "
        "equal-parts blends (§4.1)",
        ("R4.1-16a",),
        incoming=refuse("invalid_voice", lambda o: is_request(o) and "(" in str(o.get("voice", ""))),
    ),
    # §5.5 marks
    Defect(
        "marks-from-one",
        "Numbers a request's marks frames from 1 instead of 0 (§5.5)",
        ("R5.5-4b",),
        outgoing=map_controls(_segments_from_one),
    ),
    Defect(
        "marks-at-complete",
        "Sends a request's marks frames together just before its synthesis_complete, after the audio of "
        "later segments (§5.5)",
        ("R5.5-4c",),
        outgoing=_marks_at_complete,
    ),
    # §6.1 brackets
    Defect(
        "start-twice",
        "Sends every synthesis_start twice (§6.1)",
        ("R6.1-1a",),
        outgoing=lambda s, frames: [g for f in frames for g in twice_if(f, "synthesis_start")],
    ),
    # §6.3 refusals
    Defect(
        "refusal-with-bracket",
        "Sends a synthesis_start and a failed synthesis_complete after each refusal that names a request "
        "(§6.3)",
        ("R6.3-2b",),
        outgoing=_refusal_with_bracket,
    ),
    Defect(
        "refusal-stops-active",
        "Stops answering the active request, and every later one, once it refuses whitespace-only text "
        "(§6.3: nothing else changes)",
        ("R6.3-2d",),
        outgoing=stall_after("text_required"),
    ),
    # §7.1 close
    Defect(
        "request-after-close-refused",
        "Refuses a request that arrives after close with server_busy instead of ignoring it (§7.1)",
        ("R7.1-1a",),
        incoming=_answers_after_close_if("request", "server_busy"),
    ),
    Defect(
        "cancel-after-close-refused",
        "Refuses a cancel that arrives after close with unknown_request instead of ignoring it (§7.1)",
        ("R7.1-1b",),
        incoming=_answers_after_close_if("cancel", "unknown_request"),
    ),
    Defect(
        "second-close-refused",
        "Refuses a second close with invalid_field instead of ignoring it (§7.1)",
        ("R7.1-1c",),
        incoming=_answers_after_close_if("close", "invalid_field"),
    ),
    # §7.4 client disconnect
    Defect(
        "keeps-dropped-slot",
        "Keeps the place in max_sessions of a session dropped mid-synthesis without close (§7.4)",
        ("R7.4-1b",),
        # One lost place shows only where the server is full: the case that crowds it to max_sessions.
        where=("R7.4-1a",),
        server={"connection_class": _KeepsDroppedSlot},
    ),
    # §9.2 the order of the checks
    Defect(
        "utf8-before-size",
        "Decodes a message before checking its size: a long one that is not UTF-8 gets invalid_utf8, not "
        "message_too_large (§9.2)",
        ("R9.2-1a",),
        raw=_utf8_before_size,
    ),
    Defect(
        "type-after-text",
        "Checks text before type: a message of an unknown type with empty text gets text_required (§9.2)",
        ("R9.2-1b",),
        incoming=refuse(
            "text_required",
            lambda o: isinstance(o.get("type"), str) and o["type"] not in _TYPES and _blank(o),
        ),
    ),
    Defect(
        "members-last-first",
        "Checks a request's members in the reverse of §9.2's order: of two bad members, the later one's code",
        ("R9.2-1d",),
        incoming=_members_last_first,
    ),
    Defect(
        "queue-full-before-duplicate",
        "With max_queue requests queued or active, refuses a request whose id is already queued with "
        "queue_full instead of duplicate_request_id (§9.2: duplicate_request_id, then queue_full)",
        ("R9.2-1e",),
        incoming=_queue_full_before_duplicate,
    ),
    # §9.4 fatal errors
    Defect(
        "too-many-closes-1000",
        "Sends the fatal too_many_sessions frame to a session past max_sessions, then closes it with 1000 "
        "instead of 1013 (§9.4)",
        ("R9.4-2b",),
        server={"too_many_close_code": 1000},
    ),
    # §11 POST /invocations
    Defect(
        "alaw-audio-basic",
        "Answers a pcm_alaw body under Content-Type audio/basic, not RFC 4856's audio/PCMA;rate=<Hz> (§11.3)",
        ("R11.3-2c", "R11.3-2d"),
        where=("R11.3-2c", "R11.3-2d"),
        http=_http_rewrite(_alaw_as_audio_basic),
    ),
    Defect(
        "whole-g711-without-rate",
        "Labels a G.711 body answered whole (stream: false) audio/PCMU or audio/PCMA without its rate "
        "parameter (§11.3)",
        ("R11.3-2b", "R11.3-2e"),  # and R11.3-2c for pcm_alaw, which no case asks for whole
        where=("R11.3-2e",),
        http=_http_rewrite(_whole_g711_without_rate),
    ),
    Defect(
        "refusals-as-500",
        "Answers every refusal of POST /invocations with status 500 instead of the status of §9.1 (§11.6)",
        ("R11.6-2a",),
        http=_refusal_as_500,  # type: ignore[arg-type]
    ),
)
"""The rows, in spec order; appended to :data:`conformance.mutants.defects.table.DEFECTS`."""
