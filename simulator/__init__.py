"""A local SageMaker endpoint that the official AWS clients cannot tell apart from the real one.

Front doors (all the real wire protocols): InvokeEndpointWithBidirectionalStream over TLS + HTTP/2
for ``aws-sdk-sagemaker-runtime-http2``; InvokeEndpoint and InvokeEndpointWithResponseStream over
HTTP/1.1 for boto3; and an in-process transport for the official bidi client. Behind them, one model
container: a command it starts, a URL, or an ASGI app in this process. See ``simulator/README.md``
for the bridge rules (each marked verified or assumed) and the settings.

Reading order: :mod:`simulator.splitting`, :mod:`simulator.faults`, :mod:`simulator.bridge`,
:mod:`simulator.errors`, :mod:`simulator.wirelog` (the rules, no I/O); then
:mod:`simulator.container`, :mod:`simulator.asgi_container`, :mod:`simulator.app`,
:mod:`simulator.h2server`, :mod:`simulator.transport`, :mod:`simulator.server` (the shells);
``python -m simulator`` (the CLI, :mod:`simulator.cli` its conventions). The official clients that reach
it are driven by :mod:`sagemaker_transport.client`, and its wire framing is
:mod:`sagemaker_transport.eventstream`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.asgi_container import AsgiContainer
    from simulator.container import CommandContainer, Container, UrlContainer
    from simulator.faults import Fault, FaultKind, FaultPlan
    from simulator.server import Simulator
    from simulator.settings import SimulatorSettings
    from simulator.splitting import SplitPolicy
    from simulator.wirelog import WireLog, WireRecord

__all__ = [
    "AsgiContainer",
    "CommandContainer",
    "Container",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "Simulator",
    "SimulatorSettings",
    "SplitPolicy",
    "UrlContainer",
    "WireLog",
    "WireRecord",
]

# Loaded on first use (PEP 562), so that `python -m simulator` starts without importing the HTTP stacks
# first: a Ctrl-C in its first seconds then ends it quietly (simulator/__main__.py) instead of with an
# import-time traceback.
_HOMES = {
    "AsgiContainer": "simulator.asgi_container",
    "CommandContainer": "simulator.container",
    "Container": "simulator.container",
    "UrlContainer": "simulator.container",
    "Fault": "simulator.faults",
    "FaultKind": "simulator.faults",
    "FaultPlan": "simulator.faults",
    "Simulator": "simulator.server",
    "SimulatorSettings": "simulator.settings",
    "SplitPolicy": "simulator.splitting",
    "WireLog": "simulator.wirelog",
    "WireRecord": "simulator.wirelog",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
