"""PCM16LE arithmetic: float conversion, resampling, sample alignment and WAV headers.

Audio on every route is raw PCM, signed 16-bit little-endian, mono (PROTOCOL.md §3.3, §11.2, §11.3).
Transports may split it anywhere, even inside a sample (REFERENCE.md §1, §2), so receivers put whole
samples back together with :class:`SampleAligner`. Resampling uses libsoxr (``soxr``) at its "HQ"
setting rather than our own filter.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import soxr
    from numpy.typing import ArrayLike

__all__ = [
    "PCM16_SCALE",
    "SampleAligner",
    "StreamResampler",
    "WavHeader",
    "duration_s",
    "float_to_pcm16",
    "parse_wav_header",
    "pcm16_to_float",
    "resample",
    "resample_pcm16",
    "wav_header",
]

#: Full scale of a 16-bit sample. Floats are multiplied by 2**15 and clipped to [-32768, 32767], and
#: PCM is divided by 2**15, so PCM -> float -> PCM gives back every sample exactly; +1.0 saturates at
#: 32767 (one step below full scale).
PCM16_SCALE = 32768.0

# "<i2" pins little-endian whatever the host's byte order (PROTOCOL.md §3.3: PCM16LE).
_PCM16 = np.dtype("<i2")
_RESAMPLE_QUALITY = "HQ"


def float_to_pcm16(samples: ArrayLike) -> bytes:
    """Float samples in [-1, 1] to PCM16LE bytes (PROTOCOL.md §3.3).

    ``samples``: any float array (Kokoro yields float32); values are scaled by :data:`PCM16_SCALE`,
    rounded to nearest (ties to even), clipped to the int16 range. NaN becomes 0 and infinities clip.
    A multi-dimensional array of shape (frames, channels) is written interleaved (C order).
    Returns ``2 * samples.size`` bytes.
    """
    x = np.asarray(samples, dtype=np.float64)
    x = np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0)
    scaled = np.clip(np.rint(x * PCM16_SCALE), -32768, 32767)
    return scaled.astype(_PCM16).tobytes()


def pcm16_to_float(data: bytes | bytearray | memoryview) -> np.ndarray:
    """PCM16LE bytes to a new float32 array in [-1, 1) (sample / 32768).

    Raises ValueError if ``data`` is not whole samples (odd length); align first with
    :class:`SampleAligner`.
    """
    if len(data) % 2:
        raise ValueError(f"PCM16 data must be whole 2-byte samples, got {len(data)} bytes")
    return np.frombuffer(data, dtype=_PCM16).astype(np.float32) / np.float32(PCM16_SCALE)


def _check_rate(name: str, rate: int) -> None:
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"{name} must be a positive integer (Hz), got {rate!r}")


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample one whole mono float signal from ``from_rate`` to ``to_rate`` Hz with libsoxr (HQ).

    Returns a new float32 array of about ``len(samples) * to_rate / from_rate`` samples (a copy even when
    the rates are equal). For audio that arrives in pieces use :class:`StreamResampler`: resampling
    pieces one by one adds clicks at their edges. Raises ValueError for non-positive rates.
    """
    _check_rate("from_rate", from_rate)
    _check_rate("to_rate", to_rate)
    x = np.ascontiguousarray(samples, dtype=np.float32)
    if from_rate == to_rate:
        return x.copy()
    import soxr

    return soxr.resample(x, from_rate, to_rate, quality=_RESAMPLE_QUALITY)


def resample_pcm16(data: bytes | bytearray | memoryview, from_rate: int, to_rate: int) -> bytes:
    """:func:`resample` for PCM16LE bytes (libsoxr resamples int16 directly).

    Raises ValueError on odd-length data or non-positive rates.
    """
    if len(data) % 2:
        raise ValueError(f"PCM16 data must be whole 2-byte samples, got {len(data)} bytes")
    _check_rate("from_rate", from_rate)
    _check_rate("to_rate", to_rate)
    if from_rate == to_rate:
        return bytes(data)
    import soxr

    x = np.frombuffer(data, dtype=_PCM16).astype(np.int16)  # native order for libsoxr
    return soxr.resample(x, from_rate, to_rate, quality=_RESAMPLE_QUALITY).astype(_PCM16).tobytes()


class StreamResampler:
    """Incremental mono float resampler for audio produced in pieces (e.g. one Kokoro segment at a time).

    ``feed(samples)`` returns the float32 output available so far; ``flush()`` returns the rest (the
    filter's delay) and ends the stream. Output equals :func:`resample` of the whole signal up to
    libsoxr's streaming behaviour. With equal rates it passes samples through.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        _check_rate("from_rate", from_rate)
        _check_rate("to_rate", to_rate)
        self.from_rate = from_rate
        self.to_rate = to_rate
        self._stream: soxr.ResampleStream | None = None
        if from_rate != to_rate:
            import soxr

            self._stream = soxr.ResampleStream(
                from_rate, to_rate, 1, dtype="float32", quality=_RESAMPLE_QUALITY
            )
        self._ended = False

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """Resample the next piece. Raises RuntimeError after :meth:`flush`."""
        if self._ended:
            raise RuntimeError("StreamResampler.feed() after flush()")
        x = np.ascontiguousarray(samples, dtype=np.float32)
        if self._stream is None:
            return x.copy()
        return self._stream.resample_chunk(x, last=False)

    def flush(self) -> np.ndarray:
        """End the stream and return the remaining output. Raises RuntimeError if already flushed."""
        if self._ended:
            raise RuntimeError("StreamResampler.flush() called twice")
        self._ended = True
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        return self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)


class SampleAligner:
    """Reassemble PCM split at arbitrary byte offsets into whole samples (PROTOCOL.md §3.4).

    ``feed(chunk)`` returns every whole sample completed so far and keeps any trailing partial sample;
    the returned pieces joined equal the input joined, minus at most ``sample_width - 1`` held bytes.
    ``sample_width`` is bytes per sample frame: 2 for mono PCM16, 2 x channels for interleaved audio.
    Work per call is proportional to the chunk.
    """

    def __init__(self, sample_width: int = 2) -> None:
        if isinstance(sample_width, bool) or not isinstance(sample_width, int) or sample_width < 1:
            raise ValueError(f"sample_width must be a positive integer, got {sample_width!r}")
        self.sample_width = sample_width
        self._held = b""

    @property
    def pending(self) -> int:
        """Bytes held back because they do not yet make a whole sample (0 to ``sample_width - 1``)."""
        return len(self._held)

    def feed(self, chunk: bytes | bytearray | memoryview) -> bytes:
        """Add ``chunk``; return the whole samples now available (possibly ``b""``)."""
        if self._held:
            data = self._held + bytes(chunk)
        else:
            data = bytes(chunk)
        cut = len(data) - len(data) % self.sample_width
        self._held = data[cut:]
        return data[:cut] if cut != len(data) else data

    def flush(self) -> bytes:
        """End of stream: return ``b""``, or raise ValueError if a partial sample is still held.

        A stream that ends inside a sample broke PROTOCOL.md §3.3 (audio is whole samples per request);
        the held bytes are dropped and the aligner is ready for a new stream.
        """
        held, self._held = self._held, b""
        if held:
            raise ValueError(
                f"audio ended inside a sample: {len(held)} byte(s) left over after the last whole "
                f"{self.sample_width}-byte sample (PROTOCOL.md §3.3 requires whole samples)"
            )
        return b""


@dataclass(frozen=True, slots=True)
class WavHeader:
    """Parsed RIFF/WAVE header: format fields, ``data_bytes`` (None when streamed with 0xFFFFFFFF),
    and ``header_bytes``, the offset where the sample data starts."""

    sample_rate: int
    channels: int
    bits_per_sample: int
    data_bytes: int | None
    header_bytes: int
    audio_format: int = 1


_STREAMING_SIZE = 0xFFFFFFFF
_WAVE_FORMAT_PCM = 1
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE


def wav_header(
    sample_rate: int, channels: int = 1, bits_per_sample: int = 16, data_bytes: int | None = None
) -> bytes:
    """The 44-byte canonical RIFF/WAVE header for integer PCM (PROTOCOL.md §11.2).

    ``data_bytes=None`` announces a stream of unknown length: the RIFF and data chunk sizes are both
    0xFFFFFFFF, the convention players accept for streamed WAV. Otherwise the sizes are exact
    (RIFF size = 36 + data_bytes), as Python's ``wave`` module writes them. Raises ValueError for a
    non-positive rate or channel count, a sample size not in {8, 16, 24, 32}, or a ``data_bytes`` that
    is negative, not whole sample frames, or too large for a 32-bit RIFF size.
    """
    _check_rate("sample_rate", sample_rate)
    if isinstance(channels, bool) or not isinstance(channels, int) or not 1 <= channels <= 0xFFFF:
        raise ValueError(f"channels must be an integer from 1 to 65535, got {channels!r}")
    if bits_per_sample not in (8, 16, 24, 32):
        raise ValueError(f"bits_per_sample must be 8, 16, 24 or 32, got {bits_per_sample!r}")
    block_align = channels * bits_per_sample // 8
    byte_rate = sample_rate * block_align
    if byte_rate > 0xFFFFFFFF:
        raise ValueError(f"byte rate {byte_rate} does not fit a WAV header")
    if data_bytes is None:
        riff_size = data_size = _STREAMING_SIZE
    else:
        if data_bytes < 0 or data_bytes % block_align:
            raise ValueError(f"data_bytes must be a non-negative multiple of {block_align}, got {data_bytes}")
        if 36 + data_bytes >= _STREAMING_SIZE:
            raise ValueError(f"data_bytes {data_bytes} is too large for a RIFF file")
        riff_size, data_size = 36 + data_bytes, data_bytes
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        riff_size,
        b"WAVE",
        b"fmt ",
        16,
        _WAVE_FORMAT_PCM,
        channels,
        sample_rate,
        byte_rate,
        block_align,
        bits_per_sample,
        b"data",
        data_size,
    )


def parse_wav_header(data: bytes | bytearray | memoryview) -> WavHeader:
    """Parse the header at the start of a WAV file or stream (for tests and clients).

    Walks the RIFF chunks up to the ``data`` chunk, skipping others (``LIST``, ``fact``, ...), so it
    reads headers longer than 44 bytes too. A data size of 0xFFFFFFFF (a stream, PROTOCOL.md §11.2)
    gives ``data_bytes=None``. Raises ValueError when ``data`` is not RIFF/WAVE, lacks a ``fmt `` chunk
    before ``data``, is cut before the data starts, or the format is not integer PCM.
    """
    buf = bytes(data)
    if len(buf) < 12:
        raise ValueError(f"WAV header truncated: {len(buf)} bytes, need at least 12")
    riff, _riff_size, wave = struct.unpack_from("<4sI4s", buf)
    if riff != b"RIFF" or wave != b"WAVE":
        raise ValueError("not a RIFF/WAVE header")
    offset = 12
    fmt: tuple[int, int, int, int] | None = None
    while True:
        if len(buf) < offset + 8:
            raise ValueError("WAV header truncated before the data chunk")
        chunk_id, size = struct.unpack_from("<4sI", buf, offset)
        body = offset + 8
        if chunk_id == b"data":
            if fmt is None:
                raise ValueError("WAV data chunk comes before the fmt chunk")
            audio_format, channels, sample_rate, bits = fmt
            return WavHeader(
                sample_rate=sample_rate,
                channels=channels,
                bits_per_sample=bits,
                data_bytes=None if size == _STREAMING_SIZE else size,
                header_bytes=body,
                audio_format=audio_format,
            )
        if chunk_id == b"fmt ":
            if size < 16 or len(buf) < body + 16:
                raise ValueError("WAV fmt chunk truncated")
            audio_format, channels, sample_rate, _byte_rate, _align, bits = struct.unpack_from(
                "<HHIIHH", buf, body
            )
            if audio_format not in (_WAVE_FORMAT_PCM, _WAVE_FORMAT_EXTENSIBLE):
                raise ValueError(f"WAV format {audio_format:#06x} is not integer PCM")
            fmt = (audio_format, channels, sample_rate, bits)
        # RIFF chunks are padded to even sizes.
        offset = body + size + (size & 1)


def duration_s(n_bytes: int, sample_rate: int, channels: int = 1) -> float:
    """Seconds of PCM16 audio in ``n_bytes`` bytes: ``n_bytes / (2 * channels * sample_rate)``.

    This is ``synthesis_complete.total_duration_s`` (PROTOCOL.md §5.3). Raises ValueError for a
    non-positive rate or channel count or negative ``n_bytes``.
    """
    _check_rate("sample_rate", sample_rate)
    if channels < 1:
        raise ValueError(f"channels must be positive, got {channels!r}")
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be non-negative, got {n_bytes!r}")
    return n_bytes / (2 * channels * sample_rate)
