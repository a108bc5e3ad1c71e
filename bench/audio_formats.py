"""Benchmark 3b: bytes per second of audio and first-audio time, per session encoding and HTTP format.

The seed's table (§3) compares sizes of audio encoded after the fact; this one asks the reference server
for each encoding and format it offers and measures what arrives, request by request (one at a time, so
no request waits behind another), the modes alternating within each text:

* the session (WebSocket, straight to the container, PROTOCOL.md §3.3.1): ``pcm_s16le``, ``pcm_mulaw``
  and ``pcm_alaw`` at 8 kHz and 24 kHz. Bytes are ``synthesis_complete.audio_bytes``; first audio is the
  first audio frame after the request was sent;
* ``POST /invocations`` (§11) at 24 kHz: ``wav``, ``pcm``, ``mp3``, ``opus``, ``flac`` and ``aac``, each
  as a binary body and as server-sent events. Bytes are every byte of the body, SSE framing and base64
  included; first audio is when the body received so far first decodes to audio (past the WAV header; for
  the compressed formats, when FFmpeg decodes at least one sample from the prefix).

Bytes per second are total bytes over total seconds of audio (``total_duration_s`` of the same text's
``pcm_s16le`` answer at that rate: the onnx backend speaks a text the same every time).
"""

from __future__ import annotations

import base64
import io
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import seeds
from bench.channels import SESSION_TIMEOUT_S, direct_channel
from bench.record import Result
from bench.summary import describe
from bench.texts import CLIPS
from protocol.server_output import AudioReceived, ErrorReceived, SynthesisCompleted
from protocol.sse import SSEDecoder

__all__ = ["FORMATS", "NAME", "SESSION_MODES", "SMOKE", "TITLE", "Config", "plot", "run", "tables"]

NAME = "audio_formats"
TITLE = "3b. Encodings and formats: bytes per second and first audio"

SESSION_MODES: tuple[tuple[str, int], ...] = tuple(
    (encoding, rate) for rate in (8000, 24000) for encoding in ("pcm_s16le", "pcm_mulaw", "pcm_alaw")
)
"""``(encoding, sample_rate)`` of each session mode (§3.3.1)."""

FORMATS = ("wav", "pcm", "mp3", "opus", "flac", "aac")
"""``POST /invocations`` formats (§11), each over both transports."""

TRANSPORTS = ("binary", "sse")
HTTP_RATE = 24_000
_DEMUXERS = {"mp3": "mp3", "opus": "ogg", "flac": "flac", "aac": "aac"}


@dataclass(frozen=True)
class Config:
    """Attributes: texts: spoken once per mode (:data:`bench.texts.CLIPS`, short assistant replies)."""

    texts: tuple[str, ...] = CLIPS[:3]


SMOKE = Config(texts=CLIPS[:1])


def session_mode(encoding: str, rate: int) -> str:
    """``"pcm_mulaw 8 kHz"``."""
    return f"{encoding} {rate // 1000} kHz"


def http_mode(fmt: str, transport: str) -> str:
    """``"opus binary"``."""
    return f"{fmt} {transport}"


def decodes(prefix: bytes, fmt: str) -> bool:
    """Whether a body's first bytes already hold audio: past the WAV header, any PCM sample, or at least
    one sample FFmpeg decodes from the compressed stream's prefix."""
    if fmt == "wav":
        return len(prefix) >= 46
    if fmt == "pcm":
        return len(prefix) >= 2
    import av

    try:
        with av.open(io.BytesIO(prefix), mode="r", format=_DEMUXERS[fmt]) as container:
            for frame in container.decode(audio=0):
                if frame.samples:
                    return True
    except (av.error.FFmpegError, IndexError, ValueError):
        return False
    return False


async def _session_trial(channel: Any, events: Any, text: str, encoding: str, rate: int) -> dict[str, Any]:
    """One request on the open session; read until its ``synthesis_complete``."""
    request_id, frame = channel.client.request(text, encoding=encoding, sample_rate=rate)
    sent = time.perf_counter()
    await channel.send(frame)
    first: float | None = None
    while True:
        batch = await anext(events)
        now = time.perf_counter()
        for event in batch:
            if isinstance(event, AudioReceived) and first is None:
                first = now
            elif isinstance(event, ErrorReceived):
                raise RuntimeError(
                    f"{encoding} at {rate} Hz refused: {event.frame.code}: {event.frame.message}"
                )
            elif isinstance(event, SynthesisCompleted) and event.frame.request_id == request_id:
                return {
                    "kind": "session",
                    "mode": session_mode(encoding, rate),
                    "text": text,
                    "bytes": event.frame.audio_bytes,
                    "audio_s": event.frame.total_duration_s,
                    "first_audio_ms": None if first is None else round((first - sent) * 1000, 1),
                    "complete_ms": round((now - sent) * 1000, 1),
                }


async def _http_trial(http: Any, url: str, text: str, fmt: str, transport: str) -> dict[str, Any]:
    """One ``POST /invocations``, its body read as it streams."""
    body = {"text": text, "format": fmt, "transport": transport, "sample_rate": HTTP_RATE}
    received = 0
    audio = bytearray()
    first: float | None = None
    decoder = SSEDecoder()
    sent = time.perf_counter()
    async with http.stream("POST", f"{url}/invocations", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(
                f"{fmt} over {transport}: HTTP {response.status_code}: {await response.aread()!r}"
            )
        async for chunk in response.aiter_bytes():
            now = time.perf_counter()
            received += len(chunk)
            if transport == "binary":
                audio += chunk
            else:
                for event in decoder.feed(chunk):
                    if event.event == "audio_chunk":
                        audio += base64.b64decode(json.loads(event.data)["data"])
                    elif event.event == "error":
                        raise RuntimeError(f"{fmt} over SSE failed: {event.data}")
            if first is None and audio and decodes(bytes(audio), fmt):
                first = now
    done = time.perf_counter()
    return {
        "kind": "http",
        "mode": http_mode(fmt, transport),
        "text": text,
        "bytes": received,
        "audio_bytes": len(audio),
        "first_audio_ms": None if first is None else round((first - sent) * 1000, 1),
        "complete_ms": round((done - sent) * 1000, 1),
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Every mode once per text, alternating; then the totals and first-audio medians per mode."""
    import httpx

    server = await context.servers.get("onnx")
    result = Result(
        NAME,
        TITLE,
        config={**asdict(config), "http_sample_rate": HTTP_RATE, "server": server.settings()},
    )
    seconds: dict[tuple[str, int], float] = {}  # (text, rate) → audio seconds of its pcm_s16le answer
    async with direct_channel(server.ws_url) as channel:
        events = aiter(channel.events())
        for text in config.texts:
            for encoding, rate in SESSION_MODES:
                trial = await _session_trial(channel, events, text, encoding, rate)
                if encoding == "pcm_s16le":
                    seconds[(text, rate)] = trial["audio_s"]
                result.trials.append(trial)
        await channel.send(channel.client.close())
    async with httpx.AsyncClient(timeout=SESSION_TIMEOUT_S) as http:
        for text in config.texts:
            for fmt in FORMATS:
                for transport in TRANSPORTS:
                    trial = await _http_trial(http, server.url, text, fmt, transport)
                    trial["audio_s"] = seconds[(text, HTTP_RATE)]
                    result.trials.append(trial)
    modes = [session_mode(e, r) for e, r in SESSION_MODES] + [
        http_mode(f, t) for f in FORMATS for t in TRANSPORTS
    ]
    figures: dict[str, Any] = {}
    for mode in modes:
        rows = [t for t in result.trials if t["mode"] == mode]
        total_s = sum(t["audio_s"] for t in rows)
        total = sum(t["bytes"] for t in rows)
        figures[mode] = {
            "bytes": total,
            "audio_s": round(total_s, 3),
            "bytes_per_s": round(total / total_s) if total_s else None,
            "kbps": round(total * 8 / total_s / 1000, 1) if total_s else None,
            "first_audio_ms": describe(
                [t["first_audio_ms"] for t in rows if t["first_audio_ms"] is not None]
            ),
        }
    result.figures = figures
    seed_s = seeds.SIZES["pcm"].total_bytes / 48_000
    result.seed = {
        key: {"kbps": row.kbps, "base64_kbps": round(row.base64_bytes * 8 / seed_s / 1000, 1)}
        for key, row in seeds.SIZES.items()
    }
    return result


_SEED_ROWS = {
    "pcm_s16le 24 kHz": ("pcm", "kbps"),
    "pcm binary": ("pcm", "kbps"),
    "pcm sse": ("pcm", "base64_kbps"),
    "mp3 binary": ("mp3", "kbps"),
    "mp3 sse": ("mp3", "base64_kbps"),
    "aac binary": ("aac", "kbps"),
    "aac sse": ("aac", "base64_kbps"),
}
"""Our mode → the seed's row (REFERENCE.md §3) it compares with: its raw and base64 bit rates."""


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """One row per mode: bytes per second, kbps, first audio (median, p95, n), the seed's kbps."""
    headers = ["mode", "bytes/s", "kbps", "first audio ms (median)", "p95", "n", "seed kbps (§3)"]
    rows = []
    for mode, figures in result["figures"].items():
        first = figures["first_audio_ms"]
        seed = _SEED_ROWS.get(mode)
        rows.append(
            [
                mode,
                "–" if figures["bytes_per_s"] is None else f"{figures['bytes_per_s']:,}",
                "–" if figures["kbps"] is None else f"{figures['kbps']:.1f}",
                "–" if first["median"] is None else f"{first['median']:.0f}",
                "–" if first["p95"] is None else f"{first['p95']:.0f}",
                str(first["n"]),
                "" if seed is None else f"{result['seed'][seed[0]][seed[1]]:.1f}",
            ]
        )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """How to read the table."""
    return [
        "Session modes count the audio frames' bytes only (a control frame per request is about 150 bytes); "
        "HTTP modes count every body byte, so SSE rows include base64 (4/3) and the event framing, and "
        "wav the 44-byte header.",
        "The seed's column is its 24-clip table (raw or base64 bit rate of PCM16, MP3 48 kbps, AAC 32 kbps "
        "in fragmented MP4); our AAC is ADTS, which has no MP4 boxes, and our SSE carries each chunk's "
        "base64 in a JSON event.",
        "First audio through HTTP is when the received prefix first decodes to audio, so a container "
        "whose encoder holds audio back (AAC's priming, Opus pages of up to 0.1 s) shows it; the first "
        "segment's synthesis dominates every mode alike.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Bit rate per mode (log scale), the seed's beside where it has a comparable row."""
    from bench.plots import labelled_bars

    figures = result["figures"]
    modes = list(figures)
    seed = [result["seed"][_SEED_ROWS[m][0]][_SEED_ROWS[m][1]] if m in _SEED_ROWS else None for m in modes]
    labelled_bars(
        path,
        "kbps (log scale)",
        modes,
        [figures[m]["kbps"] for m in modes],
        seed,
        title="bit rate per session encoding and POST /invocations format",
        log=True,
    )
