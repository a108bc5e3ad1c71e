"""Named limits of a server, with their defaults and the reason for each (PROTOCOL.md §10)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AUDIO_FRAME_HARD_LIMIT", "MIN_AUDIO_FRAME_BYTES", "CpuBudget", "Limits"]

AUDIO_FRAME_HARD_LIMIT = 1_048_576
"""No audio frame is ever longer than this many bytes, whatever the settings (§3.3).

1 MiB is python-websockets' default ``max_size``: a client built on it with default settings would
fail with close code 1009 on anything longer.
"""

MIN_AUDIO_FRAME_BYTES = 64
"""The smallest ``max_audio_frame_bytes`` a server may be configured with (§10).

Below a few samples the padding rule of §3.3 cannot always keep a frame from being a JSON object;
64 bytes leaves room to spare and no real player wants frames shorter than a millisecond anyway.
"""


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of PROTOCOL.md §10. Every field is a setting; the defaults are the protocol's.

    Attributes:
        max_message_bytes: longest client message (WebSocket message or ``POST /invocations`` body),
            in bytes of UTF-8. Default 64 KiB: room for ``max_text_chars`` characters even when every
            one is sent as a 6-byte ``\\uXXXX`` escape, while keeping the parser's work per message
            small. Longer → ``message_too_large``.
        max_text_chars: longest ``text``, in Unicode code points. Default 10,000 (about ten minutes of
            speech): agents send sentences, and a bound keeps one request from holding the synthesizer
            for long. Longer → ``text_too_long``.
        max_queue: most requests a session may hold queued plus active. Default 32: an agent pipelining
            a long answer sentence by sentence stays below it, and it bounds per-session memory.
            More → ``queue_full``.
        max_sessions: most concurrent WebSocket sessions per server. Default 64: a rough real-time
            budget for one accelerator (Kokoro-82M serves 55–78 hours of audio per hour on one H100,
            REFERENCE.md §3). More → ``too_many_sessions`` (fatal, 1013).
        max_audio_frame_bytes: longest audio frame the server sends, in bytes; even, between
            :data:`MIN_AUDIO_FRAME_BYTES` and :data:`AUDIO_FRAME_HARD_LIMIT`. Default 32 KiB
            (16,384 samples, 0.68 s at 24 kHz): short enough for smooth playback and for any
            transport to carry whole, long enough that per-frame overhead is negligible.
        max_request_age_s: oldest ``request_timestamp`` accepted, in seconds. Default 56, the AWS
            sample's value (REFERENCE.md §3): a request that old has sat out most of the 60 s in which
            SageMaker expects an answer, so its caller has likely given up. Older → ``request_stale``.
        close_timeout_s: after sending its WebSocket Close frame, how long the server waits for the
            client's before dropping the connection, in seconds. Default 10, python-websockets'
            default; it bounds how long a vanished client holds a session.
        lookahead: requests synthesized ahead of the one being sent. Default 1: the next request's
            audio is ready when the current one ends (no gap between sentences) while one session
            cannot monopolize the synthesizer.
        max_json_depth: deepest nesting of arrays and objects in a client message; the top-level
            object is depth 1. Default 32: valid messages need 1, the rest is room for extensions,
            and the bound stops recursion attacks on JSON parsers. Deeper → ``invalid_json``.
        utterance_idle_timeout_s: longest time an active, open utterance waits for its next message,
            in seconds (§15.5). Default 20: an open utterance holds the head of the session's queue,
            so a client that forgot to end it must not stall the session, while a language model's
            pause between two tokens is far shorter; hosted input-streaming TTS services time out
            after the same 20 s. Longer → ``utterance_timeout``, and the utterance ends.
        first_audio_budget_s: latest first audio, in seconds from a request's arrival, the server may
            promise before it refuses new work with ``server_busy`` (§10.2). Default 2.5: people answer
            each other after about 0.2 s and hear a silence past about 1 s as trouble; a voice agent's own
            listening and thinking take about a second before it asks for speech, so speech starting 2.5 s
            later leaves the caller 3.5 s of silence, past which callers repeat themselves or talk over
            the reply. Later → ``server_busy`` (HTTP 503; a session refused as it opens: fatal, 1013).
        max_output_bytes: most bytes of output (frames of any kind) a session may hold queued for a
            client that is not reading them, before the server stops reading that client's messages
            (§10.3). Default 1 MiB: more than one segment of audio at 24 kHz (the feeder queues one at a
            time), so a client that reads is never slowed, while 40,000 answered ``describe`` messages
            can no longer pile up hundreds of megabytes.
        send_timeout_s: longest time queued output may wait without the client reading any of it, in
            seconds (§10.3). Default 60: a player reading at playback pace takes a 0.68 s frame at least
            every second, and SageMaker itself gives up on an answer after 60 s; past it the session
            ends with ``client_not_reading`` (fatal, close 1008).
        max_parse_cpu_share: most of one CPU core a session's message parsing may use, averaged over
            a second (§10.3). Default 0.25: a client sending sentences uses a thousandth of it; a
            flooding client is read more slowly instead of holding the event loop that answers
            ``GET /ping`` and every other session.
        session_idle_timeout_s: longest time a session may stay idle (§7.5: nothing queued or active,
            nothing waiting to be sent, no message received), in seconds. Default 300: a voice agent
            quiet between two turns for a minute or two keeps its session, while a socket that never
            speaks frees its slot within five minutes. Longer → ``session_idle``, the session ends.
        idle_eviction_s: when a new session finds all ``max_sessions`` slots taken, a session idle at
            least this long, in seconds, gives its slot up to it (§7.5, the reserve). Default 10:
            longer than any pause inside a turn, so only sessions between turns are ever ended, and
            idle sockets cannot lock healthy callers out for more than that.
        max_invocations: most ``POST /invocations`` requests answered at once (§11), counted apart
            from ``max_sessions`` so that neither route can starve the other. Default 64, the same
            real-time budget. More → ``queue_full`` (503).
        max_lexicon_entries: most words in one pronunciation lexicon (a request's ``lexicon``, the
            session's ``lexicon`` message) and most inline pronunciations in one text (§14.3). Default
            256: a product's or a conversation's names and terms fit, while the words of a text are
            matched against a bounded table. More → ``invalid_lexicon``.

    Raises:
        ValueError: a limit is out of its range.
    """

    max_message_bytes: int = 65_536
    max_text_chars: int = 10_000
    max_queue: int = 32
    max_sessions: int = 64
    max_audio_frame_bytes: int = 32_768
    max_request_age_s: float = 56.0
    close_timeout_s: float = 10.0
    lookahead: int = 1
    max_json_depth: int = 32
    utterance_idle_timeout_s: float = 20.0
    first_audio_budget_s: float = 2.5
    max_output_bytes: int = 1_048_576
    send_timeout_s: float = 60.0
    max_parse_cpu_share: float = 0.25
    session_idle_timeout_s: float = 300.0
    idle_eviction_s: float = 10.0
    max_invocations: int = 64
    max_lexicon_entries: int = 256

    def __post_init__(self) -> None:
        for name in (
            "max_message_bytes",
            "max_text_chars",
            "max_queue",
            "max_sessions",
            "max_json_depth",
            "max_output_bytes",
            "max_invocations",
            "max_lexicon_entries",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if isinstance(self.lookahead, bool) or not isinstance(self.lookahead, int) or self.lookahead < 0:
            raise ValueError(f"lookahead must be a non-negative integer, not {self.lookahead!r}")
        frame = self.max_audio_frame_bytes
        if (
            isinstance(frame, bool)
            or not isinstance(frame, int)
            or frame % 2
            or not MIN_AUDIO_FRAME_BYTES <= frame <= AUDIO_FRAME_HARD_LIMIT
        ):
            raise ValueError(
                f"max_audio_frame_bytes must be an even integer from {MIN_AUDIO_FRAME_BYTES} "
                f"to {AUDIO_FRAME_HARD_LIMIT}, not {frame!r}"
            )
        for name in (
            "max_request_age_s",
            "close_timeout_s",
            "utterance_idle_timeout_s",
            "first_audio_budget_s",
            "send_timeout_s",
            "session_idle_timeout_s",
            "idle_eviction_s",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        share = self.max_parse_cpu_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ValueError(f"max_parse_cpu_share must be a fraction in (0, 1], not {share!r}")


class CpuBudget:
    """A session's budget of CPU time for reading its client's messages (PROTOCOL.md §10.3).

    A token bucket in seconds of CPU: it refills at ``share`` seconds per second of wall time and holds
    at most ``share`` seconds (one second's worth), so a session may parse in bursts but never averages
    more than ``share`` of one core. Sans-I/O: the caller measures and reports time.

    Args:
        share: the fraction of one core, in (0, 1] (``Limits.max_parse_cpu_share``).
        now: the current time in seconds (any monotonic clock the caller keeps using).
    """

    __slots__ = ("_credit", "_last", "share")

    def __init__(self, share: float, now: float) -> None:
        self.share = share
        self._credit = share
        self._last = now

    def charge(self, spent_s: float, now: float) -> float:
        """Record ``spent_s`` seconds of CPU spent at ``now``; return how long the reader must pause
        (seconds, 0.0 while the session is within its share) before it reads the next message."""
        self._credit = min(self.share, self._credit + (now - self._last) * self.share) - spent_s
        self._last = now
        return 0.0 if self._credit >= 0 else -self._credit / self.share
