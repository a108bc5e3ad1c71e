"""The server's HTTP edges (reference_server.edges; PROTOCOL.md §11.6, §13): the Origin check of WebSocket
handshakes, the Host check of loopback binds, the bounded request head and the HTTP layer's own errors in
the §11.6 shape. Requests are written on raw sockets, byte for byte, so the test controls every header.
"""

from __future__ import annotations

import json
import socket

import pytest
from server_harness import GUARD_S
from tone_backend import ToneBackend

from protocol import schemas
from reference_server.edges import HostOriginGuard, is_loopback_host
from reference_server.settings import DEFAULT_MAX_HEADER_BYTES, Settings, SettingsError, load_settings

_KEY = "dGhlIHNhbXBsZSBub25jZQ=="  # RFC 6455's sample key


def _exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` and read the answer until the server closes or the head and body are in."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD_S) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before it read everything: read what it said
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65_536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65_536)
            if not chunk:
                break
            body += chunk
    return status, headers, body


def _handshake(port: int, host: str | None = None, origin: str | None = None) -> bytes:
    lines = [
        "GET /invocations-bidirectional-stream HTTP/1.1",
        f"Host: {host if host is not None else f'127.0.0.1:{port}'}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {_KEY}",
        "Sec-WebSocket-Version: 13",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _get(path: str, host: str, *extra: str) -> bytes:
    return (
        "\r\n".join([f"GET {path} HTTP/1.1", f"Host: {host}", *extra, "Connection: close"]) + "\r\n\r\n"
    ).encode()


def _assert_error(headers: dict[str, str], body: bytes, code: str) -> None:
    assert headers["content-type"].startswith("application/json"), headers
    document = json.loads(body)
    schemas.validate("http_error", document)
    assert document["error"]["code"] == code, document


# --- Origin -------------------------------------------------------------------------------------------


def test_a_handshake_without_origin_is_accepted_as_sagemaker_sends_it(serve):
    server = serve(ToneBackend())
    status, headers, _ = _exchange(server.port, _handshake(server.port))
    assert status == 101, headers


@pytest.mark.parametrize(
    "own", ["http://127.0.0.1:{port}", "HTTP://127.0.0.1:{port}", "https://127.0.0.1:{port}"]
)
def test_the_servers_own_origin_is_accepted_the_playground_page(serve, own):
    server = serve(ToneBackend())
    origin = own.format(port=server.port)
    status, headers, _ = _exchange(server.port, _handshake(server.port, origin=origin))
    assert status == 101, headers


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://127.0.0.1:1", "http://localhost:{port}", "null", "garbage"]
)
def test_any_other_origin_is_refused_403_in_the_error_shape(serve, origin):
    server = serve(ToneBackend())
    status, headers, body = _exchange(
        server.port, _handshake(server.port, origin=origin.format(port=server.port))
    )
    assert status == 403
    _assert_error(headers, body, "origin_not_allowed")
    assert server.runtime.sessions == 0


def test_configured_origins_are_accepted_and_star_accepts_all(serve):
    server = serve(ToneBackend(), allowed_origins=("https://app.example.com",))
    ok, _, _ = _exchange(server.port, _handshake(server.port, origin="https://APP.example.com:443"))
    refused, _, _ = _exchange(server.port, _handshake(server.port, origin="https://other.example.com"))
    assert (ok, refused) == (101, 403)
    anyone = serve(ToneBackend(), allowed_origins=("*",))
    status, _, _ = _exchange(anyone.port, _handshake(anyone.port, origin="https://evil.example"))
    assert status == 101


# --- Host ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST", "127.0.0.1"]
)
def test_loopback_names_are_answered_on_a_loopback_bind(serve, host):
    server = serve(ToneBackend())
    status, _, _ = _exchange(server.port, _get("/ping", host.format(port=server.port)))
    assert status == 200


@pytest.mark.parametrize("host", ["rebind.attacker.example:{port}", "10.0.0.5:{port}", "127.0.0.1.nip.io"])
def test_other_host_names_get_421_on_a_loopback_bind_http_and_websocket(serve, host):
    server = serve(ToneBackend())
    host = host.format(port=server.port)
    status, headers, body = _exchange(server.port, _get("/ping", host))
    assert status == 421
    _assert_error(headers, body, "host_not_allowed")
    status, headers, body = _exchange(server.port, _handshake(server.port, host=host))
    assert status == 421
    _assert_error(headers, body, "host_not_allowed")


def test_allowed_hosts_and_a_non_loopback_bind_do_not_check(serve):
    server = serve(ToneBackend(), allowed_hosts=("dev.box",))
    assert _exchange(server.port, _get("/ping", f"dev.box:{server.port}"))[0] == 200
    assert _exchange(server.port, _get("/ping", f"other.box:{server.port}"))[0] == 421
    # A container binds 0.0.0.0 and is reached by the deployer's names: no Host check there. The harness
    # binds its own 127.0.0.1 socket, so only the setting says "not loopback" here.
    container = serve(ToneBackend(), host="0.0.0.0")
    assert _exchange(container.port, _get("/ping", "my-endpoint.internal:8080"))[0] == 200


def test_loopback_names():
    assert all(
        map(
            is_loopback_host,
            ["127.0.0.1", "127.9.9.9:80", "localhost:8080", "[::1]:8080", "::1", "a.localhost"],
        )
    )
    assert not any(
        map(is_loopback_host, ["example.com", "10.0.0.1", "[::2]:80", "0.0.0.0", "localhost.evil.com"])
    )


# --- request head and the HTTP layer's errors -----------------------------------------------------------


def test_a_100_kb_header_gets_431_in_the_error_shape(serve):
    server = serve(ToneBackend())
    status, headers, body = _exchange(
        server.port, _get("/ping", f"127.0.0.1:{server.port}", "X-Big: " + "a" * 100_000)
    )
    assert status == 431
    _assert_error(headers, body, "headers_too_large")


def test_the_head_limit_is_a_setting_and_a_head_just_under_it_is_served(serve):
    server = serve(ToneBackend(), max_header_bytes=4096)
    base = len(_get("/ping", f"127.0.0.1:{server.port}", "X-Pad: "))
    fits = _get("/ping", f"127.0.0.1:{server.port}", "X-Pad: " + "a" * (4096 - base))
    assert len(fits) == 4096
    assert _exchange(server.port, fits)[0] == 200
    over = _get("/ping", f"127.0.0.1:{server.port}", "X-Pad: " + "a" * (4097 - base))
    assert _exchange(server.port, over)[0] == 431


def test_a_large_body_is_not_a_large_head(serve):
    # The head limit counts the request line and headers only: a POST body far above it is read as before.
    server = serve(ToneBackend(), max_header_bytes=1024)
    payload = json.dumps({"text": "Hello there. " * 300, "format": "pcm", "stream": False}).encode()
    head = (
        f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    status, _, body = _exchange(server.port, head + payload)
    assert status == 200 and len(body) > 0


def test_a_malformed_request_gets_400_in_the_error_shape(serve):
    server = serve(ToneBackend())
    status, headers, body = _exchange(
        server.port, b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n"
    )
    assert status == 400
    _assert_error(headers, body, "invalid_http")


def test_a_broken_websocket_handshake_gets_400_in_the_error_shape(serve):
    server = serve(ToneBackend())
    request = _handshake(server.port).replace(f"Sec-WebSocket-Key: {_KEY}\r\n".encode(), b"")
    status, headers, body = _exchange(server.port, request)
    assert status == 400
    _assert_error(headers, body, "invalid_handshake")
    assert "Sec-WebSocket-Key" in json.loads(body)["error"]["message"]


def test_an_unexpected_failure_in_a_route_is_a_500_in_the_error_shape():
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from reference_server.app import create_app

    async def broken(request):
        raise RuntimeError("a bug, with text the client sent")

    app = create_app(Settings(), backend=ToneBackend())
    app.router.routes.append(Route("/broken", broken))
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        response = client.get("/broken")
    assert response.status_code == 500
    _assert_error({"content-type": response.headers["content-type"]}, response.content, "internal_error")
    assert "text the client sent" not in response.text


def test_keep_alive_requests_each_get_their_own_head_budget(serve):
    server = serve(ToneBackend(), max_header_bytes=1024)
    one = f"GET /ping HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Pad: {'a' * 700}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=GUARD_S) as sock:
        for _ in range(3):
            sock.sendall(one)
            data = b""
            while b"Healthy" not in data:
                chunk = sock.recv(65_536)
                assert chunk, data
                data += chunk
            assert data.startswith(b"HTTP/1.1 200"), data


# --- settings -------------------------------------------------------------------------------------------


def test_settings_from_flags_and_environment():
    settings = load_settings(
        ["--allowed-origins", "https://a.example, https://b.example", "--max-header-bytes", "8192"],
        environ={"KOKORO_ALLOWED_HOSTS": "dev.box"},
    )
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    assert settings.allowed_hosts == ("dev.box",)
    assert settings.max_header_bytes == 8192
    assert load_settings([], environ={}).max_header_bytes == DEFAULT_MAX_HEADER_BYTES == 16_384
    with pytest.raises(SettingsError):
        load_settings(["--max-header-bytes", "10"], environ={})


def test_the_guard_passes_lifespan_through():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    import asyncio

    asyncio.run(HostOriginGuard(app, check_host=True)({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert seen == ["lifespan"]
