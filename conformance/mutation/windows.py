"""A pytest plugin that records when each conformance case ran, so that the server's lines can be charged to
the case that made the server run them (:mod:`conformance.mutation.covered`).

The server runs in another process; its coverage is measured in time slices (coverage.py dynamic contexts
named by the ``time.monotonic()`` at which each slice began: the clock is the machine's, the same in both
processes). This plugin writes, to the JSON file named by ``--case-windows``:

* ``cases``: case id → ``[start, end]``, the seconds (``time.monotonic()``) its setup, call and teardown took;
* ``fixtures``: per shared fixture (scope wider than a function) that a case set up, ``[start, end, [case
  ids that use it]]``: what the server ran while, say, :func:`conformance.engine.recordings.pipelined` was
  recorded belongs to every case that judges that recording, not only to the first one that asked for it.

Loaded with ``-p conformance.mutation.windows --case-windows FILE`` beside the suite's own plugin.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.engine.case import MARKER

_WINDOWS = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("conformance").addoption(
        "--case-windows", type=Path, help="write when each case and shared fixture ran here (JSON)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_WINDOWS] = {"cases": {}, "fixtures": [], "users": {}}


def _case_id(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker(MARKER)
    return None if marker is None else marker.args[0].id


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[Any]:
    started = time.monotonic()
    try:
        return (yield)
    finally:
        case_id = _case_id(item)
        if case_id is not None:
            windows = item.config.stash[_WINDOWS]
            windows["cases"][case_id] = [started, time.monotonic()]
            for name in getattr(item, "fixturenames", ()):
                windows["users"].setdefault(name, []).append(case_id)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    started = time.monotonic()
    try:
        return (yield)
    finally:
        if fixturedef.scope != "function":
            request.config.stash[_WINDOWS]["fixtures"].append([fixturedef.argname, started, time.monotonic()])


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("case_windows", None)
    if path is None:
        return
    windows = session.config.stash[_WINDOWS]
    users = windows["users"]
    fixtures = [[start, end, sorted(set(users.get(name, ())))] for name, start, end in windows["fixtures"]]
    Path(path).write_text(json.dumps({"cases": windows["cases"], "fixtures": fixtures}), encoding="utf-8")
