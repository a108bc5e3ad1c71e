"""The conformance cases: one ``test_<section>_<topic>.py`` module per part of spec/PROTOCOL.md.

Each test is a case (:func:`conformance.engine.case.case`): a stable id, the section it certifies, a level and
the requirement ids it tests. pytest collects them with the suite's plugin (``conformance/conftest.py``); the
catalogue (:func:`conformance.engine.case.catalogue`) and the traceability matrix read them from this package.
A new case goes into the module of its section here (see ``conformance/README.md``).
"""
