"""Streams through the official client: reassembled messages, observed leniently, a client-side log.

An :class:`ObservedStream` wraps one ``InvokeEndpointWithBidirectionalStream`` stream opened with
:func:`sagemaker_transport.client.open_bidi_stream`. It sends client messages as PayloadParts
(``DataType`` BINARY, UTF8 or absent; whole or in PARTIAL parts) and reads the output as whole server
messages, joining PayloadParts up to ``CompletionState=COMPLETE`` (PROTOCOL.md §3.4 step 1, §12.3).

Every message goes to the session's :class:`conformance.engine.observer.Observer`, which records each
deviation from the spec as a finding and never aborts: one broken rule does not hide the rest of the session.
How the session ended is observed too: a server that ends it before ``close`` (§7), or without a Close frame
1000 after it (§7.1), is a finding, and the stream's end is not an exception for the case (unless the case
asks for it, ``stream_errors="raise"``).

Every send and every received message is appended to :attr:`ObservedStream.log`, which the report keeps
beside the verdict.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from conformance.engine import clauses
from conformance.engine.observer import Answer, ErrorView, Message, Observer, describe_frame, excerpt, observe
from protocol.errors import ErrorCode
from protocol.messages import Append, Cancel, Close, End, Flush, SynthesisRequest, Utterance
from sagemaker_transport.client import BidiStream

if TYPE_CHECKING:
    from conformance.engine.target import Target

__all__ = [
    "LOG_LIMIT",
    "Answer",
    "Message",
    "ObservedStream",
    "Observer",
    "StreamEnded",
    "describe_frame",
    "observe",
    "open_stream",
    "request_message",
]

LOG_LIMIT = 4000
"""Client-log entries kept per session; later ones are counted, not stored (keeps reports small)."""

REPLAY_PAYLOAD_LIMIT = 65536
"""Sent messages up to this many bytes keep their bytes in the log (``payload``, base64), so that
``kokoro-conformance replay`` can send them again (:mod:`conformance.engine.replay`)."""

CLOSE_GRACE_S = 10.0
"""How long after ``close`` and the last answer the cases of §7.1 let a server take to end the session: the
default ``close_timeout_s`` (§10), which is how long the server itself waits for the client's Close frame."""

DRAIN_GRACE_S = 3.0
"""The same wait in every other case (:meth:`ObservedStream.drain`): the end is due at once (§7.1), and a
server that keeps sessions open must not add ten seconds to every case that closes one."""

MAX_PARTS = 250_000
"""PayloadParts a session reads at most. Far beyond any case (a byte-split short request is about 15,000);
a server that answers megabytes to a byte-splitting simulator would otherwise keep the client busy for
minutes after the case's verdict is due."""


def request_message(request: SynthesisRequest) -> bytes:
    """The bytes the suite sends for ``request``: its JSON object with ``"type": "synthesize"`` first.

    The suite's own requests name their type, so that a server that reads only typed messages as requests
    fails the cases about requests without ``type`` (4.1.1, the AWS sample's shape, §4), not every case
    that speaks.
    """
    return json.dumps({"type": "synthesize", **request.to_dict()}).encode()


class StreamEnded(AssertionError):
    """The output stream ended before what the case waited for arrived."""


def _refused_opening(error: BaseException | None) -> bool:
    """Whether the official client's ``error`` is the service's ``ModelError`` (424): the container did not
    complete the WebSocket handshake (REFERENCE.md §1)."""
    return error is not None and type(error).__name__ == "ModelError"


HANDSHAKE_ATTEMPTS = 2
"""Tries :func:`open_stream` gives a session whose opening the endpoint refused (``ModelError``: the
container did not complete the WebSocket handshake, within 250 ms on SageMaker, REFERENCE.md §1)."""


@contextlib.asynccontextmanager
async def open_stream(
    target: Target,
    name: str = "session",
    *,
    check_frames: bool = True,
    stream_errors: str = "observe",
    **bidi_options: Any,
) -> AsyncIterator[ObservedStream]:
    """An observed :class:`ObservedStream` on ``target.bidi(**bidi_options)``, tried again when its opening is
    refused.

    A refused opening is a defect of §2.3 (R2.3-1), judged by the cases that own it, which open their
    sessions without this. For every other case, an opening refused and then opened on the next try is an
    entry of the session's log (``dir`` ``open``), not a finding: on a busy machine the endpoint's accept
    deadline may pass for the host's sake rather than the container's, and a finding fails the run on its
    clause wherever it is seen (issue 30), so a loaded host would fail a conforming server's run. The last
    try is not awaited here: the session observes its outcome, as any session does, and one that cannot be
    opened at all is a finding on R2.3-1 in any case.
    """
    refused: list[str] = []
    for attempt in range(1, HANDSHAKE_ATTEMPTS + 1):
        async with contextlib.AsyncExitStack() as stack:
            bidi = await stack.enter_async_context(target.bidi(**bidi_options))
            if attempt < HANDSHAKE_ATTEMPTS:
                try:
                    await bidi.opened()
                except Exception as exc:  # the official client raises the service's error
                    if _refused_opening(exc):
                        refused.append(f"ModelError: {str(exc)[:200]}")
                        continue
            session = ObservedStream(
                bidi,
                faithful_data_types=target.faithful_data_types,
                check_frames=check_frames,
                name=name,
                stream_errors=stream_errors,
            )
            for n, problem in enumerate(refused, 1):
                session.note(
                    dir="open",
                    note=f"the session could not be opened on try {n}, and was tried again: {problem}",
                )
            yield session
            return


class ObservedStream:
    """One open bidirectional session, observed message by message.

    Args:
        bidi: the stream, from :func:`sagemaker_transport.client.open_bidi_stream`.
        faithful_data_types: see :class:`conformance.engine.observer.Observer`.
        check_frames: see :class:`conformance.engine.observer.Observer`.
        name: a label for the log and the findings.
        stream_errors: ``"observe"`` (default): an abnormal end of the output stream ends the session like
            a normal one and is observed as a finding; ``"raise"``: :meth:`receive` raises it (for cases
            about the service's errors); ``"expect"``: it ends the session without a finding (the case
            injected a fault).

    Attributes:
        messages: every whole message received, in order.
        log: the client-side log (sends, receptions, the end of the stream).
        ended: the output stream has ended.
        end_error: the exception that ended it abnormally, if any.
        observer: the :class:`conformance.engine.observer.Observer` (answers, errors, findings).
        waiting_for: what the session is waiting for, if anything (said when a case runs out of time).
    """

    def __init__(
        self,
        bidi: BidiStream,
        *,
        faithful_data_types: bool,
        check_frames: bool = True,
        name: str = "session",
        stream_errors: str = "observe",
    ) -> None:
        self.bidi = bidi
        self.name = name
        self.stream_errors = stream_errors
        self.observer = Observer(
            faithful_data_types=faithful_data_types, check_frames=check_frames, name=name
        )
        self.messages: list[Message] = []
        self.log: list[dict[str, Any]] = []
        self.log_dropped = 0
        self.ended = False
        self.end_error: BaseException | None = None
        self.close_sent = False
        self.waiting_for: str | None = None
        self._opened = time.monotonic()
        self._parts: list[bytes] = []
        self._part_type: str | None = None
        self._sent_requests = 0
        self._part_count = 0

    # -- log -------------------------------------------------------------------------------------------

    def _now(self) -> float:
        return round(time.monotonic() - self._opened, 6)

    def clock(self) -> float:
        """Seconds since the session opened: the clock of :attr:`Message.t` and of the log."""
        return self._now()

    def note(self, **entry: Any) -> None:
        """Append an entry to the client log (``t`` is added)."""
        if len(self.log) >= LOG_LIMIT:
            self.log_dropped += 1
            return
        self.log.append({"t": self._now(), **entry})

    # -- sending ---------------------------------------------------------------------------------------

    async def send(
        self, data: bytes, *, data_type: str | None = "BINARY", completion_state: str | None = None
    ) -> None:
        """Send one PayloadPart (``data_type`` None: no DataType header, which SageMaker reads as BINARY)."""
        self.note(
            dir="send",
            data_type=data_type,
            completion_state=completion_state,
            bytes=len(data),
            **describe_frame(data),
            **({"payload": base64.b64encode(data).decode()} if len(data) <= REPLAY_PAYLOAD_LIMIT else {}),
        )
        if _is_close(data):
            self.close_sent = True
        await self.bidi.send(data, data_type=data_type, completion_state=completion_state)

    async def send_in_parts(self, data: bytes, cuts: Iterable[int], *, data_type: str = "UTF8") -> None:
        """Send one message as several PayloadParts cut at ``cuts``: PARTIAL, ..., then COMPLETE (§12.3)."""
        bounds = [0, *sorted(cuts), len(data)]
        pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            await self.send(piece, data_type=data_type, completion_state="COMPLETE" if last else "PARTIAL")

    async def request(
        self, text: str, *, data_type: str | None = "BINARY", request_id: str | None = None, **fields: Any
    ) -> str:
        """Send a synthesis request (§4.1) and expect its answer; returns its request id.

        ``request_id`` defaults to ``<name>-<n>``; ``fields`` are ``voice``, ``speed``, ``sample_rate``,
        ``request_timestamp``. The message says ``"type": "synthesize"`` (:func:`request_message`).
        """
        if request_id is None:
            self._sent_requests += 1
            request_id = f"{self.name}-{self._sent_requests}"
        request = SynthesisRequest(text=text, request_id=request_id, **fields)
        self.observer.expect(request_id, request.to_dict())
        await self.send(request_message(request), data_type=data_type)
        return request_id

    def expect(self, request_id: str | None, request: Mapping[str, Any] | None = None) -> None:
        """Announce a request sent as raw bytes (``None``: the server assigns its id)."""
        self.observer.expect(request_id, request)

    async def utterance(
        self, request_id: str, *, text: str | None = None, data_type: str | None = "BINARY", **fields: Any
    ) -> str:
        """Open an utterance (§15.1) and expect its answer, one bracket like a request's; returns its id.

        ``text`` is its first fragment; ``fields`` are ``voice``, ``speed``, ``sample_rate``,
        ``request_timestamp``.
        """
        opener = Utterance(request_id=request_id, text=text, **fields)
        self.observer.expect(request_id, opener.to_dict(), utterance=True)
        await self.send(opener.to_json().encode(), data_type=data_type)
        return request_id

    async def fragment(
        self, kind: str, request_id: str, text: str | None = None, *, data_type: str | None = "BINARY"
    ) -> None:
        """Send ``append``, ``flush`` or ``end`` for an utterance (§15.1); ``text`` may carry a surrogate half
        at either edge (§15.2), written as an escape."""
        if kind == "append":
            message: Append | Flush | End = Append(request_id, text or "")
        elif kind == "flush":
            message = Flush(request_id, text)
        elif kind == "end":
            message = End(request_id, text)
        else:
            raise ValueError(f"not an utterance message: {kind!r}")
        await self.send(message.to_json().encode(), data_type=data_type)

    async def cancel(self, request_id: str | None = None, *, data_type: str | None = "BINARY") -> None:
        """Send ``cancel`` (§4.2), naming ``request_id`` or, without it, every request."""
        await self.send(Cancel(request_id=request_id).to_json().encode(), data_type=data_type)

    async def close(self, *, data_type: str | None = "BINARY") -> None:
        """Send ``{"type": "close"}`` (§4.3)."""
        await self.send(Close().to_json().encode(), data_type=data_type)

    # -- receiving -------------------------------------------------------------------------------------

    async def receive(self) -> Message | None:
        """The next whole server message, observed; ``None`` at the end of the stream.

        Raises:
            TimeoutError: nothing arrived within the stream's timeout.
            ModelStreamError, InternalStreamFailure, ...: only with ``stream_errors="raise"``.
        """
        while True:
            if self.ended:
                return None
            try:
                part = await self.bidi.receive()
            except TimeoutError:
                raise
            except Exception as exc:
                self.ended, self.end_error = True, exc
                self.note(dir="end", error=f"{type(exc).__name__}: {exc}")
                self._observe_end(exc)
                if self.stream_errors == "raise":
                    raise
                return None
            if part is None:
                self.ended = True
                self.note(dir="end", note="the output stream ended")
                self._observe_end(None)
                return None
            self._part_count += 1
            if self._part_count > MAX_PARTS:
                self.ended = True
                self.note(dir="end", note=f"stopped reading after {MAX_PARTS} PayloadParts")
                raise StreamEnded(
                    f"the server sent more than {MAX_PARTS} PayloadParts in one session; the suite stopped "
                    "reading"
                )
            if self._part_type is None:
                self._part_type = part.data_type
            self._parts.append(part.data)
            if not part.is_complete:
                continue
            data = b"".join(self._parts)
            message = Message(data, self._part_type, len(self._parts), self._now())
            self._parts, self._part_type = [], None
            self.messages.append(message)
            self._log_message(message)
            self.observer.feed(message)
            return message

    def _observe_end(self, error: BaseException | None) -> None:
        """Findings on how the stream ended (§7, §7.1, §12.3)."""
        observer = self.observer
        if self._parts and self.stream_errors == "observe":
            # Logged, not a finding: completing a message is the transport's part (R3.4-1 is a requirement on
            # clients, conformance.engine.unobservable); how the server ended the session is judged just
            # below.
            self.note(
                dir="end",
                note=f"the stream ended inside a message ({sum(map(len, self._parts))} bytes without a "
                "COMPLETE part)",
            )
        if self.stream_errors != "observe" or observer.fatal:
            return  # a fault the case injected, or a fatal error frame (§9.4) that explains the end
        how = "normally" if error is None else f"with {type(error).__name__}: {str(error)[:200]}"
        if _refused_opening(error) and not self.messages:  # the stream never opened
            observer.note(clauses.HANDSHAKE, f"the session could not be opened: {how}")
            return
        if not self.close_sent:
            observer.note(
                clauses.SESSION_ENDS_ONLY_BY,
                f"the server ended the session {how} before the client sent close (answered "
                f"{observer.completions()} request(s))",
            )
        elif error is not None:
            observer.note(
                clauses.CLOSE_1000,
                f"after close the session ended {how}: the server did not close the WebSocket with 1000",
            )

    def _log_message(self, message: Message) -> None:
        entry: dict[str, Any] = {
            "dir": "recv",
            "kind": "control" if message.is_control else "audio",
            "data_type": message.data_type,
            "parts": message.parts,
            "bytes": len(message.data),
        }
        if message.is_control:
            entry.update(describe_frame(message.data))
        elif message.data_type != "BINARY" or len(message.data) < 2 or len(message.data) % 2:
            entry["excerpt"] = excerpt(message.data)
        self.note(**entry)

    async def wait(self, done: Callable[[], bool], what: str) -> None:
        """Read messages until ``done()`` is true.

        Raises:
            StreamEnded: the stream ended first (``what`` says what was awaited).
        """
        self.waiting_for = what
        try:
            while not done():
                if await self.receive() is None:
                    ended = f" ({type(self.end_error).__name__}: {self.end_error})" if self.end_error else ""
                    raise StreamEnded(f"the server ended the session before {what}{ended}")
        finally:
            self.waiting_for = None

    def refusal(self, request_id: str | None, since: int = 0) -> ErrorView | None:
        """The first error frame from the ``since``-th on that refuses a request and names ``request_id``
        (``None``: names no request), or ``None``. Refusing: any code but those that end an accepted
        request or the session (§6.3, §9.1)."""
        return next(
            (
                e
                for _, e in self.observer.errors[since:]
                if e.request_id == request_id and e.code in _REFUSING
            ),
            None,
        )

    async def started(self, request_id: str) -> None:
        """Read until the request's ``synthesis_start`` arrived (its bracket opened, §6.1).

        Raises:
            StreamEnded: the stream ended first.
            AssertionError: an error frame refused the request (it will get no bracket, §6.3): a case that
                needs it started fails at once instead of waiting out its deadline.
        """
        await self._until(request_id, lambda answer: True, f"{request_id!r}'s synthesis_start")

    async def began(self, request_id: str, *, or_complete: bool = True) -> None:
        """Read until the request's audio began: its first audio frame, or (``or_complete``) its
        ``synthesis_complete`` if that came first (a request can end before a cancel meant for it, §4.2).

        Raises:
            StreamEnded: the stream ended first.
            AssertionError: an error frame refused the request (it will get no bracket, §6.3), or, without
                ``or_complete``, it completed without audio: a case that needs its audio fails at once
                instead of waiting out its deadline.
        """

        def ready(answer: Answer) -> bool:
            return bool(answer.frames) or (or_complete and answer.complete is not None)

        await self._until(request_id, ready, f"{request_id!r}'s audio began")

    async def _until(self, request_id: str, ready: Callable[[Answer], bool], what: str) -> None:
        """Read until the request's answer is ``ready``; raise AssertionError when it is refused, or completed
        and still not ready."""

        def answered() -> bool:
            found = self.observer.answers.get(request_id)
            return found is not None and (ready(found) or found.complete is not None)

        def refused() -> bool:
            return request_id not in self.observer.answers and self.refusal(request_id) is not None

        await self.wait(lambda: answered() or refused(), what)
        found = self.observer.answers.get(request_id)
        if found is not None and ready(found):
            return
        if found is not None:
            raise AssertionError(f"{request_id!r} was completed without audio")
        error = self.refusal(request_id)
        assert error is not None  # the wait ended on it
        raise AssertionError(f"{request_id!r} was refused: {error.code}: {error.message[:200]}")

    async def answer(self, request_id: str) -> Answer:
        """Read until the request's ``synthesis_complete``; return its :class:`Answer`.

        Raises:
            StreamEnded: the stream ended first.
            AssertionError: an error frame refused the request (it will get no bracket), or its
                ``synthesis_complete`` came without its ``synthesis_start`` (no bracket to close, §6.1).
        """

        def refusal() -> ErrorView | None:
            return self.refusal(request_id)

        def unopened() -> bool:
            return request_id not in self.observer.answers and request_id in self.observer.orphans

        def done() -> bool:
            return (
                self.observer.completed(request_id)
                or unopened()
                or (request_id not in self.observer.answers and refusal() is not None)
            )

        await self.wait(done, f"{request_id!r} was completed")
        if self.observer.completed(request_id):
            return self.observer.answers[request_id]
        if unopened():
            raise AssertionError(
                f"{request_id!r} got a synthesis_complete without a synthesis_start: no bracket opened for it"
            )
        error = refusal()
        assert error is not None  # done() saw it
        raise AssertionError(f"{request_id!r} was refused: {error.code}: {error.message[:200]}")

    async def answer_when_admitted(
        self, text: str, *, tries: int = 8, pause_s: float = 0.5, **fields: Any
    ) -> Answer:
        """Ask for ``text`` (:meth:`request`, ``fields`` as there, a new id each time) and read its answer,
        asking again after ``pause_s`` while the server refuses it with ``server_busy``: a busy server's
        honest answer to a request that would begin a speech (§10.2), which the cases that use this do not
        judge. Raises as :meth:`answer` does, for the last try or any other refusal."""
        for attempt in range(1, tries + 1):
            request_id = await self.request(text, **fields)
            try:
                return await self.answer(request_id)
            except StreamEnded:
                raise
            except AssertionError:
                refused = self.refusal(request_id)
                if refused is None or refused.code != "server_busy" or attempt == tries:
                    raise
            await asyncio.sleep(pause_s)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def completions(self, count: int) -> list[Answer]:
        """Read until ``count`` brackets are closed; return every answer so far, in order.

        For requests sent without an id (the server assigns it, §4.1): a refusing error frame that names no
        request, arriving while this waits, is taken as the refusal of the request awaited (§6.3).

        Raises:
            StreamEnded: the stream ended first.
            AssertionError: such a refusal arrived first (the request will get no bracket).
        """
        seen = len(self.observer.errors)

        await self.wait(
            lambda: self.observer.completions() >= count or self.refusal(None, seen) is not None,
            f"{count} request(s) were completed",
        )
        if self.observer.completions() < count:
            error = self.refusal(None, seen)
            assert error is not None  # the wait ended on it
            raise AssertionError(f"a request without an id was refused: {error.code}: {error.message[:200]}")
        return list(self.observer.history)

    async def drain(self, grace_s: float = DRAIN_GRACE_S) -> bool:
        """Read until the output stream ends; ``True`` when it did.

        After ``close`` (§7.1) the server owes the end of the session as soon as every request it accepted is
        answered. Once ``close`` was sent and nothing is outstanding, a stream still open ``grace_s`` seconds
        after the last message is given up on: a finding on R7.1-3, ``False``, and the case goes on with
        what it read (the cases of §7.1 judge the finding; the others keep it as a note).
        """
        self.waiting_for = "the end of the session"
        try:
            while True:
                if self.close_sent and not self.observer.reader.outstanding:
                    try:
                        message = await asyncio.wait_for(self.receive(), grace_s)
                    except TimeoutError:
                        self.note(dir="end", note=f"no end of stream within {grace_s:g} s after close")
                        self.observer.note(
                            clauses.CLOSE_1000,
                            f"the session was still open {grace_s:g} s after close, every request answered: "
                            "the server did not end it (§7.1)",
                        )
                        return False
                else:
                    message = await self.receive()
                if message is None:
                    return True
        finally:
            self.waiting_for = None

    def completes_seen(self) -> set[str]:
        """Request ids (as the client knows them) whose ``synthesis_complete`` arrived so far."""
        return {a.request_id for a in self.observer.history if a.complete is not None}

    async def drain_after_close(
        self, request_ids: Iterable[str | None], grace_s: float = CLOSE_GRACE_S
    ) -> bool:
        """After ``close``: read until every request in ``request_ids`` is completed, then until the stream
        ends, allowing ``grace_s`` seconds for the end (§7.1: the server closes once drained). A stream
        still open then is a finding on R7.1-3 (see :meth:`drain`), judged by the cases that own it.

        ``None`` ids (assigned by the server) count as any completion; refused requests (§6.3) are owed
        nothing. Returns whether the stream ended.

        Raises:
            StreamEnded: the stream ended before every request completed.
        """
        wanted = list(request_ids)
        named = {i for i in wanted if i is not None}

        def done() -> bool:
            seen = self.completes_seen()
            # Nothing outstanding: every request was answered or refused (§6.3), and none is owed.
            owed = self.observer.reader.outstanding
            return (named <= seen and self.observer.completions() >= len(wanted)) or not owed

        await self.wait(done, f"all of {wanted} were completed after close")
        return await self.drain(grace_s)

    @property
    def answers(self) -> dict[str, Answer]:
        """Answers so far, by request id, in the order their brackets opened."""
        return self.observer.answers


_REFUSING = frozenset(ErrorCode) - {
    ErrorCode.DUPLICATE_REQUEST_ID,  # refuses a later copy; the first is still answered
    ErrorCode.UNKNOWN_REQUEST,
    ErrorCode.INTERNAL_ERROR,  # a failed bracket follows
    ErrorCode.UTTERANCE_TIMEOUT,
}
"""Codes whose error frame means the request it names gets no bracket (§6.3)."""


def _is_close(data: bytes) -> bool:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("type") == "close"
