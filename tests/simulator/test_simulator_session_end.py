"""Ending a session through the official client prints nothing (issue #28: the
``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED`` traceback).

The endpoint ends the response stream when the container closes its WebSocket, as SageMaker does
("the bidirectional stream maintains the connection until either the client closes it or the model
indicates completion": the InvokeEndpointWithBidirectionalStream API reference). The traceback comes
from the client side: ``input_stream.close()`` returns before the CRT transport has written END_STREAM,
and a client closed right after cuts that write off. ``sagemaker_transport.aws_crt.end_input`` waits for it.

Each client runs as its own process (natural_client.py), because asyncio prints the unretrieved
exception when the task is collected or the loop closes; its stderr is the evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _run(mode: str) -> tuple[dict[str, object], str]:
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(HERE / "natural_client.py"), mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_natural_client_shows_the_traceback_the_issue_reports():
    # The control: without end_input, closing the client right after the input cuts the END_STREAM write
    # off. If a new awscrt or smithy-http stops doing this, this test says so and the helper can go.
    result, stderr = _run("plain")
    assert result["parts"] > 0
    assert "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED" in stderr and "Traceback" in stderr


@pytest.mark.parametrize("mode", ["quiet", "helper"])
def test_ending_the_input_with_end_input_prints_nothing_and_ends_the_request(mode):
    result, stderr = _run(mode)
    assert result["parts"] > 0  # the whole session was read: synthesis_start, audio, complete
    assert result["end_stream_written"] is True  # the request really ended (END_STREAM went out)
    assert "Traceback" not in stderr, stderr
    assert "Task exception was never retrieved" not in stderr, stderr
    assert "HAS_COMPLETED" not in stderr, stderr
