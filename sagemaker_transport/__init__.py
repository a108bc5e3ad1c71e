"""SageMaker's transport as the official AWS clients see it: one home for the code that speaks it.

- ``sagemaker_transport.eventstream``: the AWS event-stream codec (``application/vnd.amazon.eventstream``)
  and SageMaker's PayloadPart and signing envelope (PROTOCOL.md §12). Sans-I/O, standard library only;
  the simulator frames its side of the wire with it.
- ``sagemaker_transport.client``: the one client of ``InvokeEndpointWithBidirectionalStream`` over the
  official ``aws-sdk-sagemaker-runtime-http2`` (``BidiStream``, ``open_bidi_stream``), and boto3's
  response stream; used by the simulator's tests, the conformance suite's simulator and live targets, the
  benchmarks and the reference agent's TTS leg.
- ``sagemaker_transport.aws_crt``: one quirk of the official client's CRT transport, contained (ending a
  stream's input quietly).

Layering: this package imports ``protocol`` at most (and the AWS SDKs); the simulator and the agent
import it, never the reverse (tests/sagemaker_transport/test_sagemaker_client.py checks it). This module
imports none of its submodules: import the one you need (``client`` loads the SDK).
"""

__all__: list[str] = []
