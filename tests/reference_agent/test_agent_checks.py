"""reference_agent.checks against good streams and deliberately broken ones, rule by rule."""

from __future__ import annotations

import base64
import copy
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.sse import SSEDecoder
from reference_agent.checks import (
    AgentRule,
    AgentSSEDecoder,
    check_events,
    check_stream,
    decode_audio,
    reply_words,
)
from reference_agent.events import AgentEventWriter, Segment

REPLY = ["Hello there. ", "This is a check. ", "It has no final stop"]
SENTENCES = ["Hello there.", "This is a check.", "It has no final stop"]
PCM = [bytes(range(2, 42)), bytes(range(50, 90)) * 2, b"\x01\x02" * 30]


def _writer(mode: str = "bidi") -> AgentEventWriter:
    ticks = itertools.count()
    return AgentEventWriter("req-1", mode, clock=lambda: next(ticks) / 1000)


def good_bidi() -> list[dict]:
    """A conforming bidi stream: audio of each sentence interleaved with later text."""
    w = _writer()
    events = [w.start(), w.audio_stream_start(voice="af_heart", sample_rate=24000)]
    for text, pcm in zip(REPLY, PCM, strict=True):
        events.append(w.text_delta(text))
        events.append(w.audio_chunk(pcm))
    segments = [Segment(s, len(p)) for s, p in zip(SENTENCES, PCM, strict=True)]
    events += [w.audio_stream_end(segments), w.end()]
    return events


def good_batch() -> list[dict]:
    w = _writer("batch")
    events = [w.start(), w.audio_stream_start(voice="af_heart", sample_rate=24000)]
    events += [w.text_delta(t) for t in REPLY]
    events += [w.audio_chunk(p) for p in PCM]
    events += [w.audio_stream_end([Segment(" ".join(SENTENCES), sum(map(len, PCM)))]), w.end()]
    return events


def good_error() -> list[dict]:
    w = _writer()
    return [
        w.start(),
        w.audio_stream_start(voice="af_heart", sample_rate=24000),
        w.text_delta("Hello "),
        w.error("tts_error", "TTS stream failed: ModelStreamError: StreamBroken"),
    ]


def encode(events: list[dict]) -> bytes:
    """The framing BedrockAgentCoreApp produces (REFERENCE.md §5)."""
    return b"".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events)


def rules(findings) -> set[AgentRule]:
    return {f.rule for f in findings}


def renumber(events: list[dict]) -> list[dict]:
    """Give events contiguous seq again after a test removed or moved some."""
    for index, event in enumerate(events):
        event["seq"] = index
    return events


# --- good streams -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [good_bidi, good_batch])
def test_good_streams_have_no_findings(make):
    events = make()
    assert check_events(events, expect="success") == []
    assert check_events(events, expect="success", tts_audio=b"".join(PCM), tts_texts=SENTENCES) == []


def test_error_stream_is_fine_when_an_error_is_expected():
    assert check_events(good_error(), expect="error") == []
    assert check_events(good_error()) == []


def test_decode_audio_joins_per_event_decodes():
    assert decode_audio(good_bidi()) == b"".join(PCM)


def test_reply_words_ignore_case_spacing_and_punctuation():
    assert reply_words("Hello,  THERE.\nBye") == ["hello", "there", "bye"]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_framing_holds_for_any_split_of_the_body(cuts):
    """The decoder gives the same events whatever the transport's chunk boundaries (incl. mid-UTF-8)."""
    events = good_bidi()
    events[2]["text"] = "Héllo — ¿qué tal? 你好 "  # multi-byte characters to split inside
    events[-2]["segments"][0]["text"] = "Héllo — ¿qué tal? 你好"
    body = encode(events)
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in itertools.pairwise([0, *points, len(body)])]
    decoded, findings = check_stream(pieces, expect="success")
    assert decoded == events
    assert findings == []


def test_decoder_agrees_with_the_whatwg_decoder():
    body = encode(good_bidi())
    ours = AgentSSEDecoder().feed(body)
    theirs = [json.loads(e.data) for e in SSEDecoder().feed(body)]
    assert ours == theirs


# --- framing ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'event: x\ndata: {"type": "agent_start"}\n\n', "event line"),
        (b'data: {"type":\ndata: "agent_start"}\n\n', "two data lines"),
        (b'data: {"type": "agent_start"}\r\n\r\n', "CRLF"),
        (b'data:{"type": "agent_start"}\n\n', "no space after the colon"),
        (b'data: {"type": "agent_start"}\n', "body ends inside an event"),
        (b'data: {"type": "agent_\xff"}\n\n', "not UTF-8"),
        (b": comment\n\n", "comment block"),
    ],
)
def test_framing_violations_are_found(body, why):
    _, findings = check_stream(body)
    assert AgentRule.SSE_FRAMING in rules(findings), why


@pytest.mark.parametrize(
    ("data", "why"),
    [(b"[1, 2]", "array"), (b"{'type': 1}", "not JSON"), (b'{"type": "agent_start", "x": NaN}', "NaN")],
)
def test_non_object_data_is_a_json_finding(data, why):
    _, findings = check_stream(b"data: " + data + b"\n\n")
    assert AgentRule.JSON in rules(findings), why


# --- event rules ------------------------------------------------------------------------------------------


def test_agentcore_fallback_error_frame_is_not_an_error_event():
    """A handler that raises gets BedrockAgentCoreApp's own frame, which has no 'type' (REFERENCE.md §5)."""
    fallback = {"error": "boom", "error_type": "RuntimeError", "message": "An error occurred"}
    events = [*good_bidi()[:3], fallback]
    found = check_events(events, expect="error")
    assert {AgentRule.JSON, AgentRule.TERMINAL} <= rules(found)
    assert any("fallback" in f.message for f in found)


def test_unknown_type_and_schema_violation():
    events = good_bidi()
    events[2]["type"] = "text_chunk"
    assert AgentRule.JSON in rules(check_events(events))
    events = good_bidi()
    events[1]["sample_rate"] = 44100
    assert AgentRule.SCHEMA in rules(check_events(events))


def test_seq_must_be_contiguous_from_zero():
    events = good_bidi()
    del events[3]
    found = check_events(events)
    assert AgentRule.SEQ in rules(found)
    events = renumber(good_bidi())
    events[0]["seq"] = 1
    assert AgentRule.SEQ in rules(check_events(events))


def test_t_ms_must_start_at_zero_and_never_decrease():
    events = good_bidi()
    events[4]["t_ms"] = events[3]["t_ms"] - 1
    assert AgentRule.TIME in rules(check_events(events))
    events = good_bidi()
    events[0]["t_ms"] = 5
    assert AgentRule.TIME in rules(check_events(events))


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda ev: ev.insert(1, ev.pop(3)), "audio_chunk before audio_stream_start"),
        (lambda ev: ev.insert(-1, {"type": "text_delta", "text": "late"}), "text after audio_stream_end"),
        (lambda ev: ev.append({"type": "text_delta", "text": "x"}), "event after agent_end"),
        (lambda ev: ev.pop(-2), "agent_end without audio_stream_end"),
        (lambda ev: ev.insert(0, ev.pop(1)), "agent_start not first"),
        (lambda ev: ev.insert(3, copy.deepcopy(ev[1])), "audio_stream_start twice"),
    ],
)
def test_order_violations(edit, why):
    events = good_bidi()
    edit(events)
    for event in events:
        event.setdefault("t_ms", 0)
    assert AgentRule.ORDER in rules(check_events(renumber(events))), why


def test_silent_stop_is_a_terminal_finding():
    events = good_bidi()[:-3]
    found = check_events(events)
    assert AgentRule.TERMINAL in rules(found)
    assert any("silent stop" in f.message for f in found)


def test_expected_outcome_is_enforced():
    assert AgentRule.TERMINAL in rules(check_events(good_bidi(), expect="error"))
    assert AgentRule.TERMINAL in rules(check_events(good_error(), expect="success"))
    with pytest.raises(ValueError):
        check_events(good_bidi(), expect="maybe")


@pytest.mark.parametrize(
    "data",
    [
        base64.urlsafe_b64encode(b"\xfb\xff" * 8).decode(),  # URL-safe alphabet
        base64.b64encode(PCM[0]).decode().rstrip("="),  # padding dropped
        base64.b64encode(PCM[0]).decode()[:10] + "\n" + base64.b64encode(PCM[0]).decode()[10:],
        "QR==",  # non-canonical: unused bits set
    ],
)
def test_bad_base64_is_found(data):
    events = good_bidi()
    events[3]["data"] = data
    found = check_events(events)
    assert AgentRule.BASE64 in rules(found)


def test_raw_bytes_instead_of_base64_is_found():
    """What BedrockAgentCoreApp makes of a bytes value: its str() (REFERENCE.md §5)."""
    events = good_bidi()
    events[3]["data"] = str(PCM[0])
    assert AgentRule.BASE64 in rules(check_events(events))
    events[3]["data"] = list(PCM[0])
    assert AgentRule.BASE64 in rules(check_events(events))


def test_odd_or_empty_chunk_is_a_pcm_finding():
    events = good_bidi()
    events[3]["data"] = base64.b64encode(b"\x01\x02\x03").decode()
    assert AgentRule.PCM in rules(check_events(events))


@pytest.mark.parametrize(
    ("field", "value"),
    [("total_chunks", 2), ("audio_bytes", 10), ("duration_s", 1.5)],
)
def test_audio_stream_end_must_agree_with_the_chunks(field, value):
    events = good_bidi()
    events[-2][field] = value
    assert AgentRule.AUDIO_TOTALS in rules(check_events(events))


def test_segment_bytes_must_add_up():
    events = good_bidi()
    events[-2]["segments"][0]["audio_bytes"] += 2
    assert AgentRule.AUDIO_TOTALS in rules(check_events(events))


def test_last_sentence_never_spoken_is_found():
    """The never-flushed chunker: the reply's unpunctuated tail has no segment and no audio."""
    events = good_bidi()
    del events[7]  # the last sentence's audio chunk
    end = events[-2]
    end["segments"] = end["segments"][:2]
    end["total_chunks"] = 2
    end["audio_bytes"] = sum(s["audio_bytes"] for s in end["segments"])
    end["duration_s"] = end["audio_bytes"] / 2 / 24000
    found = check_events(renumber(events), expect="success")
    assert rules(found) == {AgentRule.SPOKEN}
    assert "never spoken" in found[0].message and "final stop" in found[0].message


def test_tts_texts_must_hold_every_word():
    found = check_events(good_bidi(), tts_texts=SENTENCES[:2])
    assert rules(found) == {AgentRule.SPOKEN}


def test_reply_with_words_needs_audio():
    w = _writer()
    events = [w.start(), w.audio_stream_start(voice="af_heart", sample_rate=24000), w.text_delta("Hi.")]
    events += [w.audio_stream_end([Segment("Hi.", 0)]), w.end()]
    assert AgentRule.SPOKEN in rules(check_events(events))


def test_markdown_stripped_reading_is_accepted():
    w = _writer()
    pcm = b"\x10\x00" * 10
    events = [w.start(), w.audio_stream_start(voice="af_heart", sample_rate=24000)]
    events += [w.text_delta("**Bold** move."), w.audio_chunk(pcm)]
    events += [w.audio_stream_end([Segment("Bold move.", len(pcm))]), w.end()]
    assert check_events(events) == []


def test_audio_must_match_the_tts_output():
    found = check_events(good_bidi(), tts_audio=b"".join(PCM)[:-2] + b"\x00\x00")
    assert rules(found) == {AgentRule.TTS_AUDIO}


def test_batch_rules():
    events = good_batch()
    # Move the first audio chunk before the last text delta.
    first_audio = next(i for i, e in enumerate(events) if e["type"] == "audio_chunk")
    events.insert(3, events.pop(first_audio))
    assert AgentRule.BATCH in rules(check_events(renumber(events)))
    events = good_bidi()
    events[0]["mode"] = "batch"
    assert AgentRule.BATCH in rules(check_events(events))  # three segments, audio before the reply ended


def test_stream_rule_wants_one_utterance():
    events = good_bidi()
    events[0]["mode"] = "stream"
    assert AgentRule.STREAM in rules(check_events(events))  # three segments: the agent chunked it itself


def test_findings_per_rule_are_capped():
    events = good_bidi()
    for event in events:
        event["seq"] = 99
    found = [f for f in check_events(events) if f.rule is AgentRule.SEQ]
    assert len(found) == 6  # five kept plus one "N more"
    assert "more finding" in found[-1].message
    assert str(found[0]).startswith("AGENT-SEQ [event 0]")
