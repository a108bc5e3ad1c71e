"""The mutants' base is the shipped server's app (conformance/mutants/base.py, issue #31 point 3).

``ToneServer.app()`` is :func:`reference_server.app.create_app` with the mutant's handlers injected through
its ``endpoints`` hook: ``GET /ping`` and ``POST /invocations`` are the shipped routes on a runtime of the
shipped tone backend, and an ``http`` hook reads the shipped answer through :func:`played`, which frees the
answer's invocation slot.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.testclient import TestClient

from conformance.mutants.base import ToneServer, played
from conformance.mutants.defects import DEFECTS, DefectServer
from reference_server.app import create_app
from reference_server.backends.tone import ToneBackend
from reference_server.settings import Settings

SHORT = {"text": "Hello there.", "voice": "af_heart"}


def _client(server: ToneServer) -> TestClient:
    return TestClient(server.app(), base_url="http://127.0.0.1", raise_server_exceptions=False)


def _ready(client: TestClient) -> None:
    """Wait until the shipped runtime has loaded the tone backend (its ``GET /ping`` answers 503 before)."""
    deadline = time.monotonic() + 60
    while client.get("/ping").status_code != 200:
        assert time.monotonic() < deadline, "the tone backend never became ready"
        time.sleep(0.1)


def test_create_app_refuses_an_endpoint_for_a_path_it_does_not_serve() -> None:
    with pytest.raises(ValueError, match="no shipped route serves"):
        create_app(Settings(backend="tone"), ToneBackend(), endpoints={"/health": lambda request: None})


def test_the_base_answers_with_the_shipped_routes_and_the_mutant_hooks_them() -> None:
    class Hooked(ToneServer):
        async def ping(self, request: Request) -> Response:
            shipped = await super().ping(request)
            return JSONResponse({"shipped": json.loads(bytes(shipped.body))}, shipped.status_code)

    server = Hooked()
    with _client(server) as client:
        assert client.get("/ping").status_code == 503, "the shipped route: unhealthy while loading"
        _ready(client)
        ping = client.get("/ping")
        assert ping.status_code == 200 and ping.json()["shipped"]["backend"] == "tone"
        answer = client.post("/invocations", json={**SHORT, "stream": False})
        assert answer.status_code == 200 and answer.headers["content-type"] == "audio/wav"
        assert answer.content[:4] == b"RIFF" and len(answer.content) > 44 + 24000  # over half a second
        missing = client.get("/nowhere")  # the shipped §11.6 shape of the HTTP layer's own errors
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert server.runtime is not None and server.runtime.settings.limits == server.limits


def test_a_version_1_base_refuses_blends_over_http_too() -> None:
    class Version1(ToneServer):
        voice_blends = False

    with _client(Version1()) as client:
        _ready(client)
        blend = client.post("/invocations", json={**SHORT, "voice": "af_heart:0.5,am_adam:0.5"})
        assert blend.status_code == 400 and blend.json()["error"]["code"] == "invalid_voice"


def test_an_http_hook_reads_the_answer_and_frees_its_invocation_slot() -> None:
    (row,) = [d for d in DEFECTS if d.name == "sse-seq-from-1"]
    server = DefectServer(row)
    server.limits = replace(server.limits, max_invocations=2)
    with _client(server) as client:
        _ready(client)
        for _ in range(server.limits.max_invocations + 1):  # a slot held by each answer would 503 here
            sse = client.post("/invocations", json={**SHORT, "transport": "sse"})
            assert sse.status_code == 200
        assert server.runtime is not None and server.runtime.invocations == 0
    seqs = [json.loads(line[6:])["seq"] for line in sse.text.splitlines() if '"audio_chunk"' in line]
    assert seqs and seqs[0] == 1, "the hook saw the shipped answer and rewrote it"


def test_played_keeps_the_answer_status_headers_and_chunks() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"one"
        yield b"two"

    async def main() -> tuple[Response, list[bytes], Response]:
        streamed = await played(StreamingResponse(body(), status_code=201, headers={"X-A": "b"}))
        chunks = [chunk async for chunk in streamed.body_iterator]  # type: ignore[attr-defined]
        return streamed, chunks, await played(Response(b"whole", status_code=202, media_type="audio/wav"))

    streamed, chunks, whole = asyncio.run(main())
    assert isinstance(streamed, StreamingResponse) and streamed.status_code == 201
    assert streamed.headers["x-a"] == "b" and chunks == [b"one", b"two"]
    assert not isinstance(whole, StreamingResponse) and whole.body == b"whole"
    assert whole.status_code == 202 and whole.headers["content-type"] == "audio/wav"


def test_sse_cuts_units_recuts_the_shipped_sse_audio() -> None:
    (row,) = [d for d in DEFECTS if d.name == "sse-cuts-units"]
    server = DefectServer(row)
    if "flac" not in server.capabilities.formats:
        pytest.skip("PyAV is not installed: no FLAC")
    with _client(server) as client:
        _ready(client)
        sse = client.post("/invocations", json={**SHORT, "transport": "sse", "format": "flac"})
    events = [json.loads(line[6:]) for line in sse.text.splitlines() if line.startswith("data: ")]
    chunks = [e for e in events if e["type"] == "audio_chunk"]
    complete = events[-1]
    assert [e["seq"] for e in chunks] == list(range(len(chunks))) and complete["chunks"] == len(chunks)
    assert len(chunks) > 2 and all(len(e["data"]) == len(chunks[0]["data"]) for e in chunks[:-1])


def test_a_mutant_is_served_by_the_shipped_uvicorn() -> None:
    """``python -m conformance.mutants NAME`` runs :func:`reference_server.app.create_server`: the shipped
    WebSocket transport (input in slices, the close timeout of the limits) and bounded HTTP heads."""
    server = ToneServer()
    served = server.shipped_server("127.0.0.1", 0)
    assert served.config.ws.__name__ == "KokoroWebSocketProtocol"
    assert served.config.host == "127.0.0.1" and served.config.port == 0
    assert server.runtime is not None and server.runtime.settings.limits == server.limits
