"""SageMaker's transport as the official AWS clients see it: one home for the code that speaks it.

- ``sagemaker_transport.eventstream``: the AWS event-stream codec (``application/vnd.amazon.eventstream``)
  and SageMaker's PayloadPart and signing envelope (PROTOCOL.md §12). Sans-I/O, standard library only;
  the simulator frames its side of the wire with it.
- ``sagemaker_transport.aws_crt``: one quirk of the official client's CRT transport, contained (ending a
  stream's input quietly).

Layering: this package imports ``protocol`` at most (and the AWS SDKs); the simulator and the agent
import it, never the reverse. This module imports none of its submodules: import the one you need.
"""

__all__: list[str] = []
