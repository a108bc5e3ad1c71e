"""The server under test and the way to reach it: the simulator in front of a container, or a live endpoint.

:class:`ContainerProcess` starts a container command (``{port}`` is replaced by a free loopback port), keeps
its output in a log file and waits for ``GET /ping``. :class:`SimulatorTarget` puts the SageMaker simulator
(:class:`simulator.Simulator`, TLS + HTTP/2 door and HTTP/1.1 door on free loopback ports) in front of a
container URL, on its own event loop thread, exactly as a third party's container would be reached.
:class:`LiveTarget` reaches a deployed endpoint through the official clients and the default AWS credential
chain. Cases talk to either through the same three calls: :meth:`bidi`, :meth:`runtime` and, simulator
only, :meth:`SimulatorTarget.configure` (per-case simulator settings: split policy, faults, pings).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from conformance.engine import deadline
from conformance.engine.loop import LoopThread
from sagemaker_transport.client import open_bidi_stream, runtime_client
from simulator.container_command import container_command

__all__ = [
    "BIDI_TIMEOUT_S",
    "ContainerProcess",
    "ContainerStartError",
    "LiveTarget",
    "SimulatorTarget",
    "Target",
    "free_port",
    "live_credentials_available",
]

BIDI_TIMEOUT_S = 120.0
"""Longest any single send or receive on a bidirectional stream may wait, and never longer than what is left
of the case's deadline (:mod:`conformance.engine.deadline`). It only guards against hangs (the official client
hangs silently on TLS problems, REFERENCE.md §1); a long text on two CPU cores can take a minute between two
messages when several sessions share the model."""

WIRE_RECORDS_PER_SESSION = 2000
"""Simulator wire-log records kept per session in a case report (a byte-split session has thousands)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _listening(url: str) -> bool:
    """Whether something accepts TCP connections at ``url``'s host and port already."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=0.5):
            return True
    except OSError:
        return False


class ContainerStartError(RuntimeError):
    """The container command exited, or did not answer ``GET /ping`` with 200 in time."""


def wait_reachable(url: str, timeout_s: float) -> None:
    """Wait until a container given by URL answers ``GET {url}/ping`` with any HTTP status.

    Any answer will do: whether it is 200 is for the cases to judge (§2.1). Only a server that cannot be
    reached at all (refused, unresolvable, no HTTP) is a usage error, reported before any case runs.

    Args:
        url: the container's base URL, e.g. ``http://127.0.0.1:8080``.
        timeout_s: how long to keep trying, in seconds (``--startup-timeout``).

    Raises:
        ContainerStartError: nothing answered within ``timeout_s``; the message names the last error.
    """
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=5.0) as client:
        while True:
            try:
                client.get(f"{url.rstrip('/')}/ping")
                return
            except httpx.HTTPError as exc:
                error = exc
            if time.monotonic() > deadline:
                raise ContainerStartError(
                    f"nothing answered GET {url.rstrip('/')}/ping within {timeout_s:g} s "
                    f"({type(error).__name__}: {error}); is the container running there?"
                )
            time.sleep(0.1)


class ContainerProcess:
    """A container command run for the whole suite, the way a third party's container runs.

    Args:
        command: the command line; ``{port}`` is replaced by a free loopback port, and a command without it
            is reached on port 8080 (:func:`simulator.container.container_command`; split with
            :func:`shlex.split`, no shell).
        log_path: where the command's stdout and stderr go.
        startup_timeout_s: how long ``GET /ping`` may take to answer 200 (model loading and warm-up).
        host: where the container is expected to listen.
    """

    def __init__(
        self, command: str, log_path: Path, *, startup_timeout_s: float = 300.0, host: str = "127.0.0.1"
    ) -> None:
        # The same {port} rule as `python -m simulator serve --container-cmd` (simulator.container).
        self.command, self.url = container_command(command, host=host)
        self.port = urlsplit(self.url).port
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self.launched = 0.0
        """:func:`time.monotonic` at :meth:`launch`."""
        self._log: Any = None

    def start(self) -> None:
        """:meth:`launch`, then :meth:`wait_ready`.

        Raises:
            ContainerStartError: as :meth:`wait_ready`.
        """
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the command and return at once (idempotent): a container loads its model for seconds, which
        the caller may spend on its own start-up before :meth:`wait_ready`.

        Raises:
            ContainerStartError: the command cannot be run (no such program, not executable), or its port
                is taken already (a command without ``{port}``).
        """
        if self._process is not None:
            return
        if _listening(self.url):
            # A command without {port} is reached on a fixed port: whatever already listens there would be
            # certified in its place, and the command's own server would fail to bind unseen.
            raise ContainerStartError(
                f"{self.url} already answers before the container command started: stop that server, or put "
                "{port} in the command so that the suite gives it a free port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        # Its own process group, so a wrapper (a shell, `docker run`) stops with everything it started.
        try:
            self._process = subprocess.Popen(
                shlex.split(self.command), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            self._log.close()
            raise ContainerStartError(
                f"the container command cannot be run ({exc.strerror}: {exc.filename or self.command}); "
                "a relative path is taken from the current directory"
            ) from None
        self.launched = time.monotonic()

    def wait_ready(self) -> None:
        """Wait until ``GET /ping`` answers 200, at most ``startup_timeout_s`` from :meth:`launch`.

        Raises:
            ContainerStartError: the command was not launched, exited first or stayed unhealthy; the message
                ends with the tail of its output.
        """
        if self._process is None:
            raise ContainerStartError("the container was not launched (or was stopped)")
        deadline = self.launched + self.startup_timeout_s
        with httpx.Client(timeout=5.0) as client:
            while True:
                if self._process.poll() is not None:
                    code = self._process.returncode
                    self.stop()
                    raise ContainerStartError(
                        f"the container exited with status {code}:\n{self.output_tail()}"
                    )
                try:
                    if client.get(f"{self.url}/ping").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise ContainerStartError(
                        f"the container did not answer GET /ping with 200 within {self.startup_timeout_s:g} "
                        "s:\n"
                        f"{self.output_tail()}"
                    )
                time.sleep(0.05)

    def output(self) -> str:
        """Everything the command wrote so far."""
        if self._log is not None:
            self._log.flush()
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def output_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of :meth:`output`."""
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after 15 s (idempotent)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    process.wait(wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._log is not None:
            self._log.close()
            self._log = None


class Target:
    """How cases reach the server under test (see the module docstring)."""

    name = "target"
    endpoint_name = "conformance"
    faithful_data_types = False
    """Whether ``DataType`` shows the container's frame type (only the simulator promises it)."""
    container_url: str | None = None
    """The container's own URL (for ``GET /ping``), when the suite can reach it."""
    container_log: ContainerProcess | None = None
    """The container process whose output the suite can read, when it started one."""

    def bidi(self, **options: Any) -> contextlib.AbstractAsyncContextManager[Any]:
        """Open an ``InvokeEndpointWithBidirectionalStream`` stream (a
        :class:`sagemaker_transport.client.BidiStream`)."""
        raise NotImplementedError

    def runtime(self, read_timeout: float = 70.0) -> Any:
        """A boto3 ``sagemaker-runtime`` client for ``InvokeEndpoint[WithResponseStream]`` (one attempt)."""
        raise NotImplementedError

    @property
    def simulated(self) -> bool:
        """Whether the simulator is in front (split policies, faults and wire logs are available)."""
        return False

    def wire_mark(self) -> dict[str, int]:
        """A position in the simulator's wire logs, for :meth:`wire_since`."""
        return {}

    def wire_since(self, mark: dict[str, int]) -> list[dict[str, Any]]:
        """Wire-log records added since ``mark``, one dict per session."""
        return []

    def bidi_outcomes(self, mark: dict[str, int], wait_s: float = 5.0) -> list[str | None]:
        """How each bidirectional session opened since ``mark`` ended, as the simulator recorded it (e.g.
        ``"container-closed: code 1000"``), oldest first.

        The client sees the end of its stream before the simulator has written how the container closed the
        WebSocket (the two run on different event loops); on a busy machine that gap is not negligible, so
        this waits up to ``wait_s`` seconds for every outcome to be written. An outcome still missing then
        is ``None``.
        """
        give_up = time.monotonic() + wait_s
        while True:
            logs = self.wire_since(mark)
            outcomes = [
                log["outcome"] for log in logs if log["api"] == "bidi" and log["session_id"] not in mark
            ]
            if (outcomes and None not in outcomes) or time.monotonic() >= give_up:
                return outcomes
            time.sleep(0.05)

    def stop(self) -> None:
        """Release what the target started."""


class SimulatorTarget(Target):
    """The simulator in front of a container at ``container_url``, on its own event-loop thread.

    Args:
        container_url: the container's base URL.
        process: the container process, when the suite started it (its output is then readable).
    """

    name = "simulator"
    faithful_data_types = True

    def __init__(self, container_url: str, process: ContainerProcess | None = None) -> None:
        from simulator import Simulator, SimulatorSettings, UrlContainer

        self.container_url = container_url
        self.container_log = process
        self.loop = LoopThread("conformance-simulator")
        # Reports collect each case's wire log right after the case, so few finished logs need keeping.
        settings = SimulatorSettings(wire_log_keep=48)
        self.simulator = Simulator(UrlContainer(container_url), settings)
        try:
            self.loop.run(self.simulator.start(), 60.0)
        except BaseException:
            self.loop.stop()
            raise

    @property
    def simulated(self) -> bool:
        return True

    def bidi(self, **options: Any) -> contextlib.AbstractAsyncContextManager[Any]:
        options.setdefault("timeout", deadline.bound(BIDI_TIMEOUT_S))
        return open_bidi_stream(
            self.endpoint_name,
            endpoint_url=self.simulator.endpoint_url,
            ca_file=self.simulator.ca_file,
            **options,
        )

    def runtime(self, read_timeout: float = 70.0) -> Any:
        # One attempt: a retried invocation would hide what the container answered.
        return runtime_client(self.simulator.http1_url, max_attempts=1, read_timeout=read_timeout)

    @contextlib.contextmanager
    def configure(self, **changes: Any) -> Iterator[None]:
        """Change simulator settings (:class:`simulator.SimulatorSettings` fields) for sessions opened inside.

        Each session reads the settings once, when it opens; keep its whole life inside the block. The
        settings are one immutable object swapped whole, so the swap needs no trip through the simulator's
        loop (which a hostile server's output may keep busy) and is always undone.
        """
        before = {name: getattr(self.simulator.settings, name) for name in changes}
        self.simulator.update(**changes)
        try:
            yield
        finally:
            self.simulator.update(**before)

    # The wire logs are read from the suite's thread, not through the simulator's loop: a hostile server's
    # output can keep that loop busy for seconds, and these reads only take lengths and slices of lists the
    # loop appends to (atomic under the GIL); a failed read costs the case its wire log, never its verdict.

    def wire_mark(self) -> dict[str, int]:
        try:
            return {log.session_id: len(log.records) for log in list(self.simulator.wire_logs)}
        except Exception:
            return {}

    def wire_since(self, mark: dict[str, int]) -> list[dict[str, Any]]:
        for _ in range(3):  # the loop may change the list of logs while it is copied: try again
            try:
                return self._wire_since(mark)
            except RuntimeError:
                continue
        return []

    def _wire_since(self, mark: dict[str, int]) -> list[dict[str, Any]]:
        out = []
        for log in list(self.simulator.wire_logs):
            first = mark.get(log.session_id, 0)
            records = list(log.records[first:])
            if log.session_id in mark and not records:
                continue
            out.append(
                {
                    "session_id": log.session_id,
                    "api": log.api,
                    "endpoint": log.endpoint,
                    "outcome": log.outcome,
                    "first_record": first,
                    "records": [r.to_dict() for r in records[:WIRE_RECORDS_PER_SESSION]],
                    "records_omitted": max(0, len(records) - WIRE_RECORDS_PER_SESSION),
                }
            )
        return out

    def session_logs(self, mark: dict[str, int]) -> list[Any]:
        """The :class:`simulator.WireLog` objects of sessions opened since ``mark``, oldest first."""

        async def logs() -> list[Any]:
            return [log for log in self.simulator.wire_logs if log.session_id not in mark]

        return self.loop.run(logs(), 10.0)

    def stop(self) -> None:
        try:
            self.loop.run(self.simulator.stop(), 60.0)
        finally:
            self.loop.stop()


def live_credentials_available() -> bool:
    """Whether botocore's credential chain finds credentials without touching the network.

    The instance-metadata and container providers are left out: asking them is a network call (and, off
    AWS, a wait for time-outs). Credentials from the environment, shared files, SSO caches or
    ``credential_process`` are found.
    """
    import botocore.session

    session = botocore.session.Session()
    resolver = session.get_component("credential_provider")
    for name in ("iam-role", "container-role"):
        with contextlib.suppress(ValueError):
            resolver.remove(name)
    try:
        return resolver.load_credentials() is not None
    except Exception:
        return False


class LiveTarget(Target):
    """A deployed SageMaker endpoint, through the official clients and the default credential chain.

    Args:
        endpoint_name: the endpoint's name.
        region: its region.
        endpoint_url: the bidirectional-streaming endpoint URL; None = the region's (or the client's own
            ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2``).
        runtime_endpoint_url: the ``sagemaker-runtime`` URL for boto3; None = the region's (or
            ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME``).
        ca_file: a CA certificate the bidirectional client trusts (a private endpoint's, the simulator's).

    Credentials always come from the default chain, also with an endpoint URL: the live path is exercised as
    a caller would run it.
    """

    name = "live"

    def __init__(
        self,
        endpoint_name: str,
        region: str,
        *,
        endpoint_url: str | None = None,
        runtime_endpoint_url: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.region = region
        self.endpoint_url = endpoint_url
        self.runtime_endpoint_url = runtime_endpoint_url
        self.ca_file = ca_file

    def bidi(self, **options: Any) -> contextlib.AbstractAsyncContextManager[Any]:
        options.setdefault("timeout", deadline.bound(BIDI_TIMEOUT_S))
        if self.endpoint_url is not None:
            options.setdefault("endpoint_url", self.endpoint_url)
            options.setdefault("credentials", _chain_credentials())
        if self.ca_file is not None:
            options.setdefault("ca_file", self.ca_file)
        return open_bidi_stream(self.endpoint_name, region=self.region, **options)

    def runtime(self, read_timeout: float = 70.0) -> Any:
        if self.runtime_endpoint_url is None:
            return runtime_client(region=self.region, max_attempts=1, read_timeout=read_timeout)
        return runtime_client(
            self.runtime_endpoint_url,
            region=self.region,
            credentials=_chain_credentials(),
            max_attempts=1,
            read_timeout=read_timeout,
        )


def _chain_credentials() -> tuple[str, str]:
    """The default chain's access key and secret (the simulator's helpers would otherwise use local ones).

    Raises:
        RuntimeError: the chain has none.
    """
    import botocore.session

    found = botocore.session.Session().get_credentials()
    if found is None:
        raise RuntimeError("no AWS credentials in the default chain")
    frozen = found.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key
