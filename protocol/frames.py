"""Telling control frames from audio frames, and cutting audio so the two never meet.

PROTOCOL.md §3.4 (the client classification rule): a client reassembles one server message and takes it
as a *control* message when its whole bytes decode as UTF-8 and parse as a JSON object; anything else is
*audio*. PROTOCOL.md §3.3 (audio frames) makes that rule safe: a server never sends an audio frame that a
client could take for a JSON object. PCM can spell JSON: the single 16-bit little-endian sample 32123 is
the bytes ``{}``, and ``{"a":1} `` is four valid samples (REFERENCE.md §3). :func:`cut_audio` chooses frame
boundaries that avoid every such frame, and pads with one zero sample only when no boundaries can.

Nothing here does I/O; the functions work on ``bytes``.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from protocol.limits import AUDIO_FRAME_HARD_LIMIT, Limits

__all__ = [
    "AUDIO_FRAME_HARD_LIMIT",
    "DEFAULT_MAX_AUDIO_FRAME_BYTES",
    "PAD_SAMPLE",
    "SAMPLE_WIDTHS",
    "Audio",
    "AudioCut",
    "Control",
    "classify",
    "cut_audio",
    "cut_audio_frames",
    "is_json_object",
    "looks_like_control",
]

#: PROTOCOL.md §10 ``max_audio_frame_bytes`` default (its home and reason: :class:`protocol.limits.Limits`).
DEFAULT_MAX_AUDIO_FRAME_BYTES = Limits().max_audio_frame_bytes

#: The one sample a server may add (PROTOCOL.md §3.3 padding rule): digital silence, 1/sample_rate long.
PAD_SAMPLE = b"\x00\x00"

#: Bytes per sample of the audio frame encodings (PROTOCOL.md §3.3.1): 2 for PCM16LE, 1 for G.711.
SAMPLE_WIDTHS = (1, 2)

_OPEN = 0x7B  # "{"
_CLOSE = 0x7D  # "}"
# JSON's four whitespace characters (RFC 8259 §2), the only ones json.loads skips around a value.
_WS = frozenset(b" \t\n\r")
_WS_RUN = re.compile(rb"[ \t\n\r]*")
# First bytes with which a chunk can hold a JSON object under some decoding a client might apply:
# "{" or whitespace (UTF-8, and the low byte of UTF-16/32-LE), 0x00 (UTF-16/32-BE), and the first
# bytes of the UTF-8, UTF-16 and UTF-32 byte order marks. Any other first byte means "audio" at once.
_MAYBE_START = frozenset(b"{ \t\n\r\x00\xef\xfe\xff")


@dataclass(frozen=True, slots=True)
class Control:
    """A message classified as control (PROTOCOL.md §3.4): ``obj`` is the parsed JSON object."""

    obj: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Audio:
    """A message classified as audio (PROTOCOL.md §3.4): ``data``, raw audio in the bracket's encoding
    (PCM16LE unless ``synthesis_start`` says otherwise, §3.3.1), maybe split mid-sample."""

    data: bytes


def _parse_object_strict(chunk: bytes | bytearray | memoryview) -> dict[str, Any] | None:
    """The §3.4 rule itself: strict UTF-8, then ``json.loads``; the object, or None."""
    n = len(chunk)
    # A JSON object in UTF-8 (no BOM: json.loads rejects one in a str) starts with "{" and ends with
    # "}" apart from whitespace. Checking both ends first keeps audio away from the decoder.
    i = _WS_RUN.match(chunk, 0, n).end()
    if i == n or chunk[i] != _OPEN:
        return None
    j = n
    while chunk[j - 1] in _WS:
        j -= 1
    if chunk[j - 1] != _CLOSE:
        return None
    try:
        text = bytes(chunk).decode("utf-8")
        obj = json.loads(text)
    except (ValueError, RecursionError):
        # UnicodeDecodeError and JSONDecodeError are ValueErrors. Nesting deeper than the parser's
        # recursion limit cannot be parsed, so it is not a control message.
        return None
    return obj if isinstance(obj, dict) else None


def is_json_object(chunk: bytes | bytearray | memoryview) -> bool:
    """Whether ``chunk`` is a control message under the client classification rule (PROTOCOL.md §3.4).

    True when the whole chunk decodes as strict UTF-8 and Python's ``json.loads`` returns a ``dict``.
    ``json.loads`` is what a typical client calls, so its leniencies count: ``NaN``/``Infinity``,
    duplicate keys, surrounding JSON whitespace. Nesting too deep for the parser counts as not an object.
    Never raises.
    """
    return _parse_object_strict(chunk) is not None


def classify(chunk: bytes | bytearray | memoryview) -> Control | Audio:
    """Classify one whole server message (PROTOCOL.md §3.4): :class:`Control` or :class:`Audio`.

    ``chunk`` is a complete message: one WebSocket message, or the PayloadParts of one message up to
    ``CompletionState=COMPLETE`` (PROTOCOL.md §12). Audio data is returned as is; joining it into whole
    samples is the caller's job (``protocol.pcm.SampleAligner``), since transports may split anywhere.
    """
    obj = _parse_object_strict(chunk)
    if obj is not None:
        return Control(obj)
    return Audio(bytes(chunk))


def _detect(data: bytes, start: int, end: int) -> tuple[int, str, int]:
    """The encoding ``json.loads`` would pick for ``data[start:end]`` given as bytes.

    Mirrors ``json.detect_encoding`` (RFC 8259 §8.1 / RFC 4627 §3) without copying the chunk. Returns
    (code unit size, byte order, offset where the text starts after any byte order mark).
    """
    head = data[start : min(start + 4, end)]  # never look past the chunk
    if head.startswith(codecs.BOM_UTF32_BE):
        return 4, "big", start + 4
    if head.startswith(codecs.BOM_UTF32_LE):
        return 4, "little", start + 4
    if head.startswith(codecs.BOM_UTF16_BE):
        return 2, "big", start + 2
    if head.startswith(codecs.BOM_UTF16_LE):
        return 2, "little", start + 2
    if head.startswith(codecs.BOM_UTF8):
        return 1, "big", start + 3
    length = end - start
    if length >= 4:
        if not head[0]:
            return (2, "big", start) if head[1] else (4, "big", start)
        if not head[1]:
            return (2, "little", start) if head[2] or head[3] else (4, "little", start)
    elif length == 2:
        if not head[0]:
            return 2, "big", start
        if not head[1]:
            return 2, "little", start
    return 1, "big", start


def _unsafe_from(data: bytes, start: int, end: int) -> int:
    """0 if ``data[start:end]`` is safe to send as audio; else a bound ``j`` (``start < j <= end``).

    Unsafe means a client could take the chunk for a JSON object (see :func:`looks_like_control`). When
    unsafe, every chunk ``data[start:e]`` with ``j <= e <= end`` is unsafe too: for UTF-8 text ``j`` is
    the end of the closing "}" (dropping trailing whitespace leaves the same object); otherwise ``end``.
    """
    if data[start] not in _MAYBE_START:
        return 0
    unit, order, text_start = _detect(data, start, end)
    if (end - text_start) % unit:
        return 0  # the client's decoder reports truncated data: not JSON
    if unit == 1:
        i = _WS_RUN.match(data, text_start, end).end()
        if i == end or data[i] != _OPEN:
            return 0
        j = end
        while data[j - 1] in _WS:
            j -= 1
        if data[j - 1] != _CLOSE:
            return 0
        # Replacement decoding covers the strict §3.4 rule (same text when the bytes are valid) and
        # lenient decoders such as WHATWG TextDecoder; json.loads on bytes agrees when there is no BOM.
        text = data[text_start:end].decode("utf-8", "replace")
        loads_arg: str | bytes = text
    else:
        i = text_start
        while i < end and int.from_bytes(data[i : i + unit], order) in _WS:
            i += unit
        if i == end or int.from_bytes(data[i : i + unit], order) != _OPEN:
            return 0
        j = end
        while int.from_bytes(data[j - unit : j], order) in _WS:
            j -= unit
        if int.from_bytes(data[j - unit : j], order) != _CLOSE:
            return 0
        j = end  # shortening by whole samples can misalign the code units; claim nothing
        loads_arg = data[start:end]  # exactly what a client's json.loads(bytes) sees
    try:
        obj = json.loads(loads_arg)
    except ValueError:
        return 0
    except RecursionError:
        # A client's parser would fail on this nesting; never send it as audio either.
        return j
    return j if isinstance(obj, dict) else 0


def looks_like_control(chunk: bytes | bytearray | memoryview) -> bool:
    """Whether some client could take ``chunk`` for a JSON object, so it must never be an audio frame.

    A superset of :func:`is_json_object` (PROTOCOL.md §3.3): True when any of these parses the whole
    chunk to a JSON object, or fails on nesting deeper than its recursion limit:

    - the §3.4 rule (strict UTF-8, then ``json.loads``);
    - ``json.loads(chunk)`` on the bytes, which detects UTF-8 with BOM, UTF-16 and UTF-32 (RFC 8259
      §8.1), so the samples ``0x007B 0x007D`` (``{\\x00}\\x00``) read as ``{}``;
    - UTF-8 decoding with replacement characters and BOM stripping (WHATWG TextDecoder), then JSON.

    The common case, a first byte that no encoding lets start a JSON text, returns without parsing.
    """
    data = bytes(chunk)
    return bool(data) and _unsafe_from(data, 0, len(data)) != 0


def _largest_safe_end(data: bytes, start: int, end: int, dead: set[int], width: int) -> int | None:
    """The largest ``b`` in ``(start, end]``, whole ``width``-byte samples from ``start``, not in ``dead``,
    with ``data[start:b]`` safe; or None. ``end - start`` is a multiple of ``width``."""
    b = end
    while b > start:
        if b in dead:
            b -= width
            continue
        unsafe = _unsafe_from(data, start, b)
        if not unsafe:
            return b
        # Every end in [unsafe, b] is unsafe too; the next candidate is the largest sample end below it.
        b = min(b - width, start + (unsafe - 1 - start) // width * width)
    return None


def _exact_cut(data: bytes, max_frame_bytes: int, width: int) -> list[int] | None:
    """Frame end offsets of a cut of ``data`` into safe frames of whole ``width``-byte samples, or None
    when no such cut exists.

    Depth-first search that tries the longest frame first, so ordinary audio is cut greedily into
    ``max_frame_bytes`` frames with one cheap check each. A start offset from which the rest cannot be
    cut is remembered, so no offset is explored twice; only runs of JSON-looking samples near the end
    make the search back up at all.
    """
    n = len(data)
    dead: set[int] = set()
    ends: list[int] = []
    start = 0
    limit = min(n, max_frame_bytes)
    while start < n:
        b = _largest_safe_end(data, start, limit, dead, width)
        if b is None:
            dead.add(start)
            if not ends:
                return None
            previous_end = ends.pop()
            start = ends[-1] if ends else 0
            limit = previous_end - width
            continue
        ends.append(b)
        start = b
        limit = min(n, start + max_frame_bytes)
    return ends


@dataclass(frozen=True, slots=True)
class AudioCut:
    """The audio frames for some PCM (PROTOCOL.md §3.3), as chosen by :func:`cut_audio`.

    ``frames``: BINARY frames to send in order. ``padded_frames``: indices of the frames that end with
    an added :data:`PAD_SAMPLE` (empty in all but pathological cases). Removing those two bytes from
    those frames and joining gives back the input.
    """

    frames: tuple[bytes, ...]
    padded_frames: tuple[int, ...] = ()

    @property
    def padding_bytes(self) -> int:
        """Bytes added by padding: ``sum(map(len, frames)) - len(pcm)``."""
        return len(PAD_SAMPLE) * len(self.padded_frames)


def _check_cut_arguments(pcm: bytes, max_frame_bytes: int, sample_width: int) -> None:
    if isinstance(max_frame_bytes, bool) or not isinstance(max_frame_bytes, int):
        raise TypeError(f"max_frame_bytes must be an int, not {type(max_frame_bytes).__name__}")
    if max_frame_bytes < 4 or max_frame_bytes % 2 or max_frame_bytes > AUDIO_FRAME_HARD_LIMIT:
        raise ValueError(
            f"max_frame_bytes must be even and between 4 and {AUDIO_FRAME_HARD_LIMIT}, got {max_frame_bytes}"
        )
    if sample_width not in SAMPLE_WIDTHS or isinstance(sample_width, bool):
        raise ValueError(f"sample_width must be one of {SAMPLE_WIDTHS} bytes, got {sample_width!r}")
    if len(pcm) % sample_width:
        raise ValueError(
            f"audio must be whole {sample_width}-byte samples, got {len(pcm)} bytes "
            f"({'PCM16' if sample_width == 2 else 'G.711'})"
        )


def cut_audio(
    pcm: bytes | bytearray | memoryview,
    max_frame_bytes: int = DEFAULT_MAX_AUDIO_FRAME_BYTES,
    *,
    sample_width: int = 2,
) -> AudioCut:
    """Cut audio into frames that are safe to send (PROTOCOL.md §3.3).

    ``pcm`` is audio in the request's encoding (§3.3.1): PCM16LE (``sample_width=2``, the default) or
    G.711 μ-law/A-law (``sample_width=1``, :mod:`protocol.encodings`). Every frame is whole samples, at
    least one, at most ``max_frame_bytes`` bytes, and is never :func:`looks_like_control` (hence never
    :func:`is_json_object`). Frames are as long as possible: ordinary audio becomes ``max_frame_bytes``
    frames and a shorter last one. Where a frame would be a JSON object, its end moves by whole samples
    (shorter, or longer within the limit).

    Padding rule (PROTOCOL.md §3.3.4), PCM16 only, used only when no cut of ``pcm`` itself exists, e.g.
    ``pcm`` is the single sample ``b"{}"``: one zero sample is appended to the last frame, i.e. the
    frames are a cut of ``pcm + PAD_SAMPLE``. Where even that has no cut (a ``b"{}"`` sample followed by
    more JSON whitespace than one frame holds, or a 4-byte limit with whitespace around ``b"{}"``), a
    zero sample is appended to each ``b"{}"`` sample that cannot start a safe frame.
    ``AudioCut.padded_frames`` tells which frames carry one; a zero sample is 1/sample_rate of silence.
    One-byte samples never need padding: a single byte is never a JSON object (the shortest is ``{}``),
    so a cut always exists, at worst into one-byte frames.

    Raises ValueError when ``pcm`` is not whole samples, ``sample_width`` is not 1 or 2, or
    ``max_frame_bytes`` is odd, below 4 or above :data:`AUDIO_FRAME_HARD_LIMIT`. Empty ``pcm`` gives no
    frames.
    """
    _check_cut_arguments(pcm, max_frame_bytes, sample_width)
    data = bytes(pcm)
    if not data:
        return AudioCut(())
    ends = _exact_cut(data, max_frame_bytes, sample_width)
    if ends is not None:
        return AudioCut(tuple(data[a:b] for a, b in pairwise([0, *ends])))
    # Unreachable for 1-byte samples (see the docstring); the padding below is PCM16's (§3.3.4).
    assert sample_width == 2, "a 1-byte-sample stream always has a cut"
    padded = data + PAD_SAMPLE
    ends = _exact_cut(padded, max_frame_bytes, sample_width)
    if ends is not None:
        # The last frame holds the pad and at least one input sample: a lone pad frame would mean the
        # input had a cut of its own.
        frames = tuple(padded[a:b] for a, b in pairwise([0, *ends]))
        return AudioCut(frames, (len(frames) - 1,))
    return _cut_with_inserted_padding(data, max_frame_bytes)


def _cut_with_inserted_padding(data: bytes, max_frame_bytes: int) -> AudioCut:
    """Greedy cut that pads each ``{}`` sample that cannot start a safe frame (last resort, PCM16)."""
    frames: list[bytes] = []
    padded: list[int] = []
    n = len(data)
    start = 0
    no_dead: set[int] = set()
    while start < n:
        b = _largest_safe_end(data, start, min(n, start + max_frame_bytes), no_dead, 2)
        if b is None:
            # Only the sample b"{}" is unsafe on its own; b"{}\0\0" is never a JSON object in any of the
            # decodings looks_like_control considers (it ends with a NUL character).
            frames.append(data[start : start + 2] + PAD_SAMPLE)
            padded.append(len(frames) - 1)
            start += 2
        else:
            frames.append(data[start:b])
            start = b
    return AudioCut(tuple(frames), tuple(padded))


def cut_audio_frames(
    pcm: bytes | bytearray | memoryview,
    max_frame_bytes: int = DEFAULT_MAX_AUDIO_FRAME_BYTES,
    *,
    sample_width: int = 2,
) -> list[bytes]:
    """The frames of :func:`cut_audio` as a list (PROTOCOL.md §3.3).

    ``b"".join(frames) == pcm`` unless the padding rule applied (PCM16 only); then the total is longer
    than ``pcm`` by two bytes per added zero sample (usually exactly one, at the end). Callers that count
    audio bytes (``synthesis_complete.audio_bytes``) must count the frames they send, not the input.
    """
    return list(cut_audio(pcm, max_frame_bytes, sample_width=sample_width).frames)
