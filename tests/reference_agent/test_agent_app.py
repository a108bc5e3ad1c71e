"""The agent app end to end in-process: BedrockAgentCoreApp's real SSE stream, scripted model, TTS stand-in.

Every stream is judged by reference_agent.checks. Timing claims are made on event order and on ``t_ms``
within one stream relative to the scripted model's last token, never on wall-clock thresholds.
"""

from __future__ import annotations

import json
import socket

import pytest
from agent_standin import StandInFactory
from starlette.testclient import TestClient
from strands import Agent

from protocol import schemas
from reference_agent.app import AgentSettings, create_app
from reference_agent.checks import AgentRule, check_stream
from reference_agent.events import AgentEventWriter
from reference_agent.scripted import DEFAULT_REPLY, ScriptedModel
from reference_agent.tts import TtsEndpoint
from speech.chunker import IncrementalSentenceChunker

# Fast but not instant: 4 ms between words keeps a test stream under half a second, and every word
# still costs the model one timer, so the TTS leg (a few loop turns) always answers before the reply ends.
FAST = {"first_token_s": 0.01, "tokens_per_s": 250.0}

UNPUNCTUATED = "Here is the first sentence. Then a second one follows. And the last words have no stop"


def settings(**overrides) -> AgentSettings:
    return AgentSettings(scripted=True, **FAST, **overrides)


def invoke(app, payload: dict) -> tuple[int, list[bytes]]:
    with TestClient(app) as client, client.stream("POST", "/invocations", json=payload) as response:
        if response.status_code == 200:
            assert response.headers["content-type"].startswith("text/event-stream")
        return response.status_code, list(response.iter_bytes())


def run(payload: dict, *, factory: StandInFactory | None = None, expect: str = "success", **kwargs):
    """Invoke a fresh app; return (events, findings, factory). Findings use the stand-in's records."""
    factory = factory if factory is not None else StandInFactory()
    app = create_app(kwargs.pop("settings", None) or settings(), tts_connect=factory, **kwargs)
    status, body = invoke(app, payload)
    assert status == 200
    session = factory.sessions[0] if factory.sessions else None
    events, findings = check_stream(
        body,
        expect=expect,
        tts_audio=bytes(session.produced) if session and expect == "success" else None,
        tts_texts=session.texts if session and expect == "success" else None,
    )
    return events, findings, factory


def first_index(events, type_):
    return next(i for i, e in enumerate(events) if e["type"] == type_)


def last_index(events, type_):
    return max(i for i, e in enumerate(events) if e["type"] == type_)


# --- the two modes ------------------------------------------------------------------------------------


def test_bidi_stream_conforms_and_speaks_sentence_by_sentence():
    events, findings, factory = run({"prompt": "Explain streaming speech.", "mode": "bidi"})
    assert findings == []
    session = factory.sessions[0]
    # One request per chunk, exactly as the chunker cuts the reply (4 sentences, the long one in two).
    chunker = IncrementalSentenceChunker()
    expected = [*chunker.feed(DEFAULT_REPLY), chunker.flush()]
    assert session.texts == expected and len(expected) == 5
    assert events[0]["mode"] == "bidi"
    segments = [{k: v for k, v in s.items() if k != "words"} for s in events[-2]["segments"]]  # §14.4 aside
    assert segments == [{"text": t, "audio_bytes": n} for t, n in _segment_sizes(session)]
    assert session.input_closed and session.closed  # input ended only after the output was drained


def _segment_sizes(session):
    from agent_standin import speech_for

    return [(text, len(speech_for(text))) for text in session.texts]


def test_batch_stream_conforms_with_one_synthesis():
    events, findings, factory = run({"prompt": "Explain streaming speech.", "mode": "batch"})
    assert findings == []
    assert len(factory.sessions[0].texts) == 1
    assert events[0]["mode"] == "batch"


def test_bidi_first_audio_comes_before_the_reply_ends_and_batch_after():
    """The seed's comparison on one scripted reply: bidi is heard while the model is still writing."""
    bidi, bidi_findings, _ = run({"prompt": "p", "mode": "bidi"})
    batch, batch_findings, _ = run({"prompt": "p", "mode": "batch"})
    assert bidi_findings == batch_findings == []
    assert [e["text"] for e in bidi if e["type"] == "text_delta"] == [
        e["text"] for e in batch if e["type"] == "text_delta"
    ]
    bidi_audio, bidi_last_text = first_index(bidi, "audio_chunk"), last_index(bidi, "text_delta")
    batch_audio, batch_last_text = first_index(batch, "audio_chunk"), last_index(batch, "text_delta")
    assert bidi_audio < bidi_last_text
    assert batch_audio > batch_last_text
    # The same statement in each stream's own clock, relative to the model's last token.
    assert bidi[bidi_audio]["t_ms"] < bidi[bidi_last_text]["t_ms"]
    assert batch[batch_audio]["t_ms"] >= batch[batch_last_text]["t_ms"]
    assert bidi[-1]["first_audio_ms"] == bidi[bidi_audio]["t_ms"]


def test_stream_mode_pipes_every_token_into_one_utterance(caplog):
    """``stream``: no chunker in the agent; each text delta goes into one utterance (PROTOCOL.md §15),
    the TTS cuts it, and the stream still speaks before the reply ends. The model's stream is driven by
    one task, so Strands' OpenTelemetry context is detached where it was attached (no traceback logged)."""
    with caplog.at_level("ERROR", logger="opentelemetry.context"):
        events, findings, factory = run({"prompt": "p", "mode": "stream"})
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")], caplog.text
    assert findings == []
    session = factory.sessions[0]
    assert session.texts == [DEFAULT_REPLY]  # one utterance holding the whole reply
    deltas = [e["text"] for e in events if e["type"] == "text_delta"]
    sent = session.messages
    assert sent[0]["type"] == "utterance" and sent[0]["text"] == deltas[0]
    assert [m["text"] for m in sent[1:-1] if m["type"] == "append" and m["text"]] == deltas[1:]
    assert sent[-1] == {"type": "end", "request_id": sent[0]["request_id"]}
    assert first_index(events, "audio_chunk") < last_index(events, "text_delta")
    assert events[0]["mode"] == "stream"
    segments = [{k: v for k, v in s.items() if k != "words"} for s in events[-2]["segments"]]  # §14.4 aside
    assert segments == [{"text": DEFAULT_REPLY, "audio_bytes": len(session.produced)}]


def test_stream_mode_keeps_the_utterance_open_while_the_model_pauses(monkeypatch):
    """Empty appends (§15.5) while the model is silent, never before the utterance is open."""
    monkeypatch.setattr("reference_agent.pipeline.KEEPALIVE_S", 0.01)
    slow = settings().__class__(scripted=True, first_token_s=0.05, tokens_per_s=12.0)
    _, findings, factory = run(
        {"prompt": "p", "mode": "stream", "scripted": {"reply": "One two. Three"}}, settings=slow
    )
    assert findings == []
    sent = factory.sessions[0].messages
    assert sent[0]["type"] == "utterance"  # nothing before the first token
    assert any(m == {"type": "append", "request_id": sent[0]["request_id"], "text": ""} for m in sent)
    assert factory.sessions[0].texts == ["One two. Three"]


def test_stream_mode_against_a_tts_without_utterances_ends_with_a_clear_error():
    events, findings, _ = run(
        {"prompt": "p", "mode": "stream"}, factory=StandInFactory(utterances=False), expect="error"
    )
    assert findings == []
    assert events[-1]["code"] == "tts_error" and "does not offer utterances" in events[-1]["message"]


@pytest.mark.parametrize("mode", ["bidi", "stream", "batch"])
def test_last_words_without_punctuation_are_spoken(mode):
    _, findings, factory = run({"prompt": "p", "mode": mode, "scripted": {"reply": UNPUNCTUATED}})
    assert findings == []
    texts = factory.sessions[0].texts
    assert texts[-1].endswith("And the last words have no stop")
    if mode == "stream":
        assert texts == [UNPUNCTUATED]
    if mode == "bidi":
        assert texts == [
            "Here is the first sentence.",
            "Then a second one follows.",
            "And the last words have no stop",
        ]


def test_payload_parts_split_anywhere_are_reassembled():
    """SageMaker may re-split messages (REFERENCE.md §1): 7-byte parts cut JSON and samples alike."""
    _, findings, _ = run({"prompt": "p"}, factory=StandInFactory(part_size=7))
    assert findings == []


def test_request_fields_reach_the_tts():
    factory = StandInFactory()
    app = create_app(settings(allow_endpoint_url=True), tts_connect=factory)
    payload = {
        "prompt": "p",
        "voice": "bf_emma",
        "speed": 1.25,
        "sample_rate": 16000,
        "endpoint": "my-endpoint",
        "endpoint_url": "https://127.0.0.1:9",
        "region": "eu-west-1",
        "scripted": {"reply": "One. Two.", "first_token_ms": 0, "tokens_per_s": 1000},
    }
    status, body = invoke(app, payload)
    events, findings = check_stream(body, expect="success")
    assert status == 200 and findings == []
    assert factory.endpoints == [TtsEndpoint("my-endpoint", "https://127.0.0.1:9", "eu-west-1")]
    start = events[first_index(events, "audio_stream_start")]
    assert (start["voice"], start["sample_rate"]) == ("bf_emma", 16000)
    request = factory.sessions[0].server  # every request was accepted with these fields
    assert request is not None
    assert factory.sessions[0].texts == ["One.", "Two."]


# --- failures end with an error event ------------------------------------------------------------------


def test_tts_endpoint_down_ends_with_an_error_event():
    events, findings, _ = run({"prompt": "p"}, factory=StandInFactory(refuse=True), expect="error")
    assert findings == []
    assert events[-1]["code"] == "tts_unavailable"


def test_model_stream_error_mid_stream_ends_with_an_error_event():
    events, findings, _ = run({"prompt": "p"}, factory=StandInFactory(fail_after_messages=4), expect="error")
    assert findings == []
    assert events[-1]["code"] == "tts_error"
    assert "ModelStreamError" in events[-1]["message"]
    assert any(e["type"] == "audio_chunk" for e in events)  # it failed mid-stream, after some audio


def test_tts_error_frame_ends_with_an_error_event():
    """A request the TTS refuses (here: a Kokoro voice this server lacks) comes back as an error frame."""
    only_heart = StandInFactory(voices=frozenset({"af_heart"}))
    events, findings, _ = run({"prompt": "p", "voice": "am_adam"}, factory=only_heart, expect="error")
    assert findings == []
    assert events[-1]["code"] == "tts_error"
    assert events[-1]["message"].startswith("TTS error invalid_voice: ")
    assert "invalid_voice" not in events[-1]["message"].removeprefix("TTS error invalid_voice: ")


def test_tts_answering_at_another_rate_ends_with_an_error_event():
    events, findings, _ = run({"prompt": "p"}, factory=StandInFactory(sample_rate=16000), expect="error")
    assert findings == []
    assert "16000 Hz" in events[-1]["message"]


def test_silent_tts_times_out_with_an_error_event():
    events, findings, _ = run(
        {"prompt": "p"},
        factory=StandInFactory(stall=True),
        settings=settings(idle_timeout_s=0.3),
        expect="error",
    )
    assert findings == []
    assert events[-1]["code"] == "timeout"


def test_llm_error_mid_stream_ends_with_an_error_event():
    def agent_factory(request):
        return Agent(model=ScriptedModel(fail_after=9, **FAST), callback_handler=None)

    factory = StandInFactory()
    events, findings, _ = run({"prompt": "p"}, factory=factory, agent_factory=agent_factory, expect="error")
    assert findings == []
    assert events[-1]["code"] == "llm_error"
    assert sum(e["type"] == "text_delta" for e in events) == 9
    assert factory.sessions[0].closed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_bedrock_model_failure_ends_with_an_error_event(monkeypatch):
    """The real BedrockModel, pointed at a closed port: its first call fails and the stream says so."""
    from botocore.config import Config
    from strands.models.bedrock import BedrockModel

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")

    def agent_factory(request):
        model = BedrockModel(
            model_id="anthropic.claude-test",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{free_port()}",
            boto_client_config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
        )
        return Agent(model=model, callback_handler=None)

    events, findings, _ = run({"prompt": "p"}, agent_factory=agent_factory, expect="error")
    assert findings == []
    assert events[-1]["code"] == "llm_error"


def test_official_client_against_a_closed_port_ends_with_an_error_event(monkeypatch):
    """The default TTS leg (official SageMaker client, CRT transport) with nothing listening."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    endpoint = TtsEndpoint("kokoro", url=f"https://127.0.0.1:{free_port()}", region="us-east-1")
    app = create_app(settings(endpoint=endpoint, connect_timeout_s=10.0))
    status, body = invoke(app, {"prompt": "p"})
    events, findings = check_stream(body, expect="error")
    assert status == 200 and findings == []
    assert events[-1]["code"] == "tts_unavailable"
    assert "CONNECTION_REFUSED" in events[-1]["message"]


# --- requests refused before the stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({}, "'prompt' is a required property"),
        ({"prompt": "   "}, "non-whitespace"),
        ({"prompt": "p", "mode": "fast"}, "mode"),
        ({"prompt": "p", "speed": True}, "speed"),
        ({"prompt": "p", "sample_rate": 44100}, "sample_rate"),
        ({"prompt": "p", "endpoint_url": "https://evil.example"}, "endpoint_url"),
        ({"prompt": "p", "region": "ap-south-1"}, "region"),
        ([1, 2], "object"),
    ],
)
def test_bad_requests_get_http_400(payload, needle):
    app = create_app(settings(), tts_connect=StandInFactory())
    with TestClient(app) as client:
        response = client.post("/invocations", json=payload)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert needle in error["message"]


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        (b"{not json", "invalid_json", "not JSON"),
        (b'{"prompt": "\xff"}', "invalid_utf8", "not UTF-8"),
        (json.dumps({"prompt": "Hi.", "voice": "zz_nobody"}).encode(), "invalid_voice", "'zz_nobody'"),
        (json.dumps({"prompt": "Hi.", "voice": "af_bella+jf_alpha"}).encode(), "invalid_voice", "language"),
    ],
)
def test_every_refusal_has_the_one_error_shape_before_any_event(body, code, needle):
    """PROTOCOL.md §11.6: {"error": {"code", "message"}}; a bad voice is refused before the 200 (issue 15)."""
    factory = StandInFactory()
    app = create_app(settings(), tts_connect=factory)
    with TestClient(app) as client:
        response = client.post("/invocations", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    schemas.validate("http_error", response.json())
    error = response.json()["error"]
    assert error["code"] == code and needle in error["message"] and not error["message"].startswith(code)
    assert factory.sessions == []  # no TTS session was opened


def test_scripted_overrides_are_refused_by_a_bedrock_agent():
    app = create_app(AgentSettings(scripted=False), tts_connect=StandInFactory())
    with TestClient(app) as client:
        response = client.post("/invocations", json={"prompt": "p", "scripted": {"reply": "x"}})
    assert response.status_code == 400


def test_ping_answers():
    app = create_app(settings(), tts_connect=StandInFactory())
    with TestClient(app) as client:
        assert client.get("/ping").json()["status"] in ("Healthy", "HealthyBusy")


# --- deliberately broken agents are caught by the checks ---------------------------------------------------


def test_an_agent_that_never_flushes_the_chunker_is_caught(monkeypatch):
    from reference_agent.pipeline import SentenceSegments

    class NeverFlushes(SentenceSegments):
        def flush(self):
            super().flush()
            return None

    monkeypatch.setattr("reference_agent.pipeline.SentenceSegments", NeverFlushes)
    factory = StandInFactory()
    app = create_app(settings(), tts_connect=factory)
    _, body = invoke(app, {"prompt": "p", "scripted": {"reply": UNPUNCTUATED}})
    _, findings = check_stream(body, expect="success")
    assert {f.rule for f in findings} == {AgentRule.SPOKEN}
    assert any("have no stop" in f.message for f in findings)
    _, findings = check_stream(body, expect="success", tts_texts=factory.sessions[0].texts)
    assert sum(f.rule is AgentRule.SPOKEN for f in findings) == 2  # segments and the TTS's own record


def test_an_agent_that_sends_raw_bytes_is_caught(monkeypatch):
    """Bytes handed to BedrockAgentCoreApp are silently str()-ed (REFERENCE.md §5)."""
    original = AgentEventWriter.audio_chunk

    def raw_bytes(self, pcm):
        event = original(self, pcm)
        event["data"] = pcm
        return event

    monkeypatch.setattr(AgentEventWriter, "audio_chunk", raw_bytes)
    app = create_app(settings(), tts_connect=StandInFactory())
    _, body = invoke(app, {"prompt": "p"})
    _, findings = check_stream(body, expect="success")
    assert AgentRule.JSON in {f.rule for f in findings}


def test_an_agent_that_sends_bytes_as_text_is_caught(monkeypatch):
    original = AgentEventWriter.audio_chunk

    def latin1(self, pcm):
        event = original(self, pcm)
        event["data"] = pcm.decode("latin-1")
        return event

    monkeypatch.setattr(AgentEventWriter, "audio_chunk", latin1)
    app = create_app(settings(), tts_connect=StandInFactory())
    _, body = invoke(app, {"prompt": "p"})
    _, findings = check_stream(body, expect="success")
    assert AgentRule.BASE64 in {f.rule for f in findings}
