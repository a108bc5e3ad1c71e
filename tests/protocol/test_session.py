"""ServerSession and ClientSession: the rules of PROTOCOL.md §4–§7 as state machines."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.client_session import ClientSession, ProtocolViolation
from protocol.limits import Limits
from protocol.messages import Capabilities, LanguageInfo, ServerInfo, VoiceInfo
from protocol.server_output import (
    AudioReceived,
    CapabilitiesReceived,
    ErrorReceived,
    SynthesisCompleted,
    SynthesisStarted,
)
from protocol.server_session import (
    CloseRequested,
    RequestAccepted,
    RequestCancelled,
    ServerSession,
    SessionStateError,
)
from protocol.server_state import SessionState

PCM = bytes(range(256)) * 4  # 1024 bytes, 512 samples


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def controls(frames):
    return [json.loads(f) for f in frames if isinstance(f, str)]


def request(text="Hello there.", **fields) -> bytes:
    return json.dumps({"text": text, **fields}).encode()


def run_to_completion(server: ServerSession, client: ClientSession, pcm: bytes = PCM) -> list:
    """Answer every pending request the way an adapter would, feeding all output to the client."""
    events = []
    while (req := server.next_request()) is not None:
        server.start(req.request_id)
        server.audio(req.request_id, pcm)
        server.complete(req.request_id)
    for frame in server.data_to_send():
        events += client.receive_message(frame)
    return events


def test_one_request_brackets_its_audio():
    clock = FakeClock()
    server = ServerSession(clock=clock)
    client = ClientSession()
    rid, frame = client.request("Hello there.", voice="af_heart")
    (event,) = server.receive_frame(frame)
    assert isinstance(event, RequestAccepted) and event.request.request_id == rid
    assert server.next_request().text == "Hello there."
    server.start(rid)
    clock.t += 1.5
    assert server.audio(rid, PCM)
    server.complete(rid)
    frames = server.data_to_send()
    assert isinstance(frames[0], str) and isinstance(frames[-1], str)
    assert b"".join(f for f in frames if isinstance(f, bytes)) == PCM
    start, complete = controls(frames)
    assert start == {
        "type": "synthesis_start",
        "request_id": rid,
        "sample_rate": 24000,
        "encoding": "pcm_s16le",
        "channels": 1,
        "voice": "af_heart",
        "speed": 1.0,
    }
    assert complete["status"] == "completed"
    assert complete["audio_bytes"] == len(PCM)
    assert complete["total_duration_s"] == pytest.approx(len(PCM) / 2 / 24000)
    assert complete["elapsed_s"] == pytest.approx(1.5)
    events = [e for f in frames for e in client.receive_message(f)]
    assert [type(e) for e in events] == [SynthesisStarted, AudioReceived, SynthesisCompleted]
    assert client.outstanding == [] and server.next_request() is None


def test_elapsed_is_rounded_to_the_millisecond():
    """Issue 15: ``elapsed_s`` is 0.412, not 0.41183419300033723 (§5.3)."""
    clock = FakeClock()
    server = ServerSession(clock=clock)
    client = ClientSession()
    rid, frame = client.request("Hello there.")
    server.receive_frame(frame)
    server.start(rid)
    clock.t += 0.41183419300033723
    server.complete(rid)
    _, complete = controls(server.data_to_send())
    assert json.dumps(complete["elapsed_s"]) == "0.412"


def test_both_frame_types_are_accepted():
    server = ServerSession()
    assert isinstance(server.receive_frame(request("binary frame")), list)
    assert server.receive_frame(json.dumps({"text": "text frame"}))  # str = TEXT frame
    assert [p for p in server.pending_ids] == ["r1", "r2"]


def test_bad_message_gets_one_error_and_the_session_lives_on():
    server = ServerSession()
    assert server.receive_frame(b"\xff\xfe not utf-8") == []
    (error,) = controls(server.data_to_send())
    assert error["type"] == "error" and error["code"] == "invalid_utf8" and error["fatal"] is False
    assert server.state is SessionState.OPEN
    assert isinstance(server.receive_frame(request())[0], RequestAccepted)


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b"", "invalid_json"),
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "not_an_object"),
        (b'{"type": "dance"}', "unknown_type"),
        (b'{"text": "   "}', "text_required"),
        (b'{"text": "hi", "speed": 9}', "invalid_speed"),
        (b'{"text": "hi", "sample_rate": 44100}', "invalid_sample_rate"),
    ],
)
def test_registry_codes_reach_the_wire(frame, code):
    server = ServerSession()
    assert server.receive_frame(frame) == []
    (error,) = controls(server.data_to_send())
    assert error["code"] == code


def test_unknown_voice_is_checked_against_the_backend_voices():
    server = ServerSession(known_voices={"af_heart"})
    server.receive_frame(request(voice="zz_nobody", request_id="v"))
    (error,) = controls(server.data_to_send())
    assert (error["code"], error["request_id"]) == ("invalid_voice", "v")


def test_server_assigns_ids_that_never_collide_with_client_ids():
    server = ServerSession()
    server.receive_frame(request(request_id="r1"))
    (event,) = server.receive_frame(request())
    assert event.request.request_id == "r2"


def test_duplicate_in_flight_id_is_refused_but_reusable_after_completion():
    server = ServerSession()
    client = ClientSession()
    _, frame = client.request("one", request_id="same")
    server.receive_frame(frame)
    assert server.receive_frame(frame) == []
    (error,) = controls(server.data_to_send())
    assert error["code"] == "duplicate_request_id"
    run_to_completion(server, client)
    assert server.receive_frame(frame)  # finished ids may be used again


def test_queue_full_counts_queued_and_active_requests():
    server = ServerSession(limits=Limits(max_queue=2))
    server.receive_frame(request(request_id="a"))
    server.receive_frame(request(request_id="b"))
    assert server.receive_frame(request(request_id="c")) == []
    (error,) = controls(server.data_to_send())
    assert (error["code"], error["request_id"]) == ("queue_full", "c")
    server.start("a")
    server.complete("a")
    assert server.receive_frame(request(request_id="c"))


def test_cancel_active_request_stops_audio_and_completes_cancelled():
    server = ServerSession()
    client = ClientSession()
    rid, frame = client.request("long text")
    server.receive_frame(frame)
    server.start(rid)
    assert server.audio(rid, PCM)
    (event,) = server.receive_frame(client.cancel(rid))
    assert event == RequestCancelled(rid, started=True)
    assert server.audio(rid, PCM) is False  # nothing more is queued
    server.complete(rid)
    frames = server.data_to_send()
    events = [e for f in frames for e in client.receive_message(f)]
    assert events[-1].frame.status == "cancelled"
    assert events[-1].frame.audio_bytes == len(PCM)


def test_cancel_of_queued_request_is_answered_in_its_turn_with_an_empty_bracket():
    server = ServerSession()
    client = ClientSession()
    first, f1 = client.request("first")
    second, f2 = client.request("second")
    third, f3 = client.request("third")
    for f in (f1, f2, f3):
        server.receive_frame(f)
    server.start(first)
    (event,) = server.receive_frame(client.cancel(second))
    assert event == RequestCancelled(second, started=False)
    assert controls(server.data_to_send()) == [controls([server_start_json(first)])[0]]
    server.complete(first)
    # completing `first` answers the cancelled `second` at once, so `third` is next
    assert server.next_request().request_id == third
    frames = server.data_to_send()
    kinds = [(c["type"], c["request_id"], c.get("status")) for c in controls(frames)]
    assert kinds == [
        ("synthesis_complete", first, "completed"),
        ("synthesis_start", second, None),
        ("synthesis_complete", second, "cancelled"),
    ]
    server.start(third)
    server.complete(third)
    for frame in [server_start_json(first), *frames, *server.data_to_send()]:
        client.receive_message(frame)
    assert client.outstanding == []


def server_start_json(rid: str) -> str:
    return json.dumps(
        {
            "type": "synthesis_start",
            "request_id": rid,
            "sample_rate": 24000,
            "encoding": "pcm_s16le",
            "channels": 1,
            "voice": "af_heart",
            "speed": 1.0,
        },
        separators=(",", ":"),
    )


def test_cancel_of_head_before_start_is_answered_immediately_and_start_reports_the_race():
    server = ServerSession()
    server.receive_frame(request(request_id="a"))
    server.receive_frame(request(request_id="b"))
    server.receive_frame(b'{"type": "cancel", "request_id": "a"}')
    statuses = [(c["type"], c.get("status")) for c in controls(server.data_to_send())]
    assert statuses == [("synthesis_start", None), ("synthesis_complete", "cancelled")]
    assert server.start("a") is False  # the synthesizer lost the race: harmless
    assert server.audio("a", PCM) is False
    assert server.next_request().request_id == "b"


def test_cancel_without_id_cancels_everything_pending():
    server = ServerSession()
    for rid in "abc":
        server.receive_frame(request(request_id=rid))
    server.start("a")
    events = server.receive_frame(b'{"type": "cancel"}')
    assert events == [RequestCancelled("a", True), RequestCancelled("b", False), RequestCancelled("c", False)]
    server.complete("a")
    assert server.pending_ids == [] and server.next_request() is None
    statuses = [c.get("status") for c in controls(server.data_to_send()) if c["type"] == "synthesis_complete"]
    assert statuses == ["cancelled"] * 3


def test_cancel_of_unknown_request_is_a_per_message_error():
    server = ServerSession()
    assert server.receive_frame(b'{"type": "cancel", "request_id": "ghost"}') == []
    (error,) = controls(server.data_to_send())
    assert (error["code"], error["request_id"], error["fatal"]) == ("unknown_request", "ghost", False)


def test_close_drains_accepted_work_then_finishes_and_ignores_later_messages():
    server = ServerSession()
    client = ClientSession()
    _, frame = client.request("last words")
    server.receive_frame(frame)
    assert server.receive_frame(client.close()) == [CloseRequested()]
    assert server.state is SessionState.DRAINING and not server.finished
    assert server.receive_frame(request("too late")) == []
    assert server.data_to_send() == []  # ignored silently (§7.1)
    run_to_completion(server, client)
    assert server.finished and server.close_code == 1000
    assert client.outstanding == []


def test_fail_reports_internal_error_then_a_failed_bracket():
    server = ServerSession()
    client = ClientSession()
    rid, frame = client.request("boom")
    server.receive_frame(frame)
    server.fail(rid, "backend exploded")
    events = [e for f in server.data_to_send() for e in client.receive_message(f)]
    assert isinstance(events[0], ErrorReceived) and events[0].frame.request_id == rid
    assert isinstance(events[1], SynthesisStarted)
    assert events[2].frame.status == "failed"
    assert server.state is SessionState.OPEN


def test_abort_is_fatal():
    server = ServerSession()
    server.abort()
    (error,) = controls(server.data_to_send())
    assert error["fatal"] is True and error["code"] == "internal_error"
    assert server.finished and server.close_code == 1011
    assert server.receive_frame(request()) == []


def test_adapter_misuse_raises_session_state_error():
    server = ServerSession()
    server.receive_frame(request(request_id="a"))
    server.receive_frame(request(request_id="b"))
    with pytest.raises(SessionStateError):
        server.start("b")  # not its turn
    with pytest.raises(SessionStateError):
        server.audio("a", PCM)  # before start
    server.start("a")
    with pytest.raises(SessionStateError):
        server.start("a")
    with pytest.raises(ValueError):
        server.audio("a", b"\x00")  # half a sample


def test_audio_that_looks_like_json_is_never_sent_as_a_control_frame():
    server = ServerSession()
    client = ClientSession()
    rid, frame = client.request("x")
    server.receive_frame(frame)
    server.start(rid)
    server.audio(rid, b"{}")  # PCM sample 32123 (REFERENCE §3)
    server.audio(rid, b'{"a":1} ')
    server.complete(rid)
    events = [e for f in server.data_to_send() for e in client.receive_message(f)]
    assert isinstance(events[-1], SynthesisCompleted)


# --- client-side violations -------------------------------------------------------------------------


def started(client: ClientSession, rid: str) -> None:
    client.receive_message(server_start_json(rid))


def complete_json(rid: str, audio_bytes: int) -> str:
    return json.dumps(
        {
            "type": "synthesis_complete",
            "request_id": rid,
            "status": "completed",
            "audio_bytes": audio_bytes,
            "total_duration_s": audio_bytes / 48000,
            "elapsed_s": 0.1,
        }
    )


def test_client_flags_audio_outside_a_bracket():
    client = ClientSession()
    client.request("x")
    with pytest.raises(ProtocolViolation, match="outside") as exc:
        client.receive_message(PCM)
    assert exc.value.section == "§6.1"


def test_client_flags_interleaving_and_out_of_order_answers():
    client = ClientSession()
    a, _ = client.request("a")
    b, _ = client.request("b")
    with pytest.raises(ProtocolViolation, match="out of order"):
        client.receive_message(server_start_json(b))
    started(client, a)
    with pytest.raises(ProtocolViolation, match="still active"):
        client.receive_message(server_start_json(b))


def test_client_flags_odd_frames_and_byte_count_mismatch():
    client = ClientSession()
    a, _ = client.request("a")
    started(client, a)
    with pytest.raises(ProtocolViolation, match="whole samples"):
        client.receive_message(b"\x01\x02\x03")
    client.receive_message(b"\x01\x02")
    with pytest.raises(ProtocolViolation, match="audio_bytes"):
        client.receive_message(complete_json(a, 4))


def test_client_reassembles_payload_parts_and_misaligned_audio_when_frames_are_resplit():
    client = ClientSession(check_frames=False)
    a, _ = client.request("a")
    start = server_start_json(a).encode()
    assert client.receive_part(start[:7], complete=False) == []
    assert isinstance(client.receive_part(start[7:])[0], SynthesisStarted)
    pieces = [PCM[:3], PCM[3:10], PCM[10:]]
    audio = b"".join(e.pcm for p in pieces for e in client.receive_message(p))
    assert audio == PCM
    (done,) = client.receive_message(complete_json(a, len(PCM)))
    assert isinstance(done, SynthesisCompleted)


def test_client_drops_a_rejected_request_from_its_expectations():
    client = ClientSession()
    a, _ = client.request("a")
    b, _ = client.request("b")
    client.receive_message(
        json.dumps(
            {"type": "error", "code": "invalid_voice", "message": "no", "request_id": a, "fatal": False}
        )
    )
    assert client.outstanding == [b]


# --- describe (§4.4) ----------------------------------------------------------------------------------

CAPABILITIES = Capabilities.from_limits(
    Limits(),
    server=ServerInfo("test", "1"),
    voices=(VoiceInfo.kokoro("af_heart"), VoiceInfo.kokoro("ff_siwis")),
    languages=(LanguageInfo.kokoro("a", word_timings=True), LanguageInfo.kokoro("f", word_timings=False)),
)


def test_describe_is_answered_at_once_inside_an_open_bracket_and_changes_nothing_else():
    server = ServerSession(
        capabilities=CAPABILITIES,
        known_voices={"af_heart", "ff_siwis"},
        utterances=True,
        marks=True,
        voice_blends=True,
        lexicon=True,
    )
    client = ClientSession()
    rid, frame = client.request("Hello there.")
    server.receive_frame(frame)
    server.start(rid)
    server.audio(rid, PCM)
    events = server.receive_frame(client.describe("d1"))
    assert events == []  # nothing for the adapter to do
    server.audio(rid, PCM)
    server.complete(rid)
    frames = server.data_to_send()
    kinds = [json.loads(f)["type"] if isinstance(f, str) else "audio" for f in frames]
    assert kinds == ["synthesis_start", "audio", "capabilities", "audio", "synthesis_complete"]
    received = [e for f in frames for e in client.receive_message(f)]
    answers = [e.frame for e in received if isinstance(e, CapabilitiesReceived)]
    assert answers == [CAPABILITIES.answering("d1")]
    assert [e.frame.audio_bytes for e in received if isinstance(e, SynthesisCompleted)] == [2 * len(PCM)]
    assert server.pending_ids == [] and server.state is SessionState.OPEN


def test_describe_without_request_id_is_answered_with_null_and_ids_are_not_request_ids():
    server = ServerSession(capabilities=CAPABILITIES)
    server.receive_frame(request(request_id="x"))
    server.receive_frame(b'{"type":"describe","request_id":"x"}')  # not a duplicate_request_id
    server.receive_frame(b'{"type":"describe"}')
    answers = [json.loads(f) for f in server.data_to_send()]
    assert [(a["type"], a["request_id"]) for a in answers] == [("capabilities", "x"), ("capabilities", None)]
    assert server.pending_ids == ["x"]


def test_a_session_without_capabilities_refuses_describe_as_a_version_1_server_does():
    server = ServerSession()
    client = ClientSession()
    server.receive_frame(client.describe("d1"))
    (frame,) = controls(server.data_to_send())
    assert (frame["type"], frame["code"], frame["request_id"], frame["fatal"]) == (
        "error",
        "unknown_type",
        "d1",
        False,
    )
    (event,) = client.receive_message(json.dumps(frame))
    assert isinstance(event, ErrorReceived)
    # The refusal settles the client's expectation: a later capabilities frame would be unasked for.
    with pytest.raises(ProtocolViolation, match=r"§4\.4"):
        client.receive_message(CAPABILITIES.to_json())


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b'{"type":"describe","request_id":""}', "invalid_field"),
        (b'{"type":"describe","request_id":7}', "invalid_field"),
    ],
)
def test_a_malformed_describe_is_refused_per_message(frame, code):
    server = ServerSession(capabilities=CAPABILITIES)
    server.receive_frame(frame)
    (answer,) = controls(server.data_to_send())
    assert (answer["type"], answer["code"]) == ("error", code)
    assert server.state is SessionState.OPEN


def test_describe_after_close_is_ignored():
    server = ServerSession(capabilities=CAPABILITIES)
    server.receive_frame(ClientSession.close())
    server.receive_frame(b'{"type":"describe"}')
    assert server.data_to_send() == []


def test_client_flags_capabilities_nobody_asked_for():
    with pytest.raises(ProtocolViolation, match=r"§4\.4"):
        ClientSession().receive_message(CAPABILITIES.to_json())


# --- random sessions ---------------------------------------------------------------------------------

BAD_FRAMES = [b"", b"\xc3\x28", b"[]", b"nope", b'{"type":"x"}', b'{"text":""}', b'{"text":"a","speed":0}']


class SessionMachine(RuleBasedStateMachine):
    """Random client actions and adapter progress; a strict ClientSession checks every frame sent."""

    def __init__(self) -> None:
        super().__init__()
        self.server = ServerSession(
            limits=Limits(max_queue=4, max_audio_frame_bytes=64), capabilities=CAPABILITIES
        )
        self.client = ClientSession()
        self.accepted: list[str] = []
        self.completed: list[str] = []
        self.errors = 0
        self.closed = False
        self.describes = 0
        self.capabilities = 0

    def pump(self) -> None:
        for frame in self.server.data_to_send():
            for event in self.client.receive_message(frame):
                if isinstance(event, SynthesisCompleted):
                    self.completed.append(event.frame.request_id)
                elif isinstance(event, ErrorReceived):
                    self.errors += 1
                elif isinstance(event, CapabilitiesReceived):
                    self.capabilities += 1

    @rule(text=st.text(min_size=1, max_size=20).filter(str.strip), use_text_frame=st.booleans())
    def send_request(self, text, use_text_frame):
        if self.closed:
            frame = request(text)  # ignored after close (§7.1): nothing will answer it
        else:
            _, frame = self.client.request(text)  # a queue_full refusal removes it again
        events = self.server.receive_frame(frame.decode() if use_text_frame else frame)
        self.accepted += [e.request.request_id for e in events if isinstance(e, RequestAccepted)]
        self.pump()

    @rule(frame=st.sampled_from(BAD_FRAMES))
    def send_garbage(self, frame):
        before = self.errors
        assert self.server.receive_frame(frame) == []
        self.pump()
        if not self.closed:
            assert self.errors == before + 1  # exactly one error frame (§6.3)

    @rule(data=st.data())
    def cancel(self, data):
        pending = self.server.pending_ids
        rid = data.draw(st.sampled_from([None, *pending]) if pending else st.none())
        self.server.receive_frame(ClientSession.cancel(rid))
        self.pump()

    @precondition(lambda self: not self.closed)
    @rule()
    def describe(self):
        self.server.receive_frame(self.client.describe())
        self.describes += 1
        self.pump()

    @precondition(lambda self: not self.closed)
    @rule()
    def close(self):
        self.server.receive_frame(ClientSession.close())
        self.closed = True

    @rule(pcm=st.binary(max_size=300).map(lambda b: b[: len(b) // 2 * 2]))
    def synthesize_step(self, pcm):
        head = self.server.next_request()
        active = self.client.active
        if head is not None:
            self.server.start(head.request_id)
        elif active is not None:
            if not self.server.audio(active, pcm) or pcm == b"":
                self.server.complete(active)
        self.pump()

    @invariant()
    def every_describe_is_answered_at_once(self):
        assert self.capabilities == self.describes

    @invariant()
    def brackets_follow_acceptance_order(self):
        assert self.completed == self.accepted[: len(self.completed)]

    @invariant()
    def session_never_dies_from_client_input(self):
        assert self.server.state in (SessionState.OPEN, SessionState.DRAINING)
        assert self.server.finished == (self.closed and not self.server.pending_ids)


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# --- encodings (§3.3.1) -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pcm_mulaw", "pcm_alaw"])
def test_a_g711_request_gets_one_byte_samples(name: str) -> None:
    from protocol.encodings import decode_to_pcm16, encode_pcm16

    server = ServerSession(limits=Limits(max_audio_frame_bytes=64))
    client = ClientSession()
    rid, frame = client.request("Hello there.", encoding=name, sample_rate=8000)
    server.receive_frame(frame)
    pcm = PCM + PCM[:2]  # 513 samples: an odd number of G.711 bytes
    server.start(rid)
    server.audio(rid, pcm)
    server.complete(rid)
    frames = server.data_to_send()
    start, complete = json.loads(frames[0]), json.loads(frames[-1])
    assert start["encoding"] == name
    audio = b"".join(f for f in frames if isinstance(f, bytes))
    assert audio == encode_pcm16(pcm, name) and len(audio) == 513
    assert complete["audio_bytes"] == 513 and complete["total_duration_s"] == 513 / 8000
    assert max(len(f) for f in frames if isinstance(f, bytes)) <= 64
    events = [e for f in frames for e in client.receive_message(f)]  # the strict client accepts it all
    received = b"".join(e.pcm for e in events if isinstance(e, AudioReceived))
    assert received == audio
    assert len(decode_to_pcm16(received, name)) == len(pcm)


def test_a_mulaw_stream_that_spells_json_never_leaves_as_a_json_frame() -> None:
    """μ-law bytes 7B 22 61 22 3A 31 7D are the JSON object {"a":1}: the cut moves the frame's end."""
    from protocol.encodings import decode_to_pcm16

    codes = b'{"a":1}'
    pcm = decode_to_pcm16(codes, "pcm_mulaw")  # the PCM16 whose μ-law is exactly those bytes
    server = ServerSession()
    client = ClientSession()
    rid, frame = client.request("x", encoding="pcm_mulaw")
    server.receive_frame(frame)
    server.start(rid)
    server.audio(rid, pcm)
    server.complete(rid)
    audio_frames = [f for f in server.data_to_send() if isinstance(f, bytes)]
    assert b"".join(audio_frames) == codes
    assert all(not isinstance(json_or_none(f), dict) for f in audio_frames)
    assert len(audio_frames) == 2


def json_or_none(data: bytes):
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        return None


def test_unsupported_encoding_is_refused_and_the_session_goes_on() -> None:
    only_pcm = Capabilities(server=ServerInfo("t", "1"), voices=(), languages=(), encodings=("pcm_s16le",))
    server = ServerSession(capabilities=only_pcm)
    assert server.encodings == ("pcm_s16le",)
    assert server.receive_frame(request(encoding="pcm_mulaw", request_id="m1")) == []
    (error,) = controls(server.data_to_send())
    assert (error["code"], error["request_id"], error["fatal"]) == ("unsupported_encoding", "m1", False)
    assert len(server.receive_frame(request(request_id="p1"))) == 1
    assert ServerSession().encodings == ("pcm_s16le", "pcm_mulaw", "pcm_alaw")


def test_client_flags_a_g711_frame_only_when_empty() -> None:
    client = ClientSession()
    rid, _ = client.request("a", encoding="pcm_alaw")
    start = {"type": "synthesis_start", "request_id": rid, "sample_rate": 8000, "encoding": "pcm_alaw"}
    client.receive_message(json.dumps(start | {"channels": 1, "voice": "af_heart", "speed": 1.0}))
    client.receive_message(b"\xd5\xd5\xd5")  # three samples: fine
    with pytest.raises(ProtocolViolation, match="whole samples"):
        client.receive_message(b"")
    (done,) = client.receive_message(
        json.dumps(
            {"type": "synthesis_complete", "request_id": rid, "status": "completed"}
            | {"audio_bytes": 3, "total_duration_s": 3 / 8000, "elapsed_s": 0.1}
        )
    )
    assert isinstance(done, SynthesisCompleted) and done.frame.audio_bytes == 3
