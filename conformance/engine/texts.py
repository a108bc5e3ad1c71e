"""The texts the cases speak, chosen to keep a run of the whole suite on two CPU cores short.

Synthesis dominates the suite's time (Kokoro-82M on two CPU cores runs at about 1–3.5x real time), so the
many "the next valid request succeeds" checks speak :data:`SHORT` at :data:`FAST` speed, which halves the
audio and so the decoder's work. Cases about the audio itself use the REFERENCE.md §3 sentences.
"""

from __future__ import annotations

__all__ = [
    "FAST",
    "LONG",
    "LONG_SECONDS_PER_CHAR_MIN",
    "LONG_SENTENCE",
    "LOUD",
    "SENTENCES",
    "SHORT",
    "STREAMED",
    "TWO_SENTENCES",
]

SHORT = "Hi."
"""The cheapest text to speak."""

FAST = 2.0
"""The highest speed (§4.1): half the audio of speed 1, so about half the synthesis work."""

SENTENCES = ("Hello there.", "This is a deployment check.", "It has three sentences.")
"""The AWS sample's three-sentence deployment check (REFERENCE.md §3)."""

TWO_SENTENCES = "Hello there, this is the first sentence. And here is a second one, a little longer."
"""Two sentences: long enough that a cancel or a close can arrive while the audio streams."""

LONG = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. "
    "He checked the lamp, wiped the salt from the windows, and wrote a short note in the logbook. "
    "Ships passed far out on the grey water, their lights blinking like slow stars. "
    "Some nights the wind howled so loudly that he could not hear his own footsteps. "
    "Other nights the sea was calm, and he listened to the gulls settling on the rocks below. "
    "In the morning he walked down to the village for bread, coffee, and the latest news. "
    "The baker always saved him a warm loaf, and the children asked about the storms he had seen. "
    "He told them about the winter the ice reached the harbour, and the night a fishing boat came home "
    "by his light alone. Nobody remembered when the light had last failed, and he meant to keep it that way."
)
"""791 characters, 839 phoneme tokens with espeak-ng en-us: 1.6 times Kokoro-82M's single-pass limit of 510
tokens (REFERENCE.md §4), so a server must cut it to speak it all. At speed 2 about 24 s of audio."""

LONG_SECONDS_PER_CHAR_MIN = 0.045
"""Least audio per character (at speed 1) accepted as :data:`LONG` spoken to its end: Kokoro speaks it at
0.0615 s per character, and a server that kept only the first 510 tokens would give about 0.037."""

STREAMED = (
    LONG + " The harbour master said that the old keeper knew the sea better than any chart in the office, "
    "and the captains agreed. On clear nights the beam reached the far islands, and fishermen steered home "
    "by it without a second thought."
)
"""About 1,000 characters, first sentence :data:`LONG`'s: a request long enough that a server which waits
for its whole text before the first byte is plainly slower to start than with the first sentence alone."""

LONG_SENTENCE = (
    "The keeper of the old stone lighthouse on the northern cape walked up the narrow spiral staircase every "
    "single evening just before the sun went down over the dark grey water and checked the great brass lamp "
    "and the heavy glass lenses and the clockwork that turned them while the wind pushed against the thick "
    "windows and the gulls circled slowly above the wet black rocks far below him"
)
"""One sentence of about 400 characters without a comma: the longest segment a server is likely to make, about
25 s of speech at speed 1, so that a server sending one audio frame per segment sends one over 1 MiB."""

LOUD = "Stop! Watch out! Get back right now!"
"""Shouted text: the loudest a synthesizer gets, where float audio beyond full scale must be clipped, not
wrapped around."""


NATIVE = {
    "en": "Hello there, friend.",
    "es": "Buenos días, amigo.",
    "fr": "Bonjour, mon ami.",
    "hi": "नमस्ते, मेरे दोस्त।",
    "it": "Buongiorno, amico mio.",
    "ja": "こんにちは、友達。",
    "pt": "Bom dia, meu amigo.",
    "zh": "你好，我的朋友。",
}
"""A short native sentence per language, by the primary subtag of its BCP 47 tag (PROTOCOL.md §14.1): the
cases speak one in each language a server lists. Japanese or Chinese read with English G2P come out about
three times as long (each character spelled out), Hindi twice."""
