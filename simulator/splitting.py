"""Output split policies: where the simulator cuts the container's bytes into PayloadParts.

SageMaker does not promise where PayloadPart boundaries fall. On the response stream the AWS sample
saw 4 MP3 frames arrive as 6 parts, two ending mid-frame (REFERENCE §2); on the bidirectional stream
it is not known whether large container messages are re-split (REFERENCE §1). A conforming client
therefore reassembles by CompletionState and cuts audio into whole samples itself (PROTOCOL.md §3.4,
§12). The simulator makes the worst cases reproducible with seeded, deterministic policies:

``none``
    one part per container message (bidi) or per chunk read from the container (response stream).
``fixed:N``
    parts of exactly N bytes (the last one of a message or stream may be shorter).
``random:LO-HI``
    part sizes drawn uniformly from LO..HI bytes.
``byte``
    every part holds a single byte.
``misaligned`` / ``misaligned:LO-HI``
    sizes drawn from LO..HI (default 1-1024), then nudged so that no cut ever falls on a sample
    boundary (an even offset: PCM16LE samples are 2 bytes, PROTOCOL.md §3.3) nor on a frame boundary
    (the end of a container WebSocket message, or of a chunk of the container's HTTP body). Only the
    unavoidable cuts survive at those places: the end of each bidi message and the end of the stream.

Two splitters share the policies: :class:`MessageSplitter` cuts one message at a time (bidi, where a
part never spans two messages because DataType and CompletionState are per message), and
:class:`StreamSplitter` cuts a byte stream (response stream, where parts may span the container's
chunks). Both are sans-I/O and draw from their own :class:`random.Random` seeded at creation, so a
session replays identically for the same seed and the same container output.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["MessageSplitter", "SplitKind", "SplitPolicy", "StreamSplitter"]


class SplitKind(StrEnum):
    """The split policy families; see the module docstring."""

    NONE = "none"
    FIXED = "fixed"
    RANDOM = "random"
    BYTE = "byte"
    MISALIGNED = "misaligned"


#: Default size range of ``misaligned`` parts: small enough to cut every 32 KiB audio frame many
#: times, large enough to keep a long session to a few thousand parts.
DEFAULT_MISALIGNED_RANGE = (1, 1024)

_RANGE = re.compile(r"^(\d+)-(\d+)$")


@dataclass(frozen=True)
class SplitPolicy:
    """A split policy: ``kind`` plus its size range in bytes.

    ``low``/``high`` are the inclusive part-size range (``fixed`` uses ``low == high``; ``none`` and
    ``byte`` ignore them). Build one with :meth:`parse` from the command-line spelling.

    Raises:
        ValueError: a size below 1 or ``low > high``.
    """

    kind: SplitKind = SplitKind.NONE
    low: int = 1
    high: int = 1

    def __post_init__(self) -> None:
        if self.low < 1 or self.high < self.low:
            raise ValueError(f"split sizes must satisfy 1 <= low <= high, got {self.low}-{self.high}")

    @classmethod
    def parse(cls, text: str) -> SplitPolicy:
        """Parse ``none``, ``fixed:N``, ``random:LO-HI``, ``byte``, ``misaligned[:LO-HI]``.

        Raises:
            ValueError: unknown policy name or malformed size.
        """
        name, _, arg = text.strip().partition(":")
        try:
            kind = SplitKind(name.lower())
        except ValueError:
            known = ", ".join(k.value for k in SplitKind)
            raise ValueError(f"unknown split policy {name!r} (known: {known})") from None
        if kind in (SplitKind.NONE, SplitKind.BYTE):
            if arg:
                raise ValueError(f"split policy {kind} takes no argument")
            return cls(kind)
        if kind is SplitKind.FIXED:
            if not arg.isdigit():
                raise ValueError("fixed split needs a size: fixed:N")
            return cls(kind, int(arg), int(arg))
        if not arg and kind is SplitKind.MISALIGNED:
            return cls(kind, *DEFAULT_MISALIGNED_RANGE)
        match = _RANGE.match(arg)
        if match is None:
            raise ValueError(f"{kind} split needs a range: {kind}:LO-HI")
        return cls(kind, int(match[1]), int(match[2]))

    def __str__(self) -> str:
        if self.kind in (SplitKind.NONE, SplitKind.BYTE):
            return self.kind.value
        if self.kind is SplitKind.FIXED:
            return f"fixed:{self.low}"
        return f"{self.kind}:{self.low}-{self.high}"


class _SizeSource:
    """Draws part sizes for a policy, clamped to an optional part-size limit."""

    def __init__(self, policy: SplitPolicy, seed: int | str | None, max_part_bytes: int | None) -> None:
        if max_part_bytes is not None and max_part_bytes < 1:
            raise ValueError("max_part_bytes must be at least 1")
        self.policy = policy
        self.limit = max_part_bytes
        self._rng = random.Random(seed)

    def draw(self) -> int | None:
        """Next part size in bytes, or None for "no cut" (policy ``none`` without a limit)."""
        kind = self.policy.kind
        if kind is SplitKind.NONE:
            size = None
        elif kind is SplitKind.BYTE:
            size = 1
        elif kind is SplitKind.FIXED:
            size = self.policy.low
        else:
            size = self._rng.randint(self.policy.low, self.policy.high)
        if self.limit is not None:
            size = self.limit if size is None else min(size, self.limit)
        return size

    def nudge(self, start: int, cut: int, forbidden: set[int] | frozenset[int] = frozenset()) -> int:
        """Move a ``misaligned`` cut off even offsets and ``forbidden`` ones (frame boundaries).

        Moves forward while the part stays within the limit, else backward while it stays
        non-empty; when neither works (a 1-byte limit) the limit wins and the cut stays.
        """
        if self.policy.kind is not SplitKind.MISALIGNED:
            return cut

        def bad(offset: int) -> bool:
            return offset % 2 == 0 or offset in forbidden

        forward = cut
        while bad(forward) and (self.limit is None or forward + 1 - start <= self.limit):
            forward += 1
        if not bad(forward):
            return forward
        backward = cut
        while bad(backward) and backward - 1 > start:
            backward -= 1
        return backward if not bad(backward) else cut


class MessageSplitter:
    """Cuts whole messages (one container WebSocket message each) into PayloadPart payloads.

    Offsets for ``misaligned`` are relative to the message start: audio frames are whole samples
    (PROTOCOL.md §3.3), so an odd offset inside a message is never a sample boundary.

    Args:
        policy: the split policy.
        seed: seeds this splitter's random draws (``random`` and ``misaligned``).
        max_part_bytes: optional hard ceiling on a part's size (the simulator's part-size limit);
            it wins over the policy.
    """

    def __init__(
        self, policy: SplitPolicy, seed: int | str | None = 0, *, max_part_bytes: int | None = None
    ) -> None:
        self._sizes = _SizeSource(policy, seed, max_part_bytes)

    def split(self, message: bytes) -> list[bytes]:
        """The parts of ``message``, in order; their concatenation is ``message``.

        An empty message gives one empty part, so a container's empty frame still reaches the
        client as one event.
        """
        if not message:
            return [b""]
        parts: list[bytes] = []
        start = 0
        while start < len(message):
            size = self._sizes.draw()
            if size is None:
                parts.append(message[start:])
                break
            cut = self._sizes.nudge(start, start + size)
            if cut >= len(message):
                cut = len(message)
            parts.append(message[start:cut])
            start = cut
        return parts


class StreamSplitter:
    """Re-cuts a byte stream (the container's HTTP body) into PayloadPart payloads.

    Feed the container's chunks as they arrive; each call returns the parts that are ready. A part
    may span several chunks. For ``misaligned`` a cut is only made strictly inside data already
    received, because the end of the data so far may turn out to be a chunk (frame) boundary.

    Args:
        policy, seed, max_part_bytes: as for :class:`MessageSplitter`.
    """

    def __init__(
        self, policy: SplitPolicy, seed: int | str | None = 0, *, max_part_bytes: int | None = None
    ) -> None:
        self._sizes = _SizeSource(policy, seed, max_part_bytes)
        self._buffer = bytearray()
        self._base = 0  # stream offset of self._buffer[0]
        self._boundaries: set[int] = set()  # chunk boundaries not yet passed (misaligned only)
        self._target: int | None = None  # the next cut, drawn once so replays stay identical

    @property
    def _end(self) -> int:
        return self._base + len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add one chunk of the container's body; return the parts now complete."""
        if not chunk:
            return []
        if self._sizes.policy.kind is SplitKind.NONE and self._sizes.limit is None:
            return [bytes(chunk)]
        if self._end > 0:
            self._boundaries.add(self._end)
        self._buffer += chunk
        return self._cut(final=False)

    def flush(self) -> list[bytes]:
        """The container's body ended: return the remaining parts (the last ends the stream)."""
        parts = self._cut(final=True)
        if self._buffer:
            parts.append(bytes(self._buffer))
            self._base = self._end
            self._buffer.clear()
        return parts

    def _cut(self, *, final: bool) -> list[bytes]:
        parts: list[bytes] = []
        while self._buffer:
            if self._target is None:
                size = self._sizes.draw()
                # Only "none" without a limit draws None, and feed() passes its chunks through.
                assert size is not None
                self._target = self._base + size
            target = self._sizes.nudge(self._base, self._target, self._boundaries)
            # A cut at the current end is only safe once the stream has ended (misaligned), or
            # always for the other policies.
            limit_ok = target < self._end or (target == self._end and (final or not self._misaligned))
            if not limit_ok:
                break
            take = target - self._base
            parts.append(bytes(self._buffer[:take]))
            del self._buffer[:take]
            self._base = target
            self._target = None
            self._boundaries = {b for b in self._boundaries if b > self._base}
        return parts

    @property
    def _misaligned(self) -> bool:
        return self._sizes.policy.kind is SplitKind.MISALIGNED
