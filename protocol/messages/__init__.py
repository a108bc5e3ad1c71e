"""The message layer (PROTOCOL.md §3.1, §4, §5, §9.2, §11.1, §15): typed frames and strict parsing.

One module per concept; this package hands their public names on (``from protocol.messages import X``):

- :mod:`~protocol.messages.constants`: version, features, value ranges of a request (§1.5, §4.1).
- :mod:`~protocol.messages.jsontext`: the strict JSON decoder of §3.1 and the compact encoder.
- :mod:`~protocol.messages.fields`: the field rules of a client message, in the order of §9.2.
- :mod:`~protocol.messages.client`: the client's messages (§4, §15), each with ``parse`` and ``to_dict``.
- :mod:`~protocol.messages.invocations`: the ``POST /invocations`` body (§11.1).
- :mod:`~protocol.messages.server`: the server's control frames (§5) on their one base ``ServerFrame``.
- :mod:`~protocol.messages.capabilities`: the ``capabilities`` frame and its parts (§4.4).
- :mod:`~protocol.messages.reading`: reading server control frames, leniently or strictly (§5).
"""

from protocol.messages import capabilities, client, constants, fields, invocations, jsontext, reading, server
from protocol.messages.capabilities import *  # noqa: F403
from protocol.messages.client import *  # noqa: F403
from protocol.messages.constants import *  # noqa: F403
from protocol.messages.fields import *  # noqa: F403
from protocol.messages.invocations import *  # noqa: F403
from protocol.messages.jsontext import *  # noqa: F403
from protocol.messages.reading import *  # noqa: F403
from protocol.messages.server import *  # noqa: F403

__all__ = sorted(
    {
        *capabilities.__all__,
        *client.__all__,
        *constants.__all__,
        *fields.__all__,
        *invocations.__all__,
        *jsontext.__all__,
        *reading.__all__,
        *server.__all__,
    }
)
