"""What the benchmarks speak: one agent reply, its sentences, and 24 short clips.

The reply stands in for the AWS sample's benchmark text (REFERENCE.md §3: 267 characters, four
sentences). Its first sentence is short, as a spoken reply's first sentence usually is, which is also
what lets the scripted model keep the seed's rhythm (first sentence after about 0.6 s, the whole reply
after about 5 s) with an ordinary time to first token (:func:`bench.agent_latency.seed_timing`).
"""

from __future__ import annotations

__all__ = ["CLIPS", "REPLY", "REPLY_SENTENCES", "SHORT_TEXT", "THROUGHPUT_TEXT"]

REPLY_SENTENCES: tuple[str, ...] = (
    "Happy to help.",
    "Your order shipped this morning from our Denver warehouse and should reach you by Thursday afternoon.",
    "You will get a text message with a tracking link as soon as the courier scans the package.",
    "If anything looks wrong, just reply here and I will fix it.",
)
"""The reply's four sentences, as the project's sentence chunker cuts them."""

REPLY = " ".join(REPLY_SENTENCES)
"""The agent reply: 267 characters, four sentences (the seed's text length and shape)."""

SHORT_TEXT = "Hello there."
"""The first sentence of REFERENCE.md §3's deployment check: the smallest request worth timing."""

THROUGHPUT_TEXT = "This is a deployment check."
"""What each concurrent session asks for in the throughput benchmark (about 2.2 s of audio)."""

CLIPS: tuple[str, ...] = (
    "Hello there.",
    "This is a deployment check.",
    "It has three sentences.",
    "Your table is booked for seven tonight.",
    "The weather tomorrow looks sunny and mild.",
    "I have added milk to your shopping list.",
    "Your package will arrive on Friday.",
    "The meeting moved to half past two.",
    "Turn left at the next traffic light.",
    "Your balance is forty two dollars.",
    "I could not find that song, sorry.",
    "The train to Boston leaves at nine.",
    "Sure, I can remind you in an hour.",
    "Your flight is on time and boards at gate twelve.",
    "It is currently sixty eight degrees outside.",
    "I sent the message to your sister.",
    "The store closes at eight on weekdays.",
    "Would you like me to read it again?",
    "Your timer is set for ten minutes.",
    "The next bus comes in four minutes.",
    "I found three recipes with chicken and rice.",
    "Your password was changed successfully.",
    "Please hold while I check that for you.",
    "Thanks for calling, have a great day.",
)
"""24 short voice-assistant utterances (about 2 s each, like the seed's 24 clips of 2.08 s on average)."""
