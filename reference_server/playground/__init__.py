"""The playground: one static page, served by the reference server, to hear it and watch it stream.

``GET /playground/`` serves a plain HTML/CSS/JavaScript page (no build step, nothing loaded from another
origin) that speaks through the server's own WebSocket route exactly as any client of PROTOCOL.md does:
``describe`` for the voices (§4.4), an utterance fed at a language model's pace (§15), ``cancel`` for
barge-in (§4.2), audio classified by content (§3.4) and played gapless as it arrives. What each file does:

* ``bidi.js``: the protocol as the page needs it, without I/O: classification of server messages,
  joining audio into whole samples, LLM-like token pieces, word spans from timings.
* ``player.js``: schedules PCM on the Web Audio clock, counts what it received and played, and detects
  underruns.
* ``playground.js``: the session and the page.

Whether the page is served is :attr:`reference_server.settings.Settings.serves_playground`: by default on
a loopback address only, so the containers (``--host 0.0.0.0``) serve SageMaker's routes and nothing more
unless ``KOKORO_PLAYGROUND=1``. The page is for people; nothing in the protocol depends on it.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

__all__ = ["CONTENT_SECURITY_POLICY", "FILES", "PREFIX", "routes"]

PREFIX = "/playground/"
"""Where the page lives; ``/`` and ``/playground`` redirect here."""

FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "playground.css": "text/css; charset=utf-8",
    "bidi.js": "text/javascript; charset=utf-8",
    "player.js": "text/javascript; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
}
"""The page's files (package data of this package) and their media types; nothing else is served."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The browser may load the page's own files and open the page's own WebSocket, nothing else: no CDN,
no web fonts, no third-party script, so the page works offline and cannot leak what is typed into it.
(``connect-src 'self'`` covers ``ws:``/``wss:`` to the same host, CSP Level 3.)"""

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
    "Referrer-Policy": "no-referrer",
}


def _load() -> dict[str, bytes]:
    folder = resources.files(__name__)
    return {name: (folder / name).read_bytes() for name in FILES}


def routes() -> list[BaseRoute]:
    """The routes that serve the page: ``/``, ``/playground`` (redirects) and ``/playground/<file>``.

    The files are read once, here, so a missing file fails at start-up rather than on first visit.

    Raises:
        OSError: a file of :data:`FILES` is not installed with the package.
    """
    content = _load()

    async def page(request: Request) -> Response:
        name = request.path_params.get("name") or "index.html"
        body = content.get(name)
        if body is None:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(body, media_type=FILES[name], headers=_HEADERS)

    async def to_page(request: Request) -> Response:
        return RedirectResponse(PREFIX, status_code=307)

    return [
        Route("/", to_page, methods=["GET"]),
        Route(PREFIX.rstrip("/"), to_page, methods=["GET"]),
        Route(PREFIX, page, methods=["GET"]),
        Route(PREFIX + "{name}", page, methods=["GET"]),
    ]
