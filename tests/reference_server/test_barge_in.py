"""A cancel aborts the model pass running for the request (issue #26 point 1), on the real weights.

Backend level: a pass whose :class:`~reference_server.backends.base.AbortSignal` is set while it runs
stops early with :class:`~reference_server.backends.base.PassAborted` (onnx: ``RunOptions.terminate``, in
one session and in the split graph; torch: between layers), far sooner than a whole pass, and the model
speaks the same samples afterwards; a signal that is never set changes no sample.

Server level (onnx and torch): a cancel that arrives while a segment is synthesized aborts its pass
(``Runtime.passes_aborted``), the cancelled request's ``synthesis_complete`` says ``cancelled``, and the
next request's audio is the same as on a fresh server (no state leaks); with ``abort_on_cancel=no`` the
pass runs to its end as before; a cancel between passes (an utterance waiting for text) aborts nothing.

Timings are compared only with wide margins (an aborted pass under 60 % of a whole one, with the cancel
at 15 % of it); the benchmark measures them (``python -m bench barge_in``).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from server_harness import ServerThread, run, wait_for
from ws_conversation import open_session

from reference_server import assets
from reference_server.backends.base import AbortSignal, PassAborted, aborting
from reference_server.backends.onnx_backend import OnnxBackend
from reference_server.settings import Settings

TORCH_READY = all(importlib.util.find_spec(name) for name in ("torch", "kokoro", "onnx"))
needs_torch = pytest.mark.skipif(
    not TORCH_READY, reason="the torch extra (torch, kokoro, onnx) is not installed"
)

PASS_TEXT = "The quick brown fox jumps over the lazy dog while the rain keeps falling on the old tin roof."
"""One sentence: one pass of about 5 s of audio (1-3 s of compute on two cores)."""

LONG_TEXT = " ".join(
    [
        "Streaming speech starts with this first sentence, which the server cuts short.",
        "The second sentence is long enough that its pass takes a good while on two small cores.",
        "A third one follows, and then a fourth, each of them its own segment of the request.",
    ]
)
NEXT_TEXT = "Sure thing."
VOICE = "af_heart"


def _seed() -> None:
    """Torch's source module draws noise: seed it so that two passes can be compared sample for sample."""
    if TORCH_READY:
        import torch

        torch.manual_seed(7)


def _speak(backend: Any, signal: AbortSignal | None = None) -> np.ndarray:
    _seed()
    with aborting(signal):
        return np.concatenate([segment.audio for segment in backend.synthesize(PASS_TEXT, VOICE)])


def _assert_pass_aborts(backend: Any) -> None:
    """The pass stops early when its signal is set during it; before and after, the same samples."""
    reference = _speak(backend)  # warm
    started = time.perf_counter()
    assert np.array_equal(_speak(backend), reference)
    whole_s = time.perf_counter() - started
    assert np.array_equal(_speak(backend, AbortSignal()), reference), "an unset signal changes nothing"

    signal = AbortSignal()
    timer = threading.Timer(0.15 * whole_s, signal.set)
    started = time.perf_counter()
    timer.start()
    with pytest.raises(PassAborted):
        _speak(backend, signal)
    aborted_s = time.perf_counter() - started
    timer.join()
    assert signal.aborted == 1
    assert aborted_s < 0.6 * whole_s, f"aborted pass {aborted_s:.2f} s against {whole_s:.2f} s whole"
    assert np.array_equal(_speak(backend), reference), "the model speaks the same after an abort"

    before = AbortSignal()
    before.set()  # set before the pass: it stops before it starts
    with pytest.raises(PassAborted):
        _speak(backend, before)


@pytest.fixture(scope="module")
def onnx_backend() -> OnnxBackend:
    backend = OnnxBackend(assets.fetch().directory, languages=["a"])
    backend.load()
    return backend


@pytest.mark.parametrize("split", [True, False], ids=["split", "one-session"])
def test_an_onnx_pass_stops_when_its_request_is_aborted(onnx_backend, split):
    if split:
        if not onnx_backend.aligns:
            pytest.skip("the onnx package is not installed: the graph is not split")
        backend = onnx_backend
    else:
        backend = OnnxBackend(assets.fetch().directory, languages=["a"], split=False)
        backend.load()
    _assert_pass_aborts(backend)


@pytest.fixture(scope="module")
def torch_backend() -> Any:
    if not TORCH_READY:
        pytest.skip("the torch extra (torch, kokoro, onnx) is not installed")
    from reference_server.backends.torch_backend import TorchBackend

    backend = TorchBackend(assets.fetch().directory, device="cpu", languages=["a"])
    backend.load()
    return backend


@needs_torch
def test_a_torch_pass_stops_between_layers_when_its_request_is_aborted(torch_backend):
    _assert_pass_aborts(torch_backend)


# --- the server ----------------------------------------------------------------------------------------


def _server(model: Any, **fields: Any) -> ServerThread:
    settings = replace(Settings(), port=0, log_level="warning", **fields)
    return ServerThread(settings, model).start()


@pytest.fixture(scope="module")
def onnx_servers(onnx_backend) -> Iterator[dict[str, ServerThread]]:
    servers = {"yes": _server(onnx_backend), "no": _server(onnx_backend, abort_on_cancel="no")}
    yield servers
    for server in servers.values():
        server.stop()


async def _one(server: ServerThread, text: str) -> bytes:
    async with open_session(server.ws_url) as conv:
        answer = await conv.until_complete(await conv.request(text, voice=VOICE))
        assert answer.complete.status == "completed"
        return answer.pcm


async def _cancel_then_next(server: ServerThread) -> tuple[Any, bytes]:
    """Cancel a long request while its second segment is synthesized; then the next request's audio on
    the same session."""
    async with open_session(server.ws_url) as conv:
        rid = await conv.request(LONG_TEXT, voice=VOICE)
        await conv.until_audio(rid)
        # The next pass starts as the first audio goes out; waiting for it makes the cancel land during
        # it rather than, now and then, just before it (then no pass runs, and none is aborted).
        wait_for(lambda: server.runtime.scheduler.running == 1, what="the next pass")
        await conv.send({"type": "cancel", "request_id": rid})
        cancelled = await conv.until_complete(rid)
        after = await conv.until_complete(await conv.request(NEXT_TEXT, voice=VOICE))
        assert after.complete.status == "completed"
        return cancelled, after.pcm


@pytest.mark.parametrize("abort", ["yes", "no"])
def test_a_cancel_during_a_pass_aborts_it_and_the_next_request_is_unchanged(onnx_backend, abort):
    fresh = _server(onnx_backend, abort_on_cancel=abort)
    try:
        reference = run(_one(fresh, NEXT_TEXT))  # the next request's audio on a fresh server
        before = fresh.runtime.passes_aborted
        cancelled, pcm = run(_cancel_then_next(fresh))
        aborted = fresh.runtime.passes_aborted - before
    finally:
        fresh.stop()
    assert cancelled.complete.status == "cancelled"
    assert aborted == (1 if abort == "yes" else 0), "the pass running at the cancel was aborted"
    assert pcm == reference, "the next request's audio is the same as on a fresh server"


def test_a_cancel_between_passes_aborts_nothing(onnx_servers):
    """An utterance whose text is spoken waits for more: no pass runs, and a cancel then ends it as before."""
    server = onnx_servers["yes"]
    reference = run(_one(server, NEXT_TEXT))

    async def scenario() -> tuple[Any, bytes]:
        async with open_session(server.ws_url) as conv:
            rid = await conv.utterance("u1", text="Hello there.", voice=VOICE)
            await conv.fragment("flush", rid)
            await conv.until_audio(rid)
            wait_for(lambda: server.runtime.scheduler.running == 0, what="the utterance's passes to end")
            await conv.send({"type": "cancel", "request_id": rid})
            cancelled = await conv.until_complete(rid)
            after = await conv.until_complete(await conv.request(NEXT_TEXT, voice=VOICE))
            return cancelled, after.pcm

    before = server.runtime.passes_aborted
    cancelled, pcm = run(scenario())
    assert cancelled.complete.status == "cancelled"
    assert server.runtime.passes_aborted == before
    assert pcm == reference


def test_a_disconnect_during_a_pass_aborts_it(onnx_servers):
    server = onnx_servers["yes"]
    before = server.runtime.passes_aborted

    async def scenario() -> None:
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(LONG_TEXT, voice=VOICE)
            await conv.until_audio(rid)
            wait_for(lambda: server.runtime.scheduler.running == 1, what="the next pass")
        # the client has left while the next segment was synthesized

    run(scenario())
    wait_for(lambda: server.runtime.passes_aborted > before, what="the pass to be aborted")
    assert run(_one(server, NEXT_TEXT))


@needs_torch
def test_a_cancel_during_a_torch_pass_aborts_it(torch_backend):
    """Torch draws noise, so the next request is compared by length and word timings, not samples."""
    server = _server(torch_backend, backend="torch")
    try:

        async def words(text: str) -> tuple[int, Any]:
            async with open_session(server.ws_url) as conv:
                answer = await conv.until_complete(await conv.request(text, voice=VOICE))
                return len(answer.pcm), answer.complete.words

        reference = run(words(NEXT_TEXT))
        before = server.runtime.passes_aborted
        cancelled, pcm = run(_cancel_then_next(server))
        assert cancelled.complete.status == "cancelled"
        assert server.runtime.passes_aborted == before + 1
        assert len(pcm) == reference[0]
    finally:
        server.stop()
