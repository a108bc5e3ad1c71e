"""The agent through the real wire: uvicorn → official SageMaker client (CRT, TLS + HTTP/2) → simulator.

:class:`reference_agent.local.LocalStack` runs here exactly as ``python -m reference_agent.local`` does,
with one change in the fast tests: the TTS container behind the simulator is the stand-in
(:func:`agent_standin.standin_container`, the session protocol with cheap audio) instead of Kokoro. The
last test runs the real stack (reference server on Kokoro ONNX) and is skipped until its parts and
assets are there.
"""

from __future__ import annotations

import asyncio
import io

import pytest
from agent_standin import speech_for, standin_container

from reference_agent.app import AgentSettings
from reference_agent.checks import check_events
from reference_agent.demo import http_invoker, measure, report, run_trials
from reference_agent.local import LocalStack

GUARD_S = 120.0
"""Generous timeout that only guards against hangs; no test asserts on time."""

FAST = AgentSettings(first_token_s=0.01, tokens_per_s=250.0)


def run_with_stack(scenario, **stack_options):
    """Run ``scenario(stack, container_app)`` against a local stack with the stand-in container."""
    from simulator.asgi_container import AsgiContainer

    container_app = standin_container()

    async def main():
        async with LocalStack(
            container=AsgiContainer(container_app), settings=FAST, **stack_options
        ) as stack:
            return await scenario(stack, container_app)

    return asyncio.run(asyncio.wait_for(main(), GUARD_S))


def first(events, type_):
    return next(i for i, e in enumerate(events) if e["type"] == type_)


def last(events, type_):
    return max(i for i, e in enumerate(events) if e["type"] == type_)


def test_the_three_modes_through_the_simulator_conform():
    async def scenario(stack, container):
        invoke = http_invoker(stack.agent_url)
        trials, texts = {}, {}
        for mode in ("bidi", "stream", "batch"):
            done = len(container.state.texts)
            trials[mode] = await measure(invoke, {"prompt": "p", "mode": mode})
            texts[mode] = list(container.state.texts[done:])
        return trials, texts

    trials, texts = run_with_stack(scenario)
    bidi, stream, batch = trials["bidi"], trials["stream"], trials["batch"]
    for mode, trial in trials.items():
        assert trial.ok, (mode, trial.error, trial.findings)
        assert check_events(trial.events, expect="success", tts_texts=texts[mode]) == [], mode
    bidi_texts = texts["bidi"]
    assert len(bidi_texts) > 1 and len(texts["batch"]) == 1
    # stream: the whole reply reached the container as one utterance, its tokens as separate messages.
    assert texts["stream"] == ["".join(e["text"] for e in stream.events if e["type"] == "text_delta")]
    assert first(stream.events, "audio_chunk") < last(stream.events, "text_delta")
    # The same audio came through: what the container produced for each text, in order.
    from reference_agent.checks import decode_audio

    assert decode_audio(bidi.events) == b"".join(speech_for(t) for t in bidi_texts)
    assert first(bidi.events, "audio_chunk") < last(bidi.events, "text_delta")
    assert first(batch.events, "audio_chunk") > last(batch.events, "text_delta")


def test_model_stream_error_from_the_simulator_ends_with_an_error_event():
    from simulator.faults import FaultPlan

    async def scenario(stack, container):
        stack.simulator.update(faults=FaultPlan.parse(["model_stream_error@3000"]))
        return await measure(http_invoker(stack.agent_url), {"prompt": "p", "mode": "bidi"})

    trial = run_with_stack(scenario)
    assert check_events(trial.events, expect="error") == []
    assert trial.events[-1]["code"] == "tts_error"
    assert "ModelStreamError" in trial.events[-1]["message"]


def test_endpoint_refusing_the_stream_ends_with_an_error_event():
    from simulator.faults import FaultPlan

    async def scenario(stack, container):
        stack.simulator.update(faults=FaultPlan.parse(["unavailable"]))
        return await measure(http_invoker(stack.agent_url), {"prompt": "p", "mode": "batch"})

    trial = run_with_stack(scenario)
    assert check_events(trial.events, expect="error") == []
    assert trial.events[-1]["code"] == "tts_unavailable"


def test_demo_prints_both_modes_and_the_ratio():
    async def scenario(stack, container):
        out = io.StringIO()
        results = await run_trials(
            http_invoker(stack.agent_url), prompt="p", voice="af_heart", trials=2, warmup=0, out=out
        )
        return results, report(results, out), out.getvalue()

    results, status, text = run_with_stack(scenario)
    assert status == 0, text
    assert [t.mode for t in results] == ["bidi", "batch", "batch", "bidi"]
    assert "batch / bidi = " in text


def _kokoro_ready() -> str | None:
    """Why the real stack cannot run here, or None when it can."""
    try:
        from reference_server import assets
        from reference_server.backends import create_backend  # noqa: F401
    except ImportError as exc:
        return f"reference server not importable yet: {exc}"
    try:
        assets.locate()
    except Exception as exc:
        return f"Kokoro assets missing ({exc}); run `make assets`"
    return None


# A reply the scripted model writes slowly (4 words a second, six seconds after the first sentence), so
# that even a loaded two-core machine speaks the first sentence (about a second of Kokoro on a CPU)
# before the model's last word: the order is structural, with seconds of margin.
SLOW_REPLY = (
    "Hello there, friend. "
    "This second sentence is written slowly on purpose, one word after another, "
    "so that the first one is heard long before it ends"
)


@pytest.mark.skipif(_kokoro_ready() is not None, reason=str(_kokoro_ready()))
def test_real_stack_bidi_speaks_before_the_reply_ends():
    """Simulator + reference server (Kokoro ONNX on CPU) + scripted agent, all three modes."""
    settings = AgentSettings(reply=SLOW_REPLY, first_token_s=0.2, tokens_per_s=4.0)

    async def main():
        async with LocalStack(settings=settings, startup_timeout_s=300) as stack:
            invoke = http_invoker(stack.agent_url)
            modes = ("bidi", "stream", "batch")
            return [await measure(invoke, {"prompt": "p", "mode": mode}) for mode in modes]

    bidi, stream, batch = asyncio.run(asyncio.wait_for(main(), 600))
    for trial in (bidi, stream, batch):
        assert trial.ok, (trial.mode, trial.error, trial.findings)
        assert trial.audio_s > 3.0  # real speech of the whole reply in every mode
    assert first(bidi.events, "audio_chunk") < last(bidi.events, "text_delta")
    assert first(stream.events, "audio_chunk") < last(stream.events, "text_delta")
    assert first(batch.events, "audio_chunk") > last(batch.events, "text_delta")
