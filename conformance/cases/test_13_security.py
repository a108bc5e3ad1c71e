"""§13 security considerations that a client can observe: request text stays out of the server's logs."""

from __future__ import annotations

import json
import time

import pytest

from conformance.engine import expect
from conformance.engine.case import Level, case
from conformance.engine.probe import Probe
from conformance.engine.texts import FAST

MARKER = "Quokka lantern rhubarb."
"""Words no log line has a reason to contain unless it quotes the request."""


@case(
    "13.0.1",
    "§13",
    Level.MUST,
    requirements=("R13-3",),
    requirement="A server MUST NOT log `text` by default",
    description=f"speak {MARKER!r} once in a session and once through POST /invocations, then read "
    "everything the container process wrote (stdout and stderr)",
    expectation="neither the text nor any of its words appears in the container's output",
)
def test_text_is_not_logged(conf: Probe) -> None:
    process = conf.target.container_log
    if process is None:
        pytest.skip(
            "needs the container's output: certify with --container-cmd (not --container-url or live)"
        )

    async def scenario() -> None:
        async with conf.session("privacy") as s:
            expect.completed(await s.answer(await s.request(MARKER, speed=FAST)))
            await s.close()
            await s.drain()

    conf.run(scenario())
    body = conf.blocking(
        lambda: (
            conf.runtime()
            .invoke_endpoint(
                EndpointName=conf.target.endpoint_name,
                Body=json.dumps({"text": MARKER, "speed": FAST, "format": "pcm"}).encode(),
                ContentType="application/json",
            )["Body"]
            .read()
        ),
        "InvokeEndpoint answered",
    )
    assert body, "POST /invocations returned no audio"
    time.sleep(0.5)  # let the container's log handlers flush
    output = process.output()
    conf.observe(container_output_bytes=len(output))
    leaked = [word for word in ("Quokka", "lantern", "rhubarb") if word.lower() in output.lower()]
    assert not leaked, f"the container's output contains the request text ({leaked})"
