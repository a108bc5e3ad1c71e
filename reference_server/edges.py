"""The server's HTTP edges: whom it answers and how much of a request head it reads (PROTOCOL.md §13, §11.6).

Its pieces sit outside the routes, so that every route gets them:

* :class:`HostOriginGuard`, an ASGI middleware. A WebSocket handshake that carries an ``Origin`` header is
  refused with 403 unless that origin is the server's own (the playground page it serves, same host and
  port) or one of ``allowed_origins``: a web page the developer happens to open cannot drive a local
  server from the browser. On a loopback bind it also refuses, with 421, any request whose ``Host`` is
  not a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``) or one of ``allowed_hosts``: the
  defence against DNS rebinding, where a page's own host name is made to point at 127.0.0.1. Clients
  that are not browsers (SageMaker's sidecar, the simulator, agents, the conformance suite) send no
  ``Origin`` and are unaffected; a server bound to another address (the containers' 0.0.0.0) does not
  check ``Host``, since the names it is reached by are the deployer's.
* :func:`http_protocol`, uvicorn's httptools protocol with a bound on the request head (request line and
  headers, ``max_header_bytes``) answered with 431, and the framework's own refusal of a malformed
  request (400) in the error shape of §11.6 rather than uvicorn's plain text;
* :func:`json_rejections` for a refused WebSocket handshake (400 ``invalid_handshake``) and
  :func:`internal_error` for an unexpected exception in a route (500), in the same shape.

Every refusal here is ``{"error": {"code", "message"}}`` with ``Content-Type: application/json``; the
codes (``origin_not_allowed``, ``host_not_allowed``, ``headers_too_large``, ``invalid_http``,
``invalid_handshake``) are not registry codes of §9.1, like ``not_found``: they come from the HTTP layer.
The checks cost a scan of the request's headers, which the server has parsed anyway, and a look-up of the
``Host`` value's remembered verdict: about 5 µs a request on this project's 2-core machines.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from protocol.logs import log_event
from reference_server.settings import DEFAULT_MAX_HEADER_BYTES

__all__ = [
    "HostOriginGuard",
    "error_body",
    "http_protocol",
    "internal_error",
    "is_loopback_host",
    "json_rejections",
]

logger = logging.getLogger("reference_server")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = frozenset({"localhost"})
_HOST_MEMORY = 64  # Host values whose verdict is remembered


def error_body(code: str, message: str) -> bytes:
    """The §11.6 error body ``{"error": {"code": ..., "message": ...}}`` as UTF-8 JSON bytes."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def _host_name(authority: str) -> str:
    """The host of a ``Host`` value or URL authority, lowercased, without port or IPv6 brackets."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1 : authority.find("]")] if "]" in authority else authority[1:]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a ``Host`` header value, port allowed) names this machine only:
    ``localhost``, an address of 127.0.0.0/8, or ``::1``."""
    name = _host_name(host).rstrip(".")
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _origin_authority(origin: str) -> tuple[str, str] | None:
    """``(scheme, host:port)`` of a serialized origin (RFC 6454), the port made explicit; None for ``null``
    or anything that is not an http(s) origin."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, f"{host}:{port}"


def _with_port(host: str, default_port: int) -> str:
    """A ``Host`` value with its port made explicit (``default_port`` when it names none)."""
    host = host.strip().lower()
    bracketed = host.startswith("[")
    if (bracketed and "]:" in host) or (not bracketed and host.count(":") == 1):
        return host
    return f"{host}:{default_port}"


class HostOriginGuard:
    """ASGI middleware: the ``Origin`` check of WebSocket handshakes and the ``Host`` check of loopback binds.

    Args:
        app: the application behind the guard.
        allowed_origins: origins (``scheme://host[:port]``) a WebSocket handshake may carry besides the
            server's own; ``"*"`` allows every origin. Compared case-insensitively, default ports
            explicit.
        check_host: refuse requests whose ``Host`` is not a loopback name or one of ``allowed_hosts``
            (the server is bound to a loopback address).
        allowed_hosts: further host names (no port) accepted by the ``Host`` check; ``"*"`` accepts every
            one.

    Refusals: a WebSocket handshake is answered 403 (origin) or 421 (host) with the §11.6 JSON body
    instead of being upgraded; an HTTP request 421. Each is logged once at WARNING (``refused`` with
    ``code``, ``origin`` or ``host``); a refused request never reaches a route.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_origins: Iterable[str] = (),
        check_host: bool = False,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.app = app
        origins = {o.strip().lower().rstrip("/") for o in allowed_origins if o.strip()}
        self._any_origin = "*" in origins
        self._origins = {a for a in map(_origin_authority, origins - {"*"}) if a is not None}
        hosts = {_host_name(h) for h in allowed_hosts if h.strip()}
        self._check_host = check_host and "*" not in hosts
        self._hosts = hosts
        self._host_verdicts: dict[bytes, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw_host = origin = None
        for name, value in scope.get("headers", ()):
            if name == b"host":
                raw_host = value
            elif name == b"origin":
                origin = value.decode("latin-1")
        host = None if raw_host is None else raw_host.decode("latin-1")
        if self._check_host and raw_host is not None and not self._host_allowed(raw_host):
            message = f"this server answers for loopback names only, not {host!r}"
            await self._refuse(scope, send, 421, "host_not_allowed", message)
            return
        if kind == "websocket" and origin is not None and not self._origin_allowed(origin, host):
            message = f"WebSocket connections from {origin!r} are not allowed"
            await self._refuse(scope, send, 403, "origin_not_allowed", message)
            return
        await self.app(scope, receive, send)

    def _host_allowed(self, raw: bytes) -> bool:
        # Remembered per Host value: a server hears a handful of them, and parsing an address on every
        # request would cost /ping more than the rest of the check.
        verdict = self._host_verdicts.get(raw)
        if verdict is None:
            host = raw.decode("latin-1")
            verdict = is_loopback_host(host) or _host_name(host) in self._hosts
            if len(self._host_verdicts) >= _HOST_MEMORY:
                self._host_verdicts.clear()  # many distinct names: a scan, not a browser; start over
            self._host_verdicts[raw] = verdict
        return verdict

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        if self._any_origin:
            return True
        authority = _origin_authority(origin)
        if authority is None:  # "null" (a file:// page, a sandboxed frame) and the like: never the server's
            return False
        if authority in self._origins:
            return True
        if host is None:
            return False
        # Same origin: the page was served by this server, at the host and port the handshake names.
        # Behind a TLS proxy the page is https and the handshake still reaches the server as ws.
        default = 443 if authority[0] == "https" else 80
        return authority[1] == _with_port(host, default)

    async def _refuse(self, scope: Scope, send: Send, status: int, code: str, message: str) -> None:
        origin = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"origin"), None)
        host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None)
        log_event(
            logger,
            "refused",
            logging.WARNING,
            transport="ws" if scope["type"] == "websocket" else "http",
            code=code,
            status=status,
            origin=origin,
            host=host,
        )
        body = error_body(code, message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        prefix = "websocket." if scope["type"] == "websocket" else ""
        await send({"type": f"{prefix}http.response.start", "status": status, "headers": headers})
        await send({"type": f"{prefix}http.response.body", "body": body})


async def internal_error(request: Any, exc: Exception) -> Any:
    """Starlette's handler of last resort: an unexpected exception in a route is answered ``500``
    ``internal_error`` in the §11.6 shape (Starlette's own answer is a plain-text "Internal Server Error").
    The exception is still logged with its traceback by the server, as before; the body does not repeat
    it (it may hold request data)."""
    from starlette.responses import Response

    body = error_body("internal_error", "the server failed while answering this request")
    return Response(body, status_code=500, media_type="application/json")


_REJECTION_CODES = {
    400: "invalid_handshake",
    403: "forbidden",
    414: "uri_too_long",
    431: "headers_too_large",
    500: "internal_error",
}


def json_rejections(conn: Any) -> None:
    """Make a python-websockets ``ServerProtocol`` answer refused handshakes in the §11.6 error shape.

    uvicorn refuses a handshake through ``conn.reject(status, text)`` (a missing ``Sec-WebSocket-Key``,
    a head over websockets' own limits, an app that failed before accepting), which writes ``text`` as
    ``text/plain``; after this call the same refusals carry ``{"error": {"code", "message"}}`` as
    ``application/json``, ``message`` being that text. Answers the app itself gives through the
    WebSocket denial response (the :class:`HostOriginGuard` refusals) do not go through ``reject``.
    """
    reject = conn.reject

    def json_reject(status: Any, text: str) -> Any:
        response = reject(status, text)
        code = _REJECTION_CODES.get(int(status), f"http_{int(status)}")
        body = error_body(code, text.strip() or response.reason_phrase)
        response.body = body
        for name, value in (("Content-Type", "application/json"), ("Content-Length", str(len(body)))):
            if name in response.headers:
                del response.headers[name]  # Headers holds several values per name: replace, not add
            response.headers[name] = value
        return response

    conn.reject = json_reject


def http_protocol(max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> type[HttpToolsProtocol]:
    """uvicorn's httptools HTTP/1.1 protocol with a bounded request head and §11.6 error bodies.

    A request whose head (request line and headers, up to the blank line) exceeds ``max_header_bytes``
    is answered ``431 Request Header Fields Too Large`` with code ``headers_too_large`` and the
    connection closed, as soon as that many bytes have arrived: the server never buffers more of a
    head than that. A request the HTTP parser refuses (a malformed request line or header) is answered
    400 with code ``invalid_http`` instead of uvicorn's plain-text body. Both close the connection.
    """

    class KokoroHttpProtocol(HttpToolsProtocol):
        _head_bytes: int | None = 0
        """Bytes of the current request head seen so far; None once its blank line has arrived."""
        _tail = b""

        def data_received(self, data: bytes) -> None:
            if self._head_bytes is not None:
                window = self._tail + data
                end = window.find(b"\r\n\r\n")
                if end < 0:
                    self._head_bytes += len(data)
                    self._tail = window[-3:]
                else:
                    self._head_bytes += end + 4 - len(self._tail)
                if self._head_bytes > max_header_bytes:
                    log_event(logger, "refused", logging.WARNING, transport="http", code="headers_too_large")
                    self._send_error(
                        431,
                        "headers_too_large",
                        f"the request line and headers exceed {max_header_bytes} bytes",
                    )
                    return
                if end >= 0:
                    self._head_bytes, self._tail = None, b""
            super().data_received(data)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._head_bytes, self._tail = 0, b""  # what follows on this connection is the next head

        def send_400_response(self, msg: str) -> None:
            self._send_error(400, "invalid_http", "the request is not valid HTTP/1.1")

        def _send_error(self, status: int, code: str, message: str) -> None:
            if self.transport.is_closing():
                return
            body = error_body(code, message)
            reason = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}[status]
            head = [b"HTTP/1.1 %d %s\r\n" % (status, reason)]
            for name, value in self.server_state.default_headers:
                head += [name, b": ", value, b"\r\n"]
            head += [
                b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body),
                b"connection: close\r\n\r\n",
            ]
            self.transport.write(b"".join(head) + body)
            self.transport.close()

    return KokoroHttpProtocol
