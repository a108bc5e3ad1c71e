"""Never crash, never hang: the whole suite against hostile servers, all at once, with short deadlines.

Each server of ``hostile_servers.py`` answers nonsense in many ways (random bytes, wrong types and shapes,
every control frame malformed differently, silence, early closes, HTTP bodies of any shape, answers that vary
between runs). The suite runs in full against each, in parallel (the servers mostly make the suite wait, so
they share two cores well), and must:

* end every case with a verdict: no pytest error, no internal error, a verdict for every case;
* never fail on a bug of its own (no ``suite_error``: a ``TypeError``, ``KeyError`` ... in the suite's code);
* end every case within its deadline (``--case-timeout``) plus the clean-up allowance.

The verdicts themselves do not matter here (nearly all are FAILED, as they should be).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.engine.case import catalogue
from conformance.engine.loop import WEDGED_LOOP_GRACE_S

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "conformance" / "hostile_servers.py"

DEADLINES_S = {"garbage": 0.75, "malformed": 0.75, "silent": 0.3, "closer": 0.75, "flaky": 1.0}
"""``--case-timeout`` per server: short, so a run against a server that never answers stays short (the silent
server makes every case wait its whole deadline)."""

CLEANUP_S = WEDGED_LOOP_GRACE_S + 3.0
"""What a case may take past its deadline: cancelling its streams (bounded by the client loop's grace) and
writing its report entry."""

RUN_TIMEOUT_S = 480.0

SHARDS = 3
"""Runs per server, each over its share of the sections: the runs mostly wait out deadlines (the five
whole-suite runs took 62 CPU-seconds in 173 s on two cores; in two shares each, 109 s with 69 CPU-seconds;
in three, 81 s on a machine loaded by other work). Four shares were slower (115 s): each run collects the
suite again, and fifteen runs already keep two cores busy."""


def _shards() -> list[list[str]]:
    """The catalogue's case ids in :data:`SHARDS` shares, whole sections together (cases of a section share
    recordings, which a split would make twice), the largest sections first, each to the smallest share."""
    sections: dict[str, list[str]] = {}
    for case in catalogue():
        sections.setdefault(case.section.split(".")[0], []).append(case.id)
    shares: list[list[str]] = [[] for _ in range(SHARDS)]
    for ids in sorted(sections.values(), key=len, reverse=True):
        min(shares, key=len).extend(ids)
    return shares


def _command(name: str, report: Path, cases: list[str]) -> list[str]:
    server = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVERS))} {name} --port {{port}}"
    return [
        sys.executable,
        "-m",
        "pytest",
        "conformance",
        "-q",
        "-p",
        "no:cacheprovider",
        "--report",
        str(report),
        "--case-timeout",
        str(DEADLINES_S[name]),
        "--startup-timeout",
        "60",
        "--container-cmd",
        server,
        "--cases",
        ",".join(cases),
    ]


def test_whole_suite_against_hostile_servers(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    runs = {}
    for name in DEADLINES_S:
        for shard, cases in enumerate(_shards()):
            run = f"{name}-{shard}"
            log = (tmp_path / f"{run}.log").open("w")
            report = tmp_path / run
            process = subprocess.Popen(
                _command(name, report, cases), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            runs[run] = (name, process, report, log)
    problems: dict[str, list[str]] = {}
    verdicts: dict[str, set[str]] = {name: set() for name in DEADLINES_S}
    for run, (name, process, report, log) in runs.items():
        try:
            code = process.wait(max(1.0, RUN_TIMEOUT_S - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            process.kill()
            code = -1
        log.close()
        output = (tmp_path / f"{run}.log").read_text(errors="replace")
        found: list[str] = []
        if code not in (0, 1):
            found.append(f"pytest exited with {code}")
        summary = output.strip().splitlines()[-1] if output.strip() else ""
        if re.search(r"\d+ errors?\b", summary) or "INTERNALERROR" in output:
            found.append(f"pytest errors: {summary}")
        index_path = report / "index.json"
        if not index_path.exists():
            found.append("no report")
        else:
            index = json.loads(index_path.read_text())
            verdicts[name] |= set(index["cases"])
            if index["suite_errors"]:
                messages = {
                    c: json.loads((report / index["cases"][c]["report"]).read_text())["message"][:300]
                    for c in index["suite_errors"][:5]
                }
                found.append(f"suite errors: {messages}")
            limit = DEADLINES_S[name] + CLEANUP_S
            late = {c: e["duration_s"] for c, e in index["cases"].items() if e["duration_s"] > limit}
            if late:
                found.append(
                    f"cases past their deadline of {DEADLINES_S[name]:g} s (+{CLEANUP_S:g} s): {late}"
                )
        if found:
            problems[run] = [*found, output[-3000:]]
    ids = {case.id for case in catalogue()}
    for name, seen in verdicts.items():
        if ids - seen:
            problems.setdefault(name, []).append(f"cases without a verdict: {sorted(ids - seen)[:10]}")
    elapsed = time.monotonic() - started
    assert not problems, f"after {elapsed:.0f} s:\n" + "\n\n".join(
        f"{name}:\n  " + "\n  ".join(found) for name, found in problems.items()
    )


def test_the_shards_hold_every_case_once() -> None:
    shards = _shards()
    assert sorted(c for share in shards for c in share) == sorted(case.id for case in catalogue())
    assert min(map(len, shards)) > 0.4 * len(catalogue()) / SHARDS


@pytest.mark.parametrize("name", sorted(DEADLINES_S))
def test_hostile_server_starts(name: str) -> None:
    """The corpus itself: each server answers GET /ping (else the run above would test nothing)."""
    import httpx

    from conformance.engine.target import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVERS), name, "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30.0
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{name} did not answer GET /ping"
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(10)
