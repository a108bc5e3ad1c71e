"""Simulator settings: every behaviour that is not public is a setting, with the reason for its default.

Limits that SageMaker does not publish (part size, idle timeout, session length; REFERENCE §1) are
off by default, so the simulator never fails a container for a rule nobody can cite. Numbers the
AWS container contract does state (accept within 250 ms, 6 MiB request body, 60 s to answer
``POST /invocations``) default to those values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simulator.faults import FaultPlan
from simulator.splitting import SplitPolicy

__all__ = ["SimulatorSettings"]


@dataclass(frozen=True)
class SimulatorSettings:
    """How the simulated endpoint behaves. Immutable; :meth:`Simulator.update` swaps it whole.

    Endpoint identity:
        endpoint_name: the only endpoint name served; others get the service's "not found"
            validation error (400). None (default) serves any name.
        production_variant: value of ``x-Amzn-Invoked-Production-Variant``.

    Output shaping (both the bidi output and the response stream):
        split: the split policy (:mod:`simulator.splitting`), default ``none``.
        seed: seeds the split policy; each session starts from the same seed, so identical
            container output is cut identically in every session.
        faults: the armed faults (:mod:`simulator.faults`), default none.
        part_latency_s: delay added before forwarding each PayloadPart, both directions, to
            emulate a network hop. Default 0.

    Container contract (PROTOCOL.md §2):
        accept_timeout_s: the container must accept the WebSocket within this (AWS: 250 ms).
        ping_interval_s: the simulator pings the container this often during a session; None
            disables. Default 5 s (assumed: SageMaker's interval is not public).
        ping_timeout_s: a ping unanswered this long fails the session. Default 10 s, generous so
            a busy 2-core machine never fails a healthy container.
        close_timeout_s: how long teardown waits for the container's closing handshake.
        response_timeout_s: ``POST /invocations`` must start answering within this (AWS: 60 s).
        startup_timeout_s: how long a started container command may take to answer ``GET /ping``.

    Limits (not published, so off by default; set them to test a client's handling):
        max_part_bytes: largest PayloadPart in either direction. Larger input parts end the session
            with InternalStreamFailure; container messages are cut to fit.
        idle_timeout_s: a session with no traffic either way for this long ends with
            ModelStreamError ``ModelInvocationTimeExceeded``.
        max_session_s: a session older than this ends the same way.
        max_request_bytes: ``POST .../invocations[-response-stream]`` body limit (AWS: 6 MiB).
        input_window_bytes: the HTTP/2 door's flow control on input: the receive window of each
            stream (SETTINGS_INITIAL_WINDOW_SIZE), reopened only as the session reads the request, so a
            client that sends faster than the container side takes its input is held to this many
            bytes in flight. Default 65,535, HTTP/2's own initial window. Read when the listeners start.

    Wire log:
        wire_log_head_bytes: payload bytes kept per record (0 keeps none).
        wire_log_dir: if set, each finished session's log is written there as ``<session>.jsonl``.
        wire_log_keep: how many finished session logs stay in memory (oldest dropped).
    """

    endpoint_name: str | None = None
    production_variant: str = "AllTraffic"
    split: SplitPolicy = field(default_factory=SplitPolicy)
    seed: int = 0
    faults: FaultPlan = field(default_factory=FaultPlan)
    part_latency_s: float = 0.0
    accept_timeout_s: float = 0.25
    ping_interval_s: float | None = 5.0
    ping_timeout_s: float = 10.0
    close_timeout_s: float = 2.0
    response_timeout_s: float = 60.0
    startup_timeout_s: float = 300.0
    max_part_bytes: int | None = None
    idle_timeout_s: float | None = None
    max_session_s: float | None = None
    max_request_bytes: int = 6_291_456
    input_window_bytes: int = 65_535
    wire_log_head_bytes: int = 16
    wire_log_dir: Path | None = None
    wire_log_keep: int = 256

    def __post_init__(self) -> None:
        for name in ("accept_timeout_s", "ping_timeout_s", "close_timeout_s", "response_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("ping_interval_s", "idle_timeout_s", "max_session_s", "max_part_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive or None")
        if not 1 <= self.input_window_bytes <= 2**31 - 1:
            raise ValueError("input_window_bytes must be from 1 to 2**31-1")
        if self.part_latency_s < 0:
            raise ValueError("part_latency_s must not be negative")
