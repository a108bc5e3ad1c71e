"""§14.2 text normalization: markdown not read aloud, no figure dropped, escaped characters spoken.

What a server says is not on the wire, but how long it speaks is: each case compares two texts of one
recorded session (:func:`conformance.engine.recordings.normalized`, speed 2) that differ only in what the rule
is about, by the length of their audio. Markdown read aloud ("hash hash", "asterisk asterisk") makes a text
far longer than the same words without it; ten figures dropped by a G2P that cannot read them make a sentence
as short as without them; escaped brackets that a server reading markdown takes for citations (and drops)
make a sentence as short as without what they hold.
"""

from __future__ import annotations

from conformance.engine import expect
from conformance.engine.case import Level, case
from conformance.engine.observer import Answer
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import NORMALIZED
from conformance.engine.texts import FAST

MARKDOWN_SLACK = (1.3, 0.3)
"""The markdown text lasts at most this factor times the plain text, plus these seconds: its line breaks
may end segments where the plain text has sentence ends (§14.2), never enough to read a marker aloud."""

SECONDS_PER_FIGURE = 0.12
"""Least speech per figure at speed 1 (a digit read as a word: Kokoro takes about 0.3 s)."""

SECONDS_PER_ESCAPED_NUMBER = 0.25
"""Least speech per two-digit number at speed 1 ("twelve", "thirty-four": Kokoro takes about 0.5 s)."""


def _durations(conf: Probe, recording: Recording, *names: str) -> list[float]:
    conf.use(recording)
    observer = recording.replay()
    found = []
    for name in names:
        answer: Answer | None = observer.answers.get(f"n-{name}")
        assert answer is not None, f"the request n-{name} got no bracket ({recording.error or 'refused?'})"
        expect.completed(answer)
        found.append(answer.duration_s)
    conf.observe(duration_s={name: round(d, 3) for name, d in zip(names, found, strict=True)})
    return found


@case(
    "14.2.1",
    "§14.2",
    Level.SHOULD,
    requirements=("R14.2-1",),
    requirement="A server SHOULD speak a request's text as a listener expects to hear it: markdown syntax "
    "not read aloud",
    description=f"speak {NORMALIZED['markdown']!r} and {NORMALIZED['plain']!r} at speed 2",
    expectation=f"the markdown text lasts at most {MARKDOWN_SLACK[0]} times the plain one plus "
    f"{MARKDOWN_SLACK[1]} s: its markers are not read aloud",
)
def test_markdown_not_read_aloud(conf: Probe, normalized: Recording) -> None:
    markdown, plain = _durations(conf, normalized, "markdown", "plain")
    assert markdown <= MARKDOWN_SLACK[0] * plain + MARKDOWN_SLACK[1], (
        f"{markdown:.2f} s for the markdown text, {plain:.2f} s for the same words plain: markers read aloud?"
    )


@case(
    "14.2.2",
    "§14.2",
    Level.MUST,
    requirements=("R14.2-2",),
    requirement="Normalization MUST NOT depend on how an utterance's text was divided into messages (§15.3), "
    "and MUST NOT drop a letter or digit of the text except by a rule the server documents",
    description=f"speak {NORMALIZED['digits']!r} and {NORMALIZED['bare']!r} at speed 2",
    expectation=f"the sentence with ten figures lasts at least {SECONDS_PER_FIGURE} s per figure (at speed "
    "1) longer than the one without: every figure is spoken",
)
def test_figures_are_spoken(conf: Probe, normalized: Recording) -> None:
    digits, without = _durations(conf, normalized, "digits", "bare")
    figures = sum(c.isdigit() for c in NORMALIZED["digits"])
    least = figures * SECONDS_PER_FIGURE / FAST
    assert digits - without >= least, (
        f"{digits:.2f} s with {figures} figures, {without:.2f} s without: less than {least:.2f} s for the "
        "figures, so some were not spoken"
    )


@case(
    "14.2.3",
    "§14.2",
    Level.MUST,
    requirements=("R14.2-4",),
    requirement="a server that reads markdown MUST then speak the escaped character as text.",
    description=f"speak {NORMALIZED['escaped']!r} (numbers in escaped brackets, which unescaped are "
    f"citations) and {NORMALIZED['bare']!r} at speed 2",
    expectation=f"the first lasts at least {SECONDS_PER_ESCAPED_NUMBER} s per number (at speed 1) longer: "
    "escaped brackets are text, and what they hold is spoken",
)
def test_escaped_markdown_is_spoken(conf: Probe, normalized: Recording) -> None:
    escaped, without = _durations(conf, normalized, "escaped", "bare")
    numbers = NORMALIZED["escaped"].count("\\[")
    least = numbers * SECONDS_PER_ESCAPED_NUMBER / FAST
    assert escaped - without >= least, (
        f"{escaped:.2f} s with {numbers} escaped [numbers], {without:.2f} s without: less than "
        f"{least:.2f} s, so the escaped brackets were read as citations and dropped"
    )
