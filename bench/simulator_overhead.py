"""Benchmark 5: what the simulator adds to first-audio time, leg by leg.

The same short request (:data:`bench.texts.SHORT_TEXT`) goes to the same running reference server three
ways, alternating trial by trial:

* ``direct``: a python-websockets client straight to the container's WebSocket route;
* ``simulator``: the official client (``aws-sdk-sagemaker-runtime-http2``, CRT transport) over TLS +
  HTTP/2 to the simulator, which relays each PayloadPart to the container's WebSocket and back, with
  Nagle's algorithm off on the client's connection (``set_tcp_nodelay``, as our clients do);
* ``simulator, client Nagle on``: the same with the official client's own socket settings, where each
  small send can wait for the endpoint's delayed ACK (REFERENCE.md §8), as it does against SageMaker.

Each trial opens a new session (not timed) and times request sent → first audio received. On the
simulator paths the wire log's time stamps (:attr:`simulator.wirelog.WireLog.started_at`) split that
time into legs: client → simulator (the client's send path and the socket), the simulator's own work
inbound (event-stream decoding to WebSocket frame), simulator → container → simulator (the WebSocket
round trip to ``synthesis_start``), the model (``synthesis_start`` to the first audio frame at the
simulator), the simulator's own work outbound (WebSocket frame to PayloadPart), and simulator → client
(the socket and the client's receive path).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.channels import converse, direct_channel, simulator_channel
from bench.record import Result
from bench.stack import simulated_endpoint
from bench.summary import describe, ratio
from bench.texts import SHORT_TEXT

__all__ = ["LEGS", "NAME", "PATHS", "SMOKE", "TITLE", "Config", "legs", "notes", "plot", "run", "tables"]

NAME = "simulator_overhead"
TITLE = "5. Simulator overhead: first audio through the simulator vs direct, leg by leg"

PATHS = ("simulator", "simulator_nagle", "direct")
PATH_NAMES = {
    "simulator": "simulator (official client, TLS h2, Nagle off)",
    "simulator_nagle": "simulator, client Nagle on (the CRT's default)",
    "direct": "direct WebSocket to the container",
}

LEGS = (
    ("client_to_simulator", "client → simulator"),
    ("simulator_in", "simulator's own work, inbound"),
    ("container_round_trip", "simulator → container → simulator"),
    ("model", "model (synthesis_start to first audio)"),
    ("simulator_out", "simulator's own work, outbound"),
    ("simulator_to_client", "simulator → client"),
)
"""The legs of first audio through the simulator, in order: (key, name)."""


@dataclass(frozen=True)
class Config:
    """Attributes: trials per path (after one untimed warm-up of each); the text."""

    trials: int = 9
    text: str = SHORT_TEXT


SMOKE = Config(trials=1)


def legs(
    records: list[Any], started_at: float, sent_at: float, first_audio_at: float
) -> dict[str, float] | None:
    """First audio split into :data:`LEGS`, in milliseconds, from one session's wire log.

    Args:
        records: the session's :class:`simulator.wirelog.WireRecord` list.
        started_at: the log's :attr:`~simulator.wirelog.WireLog.started_at` (``time.monotonic`` clock).
        sent_at, first_audio_at: the client's send and first-audio times on the same clock.

    Returns ``None`` when the log lacks one of the events (a failed session).
    """

    def first(leg: str, direction: str, event: str, *, after: float = -1.0, binary: bool | None = None):
        for record in records:
            if (record.leg, record.direction, record.event) != (leg, direction, event) or record.t < after:
                continue
            if binary is not None and (record.data_type == "BINARY") is not binary:
                continue
            return record.t
        return None

    request_in = first("client", "in", "PayloadPart")
    if request_in is None:
        return None
    request_out = first("container", "out", "text", after=request_in) or first(
        "container", "out", "binary", after=request_in
    )
    start_in = first("container", "in", "text", after=request_out or 0.0)
    audio_in = first("container", "in", "binary", after=start_in or 0.0)
    audio_out = first("client", "out", "PayloadPart", after=audio_in or 0.0, binary=True)
    points = [request_in, request_out, start_in, audio_in, audio_out]
    if any(point is None for point in points):
        return None
    times = [sent_at, *(started_at + point for point in points), first_audio_at]  # type: ignore[operator]
    return {
        key: round((later - earlier) * 1000.0, 3)
        for (key, _), earlier, later in zip(LEGS, times[:-1], times[1:], strict=True)
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the three paths ``config.trials`` times each (the order rotates trial by trial)."""
    server = await context.servers.get("onnx")
    result = Result(NAME, TITLE, config={**asdict(config), "server": server.settings()})
    # The client times with perf_counter, the wire log with monotonic: line them up once.
    offset = time.monotonic() - time.perf_counter()
    async with simulated_endpoint(server) as simulator:

        async def once(path: str) -> dict[str, Any]:
            if path == "direct":
                opener = direct_channel(server.ws_url)
            else:
                opener = simulator_channel(simulator, tcp_nodelay=path == "simulator")
            async with opener as channel:
                (timeline,) = await converse(channel, [config.text])
            assert timeline.first_audio_ms is not None and timeline.sent_at is not None
            row: dict[str, Any] = {"path": path, "first_audio_ms": round(timeline.first_audio_ms, 2)}
            if path != "direct":
                log = simulator.wire_logs[-1]
                assert timeline.first_audio_at is not None
                row["legs_ms"] = legs(
                    log.records, log.started_at, timeline.sent_at + offset, timeline.first_audio_at + offset
                )
            return row

        for path in PATHS:
            await once(path)
        for number in range(config.trials):
            shift = number % len(PATHS)
            for path in PATHS[shift:] + PATHS[:shift]:
                row = await once(path)
                result.trials.append({"trial": number + 1, **row})
                context.log(f"  trial {number + 1} {path:<15} first audio {row['first_audio_ms']:7.1f} ms")
    result.figures = _figures(result.trials)
    return result


def _figures(trials: list[dict[str, Any]]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        path: describe([t["first_audio_ms"] for t in trials if t["path"] == path], digits=2) for path in PATHS
    }
    direct = figures["direct"]["median"]
    for path in ("simulator", "simulator_nagle"):
        through = figures[path]["median"]
        figures[f"{path}_overhead_ms"] = (
            None if through is None or direct is None else round(through - direct, 2)
        )
        rows = [t["legs_ms"] for t in trials if t["path"] == path and t.get("legs_ms")]
        figures[f"{path}_legs_ms"] = {
            key: round(statistics.median(r[key] for r in rows), 3) if rows else None for key, _ in LEGS
        }
    figures["overhead_ms"] = figures["simulator_overhead_ms"]
    figures["simulator_over_direct"] = ratio(figures["simulator"]["median"], direct)
    return figures


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """First audio per path with the overhead over direct; then the legs' medians on both simulator paths."""
    figures = result["figures"]
    paths = [p for p in PATHS if p in figures]
    headers = ["path", "first audio, median", "p95", "over direct", "n"]
    rows = []
    for path in paths:
        fallback = figures.get("overhead_ms") if path == "simulator" else None  # results before the legs
        overhead = figures.get(f"{path}_overhead_ms", fallback)
        rows.append(
            [
                PATH_NAMES[path],
                f"{figures[path]['median']:,.1f} ms",
                f"{figures[path]['p95']:,.1f} ms",
                "" if overhead is None else f"{overhead:+,.1f} ms",
                str(figures[path]["n"]),
            ]
        )
    leg_paths = [p for p in ("simulator", "simulator_nagle") if f"{p}_legs_ms" in figures]
    leg_headers = ["leg of first audio", *(f"median, {PATH_NAMES[p].split(' (')[0]}" for p in leg_paths)]
    leg_rows = []
    for key, name in LEGS:
        cells = [figures[f"{p}_legs_ms"].get(key) for p in leg_paths]
        leg_rows.append([name, *("–" if c is None else f"{c:,.2f} ms" for c in cells)])
    return [(headers, rows), (leg_headers, leg_rows)] if leg_paths else [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """How to read the legs, and what the Nagle path shows."""
    figures = result["figures"]
    lines = [
        "Each trial opens a new session first (not timed); the three paths take turns, the order rotating "
        "trial by trial. The legs are medians of each leg over the trials, so they need not add up to the "
        "median first audio exactly.",
        "The simulator's own work is the two 'own work' legs (event-stream decoding and WebSocket framing "
        "inbound; WebSocket reading and PayloadPart framing outbound); the other legs are sockets, the "
        "official client's send and receive paths, the container's WebSocket stack and the model.",
    ]
    legs_on = figures.get("simulator_legs_ms") or {}
    nagle = figures.get("simulator_nagle_legs_ms") or {}
    inbound, outbound = legs_on.get("simulator_in"), legs_on.get("simulator_out")
    if inbound is not None and outbound is not None:
        outside = sum(v for k, v in legs_on.items() if k != "model" and v is not None)
        lines.append(
            f"The simulator's own work: {inbound:.2f} ms inbound and {outbound:.2f} ms outbound (medians). "
            f"Outside the model, first audio spends {outside:.1f} ms on the simulator path (sum of the legs' "
            "medians), of which the container's own WebSocket work is part of the round trip and is paid on "
            "the direct path too. The difference of the medians above also carries the model's spread, "
            "which dominates on a busy machine."
        )
    on, off = legs_on.get("client_to_simulator"), nagle.get("client_to_simulator")
    if on is not None and off is not None:
        head = (
            f"Client Nagle on (the CRT's default, REFERENCE.md §8): the client → simulator leg is {off:,.1f} "
            f"ms against {on:,.1f} ms with Nagle off"
        )
        if off > on + 20.0:
            lines.append(
                f"{head}: the request waited for the simulator's delayed ACK of the client's previous small "
                "write. `sagemaker_transport.client.set_tcp_nodelay` removes it (README)."
            )
        else:
            lines.append(
                f"{head}: in this flow the simulator's own frames carry the ACK the client's small writes "
                "wait for, so Nagle costs nothing here; it still can against an endpoint with nothing to "
                "send between two small client writes, which `sagemaker_transport.client.set_tcp_nodelay` "
                "rules out (README)."
            )
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's first-audio time on each path."""
    from bench.plots import strip_chart

    figures = result["figures"]
    series = {
        PATH_NAMES[p].split(" (")[0]: [t["first_audio_ms"] for t in result["trials"] if t["path"] == p]
        for p in PATHS
        if p in figures
    }
    overhead = figures.get("overhead_ms")
    strip_chart(
        path,
        "First audio (ms)",
        series,
        title=f'"{result["config"]["text"]}", simulator overhead {overhead:+.1f} ms (median, Nagle off)',
    )
