"""Tests of the conformance suite itself. The case modules are imported here: their marker is registered."""

from __future__ import annotations

import pytest

from conformance.engine.case import MARKER


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(case): a conformance case (conformance.engine.case.Case)")
