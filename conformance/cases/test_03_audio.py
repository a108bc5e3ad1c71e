"""§3.3.1 at its limits: audio frame sizes for the longest segment a server makes, at speed 1, and samples
clipped rather than wrapped around.

Judged on one recording (:func:`conformance.engine.recordings.long_segment`): a sentence of about 400
characters without a comma (about 25 s of speech at speed 1, 24 kHz) and a shouted one, then ``close``. A
server that sends each synthesized segment as one frame sends one over 1 MiB here; one that converts float
audio to int16 without clipping wraps the loudest samples around.
"""

from __future__ import annotations

import numpy as np

from conformance.engine.case import Level, case
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import LONG_SEGMENT
from protocol.limits import AUDIO_FRAME_HARD_LIMIT, Limits

RECOMMENDED_FRAME_BYTES = Limits().max_audio_frame_bytes
"""The default ``max_audio_frame_bytes`` (§10): the suite assumes the protocol's default limits."""

WRAP_JUMP = 49_152
"""A step between consecutive samples larger than 1.5 times full scale: speech never makes one (it would need
a full-scale wave at the Nyquist frequency), a sample wrapped from +32767 past -32768 always does."""


def _frames(recording: Recording) -> list[int]:
    sizes = [len(m.data) for m in recording.messages if not m.is_control]
    assert sizes, f"the {recording.name} session carried no audio ({recording.error or 'no error'})"
    return sizes


@case(
    "3.3.6",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-6b",),
    requirement="never longer than the **hard ceiling of 1 MiB (1,048,576 bytes)**, whatever the "
    "configuration",
    description="speak a sentence of about 400 characters without a comma at speed 1, 24 kHz (about 25 s "
    "of speech, more than 1 MiB if a segment is sent as one frame), and a shouted one; measure every audio "
    "frame",
    expectation="none is longer than 1,048,576 bytes",
)
def test_frames_of_the_longest_segment_at_most_1_mib(conf: Probe, long_segment: Recording) -> None:
    conf.use(long_segment)
    sizes = _frames(long_segment)
    conf.observe(audio_frames=len(sizes), largest=max(sizes), audio_bytes=sum(sizes))
    assert max(sizes) <= AUDIO_FRAME_HARD_LIMIT, f"an audio frame of {max(sizes)} bytes"


@case(
    "3.3.7",
    "§3.3.1",
    Level.SHOULD,
    requirements=("R3.3.1-6c",),
    requirement="MUST be at most `max_audio_frame_bytes` long (default 32,768 bytes, §10)",
    description="the same session; compare every audio frame with the default max_audio_frame_bytes (a "
    "server MAY use another value and SHOULD document it, §10)",
    expectation="none is longer than 32,768 bytes",
)
def test_frames_at_most_the_recommended_size(conf: Probe, long_segment: Recording) -> None:
    conf.use(long_segment)
    sizes = _frames(long_segment)
    over = [size for size in sizes if size > RECOMMENDED_FRAME_BYTES]
    conf.observe(frames_over_default=len(over), largest=max(sizes))
    assert not over, (
        f"{len(over)} audio frames longer than {RECOMMENDED_FRAME_BYTES} bytes (largest {max(sizes)})"
    )


@case(
    "3.3.8",
    "§3.3.1",
    Level.MUST,
    requirements=("R3.3.1-7",),
    requirement="A server that converts floating-point audio to samples MUST clip values beyond full scale "
    "to −32,768 and 32,767, never let them wrap around",
    description=f"speak a shouted text ({LONG_SEGMENT[1].text!r}) at speed 2 and a long sentence at speed 1; "
    "look for "
    f"steps of more than {WRAP_JUMP} between consecutive samples",
    expectation="there are none (a wrapped sample jumps by nearly 65,536)",
)
def test_samples_are_clipped_not_wrapped(conf: Probe, long_segment: Recording) -> None:
    conf.use(long_segment)
    observer = long_segment.replay()
    answers = [observer.answers[r.request_id] for r in LONG_SEGMENT if r.request_id in observer.answers]
    assert answers and any(a.audio for a in answers), (
        f"no audio to judge ({long_segment.error or 'no error'})"
    )
    jumps = {}
    for answer in answers:
        samples = np.frombuffer(bytes(answer.audio), dtype="<i2").astype(np.int32)
        steps = np.abs(np.diff(samples))
        count = int(np.count_nonzero(steps > WRAP_JUMP))
        if count:
            where = int(np.argmax(steps > WRAP_JUMP))
            jumps[answer.request_id] = (
                f"{count} jump(s), the first at sample {where}: {samples[where]} -> {samples[where + 1]}"
            )
        conf.observe(**{f"{answer.request_id}_peak": int(np.abs(samples).max(initial=0))})
    assert not jumps, f"samples wrapped around: {jumps}"
