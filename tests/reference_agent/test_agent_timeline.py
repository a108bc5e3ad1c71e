"""The listener's timeline of an invocation, read from its events: written, sent, first heard, played.

Events are built with the agent's own :class:`AgentEventWriter` on a fake clock, so every expected time
is known exactly.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from reference_agent.demo import Trial, print_timelines, write_plot
from reference_agent.events import AgentEventWriter, Segment
from reference_agent.timeline import played, plot_timelines, timeline, written_curve

SECOND = 48_000  # bytes of one second of 24 kHz PCM16


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _invocation(mode: str, script: list[tuple[float, str, object]]) -> list[dict]:
    """Events of one invocation: ``(at seconds, kind, value)`` with kind ``text``, ``audio`` (bytes) or
    ``end`` (the segments)."""
    clock = Clock()
    writer = AgentEventWriter("r1", mode, clock)
    events = [writer.start(), writer.audio_stream_start(voice="af_heart", sample_rate=24_000)]
    for at, kind, value in script:
        clock.now = at
        if kind == "text":
            events.append(writer.text_delta(value))
        elif kind == "audio":
            events.append(writer.audio_chunk(b"\x01\x00" * (value // 2)))
        else:
            events.append(writer.audio_stream_end(value))
            events.append(writer.end())
    return events


BIDI = [
    (0.4, "text", "Good question. "),  # the first sentence is written ...
    (0.5, "text", "Streaming "),  # ... and released by the chunker here
    (0.9, "text", "helps."),
    (1.0, "audio", SECOND),  # sentence 1: one second, heard from 1.0 to 2.0
    (2.5, "audio", SECOND // 2),  # sentence 2 arrives late: 0.5 s of silence, plays 2.5-3.0
    (2.6, "audio", SECOND // 2),  # plays 3.0-3.5
    (3.0, "end", [Segment("Good question.", SECOND), Segment("Streaming helps.", SECOND)]),
]


def test_bidi_timeline_written_sent_heard_and_silence():
    first, second = timeline(_invocation("bidi", BIDI), "bidi")
    assert (first.text, first.written_ms, first.sent_ms) == ("Good question.", 400.0, 500.0)
    assert (first.first_audio_ms, first.plays_from_ms, first.plays_to_ms) == (
        1000.0,
        1000.0,
        pytest.approx(2000.0),
    )
    assert first.audio_s == 1.0 and first.silence_ms == pytest.approx(0.0, abs=1e-6)
    assert (second.written_ms, second.sent_ms) == (900.0, 900.0)  # the last sentence leaves at the end
    assert (second.first_audio_ms, second.plays_from_ms) == (2500.0, 2500.0)
    assert second.plays_to_ms == pytest.approx(3500.0)
    assert second.silence_ms == pytest.approx(500.0)


def test_batch_sends_the_whole_reply_when_it_is_written():
    script = [
        (0.4, "text", "Good question. "),
        (0.9, "text", "Streaming helps."),
        (1.5, "audio", SECOND * 2),
        (2.0, "end", [Segment("Good question. Streaming helps.", SECOND * 2)]),
    ]
    (whole,) = timeline(_invocation("batch", script), "batch")
    assert (whole.written_ms, whole.sent_ms, whole.first_audio_ms) == (900.0, 900.0, 1500.0)
    assert whole.plays_to_ms == pytest.approx(3500.0) and whole.silence_ms == pytest.approx(0.0, abs=1e-6)


def test_player_intervals_and_written_curve():
    events = _invocation("bidi", BIDI)
    assert [(round(a), round(b), o) for a, b, o in played(events)] == [
        (1000, 2000, 0),
        (2500, 3000, SECOND),
        (3000, 3500, SECOND + SECOND // 2),
    ]
    assert written_curve(events) == [(400.0, 15), (500.0, 25), (900.0, 31)]
    assert timeline(events[:-2], "bidi") == []  # no audio_stream_end: a failed stream


def test_demo_prints_each_modes_timeline_and_draws_it(tmp_path):
    trials = [
        Trial("bidi", first_audio_ms=1000.0, events=_invocation("bidi", BIDI)),
        Trial("batch", first_audio_ms=1500.0, error="tts_error: boom", events=[]),  # failed: not shown
    ]
    out = io.StringIO()
    shown = print_timelines(trials, out)
    assert list(shown) == ["bidi"]
    lines = out.getvalue().splitlines()
    assert any("Good question." in line and "1,000-2,000" in line for line in lines), lines
    assert any(
        "Streaming helps." in line and "2,500-3,500" in line and line.rstrip().endswith("500")
        for line in lines
    )
    plot = tmp_path / "timeline.png"
    write_plot(shown, str(plot), out)
    assert plot.read_bytes().startswith(b"\x89PNG") and "timeline plot:" in out.getvalue()
    assert plot_timelines({"bidi": trials[0].events}, tmp_path / "again.png").stat().st_size < 200_000


def test_the_main_jobs_install_draws_the_plot():
    # `make conformance` installs locks/conformance.txt; `agent-infra demo` after it must draw the plot.
    lock = (Path(__file__).resolve().parents[2] / "locks" / "conformance.txt").read_text()
    assert re.search(r"^matplotlib==", lock, re.MULTILINE), "the main job's lock lacks matplotlib"


def test_without_matplotlib_the_demo_says_the_command_that_fixes_it(tmp_path, monkeypatch):
    import reference_agent.timeline as timeline_module

    def no_matplotlib(*args, **kwargs):
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(timeline_module, "plot_timelines", no_matplotlib)
    out = io.StringIO()
    shown = {"bidi": Trial("bidi", 1000.0, events=_invocation("bidi", BIDI))}
    write_plot(shown, str(tmp_path / "t.png"), out)
    said = out.getvalue()
    assert "make conformance" in said and "kokoro-bidi-tts[demo]" in said, said
    assert not (tmp_path / "t.png").exists()
