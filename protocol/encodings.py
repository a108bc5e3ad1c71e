"""The audio frame encodings of the session: PCM16LE and G.711 μ-law and A-law (PROTOCOL.md §3.3.1, §4.1).

A request may name its ``encoding``; ``synthesis_start`` states it and every audio frame of the bracket
carries samples in it. PCM16LE (``pcm_s16le``, the default) has 2-byte samples; the two G.711 encodings
(ITU-T G.711, the telephone networks' 64 kbit/s codec at 8 kHz) have 1-byte samples, one logarithmic
code per sample, at any of the protocol's rates.

The G.711 codec is CPython's ``audioop`` (the classic Sun/CCITT implementation in C): part of the
standard library up to Python 3.12, and the ``audioop-lts`` distribution (the same code, maintained) from
3.13 on, which the package depends on there. Encoding takes 16-bit samples to the 14-bit (μ-law) or
13-bit (A-law) uniform PCM that G.711 is defined on by dropping the low bits; decoding gives each code's
G.711 output value scaled back to 16 bits (μ-law ±32124, A-law ±32256 at most). Tests hold the codec
to the output values of G.711's tables and to FFmpeg's decoders.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "PCM_ALAW",
    "PCM_MULAW",
    "PCM_S16LE",
    "Encoding",
    "decode_to_pcm16",
    "encode_pcm16",
    "encoding",
    "sample_width",
]

PCM_S16LE = "pcm_s16le"
"""Signed 16-bit little-endian PCM (§3.3.1), the default and the only encoding of version 1."""
PCM_MULAW = "pcm_mulaw"
"""ITU-T G.711 μ-law: one byte per sample (North American and Japanese telephone networks)."""
PCM_ALAW = "pcm_alaw"
"""ITU-T G.711 A-law: one byte per sample (European and most other telephone networks)."""
DEFAULT_ENCODING = PCM_S16LE


@dataclass(frozen=True, slots=True)
class Encoding:
    """One audio frame encoding (PROTOCOL.md §3.3.1).

    Attributes:
        name: the wire name (``encoding`` of a request and of ``synthesis_start``).
        sample_width: bytes per sample; an audio frame is a whole number of samples.
        silence: one sample of digital silence in this encoding (``00 00``; μ-law ``FF``; A-law ``D5``).
        media_type: the RTP/MIME name (RFC 3551, RFC 4856) of a headerless stream of it, without ``rate``.
    """

    name: str
    sample_width: int
    silence: bytes
    media_type: str

    def duration_s(self, n_bytes: int, sample_rate: int) -> float:
        """Seconds in ``n_bytes`` of this encoding at ``sample_rate`` Hz (``total_duration_s``, §5.3)."""
        return n_bytes / self.sample_width / sample_rate


ENCODINGS: MappingProxyType[str, Encoding] = MappingProxyType(
    {
        PCM_S16LE: Encoding(PCM_S16LE, 2, b"\x00\x00", "audio/pcm"),
        PCM_MULAW: Encoding(PCM_MULAW, 1, b"\xff", "audio/PCMU"),
        PCM_ALAW: Encoding(PCM_ALAW, 1, b"\xd5", "audio/PCMA"),
    }
)
"""Every encoding this version defines, by wire name, in the order ``capabilities`` lists them."""


def encoding(name: str) -> Encoding:
    """The :class:`Encoding` named ``name``.

    Raises:
        KeyError: no encoding of this version has that name.
    """
    try:
        return ENCODINGS[name]
    except KeyError:
        raise KeyError(f"unknown encoding {name!r}; known: {', '.join(ENCODINGS)}") from None


def sample_width(name: str) -> int:
    """Bytes per sample of the encoding ``name`` (2 for ``pcm_s16le``, 1 for G.711). Raises KeyError."""
    return encoding(name).sample_width


def _audioop():
    with warnings.catch_warnings():
        # Python 3.12 marks the module deprecated (removed in 3.13, where audioop-lts provides it).
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop
    return audioop


def encode_pcm16(pcm: bytes | bytearray | memoryview, name: str) -> bytes:
    """PCM16LE samples in the encoding ``name``: ``pcm`` itself for ``pcm_s16le``, else one G.711 byte
    per sample (``len(pcm) // 2`` bytes).

    Raises:
        KeyError: unknown encoding.
        ValueError: ``pcm`` is not whole 2-byte samples.
    """
    kind = encoding(name)
    if len(pcm) % 2:
        raise ValueError(f"PCM16 audio must be whole 2-byte samples, got {len(pcm)} bytes")
    if kind.name == PCM_S16LE:
        return bytes(pcm)
    audioop = _audioop()
    # audioop reads native-order samples; the wire order is little-endian (§3.3.1).
    data = bytes(pcm) if _LITTLE_ENDIAN else audioop.byteswap(bytes(pcm), 2)
    return audioop.lin2ulaw(data, 2) if kind.name == PCM_MULAW else audioop.lin2alaw(data, 2)


def decode_to_pcm16(data: bytes | bytearray | memoryview, name: str) -> bytes:
    """Audio in the encoding ``name`` as PCM16LE: each G.711 code's output value (2 bytes per sample).

    Raises:
        KeyError: unknown encoding.
        ValueError: ``data`` is not whole samples of the encoding.
    """
    kind = encoding(name)
    if len(data) % kind.sample_width:
        raise ValueError(
            f"{name} audio must be whole {kind.sample_width}-byte samples, got {len(data)} bytes"
        )
    if kind.name == PCM_S16LE:
        return bytes(data)
    audioop = _audioop()
    pcm = audioop.ulaw2lin(bytes(data), 2) if kind.name == PCM_MULAW else audioop.alaw2lin(bytes(data), 2)
    return pcm if _LITTLE_ENDIAN else audioop.byteswap(pcm, 2)


_LITTLE_ENDIAN = memoryview(b"\x01\x00").cast("H")[0] == 1
