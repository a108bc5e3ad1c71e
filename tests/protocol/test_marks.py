"""Marks (PROTOCOL.md §5.5): the request member, the server frame, and both sessions' rules for them."""

from __future__ import annotations

import json

import pytest

from protocol import schemas
from protocol.client_session import ClientSession, ProtocolViolation
from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    FEATURES,
    Capabilities,
    Marks,
    ServerInfo,
    SynthesisRequest,
    Utterance,
    Word,
    parse_client_message,
    parse_server_control,
)
from protocol.server_output import AudioReceived, MarksReceived, SynthesisCompleted
from protocol.server_session import ServerSession, SessionStateError

PCM_1S = b"\x01\x00" * 24000  # one second of audio at 24 kHz


def marks_frames(frames) -> list[dict]:
    return [json.loads(f) for f in frames if isinstance(f, str) and json.loads(f)["type"] == "marks"]


# --- the member and the frame -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "asked"), [(True, True), (False, False), (None, False)])
def test_requests_and_utterances_read_the_member(value, asked):
    request = parse_client_message(json.dumps({"text": "Hi.", "marks": value}))
    assert isinstance(request, SynthesisRequest) and request.marks is asked
    opened = parse_client_message(json.dumps({"type": "utterance", "request_id": "u", "marks": value}))
    assert isinstance(opened, Utterance) and opened.marks is asked
    assert opened.to_request().marks is asked
    assert parse_client_message(json.dumps({"text": "Hi."})).marks is False  # default


@pytest.mark.parametrize("value", ["yes", 1, 0, [], {}])
def test_a_marks_member_that_is_not_a_boolean_is_invalid_field(value):
    for message in ({"text": "Hi.", "request_id": "a"}, {"type": "utterance", "request_id": "a"}):
        with pytest.raises(ProtocolError) as info:
            parse_client_message(json.dumps({**message, "marks": value}))
        assert info.value.code == ErrorCode.INVALID_FIELD and "marks" in info.value.message
        assert info.value.request_id == "a"


def test_marks_is_checked_last_of_the_members():
    """§9.2 step 6: a stale timestamp is the answer before a bad marks member."""
    with pytest.raises(ProtocolError) as info:
        parse_client_message(json.dumps({"text": "Hi.", "request_timestamp": 1.0, "marks": "yes"}), now=1e9)
    assert info.value.code == ErrorCode.REQUEST_STALE


def test_a_server_without_marks_ignores_the_member():
    request = parse_client_message(json.dumps({"text": "Hi.", "marks": "yes"}), marks=False)
    assert isinstance(request, SynthesisRequest) and request.marks is False


def test_the_member_is_written_only_when_asked():
    assert "marks" not in SynthesisRequest("Hi.").to_dict()
    assert SynthesisRequest("Hi.", marks=True).to_dict()["marks"] is True
    assert Utterance("u", marks=True).to_dict()["marks"] is True
    assert "marks" not in Utterance("u").to_dict()
    for obj in (SynthesisRequest("Hi.", marks=True).to_dict(), Utterance("u", marks=True).to_dict()):
        schemas.validate("utterance" if obj.get("type") == "utterance" else "synthesis_request", obj)
    assert "marks" in FEATURES


def test_the_frame_validates_and_reads_back():
    frame = Marks(
        request_id="a1",
        segment=1,
        text="Hello there.",
        start_s=1.5,
        end_s=2.5,
        words=[Word("Hello", 1.6, 2.0), Word("there", 2.0, 2.4)],
    )
    obj = json.loads(frame.to_json())
    schemas.validate("marks", obj)
    assert parse_server_control(obj) == frame
    bare = Marks(request_id="a1", segment=0, text="Hi.", start_s=0.0, end_s=0.5)
    assert "words" not in json.loads(bare.to_json())


@pytest.mark.parametrize(
    "fields",
    [
        {"segment": -1},
        {"segment": True},
        {"start_s": 2.0, "end_s": 1.0},
        {"start_s": -0.1},
        {"end_s": float("nan")},
        {"request_id": ""},
    ],
)
def test_the_frame_refuses_impossible_values(fields):
    with pytest.raises(ValueError):
        Marks(**{"request_id": "a", "segment": 0, "text": "x", "start_s": 0.0, "end_s": 1.0, **fields})


# --- ServerSession ---------------------------------------------------------------------------------------


def started(session: ServerSession, message: dict) -> str:
    session.receive_frame(json.dumps(message))
    request = session.next_request()
    assert request is not None and request.request_id is not None
    session.start(request.request_id)
    return request.request_id


def test_the_session_numbers_segments_and_sends_only_to_requests_that_asked():
    session = ServerSession(marks=True)
    rid = started(session, {"text": "One. Two.", "request_id": "a", "marks": True})
    assert session.marks(rid, "One.", 0.0, 1.0)
    session.audio(rid, PCM_1S)
    assert session.marks(rid, "Two.", 1.0, 2.5, [Word("Two", 1.1, 1.6)])
    session.audio(rid, PCM_1S)
    session.complete(rid)
    frames = session.data_to_send()
    sent = marks_frames(frames)
    assert [(m["segment"], m["text"], m["start_s"], m["end_s"]) for m in sent] == [
        (0, "One.", 0.0, 1.0),
        (1, "Two.", 1.0, 2.5),
    ]
    assert sent[1]["words"] == [{"word": "Two", "start_s": 1.1, "end_s": 1.6}]
    kinds = [json.loads(f)["type"] if isinstance(f, str) else "audio" for f in frames]
    assert kinds[:4] == ["synthesis_start", "marks", "audio", "audio"] and kinds[-1] == "synthesis_complete"

    rid = started(session, {"text": "Three.", "request_id": "b"})  # did not ask
    assert not session.marks(rid, "Three.", 0.0, 1.0)
    assert marks_frames(session.data_to_send()) == []


def test_a_session_without_the_feature_sends_none_and_ignores_the_member():
    session = ServerSession()
    rid = started(session, {"text": "One.", "request_id": "a", "marks": "anything"})
    assert not session.marks(rid, "One.", 0.0, 1.0)
    assert marks_frames(session.data_to_send()) == []


def test_spans_are_kept_in_order_and_cancel_stops_marks():
    session = ServerSession(marks=True)
    rid = started(session, {"text": "One. Two.", "request_id": "a", "marks": True})
    session.marks(rid, "One.", 0.0, 1.0)
    session.marks(rid, "Two.", 0.999, 0.9)  # rounding put it a hair early: raised, never overlapping
    [first, second] = marks_frames(session.data_to_send())
    assert second["start_s"] == second["end_s"] == first["end_s"] == 1.0
    session.receive_frame(json.dumps({"type": "cancel"}))
    assert not session.marks(rid, "Three.", 1.0, 2.0)


def test_marks_need_the_started_head_request():
    session = ServerSession(marks=True)
    session.receive_frame(json.dumps({"text": "One.", "request_id": "a", "marks": True}))
    with pytest.raises(SessionStateError):
        session.marks("a", "One.", 0.0, 1.0)  # before its synthesis_start
    with pytest.raises(SessionStateError):
        session.marks("zzz", "One.", 0.0, 1.0)


# --- ClientSession: the strict client's checks ---------------------------------------------------------


def exchange(server_frames, *, marks: bool = True) -> list:
    client = ClientSession()
    client.request("One. Two.", request_id="a", marks=marks)
    events = []
    for frame in server_frames:
        events += client.receive_message(frame)
    return events


def start_frame(rid: str = "a") -> str:
    return json.dumps(
        {
            "type": "synthesis_start",
            "request_id": rid,
            "sample_rate": 24000,
            "encoding": "pcm_s16le",
            "channels": 1,
            "voice": "af_heart",
            "speed": 1.0,
        }
    )


def marks_frame(segment: int, start_s: float, end_s: float, rid: str = "a") -> str:
    return Marks(request_id=rid, segment=segment, text="x", start_s=start_s, end_s=end_s).to_json()


def complete_frame(audio_bytes: int, rid: str = "a") -> str:
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


def test_the_client_accepts_marks_where_the_spec_puts_them():
    events = exchange(
        [
            start_frame(),
            marks_frame(0, 0.0, 1.0),
            PCM_1S,
            marks_frame(1, 1.0, 2.0),
            PCM_1S,
            complete_frame(96000),
        ]
    )
    assert [type(e) for e in events] == [
        type(events[0]),
        MarksReceived,
        AudioReceived,
        MarksReceived,
        AudioReceived,
        SynthesisCompleted,
    ]


@pytest.mark.parametrize(
    ("frames", "marks", "why"),
    [
        ([start_frame(), marks_frame(0, 0.0, 1.0)], False, "did not ask"),
        ([marks_frame(0, 0.0, 1.0)], True, "outside its bracket"),
        ([start_frame(), marks_frame(1, 0.0, 1.0)], True, "segment 0 is next"),
        ([start_frame(), marks_frame(0, 0.0, 1.0), marks_frame(1, 0.5, 1.5)], True, "before the previous"),
        ([start_frame(), PCM_1S, PCM_1S, marks_frame(0, 0.0, 1.0)], True, "after audio of a later segment"),
        ([start_frame(), PCM_1S, complete_frame(48000)], True, "without one"),
    ],
)
def test_the_client_flags_each_broken_rule(frames, marks, why):
    with pytest.raises(ProtocolViolation, match=why) as info:
        exchange(frames, marks=marks)
    assert info.value.section == "§5.5"


def test_capabilities_list_marks_exactly_when_the_session_offers_them():
    capabilities = Capabilities.from_limits(Limits(), server=ServerInfo("test", "1"), voices=(), languages=())
    for offered in (True, False):
        session = ServerSession(capabilities=capabilities, marks=offered, utterances=True)
        session.receive_frame(b'{"type": "describe"}')
        [answer] = [json.loads(f) for f in session.data_to_send()]
        assert ("marks" in answer["features"]) is offered and "utterance" in answer["features"]
