"""What the server says about its work (reference_server/telemetry.py): one line per request and per
session, never the request text (PROTOCOL.md §13), and Prometheus metrics on a side port, scraped here and
read with prometheus-client's own parser. Tone TEST DOUBLE backend, real server, real sockets."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_harness import GUARD_S, run, wait_for
from tone_backend import SAMPLE_RATE, ToneBackend, expected_samples
from ws_conversation import open_session

from protocol.limits import Limits

SECRET = "My card number is four two four two."
"""Request text that must never reach a log line."""


def _events(caplog, name: str) -> list[dict]:
    return [
        {"message": r.getMessage(), **getattr(r, "kokoro_fields", {})}
        for r in caplog.records
        if r.name == "reference_server" and r.getMessage() == name
    ]


def _everything_logged(caplog) -> str:
    return "\n".join(f"{r.getMessage()} {getattr(r, 'kokoro_fields', {})}" for r in caplog.records)


def _scrape(server) -> dict[tuple[str, tuple], float]:
    port = server.runtime.metrics.port
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=GUARD_S).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_one_line_per_request_and_per_session_and_never_the_text(serve, caplog):
    caplog.set_level(logging.DEBUG, logger="reference_server")
    server = serve(ToneBackend())

    async def scenario():
        async with open_session(server.ws_url) as conv:
            rid = await conv.request(SECRET, request_id="a1", voice="am_adam")
            await conv.send({"text": SECRET, "speed": 9}, expect=True)  # refused: invalid_speed
            await conv.until_error()
            await conv.until_complete(rid)
            await conv.send({"type": "close"})
            assert await conv.until_closed() == 1000

    run(scenario())
    wait_for(lambda: _events(caplog, "session end"), what="the session end line")
    (start,) = _events(caplog, "session start")
    (request,) = _events(caplog, "request")
    (end,) = _events(caplog, "session end")
    (refused,) = _events(caplog, "refused")
    assert start["session"] == request["session"] == end["session"] == refused["session"]
    assert start["client"].startswith("127.0.0.1:")
    assert request["transport"] == "ws" and request["request_id"] == "a1" and request["voice"] == "am_adam"
    assert request["chars"] == len(SECRET) and request["status"] == "completed"
    assert request["audio_s"] == round(expected_samples(SECRET) / SAMPLE_RATE, 3)
    assert request["first_audio_ms"] >= 0 and request["xrt"] > 0
    assert (end["close_code"], end["requests"], end["refused"]) == (1000, 1, 1)
    assert refused["code"] == "invalid_speed"
    assert SECRET not in _everything_logged(caplog)
    assert "four two" not in _everything_logged(caplog)


def test_http_invocations_get_their_line_too(serve, caplog):
    caplog.set_level(logging.INFO, logger="reference_server")
    server = serve(ToneBackend())
    response = httpx.post(f"{server.http_url}/invocations", json={"text": SECRET}, timeout=GUARD_S)
    assert response.status_code == 200
    sse = httpx.post(
        f"{server.http_url}/invocations", json={"text": SECRET, "transport": "sse"}, timeout=GUARD_S
    )
    assert sse.status_code == 200
    wait_for(lambda: len(_events(caplog, "request")) == 2, what="two request lines")
    wav, events = _events(caplog, "request")
    assert (wav["transport"], wav["format"], wav["status"]) == ("http", "wav", "completed")
    assert wav["request_id"].startswith("h") and wav["chars"] == len(SECRET)
    assert wav["audio_s"] == events["audio_s"] > 0
    assert events["request_id"] != wav["request_id"]
    assert SECRET not in _everything_logged(caplog)


def test_metrics_endpoint_scrapes_and_counts(serve):
    server = serve(ToneBackend(), metrics_port=0)
    before = _scrape(server)
    assert before[("kokoro_model_ready", ())] == 1.0
    assert before[("kokoro_queue_depth", ())] == 0.0

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.send({"text": "Hi.", "voice": "nobody"}, expect=True)  # refused: invalid_voice
            await conv.until_error()
            rid = await conv.request("Hello there.")
            await conv.until_complete(rid)
            await conv.send({"type": "close"})
            await conv.until_closed()

    run(scenario())
    assert httpx.post(f"{server.http_url}/invocations", json={"text": "x", "speed": 5}).status_code == 400
    wait_for(lambda: _scrape(server).get(("kokoro_sessions_total", (("close_code", "1000"),))) == 1.0)
    after = _scrape(server)
    assert after[("kokoro_requests_total", (("status", "completed"), ("transport", "ws")))] == 1.0
    assert after[("kokoro_refusals_total", (("code", "invalid_voice"),))] == 1.0
    assert after[("kokoro_refusals_total", (("code", "invalid_speed"),))] == 1.0
    assert after[("kokoro_first_audio_seconds_count", (("transport", "ws"),))] == 1.0
    assert after[("kokoro_xrt_count", ())] == 1.0 and after[("kokoro_xrt_sum", ())] > 0
    assert after[("kokoro_sessions_open", ())] == 0.0


def test_queue_depth_counts_what_sessions_hold(serve):
    backend = ToneBackend(gated=True)
    server = serve(backend, metrics_port=0, limits=Limits(lookahead=0))

    async def scenario():
        async with open_session(server.ws_url) as conv:
            for i in range(3):
                await conv.request("Held.", request_id=f"q{i}")
            wait_for(lambda: _scrape(server)[("kokoro_queue_depth", ())] == 3.0, what="queue depth 3")
            assert _scrape(server)[("kokoro_sessions_open", ())] == 1.0
            backend.segment_permits.release(100)
            for i in range(3):
                await conv.until_complete(f"q{i}")

    run(scenario())
    wait_for(lambda: _scrape(server)[("kokoro_queue_depth", ())] == 0.0, what="an empty queue")


def test_metrics_are_off_by_default_and_a_taken_port_stops_the_start(serve):
    server = serve(ToneBackend())
    assert server.runtime.metrics.port is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        from server_harness import ServerThread

        from reference_server.settings import Settings

        blocked = ServerThread(Settings(port=0, metrics_port=taken.getsockname()[1]), ToneBackend())
        blocked._thread.start()
        blocked._thread.join(GUARD_S)
        assert not blocked.server.started
        blocked._socket.close()


@pytest.mark.parametrize("value", ["-1", "70000"])
def test_metrics_port_is_range_checked(value):
    from reference_server.settings import SettingsError, load_settings

    with pytest.raises(SettingsError, match="metrics_port"):
        load_settings(["--metrics-port", value], environ={})
