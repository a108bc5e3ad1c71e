"""Barge-in: the agent's conversation history keeps only what the listener heard (issue #26 point 2).

The scripted model writes a known reply; the in-process TTS stand-in times each word of its audio
(``agent_standin.words_for``); the test interrupts at a known playback position and checks the history,
and what the model of the next turn is given. The reply's audio is the requests' audio end to end, so a
position is the audio of the sentences before plus a word's end within the one played.
"""

from __future__ import annotations

import asyncio
import copy
import re

import pytest
from agent_standin import SAMPLES_PER_CHAR, Answerer, StandInFactory, StandInTts, speech_for, words_for
from strands import Agent

from reference_agent.checks import check_events
from reference_agent.conversation import Conversation, heard_reply
from reference_agent.pipeline import PipelineSettings, run_agent
from reference_agent.request import AgentRequest
from reference_agent.scripted import ScriptedModel
from reference_agent.tts import TtsEndpoint

GUARD_S = 30.0
RATE = 24_000
S1 = "Hello there friend."
S2 = "The second sentence has six words."
S3 = "This third one is never heard."
REPLY = f"{S1} {S2} {S3}"


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, GUARD_S))


def ms(text: str) -> float:
    """Milliseconds of the stand-in's audio for ``text``."""
    return 1000.0 * SAMPLES_PER_CHAR * len(text) / RATE


def word_end_ms(text: str, word: str) -> float:
    """Where ``word`` of ``text`` ends in the stand-in's audio for ``text``, in milliseconds."""
    return 1000.0 * next(w.end_s for w in words_for(text, RATE) if w.word == word)


class RecordingModel(ScriptedModel):
    """The scripted model that records the history it is given and can stop writing after ``hold_after``
    pieces (it then waits until the agent stops it)."""

    def __init__(self, reply: str, seen: list, hold_after: int | None = None) -> None:
        calls = 0

        async def sleep(seconds: float) -> None:
            nonlocal calls
            calls += 1  # call 1 precedes piece 0, call k+1 precedes piece k
            if hold_after is not None and calls > hold_after:
                await asyncio.Event().wait()  # never set: the barge-in cancels the writer here

        super().__init__(reply, first_token_s=0.0, tokens_per_s=1000.0, sleep=sleep)
        self.seen = seen

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        self.seen.append(copy.deepcopy(messages))
        async for event in super().stream(messages, tool_specs, system_prompt, **kwargs):
            yield event


def settings(factory, reply: str = REPLY, seen: list | None = None, hold_after: int | None = None):
    seen = [] if seen is None else seen
    return PipelineSettings(
        agent_factory=lambda request: Agent(
            model=RecordingModel(reply, seen, hold_after), callback_handler=None
        ),
        tts_connect=factory,
        endpoint=TtsEndpoint("kokoro"),
    )


async def turn(conversation, pipeline, prompt="p", mode="bidi", barge_at_bytes=None, played_ms=None):
    """Run one turn; once ``barge_at_bytes`` of audio have arrived, barge in at ``played_ms``."""
    events, received = [], 0
    async for event in run_agent(
        AgentRequest(prompt=prompt, mode=mode), pipeline, request_id="r", conversation=conversation
    ):
        events.append(event)
        if event["type"] == "audio_chunk":
            received += len(_pcm(event))
            if barge_at_bytes is not None and received >= barge_at_bytes:
                conversation.barge_in(played_ms)
                barge_at_bytes = None
    return events


def _pcm(event) -> bytes:
    import base64

    return base64.b64decode(event["data"])


def _assistant(text):
    return {"role": "assistant", "content": [{"text": text}]}


def _user(*texts):
    return {"role": "user", "content": [{"text": t} for t in texts]}


@pytest.mark.parametrize("mode", ["bidi", "stream"])
def test_a_barge_in_while_the_model_writes_keeps_the_words_heard_and_stops_the_model(mode):
    factory = StandInFactory()
    conversation = Conversation()
    seen: list = []
    # 3 + 6 pieces of S1 and S2, and the first of S3, which releases S2 to the TTS; then the model waits.
    pipeline = settings(factory, seen=seen, hold_after=10)
    played = ms(S1) + word_end_ms(S2, "sentence")
    events = run(
        turn(
            conversation,
            pipeline,
            mode=mode,
            barge_at_bytes=len(speech_for(S1) + speech_for(S2)),
            played_ms=played,
        )
    )
    assert check_events(events, expect="success") == []
    # The model stopped: S3 never reached the TTS (the utterance got its first word, never spoken).
    assert factory.sessions[0].texts == ([S1, S2] if mode == "bidi" else [f"{S1} {S2} This "])
    assert events[-1]["type"] == "agent_end" and events[-1]["interrupted"] is True
    assert conversation.messages == [_user("p"), _assistant(f"{S1} The second sentence")]

    # The next turn's model is given the history as heard, then the user's new words.
    run(turn(conversation, settings(StandInFactory(), reply="Sure.", seen=seen), prompt="q"))
    assert seen[-1] == [_user("p"), _assistant(f"{S1} The second sentence"), _user("q")]
    assert conversation.messages[-1] == _assistant("Sure.")


def test_a_barge_in_after_the_reply_was_written_trims_it_to_the_position_played():
    conversation = Conversation()
    events = run(turn(conversation, settings(StandInFactory())))
    assert "interrupted" not in events[-1]
    assert conversation.last_reply == REPLY  # not interrupted: the whole reply
    conversation.barge_in(ms(S1) + word_end_ms(S2, "The") + 0.1)
    assert conversation.last_reply == f"{S1} The"
    conversation.barge_in(ms(S1) - 0.1)  # an earlier report wins: the listener heard less
    assert conversation.last_reply == "Hello there"


def test_a_barge_in_before_a_word_was_heard_leaves_no_reply_and_the_user_words_join():
    conversation = Conversation()
    seen: list = []
    run(turn(conversation, settings(StandInFactory(), seen=seen)))
    conversation.barge_in(0)
    assert conversation.messages == [_user("p")]
    run(turn(conversation, settings(StandInFactory(), reply="Yes.", seen=seen), prompt="q"))
    assert seen[-1] == [_user("p\nq")]  # the roles still alternate
    assert conversation.messages == [_user("p", "q"), _assistant("Yes.")]


class _HoldingAnswerer(Answerer):
    """Speaks the first sentence of a request at once and holds the rest until a cancel: the request is
    active, its audio partly sent, when the barge-in comes."""

    def __init__(self) -> None:
        super().__init__()
        self.held: str | None = None
        self.held_words: list = []

    def _answer(self) -> None:
        server = self.server
        if self.held is not None:
            if not server.is_cancelled(self.held):
                return
            server.complete(self.held, self.held_words)  # cancelled: the words of the audio sent (§5.3)
            self.held = None
        request = server.next_request()
        if request is None:
            return
        rid = request.request_id
        server.start(rid)
        first = re.split(r"(?<=[.!?])\s+", request.text, maxsplit=1)[0]
        server.audio(rid, speech_for(first))
        self.held, self.held_words = rid, words_for(first, request.sample_rate)


def test_a_barge_in_cancels_the_request_being_spoken_and_keeps_only_the_words_it_sent():
    def holding() -> StandInTts:
        tts = StandInTts()
        tts.answerer = _HoldingAnswerer()
        tts.server, tts.texts, tts.messages = tts.answerer.server, tts.answerer.texts, tts.answerer.messages
        return tts

    sessions: list[StandInTts] = []

    async def connect(endpoint):
        sessions.append(holding())
        return sessions[-1]

    conversation = Conversation()
    reply = f"{S1} {S2}"
    # batch: the whole reply is one request; its first sentence is spoken, then the listener speaks after
    # a minute of it (more than was ever sent): only the words whose audio was sent were heard.
    events = run(
        turn(
            conversation,
            settings(connect, reply=reply),
            mode="batch",
            barge_at_bytes=len(speech_for(S1)),
            played_ms=60_000,
        )
    )
    assert check_events(events, expect="success") == []
    assert {"type": "cancel"} in sessions[0].messages
    assert events[-1]["interrupted"] is True
    end = next(e for e in events if e["type"] == "audio_stream_end")
    segments = [{k: v for k, v in s.items() if k != "words"} for s in end["segments"]]  # §14.4 aside
    assert segments == [{"text": reply, "audio_bytes": len(speech_for(S1))}]
    assert conversation.last_reply == S1


def test_heard_reply_lays_the_requests_end_to_end():
    from protocol.messages import SynthesisComplete

    def complete(text):
        return SynthesisComplete(
            request_id="x",
            status="completed",
            audio_bytes=2 * SAMPLES_PER_CHAR * len(text),
            total_duration_s=ms(text) / 1000,
            elapsed_s=0.1,
            words=tuple(words_for(text, RATE)),
        )

    spoken = [(S1, complete(S1)), (S2, complete(S2))]
    assert heard_reply(spoken, 0) == ""
    assert heard_reply(spoken, ms(S1)) == S1
    assert heard_reply(spoken, ms(S1) + word_end_ms(S2, "has")) == f"{S1} The second sentence has"
    assert heard_reply(spoken, 10**6) == f"{S1} {S2}"
    with pytest.raises(ValueError):
        heard_reply(spoken, -5)
    with pytest.raises(ValueError):
        Conversation().barge_in(float("inf"))
    with pytest.raises(RuntimeError, match="no reply"):
        Conversation().barge_in(10)


def test_the_app_keeps_a_session_s_history_and_trims_it_at_a_barge_in():
    """``POST /invocations`` with the AgentCore session header: the second turn's ``barge_in`` trims the
    first reply to what was heard before the model answers the new prompt; without the header a barge-in
    is refused (there is no conversation to trim)."""
    from starlette.testclient import TestClient

    from reference_agent.app import AgentSettings, create_app

    seen: list = []
    app = create_app(
        AgentSettings(scripted=True),
        tts_connect=StandInFactory(),
        agent_factory=lambda request: Agent(model=RecordingModel(REPLY, seen), callback_handler=None),
    )
    header = {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": "s" * 40}
    with TestClient(app) as client:

        def post(payload, headers=header):
            with client.stream("POST", "/invocations", json=payload, headers=headers) as response:
                return response.status_code, b"".join(response.iter_bytes())

        assert post({"prompt": "p"})[0] == 200
        played = ms(S1) + word_end_ms(S2, "second")
        status, _ = post({"prompt": "q", "barge_in": {"played_ms": played}})
        assert status == 200
        assert seen[-1] == [_user("p"), _assistant(f"{S1} The second"), _user("q")]
        status, body = post({"prompt": "r", "barge_in": {"played_ms": 5}}, headers={})
        assert status == 400 and b"session header" in body
        status, body = post({"prompt": "r", "barge_in": {"played_ms": -1}})
        assert status == 400 and b"barge_in" in body
