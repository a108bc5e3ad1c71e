"""Benchmark 11: capacity: the most conversations one server keeps within its latency targets (issue #25).

The figure the endpoint's autoscaling is set from (infra/README.md, ``speech-infra``). The reference server
(real Kokoro on this machine's CPU) is driven through the SageMaker simulator, as a deployed endpoint is,
by ``N`` concurrent conversations for ``N`` = 1, 2, 3, 4, 6, 8, ... Each conversation speaks agent replies one
after another, drawn in turn from a mix (:data:`MIX`: short openers, the bench reply, replies with long
sentences, a one-liner), on a session of its own per reply, every sentence a request sent at once (as the
reference agent pipelines a reply). Between two replies the caller listens to the reply's end (a real-time
player) and talks for :attr:`Config.turn_s`. Conversations start a little apart (:attr:`Config.stagger_s`),
so the line is a mix of new speeches and speeches under way, not one synchronized burst.

Per reply: time to first audio (the first request sent to its first audio frame) and underrun (the
silence a real-time player inserts after the first audio, :func:`bench.playback.underrun`); per level, the
streams open at once on average (the seconds each reply's session was open, over the level's wall time),
the quantity SageMaker's ``ConcurrentRequestsPerModel`` metric counts (infra/endpoint.py). A level
*holds* when the p95 of both stays within :attr:`Config.first_audio_target_ms` and
:attr:`Config.underrun_target_ms`; the capacity is the largest level that holds with every level below it.
The levels rise until two in a row fail.

The server runs with admission by latency off (``first_audio_budget_s`` far beyond any wait): the benchmark
measures where latency degrades, which is where the autoscaler must add an instance before the server
starts answering ``server_busy`` (PROTOCOL.md §10.2). The client, the simulator and the server share this
machine's cores, as the figures' environment says; on a machine shared with other work the figures are
lower than a dedicated instance's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.channels import BYTES_PER_SECOND, converse, simulator_channel
from bench.playback import underrun
from bench.record import Result
from bench.summary import describe
from bench.texts import LONG_REPLIES, REPLY_SENTENCES

__all__ = ["MIX", "NAME", "SMOKE", "TITLE", "Config", "holds", "notes", "plot", "run", "tables"]

NAME = "capacity"
TITLE = "11. Capacity: concurrent conversations one server keeps within its latency targets"

MIX: tuple[tuple[str, ...], ...] = (
    REPLY_SENTENCES[:2],
    LONG_REPLIES["technician"],
    ("Got it.", "I have noted your new address."),
    LONG_REPLIES["refund"],
    ("Sure, one moment while I check that for you.",),
    LONG_REPLIES["dentist"],
)
"""The agent replies the conversations speak, in turn: an opener and a long sentence (the bench reply and
:data:`bench.texts.LONG_REPLIES`), a short two-sentence confirmation, a one-sentence holding line."""

NO_ADMISSION_S = 1_000_000.0
"""``first_audio_budget_s`` of the measured server: admission by latency never refuses (module docstring)."""


@dataclass(frozen=True)
class Config:
    """Attributes:
    levels: concurrent conversations to try, rising (stops after two failing levels in a row).
    replies_per_conversation: replies each conversation speaks at each level.
    turn_s: the caller's turn between two replies, seconds (after the reply has played to its end).
    stagger_s: conversation ``i`` starts ``i * stagger_s`` seconds after the first, modulo
        :attr:`stagger_window_s`.
    stagger_window_s: the window the starts are spread over.
    first_audio_target_ms, underrun_target_ms: the p95 targets a level must hold (module docstring).
    replies: the mix (:data:`MIX`).
    """

    levels: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
    replies_per_conversation: int = 4
    turn_s: float = 1.0
    stagger_s: float = 0.37
    stagger_window_s: float = 1.5
    first_audio_target_ms: float = 1500.0
    underrun_target_ms: float = 500.0
    replies: tuple[tuple[str, ...], ...] = field(default_factory=lambda: MIX)


SMOKE = Config(levels=(1, 2), replies_per_conversation=1, turn_s=0.2, replies=(("Hello there.", "Bye now."),))


def holds(level: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a level's p95 first audio and p95 underrun are within the targets, with no failed reply."""
    first, silence = level["first_audio_ms"]["p95"], level["underrun_ms"]["p95"]
    return (
        not level["failed"]
        and first is not None
        and silence is not None
        and first <= config["first_audio_target_ms"]
        and silence <= config["underrun_target_ms"]
    )


async def _reply(simulator: Any, sentences: Sequence[str]) -> dict[str, Any]:
    """One reply on a session of its own: its first audio, its underrun, when its audio ends playing."""
    opened = time.perf_counter()
    async with simulator_channel(simulator, "capacity") as channel:
        timelines = await converse(channel, sentences)
    open_s = time.perf_counter() - opened
    arrivals = [arrival for timeline in timelines for arrival in timeline.arrivals]
    silence_s, stalls = underrun(arrivals, BYTES_PER_SECOND)
    first = timelines[0]
    played_until = arrivals[0][0] + sum(size for _, size in arrivals) / BYTES_PER_SECOND + silence_s
    return {
        "first_audio_ms": round(first.first_audio_ms or 0.0, 1),
        "underrun_ms": round(silence_s * 1000.0, 1),
        "stalls": stalls,
        "audio_s": round(sum(t.audio_s for t in timelines), 3),
        "open_s": round(open_s, 3),
        "played_until": played_until,
    }


async def _conversation(
    simulator: Any, number: int, config: Config, mix: itertools.cycle[tuple[str, ...]]
) -> list[dict[str, Any]]:
    await asyncio.sleep((number * config.stagger_s) % config.stagger_window_s)
    outcomes = []
    for turn in range(config.replies_per_conversation):
        sentences = next(mix)
        try:
            outcome = await _reply(simulator, sentences)
        except Exception as exc:  # a failed reply fails its level; the conversation goes on
            outcomes.append({"conversation": number, "turn": turn, "error": f"{type(exc).__name__}: {exc}"})
            continue
        played_until = outcome.pop("played_until")
        outcomes.append({"conversation": number, "turn": turn, "sentences": len(sentences), **outcome})
        await asyncio.sleep(max(0.0, played_until - time.perf_counter()) + config.turn_s)
    return outcomes


async def _level(simulator: Any, conversations: int, config: Config) -> dict[str, Any]:
    mix = itertools.cycle(config.replies)
    started = time.perf_counter()
    per_conversation = await asyncio.gather(
        *(_conversation(simulator, n, config, mix) for n in range(conversations))
    )
    replies = [outcome for outcomes in per_conversation for outcome in outcomes]
    good = [r for r in replies if "error" not in r]
    wall_s = time.perf_counter() - started
    return {
        "conversations": conversations,
        "replies": len(replies),
        "failed": [r["error"] for r in replies if "error" in r][:5],
        "first_audio_ms": describe([r["first_audio_ms"] for r in good]),
        "underrun_ms": describe([r["underrun_ms"] for r in good]),
        "wall_s": round(wall_s, 1),
        # What SageMaker's ConcurrentRequestsPerModel counts: streams open at once, on average.
        "streams_open": round(sum(r["open_s"] for r in good) / wall_s, 2),
        "trials": replies,
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Rising levels on a fresh server behind the simulator, until two levels in a row fail."""
    from bench.stack import ReferenceServer, simulated_endpoint

    result = Result(NAME, TITLE, config=asdict(config))
    context.log("  starting a fresh reference server without admission by latency ...")
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(ReferenceServer("onnx", first_audio_budget_s=NO_ADMISSION_S))
        simulator = await stack.enter_async_context(simulated_endpoint(server))
        result.config["server"] = server.settings()
        await _level(simulator, 1, Config(replies_per_conversation=1, replies=config.replies[:1]))  # warm-up
        levels, failing = [], 0
        for conversations in config.levels:
            level = await _level(simulator, conversations, config)
            trials = level.pop("trials")
            result.trials += [{**trial, "level": conversations} for trial in trials]
            level["holds"] = holds(level, result.config)
            levels.append(level)
            context.log(
                f"  {conversations} conversation(s): first audio p95 {level['first_audio_ms']['p95']} ms, "
                f"underrun p95 {level['underrun_ms']['p95']} ms, {'holds' if level['holds'] else 'fails'}"
            )
            failing = 0 if level["holds"] else failing + 1
            if failing == 2:
                break
    capacity = 0
    for level in levels:
        if not level["holds"]:
            break
        capacity = level["conversations"]
    result.figures = {"levels": levels, "capacity": capacity}
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """One row per level: first audio and underrun (p50 / p95), replies, whether the level holds."""
    config = result["config"]
    headers = [
        "conversations",
        "first audio p50 / p95",
        "underrun p50 / p95",
        "streams open (mean)",
        "replies",
        f"holds (p95 ≤ {config['first_audio_target_ms']:,.0f} ms, ≤ {config['underrun_target_ms']:,.0f} ms)",
    ]
    rows = []
    for level in result["figures"]["levels"]:
        first, silence = level["first_audio_ms"], level["underrun_ms"]

        def cell(figures: dict[str, Any]) -> str:
            if figures["median"] is None:
                return "–"
            return f"{figures['median']:,.0f} / {figures['p95']:,.0f} ms"

        failed = f" ({len(level['failed'])} failed)" if level["failed"] else ""
        rows.append(
            [
                str(level["conversations"]),
                cell(first),
                cell(silence),
                f"{level.get('streams_open', 0):.1f}",
                f"{level['replies']}{failed}",
                "yes" if level["holds"] else "no",
            ]
        )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """The capacity figure, what it is for, and what it does not say."""
    config, figures = result["config"], result["figures"]
    at_capacity = next((lv for lv in figures["levels"] if lv["conversations"] == figures["capacity"]), None)
    streams = "–" if at_capacity is None else f"{at_capacity.get('streams_open', 0):.1f}"
    environment = result.get("environment", {})
    cpu = f"{environment.get('cpus_usable', '?')} cores of {environment.get('cpu_model') or 'this machine'}"
    load = environment.get("load_average")
    return [
        f"Capacity of one reference server (onnx, {cpu}): **{figures['capacity']} concurrent "
        f"conversation(s)** keep p95 first audio within {config['first_audio_target_ms']:,.0f} ms and p95 "
        f"underrun within {config['underrun_target_ms']:,.0f} ms. `speech-infra` sets the endpoint's "
        "target-tracking autoscaling from this figure: at that level "
        f"{streams} bidirectional streams are open at once on average (a session per reply, none during the "
        "caller's turn), the quantity SageMaker's `ConcurrentRequestsPerModel` counts, so "
        "`target_concurrency` is set to it (infra/README.md). Load average at the start: "
        f"{load} (a machine shared with other work gives lower figures).",
        "Targets: 1.5 s p95 first audio leaves a margin under the 2.5 s `first_audio_budget_s` at which the "
        "server starts answering `server_busy` (PROTOCOL.md §10.2), so the autoscaler adds an instance "
        "before callers are refused; 0.5 s of silence in a reply is one long pause a caller notices.",
        f"Each conversation speaks {config['replies_per_conversation']} replies of the mix per level, a "
        f"session per reply, through the simulator, with a caller's turn of {config['turn_s']:g} s after "
        "each reply has played; the client, the simulator and the server share the machine's cores.",
        "Only this machine's CPU was measured. A GPU instance serves many more (Kokoro-82M produces 55-78 "
        "hours of audio per hour on one H100, a third-party figure, REFERENCE.md §3): run this benchmark "
        "on the instance kind before trusting a target for it (bench/gpu.sh runs the GPU benchmark).",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """p50 and p95 first audio and underrun against the number of conversations, with the targets."""
    from bench.plots import line_chart

    config, levels = result["config"], result["figures"]["levels"]
    xs = [level["conversations"] for level in levels]

    def series(key: str, stat: str) -> list[float | None]:
        return [level[key][stat] for level in levels]

    line_chart(
        path,
        "concurrent conversations",
        [
            (
                "first audio (ms)",
                {
                    "p50": (xs, series("first_audio_ms", "median")),
                    "p95": (xs, series("first_audio_ms", "p95")),
                },
            ),
            (
                "underrun per reply (ms)",
                {
                    "p50": (xs, series("underrun_ms", "median")),
                    "p95": (xs, series("underrun_ms", "p95")),
                    "target": (xs, [config["underrun_target_ms"]] * len(xs)),
                },
            ),
        ],
        title=f"Capacity: {result['figures']['capacity']} conversation(s) within the targets",
        hline=(config["first_audio_target_ms"], "p95 target"),
    )
