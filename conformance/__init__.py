"""The conformance suite: certifies a server implementation of spec/PROTOCOL.md.

Run it with pytest: ``pytest conformance`` certifies the reference server through the SageMaker simulator;
``--container-cmd`` / ``--container-url`` certify another container, ``--target live`` a deployed endpoint.
See ``conformance/README.md``.

Modelled on Autobahn|Testsuite: every case has a stable, section-based id (``6.2.1``), a requirement quoted
from the spec, a level (MUST, SHOULD, MAY) and a verdict computed against an expectation, with the wire log
kept beside it.

Layout: :mod:`conformance.engine` is the engine (what a case is, the shells that drive a server, the
observer, the reports, the traceability matrix); :mod:`conformance.cases` holds the cases, one ``test_*.py``
module per part of the spec; ``conftest.py`` here is the pytest plugin that runs them (kept at the package's
top so that ``pytest conformance`` and ``kokoro-conformance`` load it); :mod:`conformance.mutants` holds
deliberately broken servers that prove the cases have teeth, :mod:`conformance.mutation` the mutation testing
of the shipped server. The commands are ``python -m conformance`` (``kokoro-conformance``),
``python -m conformance.matrix`` and ``python -m conformance.screenshot``.
"""
