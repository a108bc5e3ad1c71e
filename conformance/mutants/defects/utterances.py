"""Hooks of the table on token streaming (§15): fragments of an utterance and the surrogate halves a
server must hold between them (§15.2)."""

from __future__ import annotations

import json
from typing import Any

from conformance.mutants.defects.core import DROP, DefectConnection, dump, error_frame

_UTTERANCE_TYPES = ("utterance", "append", "flush", "end")


def _fragment_text(obj: dict[str, Any]) -> str | None:
    """The ``text`` of an utterance message (§15.1), or ``None``."""
    text = obj.get("text")
    return text if obj.get("type") in _UTTERANCE_TYPES and isinstance(text, str) else None


def _refuse_fragment(session: DefectConnection, obj: dict[str, Any], code: str) -> Any:
    """Refuse an utterance message with ``code``, naming it as the session would (§5.4, §15.6)."""
    refusal = json.loads(error_frame(code, obj.get("request_id")))
    session.send(dump({**refusal, "message_type": obj.get("type")}))
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
