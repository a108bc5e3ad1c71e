"""Mutation testing of the shipped server: defects that a tool chose, judged by the conformance suite.

The suite's own mutants (:mod:`conformance.mutants`) were written beside the cases they trip. Here a tool
writes the defects instead: mutmut 3 (:mod:`conformance.mutation.tree`) mutates the reference server's own
code (operators, comparisons, constants, arguments, returns), and each mutant of the shipped server, run
with the tone synthesizer (``python -m reference_server --backend tone``: the real front-end, scheduler and
routes without a model), is certified by the suite as any server is (:mod:`conformance.mutation.runner`).
A mutant the run fails is *killed*; one it passes *survived* and is either a gap of the suite or an
*equivalent* mutant (behaviour no spec sentence constrains), triaged in ``survivors.toml``.

Command line: ``python -m conformance.mutation`` (``make mutation``; ``SAMPLE=N SEED=S`` for a random
sample). The report (``mutation-report/index.json`` and ``index.html``) gives the score per module:
killed / (mutants - equivalent).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_MODULES", "ROOT", "SURVIVORS"]

ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose server is mutated."""

DEFAULT_MODULES: tuple[str, ...] = (
    "protocol/server_session.py",
    "protocol/server_state.py",
    "protocol/request_state.py",
    "protocol/messages/jsontext.py",
    "protocol/messages/fields.py",
    "protocol/messages/client.py",
    "protocol/messages/invocations.py",
    "protocol/messages/server.py",
    "protocol/messages/capabilities.py",
    "protocol/messages/reading.py",
    "protocol/frames.py",
    "reference_server/runtime.py",
    "reference_server/request_audio.py",
    "reference_server/scheduling.py",
    "reference_server/http.py",
    "reference_server/ws.py",
    "reference_server/driver.py",
)
"""The files mutated by default (issue #31): the session state machines, the message and frame rules, the
runtime, scheduler and both routes' adapters, and the one session driver they run on."""

SURVIVORS = Path(__file__).resolve().parent / "survivors.toml"
"""The triage of surviving mutants: ``equivalent`` (with the reason) or ``killed`` by a case added since."""
