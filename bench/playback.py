"""Benchmark 6: playback continuity: old segmentation vs deadline-aware segmentation, 1 to 3 sessions at once.

Each reply (:data:`bench.texts.PLAYBACK_REPLIES`: the issue's bench reply, "Happy to help." then a
100-character sentence without commas, and three replies of long comma-less sentences after a short
opener) goes to the reference server sentence by sentence, every request at once, as an agent sends a
reply, over a direct WebSocket. One, two or three sessions speak a reply at the same time. Every piece of
audio is time-stamped on arrival, and :func:`underrun` plays each session's pieces back, in order, on a
model player: it starts at the first audio and plays 24 kHz PCM16 in real time; whenever the next piece
has not arrived when the previous one ends, it plays silence until it does. The total of that silence
(underrun), the number of stalls and each session's first audio are the figures.

Two fresh servers, side by side in one run, trials alternating between them: ``old`` is the server before
PROTOCOL.md §10.1 and §10.2 (``--segmentation sentence --scheduling fifo``: one segment per sentence,
sessions take turns) and ``new`` its defaults (``deadline`` segmentation and scheduling). Both keep
``lookahead`` 1: the next request is synthesized while the current one is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.channels import BYTES_PER_SECOND, converse, direct_channel
from bench.record import Result
from bench.stack import ReferenceServer
from bench.summary import describe
from bench.texts import LONG_REPLIES, PLAYBACK_REPLIES, REPLY_SENTENCES

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables", "underrun"]

NAME = "playback"
TITLE = "6. Playback continuity: old segmentation vs deadline-aware segmentation, 1 to 3 sessions"

MODES: dict[str, dict[str, str]] = {
    "old": {"segmentation": "sentence", "scheduling": "fifo"},
    "new": {"segmentation": "deadline", "scheduling": "deadline"},
}
"""The two servers compared: their ``--segmentation`` and ``--scheduling`` (PROTOCOL.md §10.1, §10.2)."""


@dataclass(frozen=True)
class Config:
    """Attributes: trials per (reply, sessions, mode); the replies (name → sentences, one request each);
    the numbers of concurrent sessions; the modes compared (keys of :data:`MODES`); the warm-up
    conversations each server has before the trials (its model-speed estimate learns from them)."""

    trials: int = 3
    replies: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(PLAYBACK_REPLIES))
    sessions: tuple[int, ...] = (1, 2, 3)
    modes: tuple[str, ...] = ("old", "new")
    warmup: tuple[tuple[str, ...], ...] = (REPLY_SENTENCES, LONG_REPLIES["technician"])


SMOKE = Config(
    trials=1,
    replies={"short": ("Hello there.", "It is me, the reference server.")},
    sessions=(1, 2),
    warmup=(("Hello there.",),),
)


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


async def _session(server: ReferenceServer, sentences: Sequence[str]) -> dict[str, Any]:
    async with direct_channel(server.ws_url) as channel:
        timelines = await converse(channel, sentences)
    arrivals = [arrival for timeline in timelines for arrival in timeline.arrivals]
    silence_s, stalls = underrun(arrivals)
    first = timelines[0]
    return {
        "underrun_ms": round(silence_s * 1000.0, 1),
        "stalls": stalls,
        "first_audio_ms": round(first.first_audio_ms or 0.0, 1),
        "audio_s": round(sum(t.audio_s for t in timelines), 3),
        "delivery_s": round(timelines[-1].completed_at - first.sent_at, 3),
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the modes trial by trial (see the module docstring).

    Both servers are started afresh for this benchmark, not taken from the shared pool, so that each
    differs from the other by its segmentation and scheduling only.
    """
    async with contextlib.AsyncExitStack() as stack:
        servers = {}
        for mode in config.modes:
            context.log(f"  starting a fresh reference server, {mode} segmentation ({MODES[mode]}) ...")
            servers[mode] = await stack.enter_async_context(
                ReferenceServer("onnx", lookahead=1, **MODES[mode])
            )
        return await _compare(context, config, servers)


async def _compare(context: Any, config: Config, servers: dict[str, ReferenceServer]) -> Result:
    result = Result(
        NAME,
        TITLE,
        config={
            **asdict(config),
            "servers": {mode: server.settings() for mode, server in servers.items()},
        },
    )
    for mode, server in servers.items():  # warm-up: the model, and the server's speed estimate
        for sentences in config.warmup:
            await _session(server, sentences)
        context.log(f"  {mode} server warmed up")
    number = 0
    for trial in range(config.trials):
        for sessions in config.sessions:
            for reply, sentences in config.replies.items():
                modes = config.modes if number % 2 == 0 else config.modes[::-1]
                number += 1
                for mode in modes:
                    outcomes = await asyncio.gather(
                        *(_session(servers[mode], sentences) for _ in range(sessions))
                    )
                    for index, outcome in enumerate(outcomes):
                        result.trials.append(
                            {"trial": trial + 1, "mode": mode, "reply": reply, "sessions": sessions,
                             "session": index + 1, **outcome}
                        )  # fmt: skip
                    worst = max(o["underrun_ms"] for o in outcomes)
                    context.log(
                        f"  trial {trial + 1} {reply!r} x{sessions} {mode}: underrun up to {worst:.0f} ms, "
                        f"first audio {outcomes[0]['first_audio_ms']:.0f} ms"
                    )
    result.figures = _figures(result.trials, config)
    return result


def _figures(trials: list[dict[str, Any]], config: Config) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for reply in config.replies:
        for sessions in config.sessions:
            for mode in config.modes:
                rows = [
                    t
                    for t in trials
                    if t["reply"] == reply and t["sessions"] == sessions and t["mode"] == mode
                ]
                figures[f"{reply}|{sessions}|{mode}"] = {
                    "underrun_ms": describe([t["underrun_ms"] for t in rows]),
                    "stalls": describe([t["stalls"] for t in rows]),
                    "first_audio_ms": describe([t["first_audio_ms"] for t in rows]),
                    "audio_s": describe([t["audio_s"] for t in rows], digits=3),
                    "delivery_s": describe([t["delivery_s"] for t in rows], digits=3),
                }
    for mode in config.modes:
        rows = [t for t in trials if t["mode"] == mode and t["sessions"] == min(config.sessions)]
        figures[f"first_audio|{mode}"] = describe([t["first_audio_ms"] for t in rows])
    return figures


def _keys(result: dict[str, Any]) -> tuple[list[str], list[int], list[str]]:
    config = result["config"]
    return list(config["replies"]), list(config["sessions"]), list(config["modes"])


def _current(result: dict[str, Any]) -> bool:
    """The result was saved by this version of the benchmark (older ones compared look-ahead settings)."""
    return "replies" in result.get("config", {})


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Underrun per reply and number of sessions, old beside new; then first audio at one session."""
    if not _current(result):
        return []
    figures = result["figures"]
    replies, sessions, modes = _keys(result)
    headers = ["reply", "sessions", *(f"underrun, median ({m})" for m in modes), "stalls (old / new)", "n"]
    rows = []
    for reply in replies:
        for count in sessions:
            cells = [figures[f"{reply}|{count}|{m}"] for m in modes]
            rows.append(
                [
                    reply,
                    str(count),
                    *(f"{c['underrun_ms']['median']:,.0f} ms" for c in cells),
                    " / ".join(f"{c['stalls']['median']:g}" for c in cells),
                    str(cells[0]["underrun_ms"]["n"]),
                ]
            )
    first_headers = ["reply (one session)", *(f"first audio, median ({m})" for m in modes), "n"]
    first_rows = []
    for reply in replies:
        cells = [figures[f"{reply}|{sessions[0]}|{m}"]["first_audio_ms"] for m in modes]
        first_rows.append([reply, *(f"{c['median']:,.0f} ms" for c in cells), str(cells[0]["n"])])
    overall = [figures[f"first_audio|{m}"] for m in modes]
    first_rows.append(["all replies", *(f"{c['median']:,.0f} ms" for c in overall), str(overall[0]["n"])])
    return [(headers, rows), (first_headers, first_rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """What the modes are, and whether synthesis kept up with real time."""
    if not _current(result):
        return ["This result was saved by an older version of the benchmark: `make bench` runs it again."]
    figures = result["figures"]
    replies, sessions, modes = _keys(result)
    lines = [
        "old: `--segmentation sentence --scheduling fifo` (one segment per sentence, sessions take turns); "
        "new: the defaults, `deadline` segmentation and scheduling (PROTOCOL.md §10.1, §10.2). Both servers "
        "are fresh, warmed up with the same conversations, and alternate trial by trial.",
        "Each session sends its reply's sentences as separate requests at once; a stall comes where a "
        "segment takes longer to synthesize than the audio queued before it takes to play.",
    ]
    for count in sessions:
        for mode in modes:
            audio = [figures[f"{r}|{count}|{mode}"]["audio_s"]["median"] for r in replies]
            delivered = [figures[f"{r}|{count}|{mode}"]["delivery_s"]["median"] for r in replies]
            if all(a is not None for a in audio) and all(d is not None for d in delivered):
                lines.append(
                    f"{count} session(s), {mode}: {sum(audio):.1f} s of audio per session delivered in "
                    f"{sum(delivered):.1f} s (sums of the replies' medians)."
                )
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    """Median underrun per reply and session count, old beside new."""
    from bench.plots import grouped_bars

    if not _current(result):
        return

    figures = result["figures"]
    replies, sessions, modes = _keys(result)
    categories = [f"{reply}\n×{count}" for count in sessions for reply in replies]
    groups = {
        mode: [
            figures[f"{reply}|{count}|{mode}"]["underrun_ms"]["median"]
            for count in sessions
            for reply in replies
        ]
        for mode in modes
    }
    grouped_bars(
        path,
        "Underrun, median (ms)",
        categories,
        groups,
        title="Silence a real-time player inserts: old vs new segmentation, 1-3 sessions at once",
    )
