"""Benchmark 1: time to first audio over the transport, whole text vs first sentence only.

The seed sent its 267-character, four-sentence text to its own server in one message and got the
first audio byte after 329.3 ms; sending only the first sentence brought that to 156.7 ms (−52.4 %,
REFERENCE.md §3). The seed's server synthesized a message in one Kokoro pass and sent it as one frame.

Three modes, through the SageMaker simulator (the official clients) and the reference server, taken
in turn within every trial (the order rotates from trial to trial) and each timed from the moment the
request is handed to the client to the first audio byte received:

* ``whole_one_piece``: the whole text as one message, answered in one piece: ``InvokeEndpoint``
  (boto3, the simulator's HTTP/1.1 door) with ``POST /invocations`` ``stream: false`` (PROTOCOL.md
  §11), so the first audio byte comes only when the whole text is synthesized, as from the seed's
  server;
* ``first_sentence``: only the first sentence, over the bidirectional stream (official HTTP/2 client,
  TLS);
* ``whole_streamed``: the whole text as one message over the bidirectional stream, where the server
  sends each segment (sentence) as soon as it is synthesized: the server's own per-segment streaming.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import seeds
from bench.channels import converse, simulator_channel
from bench.record import Result
from bench.stack import simulated_endpoint
from bench.summary import change_pct, describe, ms
from bench.texts import REPLY, REPLY_SENTENCES

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "transport_latency"
TITLE = "1. Transport: time to first audio, whole text vs first sentence"

MODES = ("whole_one_piece", "first_sentence", "whole_streamed")
LABELS = {
    "whole_one_piece": "whole text, answered in one piece",
    "first_sentence": "first sentence only",
    "whole_streamed": "whole text, per-segment streaming",
}


@dataclass(frozen=True)
class Config:
    """Attributes: trials per mode (after one untimed warm-up of each); the text and its first sentence."""

    trials: int = 5
    text: str = REPLY
    first_sentence: str = REPLY_SENTENCES[0]


SMOKE = Config(trials=1, text="Hello there. It is me.", first_sentence="Hello there.")


def _invoke_whole(client: Any, text: str) -> tuple[float, int]:
    """One unstreamed ``InvokeEndpoint``: (ms to the first audio byte, audio bytes). Runs in a thread."""
    body = json.dumps({"text": text, "format": "pcm", "stream": False}).encode()
    sent = time.perf_counter()
    response = client.invoke_endpoint(
        EndpointName="bench", Body=body, ContentType="application/json", Accept="audio/pcm"
    )
    stream = response["Body"]
    first = stream.read(2)
    first_ms = (time.perf_counter() - sent) * 1000.0
    rest = stream.read()
    return first_ms, len(first) + len(rest)


async def _trial(mode: str, simulator: Any, client: Any, config: Config) -> dict[str, Any]:
    if mode == "whole_one_piece":
        first_ms, audio_bytes = await asyncio.to_thread(_invoke_whole, client, config.text)
        return {
            "mode": mode,
            "first_audio_ms": round(first_ms, 1),
            "all_audio_ms": round(first_ms, 1),
            "audio_s": round(audio_bytes / 48_000, 3),
        }
    text = config.first_sentence if mode == "first_sentence" else config.text
    async with simulator_channel(simulator) as channel:
        (timeline,) = await converse(channel, [text])
    assert timeline.first_audio_ms is not None and timeline.complete_ms is not None
    return {
        "mode": mode,
        "first_audio_ms": round(timeline.first_audio_ms, 1),
        "all_audio_ms": round(timeline.complete_ms, 1),
        "audio_s": round(timeline.audio_s, 3),
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Run the three modes ``config.trials`` times each, rotating their order (see the module docstring)."""
    from sagemaker_transport.client import runtime_client

    server = await context.servers.get("onnx")
    result = Result(
        NAME,
        TITLE,
        config={
            **asdict(config),
            "text_chars": len(config.text),
            "server": server.settings(),
            "transport": {
                "whole_one_piece": "InvokeEndpoint (boto3, HTTP/1.1 door)",
                "first_sentence": "InvokeEndpointWithBidirectionalStream (official client, TLS h2)",
                "whole_streamed": "InvokeEndpointWithBidirectionalStream (official client, TLS h2)",
            },
        },
    )
    async with simulated_endpoint(server) as simulator:
        client = await asyncio.to_thread(runtime_client, simulator.http1_url, max_attempts=1)
        for mode in MODES:  # warm-up: connections, caches, the model's first passes
            await _trial(mode, simulator, client, config)
        for number in range(config.trials):
            order = MODES[number % 3 :] + MODES[: number % 3]
            for mode in order:
                trial = await _trial(mode, simulator, client, config)
                trial["trial"] = number + 1
                result.trials.append(trial)
                context.log(f"  trial {number + 1} {mode:<16} first audio {trial['first_audio_ms']:8.1f} ms")
    figures: dict[str, Any] = {}
    for mode in MODES:
        firsts = [t["first_audio_ms"] for t in result.trials if t["mode"] == mode]
        alls = [t["all_audio_ms"] for t in result.trials if t["mode"] == mode]
        figures[mode] = {"first_audio_ms": describe(firsts), "all_audio_ms": describe(alls)}
    whole = figures["whole_one_piece"]["first_audio_ms"]["median"]
    figures["first_sentence_change_pct"] = change_pct(
        figures["first_sentence"]["first_audio_ms"]["median"], whole
    )
    figures["whole_streamed_change_pct"] = change_pct(
        figures["whole_streamed"]["first_audio_ms"]["median"], whole
    )
    result.figures = figures
    result.seed = {
        "text_chars": seeds.TEXT_CHARS,
        "trials": seeds.TRIALS,
        "whole_one_piece_ms": seeds.FIRST_AUDIO_WHOLE_TEXT_MS,
        "first_sentence_ms": seeds.FIRST_AUDIO_FIRST_SENTENCE_MS,
        "change_pct": seeds.FIRST_AUDIO_CHANGE_PCT,
    }
    return result


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f} %"


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Rows: each mode's median first-audio time (and n), ours beside the seed's."""
    figures, seed = result["figures"], result["seed"]
    headers = [
        "mode",
        "first audio, median (ours)",
        "n",
        "all audio, median",
        "seed",
        "change vs whole (ours)",
        "seed change",
    ]
    rows = []
    seed_ms = {"whole_one_piece": seed["whole_one_piece_ms"], "first_sentence": seed["first_sentence_ms"]}
    changes = {
        "first_sentence": (figures["first_sentence_change_pct"], seed["change_pct"]),
        "whole_streamed": (figures["whole_streamed_change_pct"], None),
    }
    for mode in MODES:
        first = figures[mode]["first_audio_ms"]
        ours_change, seed_change = changes.get(mode, (None, None))
        rows.append(
            [
                LABELS[mode],
                ms(first["median"]),
                str(first["n"]),
                ms(figures[mode]["all_audio_ms"]["median"]),
                ms(seed_ms.get(mode)),
                _pct(ours_change) if mode != "whole_one_piece" else "(baseline)",
                _pct(seed_change)
                if mode == "first_sentence"
                else ("(baseline)" if mode == "whole_one_piece" else "–"),
            ]
        )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """How to read the figures: what differs from the seed's setting, and why the change is larger."""
    audio = {
        mode: statistics.median([t["audio_s"] for t in result["trials"] if t["mode"] == mode] or [0.0])
        for mode in MODES
    }
    return [
        "Ours: Kokoro-82M int8 ONNX on this machine's CPU; the seed: its own server on a deployed GPU "
        "endpoint. Compare the change in percent, not the milliseconds.",
        "On a CPU, synthesis time grows with the audio: the whole text is "
        f"{audio['whole_one_piece']:.1f} s of audio, the first sentence {audio['first_sentence']:.1f} s, so "
        "sending the first sentence alone saves more here than on the seed's GPU, where fixed costs per "
        "request weigh more.",
        "Per-segment streaming: the reference server sends each sentence as soon as it is synthesized, so "
        "the whole text sent as one message starts playing about as soon as the first sentence alone; the "
        "client need not split the text to get the head start.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's first-audio time per mode, medians marked, with the seed's two figures."""
    from bench.plots import strip_chart

    series = {
        LABELS[mode]: [t["first_audio_ms"] for t in result["trials"] if t["mode"] == mode] for mode in MODES
    }
    seed = result["seed"]
    references = {
        LABELS["whole_one_piece"]: seed["whole_one_piece_ms"],
        LABELS["first_sentence"]: seed["first_sentence_ms"],
    }
    strip_chart(
        path,
        "Time to first audio (ms)",
        series,
        references,
        title=f"{result['config']['text_chars']}-character reply, n = {result['config']['trials']} per mode",
    )
