"""Encoders for the ``POST /invocations`` formats (PROTOCOL.md §11.2–§11.5, §11.7): PCM16LE in, bytes out.

Every encoder is fed the request's PCM16LE audio segment by segment and returns the bytes of the body
that are ready, so the response streams: the first bytes leave with the first segment, not at the end.

* ``wav`` and ``pcm``: the PCM passes through (the WAV header is :func:`protocol.pcm.wav_header`'s);
  ``pcm`` in a G.711 encoding is companded (:mod:`protocol.encodings`).
* ``mp3``: LAME through ``lameenc`` at :data:`MP3_BIT_RATE_KBPS`.
* ``opus``, ``flac``, ``aac``: FFmpeg's encoders and muxers through PyAV: Opus (libopus) in Ogg, FLAC in
  its native stream, AAC (FFmpeg's native encoder) in ADTS. The muxer writes to a sink that cannot seek
  and flushes after every packet, so each call returns whole Ogg pages, FLAC frames or ADTS frames, and
  nothing already sent is ever rewritten: a streamed FLAC's STREAMINFO says "length unknown", as a FLAC
  stream's may. With ``stream: false`` the whole file is written to a seekable buffer instead, so FLAC's
  header carries the exact length and MD5.

PyAV is imported only when one of its formats is asked for; :data:`AV_FORMATS` lists those this install
can encode.
"""

from __future__ import annotations

import io
from typing import Any

from protocol.encodings import DEFAULT_ENCODING, encode_pcm16

__all__ = [
    "AAC_BIT_RATE",
    "AV_FORMATS",
    "MEDIA_TYPES",
    "MP3_AVAILABLE",
    "MP3_BIT_RATE_KBPS",
    "OPUS_BIT_RATE",
    "OPUS_PAGE_DURATION_US",
    "FormatEncoder",
    "available_formats",
]

try:  # MP3 (§11.5) is offered only where the encoder library is installed.
    import lameenc
except ImportError:  # pragma: no cover - lameenc is a dependency of the server extra
    lameenc = None

MP3_AVAILABLE = lameenc is not None
MP3_BIT_RATE_KBPS = 48
"""The AWS sample's MP3 rate (REFERENCE.md §3): speech stays clear and base64 over SSE stays small."""

OPUS_BIT_RATE = 24_000
"""Opus at 24 kbit/s: wideband speech is transparent well below this (Opus is built for 6-32 kbit/s
voice), and it is half the AWS sample's MP3 rate."""
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
"""The input rates libopus takes; 22,050 Hz audio is resampled to 24,000 Hz by PyAV first."""
OPUS_PAGE_DURATION_US = 100_000
"""Longest Ogg page, in microseconds: a page leaves at least every 0.1 s of audio (FFmpeg's default, one
second, would hold the first audio back that long); about 30 bytes of page header each."""
AAC_BIT_RATE = 32_000
"""AAC-LC at 32 kbit/s, the rate of the AWS sample's AAC measurements (REFERENCE.md §3)."""

_AV = {
    # format: (muxer, encoder, format-context options). FLAC's header padding is the generic
    # ``metadata_header_padding``: without it the muxer writes an 8 KiB PADDING block before any audio.
    "opus": ("ogg", "libopus", {"page_duration": str(OPUS_PAGE_DURATION_US)}),
    "flac": ("flac", "flac", {"metadata_header_padding": "0"}),
    "aac": ("adts", "aac", {}),
}

MEDIA_TYPES = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg;codecs=opus",
    "flac": "audio/flac",
    "aac": "audio/aac",
}
"""``Content-Type`` of each compressed or containered format (``pcm``'s depends on the rate, §11.3)."""


def _av_formats() -> tuple[str, ...]:
    try:
        import av
    except ImportError:
        return ()
    found = []
    for fmt, (muxer, codec, _) in _AV.items():
        try:
            av.codec.Codec(codec, "w")
        except Exception:
            continue
        if muxer in av.formats_available:
            found.append(fmt)
    return tuple(found)


AV_FORMATS: tuple[str, ...] = _av_formats()
"""The PyAV formats (``opus``, ``flac``, ``aac``) this install can encode."""


def available_formats() -> tuple[str, ...]:
    """The ``format`` values this install offers, in the order ``capabilities.formats`` lists them."""
    return ("wav", "pcm", *(("mp3",) if MP3_AVAILABLE else ()), *AV_FORMATS)


class FormatEncoder:
    """One response's encoder: :meth:`encode` each piece of PCM16LE, then :meth:`flush` once.

    Args:
        fmt: the request's ``format``.
        sample_rate: the PCM's rate in Hz (the request's ``sample_rate``).
        encoding: the request's ``encoding``; only ``pcm`` takes one other than ``pcm_s16le`` (§11.3).
        stream: the body streams; ``False`` lets containers that can (FLAC) write exact sizes at the end.

    Raises:
        ValueError: a format this install cannot encode.
    """

    def __init__(
        self, fmt: str, sample_rate: int, *, encoding: str = DEFAULT_ENCODING, stream: bool = True
    ) -> None:
        self.format = fmt
        self.sample_rate = sample_rate
        self.encoding = encoding
        self._mp3: Any = None
        self._av: _AvEncoder | None = None
        if fmt == "mp3":
            if lameenc is None:
                raise ValueError("mp3 needs lameenc")
            self._mp3 = lameenc.Encoder()
            self._mp3.set_bit_rate(MP3_BIT_RATE_KBPS)
            self._mp3.set_in_sample_rate(sample_rate)
            self._mp3.set_out_sample_rate(sample_rate)
            self._mp3.set_channels(1)
            self._mp3.set_quality(2)
        elif fmt in _AV:
            if fmt not in AV_FORMATS:
                raise ValueError(f"{fmt} needs PyAV with its encoder")
            self._av = _AvEncoder(fmt, sample_rate, seekable=not stream)
        elif fmt not in ("wav", "pcm"):
            raise ValueError(f"unknown format {fmt!r}")

    def encode(self, pcm: bytes) -> bytes:
        """Body bytes ready after ``pcm`` (possibly empty while an encoder fills a frame)."""
        if self._mp3 is not None:
            return bytes(self._mp3.encode(pcm))
        if self._av is not None:
            return self._av.encode(pcm)
        return encode_pcm16(pcm, self.encoding)

    def flush(self) -> bytes:
        """The last bytes: the encoder's delayed frames and the container's trailer."""
        if self._mp3 is not None:
            return bytes(self._mp3.flush())
        if self._av is not None:
            return self._av.flush()
        return b""


class _Sink:
    """Where the muxer writes while streaming: it can only append, so nothing sent is ever rewritten."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        return len(data)

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


class _AvEncoder:
    """PCM16LE mono → ``fmt`` through PyAV (module docstring)."""

    def __init__(self, fmt: str, sample_rate: int, *, seekable: bool) -> None:
        import av

        muxer, codec, options = _AV[fmt]
        self._av = av
        self._sample_rate = sample_rate
        self._seekable = seekable
        self._sink: io.BytesIO | _Sink = io.BytesIO() if seekable else _Sink()
        self._container = av.open(
            self._sink, mode="w", format=muxer, options={"flush_packets": "1", **options}
        )
        rate = sample_rate
        if fmt == "opus" and rate not in OPUS_RATES:
            rate = min(r for r in OPUS_RATES if r >= rate)
        stream = self._container.add_stream(codec, rate=rate)
        stream.layout = "mono"
        if fmt == "opus":
            stream.bit_rate = OPUS_BIT_RATE
        elif fmt == "aac":
            stream.bit_rate = AAC_BIT_RATE
        self._stream = stream
        self._pts = 0
        self._closed = False

    def _take(self) -> bytes:
        if isinstance(self._sink, _Sink):
            return self._sink.take()
        return b""  # written whole at the end

    def encode(self, pcm: bytes) -> bytes:
        import numpy as np

        samples = np.frombuffer(pcm, dtype="<i2")
        if len(samples):
            frame = self._av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = self._sample_rate
            frame.pts = self._pts
            self._pts += len(samples)
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._take()

    def flush(self) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        if isinstance(self._sink, io.BytesIO):
            return self._sink.getvalue()
        return self._take()
