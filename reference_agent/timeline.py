"""What a listener of one agent invocation experiences: when each piece of text was written, sent, heard.

:func:`timeline` reads the SSE events of one invocation (:mod:`reference_agent.events`) and returns one
:class:`SpokenSegment` per TTS request the agent made (``audio_stream_end.segments``): a sentence in
``bidi`` mode, the whole reply in ``batch`` mode, an utterance's text in ``stream`` mode. For each:

* ``written_ms``: when the model had written its last word (the ``text_delta`` that completed it);
* ``sent_ms``: when the agent handed it to the TTS: in ``bidi`` mode when the sentence chunker released
  it (the first character after it, or the end of the reply), in ``batch`` mode at the end of the reply,
  in ``stream`` mode as it was written;
* ``first_audio_ms``: when its first audio reached the caller (its first ``audio_chunk``);
* ``plays_from_ms`` / ``plays_to_ms``: when a real-time player that starts at the first audio and never
  drops audio plays it (silence while it waits for late audio).

All times are the agent's own ``t_ms`` (milliseconds since ``agent_start``). :func:`plot_timelines`
draws text written against audio heard for several invocations (matplotlib, optional). No I/O besides
the PNG file.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speech.chunker import IncrementalSentenceChunker

__all__ = ["SpokenSegment", "played", "plot_timelines", "timeline", "written_curve"]

BYTES_PER_SECOND = 48_000
"""24 kHz PCM16 mono, the agent's audio format."""


@dataclass(frozen=True, slots=True)
class SpokenSegment:
    """One TTS request of an invocation, as the listener lived it (milliseconds since ``agent_start``).

    Attributes:
        text: what was sent to the TTS.
        written_ms, sent_ms, first_audio_ms, plays_from_ms, plays_to_ms: see the module docstring;
            ``None`` when the stream does not tell (no audio for it, say).
        audio_s: seconds of audio it became.
        silence_ms: silence the listener heard while waiting for it: from the end of the segment before
            (from the first audio, for the first) to its last sample, less its own audio.
    """

    text: str
    written_ms: float | None
    sent_ms: float | None
    first_audio_ms: float | None
    plays_from_ms: float | None
    plays_to_ms: float | None
    audio_s: float
    silence_ms: float | None = None


def _word_count(text: str) -> int:
    return len(text.split())


def timeline(events: Sequence[Mapping[str, Any]], mode: str) -> list[SpokenSegment]:
    """The :class:`SpokenSegment` of every TTS request in one invocation's events (module docstring).

    Args:
        events: the decoded SSE events, in order.
        mode: the invocation's mode (``bidi``, ``stream`` or ``batch``).

    Returns ``[]`` when the stream has no ``audio_stream_end`` (it failed).
    """
    deltas = [(float(e["t_ms"]), str(e.get("text", ""))) for e in events if e.get("type") == "text_delta"]
    chunks = [
        (float(e["t_ms"]), len(base64.b64decode(e.get("data", ""))))
        for e in events
        if e.get("type") == "audio_chunk"
    ]
    end = next((e for e in events if e.get("type") == "audio_stream_end"), None)
    if end is None:
        return []
    segments = [(str(s.get("text", "")), int(s.get("audio_bytes", 0))) for s in end.get("segments") or []]

    # Text: when each segment's last word was written, counting words (the chunker normalizes spaces and
    # markdown, words survive), and when bidi's chunker let it go.
    words_after: list[tuple[float, int]] = []
    written = ""
    for t_ms, text in deltas:
        written += text
        words_after.append((t_ms, _word_count(written)))
    last_delta = deltas[-1][0] if deltas else None
    released: list[float] = []
    if mode == "bidi":
        chunker = IncrementalSentenceChunker()
        for t_ms, text in deltas:
            released += [t_ms] * len(chunker.feed(text))
        if chunker.flush() is not None and last_delta is not None:
            released.append(last_delta)

    # Audio: a real-time player over the chunks, and which bytes belong to which segment.
    plays = _player(chunks)

    def at_byte(offset: int) -> tuple[float | None, float | None]:
        """(arrival, play time) of the audio byte ``offset``."""
        position = 0
        for arrived, start, size in plays:
            if offset < position + size:
                return arrived, start + (offset - position) / BYTES_PER_SECOND * 1000.0
            position += size
        return None, None

    result = []
    words = byte = 0
    previous_end = plays[0][1] if plays else None
    for index, (text, audio_bytes) in enumerate(segments):
        words += _word_count(text)
        written_ms = next((t for t, count in words_after if count >= words), last_delta)
        if mode == "bidi":
            sent_ms = released[index] if index < len(released) else last_delta
        elif mode == "batch":
            sent_ms = last_delta
        else:
            sent_ms = written_ms
        first_audio_ms, plays_from_ms = at_byte(byte) if audio_bytes else (None, None)
        plays_to_ms = None
        if audio_bytes:
            _, last_start = at_byte(byte + audio_bytes - 1)
            plays_to_ms = None if last_start is None else last_start + 1000.0 / BYTES_PER_SECOND
        audio_s = audio_bytes / BYTES_PER_SECOND
        silence_ms = None
        if plays_to_ms is not None and previous_end is not None:
            silence_ms = max(0.0, plays_to_ms - previous_end - audio_s * 1000.0)
            previous_end = plays_to_ms
        result.append(
            SpokenSegment(
                text, written_ms, sent_ms, first_audio_ms, plays_from_ms, plays_to_ms, audio_s, silence_ms
            )
        )
        byte += audio_bytes
    return result


def _player(chunks: Sequence[tuple[float, int]]) -> list[tuple[float, float, int]]:
    """``(arrival, start of playing, bytes)`` per chunk for a real-time player that never drops audio."""
    plays = []
    drained: float | None = None
    for arrived, size in chunks:
        start = arrived if drained is None else max(drained, arrived)
        plays.append((arrived, start, size))
        drained = start + size / BYTES_PER_SECOND * 1000.0
    return plays


def played(events: Sequence[Mapping[str, Any]]) -> list[tuple[float, float, int]]:
    """``(start ms, stop ms, byte offset)`` of every ``audio_chunk`` as a real-time player plays it: the
    gaps between them are the silences the listener hears."""
    chunks = [
        (float(e["t_ms"]), len(base64.b64decode(e.get("data", ""))))
        for e in events
        if e.get("type") == "audio_chunk"
    ]
    intervals, offset = [], 0
    for _, start, size in _player(chunks):
        intervals.append((start, start + size / BYTES_PER_SECOND * 1000.0, offset))
        offset += size
    return intervals


def written_curve(events: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """``(t_ms, characters written so far)`` after every ``text_delta``."""
    total, curve = 0, []
    for event in events:
        if event.get("type") == "text_delta":
            total += len(str(event.get("text", "")))
            curve.append((float(event["t_ms"]), total))
    return curve


def plot_timelines(invocations: Mapping[str, Sequence[Mapping[str, Any]]], path: Path | str) -> Path:
    """Draw text written against audio heard, one panel per invocation (label → its events).

    Each panel shows the reply's characters written over time (a line, scaled to the panel's height),
    and, per TTS request, the time its text was sent (a dot) and each piece of its audio as a real-time
    player plays it (bars; a gap is silence the listener hears), on one time axis in seconds since
    ``agent_start``.

    Raises:
        ImportError: matplotlib is not installed (the ``demo`` and ``bench`` extras have it).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(invocations)
    figure, axes_list = plt.subplots(
        len(labels), 1, figsize=(8.0, 1.2 + 1.6 * len(labels)), dpi=100, sharex=True, squeeze=False
    )
    horizon = 0.0
    for axes, label in zip(axes_list[:, 0], labels, strict=True):
        events = invocations[label]
        mode = next((str(e.get("mode")) for e in events if e.get("type") == "agent_start"), label)
        segments = timeline(events, mode)
        curve = written_curve(events)
        total = curve[-1][1] if curve else 1
        if curve:
            xs = [0.0] + [t / 1000.0 for t, _ in curve]
            ys = [0.0] + [count / total * len(segments or [0]) for _, count in curve]
            axes.step(xs, ys, where="post", color="#7f7f7f", linewidth=1.2, label="text written")
        end = next((e for e in events if e.get("type") == "audio_stream_end"), {})
        bounds, total_bytes = [], 0
        for declared in end.get("segments") or []:
            total_bytes += int(declared.get("audio_bytes", 0))
            bounds.append(total_bytes)
        labelled = False
        for start, stop, offset in played(events):
            lane = next((i for i, bound in enumerate(bounds) if offset < bound), len(bounds) - 1) + 0.5
            axes.barh(lane, (stop - start) / 1000.0, left=start / 1000.0, height=0.6, color="#1f77b4",
                      label=None if labelled else "audio heard")  # fmt: skip
            labelled = True
            horizon = max(horizon, stop / 1000.0)
        for index, segment in enumerate(segments):
            lane = index + 0.5
            if segment.sent_ms is not None:
                axes.plot(segment.sent_ms / 1000.0, lane, "o", color="#d62728", markersize=4,
                          label="sent to the TTS" if index == 0 else None)  # fmt: skip
        first = next((s.first_audio_ms for s in segments if s.first_audio_ms is not None), None)
        if first is not None:
            axes.axvline(first / 1000.0, color="#1f77b4", linestyle=":", linewidth=1)
            axes.annotate(f"first audio {first / 1000.0:.2f} s", (first / 1000.0, len(segments)),
                          fontsize=7, color="#1f77b4", ha="left", va="top")  # fmt: skip
        if curve:
            horizon = max(horizon, curve[-1][0] / 1000.0)
        axes.set_ylim(0, max(1, len(segments)))
        axes.set_yticks([i + 0.5 for i in range(len(segments))], [f"#{i + 1}" for i in range(len(segments))])
        axes.set_ylabel(label, fontsize=9)
        axes.grid(axis="x", alpha=0.3)
        axes.tick_params(labelsize=8)
    axes_list[0, 0].legend(fontsize=7, loc="lower right")
    axes_list[-1, 0].set_xlabel("seconds since agent_start", fontsize=9)
    axes_list[-1, 0].set_xlim(0, horizon * 1.02 or 1)
    figure.suptitle("Text written (line) vs audio heard (bars), per TTS request", fontsize=10)
    figure.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, metadata={"Software": None})
    plt.close(figure)
    return target
