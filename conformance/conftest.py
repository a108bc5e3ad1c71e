"""The conformance suite as a pytest plugin: options, the server under test, verdicts and reports.

Options (``pytest conformance --help`` lists them under "conformance"):

``--target simulator|live``
    ``simulator`` (default): the SageMaker simulator in front of a container this run starts
    (``--container-cmd``, default the reference server on Kokoro ONNX) or reaches (``--container-url``).
    ``live``: a deployed endpoint (``--endpoint-name``, ``--region``) through the official clients and the
    default AWS credential chain; every case is skipped, with the reason, when one of the three is missing.
    ``--endpoint-url``, ``--runtime-endpoint-url`` and ``--ca-file`` point the clients at another endpoint
    (a private one, or the simulator: that is how ``tests/`` keeps the live path tested).
``--strict``
    pytest's own option; here it also turns failed SHOULD cases from NON-STRICT into FAILED.
``--cases PATTERN[,PATTERN...]``
    run only the cases whose id matches a pattern (``fnmatch``: ``9.1.*``, ``3.3.?``).
``--report DIR``
    write ``DIR/index.json`` and ``DIR/cases/<id>.json`` (:mod:`conformance.engine.report`),
    ``DIR/index.html`` with a page per case and ``DIR/junit.xml`` (:mod:`conformance.engine.htmlreport`).
``--case-timeout SECONDS``
    the longest a case may run, its shared recordings included (default
    :data:`conformance.engine.deadline.DEFAULT_CASE_TIMEOUT_S`); a case that runs out gets a verdict saying
    what it was waiting for (:mod:`conformance.engine.deadline`).

The verdict of each case is computed here from its outcome, its level
(:func:`conformance.engine.case.verdict_for`) and the findings on its own clauses (a finding on a clause of
the case fails it, findings on other clauses are notes on it), and printed as a table at the end of the run,
followed by the distinct defects (findings grouped by clause: the *clause rows*,
:meth:`conformance.engine.report.Results.defects`).

The run is judged on every finding, wherever it was seen: a clause row with a finding that breaks a MUST is
``FAILED`` (a SHOULD: ``NON-STRICT``, ``FAILED`` under ``--strict``), and fails the run even when no case of
its own failed (a server that breaks the clause only on a path its own cases do not take). Such a clause
gets a failed test report of its own, ``conformance/clauses::<id>`` (:func:`pytest_runtestloop`), so pytest
exits with status 1, prints it among the failures and writes it into ``--junitxml``; the case that saw it
keeps its own verdict (no cascade).

An exception of the suite's own code (``TypeError``, ``KeyError`` ...) is still a readable verdict, flagged
``suite_error`` in the report: a bug of the suite, never a server's fault.
"""

from __future__ import annotations

import fnmatch
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.engine import deadline, expectations, htmlreport, recordings
from conformance.engine.case import MARKER, Case, Unimplemented, Verdict, verdict_for
from conformance.engine.ids import label
from conformance.engine.loop import LoopThread
from conformance.engine.observer import Finding
from conformance.engine.probe import Probe, Recording
from conformance.engine.report import Results
from conformance.engine.target import (
    ContainerProcess,
    ContainerStartError,
    LiveTarget,
    SimulatorTarget,
    Target,
    live_credentials_available,
    wait_reachable,
)

DEFAULT_CONTAINER_CMD = (
    f"{shlex.quote(sys.executable)} -m reference_server --host 127.0.0.1 --port {{port}} --backend onnx "
    "--utterance-idle-timeout-s 3 --max-sessions 16"
)
"""The reference server, started the way a third party's container runs: a separate process on a free
loopback port (Kokoro-82M ONNX on the CPU). Two of its limits are not the defaults; §10 lets a server choose
both, and it advertises them in ``describe``, where the cases read them:

* ``utterance_idle_timeout_s`` 3 s instead of 20 s: case 15.5.3 waits it out, and 17 s less keeps the run
  short. No case pauses an utterance that long; they wait at most a first segment's synthesis;
* ``max_sessions`` 16 instead of 64: the crowd recording (2.3.3, 7.4.2, 9.4.1, 9.4.2) opens that many sessions
  through the simulator, 3 s for 64 on two cores. The other cases open at most a few at a time."""

_RESULTS = pytest.StashKey[Results]()
_CONTAINER = pytest.StashKey[ContainerProcess]()
_CASE = pytest.StashKey[Case]()
_MESSAGE_LIMIT = 4000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "conformance suite (spec/PROTOCOL.md)")
    group.addoption("--target", choices=("simulator", "live"), default="simulator", help="default: simulator")
    group.addoption(
        "--container-cmd",
        default=DEFAULT_CONTAINER_CMD,
        help="command that starts the container under test; {port} is replaced by a free loopback port "
        "(default: the reference server)",
    )
    group.addoption("--container-url", help="certify a container already listening here instead")
    group.addoption(
        "--startup-timeout", type=float, default=300.0, help="seconds the container may take to answer /ping"
    )
    group.addoption("--endpoint-name", help="live target: the SageMaker endpoint")
    group.addoption("--region", help="live target: its AWS region")
    group.addoption(
        "--endpoint-url",
        help="live target: the bidirectional-streaming endpoint URL (default: the region's; e.g. the "
        "simulator's https://127.0.0.1:PORT)",
    )
    group.addoption(
        "--runtime-endpoint-url",
        help="live target: the sagemaker-runtime endpoint URL for InvokeEndpoint[WithResponseStream] "
        "(default: the region's)",
    )
    group.addoption("--ca-file", help="live target: a CA certificate to trust (a private endpoint's)")
    group.addoption("--agent-runtime-arn", help="live target: a deployed agent (AgentCore runtime ARN)")
    group.addoption("--cases", help="comma-separated fnmatch patterns of case ids to run")
    group.addoption(
        "--report", type=Path, help="write index.json, index.html, junit.xml and cases/<id>.json|html here"
    )
    group.addoption(
        "--expect",
        type=Path,
        help="a TOML file of the cases and clauses this server is known to fail, each with a reason: the run "
        "passes when exactly those fail, and a listed one that passes fails it (default: none)",
    )
    group.addoption(
        "--case-timeout",
        type=float,
        default=deadline.DEFAULT_CASE_TIMEOUT_S,
        help="seconds a case may run, its shared recordings included "
        f"(default {deadline.DEFAULT_CASE_TIMEOUT_S:g})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(case): a conformance case (conformance.engine.case.Case)")
    # Third-party deprecations raised while the agent app runs; nothing the suite or the server can act on.
    config.addinivalue_line("filterwarnings", "ignore:Support for class-based `config` is deprecated")
    config.addinivalue_line("filterwarnings", "ignore:datetime.datetime.utcnow:DeprecationWarning")
    config.stash[_RESULTS] = Results()
    config.stash[_RESULTS].meta["case_timeout_s"] = config.getoption("case_timeout")
    if config.getoption("expect") is not None:
        try:
            config.stash[_RESULTS].expectations = expectations.load(config.getoption("expect"))
        except expectations.ExpectationsError as exc:
            raise pytest.UsageError(str(exc)) from None
    deadline.start(config.getoption("case_timeout"))


def _strict(config: pytest.Config) -> bool:
    return bool(config.getini("strict"))


def _live_skip_reason(config: pytest.Config) -> str | None:
    missing = [
        f"--{name}" for name in ("endpoint-name", "region") if not config.getoption(name.replace("-", "_"))
    ]
    if missing:
        return f"the live target needs {' and '.join(missing)}"
    if not live_credentials_available():
        return "the live target needs AWS credentials (none found in the default credential chain)"
    return None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    results = config.stash[_RESULTS]
    patterns = [p.strip() for p in (config.getoption("cases") or "").split(",") if p.strip()]
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    seen: dict[str, str] = {}
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is None:
            selected.append(item)
            continue
        case: Case = marker.args[0]
        if case.id in seen:
            raise pytest.UsageError(f"case id {case.id} is used by {seen[case.id]} and {item.nodeid}")
        seen[case.id] = item.nodeid
        if patterns and not any(fnmatch.fnmatchcase(case.id, p) for p in patterns):
            deselected.append(item)
            continue
        item.stash[_CASE] = case
        results.add(case, item.nodeid)
        selected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
    if config.getoption("target") == "live":
        reason = _live_skip_reason(config)
        if reason is not None:
            for item in items:
                item.add_marker(pytest.mark.skip(reason=reason))


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + " ..."


SUITE_ERRORS = (
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    NameError,
    ZeroDivisionError,
    RecursionError,
    ValueError,
)
"""Exceptions that mean a bug of the suite when a case ends on them: whatever a server sends, the suite
turns it into an assertion with a readable message, never into one of these."""


class ClauseFindings(AssertionError):
    """The case saw deviations on its own clauses (each is a :class:`conformance.engine.observer.Finding`)."""


def _describe(findings: list[Any], limit: int = 6) -> str:
    lines = [str(f) + (f"\n      wire: {f.excerpt}" if f.excerpt else "") for f in findings[:limit]]
    more = f"\n  ... and {len(findings) - limit} more" if len(findings) > limit else ""
    return "\n  ".join(lines) + more


def _gather(item: pytest.Item) -> list[Any]:
    """File the case's findings on its result (own clauses vs notes); return the own ones."""
    case = item.stash.get(_CASE, None)
    result = item.config.stash[_RESULTS].get(item.nodeid)
    probe = getattr(item, "funcargs", {}).get("conf")
    if case is None or result is None or probe is None:
        return []
    try:
        findings = probe.findings()
    except Exception:  # never let the bookkeeping hide the case's own outcome
        return []
    result.findings = [f for f in findings if f.clause in case.clauses]
    result.notes = [f for f in findings if f.clause not in case.clauses]
    return result.findings


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    deadline.start()  # each case's clock starts with its setup (recordings it triggers count)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        outcome = yield
    except BaseException:
        _gather(item)
        raise
    own = _gather(item)
    if own:
        raise ClauseFindings(f"{len(own)} finding(s) on this case's clauses:\n  {_describe(own)}")
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    case = item.stash.get(_CASE, None)
    result = item.config.stash[_RESULTS].get(item.nodeid)
    if case is None or result is None or report.when == "teardown":
        return report
    # The suite's own start-up (the target, the local agent) is not the case's time (deadline.uncharged).
    result.duration_s = max(0.0, result.duration_s + report.duration - deadline.take_uncharged())
    if report.when == "setup":
        if report.failed:
            result.verdict = Verdict.FAILED
            result.suite_error = bool(call.excinfo and call.excinfo.errisinstance(SUITE_ERRORS))
            result.message = _short(call.excinfo.exconly() if call.excinfo else report.longreprtext)
        elif report.skipped:
            result.verdict = Verdict.SKIPPED
            result.message = _skip_reason(report)
        return report
    if call.excinfo is not None and call.excinfo.errisinstance(Unimplemented):
        result.verdict = Verdict.UNIMPLEMENTED
        result.message = str(call.excinfo.value)
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"UNIMPLEMENTED: {call.excinfo.value}")
    elif report.passed:
        result.verdict = Verdict.OK
    elif report.skipped:
        result.verdict = Verdict.SKIPPED
        result.message = _skip_reason(report)
    else:
        verdict = verdict_for(case.level, False, strict=_strict(item.config))
        result.verdict = verdict
        message = call.excinfo.exconly() if call.excinfo else report.longreprtext
        if call.excinfo is not None and call.excinfo.errisinstance(SUITE_ERRORS):
            result.suite_error = True
            where = call.excinfo.traceback[-1]
            message = f"suite error at {where.path}:{where.lineno + 1}: {message}"
        if result.findings and not (call.excinfo and call.excinfo.errisinstance(ClauseFindings)):
            message += f"\nfinding(s) on this case's clauses:\n  {_describe(result.findings)}"
        if (
            case.requirements
            and not result.findings
            and not result.suite_error
            and not (call.excinfo and call.excinfo.errisinstance(ClauseFindings))
        ):
            # The case's own assertion is a finding on its (first) requirement, so the defect list shows it.
            first_line = (call.excinfo.exconly() if call.excinfo else message).splitlines()[0]
            result.findings.append(
                Finding(
                    case.clauses[0],
                    first_line.removeprefix("AssertionError: ")[:300],
                    level=case.level.value,  # what the case judged: a SHOULD case breaks a SHOULD
                )
            )
        result.message = _short(message)
        if verdict is not Verdict.FAILED:
            # A failed SHOULD or MAY is not a failure of the run: reported as an expected failure.
            report.outcome = "skipped"
            report.wasxfail = f"{verdict}: {result.message.splitlines()[0][:300]}"
    _hold_to_expectations(item.config.stash[_RESULTS].expectations, case, result, report)
    return report


def _hold_to_expectations(
    known: expectations.Expectations | None, case: Case, result: Any, report: pytest.TestReport
) -> None:
    """With ``--expect``: a listed case that FAILED is an expected failure (pytest's xfail: it does not fail
    the run); a listed case that passed is an unexpected pass, a failed test until the file is updated."""
    if known is None or case.id not in known.cases:
        return
    entry = known.cases[case.id]
    if result.verdict is Verdict.FAILED:
        result.known = "expected failure"
        report.outcome = "skipped"
        report.wasxfail = f"expected ({known.path}): {entry.reason}"
    elif result.verdict in (Verdict.OK, Verdict.NON_STRICT, Verdict.INFORMATIONAL):
        result.known = "unexpected pass"
        report.outcome = "failed"
        report.longrepr = (
            f"UNEXPECTED PASS: {known.path} lists case {case.id} as failing ({entry.reason}), and it passed: "
            "remove it from the file"
        )


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


CLAUSE_NODE = Path(__file__).resolve().parent / "clauses"
"""Where a clause row's own pytest report lives, as if the suite's package had a module ``clauses``: its node
id is this path relative to the rootdir, ``conformance/clauses::R6.1-2`` from a checkout, shown like the
cases' node ids from any directory (``kokoro-conformance``); ``conformance/clauses`` when the rootdir is
neither the checkout nor the package."""


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Any:
    """After the cases: every clause row that is ``FAILED`` at run level and that no ``FAILED`` case of its
    own shows gets a failed pytest report of its own (:func:`_report_clause`).

    Per-case verdicts stay isolated (a finding on a clause the case does not own is a note on it, no cascade);
    the run is judged on every finding, wherever it was seen. The report counts in ``session.testsfailed``,
    so pytest exits with status 1, and in JUnit XML (``--junitxml``) as a failed test case per clause."""
    outcome = yield
    config = session.config
    if config.option.collectonly:
        return outcome
    results = config.stash[_RESULTS]
    listed = results.expectations.clauses if results.expectations is not None else {}
    for row in results.uncarried_failures(strict=_strict(config)):
        if row["clause"] not in listed:  # a listed one is an expected failure (--expect)
            _report_clause(session, row)
    if results.expectations is not None:
        for clause in results.judgement(strict=_strict(config)).unexpected_passes:
            if clause in listed:
                message = (
                    f"UNEXPECTED PASS: {results.expectations.path} lists clause {clause} as failing "
                    f"({listed[clause].reason}), and no finding broke it: remove it from the file"
                )
                _report_clause(session, {"clause": clause, "level": "?", "verdict": "OK"}, message)
    return outcome


def _clause_text(row: dict[str, Any]) -> str:
    """A clause row for people: its sentence, where it was seen, the first finding and its wire excerpt."""
    seen = ", ".join(f"{label(case_id)} ({n})" for case_id, n in row["per_case"].items())
    lines = [
        f"{row['clause']} ({row['level']}): {row['sentence'] or '(sentence unknown)'}",
        f"observed in {seen}: {row['findings']} finding(s)",
        f"the cases of {row['clause']} in this run: {', '.join(row['owners']) or 'none'} (none FAILED on it)",
        f"first: {row['message']}",
    ]
    if row["excerpt"]:
        lines.append(f"wire: {row['excerpt']}")
    return "\n".join(lines)


def _report_clause(session: pytest.Session, row: dict[str, Any], message: str | None = None) -> None:
    """Log a failed clause row as a test of its own (setup, call, teardown reports, as a test item logs):
    the terminal, pytest's JUnit XML and ``session.testsfailed`` take it like any failed test. ``message``
    replaces the row's description (an unexpected pass of ``--expect``)."""
    session.testscollected += 1  # the terminal's progress counts it
    root, package = session.config.rootpath, CLAUSE_NODE.parent
    # From the checkout (rootdir its root) or kokoro-conformance (rootdir the package): beside the cases'
    # node ids. Any other rootdir (the plugin with cases of elsewhere, -p conformance.conftest) says
    # conformance/clauses, wherever the checkout lies: a checkout under the rootdir must not show its path.
    where = (
        CLAUSE_NODE.relative_to(root).as_posix()
        if root in (package, package.parent)
        else "conformance/clauses"
    )
    nodeid = f"{where}::{row['clause']}"
    location = (where, None, f"clause {row['clause']}")
    properties = [("requirement", row["clause"]), ("level", row["level"]), ("verdict", row["verdict"])]
    hook = session.config.hook
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    now = time.time()
    for when in ("setup", "call", "teardown"):
        failed = when == "call"
        report = pytest.TestReport(
            nodeid,
            location,
            {},
            "failed" if failed else "passed",
            (message or _clause_text(row)) if failed else None,
            when,  # type: ignore[arg-type]
            (),
            0.0,
            now,
            now,
            properties,
        )
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash[_RESULTS]
    if not results.ran:
        return
    strict = _strict(config)
    terminalreporter.write_sep("=", "conformance verdicts")
    for line in results.table():
        terminalreporter.write_line(line)
    if results.defects():
        for line in results.defect_lines(strict=strict):
            terminalreporter.write_line(line)
        for line in results.failure_lines(strict=strict):
            terminalreporter.write_line(line, red=True, bold=True)
    for line in results.expectation_lines(strict=strict):
        terminalreporter.write_line(line, bold=True)
    if results.suite_errors():
        ids = ", ".join(r.case.id for r in results.suite_errors())
        terminalreporter.write_line(f"suite errors (bugs of the suite, not verdicts on the server): {ids}")
    if "startup_s" in results.meta:
        terminalreporter.write_line(f"container and simulator started in {results.meta['startup_s']:.1f} s")
    directory = config.getoption("report")
    if directory is not None:
        terminalreporter.write_line(
            f"report: {directory / 'index.html'} (and index.json, junit.xml, badge.svg)"
        )


def _container_process(config: pytest.Config) -> ContainerProcess:
    """The run's ``--container-cmd``, made once; :meth:`ContainerProcess.launch` starts it."""
    process = config.stash.get(_CONTAINER, None)
    if process is None:
        directory: Path | None = config.getoption("report")
        log_dir = directory if directory is not None else Path(tempfile.mkdtemp(prefix="conformance-"))
        process = ContainerProcess(
            config.getoption("container_cmd"),
            log_dir / "container.log",
            startup_timeout_s=config.getoption("startup_timeout"),
        )
        config.stash[_CONTAINER] = process
    return process


def pytest_sessionstart(session: pytest.Session) -> None:
    # The container loads its model (seconds) while the cases are collected; the target fixture waits for it.
    config = session.config
    if config.getoption("target") == "live" or config.option.collectonly:
        return
    url = config.getoption("container_url")
    if url is not None:
        try:
            wait_reachable(url, config.getoption("startup_timeout"))
        except ContainerStartError as exc:
            raise pytest.UsageError(f"--container-url: {exc}") from None
        return
    try:
        _container_process(config).launch()
    except ContainerStartError as exc:
        raise pytest.UsageError(f"--container-cmd: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    process = config.stash.get(_CONTAINER, None)
    if process is not None:  # launched, but no case asked for the target
        process.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    directory: Path | None = config.getoption("report")
    results = config.stash[_RESULTS]
    if directory is None or not results.ran:
        return
    shutil.rmtree(directory / "cases", ignore_errors=True)
    results.meta.setdefault("target", config.getoption("target"))
    results.meta["strict"] = _strict(config)
    results.write(directory, strict=_strict(config))
    htmlreport.write(directory)


# --- fixtures -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def client_loop() -> Iterator[LoopThread]:
    """The event loop (on its own thread) that runs every client of the run."""
    loop = LoopThread("conformance-client")
    yield loop
    loop.stop()


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    """The server under test, reached through the simulator or live (started once per run)."""
    config = request.config
    meta = config.stash[_RESULTS].meta
    if config.getoption("target") == "live":
        endpoint, region = config.getoption("endpoint_name"), config.getoption("region")
        urls = {
            "endpoint_url": config.getoption("endpoint_url"),
            "runtime_endpoint_url": config.getoption("runtime_endpoint_url"),
        }
        meta.update(endpoint_name=endpoint, region=region, **{k: v for k, v in urls.items() if v})
        yield LiveTarget(endpoint, region, ca_file=config.getoption("ca_file"), **urls)
        return
    started = time.monotonic()
    process: ContainerProcess | None = None
    with deadline.uncharged():  # starting the target is not the first case's time
        url = config.getoption("container_url")
        if url is None:
            process = _container_process(config)
            meta.update(container_cmd=process.command, container_log=str(process.log_path))
            process.launch()  # launched already by pytest_sessionstart, unless collection came first
            url = process.url
        meta["container_url"] = url
        simulator: SimulatorTarget | None = None
        try:
            # The simulator starts while the container loads; it needs only the container's URL.
            simulator = SimulatorTarget(url, process)
            if process is not None:
                process.wait_ready()
        except BaseException:
            if simulator is not None:
                simulator.stop()
            if process is not None:
                process.stop()
            raise
    # From the container's launch, which may have been before this fixture (pytest_sessionstart).
    meta["startup_s"] = round(time.monotonic() - (process.launched if process else started), 2)
    try:
        yield simulator
    finally:
        try:
            simulator.stop()
        finally:
            if process is not None:
                process.stop()


@pytest.fixture
def conf(request: pytest.FixtureRequest, target: Target, client_loop: LoopThread) -> Iterator[Probe]:
    """The case's :class:`conformance.engine.probe.Probe`; its logs go into the case's report entry."""
    probe = Probe(target, client_loop, request.config.stash[_RESULTS].get(request.node.nodeid))
    yield probe
    probe.finish()


@pytest.fixture(scope="session")
def unattached(request: pytest.FixtureRequest) -> Any:
    """``unattached(where, findings)``: findings that no case judged, seen ``where`` (a session shared by
    cases, after the last of them), which the run judges all the same
    (:meth:`conformance.engine.report.Results.add_unattached`)."""
    return request.config.stash[_RESULTS].add_unattached


@pytest.fixture(scope="session")
def agent_runtime_arn(request: pytest.FixtureRequest) -> str | None:
    """``--agent-runtime-arn``: the deployed agent the live AGENT cases call."""
    return request.config.getoption("agent_runtime_arn")


@pytest.fixture(scope="session")
def pipelined(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.pipelined`, recorded once per run."""
    return recordings.pipelined(target, client_loop)


@pytest.fixture(scope="session")
def encodings(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.encodings`, recorded once per run."""
    return recordings.encodings(target, client_loop)


@pytest.fixture(scope="session")
def blends(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.blends`, recorded once per run."""
    return recordings.blends(target, client_loop)


@pytest.fixture(scope="session")
def variations(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.variations`, recorded once per run."""
    return recordings.variations(target, client_loop)


@pytest.fixture(scope="session")
def long_segment(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.long_segment`, recorded once per run."""
    return recordings.long_segment(target, client_loop)


@pytest.fixture(scope="session")
def refusals(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.refusals`, recorded once per run."""
    return recordings.refusals(target, client_loop)


@pytest.fixture(scope="session")
def long_text(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.long_text`, recorded once per run."""
    return recordings.long_text(target, client_loop)


@pytest.fixture(scope="session")
def described(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.described`, recorded once per run."""
    return recordings.described(target, client_loop)


@pytest.fixture(scope="session")
def marked(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.marked`, recorded once per run."""
    return recordings.marked(target, client_loop)


@pytest.fixture(scope="session")
def normalized(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.normalized`, recorded once per run."""
    return recordings.normalized(target, client_loop)


@pytest.fixture(scope="session")
def crowded(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.crowded`, recorded once per run."""
    return recordings.crowded(target, client_loop)


@pytest.fixture(scope="session")
def busy(target: Target, client_loop: LoopThread) -> Recording:
    """:func:`conformance.engine.recordings.busy_burst`, recorded once per run."""
    return recordings.busy_burst(target, client_loop)
