"""Utterances (PROTOCOL.md §15): the four messages, their refusals, and both session halves."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.client_session import ClientSession, ProtocolViolation
from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    Append,
    End,
    ErrorFrame,
    Flush,
    Utterance,
    parse_client_message,
    parse_server_control,
)
from protocol.server_output import ErrorReceived, SynthesisCompleted, SynthesisStarted
from protocol.server_session import (
    CloseRequested,
    RequestAccepted,
    RequestCancelled,
    ServerSession,
    SessionStateError,
    TextAppended,
    UtteranceEnded,
    UtteranceFlushed,
)
from protocol.server_state import SessionState

PCM = bytes(range(256)) * 2
EMOJI = "\U0001f600"  # two UTF-16 code units: \ud83d \ude00
HIGH, LOW = "\ud83d", "\ude00"


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def msg(**obj: object) -> bytes:
    """A client message as a UTF-16 client's serializer writes it: surrogate halves as escapes."""
    return json.dumps(obj).encode()


def controls(frames: list) -> list[dict]:
    return [json.loads(f) for f in frames if isinstance(f, str)]


def session(**kwargs: object) -> tuple[ServerSession, FakeClock]:
    clock = FakeClock()
    return ServerSession(clock=clock, utterances=True, **kwargs), clock  # type: ignore[arg-type]


def text_of(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextAppended))


# --- messages (§15.1, §15.6) ------------------------------------------------------------------------------


def test_the_four_messages_parse_and_round_trip():
    cases = [
        Utterance("u1", text="Hi", voice="bf_emma", speed=1.5, sample_rate=16000, request_timestamp=5.0),
        Utterance("u1"),
        Append("u1", ""),
        Append("u1", "wor"),
        Flush("u1"),
        Flush("u1", "d."),
        End("u1"),
        End("u1", " Bye."),
    ]
    for message in cases:
        assert parse_client_message(message.to_json(), now=10.0) == message


@pytest.mark.parametrize(
    ("obj", "code"),
    [
        ({"type": "utterance"}, "invalid_field"),  # request_id is REQUIRED
        ({"type": "utterance", "request_id": None}, "invalid_field"),
        ({"type": "append", "text": "x"}, "invalid_field"),
        ({"type": "flush"}, "invalid_field"),
        ({"type": "end", "request_id": ""}, "invalid_field"),
        ({"type": "append", "request_id": "u1"}, "text_required"),
        ({"type": "append", "request_id": "u1", "text": None}, "text_required"),
        ({"type": "append", "request_id": "u1", "text": 5}, "invalid_field"),
        ({"type": "flush", "request_id": "u1", "text": ["x"]}, "invalid_field"),
        ({"type": "utterance", "request_id": "u1", "voice": "nope_voice"}, "invalid_voice"),
        ({"type": "utterance", "request_id": "u1", "speed": 9}, "invalid_speed"),
        ({"type": "utterance", "request_id": "u1", "sample_rate": 44100}, "invalid_sample_rate"),
        ({"type": "utterance", "request_id": "u1", "request_timestamp": 1.0}, "request_stale"),
        ({"type": "append", "request_id": "u1", "text": "x" * 10_001}, "text_too_long"),
        # §15.2: halves only at the edges of a fragment's text, and only where a pair can complete.
        ({"type": "utterance", "request_id": "u1", "text": LOW + "x"}, "invalid_json"),
        ({"type": "append", "request_id": "u1", "text": "a" + HIGH + "b"}, "invalid_json"),
        ({"type": "append", "request_id": "u1", "text": HIGH + HIGH}, "invalid_json"),
        ({"type": "end", "request_id": "u1", "text": "x" + HIGH}, "invalid_json"),
        ({"type": "append", "request_id": HIGH, "text": "x"}, "invalid_json"),
        ({"type": "cancel", "request_id": "u1", "text": HIGH}, "invalid_json"),
    ],
)
def test_refusals_name_the_message_type(obj, code):
    with pytest.raises(ProtocolError) as info:
        parse_client_message(msg(**obj), now=100.0, known_voices={"af_heart"})
    assert info.value.code == code
    assert info.value.message_type == (obj["type"] if obj["type"] != "cancel" else None)


def test_halves_at_the_edges_parse_for_the_session_to_pair():
    assert parse_client_message(msg(type="append", request_id="u", text="es " + HIGH)).text == "es " + HIGH
    assert parse_client_message(msg(type="flush", request_id="u", text=LOW + HIGH)).text == LOW + HIGH
    assert parse_client_message(msg(type="end", request_id="u", text=LOW + "!")).text == LOW + "!"


def test_without_the_feature_the_four_types_are_unknown_type():
    """§15.1: a server without utterances answers exactly as a version 1 server does."""
    for obj in (
        {"type": "utterance", "request_id": "u1"},
        {"type": "append"},  # unknown_type comes before the member checks (§9.2 step 5)
        {"type": "flush", "request_id": "u1"},
        {"type": "end", "request_id": "u1", "text": "x"},
    ):
        with pytest.raises(ProtocolError) as info:
            parse_client_message(msg(**obj), utterances=False)
        assert info.value.code == ErrorCode.UNKNOWN_TYPE and info.value.message_type is None
    with pytest.raises(ProtocolError) as info:  # and the surrogate exception does not exist there
        parse_client_message(msg(type="append", request_id="u1", text="x" + HIGH), utterances=False)
    assert info.value.code == ErrorCode.INVALID_JSON


def test_error_frame_message_type_round_trips_and_is_optional():
    frame = ErrorFrame("unknown_request", "no open utterance", "u1", message_type="append")
    obj = json.loads(frame.to_json())
    assert obj["message_type"] == "append" and parse_server_control(obj) == frame
    assert "message_type" not in ErrorFrame("internal_error", "boom", "u1").to_dict()


# --- server session (§15.2–§15.6) ---------------------------------------------------------------------------


def test_utterance_is_one_request_whose_text_arrives_in_events():
    server, _ = session()
    events = server.receive_frame(msg(type="utterance", request_id="u1", voice="af_heart", text="Hel"))
    assert isinstance(events[0], RequestAccepted) and events[0].utterance
    assert events[0].request.request_id == "u1" and events[0].request.text == ""
    assert events[1:] == [TextAppended("u1", "Hel")]
    assert server.receive_frame(msg(type="append", request_id="u1", text="")) == []
    assert server.receive_frame(msg(type="append", request_id="u1", text="lo. ")) == [
        TextAppended("u1", "lo. ")
    ]
    assert server.receive_frame(msg(type="flush", request_id="u1")) == [UtteranceFlushed("u1")]
    assert server.receive_frame(msg(type="end", request_id="u1", text="Bye")) == [
        TextAppended("u1", "Bye"),
        UtteranceEnded("u1", "end"),
    ]
    assert server.data_to_send() == []  # accepted messages are not answered (§6.3)


def test_bracket_opens_before_text_and_completes_only_once_the_utterance_is_ended():
    server, _ = session()
    client = ClientSession()
    _, frame = client.utterance("u1")
    server.receive_frame(frame)
    assert server.next_request().request_id == "u1"
    server.start("u1")
    server.receive_frame(client.append("u1", "Hi."))
    server.audio("u1", PCM)
    with pytest.raises(SessionStateError):
        server.complete("u1")  # still open: more text may come (§15.4)
    server.receive_frame(client.end("u1"))
    server.audio("u1", PCM)
    server.complete("u1", None)
    events = [e for f in server.data_to_send() for e in client.receive_message(f)]
    assert [type(e) for e in events if not hasattr(e, "pcm")] == [SynthesisStarted, SynthesisCompleted]
    assert events[-1].frame.audio_bytes == 2 * len(PCM) and client.outstanding == []


def test_surrogate_pair_split_across_fragments_is_joined():
    server, _ = session()
    server.receive_frame(msg(type="utterance", request_id="u1", text="a" + HIGH))
    assert server.receive_frame(msg(type="flush", request_id="u1")) == [UtteranceFlushed("u1")]  # half stays
    assert server.receive_frame(msg(type="append", request_id="u1", text="")) == []  # so does "" (keepalive)
    events = server.receive_frame(msg(type="append", request_id="u1", text=LOW + "b" + HIGH))
    assert events == [TextAppended("u1", EMOJI + "b")]
    assert server.receive_frame(msg(type="end", request_id="u1", text=LOW)) == [
        TextAppended("u1", EMOJI),
        UtteranceEnded("u1", "end"),
    ]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"type": "append", "text": "x" + HIGH}, {"type": "append", "text": "y"}),
        ({"type": "append", "text": "x" + HIGH}, {"type": "flush", "text": "y"}),
        ({"type": "append", "text": "x" + HIGH}, {"type": "end"}),
        ({"type": "append", "text": "x"}, {"type": "append", "text": LOW + "y"}),
        ({"type": "flush", "text": "x"}, {"type": "end", "text": LOW}),
    ],
)
def test_halves_that_do_not_pair_are_refused_and_change_nothing(first, second):
    server, _ = session()
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.receive_frame(msg(request_id="u1", **first))
    assert server.receive_frame(msg(request_id="u1", **second)) == []
    (error,) = controls(server.data_to_send())
    assert error["code"] == "invalid_json" and error["message_type"] == second["type"]
    assert error["request_id"] == "u1" and not error["fatal"]
    assert server.is_open("u1")  # the refusal changed nothing: a correct continuation still works
    last = LOW if HIGH in first["text"] else "!"
    events = server.receive_frame(msg(type="end", request_id="u1", text=last))
    assert isinstance(events[-1], UtteranceEnded)


def test_fragments_for_no_open_utterance_are_unknown_request():
    server, _ = session()
    server.receive_frame(msg(text="A plain request.", request_id="r1"))
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.receive_frame(msg(type="end", request_id="u1"))
    for obj in (
        {"type": "append", "request_id": "r1", "text": "x"},  # a synthesize request takes no text
        {"type": "flush", "request_id": "u1"},  # ended
        {"type": "end", "request_id": "nope"},
    ):
        assert server.receive_frame(msg(**obj)) == []
        (error,) = controls(server.data_to_send())
        assert (error["code"], error["request_id"], error["message_type"]) == (
            "unknown_request",
            obj["request_id"],
            obj["type"],
        )


def test_utterance_text_counts_against_max_text_chars():
    server, _ = session(limits=Limits(max_text_chars=10))
    server.receive_frame(msg(type="utterance", request_id="u1", text="12345"))
    assert server.receive_frame(msg(type="append", request_id="u1", text="123456")) == []
    (error,) = controls(server.data_to_send())
    assert (error["code"], error["message_type"]) == ("text_too_long", "append")
    assert server.receive_frame(msg(type="end", request_id="u1", text="12345")) == [
        TextAppended("u1", "12345"),
        UtteranceEnded("u1", "end"),
    ]


def test_opener_refusals_are_those_of_a_request():
    server, _ = session(limits=Limits(max_queue=1))
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.receive_frame(msg(type="utterance", request_id="u2"))
    assert [(e["code"], e["message_type"]) for e in controls(server.data_to_send())] == [
        ("duplicate_request_id", "utterance"),
        ("queue_full", "utterance"),
    ]


def test_close_ends_open_utterances_and_drains_them():
    server, _ = session()
    server.receive_frame(msg(type="utterance", request_id="u1", text="One"))
    server.receive_frame(msg(text="Two.", request_id="r2"))
    server.receive_frame(msg(type="utterance", request_id="u3", text="x" + HIGH))
    events = server.receive_frame(msg(type="close"))
    assert events == [UtteranceEnded("u1", "close"), UtteranceEnded("u3", "close"), CloseRequested()]
    assert server.receive_frame(msg(type="append", request_id="u1", text="ignored")) == []  # §7.1
    assert server.data_to_send() == []
    for rid in ("u1", "r2", "u3"):
        server.start(rid)
        server.audio(rid, PCM)
        server.complete(rid)
    assert server.finished


def test_cancel_closes_an_open_utterance():
    server, _ = session()
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.start("u1")
    assert server.receive_frame(msg(type="cancel", request_id="u1")) == [RequestCancelled("u1", True)]
    assert not server.is_open("u1")
    server.receive_frame(msg(type="append", request_id="u1", text="late"))
    assert controls(server.data_to_send())[-1]["code"] == "unknown_request"
    server.complete("u1")  # no end needed: a cancelled utterance completes cancelled
    assert controls(server.data_to_send())[-1]["status"] == "cancelled"


def test_idle_timeout_runs_only_while_the_utterance_is_active_and_open():
    server, clock = session(limits=Limits(utterance_idle_timeout_s=5.0))
    server.receive_frame(msg(text="Before.", request_id="r1"))
    server.receive_frame(msg(type="utterance", request_id="u1", text="Hi"))
    clock.t += 60  # queued behind r1: no deadline (§15.5)
    assert server.deadline() is None and server.expire() == []
    server.start("r1")
    server.complete("r1")
    server.start("u1")  # the clock starts at synthesis_start
    assert server.deadline() == clock.t + 5.0
    clock.t += 4.0
    server.receive_frame(msg(type="append", request_id="u1", text=""))  # an empty append keeps it open
    clock.t += 4.0
    assert server.expire() == []
    server.data_to_send()
    clock.t += 1.0
    assert server.expire() == [UtteranceEnded("u1", "timeout")]
    (notice,) = controls(server.data_to_send())
    assert notice["code"] == "utterance_timeout" and notice["request_id"] == "u1" and not notice["fatal"]
    assert "message_type" not in notice  # a notice refuses nothing
    assert server.deadline() is None
    server.complete("u1")
    assert controls(server.data_to_send())[-1]["status"] == "completed"


def test_fail_closes_the_utterance():
    server, _ = session()
    server.receive_frame(msg(type="utterance", request_id="u1"))
    server.start("u1")
    server.fail("u1", "synthesis failed")
    assert not server.is_open("u1")
    types = [f["type"] for f in controls(server.data_to_send())]
    assert types == ["synthesis_start", "error", "synthesis_complete"]


def test_capabilities_list_utterance_exactly_when_the_session_offers_it():
    """§15.1: ``features`` says what the session answers, whatever the capabilities passed in said."""
    from protocol.messages import FEATURES, Capabilities, ServerInfo

    listed = Capabilities.from_limits(Limits(), server=ServerInfo("t", "1"), voices=(), languages=())
    assert "utterance" in FEATURES and "utterance" in listed.features
    without = Capabilities.from_limits(
        Limits(), server=ServerInfo("t", "1"), voices=(), languages=(), features=("cancel", "describe")
    )
    for capabilities in (listed, without):
        for utterances in (True, False):
            server = ServerSession(capabilities=capabilities, utterances=utterances)
            server.receive_frame(msg(type="describe"))
            (answer,) = controls(server.data_to_send())
            assert ("utterance" in answer["features"]) is utterances
            assert {"cancel", "describe"} <= set(answer["features"])


def test_default_server_session_does_not_offer_utterances():
    server = ServerSession()
    assert server.receive_frame(msg(type="utterance", request_id="u1")) == []
    assert controls(server.data_to_send())[0]["code"] == "unknown_type"


# --- client session ----------------------------------------------------------------------------------------


def test_client_keeps_owing_the_bracket_when_a_fragment_is_refused():
    client = ClientSession()
    client.utterance("u1")
    refusal = ErrorFrame("text_too_long", "too long", "u1", message_type="append").to_json()
    assert isinstance(client.receive_message(refusal)[0], ErrorReceived)
    assert client.outstanding == ["u1"]
    timeout = ErrorFrame("utterance_timeout", "idle", "u1").to_json()
    client.receive_message(timeout)
    assert client.outstanding == ["u1"]  # a notice, not a refusal
    client.receive_message(ErrorFrame("invalid_voice", "no", "u1", message_type="utterance").to_json())
    assert client.outstanding == []  # the utterance itself was refused: no bracket


def test_client_takes_unknown_type_as_a_server_without_utterances():
    client = ClientSession()
    client.utterance("u1")
    client.receive_message(ErrorFrame("unknown_type", 'unknown message type "utterance"', "u1").to_json())
    assert client.outstanding == []  # a v1 server refuses the opener: no bracket is owed


def test_client_flags_an_ambiguous_refusal_of_an_utterance():
    client = ClientSession()
    client.utterance("u1")
    with pytest.raises(ProtocolViolation) as info:
        client.receive_message(ErrorFrame("invalid_field", "bad", "u1").to_json())
    assert info.value.section == "§15.6"


def test_client_builders_escape_split_halves_like_a_utf16_serializer():
    escaped = b'{"type":"append","request_id":"u1","text":"es \\ud83d"}'
    assert ClientSession.append("u1", "es " + HIGH) == escaped
    assert ClientSession.end("u1") == b'{"type":"end","request_id":"u1"}'
    assert ClientSession.flush("u1", "é") == '{"type":"flush","request_id":"u1","text":"é"}'.encode()


# --- property: any fragmentation, any flush, gives the same text (§15.2, §15.3) ---------------------------


def utf16_units(text: str) -> list[str]:
    """``text`` as UTF-16 code units, each a Python str (a lone half where a pair was)."""
    raw = text.encode("utf-16-le", "surrogatepass")
    return [raw[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


TEXTS = st.lists(
    st.sampled_from(["a", "é", " ", ".", "\n", EMOJI, "\U0001f44d\U0001f3fd", "中", "e\u0301"]), max_size=30
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, data=st.data())
def test_any_split_of_the_utf16_units_delivers_the_same_text(text, data):
    """Cut the text's UTF-16 code units anywhere (pairs included) and send each piece with a random
    message kind: the session delivers exactly the text, in whole code points, and one flush per flush."""
    units = utf16_units(text)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(units)), max_size=12)))
    pieces = ["".join(units[a:b]) for a, b in zip([0, *cuts], [*cuts, len(units)], strict=True)]
    server, _ = session()
    events = server.receive_frame(msg(type="utterance", request_id="u1", text=pieces[0]))
    flushes = 0
    for piece in pieces[1:]:
        kind = data.draw(st.sampled_from(["append", "flush"]))
        flushes += kind == "flush"
        events += server.receive_frame(msg(type=kind, request_id="u1", text=piece))
    events += server.receive_frame(msg(type="end", request_id="u1"))
    assert server.data_to_send() == [], "no refusal"
    assert text_of(events) == text
    delivered = [e.text for e in events if isinstance(e, TextAppended)]
    assert not any("\ud800" <= c <= "\udfff" for piece in delivered for c in piece)
    assert sum(isinstance(e, UtteranceFlushed) for e in events) == flushes
    assert events[-1] == UtteranceEnded("u1", "end")


class UtteranceMachine(RuleBasedStateMachine):
    """Random interleavings of requests, utterances, fragments, cancels, timeouts and close, answered by a
    model adapter; the client half checks every frame, and the invariants hold after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.server = ServerSession(
            clock=self.clock, utterances=True, limits=Limits(max_queue=4, utterance_idle_timeout_s=10.0)
        )
        self.client = ClientSession()
        self.sent: dict[str, str] = {}  # utterance id -> text sent (accepted or not)
        self.received: dict[str, str] = {}  # utterance id -> text the session delivered
        self.ended: set[str] = set()
        self.answered = 0
        self.ids = iter(f"u{n}" for n in range(10_000))

    def feed(self, frame: bytes) -> bool:
        """Send one message; ``True`` if the server refused it."""
        for event in self.server.receive_frame(frame):
            if isinstance(event, RequestAccepted) and event.utterance:
                self.received[event.request.request_id] = ""
            elif isinstance(event, TextAppended):
                self.received[event.request_id] += event.text
            elif isinstance(event, UtteranceEnded):
                self.ended.add(event.request_id)
        return self.pump()

    def pump(self) -> bool:
        refused = False
        for frame in self.server.data_to_send():
            for event in self.client.receive_message(frame):
                self.answered += isinstance(event, SynthesisCompleted)
                refused |= isinstance(event, ErrorReceived) and event.frame.code != "utterance_timeout"
        return refused

    @precondition(lambda self: self.server.state is SessionState.OPEN)
    @rule(text=st.text(max_size=6))
    def open_utterance(self, text):
        rid = next(self.ids)
        _, frame = self.client.utterance(rid, text=text)
        self.feed(frame)
        if rid in self.received:  # accepted (not refused, not ignored after close)
            self.sent[rid] = text

    @precondition(lambda self: self.server.state is SessionState.OPEN)
    @rule()
    def plain_request(self):
        _, frame = self.client.request("A plain one.")
        self.feed(frame)

    @precondition(lambda self: self.sent)
    @rule(data=st.data(), text=st.text(max_size=6), kind=st.sampled_from(["append", "flush", "end"]))
    def fragment(self, data, text, kind):
        rid = data.draw(st.sampled_from(sorted(self.sent)))
        was_open = self.server.is_open(rid)
        reading = self.server.state is SessionState.OPEN
        refused = self.feed(getattr(ClientSession, kind)(rid, text))
        # Refused exactly when its utterance is not open; ignored after close (§7.1).
        assert refused == (reading and not was_open)
        if was_open:
            self.sent[rid] += text

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def cancel(self, data):
        self.feed(ClientSession.cancel(data.draw(st.sampled_from(sorted(self.sent)))))

    @rule(seconds=st.sampled_from([1.0, 11.0]))
    def time_passes(self, seconds):
        self.clock.t += seconds
        for event in self.server.expire():
            self.ended.add(event.request_id)
        self.pump()

    @rule(pcm=st.sampled_from([b"", PCM]))
    def synthesizer_step(self, pcm):
        """The adapter: start the head, send audio, complete it once it is no longer open."""
        server = self.server
        if (request := server.next_request()) is not None:
            server.start(request.request_id)
        elif server.pending_ids:
            head = server.pending_ids[0]
            if pcm:
                server.audio(head, pcm)
            if not server.is_open(head):
                server.complete(head)
        self.pump()

    @precondition(lambda self: self.server.state is SessionState.OPEN)
    @rule()
    def close_and_drain(self):
        """§7.1 and §15.5: after close every accepted request and utterance is answered, then the end."""
        self.feed(ClientSession.close())
        for _ in range(3 * len(self.server.pending_ids) + 1):
            self.synthesizer_step(PCM)
        assert self.server.finished
        assert self.client.outstanding == [] and self.client.active is None

    @invariant()
    def delivered_text_is_exactly_what_was_accepted(self):
        assert self.received == self.sent

    @invariant()
    def only_the_head_can_time_out(self):
        deadline = self.server.deadline()
        if deadline is not None:
            assert self.server.is_open(self.server.pending_ids[0])


UtteranceMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_utterance_machine = UtteranceMachine.TestCase
