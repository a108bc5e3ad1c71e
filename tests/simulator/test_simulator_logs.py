"""No request text in the simulator's log at any level (PROTOCOL.md §13; issue #25).

With ``--log-level debug`` python-websockets logs every frame the simulator forwards to the container, text
included, unless the project's log set-up (protocol.logs) drops those lines."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest
from containers import FragmentEchoServer
from sim_support import run

from protocol.logs import configure_logging
from sagemaker_transport.client import open_bidi_stream
from simulator import Simulator, UrlContainer


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_request_text_never_reaches_the_simulators_debug_log(restore_logging):
    stream = io.StringIO()
    configure_logging("debug", "text", stream=stream, environ={})
    marker = uuid.uuid4().hex

    async def main() -> None:
        with FragmentEchoServer() as echo:  # a python-websockets container behind a real socket
            async with Simulator(UrlContainer(echo.url), listen=False) as sim:
                async with open_bidi_stream("ep", transport=sim.transport(), timeout=20) as session:
                    await session.send(json.dumps({"text": f"Say {marker} now."}).encode(), data_type="UTF8")
                    await session.send(
                        f"and {marker}".encode(), data_type="BINARY", completion_state="PARTIAL"
                    )
                    await session.send(b" again", data_type="BINARY", completion_state="COMPLETE")
                    for _ in range(2):
                        assert await session.receive() is not None

    run(main())
    out = stream.getvalue()
    assert " DEBUG " in out, "nothing was logged at debug level"
    assert "websockets" in out or "simulator" in out
    assert marker not in out, [line for line in out.splitlines() if marker in line][:3]
