"""Benchmark 4: throughput under concurrency, per backend.

For each backend and each level of concurrency (1, 2, 4, 8 sessions), that many WebSocket sessions
are opened straight to the reference server, then each sends the same request at the same moment
(:data:`bench.texts.THROUGHPUT_TEXT`). Figures per level:

* aggregate xRT: seconds of audio delivered per second of wall time, from the first request sent to
  the last ``synthesis_complete`` (equal to hours of audio per hour);
* p50 and p95 of the sessions' time to first audio (with n = the number of sessions, p95 of a few
  values is close to their maximum).

Single-stream xRT per backend is the one-session level. The server runs one synthesis at a time
(``synthesis_workers`` = 1: on a CPU one synthesis already uses every core) and sessions take turns
segment by segment, so on a CPU the aggregate stays near the single-stream figure and first-audio
time grows with the number of sessions.

The torch backend needs its weights (``python -m reference_server.assets fetch`` builds them from the
ONNX when torch, kokoro and onnx are installed); without them it is skipped with a note.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import seeds
from bench.channels import converse, direct_channel
from bench.record import Result
from bench.summary import describe
from bench.texts import THROUGHPUT_TEXT

__all__ = [
    "NAME",
    "SMOKE",
    "TITLE",
    "Config",
    "backend_unavailable",
    "measure_level",
    "plot",
    "run",
    "tables",
]

NAME = "throughput"
TITLE = "4. Throughput: concurrent sessions per backend"


@dataclass(frozen=True)
class Config:
    """Attributes: backends to measure; levels of concurrency; the text each session asks for."""

    backends: tuple[str, ...] = ("onnx", "torch")
    levels: tuple[int, ...] = (1, 2, 4, 8)
    text: str = THROUGHPUT_TEXT


SMOKE = Config(backends=("onnx",), levels=(1, 2), text="Hello there.")


def backend_unavailable(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or ``None`` when it can (checked without loading anything)."""
    import importlib.util

    from reference_server import assets

    if backend == "onnx":
        return None
    missing = [name for name in ("torch", "kokoro") if importlib.util.find_spec(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    try:
        found = assets.locate()
    except assets.AssetError as exc:
        return str(exc)
    if found.torch_weights is None:
        return (
            f"no torch weights in {found.directory} (the asset fetch builds them from the ONNX only when the "
            "`onnx` package is installed)"
        )
    return None


async def measure_level(ws_url: str, sessions: int, text: str) -> dict[str, Any]:
    """``sessions`` concurrent sessions, one request each; the level's figures and every session's times."""
    async with contextlib.AsyncExitStack() as stack:
        # Connect every session first, so the requests leave together and only synthesis is measured.
        channels = [await stack.enter_async_context(direct_channel(ws_url)) for _ in range(sessions)]
        outcomes = await asyncio.gather(*(converse(channel, [text]) for channel in channels))
    timelines = [timeline for (timeline,) in outcomes]
    sent = min(t.sent_at for t in timelines if t.sent_at is not None)
    done = max(t.completed_at for t in timelines if t.completed_at is not None)
    wall_s = done - sent
    audio_s = sum(t.audio_s for t in timelines)
    firsts = [t.first_audio_ms for t in timelines if t.first_audio_ms is not None]
    return {
        "sessions": sessions,
        "wall_s": round(wall_s, 3),
        "audio_s": round(audio_s, 3),
        "xrt": round(audio_s / wall_s, 3),
        "first_audio_ms": describe(firsts),
        "session_first_audio_ms": [round(v, 1) for v in firsts],
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Each backend in turn, each level in turn (see the module docstring)."""
    result = Result(NAME, TITLE, config=asdict(config))
    figures: dict[str, Any] = {}
    for backend in config.backends:
        reason = backend_unavailable(backend)
        if reason is not None:
            result.notes.append(f"{backend} backend skipped: {reason}.")
            context.log(f"  {backend}: skipped ({reason})")
            continue
        server = await context.servers.get(backend)
        await measure_level(server.ws_url, 1, config.text)  # warm-up
        levels = []
        for sessions in config.levels:
            level = await measure_level(server.ws_url, sessions, config.text)
            level["backend"] = backend
            levels.append(level)
            result.trials.append(level)
            context.log(
                f"  {backend} x{sessions}: xRT {level['xrt']:.2f}, first audio p50 "
                f"{level['first_audio_ms']['median']} ms, p95 {level['first_audio_ms']['p95']} ms"
            )
        single = next((level["xrt"] for level in levels if level["sessions"] == 1), None)
        figures[backend] = {"single_stream_xrt": single, "levels": levels, "startup_s": server.startup_s}
        if backend != "onnx":  # free the memory and cores for what follows
            await context.servers.release(backend)
    result.figures = figures
    result.seed = {"gpu_hours_per_hour": list(seeds.GPU_HOURS_PER_HOUR)}
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Single stream per backend; then one row per backend and level, beside the third-party figure."""
    single = [
        [backend, f"{figures['single_stream_xrt']:.2f}×", f"{figures['startup_s']:.0f} s"]
        for backend, figures in result["figures"].items()
    ]
    headers = [
        "backend",
        "sessions",
        "aggregate xRT (h of audio per h)",
        "first audio p50",
        "first audio p95",
        "n",
    ]
    rows = []
    for backend, figures in result["figures"].items():
        for level in figures["levels"]:
            first = level["first_audio_ms"]
            rows.append(
                [
                    backend,
                    str(level["sessions"]),
                    f"{level['xrt']:.2f}",
                    f"{first['median']:,.0f} ms",
                    f"{first['p95']:,.0f} ms",
                    str(first["n"]),
                ]
            )
    seed = result["seed"]["gpu_hours_per_hour"]
    rows.append(
        ["seed: third party, Kokoro-FastAPI on one H100", "many", f"{seed[0]:g}–{seed[1]:g}", "–", "–", "–"]
    )
    return [(["backend", "single-stream xRT", "server start (load + warm-up)"], single), (headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """Why the aggregate stays flat on a CPU, and what the torch backend runs."""
    lines = [
        "The server synthesizes one segment at a time (`synthesis_workers` = 1, the default: one synthesis "
        "already uses every CPU core) and sessions take turns, so more sessions share the same throughput "
        "and wait longer for their first audio.",
        f'Each session asks for "{result["config"]["text"]}"; single-stream xRT is the one-session level.',
    ]
    if "torch" in result["figures"]:
        lines.append(
            "torch: KModel in fp32 on the CPU, weights rebuilt from the int8 ONNX, with word timings; "
            "onnx: the int8 graph itself."
        )
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    """Aggregate xRT and first-audio p50/p95 against the number of sessions, per backend."""
    from bench.plots import line_chart

    xrt: dict[str, Any] = {}
    first: dict[str, Any] = {}
    for backend, figures in result["figures"].items():
        sessions = [level["sessions"] for level in figures["levels"]]
        xrt[backend] = (sessions, [level["xrt"] for level in figures["levels"]])
        first[f"{backend} p50"] = (
            sessions,
            [level["first_audio_ms"]["median"] for level in figures["levels"]],
        )
        first[f"{backend} p95"] = (sessions, [level["first_audio_ms"]["p95"] for level in figures["levels"]])
    line_chart(
        path,
        "concurrent sessions",
        [("aggregate xRT (audio s per wall s)", xrt), ("first audio (ms)", first)],
        title="Reference server on this machine's CPU",
        hline=(1.0, "real time"),
    )
