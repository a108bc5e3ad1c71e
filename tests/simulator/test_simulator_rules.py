"""The simulator's sans-I/O rules: faults, bridge, service errors, wire log."""

from __future__ import annotations

import json

import pytest

from sagemaker_transport.eventstream import PayloadPart
from simulator.bridge import (
    BridgeError,
    Ending,
    EndReason,
    Fragment,
    InputBridge,
    OutputBridge,
    container_path,
)
from simulator.errors import Api, ErrorKind, ServiceError, StreamError, StreamErrorKind
from simulator.faults import Fault, FaultCursor, FaultKind, FaultPlan
from simulator.splitting import MessageSplitter, SplitPolicy
from simulator.wirelog import WireLog

# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("throttle", Fault(FaultKind.THROTTLE)),
        ("unavailable*2", Fault(FaultKind.UNAVAILABLE, times=2)),
        ("model_stream_error@4096", Fault(FaultKind.MODEL_STREAM_ERROR, after_bytes=4096)),
        (
            "model_stream_error:ModelInvocationTimeExceeded@0*1",
            Fault(FaultKind.MODEL_STREAM_ERROR, 0, "ModelInvocationTimeExceeded", 1),
        ),
        ("internal_stream_failure@7", Fault(FaultKind.INTERNAL_STREAM_FAILURE, after_bytes=7)),
    ],
)
def test_fault_spelling_round_trips(text: str, fault: Fault) -> None:
    assert Fault.parse(text) == fault
    assert Fault.parse(str(fault)) == fault


@pytest.mark.parametrize("text", ["explode", "throttle@10", "model_stream_error@-1", "throttle*x", ""])
def test_fault_spelling_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        Fault.parse(text)


def test_plan_allows_one_mid_stream_fault() -> None:
    with pytest.raises(ValueError):
        FaultPlan.parse(["model_stream_error@1", "internal_stream_failure@2"])


def test_plan_counts_invocations() -> None:
    plan = FaultPlan.parse(["throttle*2", "model_stream_error@10"])
    assert [plan.before_stream(i) is not None for i in range(4)] == [True, True, False, False]
    assert plan.cursor(3).fault == Fault(FaultKind.MODEL_STREAM_ERROR, after_bytes=10)
    assert FaultPlan().cursor(0).fault is None


def test_cursor_delivers_exactly_k_bytes() -> None:
    cursor = FaultCursor(Fault.parse("model_stream_error@10"))
    assert cursor.take(4) == (4, None)
    assert cursor.take(6) == (6, None)  # ends exactly at k: still delivered whole
    size, fault = cursor.take(5)
    assert (size, fault is not None) == (0, True)
    assert cursor.delivered == 10
    assert cursor.take(5) == (5, None)  # fires once


def test_cursor_cuts_the_crossing_part() -> None:
    cursor = FaultCursor(Fault.parse("internal_stream_failure@3"))
    size, fault = cursor.take(8)
    assert size == 3 and fault is not None and fault.kind is FaultKind.INTERNAL_STREAM_FAILURE


def test_cursor_fires_at_end_when_k_is_the_whole_output() -> None:
    cursor = FaultCursor(Fault.parse("model_stream_error@4"))
    assert cursor.take(4) == (4, None)
    assert cursor.at_end() is not None
    assert FaultCursor(Fault.parse("model_stream_error@9")).at_end() is None
    assert FaultCursor(None).at_end() is None


# --- bridge ---------------------------------------------------------------------------------------


def test_input_parts_become_frames_by_data_type() -> None:
    bridge = InputBridge()
    assert bridge.feed(PayloadPart(b"x")) == Fragment(b"x", False, True, True)
    assert bridge.feed(PayloadPart(b"x", "UTF8")) == Fragment(b"x", True, True, True)
    assert bridge.feed(PayloadPart(b"x", "BINARY", "COMPLETE")) == Fragment(b"x", False, True, True)


def test_partial_parts_become_fragments_of_one_message() -> None:
    bridge = InputBridge()
    assert bridge.feed(PayloadPart(b"a", "UTF8", "PARTIAL")) == Fragment(b"a", True, True, False)
    assert bridge.in_message
    # The first part decides the frame type; DataType on later fragments is ignored.
    assert bridge.feed(PayloadPart(b"b", "BINARY", "PARTIAL")) == Fragment(b"b", True, False, False)
    assert bridge.feed(PayloadPart(b"c", "UTF8", "COMPLETE")) == Fragment(b"c", True, False, True)
    assert not bridge.in_message
    assert bridge.feed(PayloadPart(b"d")) == Fragment(b"d", False, True, True)


@pytest.mark.parametrize(
    "part", [PayloadPart(b"x", "TEXT"), PayloadPart(b"x", "BINARY", "DONE"), PayloadPart(b"12345")]
)
def test_input_bridge_refuses(part: PayloadPart) -> None:
    with pytest.raises(BridgeError) as caught:
        InputBridge(max_part_bytes=4).feed(part)
    assert caught.value.stream_error.kind is StreamErrorKind.INTERNAL_STREAM_FAILURE


def test_output_parts_mark_partial_until_the_message_ends() -> None:
    bridge = OutputBridge(MessageSplitter(SplitPolicy.parse("fixed:2")))
    parts = bridge.parts(b"hello", text=True)
    assert [(p.data, p.data_type, p.completion_state) for p in parts] == [
        (b"he", "UTF8", "PARTIAL"),
        (b"ll", "UTF8", "PARTIAL"),
        (b"o", "UTF8", "COMPLETE"),
    ]
    assert [p.data_type for p in bridge.parts(b"\x00\x01", text=False)] == ["BINARY"]


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        (None, None, "/invocations-bidirectional-stream"),
        ("custom/ws", None, "/custom/ws"),
        ("/x", "a=1&b=2", "/x?a=1&b=2"),
        (None, "?v=2", "/invocations-bidirectional-stream?v=2"),
    ],
)
def test_container_path(path: str | None, query: str | None, expected: str) -> None:
    assert container_path(path, query) == expected


@pytest.mark.parametrize("code", [1000, 1001])
def test_normal_close_ends_cleanly(code: int) -> None:
    ending = Ending.container_closed(code)
    assert ending.reason is EndReason.CONTAINER_CLOSED and ending.stream_error is None


@pytest.mark.parametrize("code", [None, 1006, 1011, 1013, 4000])
def test_abnormal_close_is_a_model_stream_error(code: int | None) -> None:
    ending = Ending.container_closed(code, "boom")
    assert ending.stream_error is not None
    assert ending.stream_error.kind is StreamErrorKind.MODEL_STREAM_ERROR
    assert ending.stream_error.error_code == "StreamBroken"


def test_endings_map_to_documented_errors() -> None:
    assert Ending.input_ended().stream_error is None and Ending.input_ended().close_code == 1000
    assert Ending.ping_timeout(2).stream_error.kind is StreamErrorKind.MODEL_STREAM_ERROR  # type: ignore[union-attr]
    timeout = Ending.timeout(EndReason.IDLE_TIMEOUT, 5).stream_error
    assert timeout is not None and timeout.error_code == "ModelInvocationTimeExceeded"
    failure = Ending.fault(Fault.parse("internal_stream_failure@0"), 0).stream_error
    assert failure is not None and failure.kind is StreamErrorKind.INTERNAL_STREAM_FAILURE
    coded = Ending.fault(Fault.parse("model_stream_error:ModelInvocationTimeExceeded@0"), 0).stream_error
    assert coded is not None and coded.error_code == "ModelInvocationTimeExceeded"


# --- service errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "bidi", "runtime"),
    [
        (ErrorKind.VALIDATION, 400, "InputValidationError", "ValidationError"),
        (ErrorKind.MODEL_ERROR, 424, "ModelError", "ModelError"),
        (ErrorKind.INTERNAL, 500, "InternalServerError", "InternalFailure"),
        (ErrorKind.UNAVAILABLE, 503, "ServiceUnavailableError", "ServiceUnavailable"),
        (ErrorKind.THROTTLING, 400, "ThrottlingException", "ThrottlingException"),
    ],
)
def test_error_shapes_per_api(kind: ErrorKind, status: int, bidi: str, runtime: str) -> None:
    error = ServiceError(kind, "m")
    for api, name in ((Api.BIDI, bidi), (Api.RUNTIME, runtime)):
        rendered = error.render(api, request_id="rid")
        headers = dict(rendered.headers)
        assert rendered.status == status
        assert headers[b"x-amzn-errortype"] == name.encode()
        assert headers[b"x-amzn-requestid"] == b"rid"
        assert json.loads(rendered.body)["Message"] == "m"


def test_model_error_carries_the_original_answer() -> None:
    body = json.loads(
        ServiceError(ErrorKind.MODEL_ERROR, "m", original_status_code=400, original_message="bad")
        .render(Api.BIDI)
        .body
    )
    assert body == {"Message": "m", "OriginalStatusCode": 400, "OriginalMessage": "bad"}


def test_stream_error_payloads() -> None:
    model = StreamError(StreamErrorKind.MODEL_STREAM_ERROR, "m", "StreamBroken")
    assert json.loads(model.payload()) == {"Message": "m", "ErrorCode": "StreamBroken"}
    internal = StreamError(StreamErrorKind.INTERNAL_STREAM_FAILURE, "m", "ignored")
    assert json.loads(internal.payload()) == {"Message": "m"}


# --- wire log -------------------------------------------------------------------------------------


def test_wire_log_records_and_renders() -> None:
    ticks = iter([100.0, 100.5, 101.25])
    log = WireLog("s1", "bidi", "ep", head_bytes=4, clock=lambda: next(ticks))
    log.add(
        "client", "in", "PayloadPart", b"\x01\x02\x03\x04\x05", data_type="BINARY", completion_state="PARTIAL"
    )
    log.add("container", "in", "close", note="code 1000")
    log.outcome = "container-closed"
    first, second = log.records
    assert (first.t, first.length, first.head) == (0.5, 5, "01020304")
    assert second.t == 1.25 and second.note == "code 1000"
    assert log.select(leg="container") == [second]
    lines = [json.loads(line) for line in log.to_jsonl().splitlines()]
    assert lines[0] == {"session_id": "s1", "api": "bidi", "endpoint": "ep", "outcome": "container-closed"}
    assert lines[1]["completion_state"] == "PARTIAL" and "note" not in lines[1]


def test_wire_log_can_keep_no_content() -> None:
    log = WireLog("s1", "bidi", "ep", head_bytes=0)
    assert log.add("client", "in", "PayloadPart", b"secret text").head == ""
