"""§11.7 Ogg/Opus, FLAC and AAC bodies through InvokeEndpointWithResponseStream, under the simulator's split
policies, binary and over SSE.

Each body is decoded the way a streaming client decodes it: FFmpeg's demuxer and decoder (through PyAV,
:func:`conformance.bodies.decode_container`) read the PayloadParts as they came, each read stopping at a
part's end. The formats are OPTIONAL: a server that answers ``400 unsupported_format`` gets
``UNIMPLEMENTED``. Without PyAV installed the cases are ``SKIPPED`` (``pip install av``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conformance.audio import check_speech
from conformance.bodies import CONTAINERS, decode_container, decode_sse
from conformance.cases import Case, Level, Unimplemented, param
from conformance.probe import Probe
from conformance.test_11_invocations import RATE, _body, _stream
from conformance.texts import FAST, SHORT

_REQUIREMENT = (
    "Each body MUST be a stream that a standard decoder (FFmpeg's, a browser's) decodes to the request's "
    "audio, mono, whether it receives the body whole or in parts split at any byte"
)

BINARY = {"opus": "random:1-97", "flac": "misaligned", "aac": "fixed:7"}
"""Format → the simulator's split policy its binary body is fetched under (one each, all three kinds)."""

SSE = {"opus": "fixed:7", "flac": "random:1-97", "aac": "misaligned"}
"""Format → the split policy of its SSE body."""


def _fetch(conf: Probe, fmt: str, transport: str, policy: str) -> tuple[str, list[bytes]]:
    if importlib.util.find_spec("av") is None:
        pytest.skip("decoding Ogg/Opus, FLAC and AAC needs FFmpeg through PyAV: pip install av")
    try:
        return _stream(conf, _body(fmt, transport), policy)
    except ClientError as exc:
        original = exc.response.get("OriginalMessage", "")
        if exc.response.get("OriginalStatusCode") == 400 and "unsupported_format" in original:
            raise Unimplemented(f"the server does not offer {fmt} (400 unsupported_format)") from None
        raise


def _check_audio(conf: Probe, fmt: str, pcm: bytes, rate: int) -> None:
    expected_rate = 48000 if fmt == "opus" else RATE  # Opus decodes at 48 kHz whatever it coded (§11.7)
    conf.observe(decoded_rate=rate, decoded_s=round(len(pcm) / 2 / rate, 3) if rate else None)
    assert rate == expected_rate, f"the {fmt} stream decodes at {rate} Hz, not {expected_rate}"
    problems = check_speech(pcm, rate, SHORT, FAST)
    assert not problems, f"{fmt} decoded with FFmpeg: " + "; ".join(problems)


def _binary(conf: Probe, fmt: str) -> None:
    content_type, parts = _fetch(conf, fmt, "binary", BINARY[fmt])
    expected = CONTAINERS[fmt].media_type
    assert content_type.replace(" ", "").lower() == expected, (
        f"Content-Type {content_type!r}, not {expected!r}"
    )
    pcm, rate = decode_container(parts, fmt)
    _check_audio(conf, fmt, pcm, rate)


def _sse(conf: Probe, fmt: str) -> None:
    content_type, parts = _fetch(conf, fmt, "sse", SSE[fmt])
    assert content_type.split(";")[0].strip() == "text/event-stream", f"Content-Type {content_type!r}"
    sse = decode_sse(parts)
    assert sse.types[-1] == "synthesis_complete", f"the stream ended with {sse.last()}"
    start: dict[str, Any] = sse.events[0][1]
    declared = (start.get("format"), start.get("encoding"), start.get("sample_rate"))
    assert declared == (fmt, fmt, RATE), (
        f"synthesis_start says format, encoding, sample_rate = {declared}, not ({fmt!r}, {fmt!r}, {RATE})"
    )
    chunks = [obj for kind, obj in sse.events if kind == "audio_chunk"]
    conf.observe(chunks=len(chunks), chunk_bytes=sum(len(obj["data"]) * 3 // 4 for obj in chunks))
    # The chunks, each decoded on its own and joined in seq order, are the binary body (§11.4).
    pcm, rate = decode_container([sse.audio], fmt)
    _check_audio(conf, fmt, pcm, rate)


def _case(number: int, fmt: str, transport: str, policy: str, requirements: tuple[str, ...]) -> Any:
    what = "binary body" if transport == "binary" else "SSE stream"
    media = CONTAINERS[fmt].media_type
    expectation = (
        f"Content-Type {media}; the body starts with {CONTAINERS[fmt].magic!r} and FFmpeg decodes it, fed "
        "the parts as they came, to mono speech of plausible length"
        if transport == "binary"
        else f"valid SSE events; synthesis_start says format and encoding {fmt}; the chunks, each base64 on "
        "its own, join into a body FFmpeg decodes to mono speech of plausible length"
    )
    return param(
        fmt,
        Case(
            f"11.7.{number}",
            "§11.7",
            Level.MUST,
            _REQUIREMENT,
            f"InvokeEndpointWithResponseStream with format {fmt}, transport {transport}, 8 kHz, the "
            f"simulator splitting the {what} with policy {policy}",
            expectation + f"; a server without {fmt} answers 400 unsupported_format (UNIMPLEMENTED)",
            requirements=requirements,
        ),
    )


@pytest.mark.parametrize(
    "fmt", [_case(n, fmt, "binary", BINARY[fmt], ("R11.7-2", "R11.7-1")) for n, fmt in enumerate(BINARY, 1)]
)
def test_container_body_decodes_after_a_split(conf: Probe, fmt: str) -> None:
    _binary(conf, fmt)


@pytest.mark.parametrize(
    "fmt",
    [
        _case(n, fmt, "sse", SSE[fmt], ("R11.7-2", "R11.4-6", "R11.4-5"))
        for n, fmt in enumerate(SSE, len(BINARY) + 1)
    ],
)
def test_container_sse_decodes_after_a_split(conf: Probe, fmt: str) -> None:
    _sse(conf, fmt)
