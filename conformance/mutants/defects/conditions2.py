"""Defects that each break one condition of the sentences split in the second pass of issue 31 point 5
(§4.2 cancel, §4.5 lexicon, §5.5 marks, §6.3 error frames, §9.1 invalid_lexicon, §15.2 surrogate halves,
§15.5 close and idle timeout): the conditions that no row of :mod:`conformance.mutants.defects.table` broke
alone. Each row names its condition ids; the cases that must catch it are those citing them
(:func:`conformance.mutants.catching.must_catch`). Every defect answers wrongly, never not at all, so no case
waits out its deadline on one of them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.responses import Response

from conformance.mutants.defects.core import (
    Defect,
    DefectConnection,
    DefectServer,
    Frame,
    dump,
    is_request,
    json_object,
)
from conformance.mutants.defects.run_level import _on_cancelled
from conformance.mutants.defects.utterances import _fragment_text, _refuse_fragment
from protocol.lexicon import Lexicon, LexiconError, lexicon_json, parse_lexicon
from protocol.messages.client import SynthesisRequest

__all__ = ["CONDITION2_DEFECTS"]


def _session_over_request(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Merges a request's own lexicon under the session's instead of over it: the session's entry wins (§4.5).
    own = obj.get("lexicon")
    if not is_request(obj) or not isinstance(own, dict) or not session.session.lexicon:
        return None
    return {**obj, "lexicon": {**own, **lexicon_json(session.session.lexicon)}}


def _refused_lexicon_clears(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # A lexicon message it refuses (a rule of §14.3 broken) still clears the session's lexicon (§4.5).
    if obj.get("type") != "lexicon":
        return None
    try:
        parse_lexicon(obj.get("lexicon"), max_entries=session.server.limits.max_lexicon_entries)
    except LexiconError:
        session.session.lexicon = {}
    return None


def _marks_after_complete(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    # Holds each marks frame back until its request's synthesis_complete has gone out (§5.5: inside the
    # bracket).
    held: dict[Any, list[Frame]] = session.__dict__.setdefault("held_marks", {})
    out: list[Frame] = []
    for frame in frames:
        obj = json_object(frame)
        if obj is not None and obj.get("type") == "marks":
            held.setdefault(obj.get("request_id"), []).append(frame)
            continue
        out.append(frame)
        if obj is not None and obj.get("type") == "synthesis_complete":
            out += held.pop(obj.get("request_id"), [])
    return out


class _LexiconAtSynthesis(DefectConnection):
    """Takes the session's lexicon when it synthesizes a request, not when it accepted it: a request queued
    while a ``lexicon`` message arrives is spoken with it (§4.5)."""

    def pronunciations(self, request: SynthesisRequest) -> tuple[SynthesisRequest, Lexicon | None]:
        if self.session.lexicon:
            request = replace(request, lexicon={**self.session.lexicon, **(request.lexicon or {})})
        return super().pronunciations(request)


class _UtteranceWithoutSessionLexicon(DefectConnection):
    """Speaks an utterance with its own lexicon entries only: the session's (§4.5) never reach it."""

    def pronunciations(self, request: SynthesisRequest) -> tuple[SynthesisRequest, Lexicon | None]:
        if request.request_id in self.utterances and request.lexicon:
            session = self.session.lexicon
            own = {w: e for w, e in request.lexicon.items() if session.get(w) != e}
            request = replace(request, lexicon=own or None)
        return super().pronunciations(request)


class _EndsAfterLexiconRefusal(DefectConnection):
    """Closes the session (1011) once it has refused a pronunciation with ``invalid_lexicon`` (§4.5: the
    session goes on)."""

    lexicon_refused = False

    def outgoing(self, frames: list[Frame]) -> list[Frame]:
        frames = super().outgoing(frames)
        for frame in frames:
            obj = json_object(frame)
            if obj is not None and obj.get("type") == "error" and obj.get("code") == "invalid_lexicon":
                self.lexicon_refused = True
                self.kick()
        return frames

    def should_close(self) -> bool:
        return self.lexicon_refused or super().should_close()

    def closing_code(self) -> int:
        return 1011 if self.lexicon_refused else super().closing_code()


def _without_code(obj: dict[str, Any]) -> dict[str, Any]:
    # Error frames name their code in the message only, without the code member (§6.3).
    if obj.get("type") != "error" or obj.get("fatal"):
        return obj
    return {k: v for k, v in obj.items() if k != "code"}


def _unnamed_lexicon_entry(obj: dict[str, Any]) -> dict[str, Any]:
    # Every invalid_lexicon message says "invalid lexicon", naming no entry (§9.1).
    if obj.get("type") == "error" and obj.get("code") == "invalid_lexicon":
        return {**obj, "message": "invalid lexicon"}
    return obj


def _span_reversed(obj: dict[str, Any]) -> dict[str, Any]:
    # Writes each marks frame's span end first: start_s is the segment's end, end_s its start (§5.5).
    if obj.get("type") != "marks":
        return obj
    return {**obj, "start_s": obj.get("end_s"), "end_s": obj.get("start_s")}


def _map(change: Any) -> Any:
    """An ``outgoing`` hook rewriting each control frame with ``change`` (a frame kept or changed)."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = json_object(frame)
            out.append(frame if obj is None else dump(change(obj)))
        return out

    return hook


def _held(session: DefectConnection, obj: dict[str, Any]) -> Any:
    """The utterance state of the message's ``request_id`` when it holds a surrogate half (§15.2), else
    ``None``."""
    pending = session.session._pending.get(obj.get("request_id"))
    return pending if pending is not None and pending.held_half else None


def _unpaired_text_drops_half(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # While a half is held, a text not beginning with the low half drops the half and is accepted (§15.2).
    text, pending = _fragment_text(obj), _held(session, obj)
    if pending is not None and text and not "\udc00" <= text[0] <= "\udfff":
        pending.held_half = ""
    return None


def _end_drops_half(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # An end without text while a half is held drops the half and ends the utterance (§15.2).
    pending = _held(session, obj)
    if obj.get("type") == "end" and not _fragment_text(obj) and pending is not None:
        pending.held_half = ""
    return None


def _end_strips_high_half(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # An end whose text ends with a high half is accepted, the half dropped (§15.2).
    text = _fragment_text(obj)
    if obj.get("type") == "end" and text and "\ud800" <= text[-1] <= "\udbff":
        return {**obj, "text": text[:-1]}
    return None


def _refusal_drops_half(session: DefectConnection, obj: dict[str, Any]) -> Any:
    # Refuses a text that does not complete the held half, or an end without text while a half is held,
    # and forgets the half as it does (§15.2: a held half stays held).
    text, pending = _fragment_text(obj), _held(session, obj)
    unpaired = bool(text) and not "\udc00" <= text[0] <= "\udfff"  # type: ignore[index]
    if pending is not None and (unpaired or (obj.get("type") == "end" and not text)):
        pending.held_half = ""
        return _refuse_fragment(session, obj, "invalid_json")
    return None


class _CloseCancelsOpen(DefectConnection):
    """Speaks the text an utterance open at ``close`` holds, but closes its bracket with status
    ``cancelled`` (§15.5: ``completed``, as if ``end`` had arrived)."""

    def on_utterance_end(self, job: Any, reason: str) -> None:
        if reason == "close":
            self.__dict__.setdefault("closed_open", set()).add(job.request_id)
        super().on_utterance_end(job, reason)

    def outgoing(self, frames: list[Frame]) -> list[Frame]:
        closed: set[str] = self.__dict__.get("closed_open", set())
        out: list[Frame] = []
        for frame in super().outgoing(frames):
            obj = json_object(frame)
            if (
                obj is not None
                and obj.get("type") == "synthesis_complete"
                and obj.get("request_id") in closed
            ):
                frame = dump({**obj, "status": "cancelled"})
            out.append(frame)
        return out


class _ClosesBeforeOpenCompletes(DefectConnection):
    """Closes the session (1000) as soon as ``close`` ends an open utterance, before its bracket completes
    (§15.5)."""

    closing_early = False

    def on_utterance_end(self, job: Any, reason: str) -> None:
        super().on_utterance_end(job, reason)
        if reason == "close":
            self.closing_early = True
            self.kick()

    def should_close(self) -> bool:
        return self.closing_early or super().should_close()


class _IdleFromFirstMessage(DefectConnection):
    """Counts an utterance's idle time from its first message only: a later append does not move the
    deadline (§15.5: from the last accepted message)."""

    def act(self, events: list[Any]) -> None:
        super().act(events)
        first: dict[str, float] = self.__dict__.setdefault("first_input", {})
        for request_id, pending in self.session._pending.items():
            pending.last_input = first.setdefault(request_id, pending.last_input)


async def _slot_kept(server: DefectServer, request: dict[str, Any], response: Response) -> Response:
    # Every POST /invocations answered 200 keeps its invocation slot: max_invocations answers later, every
    # caller is refused with queue_full while GET /ping still answers 200 (§11.6).
    if response.status_code == 200 and "text" in request and server.runtime is not None:
        server.runtime.invocations += 1
    return response


CONDITION2_DEFECTS: tuple[Defect, ...] = (
    # §4.2 cancel
    Defect(
        "cancelled-also-completed",
        "After a cancelled request's synthesis_complete (status cancelled) sends a second one with status "
        "completed, as if its synthesis had finished too (§4.2: exactly one)",
        ("R4.2-5b",),
        outgoing=_on_cancelled(lambda s, o: [dump(o), dump({**o, "status": "completed"})]),
    ),
    # §5.5 marks
    Defect(
        "marks-span-reversed",
        "Gives each marks frame start_s after its end_s: the segment's span written end first (§5.5)",
        ("R5.5-6a",),
        outgoing=_map(_span_reversed),
    ),
    Defect(
        "marks-after-complete",
        "Sends a request's marks frames after its synthesis_complete, outside its bracket (§5.5)",
        ("R5.5-7b",),
        outgoing=_marks_after_complete,
    ),
    # §4.5 lexicon
    Defect(
        "utterance-without-session-lexicon",
        "Speaks an utterance accepted after a lexicon message without the session's lexicon (§4.5)",
        ("R4.5-1b",),
        server={"connection_class": _UtteranceWithoutSessionLexicon},
    ),
    Defect(
        "session-entry-wins",
        "Lets the session's lexicon entry win over the request's own entry for the same word (§4.5)",
        ("R4.5-1c",),
        incoming=_session_over_request,
    ),
    Defect(
        "lexicon-at-synthesis",
        "Applies the session's lexicon to a request accepted before the lexicon message and still queued "
        "when it arrived (§4.5)",
        ("R4.5-1d",),
        server={"connection_class": _LexiconAtSynthesis},
    ),
    Defect(
        "refused-lexicon-clears",
        "Refuses a bad lexicon message with invalid_lexicon but clears the session's lexicon (§4.5)",
        ("R4.5-2b",),
        incoming=_refused_lexicon_clears,
    ),
    Defect(
        "ends-after-lexicon-refusal",
        "Closes the session (1011) after it refuses a pronunciation with invalid_lexicon (§4.5)",
        ("R4.5-2c",),
        server={"connection_class": _EndsAfterLexiconRefusal},
    ),
    # §6.3 error frames
    Defect(
        "error-without-code",
        "Leaves the code member out of every per-message error frame (§6.3)",
        ("R6.3-3a",),
        outgoing=_map(_without_code),
    ),
    # §9.1 invalid_lexicon
    Defect(
        "lexicon-entry-unnamed",
        "Says 'invalid lexicon' in every invalid_lexicon frame, naming no entry (§9.1)",
        ("R9.1-1b",),
        outgoing=_map(_unnamed_lexicon_entry),
    ),
    # §15.2 surrogate halves
    Defect(
        "refusal-drops-held-half",
        "Refuses a fragment that does not complete the held surrogate half, or an end while it is held, with "
        "invalid_json, and drops the half: the refusal changed something (§15.2)",
        ("R15.2-4a",),
        incoming=_refusal_drops_half,
    ),
    Defect(
        "unpaired-text-accepted",
        "Accepts a fragment that does not begin with the low half while a high half is held, dropping the "
        "half (§15.2)",
        ("R15.2-4b",),
        incoming=_unpaired_text_drops_half,
    ),
    Defect(
        "end-drops-held-half",
        "Accepts an end without text while a surrogate half is held, dropping the half (§15.2)",
        ("R15.2-4c",),
        incoming=_end_drops_half,
    ),
    Defect(
        "end-on-high-half-accepted",
        "Accepts an end whose text ends with a high surrogate half, dropping the half (§15.2)",
        ("R15.2-4d",),
        incoming=_end_strips_high_half,
    ),
    # §15.5 close with an utterance open, idle timeout
    Defect(
        "close-cancels-open",
        "Speaks what an utterance open at close holds but completes it with status cancelled (§15.5)",
        ("R15.5-1b",),
        server={"connection_class": _CloseCancelsOpen},
    ),
    Defect(
        "closes-before-open-completes",
        "Closes the session with 1000 as soon as close ends an open utterance, before its bracket "
        "completes (§15.5)",
        ("R15.5-1c",),
        server={"connection_class": _ClosesBeforeOpenCompletes},
    ),
    Defect(
        "idle-from-first-message",
        "Times an idle utterance out utterance_idle_timeout_s after its first message, however many "
        "fragments came since (§15.5)",
        ("R15.5-3a",),
        server={"connection_class": _IdleFromFirstMessage},
    ),
    # §11.6 invocation slots
    Defect(
        "invocations-one-at-a-time",
        "Refuses a POST /invocations with queue_full while another is being answered, though it advertises "
        "max_invocations 64 (§11.6)",
        ("R11.6-4a",),
        server={"invocations_at_once": 1},
    ),
    Defect(
        "invocation-slot-kept",
        "Keeps the invocation slot of every POST /invocations it answers 200, so once max_invocations were "
        "answered it refuses every caller with queue_full (§11.6)",
        ("R11.6-4b",),
        http=_slot_kept,  # type: ignore[arg-type]
    ),
)
"""The rows appended to :data:`conformance.mutants.defects.table.DEFECTS` after
:data:`~conformance.mutants.defects.conditions.CONDITION_DEFECTS`."""
