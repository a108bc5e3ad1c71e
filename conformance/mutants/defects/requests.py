"""Hooks of the table on requests, ids, the queue, cancel and close (§3.3.1, §4.1, §4.2, §7, §9.2): the ones
that need a little state on the connection (ids seen, a cancel that sticks, a close seen)."""

from __future__ import annotations

import re
from typing import Any

from conformance.mutants.defects.core import (
    DROP,
    DefectConnection,
    Frame,
    dump,
    error_frame,
    is_cancel,
    is_request,
    json_object,
    map_controls,
)

_KNOWN = {"type", "text", "voice", "speed", "sample_rate", "request_id", "request_timestamp"}


# -- hooks that need a little state ----------------------------------------------------------------------


def _extra_text_audio(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # After each synthesis_start, 8 bytes of silence in a TEXT frame (valid UTF-8, not JSON): audio that
    # is not a BINARY message (§3.3.1). audio_bytes counts it, so nothing else is wrong.
    out: list[Frame] = []
    for frame in frames:
        obj = json_object(frame)
        if obj is not None and obj.get("type") == "synthesis_complete":
            obj["audio_bytes"] += 8
            obj["total_duration_s"] = obj["audio_bytes"] / 2 / session.rates.get(obj["request_id"], 24000)
            frame = dump(obj)
        out.append(frame)
        if obj is not None and obj.get("type") == "synthesis_start":
            session.rates[obj["request_id"]] = obj["sample_rate"]
            out.append("\x00" * 8)
    return out


def _audio_after_complete(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        obj = json_object(frame)
        if obj is not None and obj.get("type") == "synthesis_complete" and obj.get("audio_bytes"):
            out.append(b"\x10\x00\x10\x00")  # two samples outside any bracket (§6.1)
    return out


def _drop_cancelled_start(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # The bracket of a request cancelled while queued loses its synthesis_start (§4.2).
    out: list[Frame] = []
    for i, frame in enumerate(frames):
        obj = json_object(frame)
        following = json_object(frames[i + 1]) if i + 1 < len(frames) else None
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

    return map_controls(change)(session, frames)


def _remember_ids(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if isinstance(obj.get("request_id"), str):
        session.client_ids.add(obj["request_id"])
    return None


def _queue_never_full(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A request beyond max_queue is swallowed instead of refused with queue_full (§4.1).
    if is_request(obj) and len(session.session.pending_ids) >= session.server.limits.max_queue:
        return DROP
    return None


def _duplicate_swallowed(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if is_request(obj) and obj.get("request_id") in session.session.pending_ids:
        return DROP  # neither refused with duplicate_request_id nor answered (§4.1)
    return None


def _ignores_queued_cancel(session: DefectConnection, obj: dict[str, Any]) -> Any:
    pending = session.session.pending_ids
    if is_cancel(obj) and obj.get("request_id") in pending[1:]:
        return DROP  # a queued request's cancel is ignored: it is synthesized in full (§4.2)
    return None


def _ignores_active_cancel(session: DefectConnection, obj: dict[str, Any]) -> Any:
    pending = session.session.pending_ids
    if is_cancel(obj) and pending and obj.get("request_id") == pending[0]:
        return DROP  # the active request's cancel is ignored: it is spoken to the end, status completed
    return None


def _unknown_cancel_swallowed(session: DefectConnection, obj: dict[str, Any]) -> Any:
    rid = obj.get("request_id")
    if is_cancel(obj) and (rid is None or rid not in session.session.pending_ids):
        return DROP  # no unknown_request (§4.2)
    return None


def _idle_cancel_refused(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if is_cancel(obj) and obj.get("request_id") is None and not session.session.pending_ids:
        session.send(error_frame("unknown_request", None))
        return DROP
    return None


def _cancel_sticks(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A cancel-all on an idle session also cancels the next request (§4.2: later requests are unaffected).
    if is_cancel(obj) and obj.get("request_id") is None and not session.session.pending_ids:
        session.sticky_cancel = True
        return None
    if is_request(obj) and session.sticky_cancel and isinstance(obj.get("request_id"), str):
        session.sticky_cancel = False
        session.after.append(dump({"type": "cancel", "request_id": obj["request_id"]}))
    return None


def _answers_after_close(session: DefectConnection, obj: dict[str, Any]) -> Any:
    if session.close_seen:
        session.send(error_frame("invalid_json", obj.get("request_id")))
        return DROP
    if obj.get("type") == "close":
        session.close_seen = True
    return None


def _text_checked_first(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # text is checked before request_id (§9.2 checks request_id first): a message with a bad id and an empty
    # text gets text_required instead of invalid_field.
    text, rid = obj.get("text"), obj.get("request_id")
    bad_id = "request_id" in obj and not (isinstance(rid, str) and 0 < len(rid) <= 128)
    if is_request(obj) and bad_id and (text is None or (isinstance(text, str) and not text.strip())):
        session.send(error_frame("text_required", None))
        return DROP
    return None
