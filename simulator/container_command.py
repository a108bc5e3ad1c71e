"""Where a container command listens: one rule for ``{port}``, shared by every place that takes a command.

``python -m simulator serve --container-cmd``, ``pytest conformance --container-cmd`` and
:class:`simulator.container.CommandContainer` all go through :func:`container_command`. Standard library
only, so command lines can use it before any HTTP stack is loaded.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

__all__ = ["DEFAULT_CONTAINER_URL", "PORT_PLACEHOLDER", "container_command", "free_port"]

PORT_PLACEHOLDER = "{port}"
"""Written in a container command where the port goes; replaced the same way everywhere a command is taken
(``python -m simulator serve --container-cmd``, ``pytest conformance --container-cmd``): see
:func:`container_command`."""

DEFAULT_CONTAINER_URL = "http://127.0.0.1:8080"
"""Where a container listens when nothing says otherwise: SageMaker's port (REFERENCE.md §1)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def container_command(command: str, url: str | None = None, *, host: str = "127.0.0.1") -> tuple[str, str]:
    """The command to run and the URL to reach it at, with ``{port}`` filled in (one rule for every caller).

    * ``{port}`` in ``command`` and no ``url``: a free port of ``host``; the URL is ``http://host:PORT``.
    * ``{port}`` and a ``url``: the URL's port (the command must listen where the URL says).
    * no ``{port}``: the command is run as written, and reached at ``url``, default
      :data:`DEFAULT_CONTAINER_URL` (port 8080).

    Raises:
        ValueError: ``{port}`` is used with a URL that names no port.
    """
    if PORT_PLACEHOLDER not in command:
        return command, (url or DEFAULT_CONTAINER_URL).rstrip("/")
    if url is None:
        port = free_port(host)
        return command.replace(PORT_PLACEHOLDER, str(port)), f"http://{host}:{port}"
    port_of_url = urlsplit(url).port
    if port_of_url is None:
        raise ValueError(f"the container command uses {PORT_PLACEHOLDER}, but {url} names no port")
    return command.replace(PORT_PLACEHOLDER, str(port_of_url)), url.rstrip("/")
