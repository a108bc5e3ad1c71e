"""Benchmark 2: the agent end to end: first ``audio_chunk`` after ``agent_start``, bidi, stream and batch.

The seed's agent started speaking 2.4 times sooner in ``bidi`` mode (each sentence to the TTS as soon
as it is written) than in ``batch`` mode (the whole reply at once), locally, and 3.5 times sooner
deployed (REFERENCE.md §3). ``stream`` mode pipes the model's tokens into one utterance and lets the
server cut it (PROTOCOL.md §15): it should start as soon as ``bidi`` and, like it, play without a gap.

Here the whole local stack runs (:class:`reference_agent.local.LocalStack`): the agent app on the
scripted model, the official SageMaker client, the simulator (TLS + HTTP/2) and the reference server
(Kokoro-82M int8 ONNX on the CPU). The scripted model writes the benchmark reply with the seed's
rhythm: first sentence complete after about 0.6 s, whole reply after about 5 s (:func:`seed_timing`).
The figure is the agent's own ``t_ms`` stamp of the first ``audio_chunk`` (``agent-infra demo``'s
measure, :func:`reference_agent.demo.measure`, which also checks every stream with
:mod:`reference_agent.checks`). Conditions and modes alternate trial by trial. Beside it, each
invocation's playback underrun: its ``audio_chunk`` events played back in real time from the first one,
by their ``t_ms`` (:func:`bench.playback.underrun`), the silence a listener of the agent would hear.

Two conditions: ``local`` (no added latency) and ``hop``: the simulator delays every PayloadPart by
:attr:`Config.hop_latency_s` in each direction, emulating the network between a deployed agent and its
endpoint.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import seeds
from bench.record import Result
from bench.summary import describe, ms, ratio
from bench.texts import REPLY

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "seed_timing", "tables"]

NAME = "agent_latency"
TITLE = "2. Agent end to end: first audio after agent_start, bidi, stream and batch"

CONDITIONS = ("local", "hop")
MODES = ("bidi", "stream", "batch")
"""The agent's modes (``reference_agent.request.MODES``), compared in one run."""

SEED_FIRST_SENTENCE_S = 0.6
"""The seed's scripted LLM: the first sentence is complete after about this many seconds."""
SEED_WHOLE_REPLY_S = 5.0
"""... and the whole reply after about this many."""


@dataclass(frozen=True)
class Config:
    """Attributes:
    trials: invocations per mode and condition (after one untimed warm-up per condition).
    hop_latency_s: delay the simulator adds to every PayloadPart, each direction, in the ``hop``
        condition. 25 ms is an assumption: SageMaker does not publish its routing latency.
    reply, first_sentence_s, whole_reply_s: the scripted model's text and rhythm.
    """

    trials: int = 4
    hop_latency_s: float = 0.025
    reply: str = REPLY
    first_sentence_s: float = SEED_FIRST_SENTENCE_S
    whole_reply_s: float = SEED_WHOLE_REPLY_S


SMOKE = Config(trials=1, reply="Hello there. It is me.", first_sentence_s=0.3, whole_reply_s=0.6)


def seed_timing(reply: str, first_sentence_s: float, whole_reply_s: float) -> tuple[float, float]:
    """The scripted model's ``(first_token_s, tokens_per_s)`` for the seed's rhythm: the first sentence
    released to the TTS after ``first_sentence_s``, the last piece after ``whole_reply_s``
    (:func:`reference_agent.scripted.rhythm`, which this names for the benchmark).

    Raises:
        ValueError: see :func:`reference_agent.scripted.rhythm`.
    """
    from reference_agent.scripted import rhythm

    return rhythm(reply, first_sentence_s, whole_reply_s)


def _playback(events: list[dict[str, Any]]) -> tuple[float | None, int | None]:
    """``(underrun ms, stalls)`` of the stream's audio played from its first chunk by ``t_ms``."""
    from bench.playback import underrun
    from protocol.sse import decode_base64_strict

    arrivals = []
    for event in events:
        if event.get("type") == "audio_chunk":
            try:
                arrivals.append((float(event["t_ms"]) / 1000.0, len(decode_base64_strict(event["data"]))))
            except (KeyError, TypeError, ValueError):
                return None, None
    if not arrivals:
        return None, None
    silence, stalls = underrun(arrivals)
    return round(silence * 1000.0, 1), stalls


def _trial_row(trial: Any, condition: str, number: int) -> dict[str, Any]:
    underrun_ms, stalls = _playback(trial.events)
    return {
        "condition": condition,
        "trial": number,
        "mode": trial.mode,
        "first_audio_ms": None if trial.first_audio_ms is None else round(trial.first_audio_ms, 1),
        "seen_ms": None if trial.seen_ms is None else round(trial.seen_ms, 1),
        "reply_ms": None if trial.reply_ms is None else round(trial.reply_ms, 1),
        "underrun_ms": underrun_ms,
        "stalls": stalls,
        "audio_s": round(trial.audio_s, 3),
        "ok": trial.ok,
        "error": trial.error,
        "findings": [str(finding) for finding in trial.findings],
    }


async def run(context: Any, config: Config = Config()) -> Result:
    """Run the trials of both conditions and the three modes, interleaved, through one local stack."""
    from reference_agent.app import AgentSettings
    from reference_agent.demo import DEFAULT_PROMPT, http_invoker, measure
    from reference_agent.local import LocalStack
    from simulator.container import UrlContainer

    first_token_s, tokens_per_s = seed_timing(config.reply, config.first_sentence_s, config.whole_reply_s)
    server = await context.servers.get("onnx")
    settings = AgentSettings(reply=config.reply, first_token_s=first_token_s, tokens_per_s=tokens_per_s)
    result = Result(
        NAME,
        TITLE,
        config={
            **asdict(config),
            "reply_chars": len(config.reply),
            "scripted_first_token_s": first_token_s,
            "scripted_tokens_per_s": tokens_per_s,
            "server": server.settings(),
        },
    )
    latency = {"local": 0.0, "hop": config.hop_latency_s}
    async with LocalStack(container=UrlContainer(server.url), settings=settings) as stack:
        # BedrockAgentCoreApp sets its logger to INFO when built and logs a line per invocation.
        logging.getLogger("bedrock_agentcore.app").setLevel(logging.WARNING)
        invoke = http_invoker(stack.agent_url)

        async def invocation(condition: str, mode: str) -> Any:
            # Each invocation opens its own TTS session, which reads the simulator's settings then.
            stack.simulator.update(part_latency_s=latency[condition])
            return await measure(invoke, {"prompt": DEFAULT_PROMPT, "mode": mode, "voice": "af_heart"})

        for condition in CONDITIONS:  # warm-up: the first call of each request path is not timed
            for mode in ("bidi", "stream"):
                await invocation(condition, mode)
        # Conditions and modes alternate trial by trial (the modes' order rotates), so a change in the
        # machine's load over the run falls on all six alike.
        for number in range(config.trials):
            conditions = CONDITIONS if number % 2 == 0 else CONDITIONS[::-1]
            for condition in conditions:
                shift = number % len(MODES)
                for mode in MODES[shift:] + MODES[:shift]:
                    row = _trial_row(await invocation(condition, mode), condition, number + 1)
                    result.trials.append(row)
                    first = row["first_audio_ms"]
                    context.log(f"  trial {number + 1} {condition:<5} {mode:<5} first audio {first} ms")
    figures: dict[str, Any] = {}
    for condition in CONDITIONS:
        rows = [t for t in result.trials if t["condition"] == condition]
        figures[condition] = {}
        for mode in MODES:
            ok = [t for t in rows if t["mode"] == mode and t["ok"]]
            figures[condition][f"{mode}_first_audio_ms"] = describe([t["first_audio_ms"] for t in ok])
            figures[condition][f"{mode}_underrun_ms"] = describe(
                [t["underrun_ms"] for t in ok if t["underrun_ms"] is not None]
            )
            figures[condition][f"{mode}_stalls"] = sum(t["stalls"] or 0 for t in ok)
        medians = {mode: figures[condition][f"{mode}_first_audio_ms"]["median"] for mode in MODES}
        figures[condition]["batch_over_bidi"] = ratio(medians["batch"], medians["bidi"])
        figures[condition]["stream_over_bidi"] = ratio(medians["stream"], medians["bidi"])
        figures[condition]["failed_trials"] = sum(1 for t in rows if not t["ok"])
    result.figures = figures
    result.seed = {"local_ratio": seeds.AGENT_RATIO_LOCAL, "deployed_ratio": seeds.AGENT_RATIO_DEPLOYED}
    failed = sum(f["failed_trials"] for f in figures.values())
    if failed:
        result.notes.append(
            f"{failed} invocation(s) broke the agent's stream rules and are left out of the medians."
        )
    return result


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _modes(result: dict[str, Any]) -> tuple[str, ...]:
    # A result saved before stream mode existed has bidi and batch only.
    figures = result["figures"]["local"]
    return tuple(mode for mode in MODES if f"{mode}_first_audio_ms" in figures)


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Two tables: per condition, each mode's median first audio with stream / bidi and batch / bidi
    beside the seed's ratio; then each mode's playback underrun (median, worst, stalls in all)."""
    modes = _modes(result)
    seed = {"local": result["seed"]["local_ratio"], "hop": result["seed"]["deployed_ratio"]}
    names = {"local": "local", "hop": "network hop emulated (seed: deployed)"}
    headers = ["condition", *(f"{mode}, median" for mode in modes), "n per mode"]
    if "stream" in modes:
        headers.append("stream / bidi")
    headers += ["batch / bidi (ours)", "seed"]
    rows = []
    for condition in ("local", "hop"):
        figures = result["figures"][condition]
        first = {mode: figures[f"{mode}_first_audio_ms"] for mode in modes}
        row = [names[condition], *(ms(first[mode]["median"], 0) for mode in modes)]
        row.append(" / ".join(str(first[mode]["n"]) for mode in modes))
        if "stream" in modes:
            row.append(_x(figures.get("stream_over_bidi")))
        row += [_x(figures["batch_over_bidi"]), _x(seed[condition])]
        rows.append(row)
    out = [(headers, rows)]
    if all(f"{mode}_underrun_ms" in result["figures"]["local"] for mode in modes):
        headers = ["condition", "mode", "underrun, median", "underrun, worst", "stalls (all trials)"]
        rows = []
        for condition in ("local", "hop"):
            figures = result["figures"][condition]
            for mode in modes:
                under = figures[f"{mode}_underrun_ms"]
                rows.append(
                    [
                        names[condition],
                        mode,
                        ms(under["median"], 0),
                        ms(under["max"], 0),
                        str(figures[f"{mode}_stalls"]),
                    ]
                )
        out.append((headers, rows))
    return out


def notes(result: dict[str, Any]) -> list[str]:
    """The scripted rhythm and the hop's latency, and what batch mode's first audio is made of."""
    config = result["config"]
    return [
        f"Scripted model: {config['reply_chars']}-character reply, first token after "
        f"{config['scripted_first_token_s'] * 1000:.0f} ms, then "
        f"{config['scripted_tokens_per_s']:.2f} words/s: first sentence to the TTS at "
        f"{config['first_sentence_s']:g} s, whole reply at {config['whole_reply_s']:g} s.",
        f"Hop: {config['hop_latency_s'] * 1000:.0f} ms added to every PayloadPart in each direction by the "
        "simulator (an assumption: SageMaker does not publish its routing latency).",
        "In every mode the server streams each sentence as soon as it is synthesized, so batch's first audio "
        "is the whole reply's writing time plus the first sentence's synthesis; bidi's is the first "
        "sentence's writing time plus its synthesis. In stream mode the agent sends every token as it comes "
        "into one utterance (PROTOCOL.md §15) and the server's own chunker releases the first sentence at "
        "the same character as the agent's would in bidi mode, so the two should start together.",
        "Underrun: the invocation's audio_chunk events played back in real time from the first, by their "
        "t_ms; silence is counted whenever the next chunk had not been emitted when the previous one ended.",
        "Stalls in bidi mode are the agent's own chunker at work: it sends the long second sentence only "
        "once it is written, after the short first one's audio has run out. In stream mode the server hears "
        "the sentence as it is written and, when the listener would otherwise run dry, speaks its start "
        "before its end (PROTOCOL.md §15.3, `utterance_release` `deadline`). Batch sends the whole reply at "
        "once, so the server never waits for text.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's first-audio time, per condition and mode."""
    from bench.plots import strip_chart

    series = {}
    for condition in ("local", "hop"):
        for mode in _modes(result):
            series[f"{condition}: {mode}"] = [
                t["first_audio_ms"]
                for t in result["trials"]
                if t["condition"] == condition and t["mode"] == mode and t["ok"]
            ]
    ratios = ", ".join(
        f"{c} {result['figures'][c]['batch_over_bidi'] or '–'}× (seed {s}×)"
        for c, s in (("local", result["seed"]["local_ratio"]), ("hop", result["seed"]["deployed_ratio"]))
    )
    strip_chart(path, "First audio after agent_start (ms)", series, title=f"batch / bidi: {ratios}")
