"""Benchmark 1c. Barge-in: a cancel during a pass, then the next reply's first audio (issue #26 point 1).

A voice agent's hardest moment is the interruption: the user starts talking, the agent cancels its reply
and sends the next one. A cancel stops the audio at once, but before issue #26 the model pass already
running (one segment, about a sentence) finished first, and the next reply's first audio waited for audio
nobody would hear. With ``--abort-on-cancel yes`` (the default) the server aborts that pass
(onnxruntime's ``RunOptions.terminate``), so the model is free at once.

Two reference servers (onnx, default settings; ``--abort-on-cancel no`` and ``yes``) run side by side;
every trial runs on each in turn (the order alternates), on new sessions:

* idle: the short next reply alone on a new session; ``idle_first_audio_ms`` is request sent → first
  audio bytes received;
* barge-in: a long reply (a short opener, then a long sentence), cancelled 100 ms after its first audio
  arrived, while the long sentence's pass runs, then at once the short next reply on the same session.
  (A cancel sent the moment the first audio arrives sometimes reaches the server before the next pass
  has begun, and then neither mode waits: the 100 ms make every trial the situation the issue is about,
  the user talking over the agent's first words.) Recorded:

  - ``cancel_to_complete_ms``: cancel sent → the cancelled request's ``synthesis_complete``;
  - ``bytes_after_cancel``: audio bytes of the cancelled request received after the cancel was sent;
  - ``cancel_to_next_audio_ms``: cancel sent → the next reply's first audio bytes;
  - ``excess_ms``: ``cancel_to_next_audio_ms`` − the same trial's ``idle_first_audio_ms`` (the target:
    within 100 ms).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.channels import SessionError, converse, direct_channel
from bench.record import Result
from bench.stack import ReferenceServer
from bench.summary import describe, ms, paired, ratio
from bench.texts import LONG_REPLIES
from protocol.server_output import AudioReceived, ErrorReceived, SynthesisCompleted

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "barge_in"
TITLE = "1c. Barge-in: cancel during a pass, then the next reply's first audio"

MODES = ("no", "yes")
LABELS = {"no": "pass finishes (old)", "yes": "pass aborted (new)"}
VOICE = "af_heart"
TARGET_MS = 100.0
"""The issue's target: the next reply's first audio within this much of its first audio when idle."""
_TIMES = ("idle_first_audio_ms", "cancel_to_complete_ms", "cancel_to_next_audio_ms", "excess_ms")


@dataclass(frozen=True)
class Config:
    """Attributes: trials per mode (after two untimed warm-ups of each); the long reply, cancelled
    ``cancel_after_s`` after its first audio; the short next reply."""

    trials: int = 15
    first_text: str = " ".join(LONG_REPLIES["technician"])
    next_text: str = "Okay, let me check that for you."
    cancel_after_s: float = 0.1


SMOKE = Config(trials=1)


async def _idle(server: ReferenceServer, text: str) -> float:
    """Request sent → first audio (ms) of ``text`` alone on a new session."""
    async with direct_channel(server.ws_url) as channel:
        (timeline,) = await converse(channel, [text], voice=VOICE)
    assert timeline.first_audio_ms is not None
    return timeline.first_audio_ms


async def _barge_in(
    server: ReferenceServer, first_text: str, next_text: str, cancel_after_s: float
) -> dict[str, Any]:
    """Cancel ``first_text`` ``cancel_after_s`` after its first audio, then send ``next_text`` at once;
    the times in ms."""
    async with direct_channel(server.ws_url) as channel:
        client = channel.client
        first_id, frame = client.request(first_text, voice=VOICE)
        await channel.send(frame)
        ids: dict[str, str] = {}
        times: dict[str, float] = {}
        after_cancel = 0
        status = None
        barge: asyncio.Task[None] | None = None

        async def cancel_and_ask() -> None:
            await asyncio.sleep(cancel_after_s)
            times["cancel"] = time.perf_counter()
            await channel.send(client.cancel(first_id))
            ids["next"], request = client.request(next_text, voice=VOICE)
            await channel.send(request)

        async for events in channel.events():
            now = time.perf_counter()
            for event in events:
                if isinstance(event, AudioReceived) and event.request_id == first_id:
                    if barge is None:
                        barge = asyncio.create_task(cancel_and_ask())
                    elif "cancel" in times:
                        after_cancel += len(event.pcm)
                elif isinstance(event, AudioReceived) and event.request_id == ids.get("next"):
                    times.setdefault("next_audio", now)
                elif isinstance(event, SynthesisCompleted):
                    if event.frame.request_id == first_id:
                        times["complete"], status = now, event.frame.status
                    elif event.frame.request_id == ids.get("next"):
                        await channel.send(client.close())
                elif isinstance(event, ErrorReceived):
                    raise SessionError(f"{event.frame.code}: {event.frame.message}")
        if barge is not None:
            await barge
    if not {"cancel", "complete", "next_audio"} <= times.keys():
        raise SessionError(f"the barge-in did not run to its end (the first reply {status or 'never ended'})")
    return {
        "cancel_to_complete_ms": round((times["complete"] - times["cancel"]) * 1000.0, 2),
        "bytes_after_cancel": after_cancel,
        "cancel_to_next_audio_ms": round((times["next_audio"] - times["cancel"]) * 1000.0, 2),
        "cancelled_status": status,
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the two servers ``config.trials`` times (see the module docstring)."""
    servers = {mode: ReferenceServer("onnx", abort_on_cancel=mode) for mode in MODES}
    result = Result(
        NAME,
        TITLE,
        config={**asdict(config), "servers": {mode: s.settings() for mode, s in servers.items()}},
    )
    try:
        for server in servers.values():
            await server.start()
        barge_in = (config.first_text, config.next_text, config.cancel_after_s)
        for _ in range(2):  # warm-up: connections, the model-speed estimate, the first passes
            for mode in MODES:
                await _idle(servers[mode], config.next_text)
                await _barge_in(servers[mode], *barge_in)
        for number in range(config.trials):
            order = MODES if number % 2 == 0 else MODES[::-1]
            for mode in order:
                idle_ms = await _idle(servers[mode], config.next_text)
                trial = await _barge_in(
                    servers[mode], config.first_text, config.next_text, config.cancel_after_s
                )
                trial.update(
                    mode=mode,
                    trial=number + 1,
                    idle_first_audio_ms=round(idle_ms, 2),
                    excess_ms=round(trial["cancel_to_next_audio_ms"] - idle_ms, 2),
                )
                result.trials.append(trial)
                context.log(
                    f"  trial {number + 1} abort {mode:<3} cancel→complete "
                    f"{trial['cancel_to_complete_ms']:7.1f} ms, cancel→next audio "
                    f"{trial['cancel_to_next_audio_ms']:7.1f} ms, idle first audio {idle_ms:7.1f} ms, "
                    f"{trial['bytes_after_cancel']} bytes after cancel"
                )
    finally:
        for server in servers.values():
            await server.stop()
    figures: dict[str, Any] = {}
    for mode in MODES:
        mine = [t for t in result.trials if t["mode"] == mode]
        figures[mode] = {key: describe([t[key] for t in mine]) for key in (*_TIMES, "bytes_after_cancel")}
        figures[mode]["next_over_idle"] = ratio(
            figures[mode]["cancel_to_next_audio_ms"]["median"], figures[mode]["idle_first_audio_ms"]["median"]
        )
        figures[mode]["all_cancelled"] = all(t["cancelled_status"] == "cancelled" for t in mine)
    figures["paired_change_ms"] = describe(paired(result.trials, "cancel_to_next_audio_ms", "yes", "no"))
    figures["target_ms"] = TARGET_MS
    result.figures = figures
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Rows: each mode's medians; then the paired change of cancel → next first audio."""
    figures, trials = result["figures"], result["trials"]
    headers = [
        "mode",
        "cancel → cancelled complete, median",
        "bytes after cancel, median",
        "cancel → next first audio, median",
        "p95",
        "idle first audio, median",
        "next − idle, median",
        "next / idle",
        "n",
    ]
    rows = []
    for mode in MODES:
        f = figures[mode]
        rows.append(
            [
                LABELS[mode],
                ms(f["cancel_to_complete_ms"]["median"]),
                f"{f['bytes_after_cancel']['median']:,.0f}",
                ms(f["cancel_to_next_audio_ms"]["median"]),
                ms(f["cancel_to_next_audio_ms"]["p95"]),
                ms(f["idle_first_audio_ms"]["median"]),
                ms(f["excess_ms"]["median"]),
                "–" if f["next_over_idle"] is None else f"{f['next_over_idle']:.2f}",
                str(f["cancel_to_next_audio_ms"]["n"]),
            ]
        )
    changes = paired(trials, "cancel_to_next_audio_ms", "yes", "no")
    rows.append(
        [
            "new − old, same trial",
            "",
            "",
            ms(statistics.median(changes) if changes else None),
            "",
            "",
            "",
            "",
            str(len(changes)),
        ]
    )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """What was sent, and whether the target holds."""
    figures, config = result["figures"], result["config"]
    new = figures["yes"]["excess_ms"]["median"]
    verdict = "–" if new is None else ("met" if new <= figures["target_ms"] else "not met")
    return [
        f"The long reply ({config['first_text']!r}) is cancelled {config['cancel_after_s'] * 1000:.0f} ms "
        "after its first audio (the opener) arrived, while the long sentence's pass runs; the next reply "
        f"({config['next_text']!r}) is sent right after the cancel on the same session. Idle first audio "
        "is the same next reply alone on a new session, in the same trial.",
        f"Target (issue #26): the next reply's first audio within {figures['target_ms']:.0f} ms of its "
        f"idle first audio; with the pass aborted the median difference is {ms(new)}: {verdict}.",
        "Bytes after cancel: audio of the cancelled request read after the cancel was sent: what was on "
        "the wire already (a segment goes out in frames of at most max_audio_frame_bytes); the server "
        "sends nothing of the cancelled request after reading the cancel, in both modes. Cancel → complete "
        "is short in both modes: the cancelled request completes as soon as its audio stops; what the "
        "pass held up before is the next reply.",
        f"Every cancelled request completed as cancelled: old {figures['no']['all_cancelled']}, "
        f"new {figures['yes']['all_cancelled']}. Both servers run on the same machine, one trial at a time; "
        "compare the paired change (both modes of a trial ran back to back).",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Box plots: cancel → next first audio per mode beside the idle first audio; cancel → complete."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = result["trials"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    data = [[t["cancel_to_next_audio_ms"] for t in trials if t["mode"] == mode] for mode in MODES]
    data.append([t["idle_first_audio_ms"] for t in trials])
    axes[0].boxplot(data, tick_labels=[*(LABELS[m] for m in MODES), "idle first audio"])
    axes[0].set_title("cancel → next reply's first audio (ms)")
    data = [[t["cancel_to_complete_ms"] for t in trials if t["mode"] == mode] for mode in MODES]
    axes[1].boxplot(data, tick_labels=[LABELS[m] for m in MODES])
    axes[1].set_title("cancel → cancelled request's complete (ms)")
    for axis in axes:
        axis.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
