"""The AWS sample's published figures (REFERENCE.md §3), which RESULTS.md sets beside ours.

They were measured on the sample's own deployment (a GPU endpoint, its server and its scripted LLM),
not re-run here; a comparison with them is of shape (ratios, orders of magnitude), not of absolute
milliseconds on different hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AGENT_RATIO_DEPLOYED",
    "AGENT_RATIO_LOCAL",
    "FIRST_AUDIO_CHANGE_PCT",
    "FIRST_AUDIO_FIRST_SENTENCE_MS",
    "FIRST_AUDIO_WHOLE_TEXT_MS",
    "GPU_HOURS_PER_HOUR",
    "SIZES",
    "TEXT_CHARS",
    "TRIALS",
    "SizeRow",
]

TEXT_CHARS = 267
"""Length of the seed's benchmark text (four sentences)."""
TRIALS = 5
"""Trials per mode behind the seed's first-audio figures."""
FIRST_AUDIO_WHOLE_TEXT_MS = 329.3
"""First audio byte with the whole text sent as one message (the sample's server: one Kokoro pass)."""
FIRST_AUDIO_FIRST_SENTENCE_MS = 156.7
"""First audio byte with only the first sentence sent."""
FIRST_AUDIO_CHANGE_PCT = -52.4
"""(first sentence − whole text) / whole text, in percent."""

AGENT_RATIO_LOCAL = 2.4
"""Agent, first audio after ``agent_start``: batch / bidi, run locally."""
AGENT_RATIO_DEPLOYED = 3.5
"""The same ratio with the agent and the endpoint deployed on AWS."""

GPU_HOURS_PER_HOUR = (55.0, 78.0)
"""Third-party figure: Kokoro-FastAPI on one H100 under concurrency, hours of audio per hour."""


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One row of the seed's transport-size table (24 clips).

    Attributes:
        encoding: what the row measures.
        total_bytes: total bytes of the 24 clips.
        base64_bytes: total once each clip is base64-encoded on its own.
        kbps: bit rate over the clips' total duration, kilobits per second.
    """

    encoding: str
    total_bytes: int
    base64_bytes: int
    kbps: float


SIZES: dict[str, SizeRow] = {
    "pcm": SizeRow("raw PCM16 24 kHz", 2_396_400, 3_195_200, 384.0),
    "mp3": SizeRow("MP3 48 kbps", 308_304, 411_072, 49.5),
    "aac": SizeRow("AAC 32 kbps, fragmented MP4", 258_039, 344_084, 41.6),
}
"""The seed's 24-clip table, keyed like :mod:`bench.transport_sizes`' encodings."""
