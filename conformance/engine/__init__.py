"""The suite's engine: what a case is and how it is judged, the shells that drive a server, and the reports.

No case lives here. The cases are :mod:`conformance.cases` (``test_*.py``), the pytest plugin that runs them
is ``conformance/conftest.py``, the one-defect servers that prove they have teeth are
:mod:`conformance.mutants`.

Reading order: :mod:`~conformance.engine.case` (what a case is, the verdicts),
:mod:`~conformance.engine.audio` and :mod:`~conformance.engine.badinputs` (the checks and the bad-input table,
no I/O), :mod:`~conformance.engine.loop`, :mod:`~conformance.engine.target` and
:mod:`~conformance.engine.stream` (the shells: event loops, the server under test, streams through the
official client), :mod:`~conformance.engine.observer` (the lenient reading of what a server sends),
:mod:`~conformance.engine.probe` and :mod:`~conformance.engine.recordings` (sessions recorded once and judged
by many cases), :mod:`~conformance.engine.report`, :mod:`~conformance.engine.htmlreport` and
:mod:`~conformance.engine.replay` (verdicts, reports, sending a recorded case again), and
:mod:`~conformance.engine.requirements` and :mod:`~conformance.engine.matrix` (the spec's requirement ids and
the traceability matrix).
"""
