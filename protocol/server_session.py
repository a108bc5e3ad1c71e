"""The server's half of a session, sans-I/O: every rule of PROTOCOL.md §4–§9 and §15 for one connection.

A plain object holds every rule of a session, in the manner of h11 and python-websockets: the caller
feeds what it received and takes out what to send. It does no I/O, starts no threads and never sleeps,
so the reference server, the simulator's containers and the conformance suite's mutants run the same
rules. The client's half is :class:`protocol.client_session.ClientSession`.

The adapter feeds each client WebSocket message to :meth:`ServerSession.receive_frame`, acts on the
returned events (start synthesis, stop it, drain and close), reports synthesis progress with
:meth:`~ServerSession.start`, :meth:`~ServerSession.audio` and :meth:`~ServerSession.complete`, and writes
whatever :meth:`~ServerSession.data_to_send` returns, in order.

The session's own states (open, draining, closed) and every move between them are one table,
:data:`protocol.server_state.TRANSITIONS`; the session changes state only through it, and the diagram in
PROTOCOL.md §7 is drawn from it. While draining, accepted requests are still answered; open utterances
end as if ``end`` had arrived (§15.5). Each request's states (queued, active, cancelled, answered) are a
second table, :data:`protocol.request_state.REQUEST_TRANSITIONS`, drawn in §6.1; a request changes state
only through it too.

An utterance (§15, opt-in with ``utterances=True``) is a request whose text arrives later; on top of
the request's own states it is **open** until its ``end`` is accepted, it is cancelled, it times out, it
fails or the session drains. Only an open utterance takes ``append``, ``flush`` and ``end``; only a
closed one may complete. The session delivers its text as whole code points (surrogate halves joined,
§15.2) in :class:`TextAppended` events, and the adapter decides where to cut it into segments.

Invariants kept by every transition:

* each accepted request gets exactly one ``synthesis_start`` and one ``synthesis_complete`` (§6.1),
  cancelled ones included;
* brackets follow the order in which requests were accepted and never overlap (§6.2);
* audio frames leave only inside their request's bracket, cut by :func:`protocol.frames.cut_audio_frames`
  (§3.3);
* a rejected message yields exactly one ``error`` frame and changes nothing else (§6.3);
* an utterance completes only after it stopped being open, so its bracket holds all of its text (§15.4).
"""

from __future__ import annotations

import itertools
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace

from protocol.encodings import ENCODINGS, encode_pcm16, encoding
from protocol.errors import ErrorCode, ProtocolError
from protocol.frames import cut_audio_frames
from protocol.lexicon import LexiconEntry
from protocol.limits import Limits
from protocol.messages import (
    Append,
    Cancel,
    Capabilities,
    Close,
    Describe,
    End,
    ErrorFrame,
    Flush,
    Marks,
    SessionLexicon,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    Utterance,
    UtteranceMessage,
    Word,
    parse_client_message,
)
from protocol.request_state import REQUEST_INITIAL, PendingRequest, RequestEvent, RequestState
from protocol.server_state import (
    INITIAL,
    READS_MESSAGES,
    TRANSITIONS,
    SessionEvent,
    SessionState,
    SessionStateError,
    next_state,
)

__all__ = [
    "CloseRequested",
    "RequestAccepted",
    "RequestCancelled",
    "ServerEvent",
    "ServerSession",
    "SessionStateError",
    "TextAppended",
    "UtteranceEnded",
    "UtteranceFlushed",
]

Frame = bytes | str
"""One WebSocket message to send: ``str`` goes out as a TEXT frame, ``bytes`` as a BINARY frame."""

CLOSE_NORMAL = 1000

_HIGH_HALF = re.compile("[\ud800-\udbff]")
_LOW_HALF = re.compile("[\udc00-\udfff]")
_FRAGMENT_TYPES = {Append: "append", Flush: "flush", End: "end"}


def _split_trailing_half(text: str) -> tuple[str, str]:
    """``(text, half)``: a high surrogate half ending ``text`` is taken off to wait for its pair (§15.2)."""
    if text and _HIGH_HALF.fullmatch(text[-1]):
        return text[:-1], text[-1]
    return text, ""


def _join_halves(high: str, low: str) -> str:
    """The code point a high and a low surrogate half encode together (§15.2)."""
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


# --- server side -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestAccepted:
    """A synthesis request joined the session's queue; the adapter should schedule its synthesis.

    ``request.request_id`` is always set (assigned by the session when the client sent none).

    For an utterance (``utterance=True``, §15) ``request.text`` is ``""``: its text follows in
    :class:`TextAppended` events (the opener's own ``text`` in one right after this event), and
    :class:`UtteranceEnded` says when no more will come.
    """

    request: SynthesisRequest
    utterance: bool = False


@dataclass(frozen=True, slots=True)
class TextAppended:
    """More text of an open utterance, whole code points, never empty (§15.2)."""

    request_id: str
    text: str


@dataclass(frozen=True, slots=True)
class UtteranceFlushed:
    """``flush``: the end of the utterance's text so far is a segment boundary; speak it all now (§15.3)."""

    request_id: str


@dataclass(frozen=True, slots=True)
class UtteranceEnded:
    """The utterance takes no more text: speak what it holds, then complete it (§15.4, §15.5).

    ``reason`` is ``"end"`` (the client's ``end``), ``"close"`` (the session drains, §7.1) or
    ``"timeout"`` (``utterance_idle_timeout_s``; the session has queued the ``utterance_timeout``
    notice).
    """

    request_id: str
    reason: str = "end"


@dataclass(frozen=True, slots=True)
class RequestCancelled:
    """A queued or active request was cancelled (§4.2).

    ``started`` tells whether its ``synthesis_start`` was already sent. If it was, the adapter stops
    producing audio and calls :meth:`ServerSession.complete`; if not, the session answers the request
    by itself in its turn and the adapter only drops any synthesis it began ahead.
    """

    request_id: str
    started: bool


@dataclass(frozen=True, slots=True)
class CloseRequested:
    """The client sent ``close`` (§4.3, §7.1): finish accepted work, then close with 1000."""


ServerEvent = (
    RequestAccepted | RequestCancelled | CloseRequested | TextAppended | UtteranceFlushed | UtteranceEnded
)


class ServerSession:
    """The server's half of one bidirectional session (PROTOCOL.md §4–§9).

    Args:
        limits: the session limits (§10); defaults are :class:`protocol.limits.Limits`' defaults.
        known_voices: voice names the backend can speak; ``None`` accepts any well-formed name.
        clock: monotonic seconds, used for ``elapsed_s`` and the utterance idle timeout; injectable for
            tests.
        wallclock: Unix epoch seconds, used to judge ``request_timestamp`` (§4.1, ``request_stale``).
        on_reject: called with each :class:`ProtocolError` the session answers with an ``error`` frame
            (a refused message, §6.3), for the adapter's logs and metrics; it must not raise.
        utterances: offer the utterances of §15. Off by default: an adapter that turns it on must act on
            :class:`TextAppended`, :class:`UtteranceFlushed` and :class:`UtteranceEnded`, and call
            :meth:`expire` by :meth:`deadline`; without it the four messages are ``unknown_type``, exactly
            as a version 1 server answers them (§15.1).
        capabilities: what the server offers, the answer to ``describe`` (§4.4), which the session
            sends by itself the moment it reads one. ``None``: the session does not offer describe and
            refuses it with ``unknown_type``, as a version 1 server does (§1.7). Its ``features`` list
            ``"utterance"`` exactly when ``utterances`` is on (§15.1) and ``"marks"`` exactly when
            ``marks`` is (§5.5), and ``"voice_blend"`` exactly when ``voice_blends`` is (§4.1),
            whatever the caller passed. Its ``encodings`` are the ones a request may ask for (§4.1);
            without capabilities, every encoding of :data:`protocol.encodings.ENCODINGS` (the session
            encodes the audio itself).
        marks: offer marks (§5.5): a request's ``marks`` member is read (a non-boolean is
            ``invalid_field``) and :meth:`marks` sends them to the requests that asked. Off by default:
            the member is ignored as an unknown one, as a server without the feature does (§1.4).
        voice_blends: accept a ``voice`` that blends ``known_voices`` (§4.1); the accepted request, and
            its ``synthesis_start``, carry the blend's canonical form. Off by default: a blend names no
            voice and is refused with ``invalid_voice``, as by a server without the feature.
        admit: admission by latency (§10.2): called with a request (or an ``utterance``) that passed every
            other check while no request of the session is queued or active, i.e. one that may begin a
            speech; a string refuses it with the per-message ``server_busy`` (the string is the error's
            message), ``None`` accepts it. It must not raise. ``None`` (default): never busy.
        lexicon: offer pronunciation lexicons (§4.5, §14.3): the ``lexicon`` message sets the session's,
            and each accepted request carries the session's lexicon under its own entries
            (:attr:`SynthesisRequest.lexicon`); inline forms in a request's text are checked. Off by
            default: the message is ``unknown_type`` and the member is ignored, as by a version 1 server.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        known_voices: Collection[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        on_reject: Callable[[ProtocolError], None] | None = None,
        *,
        utterances: bool = False,
        capabilities: Capabilities | None = None,
        marks: bool = False,
        voice_blends: bool = False,
        admit: Callable[[SynthesisRequest], str | None] | None = None,
        lexicon: bool = False,
    ) -> None:
        self.limits = limits or Limits()
        self._admit = admit
        self.offers_lexicon = lexicon
        self.lexicon: dict[str, LexiconEntry] = {}
        """The session's pronunciation lexicon, set by the last ``lexicon`` message (§4.5)."""
        self.utterances = utterances
        self.offers_marks = marks
        self.voice_blends = voice_blends
        self.known_voices = frozenset(known_voices) if known_voices is not None else None
        if capabilities is not None:
            # §15.1, §5.5, §4.1: each of these features is listed if and only if the session offers it.
            offered = {
                "utterance": utterances,
                "marks": marks,
                "voice_blend": voice_blends,
                "lexicon": lexicon,
            }
            others = tuple(f for f in capabilities.features if f not in offered)
            features = (*others, *(name for name, on in offered.items() if on))
            if features != capabilities.features:
                capabilities = replace(capabilities, features=features)
        self.capabilities = capabilities
        self.encodings: tuple[str, ...] = tuple(capabilities.encodings if capabilities else ENCODINGS)
        self._clock = clock
        self._wallclock = wallclock
        self._on_reject = on_reject
        self.state = INITIAL
        """Where the session is in its lifecycle (§7); it moves only along
        :data:`protocol.server_state.TRANSITIONS`."""
        self.close_code: int | None = None
        """The WebSocket close code to use once :attr:`finished` (1000) or after a fatal error."""
        self._pending: OrderedDict[str, PendingRequest] = OrderedDict()
        self._answered_cancelled: set[str] = set()
        self._outgoing: list[Frame] = []
        self._outgoing_bytes = 0
        self._ids = itertools.count(1)

    # -- input from the client --------------------------------------------------------------------

    def receive_frame(self, data: bytes | str) -> list[ServerEvent]:
        """Handle one whole client WebSocket message, TEXT (``str``) or BINARY (``bytes``) (§3.1).

        Returns the events the adapter must act on. A bad message queues one ``error`` frame and returns
        no event; the session stays usable unless the error is fatal (§9). Messages that arrive after
        ``close`` or after a fatal error are ignored (§7.1).
        """
        if self.state not in READS_MESSAGES:
            return []  # after close or a fatal error (§7.1)
        try:
            message = parse_client_message(
                data,
                limits=self.limits,
                now=self._wallclock(),
                known_voices=self.known_voices,
                utterances=self.utterances,
                marks=self.offers_marks,
                encodings=self.encodings,
                voice_blends=self.voice_blends,
                lexicon=self.offers_lexicon,
            )
        except ProtocolError as exc:
            self._reject(exc)
            return []
        if isinstance(message, SessionLexicon):
            self.lexicon = dict(message.lexicon)  # no answer; later requests use it (§4.5)
            return []
        if isinstance(message, SynthesisRequest):
            return self._accept(message)
        if isinstance(message, Cancel):
            return self._cancel(message.request_id)
        if isinstance(message, Close):
            self._move(SessionEvent.CLOSE)
            self.close_code = CLOSE_NORMAL
            # §15.5: every open utterance ends as if its `end` had arrived now.
            return [*self._end_open_utterances("close"), CloseRequested()]
        if isinstance(message, Utterance):
            return self._open_utterance(message)
        if isinstance(message, Append | Flush | End):
            return self._fragment(message)
        if isinstance(message, Describe):
            self._describe(message.request_id)
            return []
        raise AssertionError(f"unhandled message {message!r}")  # parse_client_message's contract

    def _reject(self, exc: ProtocolError) -> None:
        self._queue(ErrorFrame.from_error(exc).to_json())
        if self._on_reject is not None:
            self._on_reject(exc)
        if exc.fatal:
            self._move(SessionEvent.FATAL_ERROR)
            self.close_code = exc.code.close_code

    def _describe(self, request_id: str | None) -> None:
        # Answered at once, outside any bracket, like an error frame (§4.4, §6.3): nothing else changes.
        if self.capabilities is None:
            self._reject(ProtocolError(ErrorCode.UNKNOWN_TYPE, 'unknown message type "describe"', request_id))
            return
        self._queue(self.capabilities.answering(request_id).to_json())

    def _accept(
        self, request: SynthesisRequest, *, utterance: bool = False, message_type: str = "synthesize"
    ) -> list[ServerEvent]:
        if request.request_id is None:
            # Assigned ids skip any id a client chose, so the two never collide (§4.1).
            request_id = next(f"r{n}" for n in self._ids if f"r{n}" not in self._pending)
            request = replace(request, request_id=request_id)
        request_id = request.request_id
        assert request_id is not None
        if request_id in self._pending:
            self._reject(
                ProtocolError(
                    ErrorCode.DUPLICATE_REQUEST_ID,
                    f"request_id {request_id!r} is already queued or being synthesized",
                    request_id=request_id,
                    message_type=message_type,
                )
            )
            return []
        if len(self._pending) >= self.limits.max_queue:
            self._reject(
                ProtocolError(
                    ErrorCode.QUEUE_FULL,
                    f"{len(self._pending)} requests are queued or active (max_queue={self.limits.max_queue})",
                    request_id=request_id,
                    message_type=message_type,
                )
            )
            return []
        if self.offers_lexicon and (self.lexicon or request.lexicon is not None):
            # §4.5: the session's lexicon, the request's own entries over it.
            request = replace(request, lexicon={**self.lexicon, **(request.lexicon or {})})
        if self._admit is not None and not self._pending:
            busy = self._admit(request)
            if busy is not None:  # §10.2: refused at once, before any work; the session goes on
                self._reject(
                    ProtocolError(
                        ErrorCode.SERVER_BUSY,
                        busy,
                        request_id=request_id,
                        message_type=message_type,
                        fatal=False,
                    )
                )
                return []
        self._answered_cancelled.discard(request_id)  # the id is live again
        now = self._clock()
        self._pending[request_id] = PendingRequest(
            request=request, accepted_at=now, state=REQUEST_INITIAL[message_type], last_input=now
        )
        return [RequestAccepted(request, utterance=utterance)]

    # -- utterances (§15) --------------------------------------------------------------------------------

    def _open_utterance(self, message: Utterance) -> list[ServerEvent]:
        request = replace(message.to_request(), text="")
        # The opener's text is the first fragment: it may end with a half (§15.2), never begin with one.
        text, held = _split_trailing_half(message.text or "")
        events = self._accept(request, utterance=True, message_type="utterance")
        if events:
            pending = self._pending[message.request_id]
            pending.held_half = held
            pending.text_chars = len(text)
            if text:
                events.append(TextAppended(message.request_id, text))
        return events

    def _fragment(self, message: UtteranceMessage) -> list[ServerEvent]:
        """``append``, ``flush`` or ``end`` (§15.1): every rule is checked before anything changes."""
        kind = _FRAGMENT_TYPES[type(message)]
        request_id = message.request_id
        pending = self._pending.get(request_id)
        if pending is None or not pending.open:
            self._reject(
                ProtocolError(
                    ErrorCode.UNKNOWN_REQUEST,
                    f"no open utterance has request_id {request_id!r}",
                    request_id=request_id,
                    message_type=kind,
                )
            )
            return []
        text = message.text or ""
        held = pending.held_half
        if text:
            if held:
                if not _LOW_HALF.fullmatch(text[0]):
                    return self._refuse_half(request_id, kind, "does not begin with the low half of the pair")
                text = _join_halves(held, text[0]) + text[1:]
            elif _LOW_HALF.fullmatch(text[0]):
                return self._refuse_half(request_id, kind, "begins with a low surrogate half pairing nothing")
            text, held = _split_trailing_half(text)
        elif held and isinstance(message, End):
            return self._refuse_half(request_id, kind, "would end the utterance on half a surrogate pair")
        total = pending.text_chars + len(text)
        if total > self.limits.max_text_chars:
            self._reject(
                ProtocolError(
                    ErrorCode.TEXT_TOO_LONG,
                    f"the utterance's text would have {total} characters; the limit is "
                    f"{self.limits.max_text_chars}",
                    request_id=request_id,
                    message_type=kind,
                )
            )
            return []
        pending.text_chars = total
        pending.held_half = held
        pending.last_input = self._clock()
        events: list[ServerEvent] = [TextAppended(request_id, text)] if text else []
        if isinstance(message, Flush):
            events.append(UtteranceFlushed(request_id))
        elif isinstance(message, End):
            pending.move(RequestEvent.END)
            events.append(UtteranceEnded(request_id, "end"))
        return events

    def _refuse_half(self, request_id: str, kind: str, why: str) -> list[ServerEvent]:
        self._reject(
            ProtocolError(
                ErrorCode.INVALID_JSON,
                f"the text {why}: a surrogate half must be followed by its other half (§15.2)",
                request_id=request_id,
                message_type=kind,
            )
        )
        return []

    def _end_open_utterances(self, reason: str) -> list[ServerEvent]:
        events: list[ServerEvent] = []
        for request_id, pending in self._pending.items():
            if pending.open:
                pending.move(RequestEvent.CLOSE)
                pending.held_half = ""
                events.append(UtteranceEnded(request_id, reason))
        return events

    def deadline(self) -> float | None:
        """When the active utterance times out (§15.5), on the session's clock; ``None`` if nothing can.

        Only the head request, started and open, has a deadline: a queued utterance never times out.
        The adapter calls :meth:`expire` at (or after) this time; every accepted message for the
        utterance moves it.
        """
        head = self._head()
        if head is None or not head.can(RequestEvent.TIMEOUT) or self.state is not SessionState.OPEN:
            return None
        return head.last_input + self.limits.utterance_idle_timeout_s

    def expire(self) -> list[ServerEvent]:
        """End the active utterance if its idle deadline has passed (§15.5).

        Queues the ``utterance_timeout`` notice (inside the utterance's bracket) and returns its
        :class:`UtteranceEnded`; returns ``[]`` when nothing has expired.
        """
        deadline = self.deadline()
        if deadline is None or self._clock() < deadline:
            return []
        head = self._head()
        assert head is not None and head.request.request_id is not None
        request_id = head.request.request_id
        notice = ErrorFrame(
            code=ErrorCode.UTTERANCE_TIMEOUT,
            message=f"no message for utterance {request_id!r} in {self.limits.utterance_idle_timeout_s:g} s; "
            "it ends with the text received",
            request_id=request_id,
        )
        self._queue(notice.to_json())
        head.move(RequestEvent.TIMEOUT)
        head.held_half = ""
        return [UtteranceEnded(request_id, "timeout")]

    def is_open(self, request_id: str) -> bool:
        """Whether ``request_id`` is an utterance that still takes text (§15.1)."""
        pending = self._pending.get(request_id)
        return pending is not None and pending.open

    def _cancel(self, request_id: str | None) -> list[ServerEvent]:
        if request_id is None:
            targets = [p for p in self._pending.values() if p.can(RequestEvent.CANCEL)]
        else:
            pending = self._pending.get(request_id)
            if pending is None or not pending.can(RequestEvent.CANCEL):
                self._reject(
                    ProtocolError(
                        ErrorCode.UNKNOWN_REQUEST,
                        f"no queued or active request has request_id {request_id!r}",
                        request_id=request_id,
                        message_type="cancel",
                    )
                )
                return []
            targets = [pending]
        events: list[ServerEvent] = []
        for pending in targets:
            pending.move(RequestEvent.CANCEL)
            pending.held_half = ""  # a cancelled utterance takes no more text
            events.append(RequestCancelled(pending.request.request_id, pending.started))  # type: ignore[arg-type]
        self._answer_cancelled_head()
        return events

    # -- progress from the synthesizer -------------------------------------------------------------

    def next_request(self) -> SynthesisRequest | None:
        """The request whose turn it is and which has not started yet, or ``None`` (§6.2).

        ``None`` means either nothing is queued or the head request is still being answered.
        """
        head = self._head()
        if head is None or head.started:
            return None
        return head.request

    def start(self, request_id: str, sample_rate: int | None = None) -> bool:
        """Queue ``synthesis_start`` for the head request (§5.1).

        Args:
            request_id: must be the id :meth:`next_request` returns.
            sample_rate: the rate of the audio that follows, in Hz; defaults to the requested rate.

        Returns:
            ``False`` when the request was cancelled before it started and the session already answered
            it (a benign race between reader and synthesizer); ``True`` otherwise.

        Raises:
            SessionStateError: the request is unknown, already started, or not the head of the queue.
        """
        if request_id in self._answered_cancelled:
            return False
        pending = self._require_head(request_id)
        pending.move(RequestEvent.START)
        self._send_start(pending, sample_rate)
        return True

    def _send_start(self, pending: PendingRequest, sample_rate: int | None = None) -> None:
        # §15.5: an utterance's idle clock runs from its synthesis_start or its last message.
        pending.last_input = max(pending.last_input, self._clock())
        request = pending.request
        if sample_rate is not None and sample_rate != request.sample_rate:
            pending.request = request = replace(request, sample_rate=sample_rate)
        start = SynthesisStart(
            request_id=request.request_id,
            sample_rate=request.sample_rate,
            voice=request.voice,
            speed=request.speed,
            encoding=request.encoding,
        )
        self._queue(start.to_json())

    def audio(self, request_id: str, pcm: bytes) -> bool:
        """Queue PCM16LE mono audio for the started head request (§3.3, §5.2).

        The audio is converted to the request's encoding (§3.3.1: G.711 μ-law or A-law when the request
        asked for it, :func:`protocol.encodings.encode_pcm16`), then cut into frames that are whole
        samples of it, at most ``limits.max_audio_frame_bytes`` long, and never parse as a JSON object.

        Returns:
            ``False`` if the request was cancelled: nothing is queued and the caller should stop
            producing audio for it and call :meth:`complete`. ``True`` otherwise.

        Raises:
            SessionStateError: the request is not the started head request.
            ValueError: ``pcm`` has an odd number of bytes.
        """
        if request_id in self._answered_cancelled:
            return False
        pending = self._require_head(request_id)
        if not pending.started:
            raise SessionStateError(f"audio for {request_id!r} before its synthesis_start")
        if pending.cancelled:
            return False
        name = pending.request.encoding
        data = encode_pcm16(pcm, name)
        width = encoding(name).sample_width
        for frame in cut_audio_frames(data, self.limits.max_audio_frame_bytes, sample_width=width):
            pending.audio_bytes += len(frame)
            self._queue(frame)
        return True

    def marks(
        self,
        request_id: str,
        text: str,
        start_s: float,
        end_s: float,
        words: Iterable[Word] | None = None,
    ) -> bool:
        """Queue a ``marks`` frame for the next segment of the started head request, if it asked (§5.5).

        Call it before the segment's audio (:meth:`audio`). The session numbers the segments and keeps
        their spans in order: ``start_s`` is raised to the previous segment's end if it lies before it
        (rounding), and ``end_s`` to ``start_s``.

        Args:
            request_id: the started head request.
            text: the text the segment speaks.
            start_s, end_s: the segment's audio span, seconds from the request's first sample.
            words: the segment's word timings on the same timeline, or ``None``.

        Returns:
            ``True`` if a frame was queued; ``False`` when the request did not ask for marks, the
            session does not offer them, or the request was cancelled.

        Raises:
            SessionStateError: the request is not the started head request.
        """
        if request_id in self._answered_cancelled:
            return False
        pending = self._require_head(request_id)
        if not pending.started:
            raise SessionStateError(f"marks for {request_id!r} before its synthesis_start")
        if not (self.offers_marks and pending.request.marks) or pending.cancelled:
            return False
        start_s = max(start_s, pending.marked_to_s)
        end_s = max(end_s, start_s)
        frame = Marks(
            request_id=request_id,
            segment=pending.segments,
            text=text,
            start_s=start_s,
            end_s=end_s,
            words=tuple(words) if words is not None else None,
        )
        pending.segments += 1
        pending.marked_to_s = end_s
        self._queue(frame.to_json())
        return True

    def complete(self, request_id: str, words: Iterable[Word] | None = None) -> None:
        """Queue ``synthesis_complete`` for the started head request and move to the next (§5.3).

        The status is ``cancelled`` when the request was cancelled, else ``completed``. ``audio_bytes``,
        ``total_duration_s`` and ``elapsed_s`` are computed from what this session sent.

        Raises:
            SessionStateError: the request is not the started head request, or is an utterance that is
                still open: more text may come (§15.4).
        """
        if request_id in self._answered_cancelled:
            return
        self._finish(self._require_head(request_id), RequestEvent.COMPLETE, words)

    def fail(self, request_id: str, message: str) -> None:
        """Report that synthesis of the head request failed (§9, ``internal_error``).

        Queues an ``internal_error`` frame naming the request, then its ``synthesis_start`` if it had not
        been sent, then ``synthesis_complete`` with status ``failed``. The session lives on.
        """
        if request_id in self._answered_cancelled:
            return
        pending = self._require_head(request_id)
        pending.held_half = ""  # a failed utterance takes no more text (§15.5)
        error = ErrorFrame(code=ErrorCode.INTERNAL_ERROR, message=message, request_id=request_id, fatal=False)
        self._queue(error.to_json())
        if not pending.started:
            self._send_start(pending)
        self._finish(pending, RequestEvent.FAIL, None)

    def _finish(self, pending: PendingRequest, event: RequestEvent, words: Iterable[Word] | None) -> None:
        # The head request's last move: its final state is its status (§5.3).
        pending.move(event)
        request = pending.request
        request_id = request.request_id
        assert request_id is not None
        complete = SynthesisComplete(
            request_id=request_id,
            status=pending.state.value,
            audio_bytes=pending.audio_bytes,
            total_duration_s=encoding(request.encoding).duration_s(pending.audio_bytes, request.sample_rate),
            elapsed_s=round(max(0.0, self._clock() - pending.accepted_at), 3),  # milliseconds (§5.3)
            words=tuple(words) if words is not None else None,
        )
        self._queue(complete.to_json())
        del self._pending[request_id]
        self._answer_cancelled_head()

    def _answer_cancelled_head(self) -> None:
        # A request cancelled before it started is answered in its turn with an empty bracket, so the
        # one-start-one-complete rule of §6.1 has no exception and the adapter need not wait for it.
        while (head := self._head()) is not None and head.state is RequestState.CANCELLED_QUEUED:
            request_id = head.request.request_id
            assert request_id is not None
            self._send_start(head)
            self._finish(head, RequestEvent.ANSWER, None)
            self._answered_cancelled.add(request_id)

    def _head(self) -> PendingRequest | None:
        return next(iter(self._pending.values()), None)

    def _require_head(self, request_id: str) -> PendingRequest:
        head = self._head()
        if head is None or head.request.request_id != request_id:
            where = "queued behind another request" if request_id in self._pending else "not pending"
            raise SessionStateError(f"request {request_id!r} is {where}")
        return head

    # -- queries and output ----------------------------------------------------------------------------

    def is_cancelled(self, request_id: str) -> bool:
        """Whether the request was cancelled (also ``True`` once a cancelled request was answered)."""
        if request_id in self._answered_cancelled:
            return True
        pending = self._pending.get(request_id)
        return pending is not None and pending.cancelled

    @property
    def pending_ids(self) -> list[str]:
        """Ids of accepted requests not yet completed, in answer order."""
        return list(self._pending)

    @property
    def finished(self) -> bool:
        """``True`` once the session should be closed: drained after ``close`` (§7.1) or failed fatally."""
        if self.state is SessionState.CLOSED:
            return True
        return self.state is SessionState.DRAINING and not self._pending

    def data_to_send(self) -> list[Frame]:
        """Take the frames queued so far, oldest first (``str`` → TEXT frame, ``bytes`` → BINARY)."""
        frames, self._outgoing = self._outgoing, []
        self._outgoing_bytes = 0
        return frames

    @property
    def queued_bytes(self) -> int:
        """Length of the frames queued and not yet taken by :meth:`data_to_send`, in bytes (a TEXT frame
        counted by its characters). An adapter adds what it has taken but not yet written, and stops
        reading the client's messages while the sum exceeds ``limits.max_output_bytes`` (§10.3)."""
        return self._outgoing_bytes

    def _move(self, event: SessionEvent) -> None:
        """Take the transition of :data:`protocol.server_state.TRANSITIONS` for ``event`` (§7)."""
        self.state = next_state(self.state, event)

    def _queue(self, frame: Frame) -> None:
        self._outgoing.append(frame)
        self._outgoing_bytes += len(frame)

    def abort(self, code: ErrorCode = ErrorCode.INTERNAL_ERROR, message: str = "session failed") -> None:
        """End the session with a fatal ``error`` frame (§7, §9); nothing else will be answered.

        The adapter sends what :meth:`data_to_send` returns, then closes with :attr:`close_code`.
        """
        if (self.state, SessionEvent.ABORT) not in TRANSITIONS:
            return  # closed already: nothing more is sent
        frame = ErrorFrame(code=code, message=message, request_id=None, fatal=True)
        self._queue(frame.to_json())
        self._move(SessionEvent.ABORT)
        self.close_code = code.close_code or 1011
