"""Benchmark 6: playback continuity: silence a real-time player would insert, with and without look-ahead.

The reply's four sentences (:data:`bench.texts.REPLY_SENTENCES`) go to the reference server as four
requests at once, over a direct WebSocket, as an agent sends a reply sentence by sentence. Every
piece of audio is time-stamped on arrival, and :func:`underrun` plays the pieces back, in order, on a
model player: it starts at the first audio and plays 24 kHz PCM16 in real time; whenever the next
piece has not arrived when the previous one ends, it plays silence until it does. The total of that
silence (underrun) and the number of stalls are the figures.

Two new servers, trials alternating between them: ``lookahead`` 1 (the default, PROTOCOL.md §10: the next
request is synthesized while the current one is sent) and ``lookahead`` 0 (a request is synthesized
only once the one before it has been sent in full).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.channels import BYTES_PER_SECOND, converse, direct_channel
from bench.record import Result
from bench.stack import ReferenceServer
from bench.summary import describe
from bench.texts import REPLY_SENTENCES

__all__ = ["NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables", "underrun"]

NAME = "playback"
TITLE = "6. Playback continuity: underrun with and without the server's look-ahead"


@dataclass(frozen=True)
class Config:
    """Attributes: trials per setting; the sentences (one request each); the look-ahead values compared."""

    trials: int = 5
    sentences: tuple[str, ...] = REPLY_SENTENCES
    lookaheads: tuple[int, ...] = (1, 0)


SMOKE = Config(trials=1, sentences=("Hello there.", "It is me."))


def underrun(
    arrivals: Sequence[tuple[float, int]], bytes_per_second: int = BYTES_PER_SECOND
) -> tuple[float, int]:
    """Silence a real-time player inserts while waiting for audio: ``(seconds, stalls)``.

    Args:
        arrivals: ``(arrival time in seconds, PCM bytes)`` of every piece, in playing order.
        bytes_per_second: the playback rate (48,000 for 24 kHz PCM16 mono).

    Playback starts with the first piece, at its arrival; each piece plays right after the previous
    one, or at its arrival if that is later, and the wait counts as silence. Audio already buffered is
    never dropped.
    """
    silence = 0.0
    stalls = 0
    drained_at: float | None = None  # when everything received so far will have been played
    for arrived, size in arrivals:
        if drained_at is None:
            drained_at = arrived
        elif arrived > drained_at:
            silence += arrived - drained_at
            stalls += 1
            drained_at = arrived
        drained_at += size / bytes_per_second
    return silence, stalls


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the look-ahead settings ``config.trials`` times each (see the module docstring).

    Both servers are started afresh for this benchmark, not taken from the shared pool: a server that
    has already served the other benchmarks would differ from a new one by more than its look-ahead.
    """
    async with contextlib.AsyncExitStack() as stack:
        servers = {}
        for lookahead in config.lookaheads:
            context.log(f"  starting a fresh reference server with lookahead {lookahead} ...")
            servers[lookahead] = await stack.enter_async_context(ReferenceServer("onnx", lookahead=lookahead))
        return await _compare(context, config, servers)


async def _compare(context: Any, config: Config, servers: dict[int, ReferenceServer]) -> Result:
    result = Result(
        NAME, TITLE, config={**asdict(config), "servers": {str(k): s.settings() for k, s in servers.items()}}
    )
    for server in servers.values():  # warm-up
        async with direct_channel(server.ws_url) as channel:
            await converse(channel, config.sentences[:1])
    for number in range(config.trials):
        order = config.lookaheads if number % 2 == 0 else config.lookaheads[::-1]
        for lookahead in order:
            async with direct_channel(servers[lookahead].ws_url) as channel:
                timelines = await converse(channel, config.sentences)
            arrivals = [arrival for timeline in timelines for arrival in timeline.arrivals]
            silence_s, stalls = underrun(arrivals)
            first = timelines[0]
            gaps = [
                round((later.first_audio_at - earlier.completed_at) * 1000.0, 1)
                for earlier, later in itertools.pairwise(timelines)
                if later.first_audio_at is not None and earlier.completed_at is not None
            ]
            trial = {
                "trial": number + 1,
                "lookahead": lookahead,
                "underrun_ms": round(silence_s * 1000.0, 1),
                "stalls": stalls,
                "first_audio_ms": round(first.first_audio_ms or 0.0, 1),
                "audio_s": round(sum(t.audio_s for t in timelines), 3),
                "request_audio_s": [round(t.audio_s, 3) for t in timelines],
                "delivery_s": round(timelines[-1].completed_at - first.sent_at, 3),
                "gaps_between_requests_ms": gaps,
            }
            result.trials.append(trial)
            context.log(
                f"  trial {number + 1} lookahead {lookahead}: underrun {trial['underrun_ms']:.0f} ms "
                f"in {stalls} stall(s); {trial['audio_s']:.1f} s of audio in {trial['delivery_s']:.1f} s"
            )
    figures = {}
    for lookahead in config.lookaheads:
        rows = [t for t in result.trials if t["lookahead"] == lookahead]
        figures[str(lookahead)] = {
            "underrun_ms": describe([t["underrun_ms"] for t in rows]),
            "stalls": describe([t["stalls"] for t in rows]),
            "first_audio_ms": describe([t["first_audio_ms"] for t in rows]),
            "audio_s": describe([t["audio_s"] for t in rows], digits=3),
            "delivery_s": describe([t["delivery_s"] for t in rows], digits=3),
        }
    result.figures = figures
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """One row per look-ahead setting: median underrun, stalls, first audio, audio vs delivery time."""
    headers = [
        "server look-ahead",
        "underrun, median",
        "underrun, min–max",
        "stalls, median",
        "first audio",
        "audio / delivered in",
        "n",
    ]
    rows = []
    names = {"0": "0 (off)", "1": "1 (default)"}
    for lookahead, figures in result["figures"].items():
        rows.append(
            [
                names.get(lookahead, lookahead),
                f"{figures['underrun_ms']['median']:,.0f} ms",
                f"{figures['underrun_ms']['min']:,.0f}–{figures['underrun_ms']['max']:,.0f} ms",
                f"{figures['stalls']['median']:g}",
                f"{figures['first_audio_ms']['median']:,.0f} ms",
                f"{figures['audio_s']['median']:.1f} s / {figures['delivery_s']['median']:.1f} s",
                str(figures["underrun_ms"]["n"]),
            ]
        )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """Whether synthesis kept up with real time, which decides most of the underrun."""
    lines = []
    for lookahead, figures in result["figures"].items():
        audio, delivered = figures["audio_s"]["median"], figures["delivery_s"]["median"]
        pace = "slower" if delivered > audio else "faster"
        lines.append(
            f"Look-ahead {lookahead}: {audio:.1f} s of audio delivered in {delivered:.1f} s (medians), "
            f"{pace} than real time on this machine."
        )
    sentences = [t["request_audio_s"] for t in result["trials"] if "request_audio_s" in t]
    if sentences:
        spoken = ", ".join(f"{s:.1f}" for s in sentences[0])
        lines.append(
            f"The sentences are {spoken} s of audio. A stall comes where the next sentence takes longer to "
            "synthesize than the one before it takes to play (a short first sentence before a long one); "
            "the next request is already being synthesized then, with or without look-ahead."
        )
    lines.append(
        "The requests went over a loopback WebSocket, where a synthesized segment is on the client within "
        "milliseconds; look-ahead can only show where sending takes time (a slow link, or a client that "
        "reads no faster than it plays)."
    )
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's underrun per look-ahead setting."""
    from bench.plots import strip_chart

    series = {
        f"look-ahead {lookahead}": [
            t["underrun_ms"] for t in result["trials"] if str(t["lookahead"]) == lookahead
        ]
        for lookahead in result["figures"]
    }
    strip_chart(
        path, "Silence inserted by late audio (ms)", series, title="Four-sentence reply, real-time player"
    )
