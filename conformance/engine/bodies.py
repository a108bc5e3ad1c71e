"""Decoding and judging ``POST /invocations`` bodies: streamed WAV, raw PCM, server-sent events, and the
Ogg/Opus, FLAC and AAC containers of §11.7 (no I/O).

Bodies reach a SageMaker client as PayloadParts split at arbitrary bytes (PROTOCOL.md §12.2), so every
decoder here takes the parts as they came and cuts at its own delimiters: the 44-byte header and whole
samples for WAV and PCM, blank lines for SSE (decoded with :class:`protocol.sse.SSEDecoder`, incremental,
WHATWG rules), and for the containers FFmpeg's own demuxer and decoder (through PyAV), handed the parts as
they came, each read stopping at a part's end (:func:`decode_container`). Each function returns what it
decoded and raises AssertionError, naming the rule, on the first problem.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol import schemas
from protocol.pcm import SampleAligner, parse_wav_header
from protocol.sse import SSEDecoder, decode_base64_strict

__all__ = [
    "CONTAINERS",
    "Container",
    "PartsReader",
    "SSEBody",
    "decode_container",
    "decode_pcm",
    "decode_sse",
    "decode_wav",
]

_STREAMING_SIZE = 0xFFFFFFFF
_EVENT_BLOCK = re.compile(rb"event: ([a-z_]+)\ndata: ([^\r\n]*)\n\n")


@dataclass(frozen=True)
class Container:
    """What §11.7 says of one format.

    Attributes:
        media_type: its ``Content-Type`` (parameters included, compared without spaces).
        demuxer: FFmpeg's demuxer for it (forced: a body must be what its format says, not what FFmpeg
            would guess).
        decoder: FFmpeg's decoder its stream must need.
        magic: the bytes the body starts with.
    """

    media_type: str
    demuxer: str
    decoder: str
    magic: bytes


CONTAINERS = {
    "opus": Container("audio/ogg;codecs=opus", "ogg", "opus", b"OggS"),
    "flac": Container("audio/flac", "flac", "flac", b"fLaC"),
    "aac": Container("audio/aac", "aac", "aac", b"\xff"),
}
"""The formats of §11.7 by name."""


class PartsReader:
    """A file object that hands a demuxer the parts as they came: a read stops at the end of a part (a short
    read, as from a socket or a PayloadPart stream); it cannot seek."""

    def __init__(self, parts: Iterable[bytes]) -> None:
        self._parts = [bytes(p) for p in parts if p]
        self._offset = 0

    def read(self, size: int = -1) -> bytes:
        if not self._parts:
            return b""
        part = self._parts[0]
        n = len(part) - self._offset if size < 0 else min(size, len(part) - self._offset)
        data = part[self._offset : self._offset + n]
        self._offset += n
        if self._offset == len(part):
            self._parts.pop(0)
            self._offset = 0
        return data


def decode_container(parts: Iterable[bytes], fmt: str) -> tuple[bytes, int]:
    """Decode an Ogg/Opus, FLAC or AAC (ADTS) body (§11.7) with FFmpeg, fed the parts as they came.

    Returns:
        ``(pcm, rate)``: the decoded audio as PCM16LE mono and its rate in Hz (Opus decodes at 48 kHz).

    Raises:
        AssertionError: the body does not start as its format must, FFmpeg cannot open or decode it, its
            stream is not the format's codec, or it is not mono.
        ImportError: PyAV is not installed.
    """
    import av
    import numpy as np

    container = CONTAINERS[fmt]
    parts = [bytes(p) for p in parts]
    body = b"".join(parts)
    assert body.startswith(container.magic), (
        f"a {fmt} body must start with {container.magic!r}, not {body[:8]!r} (§11.7)"
    )
    chunks: list[np.ndarray] = []
    try:
        with av.open(PartsReader(parts), mode="r", format=container.demuxer) as media:
            assert media.streams.audio, f"FFmpeg finds no audio stream in the {fmt} body"
            stream = media.streams.audio[0]
            codec = stream.codec_context
            assert codec.name == container.decoder, (
                f"the {fmt} body holds {codec.name}, not {container.decoder}"
            )
            for frame in media.decode(stream):
                assert frame.layout.nb_channels == 1, f"{frame.layout.nb_channels} channels, not mono (§11.7)"
                chunks.append(frame.to_ndarray().reshape(-1))
            rate = codec.sample_rate
    except av.error.FFmpegError as exc:
        raise AssertionError(f"FFmpeg cannot decode the {fmt} body ({len(body)} bytes): {exc}") from None
    if not chunks:
        return b"", rate
    samples = np.concatenate(chunks).astype(np.float64)
    if not np.issubdtype(chunks[0].dtype, np.integer):
        samples = samples * 32768.0
    return np.clip(np.round(samples), -32768, 32767).astype("<i2").tobytes(), rate


def decode_pcm(parts: Iterable[bytes]) -> bytes:
    """Join raw PCM16LE parts into whole samples (§11.3); the body must end on a whole sample."""
    aligner = SampleAligner()
    pcm = b"".join(aligner.feed(part) for part in parts)
    assert not aligner.pending, (
        f"the PCM body ends inside a sample ({len(pcm) + aligner.pending} bytes, §11.3)"
    )
    return pcm


def decode_wav(parts: Iterable[bytes], *, sample_rate: int, streamed: bool) -> bytes:
    """Check a WAV body's 44-byte header (§11.2) and return its PCM (whole samples).

    ``streamed``: the header must announce an unknown length (sizes 0xFFFFFFFF); otherwise exact sizes.
    """
    body = b"".join(parts)
    assert len(body) >= 44, f"the WAV body has only {len(body)} bytes"
    try:
        header = parse_wav_header(body)
    except ValueError as exc:
        raise AssertionError(f"the body does not start with a WAV header (§11.2): {exc}") from None
    assert header.header_bytes == 44, (
        f"the header is {header.header_bytes} bytes, not the canonical 44 (§11.2)"
    )
    assert (header.sample_rate, header.channels, header.bits_per_sample, header.audio_format) == (
        sample_rate,
        1,
        16,
        1,
    ), (
        f"header says {header.sample_rate} Hz, {header.channels} channel(s), {header.bits_per_sample} bits, "
        f"format {header.audio_format}"
    )
    riff_size = int.from_bytes(body[4:8], "little")
    data = body[44:]
    if streamed:
        assert header.data_bytes is None and riff_size == _STREAMING_SIZE, (
            f"a streamed WAV header must carry 0xFFFFFFFF sizes, not RIFF {riff_size:#x}, data "
            f"{header.data_bytes}"
        )
    else:
        assert header.data_bytes == len(data) and riff_size == 36 + len(data), (
            f"header sizes RIFF {riff_size}, data {header.data_bytes}; the body holds {len(data)} data bytes"
        )
    assert len(data) % 2 == 0, f"{len(data)} data bytes: not whole samples"
    return data


@dataclass
class SSEBody:
    """A decoded SSE body (§11.4).

    Attributes:
        events: ``(event type, JSON object)`` in order.
        audio: the decoded bytes of every ``audio_chunk``, concatenated in ``seq`` order.
    """

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    audio: bytes = b""

    @property
    def types(self) -> list[str]:
        """The event types in order."""
        return [kind for kind, _ in self.events]

    def last(self) -> dict[str, Any]:
        """The final event's object."""
        return self.events[-1][1]


def decode_sse(parts: Iterable[bytes]) -> SSEBody:
    """Decode and judge an SSE body given as transport parts (§11.4).

    Checks: the body is exactly ``event: <type>\\ndata: <JSON>\\n\\n`` blocks; each event decodes with a
    WHATWG decoder fed the parts as they came; the data is a JSON object of the named type that validates
    against its schema; the order is synthesis_start, audio_chunk*, then synthesis_complete or error; ``seq``
    counts from 0 without gaps; each chunk's base64 decodes on its own to non-empty bytes; only the first
    chunk of a wav stream carries ``header_bytes``; synthesis_complete's ``audio_bytes`` and ``chunks``
    match.
    """
    parts = list(parts)
    body = b"".join(parts)
    blocks = list(_EVENT_BLOCK.finditer(body))
    covered = sum(len(m.group(0)) for m in blocks)
    assert covered == len(body) and all(a.end() == b.start() for a, b in itertools.pairwise(blocks)), (
        "the body is not exactly 'event: <type>\\ndata: <JSON>\\n\\n' blocks (§11.4)"
    )
    decoder = SSEDecoder()
    decoded = [event for part in parts for event in decoder.feed(part)]
    assert not decoder.incomplete, "the body ends inside an event"
    result = SSEBody()
    audio = bytearray()
    for index, event in enumerate(decoded):
        try:
            obj = json.loads(event.data)
        except (ValueError, RecursionError):
            raise AssertionError(f"event {index}: data is not JSON: {event.data[:80]!r}") from None
        assert isinstance(obj, dict) and obj.get("type") == event.event, (
            f"event {index}: 'event: {event.event}' carries {event.data[:80]!r}"
        )
        schema = {
            "synthesis_start": "sse_synthesis_start",
            "audio_chunk": "sse_audio_chunk",
            "synthesis_complete": "sse_synthesis_complete",
            "error": "sse_error",
        }.get(event.event)
        assert schema is not None, f"event {index}: unknown event type {event.event!r}"
        errors = sorted(schemas.validator(schema).iter_errors(obj), key=str)
        assert not errors, f"event {index} ({event.event}) breaks its schema: {errors[0].message}"
        if event.event == "audio_chunk":
            try:
                chunk = decode_base64_strict(obj["data"])
            except ValueError as exc:
                raise AssertionError(f"event {index}: audio_chunk data is not strict base64: {exc}") from None
            assert chunk, f"event {index}: an empty audio_chunk"
            audio += chunk
        result.events.append((event.event, obj))
    types = result.types
    assert types and types[0] == "synthesis_start", f"the first event is {types[:1]}, not synthesis_start"
    assert types[-1] in ("synthesis_complete", "error"), f"the body ends with {types[-1]!r}"
    assert all(t == "audio_chunk" for t in types[1:-1]), f"events out of order: {types}"
    seqs = [obj["seq"] for kind, obj in result.events if kind == "audio_chunk"]
    assert seqs == list(range(len(seqs))), f"audio_chunk seq values {seqs[:10]}... are not 0, 1, 2, ..."
    # header_bytes (protocol 1.1, optional): only the first chunk of a wav stream, which holds the header.
    marked = [obj["seq"] for kind, obj in result.events if kind == "audio_chunk" and "header_bytes" in obj]
    fmt = result.events[0][1].get("format")
    assert marked in ([], [0]) and (not marked or fmt == "wav"), (
        f"header_bytes on audio_chunk seq {marked} of a {fmt} stream: only the first chunk of a wav stream "
        "carries it (§11.4)"
    )
    result.audio = bytes(audio)
    final = result.last()
    if final["type"] == "synthesis_complete":
        assert final["audio_bytes"] == len(audio), (
            f"synthesis_complete says audio_bytes={final['audio_bytes']}, the chunks decode to {len(audio)}"
        )
        assert final["chunks"] == len(seqs), (
            f"synthesis_complete says chunks={final['chunks']}, {len(seqs)} came"
        )
    return result
