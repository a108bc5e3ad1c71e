"""The conformance suite: certifies a server implementation of spec/PROTOCOL.md.

Run it with pytest: ``pytest conformance`` certifies the reference server through the SageMaker simulator;
``--container-cmd`` / ``--container-url`` certify another container, ``--target live`` a deployed endpoint.
See ``conformance/README.md``.

Modelled on Autobahn|Testsuite: every case has a stable, section-based id (``6.2.1``), a requirement quoted
from the spec, a level (MUST, SHOULD, MAY) and a verdict computed against an expectation, with the wire log
kept beside it.

Reading order: :mod:`conformance.cases` (what a case is, the verdicts), :mod:`conformance.audio` and
:mod:`conformance.badinputs` (the checks and the bad-input table, no I/O), :mod:`conformance.loop`,
:mod:`conformance.target` and :mod:`conformance.session` (the shells: event loops, the server under test,
sessions through the official client), :mod:`conformance.report` (verdicts and reports), ``conftest.py``
(the pytest plugin), then the ``test_*.py`` case modules. :mod:`conformance.mutants` holds deliberately
broken servers that prove the cases have teeth.
"""
