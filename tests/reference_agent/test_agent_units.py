"""The agent's parts one by one: event writer, scripted model, request parsing, speaker, settings, demo."""

from __future__ import annotations

import argparse
import asyncio
import io
import re

import pytest
from agent_standin import StandInTts, speech_for
from strands import Agent

from protocol import schemas
from protocol.voices import KOKORO_VOICES, InvalidVoiceError, Voice
from reference_agent.__main__ import build_parser as agent_parser
from reference_agent.__main__ import settings_from_args
from reference_agent.app import AgentSettings
from reference_agent.checks import AgentFinding, AgentRule, check_events
from reference_agent.demo import Trial, compare, report
from reference_agent.events import EVENT_TYPES, AgentEventWriter, Segment, schema_name
from reference_agent.pipeline import WholeReply, _chunker_language
from reference_agent.request import AgentRequest, InvalidRequest, parse_request
from reference_agent.scripted import DEFAULT_REPLY, ScriptedModel, tokenize
from reference_agent.tts import Speaker, TtsEndpoint, TtsFailure

GUARD_S = 30.0
"""Generous timeout that only guards against hangs."""


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, GUARD_S))


# --- events ---------------------------------------------------------------------------------------------


def test_every_event_type_has_a_schema_file():
    for type_ in EVENT_TYPES:
        assert schema_name(type_) in schemas.names()
    assert "agent_request" in schemas.names()


def test_writer_stamps_seq_and_t_ms():
    now = iter([10.0, 10.0005, 10.25, 10.25, 11.0])
    w = AgentEventWriter("r", "bidi", clock=lambda: next(now))
    events = [
        w.start(),
        w.audio_stream_start(voice="af_heart", sample_rate=16000),
        w.audio_chunk(b"\x01\x00" * 8000),
        w.audio_stream_end([Segment("Hi.", 16000)]),
        w.end(),
    ]
    assert [e["seq"] for e in events] == [0, 1, 2, 3, 4]
    assert [e["t_ms"] for e in events] == [0.0, 0.5, 250.0, 250.0, 1000.0]
    assert events[3]["duration_s"] == 0.5 and events[3]["total_chunks"] == 1
    assert events[4]["first_audio_ms"] == 250.0
    assert check_events(events, expect="success") == [
        AgentFinding(
            AgentRule.SPOKEN,
            "audio_stream_end.segments: words that are not in the reply were spoken: 'hi'",
            3,
        )
    ]


def test_writer_refuses_misuse():
    w = AgentEventWriter("r", "bidi")
    with pytest.raises(RuntimeError):
        w.text_delta("x")  # before agent_start
    w.start()
    with pytest.raises(RuntimeError):
        w.start()
    with pytest.raises(RuntimeError):
        w.audio_chunk(b"\x00\x00")  # before audio_stream_start
    w.audio_stream_start(voice="af_heart", sample_rate=24000)
    for bad in (b"", b"\x00"):
        with pytest.raises(ValueError):
            w.audio_chunk(bad)
    with pytest.raises(ValueError):
        w.text_delta("")
    w.error("llm_error", "boom")
    with pytest.raises(RuntimeError):
        w.end()  # after the terminal event


# --- scripted model -------------------------------------------------------------------------------------


def test_tokenize_round_trips():
    for text in (DEFAULT_REPLY, "  lead and trail  ", "one", "", "a\nb\n\nc"):
        assert "".join(tokenize(text)) == text


def test_scripted_model_streams_with_its_rhythm():
    sleeps: list[float] = []

    async def sleep(seconds):
        sleeps.append(seconds)

    model = ScriptedModel("One two three.", first_token_s=0.4, tokens_per_s=20, sleep=sleep)

    async def collect():
        return [e async for e in model.stream([{"role": "user", "content": [{"text": "hello there"}]}])]

    events = run(collect())
    deltas = [e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e]
    assert deltas == ["One ", "two ", "three."]
    assert sleeps == [0.4, 0.05, 0.05]
    assert [next(iter(e)) for e in events] == [
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 3


def test_scripted_model_runs_under_a_strands_agent():
    agent = Agent(
        model=ScriptedModel("Hi there. Bye", first_token_s=0, tokens_per_s=1e4), callback_handler=None
    )

    async def collect():
        return [e["data"] async for e in agent.stream_async("hello") if "data" in e]

    assert "".join(run(collect())) == "Hi there. Bye"


@pytest.mark.parametrize("fail_after", [0, 2, 3])
def test_scripted_model_fails_where_told(fail_after):
    model = ScriptedModel(
        "a b c", first_token_s=0, tokens_per_s=1e4, fail_after=fail_after, failure=KeyError("x")
    )

    async def collect(seen):
        async for event in model.stream([{"role": "user", "content": [{"text": "p"}]}]):
            if "contentBlockDelta" in event:
                seen.append(event)

    seen: list = []
    with pytest.raises(KeyError):
        run(collect(seen))
    assert len(seen) == fail_after


def test_scripted_model_settings():
    with pytest.raises(ValueError):
        ScriptedModel(tokens_per_s=0)
    with pytest.raises(ValueError):
        ScriptedModel(first_token_s=-1)
    model = ScriptedModel()
    model.update_config(reply="x")
    assert model.get_config()["reply"] == "x"
    with pytest.raises(TypeError):
        model.update_config(temperature=0.5)


# --- requests -------------------------------------------------------------------------------------------


def test_request_defaults():
    assert parse_request({"prompt": "hi"}) == AgentRequest(prompt="hi")


def test_request_scripted_overrides():
    request = parse_request(
        {"prompt": "hi", "scripted": {"reply": "R", "first_token_ms": 250, "tokens_per_s": 9}},
        allow_scripted=True,
    )
    assert request.scripted is not None
    assert (request.scripted.reply, request.scripted.first_token_s, request.scripted.tokens_per_s) == (
        "R",
        0.25,
        9,
    )
    with pytest.raises(InvalidRequest, match="scripted"):
        parse_request({"prompt": "hi", "scripted": {"temperature": 1}}, allow_scripted=True)


def test_invalid_request_body_shape():
    error = InvalidRequest("prompt: missing")
    assert error.to_json() == {"error": {"code": "invalid_request", "message": "prompt: missing"}}


# --- segmenters and speaker -------------------------------------------------------------------------------


def test_whole_reply_releases_everything_at_flush_only():
    segmenter = WholeReply()
    assert segmenter.feed("**Hello**  there. ") == []
    assert segmenter.feed("Bye") == []
    assert segmenter.flush() == "Hello there. Bye"
    assert segmenter.flush() is None


def test_whole_reply_keeps_its_lines_so_the_tts_ends_a_segment_at_each():
    segmenter = WholeReply()
    segmenter.feed("# Title\nBody **bold**  text.\n\n- item one\n```\ncode\n```\n")
    assert segmenter.flush() == "Title\nBody bold text.\nitem one"


def test_bidi_chunker_follows_the_voice_language():
    assert _chunker_language("ff_siwis") == "f" and _chunker_language("jf_alpha") == "j"
    assert _chunker_language("xx_unknown") == "a"
    assert _chunker_language("jf_alpha(2)+jf_nezumi(1)") == "j"  # a blend speaks its voices' language
    assert _chunker_language("af_bella++") == "a"  # malformed: left for the TTS to refuse


@pytest.mark.parametrize("voice", ["af_bella(2)+af_sky(1)", "af_sky+af_bella", "zf_xiaobei(.5)+zm_yunxi"])
def test_the_agent_takes_the_blends_the_server_takes(voice):
    # PROTOCOL.md §4.1: the agent checks a voice with the server's own code, so a blend is valid here too.
    assert parse_request({"prompt": "hi", "voice": voice}).voice == voice  # passed on as written


@pytest.mark.parametrize(
    ("voice", "says"),
    [
        ("zz_nobody", "is not one of Kokoro-82M's 54 voices"),
        ("af_bella+jf_alpha", "share one language"),
        ("af_bella+zz_nobody", 'unknown voice "zz_nobody"'),
        ("af_bella(0)+af_sky", "greater than 0"),
        ("af_a+af_b+af_c+af_d+af_e", "at most 4"),
    ],
)
def test_the_agent_refuses_the_voices_the_server_refuses(voice, says):
    with pytest.raises(InvalidRequest, match=re.escape(says)) as info:
        parse_request({"prompt": "hi", "voice": voice})
    assert info.value.code == "invalid_voice" and repr(voice) in str(info.value)
    with pytest.raises(InvalidVoiceError):  # the very check the server makes
        Voice.parse(voice, KOKORO_VOICES)


def test_speaker_waits_when_max_outstanding_requests_are_unanswered():
    session = StandInTts(stall=True)
    speaker = Speaker(session, voice="af_heart", speed=1.0, sample_rate=24000, max_outstanding=2)

    async def scenario():
        await speaker.say("One.")
        await speaker.say("Two.")
        third = asyncio.create_task(speaker.say("Three."))
        await asyncio.sleep(0.05)
        blocked = not third.done()
        third.cancel()
        return blocked, speaker.outstanding

    assert run(scenario()) == (True, 2)
    assert session.server.pending_ids  # the two requests reached the server and wait there


def test_speaker_yields_all_audio_and_records_segments():
    session = StandInTts(part_size=5)
    speaker = Speaker(session, voice="af_heart", speed=1.0, sample_rate=24000)

    async def scenario():
        await speaker.say("One.")
        await speaker.say("Two two.")
        speaker.finish()
        speaker.finish()  # idempotent
        with pytest.raises(RuntimeError):
            await speaker.say("late")
        return b"".join([pcm async for pcm in speaker.audio()])

    assert run(scenario()) == speech_for("One.") + speech_for("Two two.")
    assert [(s.text, s.audio_bytes) for s in speaker.segments] == [
        ("One.", len(speech_for("One."))),
        ("Two two.", len(speech_for("Two two."))),
    ]


def test_speaker_reports_a_stream_that_ends_with_answers_owed():
    class EndsEarly(StandInTts):
        def _pump(self):
            self._end(None)

    speaker = Speaker(EndsEarly(), voice="af_heart", speed=1.0, sample_rate=24000)

    async def scenario():
        await speaker.say("One.")
        return [pcm async for pcm in speaker.audio()]

    with pytest.raises(TtsFailure, match="1 request"):
        run(scenario())


# --- settings and command lines ----------------------------------------------------------------------------


def test_settings_from_environment():
    settings = AgentSettings.from_env(
        {
            "AGENT_SCRIPTED": "1",
            "BEDROCK_MODEL_ID": "m",
            "KOKORO_ENDPOINT_NAME": "ep",
            "KOKORO_ENDPOINT_REGION": "eu-west-1",
            "KOKORO_ENDPOINT_URL": "https://127.0.0.1:1",
        }
    )
    assert settings.scripted and settings.model_id == "m"
    assert settings.endpoint == TtsEndpoint("ep", "https://127.0.0.1:1", "eu-west-1")
    assert not settings.allow_endpoint_url
    assert AgentSettings.from_env({}).endpoint.name == "kokoro-tts"


def test_command_line_flags_win_over_environment(monkeypatch):
    monkeypatch.setenv("KOKORO_ENDPOINT_NAME", "from-env")
    monkeypatch.setenv("KOKORO_ENDPOINT_REGION", "us-west-2")
    args = agent_parser().parse_args(["--scripted", "--endpoint", "from-flag", "--first-token-ms", "50"])
    settings = settings_from_args(args)
    assert settings.scripted and settings.first_token_s == 0.05
    assert settings.endpoint == TtsEndpoint("from-flag", None, "us-west-2")


# --- demo arithmetic ---------------------------------------------------------------------------------------


def test_demo_compare_and_report():
    results = [
        Trial("bidi", first_audio_ms=100.0),
        Trial("bidi", first_audio_ms=300.0),
        Trial("batch", first_audio_ms=500.0),
        Trial("batch", first_audio_ms=700.0),
        Trial("batch", first_audio_ms=10.0, error="tts_error: boom"),  # failed: not counted
    ]
    assert compare(results) == {"bidi_ms": 200.0, "batch_ms": 600.0, "ratio": 3.0}
    out = io.StringIO()
    assert report(results, out) == 1  # one stream failed
    assert "batch / bidi = 3.00x" in out.getvalue() and "tts_error: boom" in out.getvalue()
    assert report(results[:4], io.StringIO()) == 0


def test_demo_accepts_a_foreign_namespace(monkeypatch):
    """agent-infra may hand over its own namespace, without the demo's optional flags."""
    import reference_agent.demo as demo

    seen = {}

    async def fake_demo(namespace, out):
        seen.update(vars(namespace))
        return 0

    monkeypatch.setattr(demo, "_demo", fake_demo)
    assert demo.main(argparse.Namespace(endpoint_url="http://x", prompt="p", voice=None, trials=2)) == 0
    assert seen["voice"] == "af_heart" and seen["warmup"] == 1 and seen["trials"] == 2
    assert demo.main(["--trials", "0"]) == 2


@pytest.mark.parametrize("said", [[], ["One."]])
def test_speaker_finishing_with_nothing_owed_ends_audio_at_once(said):
    """finish() while audio() waits on a silent stream (everything answered, or nothing asked)."""
    session = StandInTts()
    speaker = Speaker(session, voice="af_heart", speed=1.0, sample_rate=24000, idle_timeout_s=GUARD_S)

    async def scenario():
        chunks: list[bytes] = []

        async def listen():
            async for pcm in speaker.audio():
                chunks.append(pcm)

        listener = asyncio.create_task(listen())
        for text in said:
            await speaker.say(text)
        while speaker.outstanding:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)  # the listener is now waiting for a part
        speaker.finish()
        await listener
        return chunks

    assert b"".join(run(scenario())) == b"".join(speech_for(t) for t in said)


# --- the pipeline without the app ---------------------------------------------------------------------------


def _pipeline(factory, **model_options):
    from reference_agent.pipeline import PipelineSettings

    options = {"first_token_s": 0.01, "tokens_per_s": 250.0, **model_options}
    return PipelineSettings(
        agent_factory=lambda request: Agent(model=ScriptedModel(**options), callback_handler=None),
        tts_connect=factory,
        endpoint=TtsEndpoint("kokoro"),
    )


def test_closing_the_stream_early_cancels_the_work_and_closes_the_tts():
    """The caller went away: BedrockAgentCoreApp closes the generator (REFERENCE.md §5)."""
    from agent_standin import StandInFactory

    from reference_agent.pipeline import run_agent

    factory = StandInFactory()

    async def scenario():
        events = []
        stream = run_agent(AgentRequest(prompt="p"), _pipeline(factory), request_id="r")
        async for event in stream:
            events.append(event)
            if event["type"] == "audio_chunk":
                break
        await stream.aclose()
        return events

    events = run(scenario())
    assert events[-1]["type"] == "audio_chunk"
    assert factory.sessions[0].closed and factory.sessions[0].input_closed


def test_a_model_that_cannot_be_built_is_an_llm_error():
    from agent_standin import StandInFactory

    from reference_agent.pipeline import PipelineSettings, run_agent

    def broken(request):
        raise ValueError("no such model")

    settings = PipelineSettings(agent_factory=broken, tts_connect=StandInFactory(), endpoint=TtsEndpoint("k"))

    async def scenario():
        return [e async for e in run_agent(AgentRequest(prompt="p"), settings, request_id="r")]

    events = run(scenario())
    assert check_events(events, expect="error") == []
    assert events[-1]["code"] == "llm_error" and "no such model" in events[-1]["message"]


def test_a_reply_with_nothing_to_speak_still_ends_cleanly():
    from agent_standin import StandInFactory

    from reference_agent.pipeline import run_agent

    factory = StandInFactory()

    async def scenario():
        stream = run_agent(AgentRequest(prompt="p"), _pipeline(factory, reply="  ...  "), request_id="r")
        return [e async for e in stream]

    events = run(scenario())
    assert check_events(events, expect="success") == []
    assert [e["type"] for e in events][-2:] == ["audio_stream_end", "agent_end"]


def _invocation_lines(caplog) -> list[dict]:
    return [
        getattr(r, "kokoro_fields", {})
        for r in caplog.records
        if r.name == "reference_agent.pipeline" and r.getMessage() == "invocation"
    ]


def test_each_invocation_is_one_log_line_without_the_prompt(caplog):
    from agent_standin import StandInFactory

    from reference_agent.pipeline import run_agent

    caplog.set_level("INFO", logger="reference_agent")
    prompt = "Tell me my secret code please."

    async def scenario():
        ok = [
            e
            async for e in run_agent(
                AgentRequest(prompt=prompt), _pipeline(StandInFactory()), request_id="r1"
            )
        ]
        stream = run_agent(
            AgentRequest(prompt="p", mode="batch"), _pipeline(StandInFactory()), request_id="r2"
        )
        async for event in stream:
            if event["type"] == "text_delta":
                break
        await stream.aclose()
        return ok

    events = run(scenario())
    first, second = _invocation_lines(caplog)
    assert (first["request_id"], first["mode"], first["status"]) == ("r1", "bidi", "completed")
    assert first["prompt_chars"] == len(prompt) and first["first_audio_ms"] == events[-1]["first_audio_ms"]
    assert first["audio_s"] > 0 and first["chunks"] == sum(e["type"] == "audio_chunk" for e in events)
    assert (second["request_id"], second["mode"], second["status"]) == ("r2", "batch", "disconnected")
    assert prompt not in caplog.text and "secret" not in str(_invocation_lines(caplog))
