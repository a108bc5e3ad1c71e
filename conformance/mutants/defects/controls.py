"""Hooks of the table on the control frames a server sends besides brackets: ``describe`` and its
``capabilities`` (§4.4) and word ``marks`` (§5.5)."""

from __future__ import annotations

from typing import Any

from conformance.mutants.defects.core import DROP, DefectConnection, Frame, map_controls


def _list_unspoken_voice(obj: dict[str, Any]) -> dict[str, Any]:
    """``capabilities`` with one more voice, which the session (its known voices) refuses."""
    if obj.get("type") == "capabilities":
        obj = {**obj, "voices": [*obj["voices"], {"id": "af_unspoken", "language": "a", "gender": "female"}]}
    return obj


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

    return map_controls(change)(session, frames)


def _bad_marks_ignored(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A marks member that is not a boolean is ignored like an unknown member instead of refused (§5.5).
    marks = obj.get("marks")
    if "marks" in obj and marks is not None and not isinstance(marks, bool):
        return {k: v for k, v in obj.items() if k != "marks"}
    return None
