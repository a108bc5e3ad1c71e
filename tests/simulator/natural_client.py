"""A bidirectional session written the natural way with the official client alone, for the end-of-session
tests (test_simulator_session_end.py), run as its own process so that what asyncio prints when the loop
closes is seen.

    python natural_client.py {plain,quiet,helper}

Starts the simulator over TLS + HTTP/2 with the tone container, sends one request and ``close``
(PROTOCOL.md §12.4), reads until the endpoint ends the response stream, ends the input and closes the
client at once:

* ``plain``: ``await stream.input_stream.close()`` (what the AWS sample does);
* ``quiet``: ``await sagemaker_transport.aws_crt.end_input(stream.input_stream)``;
* ``helper``: the same session through ``sagemaker_transport.client.open_bidi_stream``.

Prints one JSON line on stdout: the number of output parts and whether END_STREAM was written.
"""

from __future__ import annotations

import asyncio
import json
import sys

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from containers import tone_app

from sagemaker_transport.aws_crt import end_input
from sagemaker_transport.client import LOCAL_CREDENTIALS, crt_transport, open_bidi_stream
from simulator import AsgiContainer, Simulator

MESSAGES = ({"text": "Hello there."}, {"type": "close"})


async def _raw(sim: Simulator, mode: str) -> dict[str, object]:
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        endpoint_uri=sim.endpoint_url,
        region="us-east-1",
        transport=crt_transport(sim.ca_file),
        aws_access_key_id=LOCAL_CREDENTIALS[0],
        aws_secret_access_key=LOCAL_CREDENTIALS[1],
    )
    client = AsyncSageMakerRuntimeHTTP2Client(config=config)
    stream = await client.invoke_endpoint_with_bidirectional_stream(
        InvokeEndpointWithBidirectionalStreamInput(endpoint_name="ep")
    )
    for message in MESSAGES:
        part = RequestPayloadPart(bytes_=json.dumps(message).encode(), data_type="UTF8")
        await stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
    _, receiver = await stream.await_output()
    parts = 0
    while await receiver.receive() is not None:  # until the endpoint ends the response stream
        parts += 1
    ended = None
    if mode == "plain":
        await stream.input_stream.close()
    else:
        ended = await end_input(stream.input_stream)
    await client.close()
    return {"parts": parts, "end_stream_written": ended}


async def _helper(sim: Simulator) -> dict[str, object]:
    async with open_bidi_stream("ep", endpoint_url=sim.endpoint_url, ca_file=sim.ca_file) as session:
        for message in MESSAGES:
            await session.send_json(message)
        parts = [part async for part in session]
        ended = await session.close_input()
    return {"parts": len(parts), "end_stream_written": ended}


async def main(mode: str) -> None:
    async with Simulator(AsgiContainer(tone_app())) as sim:
        result = await (_helper(sim) if mode == "helper" else _raw(sim, mode))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1]), 60))
