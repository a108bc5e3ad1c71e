"""§10.2 admission by latency: under a burst of new speeches every request is served in time or refused at
once with ``server_busy``, never left to wait silently; ``GET /ping`` stays 200 however busy the server is.

Both cases judge one recording (:func:`conformance.engine.recordings.busy_burst`): a reply spoken alone, so
that a server that learns its model's speed has measured it, then
:data:`~conformance.engine.recordings.BUSY_SESSIONS` sessions that open together and each ask for the opening
of an agent's reply. On two CPU cores the last of them would wait many seconds in line: a server must refuse
it instead. A fast server (a GPU, the tone server) serves them all in time and passes too.
"""

from __future__ import annotations

from typing import Any

from conformance.engine.case import Level, case
from conformance.engine.probe import Probe, Recording
from conformance.engine.recordings import BUSY_REFUSAL_S, BUSY_SESSIONS, busy_served_within

REFUSALS = frozenset({"server_busy", "too_many_sessions"})
"""Codes that refuse work because the server is full or busy (§9.1): honest answers to a burst."""


def _outcomes(conf: Probe, busy: Recording) -> list[dict[str, Any]]:
    conf.use(busy)
    busy.replay()
    extra = busy.extra
    outcomes = extra.get("outcomes")
    assert outcomes, f"the burst did not run: {busy.error}"
    kinds: dict[str, int] = {}
    for outcome in outcomes:
        kind = outcome["kind"] + (f" {outcome['code']}" if "code" in outcome else "")
        kinds[kind] = kinds.get(kind, 0) + 1
    conf.observe(budget_s=extra.get("budget_s"), sessions=extra.get("sessions"), outcomes=kinds)
    return outcomes


@case(
    "10.2.1",
    "§10.2",
    Level.MUST,
    requirements=("R10.2-4",),
    requirement="When that is later than `first_audio_budget_s` (§10) after the request's arrival because of "
    "work ahead of it, the server MUST refuse the request at once with the per-message error `server_busy` "
    "(`POST /invocations`: `503`, §11.6) instead of queueing it",
    description="describe (§4.4) to learn first_audio_budget_s (2.5 s, the default, when not listed); speak "
    f"a reply alone; then open {BUSY_SESSIONS} sessions at once (fewer if max_sessions is lower), each "
    "asking for the opening of an agent's reply",
    expectation="every session gets its first audio within 1.5 times the budget plus 1 s, or is refused with "
    f"server_busy (too_many_sessions as it opens) within {BUSY_REFUSAL_S:g} s: none waits silently",
)
def test_a_burst_is_served_in_time_or_refused_at_once(conf: Probe, busy: Recording) -> None:
    outcomes = _outcomes(conf, busy)
    budget = busy.extra["budget_s"]
    served_within = busy_served_within(budget)
    late = [o for o in outcomes if o["kind"] == "audio" and o["after_s"] > served_within]
    slow = [o for o in outcomes if o["kind"] in ("refused", "fatal") and o["after_s"] > BUSY_REFUSAL_S]
    wrong = [o for o in outcomes if o["kind"] in ("refused", "fatal") and o["code"] not in REFUSALS]
    silent = [o for o in outcomes if o["kind"] in ("silent", "ended")]
    conf.observe(
        first_audio_s=sorted(o["after_s"] for o in outcomes if o["kind"] == "audio"),
        refused_after_s=sorted(o["after_s"] for o in outcomes if o["kind"] in ("refused", "fatal")),
    )
    assert not silent, f"sessions got neither audio nor a refusal: {silent}"
    assert not late, (
        f"first audio later than {served_within:g} s (first_audio_budget_s {budget:g} s) without a refusal: "
        f"{[(o['session'], o['after_s']) for o in late]}; the server queued silently instead of answering "
        "server_busy"
    )
    assert not wrong, f"refused with a code that is not a busy answer: {wrong}"
    assert not slow, f"refusals later than {BUSY_REFUSAL_S:g} s: {slow}"


@case(
    "10.2.2",
    "§10.2",
    Level.MUST,
    requirements=("R10.2-7",),
    requirement="A server MUST answer `GET /ping` with `200` however busy it is (§2.2)",
    description=f"poll GET /ping every 0.25 s on the container while the {BUSY_SESSIONS} sessions of 10.2.1 "
    "begin their speeches",
    expectation="every poll answers 200",
)
def test_ping_stays_healthy_under_a_burst(conf: Probe, busy: Recording) -> None:
    conf.require_container("send it GET /ping")
    _outcomes(conf, busy)
    pings = busy.extra.get("pings", [])
    assert pings, f"no GET /ping was made ({busy.error or 'no error'})"
    conf.observe(polls=len(pings))
    failed = [status for status in pings if status != 200]
    assert not failed, f"GET /ping did not answer 200 while the server was busy: {failed[:5]}"
