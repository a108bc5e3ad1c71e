"""One-defect mutants as a table: the unbroken tone server with one flag set.

Each :class:`Defect` names the requirement ids it breaks (:mod:`conformance.engine.requirements`) and the
cases that must report it ``FAILED``, and says what is broken with at most four small hooks:

* ``incoming(session, obj)``: sees each client message parsed as JSON (a dict; other messages go straight
  on). It returns ``None`` to let the session handle the message, a dict to hand the session instead, or
  :data:`DROP` to swallow the message; it may queue frames of its own with :meth:`DefectConnection.send`.
* ``outgoing(session, frames)``: rewrites the frames about to be sent (``str``: TEXT, ``bytes``: BINARY).
* ``http(server, request, response)``: rewrites a ``POST /invocations`` answer (status, headers, body).
* ``server``: attributes of :class:`DefectServer` to change (``ping_delay_busy_s``, ``accept_delay_s``,
  ``close_code``, ``refuse_query``, ``log_text``, ``max_text``).

The server is :class:`~conformance.mutants.base.ToneServer`: the team's sans-I/O ``ServerSession`` with a
tone, correct by construction, so each row breaks exactly what its hooks change. ``python -m
conformance.mutants NAME`` serves any row by name, like the hand-written variants.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket

from conformance.mutants.base import ToneConnection, ToneServer, ToneSynthesizer
from protocol.encodings import decode_to_pcm16
from protocol.frontend import speech_text
from protocol.voices import KOKORO_VOICES, is_blend, parse_voice

__all__ = ["DEFECTS", "DROP", "RUN_LEVEL_DEFECTS", "Defect", "DefectConnection", "DefectServer"]

DROP = object()
"""Returned by an ``incoming`` hook: the message is swallowed (no answer at all)."""

Frame = bytes | str
Incoming = Callable[["DefectConnection", dict[str, Any]], Any]
Outgoing = Callable[["DefectConnection", list[Frame]], list[Frame]]
Http = Callable[["DefectServer", dict[str, Any], Response], Response]


@dataclass(frozen=True)
class Defect:
    """One row of the table (see the module docstring)."""

    name: str
    breaks: str
    requirements: tuple[str, ...]
    caught_by: tuple[str, ...]
    incoming: Incoming | None = None
    outgoing: Outgoing | None = None
    http: Http | None = None
    server: dict[str, Any] = field(default_factory=dict)
    observed_by: tuple[str, ...] = ()
    """For a defect on a path that no case of its clauses takes (``caught_by`` is then empty): cases that
    take it, whose runs must fail on the clauses it breaks although none of them owns one (issue 30)."""


def _json(frame: Frame) -> dict[str, Any] | None:
    if not isinstance(frame, str):
        return None
    try:
        value = json.loads(frame)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _fatal_too_many(limit: int) -> dict[str, Any]:
    return {
        "type": "error",
        "code": "too_many_sessions",
        "message": f"{limit} sessions are open",
        "request_id": None,
        "fatal": True,
    }


def _error(code: str, request_id: Any) -> str:
    rid = request_id if isinstance(request_id, str) and 0 < len(request_id) <= 128 else None
    return _dump(
        {"type": "error", "code": code, "message": f"{code}: refused", "request_id": rid, "fatal": False}
    )


def _map_controls(change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Outgoing:
    """An ``outgoing`` hook that rewrites each control frame with ``change`` (``None`` drops the frame)."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = _json(frame)
            if obj is None:
                out.append(frame)
                continue
            changed = change(obj)
            if changed is not None:
                out.append(_dump(changed))
        return out

    return hook


def _list_unspoken_voice(obj: dict[str, Any]) -> dict[str, Any]:
    """``capabilities`` with one more voice, which the session (its known voices) refuses."""
    if obj.get("type") == "capabilities":
        obj = {**obj, "voices": [*obj["voices"], {"id": "af_unspoken", "language": "a", "gender": "female"}]}
    return obj


class _LanguageBlindSynthesizer(ToneSynthesizer):
    """Counts every character as a Latin letter: kanji, kana and hanzi last as long as one letter each."""

    syllable_seconds = ToneSynthesizer.seconds_per_char


def _refuse(code: str, when: Callable[[dict[str, Any]], bool]) -> Incoming:
    """An ``incoming`` hook that refuses matching messages with ``code`` instead of handling them."""

    def hook(session: DefectConnection, obj: dict[str, Any]) -> Any:
        if not when(obj):
            return None
        session.send(_error(code, obj.get("request_id")))
        return DROP

    return hook


def _twice_if(frame: Frame, kind: str) -> tuple[Frame, ...]:
    return (frame, frame) if (_json(frame) or {}).get("type") == kind else (frame,)


def _stall_after(code: str) -> Outgoing:
    """An ``outgoing`` hook: after an error frame with ``code``, no request is answered any more (no audio,
    no bracket), as when the refusal killed the server's synthesis worker; error frames and ``capabilities``
    still go out (the reader lives on)."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = _json(frame)
            if session.stalled and (
                obj is None or obj.get("type") in ("synthesis_start", "synthesis_complete", "marks")
            ):
                continue
            out.append(frame)
            if obj is not None and obj.get("type") == "error" and obj.get("code") == code:
                session.stalled = True
        return out

    return hook


def _is_request(obj: dict[str, Any]) -> bool:
    return obj.get("type") in (None, "synthesize")


def _is_cancel(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "cancel"


_KNOWN = {"type", "text", "voice", "speed", "sample_rate", "request_id", "request_timestamp"}


# -- hooks that need a little state ----------------------------------------------------------------------


def _extra_text_audio(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # After each synthesis_start, 8 bytes of silence in a TEXT frame (valid UTF-8, not JSON): audio that
    # is not a BINARY message (§3.3.1). audio_bytes counts it, so nothing else is wrong.
    out: list[Frame] = []
    for frame in frames:
        obj = _json(frame)
        if obj is not None and obj.get("type") == "synthesis_complete":
            obj["audio_bytes"] += 8
            obj["total_duration_s"] = obj["audio_bytes"] / 2 / session.rates.get(obj["request_id"], 24000)
            frame = _dump(obj)
        out.append(frame)
        if obj is not None and obj.get("type") == "synthesis_start":
            session.rates[obj["request_id"]] = obj["sample_rate"]
            out.append("\x00" * 8)
    return out


def _audio_after_complete(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        obj = _json(frame)
        if obj is not None and obj.get("type") == "synthesis_complete" and obj.get("audio_bytes"):
            out.append(b"\x10\x00\x10\x00")  # two samples outside any bracket (§6.1)
    return out


def _drop_cancelled_start(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # The bracket of a request cancelled while queued loses its synthesis_start (§4.2).
    out: list[Frame] = []
    for i, frame in enumerate(frames):
        obj = _json(frame)
        following = _json(frames[i + 1]) if i + 1 < len(frames) else None
        if (
            obj is not None
            and obj.get("type") == "synthesis_start"
            and following is not None
            and following.get("status") == "cancelled"
        ):
            continue
        out.append(frame)
    return out


def _renamed_ids(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # Server-assigned ids become "req-<N>" instead of r<N> (§4.1).
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        rid = obj.get("request_id")
        if isinstance(rid, str) and re.fullmatch(r"r\d+", rid) and rid not in session.client_ids:
            obj["request_id"] = "req-" + rid[1:]
        return obj

    return _map_controls(change)(session, frames)


def _remember_ids(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if isinstance(obj.get("request_id"), str):
        session.client_ids.add(obj["request_id"])
    return None


def _queue_never_full(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A request beyond max_queue is swallowed instead of refused with queue_full (§4.1).
    if _is_request(obj) and len(session.session.pending_ids) >= session.server.limits.max_queue:
        return DROP
    return None


def _duplicate_swallowed(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if _is_request(obj) and obj.get("request_id") in session.session.pending_ids:
        return DROP  # neither refused with duplicate_request_id nor answered (§4.1)
    return None


def _ignores_queued_cancel(session: DefectConnection, obj: dict[str, Any]) -> Any:
    pending = session.session.pending_ids
    if _is_cancel(obj) and obj.get("request_id") in pending[1:]:
        return DROP  # a queued request's cancel is ignored: it is synthesized in full (§4.2)
    return None


def _ignores_active_cancel(session: DefectConnection, obj: dict[str, Any]) -> Any:
    pending = session.session.pending_ids
    if _is_cancel(obj) and pending and obj.get("request_id") == pending[0]:
        return DROP  # the active request's cancel is ignored: it is spoken to the end, status completed
    return None


def _unknown_cancel_swallowed(session: DefectConnection, obj: dict[str, Any]) -> Any:
    rid = obj.get("request_id")
    if _is_cancel(obj) and (rid is None or rid not in session.session.pending_ids):
        return DROP  # no unknown_request (§4.2)
    return None


def _idle_cancel_refused(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if _is_cancel(obj) and obj.get("request_id") is None and not session.session.pending_ids:
        session.send(_error("unknown_request", None))
        return DROP
    return None


def _cancel_sticks(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A cancel-all on an idle session also cancels the next request (§4.2: later requests are unaffected).
    if _is_cancel(obj) and obj.get("request_id") is None and not session.session.pending_ids:
        session.sticky_cancel = True
        return None
    if _is_request(obj) and session.sticky_cancel and isinstance(obj.get("request_id"), str):
        session.sticky_cancel = False
        session.after.append(_dump({"type": "cancel", "request_id": obj["request_id"]}))
    return None


def _answers_after_close(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if session.close_seen:
        session.send(_error("invalid_json", obj.get("request_id")))
        return DROP
    if obj.get("type") == "close":
        session.close_seen = True
    return None


def _text_checked_first(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # text is checked before request_id (§9.2 checks request_id first): a message with a bad id and an empty
    # text gets text_required instead of invalid_field.
    text, rid = obj.get("text"), obj.get("request_id")
    bad_id = "request_id" in obj and not (isinstance(rid, str) and 0 < len(rid) <= 128)
    if _is_request(obj) and bad_id and (text is None or (isinstance(text, str) and not text.strip())):
        session.send(_error("text_required", None))
        return DROP
    return None


# -- POST /invocations defects ---------------------------------------------------------------------------


async def _body(response: Response) -> bytes:
    if isinstance(response, StreamingResponse):
        return b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[misc]
    return bytes(response.body)


def _rebuild(response: Response, body: bytes, *, stream: bool, **headers: str) -> Response:
    kept = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", *headers)}
    kept.update(headers)
    if stream:

        async def chunks() -> Any:
            for i in range(0, len(body), 32768):
                yield body[i : i + 32768]

        return StreamingResponse(chunks(), status_code=response.status_code, headers=kept)
    return Response(body, status_code=response.status_code, headers=kept)


def _http_rewrite(
    change: Callable[[dict[str, Any], Response, bytes], tuple[bytes, bool, dict[str, str]] | None],
) -> Http:
    """An ``http`` hook: ``change(request, response, body)`` gives ``(body, stream, headers)`` or None."""

    async def hook(server: DefectServer, request: dict[str, Any], response: Response) -> Response:
        body = await _body(response)
        changed = change(request, response, body)
        if changed is None:
            return _rebuild(response, body, stream=isinstance(response, StreamingResponse))
        new_body, stream, headers = changed
        return _rebuild(response, new_body, stream=stream, **headers)

    return hook  # type: ignore[return-value]


def _wav(request: dict[str, Any]) -> bool:
    return request.get("format", "wav") == "wav" and request.get("transport", "binary") == "binary"


def _streamed_wav_exact_sizes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and request.get("stream", True) is True and response.status_code == 200):
        return None
    data = len(body) - 44
    header = body[:4] + (36 + data).to_bytes(4, "little") + body[8:40] + data.to_bytes(4, "little")
    return header + body[44:], True, {}


def _wav_eight_bits(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and response.status_code == 200):
        return None
    return body[:34] + (8).to_bytes(2, "little") + body[36:], isinstance(response, StreamingResponse), {}


def _whole_wav_unknown_sizes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and request.get("stream", True) is False and response.status_code == 200):
        return None
    unknown = b"\xff\xff\xff\xff"  # the streamed header's sizes in a whole body (§11.2)
    return body[:4] + unknown + body[8:40] + unknown + body[44:], False, {}


def _pcm_as_l16(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("format") != "pcm" or request.get("transport", "binary") != "binary":
        return None
    rate = request.get("sample_rate", 24000)
    return (
        body,
        isinstance(response, StreamingResponse),
        {"content-type": f"audio/L16;rate={rate};channels=1"},
    )


def _g711_body(request: dict[str, Any]) -> str | None:
    """The G.711 encoding of a binary ``format: "pcm"`` request (§11.3), else ``None``."""
    encoding = request.get("encoding")
    binary = request.get("format") == "pcm" and request.get("transport", "binary") == "binary"
    return encoding if binary and encoding in ("pcm_mulaw", "pcm_alaw") else None


def _mulaw_as_audio_basic(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if _g711_body(request) != "pcm_mulaw":
        return None
    return body, isinstance(response, StreamingResponse), {"content-type": "audio/basic"}


def _g711_sent_as_pcm16(request: dict[str, Any], response: Response, body: bytes) -> Any:
    encoding = _g711_body(request)
    if encoding is None:
        return None
    return decode_to_pcm16(body, encoding), isinstance(response, StreamingResponse), {}


def _sse_crlf(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None
    return body.replace(b"\n", b"\r\n"), True, {}


def _sse_seq_from_one(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None

    def bump(match: re.Match[bytes]) -> bytes:
        return b'"seq":' + str(int(match.group(1)) + 1).encode()

    return re.sub(rb'"seq":(\d+)', bump, body), True, {}


def _error_body_string(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if response.status_code < 400:
        return None
    error = json.loads(body)["error"]
    return json.dumps({"error": f"{error['code']}: {error['message']}"}).encode(), False, {}


# -- describe, marks (§4.4, §5.5) -------------------------------------------------------------------------


def _describe_held(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A describe that arrives while requests are queued or active waits for them, like a request (§4.4).
    if obj.get("type") == "describe" and session.session.pending_ids:
        session.held.append(obj)
        return DROP
    return None


def _describe_released(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    if session.held and not session.session.pending_ids:
        answers = [session.server.capabilities.answering(_request_id(o)).to_json() for o in session.held]
        session.held = []
        return [*frames, *answers]
    return frames


def _request_id(obj: dict[str, Any]) -> str | None:
    rid = obj.get("request_id")
    return rid if isinstance(rid, str) and 0 < len(rid) <= 128 else None


def _capabilities_unasked(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # The server announces itself with its first frame, unasked (§4.4).
    if frames and not session.announced:
        session.announced = True
        return [session.server.capabilities.to_json(), *frames]
    return frames


def _is_marks(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "marks"


def _later_segment(obj: dict[str, Any]) -> bool:
    return _is_marks(obj) and isinstance(obj.get("segment"), int) and obj["segment"] > 0


def _remember_marked(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if obj.get("marks") is True and isinstance(obj.get("request_id"), str):
        session.marked.add(obj["request_id"])
    return None


def _words_dropped_when_marked(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # Asked for marks, the request's word timings go only into its marks: synthesis_complete loses them.
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("type") == "synthesis_complete" and obj.get("request_id") in session.marked:
            return {k: v for k, v in obj.items() if k != "words"}
        return obj

    return _map_controls(change)(session, frames)


def _bad_marks_ignored(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A marks member that is not a boolean is ignored like an unknown member instead of refused (§5.5).
    marks = obj.get("marks")
    if "marks" in obj and marks is not None and not isinstance(marks, bool):
        return {k: v for k, v in obj.items() if k != "marks"}
    return None


# -- text normalization, word timings (§14) ---------------------------------------------------------------


class _ReadsMarkdownAloud(ToneSynthesizer):
    """Reads markdown as plain text: every marker is spoken by its name."""

    NAMES = (("**", " asterisk asterisk "), ("*", " asterisk "), ("_", " underscore "), ("`", " backtick "))

    def spoken(self, segment: str, voice: str) -> str:
        text = re.sub(r"(?m)^(#+)", lambda m: " hash" * len(m.group(1)), segment)
        text = re.sub(r"(?m)^- ", " dash ", text)
        for marker, name in self.NAMES:
            text = text.replace(marker, name)
        try:
            return speech_text(text, voice[:1] or "a", markdown=False)
        except (TypeError, ValueError):
            return text


class _DropsFigures(ToneSynthesizer):
    """A G2P that skips what it cannot read: every digit is dropped before the text is spoken."""

    def spoken(self, segment: str, voice: str) -> str:
        return super().spoken(re.sub(r"\d", "", segment), voice)


class _UnescapesFirst(ToneSynthesizer):
    """Removes markdown's backslash escapes before it reads markdown, so escaped syntax is syntax again."""

    def spoken(self, segment: str, voice: str) -> str:
        return super().spoken(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", segment), voice)


class _NoWordTimings(ToneSynthesizer):
    """Has no word timings, although the server lists English with ``word_timings: true``."""

    def words(self, segment: str, voice: str, start_s: float, end_s: float) -> None:
        return None


def _no_header_bytes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None
    return re.sub(rb',\s*"header_bytes":\s*44', b"", body), True, {}


# -- the table -------------------------------------------------------------------------------------------

_R = ("R6.3-2", "R6.3-3")

# -- encodings (§3.3.1, §4.1) -----------------------------------------------------------------------------


def _g711_brackets(change: Callable[[DefectConnection, str, bytes, bool], list[Frame]]) -> Outgoing:
    """An ``outgoing`` hook that hands each audio frame of a G.711 bracket to ``change`` (with the
    bracket's encoding and whether it is the bracket's first frame) and adds what the change adds to the
    bracket's ``audio_bytes``, so only what ``change`` breaks is wrong."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = _json(frame)
            if obj is not None and obj.get("type") == "synthesis_start":
                encoding = obj.get("encoding")
                session.g711 = encoding if encoding in ("pcm_mulaw", "pcm_alaw") else None
                session.g711_first, session.g711_added = True, 0
            elif obj is not None and obj.get("type") == "synthesis_complete" and session.g711:
                obj["audio_bytes"] += session.g711_added
                frame, session.g711 = _dump(obj), None
            elif isinstance(frame, bytes) and session.g711:
                changed = change(session, session.g711, frame, session.g711_first)
                session.g711_first = False
                session.g711_added += sum(map(len, changed)) - len(frame)
                out += changed
                continue
            out.append(frame)
        return out

    return hook


def _mulaw_as_alaw(session: DefectConnection, encoding: str, frame: bytes, first: bool) -> list[Frame]:
    from protocol.encodings import decode_to_pcm16, encode_pcm16

    if encoding != "pcm_mulaw":
        return [frame]
    return [encode_pcm16(decode_to_pcm16(frame, "pcm_mulaw"), "pcm_alaw")]


def _g711_json_first_frame(
    session: DefectConnection, encoding: str, frame: bytes, first: bool
) -> list[Frame]:
    # The G.711 samples 7B 7D: the text {}, a JSON object, as a frame of its own.
    return [b"{}", frame] if first else [frame]


def _drop_unknown_encoding(session: DefectConnection, obj: dict[str, Any]) -> Any:
    from protocol.encodings import ENCODINGS

    encoding = obj.get("encoding")
    if isinstance(encoding, str) and encoding not in ENCODINGS:
        return {k: v for k, v in obj.items() if k != "encoding"}  # answered in PCM16, not refused
    return None


# -- voice blends (§4.1) -----------------------------------------------------------------------------------


class _EqualWeightsSynthesizer(ToneSynthesizer):
    """Mixes a blend's voices in equal parts, whatever its weights."""

    def pitch(self, voice: str) -> float:
        if not is_blend(voice):
            return super().pitch(voice)
        voices = parse_voice(voice, KOKORO_VOICES).voices
        return sum(super(_EqualWeightsSynthesizer, self).pitch(v) for v in voices) / len(voices)


class _FirstVoiceSynthesizer(ToneSynthesizer):
    """Speaks a blend in its first voice alone."""

    def pitch(self, voice: str) -> float:
        return super().pitch(parse_voice(voice, KOKORO_VOICES).voices[0] if is_blend(voice) else voice)


class _DriftingBlendSynthesizer(ToneSynthesizer):
    """Speaks a blend it has spoken before 15 % higher each time (a mix that is not reproducible)."""

    def __init__(self) -> None:
        self.times_spoken: dict[str, int] = {}  # not ``spoken``: that is ToneSynthesizer's method

    def pitch(self, voice: str) -> float:
        if not is_blend(voice):
            return super().pitch(voice)
        times = self.times_spoken[voice] = self.times_spoken.get(voice, -1) + 1
        return super().pitch(voice) * (1 + 0.15 * times)


def _remember_blends(session: DefectConnection, obj: dict[str, Any]) -> Any:
    voice = obj.get("voice")
    if _is_request(obj) and isinstance(voice, str) and is_blend(voice):
        session.blends[obj.get("request_id")] = voice
    return None


def _echo_blend_as_sent(obj: dict[str, Any], session: DefectConnection) -> dict[str, Any]:
    if obj.get("type") == "synthesis_start" and obj.get("request_id") in session.blends:
        obj["voice"] = session.blends[obj["request_id"]]  # as the client wrote it, not canonical
    return obj


def _blend_refusal_unnamed(obj: dict[str, Any], session: DefectConnection) -> dict[str, Any]:
    refused = obj.get("type") == "error" and obj.get("code") == "invalid_voice"
    if refused and obj.get("request_id") in session.blends:
        obj["message"] = "this voice is not valid"
    return obj


def _with_session(change: Callable[[dict[str, Any], DefectConnection], dict[str, Any]]) -> Outgoing:
    """An ``outgoing`` hook rewriting each control frame with ``change(obj, session)``."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        return _map_controls(lambda obj: change(obj, session))(session, frames)

    return hook


def _blend_across_languages(session: DefectConnection, obj: dict[str, Any]) -> Any:
    voice = obj.get("voice")
    if _is_request(obj) and isinstance(voice, str) and is_blend(voice):
        names = [re.sub(r"\(.*\)$", "", part) for part in voice.split("+")]
        if len({name[:1] for name in names}) > 1 and all(name in KOKORO_VOICES for name in names):
            return {**obj, "voice": names[0]}  # spoken in its first voice instead of refused
    return None


# -- Ogg/Opus, FLAC and AAC bodies (§11.7) -------------------------------------------------------------------


def _binary_format(fmt: str, request: dict[str, Any], response: Response) -> bool:
    return (
        request.get("format") == fmt
        and request.get("transport", "binary") == "binary"
        and response.status_code == 200
    )


def _ogg_pages_bad_crc(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("opus", request, response):
        return None
    broken = bytearray(body)
    start = 0
    while (start := broken.find(b"OggS", start)) >= 0:
        broken[start + 22] ^= 0xFF  # the page's CRC-32 (RFC 3533 §6): a decoder drops the page
        start += 4
    return bytes(broken), isinstance(response, StreamingResponse), {}


def _flac_without_streaminfo(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("flac", request, response) or not body.startswith(b"fLaC"):
        return None
    at = 4
    while at < len(body):  # metadata blocks: 1 byte (last-block flag, type), 3 bytes of length
        last, length = body[at] & 0x80, int.from_bytes(body[at + 1 : at + 4], "big")
        at += 4 + length
        if last:
            break
    return body[at:], isinstance(response, StreamingResponse), {}


def _aac_without_adts(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("aac", request, response):
        return None
    raw, at = bytearray(), 0
    while at + 7 <= len(body) and body[at] == 0xFF and body[at + 1] & 0xF0 == 0xF0:
        header = 7 if body[at + 1] & 1 else 9  # protection_absent: no CRC
        length = (body[at + 3] & 3) << 11 | body[at + 4] << 3 | body[at + 5] >> 5
        raw += body[at + header : at + length]
        at += length
    return bytes(raw), isinstance(response, StreamingResponse), {}


def _container_sse_says_pcm(request: dict[str, Any], response: Response, body: bytes) -> Any:
    fmt = request.get("format")
    if request.get("transport") != "sse" or fmt not in ("opus", "flac", "aac"):
        return None
    return body.replace(f'"encoding":"{fmt}"'.encode(), b'"encoding":"pcm_s16le"', 1), True, {}


_UTTERANCE_TYPES = ("utterance", "append", "flush", "end")


def _fragment_text(obj: dict[str, Any]) -> str | None:
    """The ``text`` of an utterance message (§15.1), or ``None``."""
    text = obj.get("text")
    return text if obj.get("type") in _UTTERANCE_TYPES and isinstance(text, str) else None


def _refuse_fragment(session: DefectConnection, obj: dict[str, Any], code: str) -> Any:
    """Refuse an utterance message with ``code``, naming it as the session would (§5.4, §15.6)."""
    refusal = json.loads(_error(code, obj.get("request_id")))
    session.send(_dump({**refusal, "message_type": obj.get("type")}))
    return DROP


def _high_half_refused(session: DefectConnection, obj: dict[str, Any]) -> Any:
    text = _fragment_text(obj)
    if obj.get("type") != "end" and text and "\ud800" <= text[-1] <= "\udbff":
        return _refuse_fragment(session, obj, "invalid_json")
    return None


def _halves_not_joined(session: DefectConnection, obj: dict[str, Any]) -> Any:
    """The low half completing a held high half: each half becomes "?" (UTF-8 with errors="replace")."""
    text = _fragment_text(obj)
    # The defect reaches into the session: it holds the half, so the refusals of §15.2 stay as they are.
    pending = session.session._pending.get(obj.get("request_id"))
    if text and "\udc00" <= text[0] <= "\udfff" and pending is not None and pending.held_half:
        pending.held_half = ""
        return {**obj, "text": "??" + text[1:]}
    return None


def _lone_low_half_dropped(session: DefectConnection, obj: dict[str, Any]) -> Any:
    """A low half beginning a text while no half is held: dropped instead of refused."""
    text = _fragment_text(obj)
    pending = session.session._pending.get(obj.get("request_id"))
    held = pending is not None and pending.held_half
    if text and "\udc00" <= text[0] <= "\udfff" and not held:
        return {**obj, "text": text[1:]}
    return None


def _blank_fragment_refused(session: DefectConnection, obj: dict[str, Any]) -> Any:
    text = _fragment_text(obj)
    if obj.get("type") != "utterance" and text and text.isspace():
        return _refuse_fragment(session, obj, "text_required")
    return None


# -- defects only on the cancel path: seen by cases that do not own their clause (issue 30) ---------------

CANCEL_PATH = ("4.2.1",)
"""The case that cancels an active request and then closes: the path of the rows below. It owns the cancel
clauses of §4.2 only, and none of the clauses they break, whose own cases never cancel."""


def _on_cancelled(change: Callable[[DefectConnection, dict[str, Any]], list[Frame]]) -> Outgoing:
    """An ``outgoing`` hook: each ``synthesis_complete`` with status ``cancelled`` (the cancel path, §4.2) is
    replaced by the frames ``change(session, complete)`` returns; every other frame goes out unchanged."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = _json(frame)
            if obj is not None and obj.get("type") == "synthesis_start":
                session.rates[obj["request_id"]] = obj["sample_rate"]
            if (
                obj is not None
                and obj.get("type") == "synthesis_complete"
                and obj.get("status") == "cancelled"
            ):
                out += change(session, obj)
            else:
                out.append(frame)
        return out

    return hook


def _counting(session: DefectConnection, complete: dict[str, Any], added: int) -> str:
    """``complete`` counting ``added`` more audio bytes (audio_bytes and total_duration_s still agree)."""
    audio_bytes = complete["audio_bytes"] + added
    rate = session.rates.get(complete["request_id"], 24000)
    return _dump({**complete, "audio_bytes": audio_bytes, "total_duration_s": audio_bytes / 2 / rate})


def _audio_before(data: Frame) -> Callable[[DefectConnection, dict[str, Any]], list[Frame]]:
    """The last audio frame of a request cancelled while it spoke is ``data``, counted in its
    ``audio_bytes`` (a request cancelled while queued keeps its empty bracket, which its cases judge)."""
    size = len(data.encode()) if isinstance(data, str) else len(data)

    def change(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
        if not complete["audio_bytes"]:
            return [_dump(complete)]
        return [data, _counting(session, complete, size)]

    return change


def _unasked_capabilities(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
    capabilities = session.session.capabilities
    assert capabilities is not None
    return [_dump(complete), capabilities.answering(None).to_json()]


def _unasked_marks(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
    rid = complete["request_id"]
    marks = {"type": "marks", "request_id": rid, "segment": 0, "text": "x", "start_s": 0.0, "end_s": 0.0}
    return [_dump(marks), _dump(complete)]


def _queue_full_unnamed(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("type") == "error" and obj.get("code") == "queue_full":
            return {**obj, "request_id": None}
        return obj

    return _map_controls(change)(session, frames)


RUN_LEVEL_DEFECTS: tuple[Defect, ...] = (
    Defect(
        "cancelled-complete-binary",
        "Sends a cancelled request's synthesis_complete in a BINARY message (§3.2)",
        ("R3.2-4",),
        (),
        outgoing=_on_cancelled(lambda s, o: [_dump(o).encode()]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-huge-complete",
        "Pads a cancelled request's synthesis_complete with white space to over 1 MiB (§3.2)",
        ("R3.2-2",),
        (),
        outgoing=_on_cancelled(lambda s, o: [_dump(o)[:-1] + " " * (1 << 20) + "}"]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-odd-frame",
        "Ends the audio of a request cancelled while it spoke with a 1-byte frame, half a sample (§3.3.1)",
        ("R3.3.1-1",),
        (),
        outgoing=_on_cancelled(_audio_before(b"\x00")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-text-audio",
        "Ends the audio of a request cancelled while it spoke with silence in a TEXT message (§3.3.1)",
        ("R3.3.1-5",),
        (),
        outgoing=_on_cancelled(_audio_before("\x00\x00")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-huge-frame",
        "Ends the audio of a request cancelled while it spoke with a frame of silence over 1 MiB "
        "(§3.3.1; 4.2.4, which measures the audio after a cancel, sees that much too)",
        ("R3.3.1-6",),
        (),
        outgoing=_on_cancelled(_audio_before(bytes((1 << 20) + 2))),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-json-frame",
        "Ends the audio of a request cancelled while it spoke with a frame that is the JSON object {} "
        "(§3.3.2)",
        ("R3.3.2-1",),
        (),
        outgoing=_on_cancelled(_audio_before(b"{}")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-complete-invalid",
        "Leaves elapsed_s out of a cancelled request's synthesis_complete (§5)",
        ("R5-1",),
        (),
        outgoing=_on_cancelled(lambda s, o: [_dump({k: v for k, v in o.items() if k != "elapsed_s"})]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-audio-bytes",
        "Counts 2 bytes more than it sent in a cancelled request's audio_bytes (§5.3)",
        ("R5.3-2",),
        (),
        outgoing=_on_cancelled(lambda s, o: [_counting(s, o, 2)]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-complete-twice",
        "Sends a cancelled request's synthesis_complete twice (§6.1)",
        ("R6.1-1",),
        (),
        outgoing=_on_cancelled(lambda s, o: [_dump(o), _dump(o)]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "capabilities-after-cancel",
        "Follows a cancelled request's synthesis_complete with capabilities nobody asked for (§4.4)",
        ("R4.4-4",),
        (),
        outgoing=_on_cancelled(_unasked_capabilities),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "marks-on-cancel",
        "Sends a marks frame (segment 0, after the audio) to a cancelled request that did not ask for marks "
        "(§5.5)",
        ("R5.5-7", "R5.5-4"),
        (),
        outgoing=_on_cancelled(_unasked_marks),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "close-1011-after-refusal",
        "Closes a session that refused a message with 1011 instead of 1000 after close (§7.1)",
        ("R7.1-3",),
        (),
        server={"refused_close_code": 1011},
        observed_by=("9.1.5",),  # its close comes after the row, on the session the bad-input rows share
    ),
    Defect(
        "queue-full-unnamed",
        "Names no request (request_id null) in its queue_full error frames (§6.3)",
        ("R6.3-3",),
        (),
        outgoing=_queue_full_unnamed,
        observed_by=("4.1.6",),
    ),
)
"""One-defect mutants whose defect only a case that does not own its clause sees: no case fails, the run
does (on the clause: ``conformance/clauses::<id>``). One per clause that a finding can be recorded on outside
its own cases (:func:`conformance.engine.clauses.recorded`); R6.1-2 is ``cancel-then-stream``
(:mod:`conformance.mutants.synthesis`), and :data:`conformance.engine.unobservable.NO_RUN_MUTANT` says why the
others have none."""


DEFECTS: tuple[Defect, ...] = (
    Defect(
        "refuses-unknown-members",
        "Refuses a request with a member it does not know (invalid_field) (§1.4)",
        ("R1.4-1",),
        ("1.4.2",),
        incoming=_refuse("invalid_field", lambda o: _is_request(o) and bool(set(o) - _KNOWN)),
    ),
    Defect(
        "refuses-null",
        "Refuses a request whose optional member is null instead of treating it as absent (§1.4)",
        ("R1.4-2",),
        ("1.4.1",),
        incoming=_refuse("invalid_field", lambda o: _is_request(o) and any(v is None for v in o.values())),
    ),
    Defect(
        "refuses-integral-float",
        "Refuses sample_rate 24000.0 (an integer written with a fraction) (§1.4)",
        ("R1.4-3",),
        ("1.4.3",),
        incoming=_refuse("invalid_sample_rate", lambda o: isinstance(o.get("sample_rate"), float)),
    ),
    Defect(
        "cancel-invalid-field",
        "Refuses every cancel with invalid_field: neither offers cancel nor says unknown_type (§1.5)",
        ("R1.5-2",),
        ("4.2.1", "4.2.2", "4.2.3"),
        incoming=_refuse("invalid_field", _is_cancel),
    ),
    Defect(
        "refuses-null-type",
        'Refuses a request whose type is null or absent (only "synthesize" is read as a request) (§4)',
        ("R4-1",),
        ("4.1.1",),
        incoming=_refuse("unknown_type", lambda o: o.get("type") is None and "text" in o),
    ),
    Defect(
        "speed-as-invalid-field",
        "Refuses a speed out of range with invalid_field instead of invalid_speed (§4.1)",
        ("R4.1-5",),
        ("9.1.44", "9.1.45", "9.1.46"),
        incoming=lambda s, o: (
            {**o, "speed": "fast"}
            if isinstance(o.get("speed"), (int, float))
            and not isinstance(o.get("speed"), bool)
            and not 0.5 <= o["speed"] <= 2.0
            else None
        ),
    ),
    Defect(
        "accepts-stale",
        "Ignores request_timestamp: stale requests are spoken, not refused with request_stale (§4.1)",
        ("R4.1-9",),
        ("9.1.55", "9.1.56"),
        incoming=lambda s, o: (
            {k: v for k, v in o.items() if k != "request_timestamp"}
            if isinstance(o.get("request_timestamp"), (int, float, str))
            else None
        ),
    ),
    Defect(
        "refuses-future",
        "Refuses a request_timestamp in the future with request_stale (§4.1)",
        ("R4.1-10",),
        ("4.1.3",),
        incoming=_refuse(
            "request_stale",
            lambda o: (
                isinstance(o.get("request_timestamp"), (int, float))
                and o["request_timestamp"] > __import__("time").time() + 60
            ),
        ),
    ),
    Defect(
        "duplicate-swallowed",
        "Neither refuses nor answers a request whose id is already queued or active (§4.1)",
        ("R4.1-7",),
        ("4.1.5",),
        incoming=_duplicate_swallowed,
    ),
    Defect(
        "queue-never-full",
        "Swallows requests beyond max_queue instead of refusing them with queue_full (§4.1)",
        ("R4.1-11",),
        ("4.1.6",),
        incoming=_queue_never_full,
    ),
    Defect(
        "assigned-ids-renamed",
        "Assigns ids of the form req-<N> instead of r<N> to requests without one (§4.1)",
        ("R4.1-8",),
        ("4.1.2",),
        incoming=_remember_ids,
        outgoing=_renamed_ids,
    ),
    Defect(
        "refuses-long-text",
        "Refuses texts over 500 characters with text_too_long although max_text_chars is 10,000 (§4.1)",
        ("R4.1-1",),
        ("4.1.10",),
        incoming=_refuse("text_too_long", lambda o: isinstance(o.get("text"), str) and len(o["text"]) > 500),
    ),
    Defect(
        "idle-cancel-refused",
        "Answers a cancel-all on an idle session with unknown_request (§4.2)",
        ("R4.2-4",),
        ("4.2.3",),
        incoming=_idle_cancel_refused,
    ),
    Defect(
        "cancel-sticks",
        "A cancel-all on an idle session also cancels the next request (§4.2)",
        ("R4.2-8",),
        ("4.2.3",),
        incoming=_cancel_sticks,
    ),
    Defect(
        "active-cancel-ignored",
        "Ignores the cancel of the active request and speaks it to the end (§4.2)",
        ("R4.2-6",),
        ("4.2.1",),
        incoming=_ignores_active_cancel,
    ),
    Defect(
        "queued-cancel-ignored",
        "Ignores the cancel of a queued request and speaks it in full (§4.2)",
        ("R4.2-7", "R4.2-1"),
        ("4.2.2",),
        incoming=_ignores_queued_cancel,
    ),
    Defect(
        "cancelled-without-start",
        "A request cancelled while queued gets its synthesis_complete without a synthesis_start (§4.2)",
        ("R4.2-5",),
        ("4.2.2",),
        outgoing=_drop_cancelled_start,
    ),
    Defect(
        "unknown-cancel-swallowed",
        "Swallows a cancel naming no queued or active request instead of refusing it (§4.2)",
        ("R4.2-2",),
        ("9.1.58",),
        incoming=_unknown_cancel_swallowed,
    ),
    Defect(
        "control-as-binary",
        "Sends control frames as BINARY messages (§3.2)",
        ("R3.2-4",),
        ("3.2.1",),
        outgoing=lambda s, frames: [f.encode() if isinstance(f, str) else f for f in frames],
    ),
    Defect(
        "start-not-schema-valid",
        'Sends synthesis_start with "channels": "mono", which its schema forbids (§3.2, §5)',
        ("R3.2-1", "R5-1"),
        ("3.2.1",),
        outgoing=_map_controls(
            lambda o: {**o, "channels": "mono"} if o.get("type") == "synthesis_start" else o
        ),
    ),
    Defect(
        "huge-control",
        "Pads synthesis_complete past 1 MiB with an unknown member (§3.2)",
        ("R3.2-2",),
        ("3.2.2",),
        outgoing=_map_controls(
            lambda o: {**o, "padding": "x" * 1_100_000} if o.get("type") == "synthesis_complete" else o
        ),
    ),
    Defect(
        "audio-in-text",
        "Sends a little audio (8 bytes of silence) in a TEXT frame in every bracket (§3.3.1)",
        ("R3.3.1-5",),
        ("3.3.1",),
        outgoing=_extra_text_audio,
    ),
    Defect(
        "wrong-voice",
        'Reports "af_heart" in synthesis_start whatever voice was asked for (§5.1)',
        ("R5.1-1",),
        ("4.1.7",),
        outgoing=_map_controls(
            lambda o: {**o, "voice": "af_heart"} if o.get("type") == "synthesis_start" else o
        ),
    ),
    Defect(
        "wrong-audio-bytes",
        "Reports audio_bytes 2 bytes more than it sent (§5.3)",
        ("R5.3-2",),
        ("5.3.1",),
        outgoing=_map_controls(
            lambda o: (
                {**o, "audio_bytes": o["audio_bytes"] + 2} if o.get("type") == "synthesis_complete" else o
            )
        ),
    ),
    Defect(
        "complete-twice",
        "Sends every synthesis_complete twice (§6.1)",
        ("R6.1-1",),
        ("6.1.1",),
        outgoing=lambda s, frames: [
            g
            for f in frames
            for g in ((f, f) if (_json(f) or {}).get("type") == "synthesis_complete" else (f,))
        ],
    ),
    Defect(
        "audio-after-complete",
        "Sends two samples of audio after each synthesis_complete, outside any bracket (§6.1)",
        ("R6.1-2",),
        ("6.1.2",),
        outgoing=_audio_after_complete,
    ),
    Defect(
        "error-twice",
        "Sends every error frame twice (§6.3)",
        ("R6.3-2",),
        ("9.1.5", "9.1.31", "9.1.40"),
        outgoing=lambda s, frames: [g for f in frames for g in _twice_if(f, "error")],
    ),
    Defect(
        "stalls-after-bad-speed",
        "Stops answering requests after it refuses a speed: the refusal killed its synthesis worker, while "
        "error frames and describe are still answered (§6.3)",
        ("R6.3-2",),
        ("9.1.44", "9.1.45", "9.1.46", "9.2.4"),
        outgoing=_stall_after("invalid_speed"),
    ),
    Defect(
        "error-without-id",
        "Leaves request_id null in every error frame, even when the message had a valid one (§6.3)",
        ("R6.3-3",),
        ("9.2.8",),
        outgoing=_map_controls(lambda o: {**o, "request_id": None} if o.get("type") == "error" else o),
    ),
    Defect(
        "answers-after-close",
        "Refuses messages that arrive after close instead of ignoring them (§7.1)",
        ("R7.1-1",),
        ("7.1.3",),
        incoming=_answers_after_close,
    ),
    Defect(
        "close-1001",
        "Closes a drained session with 1001 instead of 1000 (§7.1)",
        ("R7.1-3",),
        ("7.1.2",),
        server={"close_code": 1001},
    ),
    Defect(
        "checks-text-first",
        "Checks text before request_id, so a message with both wrong gets text_required (§9.2)",
        ("R9.2-1",),
        ("9.2.1",),
        incoming=_text_checked_first,
    ),
    Defect(
        "accepts-bom",
        "Strips a UTF-8 byte order mark instead of refusing the message with invalid_json (§3.1)",
        ("R3.1-3",),
        ("9.1.9",),
        server={"strip_bom": True},
    ),
    Defect(
        "ping-flaps",
        "Answers GET /ping 200 once (enough to be started), then 503 (§2.2)",
        ("R2.2-1",),
        ("2.2.1",),
        server={"ping_ok_times": 1},
    ),
    Defect(
        "requires-subprotocol",
        "Refuses the WebSocket upgrade unless the client asks for a subprotocol (§2.3)",
        ("R2.3-3",),
        ("2.3.2",),
        server={"require_subprotocol": True},
    ),
    Defect(
        "refuses-query",
        "Refuses the WebSocket upgrade when the URL has a query string (§2.1)",
        ("R2.1-2",),
        ("2.1.1",),
        server={"refuse_query": True},
    ),
    Defect(
        "slow-ping-busy",
        "Answers GET /ping only after 3 s while a synthesis runs (§2.2)",
        ("R2.2-2",),
        ("2.2.2",),
        server={"ping_delay_busy_s": 3.0},
    ),
    Defect(
        "slow-handshake",
        "Waits 0.6 s before completing the WebSocket handshake (§2.3)",
        ("R2.3-1", "R2.3-2"),
        ("2.3.1",),
        server={"accept_delay_s": 0.6},
    ),
    Defect(
        "logs-text",
        "Prints every request's text to its output (§13)",
        ("R13-3",),
        ("13.0.1",),
        server={"log_text": True},
    ),
    Defect(
        "streamed-wav-exact",
        "Writes exact sizes into a streamed WAV header instead of 0xFFFFFFFF (§11.2)",
        ("R11.2-2",),
        ("11.2.1",),
        http=_http_rewrite(_streamed_wav_exact_sizes),
    ),
    Defect(
        "wav-8-bit-header",
        "Declares 8 bits per sample in the WAV header of 16-bit audio (§11.2)",
        ("R11.2-1",),
        ("11.2.1", "11.2.2"),
        http=_http_rewrite(_wav_eight_bits),
    ),
    Defect(
        "whole-wav-unknown-sizes",
        "Sends a stream: false WAV with the streamed header's 0xFFFFFFFF sizes instead of exact ones (§11.2)",
        ("R11.2-3",),
        ("11.2.2",),
        http=_http_rewrite(_whole_wav_unknown_sizes),
    ),
    Defect(
        "pcm-as-l16",
        "Labels raw PCM audio/L16 (big-endian by RFC 2586) instead of audio/pcm (§11.3)",
        ("R11.3-1",),
        ("11.3.1",),
        http=_http_rewrite(_pcm_as_l16),
    ),
    Defect(
        "mulaw-audio-basic",
        "Answers a pcm_mulaw body under Content-Type audio/basic, not RFC 4856's audio/PCMU;rate=<Hz> "
        "(§11.3)",
        ("R11.3-2",),
        ("11.3.2",),
        http=_http_rewrite(_mulaw_as_audio_basic),
    ),
    Defect(
        "g711-body-pcm16",
        "Labels a pcm_mulaw or pcm_alaw body audio/PCMU or audio/PCMA but sends PCM16 samples (§11.3)",
        ("R11.3-2",),
        ("11.3.2", "11.3.3"),
        http=_http_rewrite(_g711_sent_as_pcm16),
    ),
    Defect(
        "sse-crlf",
        "Ends SSE lines with CRLF (§11.4)",
        ("R11.4-5",),
        ("11.4.1",),
        http=_http_rewrite(_sse_crlf),
    ),
    Defect(
        "sse-seq-from-1",
        "Numbers SSE audio_chunk events from 1 (§11.4)",
        ("R11.4-6",),
        ("11.4.1",),
        http=_http_rewrite(_sse_seq_from_one),
    ),
    Defect(
        "http-error-string",
        'Answers HTTP refusals with {"error": "<code>: <message>"} (the AWS sample\'s shape) (§11.6)',
        ("R11.6-2",),
        ("11.6.11",),
        http=_http_rewrite(_error_body_string),
    ),
    Defect(
        "requires-json-type",
        "Refuses POST /invocations unless Content-Type is application/json (415) (§11.1)",
        ("R11.1-1",),
        ("11.1.1",),
        server={"require_json": True},
    ),
    Defect(
        "mulaw-as-alaw",
        "Answers a pcm_mulaw request with A-law codes: the wrong companding table (§3.3.1, §4.1)",
        ("R4.1-13",),
        ("4.1.14",),
        outgoing=_g711_brackets(_mulaw_as_alaw),
    ),
    Defect(
        "g711-json-frame",
        "Sends the G.711 samples 7B 7D ({}) as the first audio frame of a G.711 bracket (§3.3.2)",
        ("R3.3.2-1",),
        ("4.1.14", "4.1.15"),
        outgoing=_g711_brackets(_g711_json_first_frame),
    ),
    Defect(
        "ignores-unknown-encoding",
        "Answers a request for an encoding it does not offer in pcm_s16le instead of refusing it (§4.1)",
        ("R4.1-14",),
        ("4.1.13",),
        incoming=_drop_unknown_encoding,
    ),
    Defect(
        "blend-ignores-weights",
        "Speaks every voice blend in equal parts, whatever its weights (§4.1)",
        ("R4.1-19",),
        ("4.1.17",),
        server={"synth": _EqualWeightsSynthesizer()},
    ),
    Defect(
        "blend-first-voice",
        "Speaks a voice blend in its first voice alone (§4.1)",
        ("R4.1-19",),
        ("4.1.17",),
        server={"synth": _FirstVoiceSynthesizer()},
    ),
    Defect(
        "blend-drifts",
        "Speaks a blend it has spoken before 15 % higher each time: the same blend is not the same voice "
        "(§4.1)",
        ("R4.1-19",),
        ("4.1.18",),
        server={"synth": _DriftingBlendSynthesizer()},
    ),
    Defect(
        "blend-echo-as-sent",
        "Echoes a blend in synthesis_start as the client wrote it, not in canonical form (§4.1, §5.1)",
        ("R4.1-18",),
        ("4.1.16",),
        incoming=_remember_blends,
        outgoing=_with_session(_echo_blend_as_sent),
    ),
    Defect(
        "blend-across-languages",
        "Accepts a blend of voices of two languages and speaks it in the first voice (§4.1)",
        ("R4.1-16",),
        ("4.1.19",),
        incoming=_blend_across_languages,
    ),
    Defect(
        "blend-refusal-unnamed",
        "Refuses an invalid blend with invalid_voice and a message that names no part of it (§4.1)",
        ("R4.1-17",),
        ("4.1.20",),
        incoming=_remember_blends,
        outgoing=_with_session(_blend_refusal_unnamed),
    ),
    Defect(
        "lists-unspoken-voice",
        "Lists a voice in capabilities that its requests refuse with invalid_voice (§4.4)",
        ("R4.4-5",),
        ("4.4.1",),
        outgoing=_map_controls(_list_unspoken_voice),
    ),
    Defect(
        "describe-waits",
        "Answers a describe only once the requests queued or active when it came are completed (§4.4)",
        ("R4.4-2",),
        ("4.4.2",),
        incoming=_describe_held,
        outgoing=_describe_released,
    ),
    Defect(
        "capabilities-unasked",
        "Sends a capabilities frame unasked, ahead of the first frame of every session (§4.4)",
        ("R4.4-4",),
        ("4.4.3",),
        outgoing=_capabilities_unasked,
    ),
    Defect(
        "marks-first-only",
        "Sends the marks frame of a request's first segment only (§5.5)",
        ("R5.5-4",),
        ("5.5.1",),
        outgoing=_map_controls(lambda o: None if _later_segment(o) else o),
    ),
    Defect(
        "marks-spans-from-zero",
        "Gives every segment's marks start_s 0, overlapping the segments before it (§5.5)",
        ("R5.5-6",),
        ("5.5.2",),
        outgoing=_map_controls(lambda o: {**o, "start_s": 0.0} if _later_segment(o) else o),
    ),
    Defect(
        "marks-drop-words",
        "Leaves words out of synthesis_complete when the request asked for marks (they were in the marks) "
        "(§5.5)",
        ("R5.5-8",),
        ("5.5.4",),
        incoming=_remember_marked,
        outgoing=_words_dropped_when_marked,
    ),
    Defect(
        "marks-bad-ignored",
        'Ignores a marks member that is not a boolean ("yes") instead of refusing it with invalid_field '
        "(§5.5)",
        ("R5.5-3",),
        ("5.5.5",),
        incoming=_bad_marks_ignored,
    ),
    Defect(
        "no-words",
        "Lists English with word_timings true but sends no words (§14.1)",
        ("R14.1-2",),
        ("14.1.1",),
        server={"synth": _NoWordTimings()},
    ),
    Defect(
        "reads-markdown",
        "Reads markdown aloud: hashes, asterisks, underscores, backticks and bullets spoken by name (§14.2)",
        ("R14.2-1",),
        ("14.2.1",),
        server={"synth": _ReadsMarkdownAloud()},
    ),
    Defect(
        "drops-figures",
        "Drops every digit of the text, as a G2P that cannot read figures does (§14.2)",
        ("R14.2-2",),
        ("14.2.2",),
        server={"synth": _DropsFigures()},
    ),
    Defect(
        "unescapes-first",
        "Removes backslash escapes before reading markdown: escaped [12] is a citation again, and dropped "
        "(§14.2)",
        ("R14.2-4",),
        ("14.2.3",),
        server={"synth": _UnescapesFirst()},
    ),
    Defect(
        "sse-no-header-bytes",
        "Leaves header_bytes out of the first audio_chunk of an SSE wav stream (§11.4)",
        ("R11.4-7",),
        ("11.4.2",),
        http=_http_rewrite(_no_header_bytes),
    ),
    Defect(
        "plain-http-errors",
        "Answers 404 and 405 with the web framework's plain-text bodies, not the one error shape (§11.6)",
        ("R11.6-3",),
        ("11.6.12",),
        server={"plain_http_errors": True},
    ),
    Defect(
        "flood-holds-the-loop",
        "Parses each client message in 5 ms of CPU and reads every message waiting without handing the "
        "event loop back: one session's flood holds GET /ping and the other sessions (§10.3)",
        ("R10.3-4",),
        ("10.3.1",),
        server={"greedy_parse_s": 0.005},
    ),
    Defect(
        "no-reserve",
        "Refuses a new session with too_many_sessions while every slot is held by sessions idle for longer "
        "than idle_eviction_s: idle sockets lock callers out (§7.5)",
        ("R7.5-3",),
        ("7.5.1",),
        server={"reserve": False},
    ),
    Defect(
        "refuses-busy-handshake",
        "Refuses the WebSocket handshake (403) when max_sessions are open, instead of accepting and then "
        "refusing with too_many_sessions (§2.3)",
        ("R2.3-5",),
        ("2.3.3",),
        server={"refuse_busy_handshake": True},
    ),
    Defect(
        "too-many-without-frame",
        "Closes a session past max_sessions with 1013 and no too_many_sessions error frame (§9.4)",
        ("R9.4-1",),
        ("9.4.1",),
        server={"too_many_frame": False},
    ),
    Defect(
        "too-many-stays-open",
        "Sends the fatal too_many_sessions frame to a session past max_sessions, then serves it anyway "
        "(§9.4)",
        ("R9.4-2",),
        ("9.4.2",),
        server={"too_many_serves": True},
    ),
    Defect(
        "language-blind",
        "Speaks every language's text with one English-like rule: Japanese and Chinese come out far too "
        "short, as read by a G2P that skips what it cannot read (§14.1)",
        ("R14.1-1",),
        ("14.1.1",),
        server={"synth": _LanguageBlindSynthesizer()},
    ),
    Defect(
        "opus-bad-page-crc",
        "Sends Ogg pages whose CRC is wrong: a decoder drops every page of the Opus body (§11.7)",
        ("R11.7-2",),
        ("11.7.1",),
        http=_http_rewrite(_ogg_pages_bad_crc),
    ),
    Defect(
        "flac-without-streaminfo",
        "Sends FLAC frames without the fLaC marker and STREAMINFO a FLAC stream starts with (§11.7)",
        ("R11.7-2",),
        ("11.7.2",),
        http=_http_rewrite(_flac_without_streaminfo),
    ),
    Defect(
        "aac-without-adts",
        "Sends raw AAC access units without their ADTS headers: no decoder can frame them (§11.7)",
        ("R11.7-2",),
        ("11.7.3",),
        http=_http_rewrite(_aac_without_adts),
    ),
    Defect(
        "container-sse-says-pcm",
        "Says encoding pcm_s16le in the SSE synthesis_start of an opus, flac or aac stream (§11.4)",
        ("R11.4-6",),
        ("11.7.4", "11.7.5", "11.7.6"),
        http=_http_rewrite(_container_sse_says_pcm),
    ),
    Defect(
        "sse-cuts-units",
        "Cuts the SSE chunks of opus, flac and aac streams every 100 bytes, across Ogg pages, FLAC frames "
        "and ADTS frames (§11.4)",
        ("R11.4-9",),
        ("11.7.7", "11.7.8", "11.7.9"),
        server={"cut_units_bytes": 100},
    ),
    Defect(
        "utterance-invalid-field",
        "Offers no utterances but refuses utterance, append, flush and end with invalid_field, not "
        "unknown_type (§15.1)",
        ("R15.1-1",),
        ("15.4.1", "15.6.1"),
        incoming=_refuse("invalid_field", lambda o: o.get("type") in _UTTERANCE_TYPES),
        server={"utterances": False},
    ),
    Defect(
        "refuses-high-half",
        "Refuses a fragment ending with a high surrogate half (invalid_json) instead of holding it (§15.2)",
        ("R15.2-2",),
        ("15.3.1", "15.6.1"),
        incoming=_high_half_refused,
    ),
    Defect(
        "halves-not-joined",
        "Speaks the two halves of a surrogate pair split across fragments as two '?' instead of joining "
        "them into one code point (§15.2)",
        ("R15.2-3",),
        ("15.3.1",),
        incoming=_halves_not_joined,
    ),
    Defect(
        "accepts-lone-low-half",
        "Drops a low surrogate half that begins a fragment while no half is held instead of refusing it "
        "with invalid_json (§15.2)",
        ("R15.2-4",),
        ("15.6.1",),
        incoming=_lone_low_half_dropped,
    ),
    Defect(
        "refuses-blank-fragment",
        "Refuses an append, flush or end whose text is whitespace only (text_required), as §4.1 does a "
        "request's text (§15.2)",
        ("R15.2-5",),
        ("15.3.1",),
        incoming=_blank_fragment_refused,
    ),
    *RUN_LEVEL_DEFECTS,
)
"""Every one-defect mutant of the table, in spec order, then :data:`RUN_LEVEL_DEFECTS`."""


class DefectConnection(ToneConnection):
    """A :class:`ToneConnection` that applies its server's :class:`Defect`."""

    def __init__(self, server: ToneServer, websocket: WebSocket) -> None:
        super().__init__(server, websocket)
        self.defect: Defect = server.defect  # type: ignore[attr-defined]
        self.extra: list[Frame] = []
        self.after: list[str] = []
        self.rates: dict[str, int] = {}
        self.client_ids: set[str] = set()
        self.sticky_cancel = False
        self.close_seen = False
        self.held: list[dict[str, Any]] = []  # describes waiting for the queue to empty
        self.announced = False
        self.marked: set[str] = set()  # requests that asked for marks
        self.g711: str | None = None  # the encoding of the open bracket when it is G.711
        self.g711_first = False
        self.g711_added = 0
        self.blends: dict[Any, str] = {}  # request id → the blend as the client wrote it
        self.stalled = False  # see _stall_after
        self.close_code_after: int | None = None  # see DefectServer.refused_close_code

    async def read(self) -> None:
        cost_s = getattr(self.server, "greedy_parse_s", 0.0)
        if not cost_s:
            await super().read()
            return
        # Every message costs cost_s of CPU and the reader never hands the event loop back while
        # messages are waiting: a flood holds GET /ping and every other session (§10.3).
        while (data := await self.receive()) is not None:
            until = time.perf_counter() + cost_s
            while time.perf_counter() < until:
                pass
            self.act(self.session.receive_frame(data))
            self.kick()

    def send(self, frame: Frame) -> None:
        """Queue a frame of the defect's own (sent before the session's next frames)."""
        self.extra.append(frame)
        self.kick()

    async def receive(self) -> bytes | str | None:
        while True:
            data = await super().receive()
            if data is None:
                return None
            server: DefectServer = self.server  # type: ignore[assignment]
            raw = data.encode() if isinstance(data, str) else data
            if server.strip_bom and raw.startswith(b"\xef\xbb\xbf"):
                data = raw[3:]
            if server.log_text:
                try:
                    print("request text:", json.loads(data).get("text"), flush=True)
                except (ValueError, AttributeError):
                    pass
            if self.defect.incoming is None:
                return data
            try:
                obj = json.loads(data)
            except (ValueError, UnicodeDecodeError):
                return data
            if not isinstance(obj, dict):
                return data
            verdict = self.defect.incoming(self, obj)
            if verdict is DROP:
                continue
            if isinstance(verdict, dict):
                return _dump(verdict)
            return data

    async def synthesize(self, request: Any) -> Any:
        server: DefectServer = self.server  # type: ignore[assignment]
        server.busy += 1
        try:
            async for pcm in super().synthesize(request):
                yield pcm
        finally:
            server.busy -= 1

    def on_accepted(self, request: Any) -> None:
        super().on_accepted(request)
        for message in self.after:
            self.session.receive_frame(message)
        self.after.clear()

    def outgoing(self, frames: list[Frame]) -> list[Frame]:
        extra, self.extra = self.extra, []
        frames = extra + frames
        if self.defect.outgoing is not None:
            frames = self.defect.outgoing(self, frames)
        return frames

    def on_refused(self) -> None:
        super().on_refused()
        refused_code = getattr(self.server, "refused_close_code", None)
        if refused_code is not None:
            self.close_code_after = refused_code

    def close_code(self) -> int:
        code = self.close_code_after or getattr(self.server, "close_code_override", None)
        return code or super().close_code()


class DefectServer(ToneServer):
    """:class:`ToneServer` with one :class:`Defect` (see the module docstring)."""

    connection_class = DefectConnection
    ping_delay_busy_s = 0.0
    accept_delay_s = 0.0
    close_code_override: int | None = None
    refuse_query = False
    strip_bom = False
    log_text = False
    require_json = False
    ping_ok_times: int | None = None
    require_subprotocol = False
    plain_http_errors = False
    refuse_busy_handshake = False
    too_many_frame = True
    too_many_serves = False
    cut_units_bytes = 0
    """Cut Ogg/Opus, FLAC and AAC bodies every this many bytes, whatever the container units (0: not)."""
    refused_close_code: int | None = None
    """The Close frame's code of a session that refused a message (None: 1000, as it should)."""
    greedy_parse_s = 0.0
    """CPU seconds each client message costs a reader that never yields while messages wait (0: the
    control's reader, one message per event-loop turn)."""

    def __init__(self, defect: Defect) -> None:
        super().__init__()
        self.defect = defect
        self.name = defect.name
        self.busy = 0
        for key, value in defect.server.items():
            setattr(self, "close_code_override" if key == "close_code" else key, value)

    async def ping(self, request: Request) -> Response:
        if self.ping_delay_busy_s and self.busy:
            await asyncio.sleep(self.ping_delay_busy_s)
        if self.ping_ok_times is not None:
            self.ping_ok_times -= 1
            if self.ping_ok_times < 0:
                return Response(b'{"status":"Unhealthy"}', 503, media_type="application/json")
        return await super().ping(request)

    def app(self) -> Starlette:
        app = super().app()
        if self.plain_http_errors:
            app.exception_handlers.pop(HTTPException, None)  # the framework's own plain-text 404 and 405
        return app

    def encode(self, fmt: str, sample_rate: int, pieces: list[bytes], **kwargs: Any) -> list[bytes]:
        body = super().encode(fmt, sample_rate, pieces, **kwargs)
        if not self.cut_units_bytes or fmt in ("wav", "pcm"):
            return body
        data, step = b"".join(body), self.cut_units_bytes
        return [data[i : i + step] for i in range(0, len(data), step)]

    async def refuse_session(self, websocket: WebSocket) -> None:
        if self.too_many_serves:
            # The fatal frame, and then the session is served like any other.
            await websocket.send_text(_dump(_fatal_too_many(self.limits.max_sessions)))
            self.sessions += 1
            try:
                await self.connection_class(self, websocket).run()
            finally:
                self.sessions -= 1
            return
        if not self.too_many_frame:
            await websocket.close(1013)
            return
        await super().refuse_session(websocket)

    async def websocket(self, websocket: WebSocket) -> None:
        if self.refuse_busy_handshake and self.sessions >= self.limits.max_sessions:
            await websocket.close(1013)  # before accept: the handshake is refused (HTTP 403)
            return
        if self.require_subprotocol and not websocket.headers.get("sec-websocket-protocol"):
            await websocket.close(1002)
            return
        if self.refuse_query and websocket.url.query:
            await websocket.close(1008)
            return
        if self.accept_delay_s:
            await asyncio.sleep(self.accept_delay_s)
        await super().websocket(websocket)

    async def invocations(self, request: Request) -> Response:
        if self.require_json and request.headers.get("content-type", "").split(";")[0] != "application/json":
            return Response(b'{"error": {"code": "invalid_field", "message": "send application/json"}}', 415)
        body = await request.body()
        if self.log_text:
            try:
                print("request text:", json.loads(body).get("text"), flush=True)
            except (ValueError, AttributeError):
                pass
        response = await super().invocations(request)
        if self.defect.http is None:
            return response
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {}
        return await self.defect.http(self, parsed if isinstance(parsed, dict) else {}, response)  # type: ignore[misc]
