"""Defects only on the cancel path, seen by cases that do not own their clause (issue 30): the run fails on
the clause (``conformance/clauses::<id>``) although no case does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.mutants.defects.core import (
    Defect,
    DefectConnection,
    Frame,
    Outgoing,
    dump,
    json_object,
    map_controls,
)

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
            obj = json_object(frame)
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
    return dump({**complete, "audio_bytes": audio_bytes, "total_duration_s": audio_bytes / 2 / rate})


def _audio_before(data: Frame) -> Callable[[DefectConnection, dict[str, Any]], list[Frame]]:
    """The last audio frame of a request cancelled while it spoke is ``data``, counted in its
    ``audio_bytes`` (a request cancelled while queued keeps its empty bracket, which its cases judge)."""
    size = len(data.encode()) if isinstance(data, str) else len(data)

    def change(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
        if not complete["audio_bytes"]:
            return [dump(complete)]
        return [data, _counting(session, complete, size)]

    return change


def _unasked_capabilities(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
    capabilities = session.session.capabilities
    assert capabilities is not None
    return [dump(complete), capabilities.answering(None).to_json()]


def _unasked_marks(session: DefectConnection, complete: dict[str, Any]) -> list[Frame]:
    rid = complete["request_id"]
    marks = {"type": "marks", "request_id": rid, "segment": 0, "text": "x", "start_s": 0.0, "end_s": 0.0}
    return [dump(marks), dump(complete)]


def _queue_full_unnamed(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    def change(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("type") == "error" and obj.get("code") == "queue_full":
            return {**obj, "request_id": None}
        return obj

    return map_controls(change)(session, frames)


RUN_LEVEL_DEFECTS: tuple[Defect, ...] = (
    Defect(
        "cancelled-complete-binary",
        "Sends a cancelled request's synthesis_complete in a BINARY message (§3.2)",
        ("R3.2-4",),
        outgoing=_on_cancelled(lambda s, o: [dump(o).encode()]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-huge-complete",
        "Pads a cancelled request's synthesis_complete with white space to over 1 MiB (§3.2)",
        ("R3.2-2",),
        outgoing=_on_cancelled(lambda s, o: [dump(o)[:-1] + " " * (1 << 20) + "}"]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-odd-frame",
        "Ends the audio of a request cancelled while it spoke with a 1-byte frame, half a sample (§3.3.1)",
        ("R3.3.1-1",),
        outgoing=_on_cancelled(_audio_before(b"\x00")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-text-audio",
        "Ends the audio of a request cancelled while it spoke with silence in a TEXT message (§3.3.1)",
        ("R3.3.1-5",),
        outgoing=_on_cancelled(_audio_before("\x00\x00")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-huge-frame",
        "Ends the audio of a request cancelled while it spoke with a frame of silence over 1 MiB "
        "(§3.3.1; 4.2.4, which measures the audio after a cancel, sees that much too)",
        ("R3.3.1-6",),
        outgoing=_on_cancelled(_audio_before(bytes((1 << 20) + 2))),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-json-frame",
        "Ends the audio of a request cancelled while it spoke with a frame that is the JSON object {} "
        "(§3.3.2)",
        ("R3.3.2-1",),
        outgoing=_on_cancelled(_audio_before(b"{}")),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-complete-invalid",
        "Leaves elapsed_s out of a cancelled request's synthesis_complete (§5)",
        ("R5-1",),
        outgoing=_on_cancelled(lambda s, o: [dump({k: v for k, v in o.items() if k != "elapsed_s"})]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-audio-bytes",
        "Counts 2 bytes more than it sent in a cancelled request's audio_bytes (§5.3)",
        ("R5.3-2",),
        outgoing=_on_cancelled(lambda s, o: [_counting(s, o, 2)]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "cancelled-complete-twice",
        "Sends a cancelled request's synthesis_complete twice (§6.1)",
        ("R6.1-1",),
        outgoing=_on_cancelled(lambda s, o: [dump(o), dump(o)]),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "capabilities-after-cancel",
        "Follows a cancelled request's synthesis_complete with capabilities nobody asked for (§4.4)",
        ("R4.4-4",),
        outgoing=_on_cancelled(_unasked_capabilities),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "marks-on-cancel",
        "Sends a marks frame (segment 0, after the audio) to a cancelled request that did not ask for marks "
        "(§5.5)",
        ("R5.5-7", "R5.5-4"),
        outgoing=_on_cancelled(_unasked_marks),
        observed_by=CANCEL_PATH,
    ),
    Defect(
        "close-1011-after-refusal",
        "Closes a session that refused a message with 1011 instead of 1000 after close (§7.1)",
        ("R7.1-3",),
        server={"refused_close_code": 1011},
        observed_by=("9.1.5",),  # its close comes after the row, on the session the bad-input rows share
    ),
    Defect(
        "queue-full-unnamed",
        "Names no request (request_id null) in its queue_full error frames (§6.3)",
        ("R6.3-3",),
        outgoing=_queue_full_unnamed,
        observed_by=("4.1.6",),
    ),
)
"""One-defect mutants whose defect only a case that does not own its clause sees: no case fails, the run
does (on the clause: ``conformance/clauses::<id>``). One per clause that a finding can be recorded on outside
its own cases (:func:`conformance.engine.clauses.recorded`); R6.1-2 is ``cancel-then-stream``
(:mod:`conformance.mutants.synthesis`), and :data:`conformance.engine.unobservable.NO_RUN_MUTANT` says why the
others have none."""
