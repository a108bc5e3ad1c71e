"""One-defect mutants as a table: the unbroken tone server with one flag set.

Each :class:`Defect` names the requirement ids it breaks (:mod:`conformance.engine.requirements`) and the
cases that must report it ``FAILED``, and says what is broken with at most four small hooks:

* ``incoming(session, obj)``: sees each client message parsed as JSON (a dict; other messages go straight
  on). It returns ``None`` to let the session handle the message, a dict to hand the session instead, or
  :data:`DROP` to swallow the message; it may queue frames of its own with :meth:`DefectConnection.send`.
* ``outgoing(session, frames)``: rewrites the frames about to be sent (``str``: TEXT, ``bytes``: BINARY).
* ``http(server, request, response)``: rewrites a ``POST /invocations`` answer (status, headers, body).
* ``server``: attributes of :class:`DefectServer` to change (``ping_delay_busy_s``, ``accept_delay_s``,
  ``close_code``, ``refuse_query``, ``log_text``, ``max_text``).

The server is :class:`~conformance.mutants.base.ToneServer`: the team's sans-I/O ``ServerSession`` with a
tone, correct by construction, so each row breaks exactly what its hooks change. ``python -m
conformance.mutants NAME`` serves any row by name, like the hand-written variants.

Layout: :mod:`~conformance.mutants.defects.core` (a row, :class:`DefectServer`, :class:`DefectConnection`
and the hook builders the rows share), :mod:`~conformance.mutants.defects.table` (the rows, in spec order),
and the hooks by concept: :mod:`~conformance.mutants.defects.requests` (requests, ids, queue, cancel, close),
:mod:`~conformance.mutants.defects.controls` (``describe``, ``capabilities``, ``marks``),
:mod:`~conformance.mutants.defects.audio` (languages, text, word timings, G.711, blends),
:mod:`~conformance.mutants.defects.invocations` (``POST /invocations`` answers),
:mod:`~conformance.mutants.defects.utterances` (§15) and :mod:`~conformance.mutants.defects.run_level` (the
cancel path's defects, caught by the run only).
"""

from conformance.mutants.defects.core import DROP, Defect, DefectConnection, DefectServer
from conformance.mutants.defects.run_level import RUN_LEVEL_DEFECTS
from conformance.mutants.defects.table import DEFECTS

__all__ = ["DEFECTS", "DROP", "RUN_LEVEL_DEFECTS", "Defect", "DefectConnection", "DefectServer"]
