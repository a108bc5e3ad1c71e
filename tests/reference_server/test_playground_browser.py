"""The playground page in a real browser, against the real server with real Kokoro (ONNX).

Debian's ``chromium`` (installed by ``make test``'s system step) is driven by Playwright for Python with
``executable_path``: Playwright's own browser download is not used (REFERENCE.md §7). The autoplay flag
lets the page's AudioContext run without a click from a person; everything else is the page as a person
uses it: it fills the text, presses Speak and Cancel, and reads the figures the page shows
(``window.playground.stats()``).

Screenshots are written to ``build/test-artefacts/playground/`` (``speaking.png`` mid-sentence with the
word being spoken highlighted; ``cancelled.png`` right after a barge-in, with the wire log open).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from server_harness import ROOT

from protocol.encodings import decode_to_pcm16

TEXT = "Hello there. This is a deployment check."
MIN_SECONDS = 0.8 + 1.2
"""The shortest accepted lengths of the two sentences (test_kokoro_e2e.SENTENCES), in seconds."""
LONG_TEXT = (
    "Streaming speech starts with the first sentence. The second sentence is synthesized while the "
    "first one plays. A third one follows, and then a fourth. This last sentence is never heard."
)
WAIT_MS = 60_000
"""Hang guard for each wait; nothing asserts on time."""
ARTEFACTS = ROOT / "build" / "test-artefacts" / "playground"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"],
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, kokoro_server) -> Iterator[object]:
    """The playground loaded from the real server, connected, its voice list received."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.goto(f"{kokoro_server.http_url}/")  # redirects to /playground/
    page.wait_for_function("() => window.playground && window.playground.stats().ready", timeout=WAIT_MS)
    yield page
    context.close()
    assert not problems, "\n".join(problems)


def stats(page) -> dict:
    return page.evaluate("() => window.playground.stats()")


def test_speaks_two_sentences_as_written_and_plays_every_sample(page):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    assert {"utterance", "marks", "cancel"} <= set(stats(page)["features"])
    assert stats(page)["voices"] >= 20  # from describe (§4.4)
    page.fill("#text", TEXT)
    page.fill("#pace", "60")
    page.click("#speak")
    # Mid-speech: audio flowing and the word being heard highlighted, placed by the server's marks (§5.5).
    page.wait_for_function(
        "() => (s => s.playing && s.highlighted && s.secondsScheduled > 1)(window.playground.stats())",
        timeout=WAIT_MS,
    )
    highlighted, shown = page.evaluate(
        "() => [window.playground.stats().highlighted,"
        " document.querySelector('#transcript .word').textContent]"
    )
    assert highlighted == shown and highlighted in TEXT.split(), (highlighted, shown)
    page.screenshot(path=ARTEFACTS / "speaking.png", full_page=True)
    page.wait_for_function("() => window.playground.stats().state !== 'speaking'", timeout=WAIT_MS)
    figures = stats(page)
    assert figures["state"] == "done", json.dumps(figures)
    [request] = figures["requests"]  # one utterance: the server's chunker cut the segments (§15)
    assert request["status"] == "completed"
    assert request["segments"] >= 2  # a marks frame per segment: at least one per sentence
    # Every sample the server sent reached the audio graph, and that is at least two sentences of speech.
    assert figures["samplesScheduled"] == request["samples"] == request["audio_bytes"] // 2
    assert figures["samplesScheduled"] >= MIN_SECONDS * request["sample_rate"]
    assert figures["contextState"] == "running"
    assert figures["peak"] > 0.02, "the graph rendered silence"
    assert figures["firstAudioMs"] > 0
    first_audio = page.inner_text("#stat-first")
    # The page rounds half up (JavaScript's Math.round), Python's round() half to even.
    assert first_audio == f"{math.floor(figures['firstAudioMs'] + 0.5)} ms"
    assert figures["activeSources"] == 0 and not figures["playing"]


def test_cancel_stops_playback_at_once(page):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.fill("#text", LONG_TEXT)
    page.fill("#pace", "120")
    page.click("#speak")
    page.wait_for_function("() => window.playground.stats().playing", timeout=WAIT_MS)
    page.click("#cancel")
    at_cancel = stats(page)
    assert at_cancel["state"] == "cancelled"
    assert at_cancel["activeSources"] == 0 and not at_cancel["playing"]
    page.click(".wire summary")  # the wire log: utterance, appends, marks, audio, cancel
    page.screenshot(path=ARTEFACTS / "cancelled.png", full_page=True)
    # The server closes the cancelled utterance's bracket (§4.2); audio still on its way is dropped.
    page.wait_for_function(
        "() => window.playground.stats().requests.every(r => r.status !== null)", timeout=WAIT_MS
    )
    page.wait_for_timeout(300)
    after = stats(page)
    assert [r["status"] for r in after["requests"]] == ["cancelled"]
    assert after["samplesScheduled"] == at_cancel["samplesScheduled"]
    assert after["activeSources"] == 0 and after["level"] == 0


def test_the_pages_protocol_core_in_the_browser(page):
    """bidi.js as the browser runs it: classification by content (§3.4), odd bytes carried over, token
    pieces that rebuild the text, sentences for a server without utterances, word spans from marks."""
    results = page.evaluate(
        """async () => {
        const b = await import('./bidi.js');
        const bytes = (...xs) => new Uint8Array(xs).buffer;
        const utf8 = (s) => new TextEncoder().encode(s).buffer;
        const kind = (d) => b.classify(d).kind;
        const joiner = new b.PcmJoiner();
        const split = [...joiner.push(new Uint8Array([0x01, 0x00, 0xff])),
                       ...joiner.push(new Uint8Array([0x7f, 0x00])),
                       ...joiner.push(new Uint8Array([0x80])),
                       ...joiner.push(new Uint8Array([0x05]))];
        const text = 'Hi — e\\u0301t\\u00e9 🎉 in 2026, “quoted”.  Done!\\n';
        const spans = b.wordSpans('Say hello there.', {start: 4, end: 16}, {start_s: 1, end_s: 2});
        const alaw = b.audioDecoder('pcm_alaw');
        return {
          mulawTable: Array.from(b.G711_TABLES.pcm_mulaw),
          alawTable: Array.from(b.G711_TABLES.pcm_alaw),
          alawPush: Array.from(alaw.push(new Uint8Array([0xd5, 0x55, 0x2a]))),
          alawPending: alaw.pending,
          pcmDecoder: b.audioDecoder('pcm_s16le') instanceof b.PcmJoiner,
          control: kind(utf8(' {"type":"x"}\\n')),
          textFrame: kind('{"type":"x"}'),
          bom: kind(bytes(0xef, 0xbb, 0xbf, 0x7b, 0x7d)),
          invalidUtf8: kind(bytes(0x7b, 0xff, 0x7d, 0x00)),
          array: kind(utf8('[1]')),
          pcm: kind(bytes(0x10, 0x27, 0xf0, 0xd8)),
          samples: split,
          pending: joiner.pending,
          rebuilt: b.tokenize(text).join('') === text,
          tokens: b.tokenize('Hello there, deployment!'),
          sentences: b.takeSentences('One. Two! Thr'),
          located: b.locate('a  b\\nc d', 0, 'b c'),
          spans: spans.map((s) => [s.start, s.end, +s.start_s.toFixed(3), +s.end_s.toFixed(3), s.estimated]),
        };
      }"""
    )
    assert results["control"] == results["textFrame"] == "control"
    assert results["bom"] == results["invalidUtf8"] == results["array"] == results["pcm"] == "audio"
    # 01 00 | ff 7f | 00 80, cut as 01 00 ff / 7f 00 / 80 / 05; the last byte waits for its partner.
    assert results["samples"] == [1, 0x7FFF, -0x8000] and results["pending"] is True
    assert results["rebuilt"] is True
    assert results["tokens"] == ["Hello", " there", ",", " deploy", "ment", "!"]
    assert results["sentences"] == {"sentences": ["One. ", "Two! "], "rest": "Thr"}
    assert results["located"] == {"start": 3, "end": 6}  # "b\nc": any whitespace matches any
    assert results["spans"] == [[4, 9, 1.0, 1.5, True], [10, 16, 1.5, 2.0, True]]
    # G.711 (§3.3.1): the page's tables give every code the value CPython's audioop (held to ITU-T G.711's
    # tables in tests/protocol/test_encodings.py) gives it; one byte is one sample, nothing is carried.
    codes = bytes(range(256))
    for name, law in (("mulawTable", "pcm_mulaw"), ("alawTable", "pcm_alaw")):
        assert results[name] == list(np.frombuffer(decode_to_pcm16(codes, law), "<i2")), name
    assert results["alawPush"] == [8, -8, results["alawTable"][0x2A]] and results["alawPending"] is False
    assert results["pcmDecoder"] is True


def test_without_utterances_and_marks_it_sends_a_request_per_sentence(page):
    """The fallback for a version 1 server (§15.1): the page, told the server lacks utterances and marks,
    sends each sentence as it is written as its own request and highlights from synthesis_complete."""
    page.evaluate(
        "() => { const f = window.playground.page.features; f.delete('utterance'); f.delete('marks'); }"
    )
    page.fill("#text", "Hi. Bye.")
    page.fill("#pace", "120")
    page.click("#speak")
    page.wait_for_function("() => window.playground.stats().state !== 'speaking'", timeout=WAIT_MS)
    figures = stats(page)
    assert figures["state"] == "done", json.dumps(figures)
    assert [r["status"] for r in figures["requests"]] == ["completed", "completed"]
    assert all(r["segments"] == 0 for r in figures["requests"])  # no marks asked for, none sent
    assert figures["samplesScheduled"] == sum(r["audio_bytes"] // 2 for r in figures["requests"])


def test_plays_a_mulaw_stream_at_8_khz(page):
    """The encoding picker (capabilities.encodings, §4.4): G.711 μ-law picks 8 kHz, the request asks for
    it, and every byte of the bracket is decoded through the page's table into one sample played."""
    assert page.evaluate("() => [...document.querySelectorAll('#encoding option')].map(o => o.value)") == [
        "pcm_s16le",
        "pcm_mulaw",
        "pcm_alaw",
    ]
    page.select_option("#encoding", "pcm_mulaw")
    assert page.input_value("#rate") == "8000"
    page.check('input[name="mode"][value="whole"]')
    page.fill("#text", "Hello there.")
    page.click("#speak")
    page.wait_for_function("() => window.playground.stats().state !== 'speaking'", timeout=WAIT_MS)
    figures = stats(page)
    assert figures["state"] == "done", json.dumps(figures)
    [request] = figures["requests"]
    assert (request["status"], request["encoding"], request["sample_rate"]) == (
        "completed",
        "pcm_mulaw",
        8000,
    )
    assert figures["samplesScheduled"] == request["samples"] == request["audio_bytes"] == request["bytes"]
    assert figures["samplesScheduled"] >= 0.8 * 8000  # "Hello there." lasts at least 0.8 s
    assert figures["peak"] > 0.02, "the graph rendered silence"


SPANS_TEXT = "# Prices\nIt costs **$12.50** today, said Dr. Smith 🎉 at 10:30."
"""Markdown, a figure read out, an astral emoji and a time: the words spoken are not the text shown."""
SPANS_SCREENSHOT = Path("/tmp/spans-playground.png")


def test_highlights_the_text_as_written_through_figures_and_markdown(page):
    """With text_spans (§14.4) the page highlights the characters each word reads in the text as typed:
    "$12.50" while "twelve dollars and fifty cents" plays, "today," after the markdown and the emoji."""
    assert "text_spans" in stats(page)["features"]
    page.fill("#text", SPANS_TEXT)
    page.fill("#pace", "80")
    page.click("#speak")
    page.wait_for_function("() => window.playground.stats().highlighted === '$12.50'", timeout=WAIT_MS)
    shown = page.evaluate("() => document.querySelector('#transcript .word').textContent")
    assert shown == "$12.50"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTEFACTS / "spans.png", full_page=True)
    page.screenshot(path=SPANS_SCREENSHOT, full_page=True)
    seen = set()
    while stats(page)["state"] == "speaking":
        highlighted = stats(page)["highlighted"]
        if highlighted:
            seen.add(highlighted)
        page.wait_for_timeout(40)
    # Every highlight is a piece of the text as written, markup left out; the time reads "10:30".
    assert seen <= {
        "Prices",
        "It",
        "costs",
        "$12.50",
        "today,",
        "said",
        "Dr.",
        "Smith",
        "at",
        "10:30",
        "10:30.",
    }
    assert {"$12.50", "Smith"} <= seen, seen
    assert stats(page)["state"] == "done"


def test_word_spans_count_code_points_in_the_browser(page):
    """bidi.js turns code point spans (§14.4) into the UTF-16 indices of the page's string."""
    spans = page.evaluate(
        """async () => {
        const b = await import('./bidi.js');
        const text = 'Say: 🎉 hi 🎉 there';
        const words = [{word: 'hi', start_s: 0, end_s: 1, text_start: 2, text_end: 4},
                       {word: 'there', start_s: 1, end_s: 2, text_start: 7, text_end: 12}];
        const ours = b.wordSpans(text, {start: 0, end: text.length}, {words}, 5);
        const none = b.spannedWords(text, 0, [{word: 'x', start_s: 0, end_s: 1}]);
        return {spans: ours.map((s) => text.slice(s.start, s.end)), none};
      }"""
    )
    assert spans == {"spans": ["hi", "there"], "none": None}
