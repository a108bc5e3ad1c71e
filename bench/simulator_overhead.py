"""Benchmark 5: what the simulator adds to first-audio time.

The same short request (:data:`bench.texts.SHORT_TEXT`) goes to the same running reference server two
ways, alternating trial by trial:

* ``simulator``: the official client (``aws-sdk-sagemaker-runtime-http2``, CRT transport) over TLS +
  HTTP/2 to the simulator, which signs nothing, checks the event-stream framing, and relays each
  PayloadPart to the container's WebSocket and back;
* ``direct``: a python-websockets client straight to the container's WebSocket route.

Each trial opens a new session (not timed) and times request sent → first audio received. The
difference of the medians is the simulator's cost (and the official client's) on this machine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.channels import converse, direct_channel, simulator_channel
from bench.record import Result
from bench.stack import simulated_endpoint
from bench.summary import describe, ratio
from bench.texts import SHORT_TEXT

__all__ = ["NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "simulator_overhead"
TITLE = "5. Simulator overhead: first audio through the simulator vs direct"

PATHS = ("simulator", "direct")


@dataclass(frozen=True)
class Config:
    """Attributes: trials per path (after one untimed warm-up of each); the text."""

    trials: int = 7
    text: str = SHORT_TEXT


SMOKE = Config(trials=1)


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the two paths ``config.trials`` times each (the first path alternates too)."""
    server = await context.servers.get("onnx")
    result = Result(NAME, TITLE, config={**asdict(config), "server": server.settings()})
    async with simulated_endpoint(server) as simulator:

        async def once(path: str) -> float:
            opener = simulator_channel(simulator) if path == "simulator" else direct_channel(server.ws_url)
            async with opener as channel:
                (timeline,) = await converse(channel, [config.text])
            assert timeline.first_audio_ms is not None
            return timeline.first_audio_ms

        for path in PATHS:
            await once(path)
        for number in range(config.trials):
            for path in PATHS if number % 2 == 0 else PATHS[::-1]:
                first_ms = await once(path)
                result.trials.append(
                    {"trial": number + 1, "path": path, "first_audio_ms": round(first_ms, 1)}
                )
                context.log(f"  trial {number + 1} {path:<9} first audio {first_ms:7.1f} ms")
    medians = {}
    for path in PATHS:
        medians[path] = describe([t["first_audio_ms"] for t in result.trials if t["path"] == path])
    through, direct = medians["simulator"]["median"], medians["direct"]["median"]
    result.figures = {
        **medians,
        "overhead_ms": None if through is None or direct is None else round(through - direct, 1),
        "simulator_over_direct": ratio(through, direct),
    }
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The two medians and their difference (no seed figure exists for this)."""
    figures = result["figures"]
    headers = ["path", "first audio, median", "p95", "n"]
    names = {
        "simulator": "simulator (official client, TLS h2)",
        "direct": "direct WebSocket to the container",
    }
    rows = [
        [
            names[path],
            f"{figures[path]['median']:,.1f} ms",
            f"{figures[path]['p95']:,.1f} ms",
            str(figures[path]["n"]),
        ]
        for path in PATHS
    ]
    rows.append(["overhead (difference of medians)", f"{figures['overhead_ms']:+,.1f} ms", "", ""])
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """How large the difference is next to the spread of the trials."""
    figures = result["figures"]
    spread = max(figures[path]["max"] - figures[path]["min"] for path in PATHS)
    return [
        f"Each trial opens a new session first (not timed). The trials spread over up to {spread:,.0f} ms on "
        f"this machine, against a difference of {figures['overhead_ms']:+,.0f} ms between the medians.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's first-audio time on each path."""
    from bench.plots import strip_chart

    series = {p: [t["first_audio_ms"] for t in result["trials"] if t["path"] == p] for p in PATHS}
    strip_chart(
        path,
        "First audio (ms)",
        series,
        title=f'"{result["config"]["text"]}", overhead {result["figures"]["overhead_ms"]:+.1f} ms (median)',
    )
