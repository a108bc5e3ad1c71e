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

Beside the measured ratio, the **ideal** one for this machine's model (:func:`ideal_figures`), from
figures measured in the same run: the **first-sentence pass** ``P`` is the median time from sending
the reply's first sentence (as the agent's chunker releases it) to its first audio, alone on an idle
session straight to the server (no simulator, no agent), measured once per trial; ``W1`` is when the
model had written the first sentence (the ``t_ms`` of the ``text_delta`` at which the chunker releases it)
and ``W`` when it had written the whole reply (the last ``text_delta``), medians over the condition's
trials; ``h`` is the hop's latency (0 locally). Ideal first audio: ``bidi = W1 + P + 2h``, ``batch = W +
P + 2h`` (an agent with no overhead of its own, a transport with none but the hop, and a server whose
first audio is one first-sentence pass after the text arrives); ideal ratio = ideal batch / ideal bidi;
and how close the agent comes: its batch/bidi ratio over the ideal ratio, and each mode's median first
audio minus its ideal. Machines differ in ``P``; the ideal ratio moves with it, so the closeness is
comparable where the ratio alone is not.
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

__all__ = [
    "MODES",
    "NAME",
    "SMOKE",
    "TITLE",
    "Config",
    "first_sentence",
    "ideal_figures",
    "notes",
    "plot",
    "run",
    "seed_timing",
    "tables",
]

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


def first_sentence(text: str, language: str = "a") -> str:
    """The first segment the agent's bidi chunker releases of ``text`` written piece by piece (the scripted
    model's pieces, :func:`reference_agent.scripted.tokenize`), or the whole text when it releases none
    before the end."""
    from reference_agent.scripted import tokenize
    from speech.chunker import IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker(language=language)
    for piece in tokenize(text):
        released = chunker.feed(piece)
        if released:
            return released[0]
    return chunker.flush() or text


def _written_ms(events: list[dict[str, Any]]) -> float | None:
    """``t_ms`` of the ``text_delta`` at which the bidi chunker releases the reply's first sentence (when the
    model had written it), or ``None``."""
    from speech.chunker import IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker(language="a")
    for event in events:
        if event.get("type") == "text_delta" and chunker.feed(str(event.get("text", ""))):
            return float(event["t_ms"])
    return None


def ideal_figures(
    first_sentence_ms: float | None, reply_ms: float | None, pass_ms: float | None, hop_ms: float = 0.0
) -> dict[str, float | None]:
    """The ideal first audio of bidi and batch and their ratio (see the module docstring).

    Args:
        first_sentence_ms: ``W1``, when the first sentence was written, ms after ``agent_start``.
        reply_ms: ``W``, when the whole reply was written, ms after ``agent_start``.
        pass_ms: ``P``, the first-sentence pass: request sent to first audio on an idle session, ms.
        hop_ms: ``h``, the latency added each way between agent and endpoint, ms.

    Returns:
        ``{"bidi_ms", "batch_ms", "batch_over_bidi"}``; ``None`` figures where an input is missing.
    """
    if first_sentence_ms is None or reply_ms is None or pass_ms is None:
        return {"bidi_ms": None, "batch_ms": None, "batch_over_bidi": None}
    bidi = first_sentence_ms + pass_ms + 2 * hop_ms
    batch = reply_ms + pass_ms + 2 * hop_ms
    return {"bidi_ms": round(bidi, 1), "batch_ms": round(batch, 1), "batch_over_bidi": ratio(batch, bidi)}


async def _first_sentence_pass(server: Any, text: str) -> float:
    """Request sent → first audio (ms) of ``text`` alone on a new session straight to the server."""
    from bench.channels import converse, direct_channel

    async with direct_channel(server.ws_url) as channel:
        (timeline,) = await converse(channel, [text], voice="af_heart")
    assert timeline.first_audio_ms is not None
    return timeline.first_audio_ms


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
        "first_sentence_ms": None if (written := _written_ms(trial.events)) is None else round(written, 1),
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
    sentence = first_sentence(config.reply)
    passes: list[float] = []
    settings = AgentSettings(reply=config.reply, first_token_s=first_token_s, tokens_per_s=tokens_per_s)
    result = Result(
        NAME,
        TITLE,
        config={
            **asdict(config),
            "reply_chars": len(config.reply),
            "first_sentence": sentence,
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
        await _first_sentence_pass(server, sentence)
        # Conditions and modes alternate trial by trial (the modes' order rotates), so a change in the
        # machine's load over the run falls on all six alike.
        for number in range(config.trials):
            passes.append(round(await _first_sentence_pass(server, sentence), 1))
            context.log(f"  trial {number + 1} first-sentence pass {passes[-1]} ms")
            conditions = CONDITIONS if number % 2 == 0 else CONDITIONS[::-1]
            for condition in conditions:
                shift = number % len(MODES)
                for mode in MODES[shift:] + MODES[:shift]:
                    row = _trial_row(await invocation(condition, mode), condition, number + 1)
                    result.trials.append(row)
                    first = row["first_audio_ms"]
                    context.log(f"  trial {number + 1} {condition:<5} {mode:<5} first audio {first} ms")
    figures: dict[str, Any] = {"first_sentence_pass_ms": describe(passes), "first_sentence_passes_ms": passes}
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
        ok_rows = [t for t in rows if t["ok"]]
        written = describe([t["first_sentence_ms"] for t in ok_rows if t["first_sentence_ms"] is not None])
        whole = describe([t["reply_ms"] for t in ok_rows if t["reply_ms"] is not None])
        ideal = ideal_figures(
            written["median"],
            whole["median"],
            figures["first_sentence_pass_ms"]["median"],
            1000.0 * latency[condition],
        )
        figures[condition]["first_sentence_written_ms"] = written
        figures[condition]["reply_written_ms"] = whole
        figures[condition]["ideal"] = {
            **ideal,
            "ours_over_ideal": ratio(figures[condition]["batch_over_bidi"], ideal["batch_over_bidi"]),
            **{
                f"{mode}_over_ideal_ms": None
                if medians[mode] is None or ideal[f"{'batch' if mode == 'batch' else 'bidi'}_ms"] is None
                else round(medians[mode] - ideal[f"{'batch' if mode == 'batch' else 'bidi'}_ms"], 1)
                for mode in MODES
            },
        }
    result.figures = figures
    result.seed = {"local_ratio": seeds.AGENT_RATIO_LOCAL, "deployed_ratio": seeds.AGENT_RATIO_DEPLOYED}
    failed = sum(figures[condition]["failed_trials"] for condition in CONDITIONS)
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
    """Three tables: per condition, each mode's median first audio with stream / bidi and batch / bidi
    beside the seed's ratio; the ideal batch / bidi for the model's measured pass and how close the agent
    comes (a result saved before it was measured has none); then each mode's playback underrun (median,
    worst, stalls in all)."""
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
    if "ideal" in result["figures"]["local"]:
        out.append(_ideal_table(result, names))
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


def _ideal_table(result: dict[str, Any], names: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """Per condition: the writing times and the pass measured, the ideal first audio of bidi and batch and
    their ratio, the agent's ratio, ours / ideal, and each mode's median over its ideal."""
    modes = _modes(result)
    passed = result["figures"]["first_sentence_pass_ms"]
    headers = [
        "condition",
        "first sentence written (W1)",
        "reply written (W)",
        f"first-sentence pass (P, n={passed['n']})",
        "ideal bidi",
        "ideal batch",
        "batch / bidi, ideal",
        "batch / bidi, ours",
        "ours / ideal",
        *(f"{mode} over ideal" for mode in modes),
    ]
    rows = []
    for condition in ("local", "hop"):
        figures = result["figures"][condition]
        ideal = figures["ideal"]
        rows.append(
            [
                names[condition],
                ms(figures["first_sentence_written_ms"]["median"], 0),
                ms(figures["reply_written_ms"]["median"], 0),
                ms(passed["median"], 0),
                ms(ideal["bidi_ms"], 0),
                ms(ideal["batch_ms"], 0),
                _x(ideal["batch_over_bidi"]),
                _x(figures["batch_over_bidi"]),
                "–" if ideal["ours_over_ideal"] is None else f"{100 * ideal['ours_over_ideal']:.0f} %",
                *(_signed_ms(ideal[f"{mode}_over_ideal_ms"]) for mode in modes),
            ]
        )
    return headers, rows


def _signed_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:+,.0f} ms"


def notes(result: dict[str, Any]) -> list[str]:
    """The scripted rhythm and the hop's latency, and what batch mode's first audio is made of."""
    config = result["config"]
    short = []
    if config["trials"] < Config().trials:
        short.append(
            f"A short run: {config['trials']} trial(s) per mode and condition (the default is "
            f"{Config().trials})."
        )
    return [
        *short,
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
        "Ideal (second table), from figures of this run: P is the median time from sending the reply's first "
        f'sentence ("{config.get("first_sentence", "its first sentence")}") to its first audio, alone on an '
        "idle session straight to the server, once per trial; W1 is when the model had written that sentence "
        "(t_ms of the text_delta at which the agent's chunker releases it) and W when it had written the "
        "whole reply (the last text_delta), medians over the condition's trials; h is the hop's latency, 0 "
        "locally. Ideal bidi = W1 + P + 2h, ideal batch = W + P + 2h: an agent and a transport that add "
        "nothing but the hop, and a server whose first audio is one first-sentence pass after the text "
        "arrives. Ideal batch / bidi = ideal batch / ideal bidi; ours / ideal = the measured batch / bidi "
        "over it (100 % is the ideal; a machine with a slower pass has a smaller ideal ratio, so this, not "
        "the ratio, compares across machines); 'over ideal' = the mode's median first audio minus its "
        "ideal (stream's ideal is bidi's).",
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
