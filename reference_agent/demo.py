"""``agent-infra demo``: the seed's comparison — how much sooner the voice starts in ``bidi`` than ``batch``.

Sends one prompt through both modes of a running agent, ``--trials`` times each (alternating which
mode goes first), and prints for each invocation the time of the first ``audio_chunk`` after
``agent_start``. The figure is the agent's own ``t_ms`` stamp, so network and proxy buffering between
agent and caller do not blur it; the time the caller saw the first audio after sending the request is
printed beside it, and so is the time the model finished writing (the last ``text_delta``): bidi's
voice can start before that, batch's never does. Then the medians and the ratio batch / bidi, and the
timeline of each mode's last invocation as a listener lives it (:mod:`reference_agent.timeline`): per
TTS request, when its text was written, sent, first heard and played, as a table and as a plot
(``--plot``, a PNG; matplotlib draws it). Every stream is also checked with
:mod:`reference_agent.checks`; any finding is printed and makes the exit status 1. Library log lines
are shown only with ``-v``.

Targets:

* no ``--endpoint-url``: starts the local stack itself (:class:`reference_agent.local.LocalStack`:
  simulator + reference server + agent on the scripted model, writing with the AWS sample's rhythm:
  first sentence after 0.6 s, whole reply after 5 s; ``--first-sentence-s``, ``--reply-s``) and stops
  it afterwards;
* ``--endpoint-url http://host:port``: an agent serving ``POST /invocations`` (``python -m reference_agent``,
  the local stack, a container);
* ``--endpoint-url arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID``: a deployed AgentCore Runtime,
  invoked with boto3 ``bedrock-agentcore`` ``invoke_agent_runtime`` and the default AWS credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from reference_agent.checks import AgentFinding, AgentSSEDecoder, check_events

__all__ = ["DEFAULT_PROMPT", "Trial", "build_parser", "compare", "main", "run_trials"]

DEFAULT_PROMPT = "In three or four sentences, why does streaming speech make a voice assistant feel faster?"

DEFAULT_PLOT = "agent-demo-timeline.png"
"""Where the timeline plot goes unless ``--plot`` says otherwise (the current folder)."""

REQUEST_TIMEOUT_S = 120.0
"""Longest wait for one invocation, in seconds: a guard against hangs, far above any real reply."""

Invoke = Callable[[dict[str, Any]], AsyncIterator[bytes]]
"""Sends one agent request and yields the response body as it arrives."""


@dataclass
class Trial:
    """One invocation's measurements.

    Attributes:
        mode: ``"bidi"`` or ``"batch"``.
        first_audio_ms: ``t_ms`` of the first ``audio_chunk`` (agent clock, since ``agent_start``).
        seen_ms: caller's clock, from sending the request to receiving the first ``audio_chunk``.
        reply_ms: ``t_ms`` of the last ``text_delta``: when the model finished writing.
        audio_s: seconds of audio received.
        findings: what :mod:`reference_agent.checks` found wrong with the stream.
        error: the stream's ``error`` event (``code: message``), or a transport failure.
        events: the decoded events.
    """

    mode: str
    first_audio_ms: float | None = None
    seen_ms: float | None = None
    reply_ms: float | None = None
    audio_s: float = 0.0
    findings: list[AgentFinding] = field(default_factory=list)
    error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        """The stream ended with ``agent_end``, carried audio and broke no rule."""
        return self.error is None and not self.findings and self.first_audio_ms is not None


async def measure(invoke: Invoke, payload: dict[str, Any]) -> Trial:
    """Run one invocation and measure it (see :class:`Trial`)."""
    trial = Trial(mode=payload.get("mode", "bidi"))
    decoder = AgentSSEDecoder()
    events = trial.events
    sent = time.perf_counter()
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            async for chunk in invoke(payload):
                received = time.perf_counter()
                for event in decoder.feed(chunk):
                    events.append(event)
                    if event.get("type") == "audio_chunk" and trial.seen_ms is None:
                        trial.seen_ms = (received - sent) * 1000.0
    except Exception as exc:
        trial.error = f"{type(exc).__name__}: {exc}"
    trial.findings = decoder.close() + check_events(events, expect="success")
    for event in events:
        if event.get("type") == "audio_chunk" and trial.first_audio_ms is None:
            trial.first_audio_ms = event.get("t_ms")
        elif event.get("type") == "text_delta":
            trial.reply_ms = event.get("t_ms")
        elif event.get("type") == "audio_stream_end":
            trial.audio_s = float(event.get("duration_s") or 0.0)
        elif event.get("type") == "error" and trial.error is None:
            trial.error = f"{event.get('code')}: {event.get('message')}"
    return trial


def http_invoker(url: str) -> Invoke:
    """Invoke an agent at ``url`` (``http(s)://host:port``, ``/invocations`` appended if missing)."""
    import httpx

    target = url.rstrip("/")
    if not target.endswith("/invocations"):
        target += "/invocations"

    async def invoke(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0)) as client,
            client.stream("POST", target, json=payload, headers={"Accept": "text/event-stream"}) as response,
        ):
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                raise RuntimeError(f"HTTP {response.status_code}: {body[:300]}")
            async for chunk in response.aiter_raw():
                yield chunk

    return invoke


def agentcore_invoker(arn: str) -> Invoke:
    """Invoke a deployed AgentCore Runtime by ARN with boto3 (region taken from the ARN)."""
    import boto3

    region = arn.split(":")[3]
    client = boto3.client("bedrock-agentcore", region_name=region)

    async def invoke(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        response = await asyncio.to_thread(
            client.invoke_agent_runtime,
            agentRuntimeArn=arn,
            # AgentCore session ids are at least 33 characters.
            runtimeSessionId=f"agent-demo-{uuid.uuid4().hex}",
            payload=json.dumps(payload).encode(),
            contentType="application/json",
            accept="text/event-stream",
        )
        body = response["response"]
        chunks = body.iter_chunks(4096)
        while chunk := await asyncio.to_thread(next, chunks, b""):
            yield chunk

    return invoke


async def run_trials(
    invoke: Invoke, *, prompt: str, voice: str, trials: int, warmup: int = 1, out: TextIO = sys.stdout
) -> list[Trial]:
    """Warm up, then run ``trials`` invocations per mode, alternating the order; print each row."""
    for _ in range(warmup):
        await measure(invoke, {"prompt": prompt, "mode": "bidi", "voice": voice})
    results: list[Trial] = []
    header = (
        f"{'trial':>5}  {'mode':<5}  {'first audio (agent)':>19}  {'seen by caller':>14}  "
        f"{'reply written':>13}  {'audio':>7}"
    )
    print(f"{header}  checks", file=out)
    for number in range(1, trials + 1):
        modes = ("bidi", "batch") if number % 2 else ("batch", "bidi")
        for mode in modes:
            trial = await measure(invoke, {"prompt": prompt, "mode": mode, "voice": voice})
            results.append(trial)
            print(f"{number:>5}  {_row(trial)}", file=out, flush=True)
    return results


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _row(trial: Trial) -> str:
    verdict = "ok" if trial.ok else (trial.error or f"{len(trial.findings)} finding(s)")
    return (
        f"{trial.mode:<5}  {_ms(trial.first_audio_ms):>19}  {_ms(trial.seen_ms):>14}  "
        f"{_ms(trial.reply_ms):>13}  {trial.audio_s:>6.2f}s  {verdict}"
    )


def compare(results: Sequence[Trial]) -> dict[str, float | None]:
    """Medians of the first-audio times per mode (agent clock, conforming streams only) and their ratio.

    Returns ``{"bidi_ms", "batch_ms", "ratio"}``; a value is ``None`` when no stream of that mode
    conformed.
    """
    medians: dict[str, float | None] = {}
    for mode in ("bidi", "batch"):
        times = [
            t.first_audio_ms for t in results if t.mode == mode and t.ok and t.first_audio_ms is not None
        ]
        medians[f"{mode}_ms"] = statistics.median(times) if times else None
    bidi, batch = medians["bidi_ms"], medians["batch_ms"]
    medians["ratio"] = batch / bidi if bidi and batch is not None else None
    return medians


def print_timelines(results: Sequence[Trial], out: TextIO = sys.stdout) -> dict[str, Trial]:
    """Print the timeline of each mode's last conforming invocation (:mod:`reference_agent.timeline`).

    One row per TTS request: its text (shortened), when it was written, sent, first heard, and when a
    real-time player plays it, in milliseconds after ``agent_start``. Returns the invocations shown, by mode.
    """
    from reference_agent.timeline import timeline

    shown = {}
    for mode in ("bidi", "stream", "batch"):
        trial = next((t for t in reversed(results) if t.mode == mode and t.ok), None)
        if trial is not None:
            shown[mode] = trial
    if not shown:
        return shown
    print("\ntimeline of the last invocation of each mode, ms after agent_start:", file=out)
    header = (
        f"  {'mode':<6} {'#':>2}  {'text':<34} {'written':>8} {'sent':>8} {'first audio':>11}  "
        f"{'plays':<15} {'silence':>7}"
    )
    print(header, file=out)
    for mode, trial in shown.items():
        for number, segment in enumerate(timeline(trial.events, mode), start=1):
            text = segment.text if len(segment.text) <= 34 else segment.text[:31] + "..."
            plays = (
                "-"
                if segment.plays_from_ms is None or segment.plays_to_ms is None
                else f"{segment.plays_from_ms:,.0f}-{segment.plays_to_ms:,.0f}"
            )
            print(
                f"  {mode:<6} {number:>2}  {text:<34} {_n(segment.written_ms):>8} {_n(segment.sent_ms):>8} "
                f"{_n(segment.first_audio_ms):>11}  {plays:<15} {_n(segment.silence_ms):>7}",
                file=out,
            )
    return shown


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


MATPLOTLIB_MISSING = (
    "matplotlib is not installed; `make conformance` installs it, or run "
    "`pip install 'kokoro-bidi-tts[demo]'` in this environment"
)
"""Why the demo drew no plot, and the one command that fixes it: the ``demo`` extra (matplotlib) is part of
the main job's install (``locks/conformance.txt``), so only an install without it lacks the plot."""


def write_plot(shown: dict[str, Trial], path: str | None, out: TextIO = sys.stdout) -> None:
    """Draw the shown invocations' timelines to ``path`` (PNG); say where, or why not."""
    if not path or not shown:
        return
    try:
        from reference_agent.timeline import plot_timelines

        written = plot_timelines({mode: trial.events for mode, trial in shown.items()}, path)
    except ImportError:
        print(f"(no timeline plot: {MATPLOTLIB_MISSING})", file=out)
        return
    print(f"timeline plot: {written}", file=out)


def report(results: Sequence[Trial], out: TextIO = sys.stdout) -> int:
    """Print the medians, the ratio and every finding; return the exit status (0: all conformed)."""
    summary = compare(results)
    print(file=out)
    print(
        f"first audio after agent_start (median): bidi {_ms(summary['bidi_ms'])}, "
        f"batch {_ms(summary['batch_ms'])}",
        file=out,
    )
    if summary["ratio"] is not None:
        print(f"batch / bidi = {summary['ratio']:.2f}x", file=out)
    failed = [t for t in results if not t.ok]
    for trial in failed:
        print(f"\n{trial.mode}: {trial.error or 'stream broke the agent rules'}", file=out)
        for finding in trial.findings:
            print(f"  {finding}", file=out)
    return 1 if failed or summary["ratio"] is None else 0


def build_parser() -> argparse.ArgumentParser:
    """The demo's command line (also used by ``agent-infra demo``)."""
    parser = argparse.ArgumentParser(
        prog="agent-infra demo",
        description="The seed's comparison: how much sooner the voice starts in bidi mode than in batch "
        "mode, measured on a running agent (or on the local stack it starts).",
    )
    parser.add_argument(
        "--endpoint-url",
        help="a running agent, http(s)://host:port or an AgentCore Runtime ARN (default: the local stack)",
    )
    parser.add_argument(
        "--prompt", default=DEFAULT_PROMPT, help=f"what to ask the agent (default {DEFAULT_PROMPT!r})"
    )
    parser.add_argument("--voice", default="af_heart", help="Kokoro voice (default af_heart)")
    parser.add_argument("--trials", type=int, default=3, help="invocations per mode (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed invocations first (default 1)")
    parser.add_argument(
        "--first-sentence-s",
        type=float,
        default=0.6,
        help="local stack: the scripted model finishes its first sentence after this many seconds "
        "(default 0.6, the AWS sample's rhythm)",
    )
    parser.add_argument(
        "--reply-s",
        type=float,
        default=5.0,
        help="local stack: ... and its whole reply after this many (default 5.0)",
    )
    parser.add_argument(
        "--plot",
        default=DEFAULT_PLOT,
        help=f"where to draw the timeline plot, a PNG (default {DEFAULT_PLOT}; '' for none)",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="show the libraries' log lines (-vv: debug)"
    )
    return parser


async def _demo(args: argparse.Namespace, out: TextIO) -> int:
    _quiet(args.verbose)
    if args.endpoint_url:
        url = args.endpoint_url
        invoke = agentcore_invoker(url) if url.startswith("arn:") else http_invoker(url)
        print(f"agent: {url}\nprompt: {args.prompt!r}\n", file=out)
        results = await run_trials(
            invoke, prompt=args.prompt, voice=args.voice, trials=args.trials, warmup=args.warmup, out=out
        )
    else:
        from reference_agent.local import LocalStack

        print(
            "starting the local stack (simulator + reference server + scripted agent) ...",
            file=out,
            flush=True,
        )
        from reference_agent.app import AgentSettings
        from reference_agent.scripted import DEFAULT_REPLY, rhythm

        first_token_s, tokens_per_s = rhythm(DEFAULT_REPLY, args.first_sentence_s, args.reply_s)
        settings = AgentSettings(first_token_s=first_token_s, tokens_per_s=tokens_per_s)
        async with LocalStack(settings=settings) as stack:
            print(
                f"agent: {stack.agent_url} (local, scripted model: first sentence written after "
                f"{args.first_sentence_s:g} s, the whole reply after {args.reply_s:g} s)\n"
                f"prompt: {args.prompt!r}\n",
                file=out,
            )
            results = await run_trials(
                http_invoker(stack.agent_url),
                prompt=args.prompt,
                voice=args.voice,
                trials=args.trials,
                warmup=args.warmup,
                out=out,
            )
    status = report(results, out)
    write_plot(print_timelines(results, out), args.plot, out)
    return status


def _quiet(verbose: int) -> None:
    """Library log lines only with ``-v``: without it the demo's own table is all a person sees."""
    from protocol.logs import configure_logging

    configure_logging("debug" if verbose > 1 else "info" if verbose else "warning")
    if not verbose:
        # The CRT transport's body writer fails harmlessly once a stream has ended (sagemaker_transport).
        def drop_finished_crt_streams(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            error = context.get("exception")
            if isinstance(error, RuntimeError) and "HTTP_STREAM_HAS_COMPLETED" in str(error):
                return
            loop.default_exception_handler(context)

        asyncio.get_running_loop().set_exception_handler(drop_finished_crt_streams)


def main(args: list[str] | argparse.Namespace | None = None) -> int:
    """Run the demo; ``args`` is an argv list (``None``: ``sys.argv[1:]``) or a parsed namespace.

    Returns the exit status: 0 when every stream conformed, 1 otherwise, 2 for bad arguments.
    """
    if isinstance(args, argparse.Namespace):
        # A namespace from another parser (``agent-infra``) may lack the options it does not offer.
        defaults = vars(build_parser().parse_args([]))
        namespace = argparse.Namespace(
            **{**defaults, **{k: v for k, v in vars(args).items() if v is not None}}
        )
    else:
        namespace = build_parser().parse_args(args)
    if namespace.trials < 1:
        print("--trials must be at least 1", file=sys.stderr)
        return 2
    return asyncio.run(_demo(namespace, sys.stdout))


if __name__ == "__main__":
    sys.exit(main())
