"""§10.3 floods: one session sends far more than it reads, and the rest of the server must not notice.

The case floods one session with malformed messages, reading nothing, while it times ``GET /ping`` on the
container and a second session's ``describe``; then the flooding session reads what it was owed. A server
that parses a whole socket read of messages without handing control back holds its event loop for as long
as that takes, and ``/ping`` (SageMaker's health check gives up after 2 s and replaces the instance) and
every other session wait with it.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from conformance.engine import deadline
from conformance.engine.case import Level, case
from conformance.engine.probe import Probe

FLOOD = 5_000
"""Malformed messages the flooding session sends without reading (each answered ``invalid_json``)."""
PING_LIMIT_S = 1.0
"""Slowest ``GET /ping`` accepted during the flood: half of SageMaker's 2 s health-check timeout."""
BYSTANDER_LIMIT_S = 2.0
"""Slowest ``describe`` round trip of the other session accepted during the flood (through the simulator,
which relays the flood too)."""


@case(
    "10.3.1",
    "§10.3",
    Level.MUST,
    requirements=("R10.3-4a", "R10.3-4b"),
    requirement="A server MUST NOT let reading one session's messages delay `GET /ping` or the other "
    "sessions",
    description=f"one session sends {FLOOD} malformed messages and reads nothing; meanwhile GET /ping on the "
    "container every 0.1 s and a second session's describe every 0.25 s; then the flooding session reads",
    expectation=f"every GET /ping answers 200 within {PING_LIMIT_S:g} s and every describe of the other "
    f"session within {BYSTANDER_LIMIT_S:g} s; the flooding session then gets its answers, or ends with "
    "client_not_reading (§10.3)",
)
def test_flood_while_nothing_is_read(conf: Probe) -> None:
    url = conf.require_container("time GET /ping during a flood")
    pings: list[float] = []
    describes: list[float] = []

    async def scenario() -> tuple[int, bool]:
        async with conf.session("flood") as flood, conf.session("bystander") as other:
            flooding = True

            async def ping() -> None:
                async with httpx.AsyncClient(timeout=deadline.bound(10.0)) as client:
                    while flooding:
                        started = time.monotonic()
                        response = await client.get(f"{url}/ping")
                        pings.append(time.monotonic() - started)
                        assert response.status_code == 200, f"GET /ping answered {response.status_code}"
                        await asyncio.sleep(0.1)

            async def ask() -> None:
                n = 0
                while flooding:
                    n += 1
                    seen = len(other.messages)
                    started = time.monotonic()
                    other.observer.reader.expect_describe(f"d{n}")
                    await other.send(json.dumps({"type": "describe", "request_id": f"d{n}"}).encode())
                    await other.wait(lambda seen=seen: len(other.messages) > seen, "the describe's answer")
                    describes.append(time.monotonic() - started)
                    await asyncio.sleep(0.25)

            watchers = [asyncio.create_task(ping()), asyncio.create_task(ask())]
            try:
                await asyncio.sleep(0.5)  # the quiet figures first
                for _ in range(FLOOD):
                    await flood.send(b"not json")
                await asyncio.sleep(1.0)
            finally:
                flooding = False
                await asyncio.gather(*watchers)

            def answered() -> int:
                # Every error frame counts: its code is the §9 cases' to judge (invalid_json), not this
                # case's; a server whose frames lack codes must not keep this case waiting to its deadline.
                return len(flood.observer.errors)

            def settled() -> bool:
                ended = any(error.code == "client_not_reading" for _, error in flood.observer.errors)
                return ended or answered() >= FLOOD

            await flood.wait(settled, f"the answers to {FLOOD} malformed messages")
            ended = flood.ended
            if not ended:
                await flood.close()
                await flood.drain()
            await other.close()
            await other.drain()
            return answered(), ended

    answered, ended = conf.run(scenario())
    conf.observe(
        ping_max_s=round(max(pings, default=0.0), 3),
        pings=len(pings),
        describe_max_s=round(max(describes, default=0.0), 3),
        describes=len(describes),
        answered=answered,
    )
    assert pings and max(pings) <= PING_LIMIT_S, (
        f"GET /ping took {max(pings):.2f} s while another session flooded the server (limit {PING_LIMIT_S} s)"
    )
    assert describes and max(describes) <= BYSTANDER_LIMIT_S, (
        f"another session's describe took {max(describes):.2f} s to answer during the flood "
        f"(limit {BYSTANDER_LIMIT_S} s)"
    )
    assert answered >= FLOOD or ended, f"the flooding session got {answered} of {FLOOD} answers"
