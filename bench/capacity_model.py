"""Benchmark 10: where scheduling stops holding: the server's own runtime on a Kokoro stand-in of known speed.

The playback benchmark (§6) measures real Kokoro on this machine, so its figures move with the machine's
speed and load. This one runs the same replies (:data:`bench.texts.PLAYBACK_REPLIES`, every sentence a
request, sent at once) through the same code, the reference server's runtime
(:class:`reference_server.request_audio.RequestAudio` and the scheduler), for 1, 2 and 3 sessions at once, on
:class:`bench.paced.PacedBackend`: audio shaped like Kokoro's (about 0.35 s of lead-in and 0.45 s of
trailing silence per pass, 60 ms per letter) that takes ``audio / xrt`` seconds to make on a fake clock.
So it answers, for a model of a given speed: how many real-time listeners stay fed, old segmentation
(one pass per sentence, sessions take turns) against new (deadline segmentation and scheduling). The
speeds: 3.45x real time (the int8 ONNX on two AMD EPYC cores, bench §4), 2x (two busy or slower
cores) and 0.5x (a machine far too slow).

The figures are a model, not a measurement of Kokoro: they share the runtime's decisions with the real
server and nothing else. Thread timing decides which of two ready sessions the scheduler sees first, so
runs can differ by a segment here and there.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.channels import BYTES_PER_SECOND
from bench.playback import underrun
from bench.record import Result
from bench.summary import describe
from bench.texts import PLAYBACK_REPLIES

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "capacity_model"
TITLE = "10. Where it stops holding: the runtime on a Kokoro stand-in of known speed, 1 to 3 sessions"

MODES = {"old": ("sentence", "fifo"), "new": ("deadline", "deadline")}
"""(segmentation, scheduling) per mode, as in the playback benchmark."""

WARMUP = "One two three four five six seven eight nine ten eleven twelve."


@dataclass(frozen=True)
class Config:
    """Attributes: model speeds (times real time); numbers of concurrent sessions; the replies."""

    speeds: tuple[float, ...] = (3.45, 2.0, 0.5)
    sessions: tuple[int, ...] = (1, 2, 3)
    replies: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(PLAYBACK_REPLIES))


SMOKE = Config(speeds=(3.45,), sessions=(1, 2), replies={"bench reply": PLAYBACK_REPLIES["bench reply"]})


def _underrun(produced: list[tuple[float, float]]) -> float:
    """Seconds of silence for a real-time player of ``(produced at, seconds)`` pieces
    (:func:`bench.playback.underrun`)."""
    return underrun([(at, round(seconds * BYTES_PER_SECOND)) for at, seconds in produced])[0]


async def _speak(
    runtime: Any, texts: tuple[str, ...], listener: Any, clock: Any
) -> list[tuple[float, float]]:
    from protocol.messages import SynthesisRequest
    from reference_server.request_audio import RequestAudio

    produced = []
    for number, text in enumerate(texts):
        audio = RequestAudio(runtime, SynthesisRequest(text=text, request_id=f"r{number}"), listener)
        try:
            while (piece := await audio.next()) is not None:
                produced.append((clock(), len(piece.pcm) / 2 / 24_000))
        finally:
            audio.close()
    return produced


async def _trial(mode: str, xrt: float, sessions: int, texts: tuple[str, ...]) -> list[dict[str, float]]:
    from bench.paced import FakeClock, PacedBackend
    from reference_server.runtime import Runtime
    from reference_server.scheduling import Listener
    from reference_server.settings import Settings

    segmentation, scheduling = MODES[mode]
    clock = FakeClock()
    settings = replace(Settings(), segmentation=segmentation, scheduling=scheduling)
    runtime = Runtime(settings, PacedBackend(clock, xrt=xrt), clock=clock, lockstep=True)
    try:
        await _speak(runtime, (WARMUP,) * 4, Listener(), clock)  # the speed estimate learns
        start = clock()
        spoken = await asyncio.gather(*(_speak(runtime, texts, Listener(), clock) for _ in range(sessions)))
    finally:
        runtime.scheduler.close()
    return [
        {
            "underrun_ms": round(_underrun(p) * 1000.0, 1),
            "first_audio_ms": round((p[0][0] - start) * 1000.0, 1),
        }
        for p in spoken
    ]


async def run(context: Any, config: Config = Config()) -> Result:
    """Every speed, session count, reply and mode once (the model needs no repetition: no noise)."""
    result = Result(NAME, TITLE, config=asdict(config))
    for xrt in config.speeds:
        for sessions in config.sessions:
            for mode in MODES:
                rows = []
                for reply, texts in config.replies.items():
                    for index, outcome in enumerate(await _trial(mode, xrt, sessions, texts)):
                        row = {
                            "xrt": xrt,
                            "sessions": sessions,
                            "mode": mode,
                            "reply": reply,
                            "session": index + 1,
                        }
                        rows.append({**row, **outcome})
                result.trials += rows
                median = statistics.median(r["underrun_ms"] for r in rows)
                context.log(f"  {xrt}x, {sessions} session(s), {mode}: underrun median {median:,.0f} ms")
    result.figures = {}
    for xrt in config.speeds:
        for sessions in config.sessions:
            for mode in MODES:
                rows = [
                    t for t in result.trials if (t["xrt"], t["sessions"], t["mode"]) == (xrt, sessions, mode)
                ]
                result.figures[f"{xrt}|{sessions}|{mode}"] = {
                    "underrun_ms": describe([t["underrun_ms"] for t in rows]),
                    "first_audio_ms": describe([t["first_audio_ms"] for t in rows]),
                }
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Per speed and session count: underrun (median and worst) and first audio, old beside new."""
    figures, config = result["figures"], result["config"]
    headers = ["model speed", "sessions", "underrun old (median / max)", "underrun new (median / max)",
               "first audio old / new (median)"]  # fmt: skip
    rows = []
    for xrt in config["speeds"]:
        for sessions in config["sessions"]:
            old, new = (figures[f"{xrt}|{sessions}|{mode}"] for mode in MODES)
            rows.append(
                [
                    f"{xrt:g}x real time",
                    str(sessions),
                    f"{old['underrun_ms']['median']:,.0f} / {old['underrun_ms']['max']:,.0f} ms",
                    f"{new['underrun_ms']['median']:,.0f} / {new['underrun_ms']['max']:,.0f} ms",
                    f"{old['first_audio_ms']['median']:,.0f} / {new['first_audio_ms']['median']:,.0f} ms",
                ]
            )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """Why a session count stops holding."""
    return [
        "A listener needs 1 / xrt of the model for the audio alone, and every pass also makes Kokoro's "
        "~0.8 s of lead-in and trailing silence: at 3.45x, three listeners need about 0.87 of the model "
        "before that overhead, so the third stops being fed continuously; at 2x, two already need all of it.",
        "New segmentation cuts only where the audio queued ahead of a listener cannot cover a whole "
        "sentence, and stops cutting when the waiting listeners need more than 0.8 of the model (more than "
        "1.2 for a listener with nothing queued), since then every cut only adds silence to make "
        "(reference_server.request_audio.OVERLOAD).",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Median underrun against the number of sessions, one panel per model speed, old and new."""
    from bench.plots import line_chart

    figures, config = result["figures"], result["config"]
    sessions = list(config["sessions"])

    def medians(xrt: float, mode: str) -> list[float | None]:
        return [figures[f"{xrt}|{n}|{mode}"]["underrun_ms"]["median"] for n in sessions]

    panels = [
        (f"{xrt:g}x real time: underrun (ms)", {mode: (sessions, medians(xrt, mode)) for mode in MODES})
        for xrt in config["speeds"]
    ]
    line_chart(path, "concurrent sessions", panels, title="The runtime on a Kokoro stand-in: median underrun")
