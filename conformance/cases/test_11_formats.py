"""§11.7 Ogg/Opus, FLAC and AAC bodies through InvokeEndpointWithResponseStream, under the simulator's split
policies, binary and over SSE.

Each body is decoded the way a streaming client decodes it: FFmpeg's demuxer and decoder (through PyAV,
:func:`conformance.engine.bodies.decode_container`) read the PayloadParts as they came, each read stopping at
a part's end. The formats are OPTIONAL: a server that answers ``400 unsupported_format`` gets
``UNIMPLEMENTED``. Without PyAV installed the cases are ``SKIPPED`` (``pip install av``).
"""

from __future__ import annotations

import base64
import importlib.util
from typing import Any

import pytest
from botocore.exceptions import ClientError

from conformance.cases.test_11_invocations import RATE, _body, _stream
from conformance.engine.audio import check_speech
from conformance.engine.bodies import CONTAINERS, decode_container, decode_sse
from conformance.engine.case import Case, Level, Unimplemented, param
from conformance.engine.probe import Probe
from conformance.engine.texts import FAST, SHORT

_REQUIREMENT = (
    "Each body MUST be a stream that a standard decoder (FFmpeg's, a browser's) decodes to the request's "
    "audio, mono, whether it receives the body whole or in parts split at any byte"
)

BINARY = {"opus": "random:1-97", "flac": "misaligned", "aac": "fixed:7"}
"""Format → the simulator's split policy its binary body is fetched under (one each, all three kinds)."""

SSE = {"opus": "fixed:7", "flac": "random:1-97", "aac": "misaligned"}
"""Format → the split policy of its SSE body."""


def _fetch(conf: Probe, fmt: str, transport: str, policy: str | None) -> tuple[str, list[bytes]]:
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


_FORMAT_CONDITION = {"opus": "R11.7-2a", "flac": "R11.7-2b", "aac": "R11.7-2c"}
"""The condition of §11.7's body rule (R11.7-2) each container format's cases test."""


@pytest.mark.parametrize(
    "fmt",
    [
        _case(n, fmt, "binary", BINARY[fmt], (_FORMAT_CONDITION[fmt], "R11.7-1"))
        for n, fmt in enumerate(BINARY, 1)
    ],
)
def test_container_body_decodes_after_a_split(conf: Probe, fmt: str) -> None:
    _binary(conf, fmt)


@pytest.mark.parametrize(
    "fmt",
    [
        _case(n, fmt, "sse", SSE[fmt], (_FORMAT_CONDITION[fmt], "R11.4-6a", "R11.4-6b", "R11.4-5"))
        for n, fmt in enumerate(SSE, len(BINARY) + 1)
    ],
)
def test_container_sse_decodes_after_a_split(conf: Probe, fmt: str) -> None:
    _sse(conf, fmt)


def _ogg_pages(data: bytes) -> str | None:
    """``None`` when ``data`` is whole Ogg pages (RFC 3533 §6), else what is wrong."""
    at = 0
    while at < len(data):
        if data[at : at + 4] != b"OggS" or at + 27 > len(data):
            return f"no Ogg page starts at byte {at}"
        segments = data[at + 26]
        if at + 27 + segments > len(data):
            return f"the page at byte {at} is cut inside its segment table"
        at += 27 + segments + sum(data[at + 27 : at + 27 + segments])
    return None if at == len(data) else f"the last page runs {at - len(data)} bytes past the chunk"


def _adts_frames(data: bytes) -> str | None:
    """``None`` when ``data`` is whole ADTS frames (ISO/IEC 14496-3 §1.A.2), else what is wrong."""
    at = 0
    while at < len(data):
        if at + 7 > len(data) or data[at] != 0xFF or data[at + 1] & 0xF6 != 0xF0:
            return f"no ADTS frame header starts at byte {at}"
        length = (data[at + 3] & 3) << 11 | data[at + 4] << 3 | data[at + 5] >> 5
        if length < 7:
            return f"the ADTS frame at byte {at} declares {length} bytes"
        at += length
    return None if at == len(data) else f"the last ADTS frame runs {at - len(data)} bytes past the chunk"


def _flac_units(data: bytes) -> str | None:
    """``None`` when ``data`` is the FLAC stream header (``fLaC`` and its metadata blocks) and/or frames that
    begin at its start or right after the header, else what is wrong. A frame has no length field: that a
    chunk ends on a frame's end shows as the next chunk beginning with a frame sync code."""
    at = 0
    if data.startswith(b"fLaC"):
        at, last = 4, False
        while not last:
            if at + 4 > len(data):
                return f"the stream header is cut inside a metadata block header at byte {at}"
            last = bool(data[at] & 0x80)
            at += 4 + int.from_bytes(data[at + 1 : at + 4], "big")
        if at > len(data):
            return f"the stream header's last metadata block runs {at - len(data)} bytes past the chunk"
    if at < len(data) and not (data[at] == 0xFF and data[at + 1 : at + 2] in (b"\xf8", b"\xf9")):
        return f"no FLAC frame sync code at byte {at}"
    return None


UNITS = {"opus": _ogg_pages, "flac": _flac_units, "aac": _adts_frames}
"""Format → the check that a decoded ``audio_chunk`` holds whole container units (§11.4)."""


@pytest.mark.parametrize(
    "fmt",
    [
        param(
            fmt,
            Case(
                f"11.7.{n}",
                "§11.7",
                Level.SHOULD,
                "For `opus`, `flac` and `aac` each chunk SHOULD hold whole container units (Ogg pages; the "
                "FLAC stream header or whole FLAC frames; whole ADTS frames)",
                f"InvokeEndpointWithResponseStream with format {fmt}, transport sse, 8 kHz; each audio_chunk "
                "decoded from base64 on its own",
                {
                    "opus": "each chunk is whole Ogg pages: 'OggS' at its start and after each page, the "
                    "last page ending with the chunk",
                    "flac": "the first chunk starts with the stream header, whole; every other chunk, and "
                    "whatever follows the header, starts with a FLAC frame sync code",
                    "aac": "each chunk is whole ADTS frames, the last ending with the chunk",
                }[fmt]
                + f"; a server without {fmt} answers 400 unsupported_format (UNIMPLEMENTED)",
                requirements=("R11.4-9",),
            ),
        )
        for n, fmt in enumerate(UNITS, len(BINARY) + len(SSE) + 1)
    ],
)
def test_container_sse_chunks_hold_whole_units(conf: Probe, fmt: str) -> None:
    _, parts = _fetch(conf, fmt, "sse", None)
    sse = decode_sse(parts)
    chunks = [obj for kind, obj in sse.events if kind == "audio_chunk"]
    assert chunks, "the stream has no audio_chunk event"
    problems = []
    for seq, obj in enumerate(chunks):
        try:
            problem = UNITS[fmt](base64.b64decode(obj.get("data"), validate=True))
        except (TypeError, ValueError):
            problem = "its data is not base64 (judged by 11.7.4-6)"
        if problem is not None:
            problems.append(f"chunk {seq}: {problem}")
    conf.observe(chunks=len(chunks), problems=problems[:5])
    assert not problems, f"{len(problems)} of {len(chunks)} chunks are not whole units: " + "; ".join(
        problems[:3]
    )
