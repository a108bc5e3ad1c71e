"""Normative sentences of spec/PROTOCOL.md that no black-box conformance case can observe, and why.

The traceability matrix (``python -m conformance.matrix``) lists these instead of cases. A sentence belongs
here when a client talking to a server through SageMaker (or the simulator) cannot see whether it holds:
a requirement on clients (the suite *is* a client: its own client code meets them, and ``tests/`` tests
that code), on deployment, or on what a server does inside.

Keys are requirement ids (:mod:`conformance.requirements`); values say why, in a sentence.
"""

from __future__ import annotations

__all__ = ["CLIENT", "UNOBSERVABLE"]

CLIENT = "a requirement on clients: the suite is the client here (its client code meets it, tests/ check it)"

UNOBSERVABLE: dict[str, str] = {}
"""Requirement id -> why no server case can observe it."""
