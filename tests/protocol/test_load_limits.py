"""The sans-I/O halves of the load bounds (PROTOCOL.md §10.3): the CPU budget and the queued output count."""

from __future__ import annotations

import json

import pytest

from protocol.errors import ErrorCode
from protocol.limits import CpuBudget, Limits
from protocol.server_session import ServerSession


def test_cpu_budget_lets_a_burst_through_then_paces_to_its_share():
    budget = CpuBudget(0.25, now=0.0)
    assert budget.charge(0.2, now=0.0) == 0.0  # within the one second's worth it holds
    pause = budget.charge(0.1, now=0.0)  # 0.05 s over: 0.2 s of wall time refills it at 25 %
    assert pause == pytest.approx(0.2)
    assert budget.charge(0.0, now=0.2) == pytest.approx(0.0, abs=1e-9)


def test_cpu_budget_never_saves_more_than_one_second_of_share():
    budget = CpuBudget(0.1, now=0.0)
    assert budget.charge(0.0, now=1000.0) == 0.0  # a long quiet spell
    assert budget.charge(0.1, now=1000.0) == 0.0
    assert budget.charge(0.1, now=1000.0) == pytest.approx(1.0)  # 0.1 s over at 10 % of a core


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_parse_cpu_share", 0),
        ("max_parse_cpu_share", 1.5),
        ("max_output_bytes", 0),
        ("send_timeout_s", 0),
        ("idle_eviction_s", -1),
        ("max_invocations", 0),
    ],
)
def test_load_limits_are_range_checked(field, value):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_queued_bytes_counts_what_data_to_send_has_not_taken():
    session = ServerSession()
    assert session.queued_bytes == 0
    session.receive_frame("not json")
    session.receive_frame(json.dumps({"type": "cancel", "request_id": "nope"}))
    queued = session.queued_bytes
    taken = session.data_to_send()  # the two refusals
    assert len(taken) == 2 and queued == sum(len(frame) for frame in taken) > 0
    assert session.queued_bytes == 0


def test_new_fatal_codes_close_with_their_codes():
    assert (ErrorCode.SESSION_IDLE.fatal, ErrorCode.SESSION_IDLE.close_code) == (True, 1001)
    assert (ErrorCode.CLIENT_NOT_READING.fatal, ErrorCode.CLIENT_NOT_READING.close_code) == (True, 1008)
    session = ServerSession()
    session.abort(ErrorCode.SESSION_IDLE, "idle for 300 s")
    (frame,) = session.data_to_send()
    assert json.loads(frame) == {
        "type": "error",
        "code": "session_idle",
        "message": "idle for 300 s",
        "request_id": None,
        "fatal": True,
    }
    assert session.close_code == 1001 and session.finished
