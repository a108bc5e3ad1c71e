"""What the benchmarks speak: one agent reply, its sentences, and 24 short clips.

The reply stands in for the AWS sample's benchmark text (REFERENCE.md §3: 267 characters, four
sentences). Its first sentence is short, as a spoken reply's first sentence usually is, which is also
what lets the scripted model keep the seed's rhythm (first sentence after about 0.6 s, the whole reply
after about 5 s) with an ordinary time to first token (:func:`bench.agent_latency.seed_timing`).
"""

from __future__ import annotations

__all__ = [
    "CLIPS",
    "LONG_REPLIES",
    "PLAYBACK_REPLIES",
    "REPLY",
    "REPLY_SENTENCES",
    "SHORT_TEXT",
    "THROUGHPUT_TEXT",
]

REPLY_SENTENCES: tuple[str, ...] = (
    "Happy to help.",
    "Your order shipped this morning from our Denver warehouse and should reach you by Thursday afternoon.",
    "You will get a text message with a tracking link as soon as the courier scans the package.",
    "If anything looks wrong, just reply here and I will fix it.",
)
"""The reply's four sentences, as the project's sentence chunker cuts them."""

REPLY = " ".join(REPLY_SENTENCES)
"""The agent reply: 267 characters, four sentences (the seed's text length and shape)."""

LONG_REPLIES: dict[str, tuple[str, ...]] = {
    "technician": (
        "Sure thing.",
        "The technician will arrive at your house between nine and eleven tomorrow to replace the heater.",
        "Please make sure that someone is at home to let him in and show him where the old unit is.",
    ),
    "refund": (
        "Good news.",
        "Your refund for the damaged headphones was approved today and will be back on your card soon.",
        "You do not need to send the headphones back because the courier already confirmed the damage.",
    ),
    "dentist": (
        "Okay.",
        "I moved your dentist appointment from Tuesday afternoon to Friday morning at half past ten.",
        "The clinic will send you a reminder the evening before with the address and the parking details.",
    ),
}
"""Three replies of long comma-less sentences after a one- or two-word opener: with one segment per
sentence the long sentence takes longer to synthesize than the opener takes to play (bench §6)."""

PLAYBACK_REPLIES: dict[str, tuple[str, ...]] = {"bench reply": REPLY_SENTENCES[:2], **LONG_REPLIES}
"""The replies of the playback benchmark: the issue's bench reply ("Happy to help." then a 100-character
sentence without commas) and :data:`LONG_REPLIES`."""

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
