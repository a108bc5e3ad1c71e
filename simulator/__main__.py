"""Command line of the SageMaker simulator: ``python -m simulator serve`` (or ``sagemaker-simulator serve``).

``serve`` starts (or connects to) the container, opens the two doors, prints the environment
variables that point unmodified clients at it, and runs until Ctrl-C or SIGTERM, then stops the
container it started. Every option can also be set with an environment variable
``SAGEMAKER_SIMULATOR_<OPTION>`` (:data:`ENV_PREFIX`); the log options are the ones every piece shares,
``KOKORO_LOG_LEVEL`` and ``KOKORO_LOG_FORMAT`` (:mod:`protocol.logs`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.logs import add_log_options, configure_logging
from simulator.cli import program_name, read_environment
from simulator.container_command import DEFAULT_CONTAINER_URL
from simulator.faults import FaultPlan
from simulator.settings import SimulatorSettings
from simulator.splitting import SplitPolicy

if TYPE_CHECKING:
    from simulator.container import Container

# The HTTP stacks (simulator.container, simulator.server) load inside main(): a Ctrl-C while they load
# ends the command quietly (status 130).

ENV_PREFIX = "SAGEMAKER_SIMULATOR_"
"""Every ``serve`` option ``--some-option`` is also read from ``SAGEMAKER_SIMULATOR_SOME_OPTION``."""

SCRIPT = "sagemaker-simulator"
"""The console script (pyproject.toml) that runs :func:`main`."""

_SHARED_LOG_OPTIONS = frozenset({"log_level", "log_format", "verbose"})


def _positive_ms(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value / 1000.0


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The argument parser (``serve`` is the only command); defaults read ``environ`` (default
    ``os.environ``) for ``SAGEMAKER_SIMULATOR_*`` variables."""
    prog = program_name("simulator", SCRIPT)
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A local Amazon SageMaker AI endpoint in front of one model container, which the "
        "official AWS clients talk to unchanged (simulator/README.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="serve")
    serve_parser = commands.add_parser(
        "serve",
        help="run a simulated SageMaker endpoint in front of one container",
        description="Run a simulated SageMaker endpoint in front of one container until Ctrl-C or SIGTERM. "
        "Prints the environment variables that point the official clients at it.",
        epilog=f"Every option can also be set with the environment variable {ENV_PREFIX}<OPTION>, "
        f"e.g. {ENV_PREFIX}PORT=9443; a flag wins over the environment. The log options read "
        "KOKORO_LOG_LEVEL and KOKORO_LOG_FORMAT, shared by every piece of the project.",
    )
    where = serve_parser.add_argument_group("container")
    where.add_argument(
        "--container-cmd",
        help="command that starts the container; it is run, waited for on GET /ping and stopped at the end. "
        "{port} in it becomes a free port (or the port of --container-url) "
        "(default: none, the container is already running)",
    )
    where.add_argument(
        "--container-url",
        help=f"where the container listens (default {DEFAULT_CONTAINER_URL}, the SageMaker port, or "
        "http://127.0.0.1:{port} when --container-cmd holds {port})",
    )
    where.add_argument(
        "--startup-timeout-s",
        type=float,
        default=300.0,
        help="seconds the started container may take to answer GET /ping with 200 (default 300)",
    )
    doors = serve_parser.add_argument_group("front doors")
    doors.add_argument(
        "--port", type=int, default=8443, help="TLS and HTTP/2 port (default 8443; 0 picks a free port)"
    )
    doors.add_argument(
        "--http1-port", type=int, default=8081, help="HTTP/1.1 port (default 8081; 0 picks a free port)"
    )
    doors.add_argument("--endpoint-name", help="serve only this endpoint name (default: any name)")
    doors.add_argument(
        "--tls-dir",
        type=Path,
        help="folder for the generated CA and certificate (default: a temporary folder, removed at exit)",
    )
    shaping = serve_parser.add_argument_group("output shaping and faults")
    shaping.add_argument(
        "--split",
        type=SplitPolicy.parse,
        default=SplitPolicy(),
        help="how PayloadParts are cut: none, fixed:N, random:LO-HI, byte or misaligned[:LO-HI] "
        "(default none)",
    )
    shaping.add_argument("--seed", type=int, default=0, help="seed of the split policy (default 0)")
    shaping.add_argument(
        "--fault",
        action="append",
        default=[],
        help="KIND[:ERROR_CODE][@AFTER_BYTES][*TIMES], repeatable; KIND is throttle, unavailable, internal, "
        "model_error, model_stream_error or internal_stream_failure (default: none; in the environment, "
        "separate several with commas)",
    )
    shaping.add_argument(
        "--latency-ms",
        type=_positive_ms,
        default=0.0,
        help="delay added to each PayloadPart, both directions, in milliseconds (default 0)",
    )
    limits = serve_parser.add_argument_group("container contract and limits")
    limits.add_argument(
        "--accept-timeout-ms",
        type=_positive_ms,
        default=0.25,
        help="the container must accept the WebSocket within this many milliseconds (default 250)",
    )
    limits.add_argument(
        "--ping-interval-s",
        type=float,
        default=5.0,
        help="seconds between pings to the container during a session; 0 turns pings off (default 5)",
    )
    limits.add_argument(
        "--ping-timeout-s",
        type=float,
        default=10.0,
        help="seconds a ping may wait for its pong before the session fails (default 10)",
    )
    limits.add_argument(
        "--max-part-bytes", type=int, help="largest PayloadPart either way (default: no limit)"
    )
    limits.add_argument(
        "--idle-timeout-s", type=float, help="end a session with no traffic for this long (default: never)"
    )
    limits.add_argument("--max-session-s", type=float, help="end a session this old (default: never)")
    limits.add_argument(
        "--input-window-bytes",
        type=int,
        default=65_535,
        help="HTTP/2 flow control on input: request bytes a stream may send ahead of the container side "
        "reading them; the window reopens only as they are read (default 65535, HTTP/2's initial window)",
    )
    serve_parser.add_argument(
        "--wire-log-dir",
        type=Path,
        help="write each session's wire log here as JSON lines (default: kept in memory only)",
    )
    logs = serve_parser.add_argument_group("logging")
    add_log_options(logs)
    logs.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
    read_environment(parser, ENV_PREFIX, environ, skip=_SHARED_LOG_OPTIONS)
    return parser


def settings_from_args(args: argparse.Namespace) -> SimulatorSettings:
    """The :class:`SimulatorSettings` the ``serve`` arguments describe.

    Raises:
        ValueError: a malformed fault or an invalid limit.
    """
    return SimulatorSettings(
        endpoint_name=args.endpoint_name,
        split=args.split,
        seed=args.seed,
        faults=FaultPlan.parse(args.fault),
        part_latency_s=args.latency_ms,
        accept_timeout_s=args.accept_timeout_ms,
        ping_interval_s=args.ping_interval_s or None,
        ping_timeout_s=args.ping_timeout_s,
        startup_timeout_s=args.startup_timeout_s,
        max_part_bytes=args.max_part_bytes,
        idle_timeout_s=args.idle_timeout_s,
        max_session_s=args.max_session_s,
        input_window_bytes=args.input_window_bytes,
        wire_log_dir=args.wire_log_dir,
    )


def container_from_args(args: argparse.Namespace) -> Container:
    """The container the ``serve`` arguments name (``{port}``: :func:`simulator.container.container_command`).

    Raises:
        ValueError: ``{port}`` is used with a container URL that names no port.
    """
    from simulator.container import CommandContainer, UrlContainer

    if args.container_cmd:
        return CommandContainer(
            args.container_cmd, args.container_url, startup_timeout_s=args.startup_timeout_s
        )
    return UrlContainer(args.container_url or DEFAULT_CONTAINER_URL)


async def serve(args: argparse.Namespace, settings: SimulatorSettings, container: Container) -> int:
    """Run ``serve`` until SIGINT/SIGTERM; returns the exit status (130 when stopped while starting)."""
    from simulator.container import ContainerStartError
    from simulator.server import ENV_ENDPOINT_HTTP2, ENV_ENDPOINT_RUNTIME, Simulator

    simulator = Simulator(
        container, settings, port=args.port, http1_port=args.http1_port, tls_dir=args.tls_dir
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Ctrl-C must work while a slow container is still loading its model.
    starting = asyncio.create_task(simulator.start())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await simulator.stop()
        return 130
    stopping.cancel()
    if (error := starting.exception()) is not None:
        if isinstance(error, ContainerStartError | OSError):  # OSError: a door's port is taken
            print(f"{program_name('simulator', SCRIPT)}: error: {error}", file=sys.stderr)
            return 1
        raise error
    try:
        env = simulator.environment()
        print(f"# SageMaker simulator in front of {simulator.container.description}")
        print(
            f"# split={settings.split} seed={settings.seed} faults={[str(f) for f in settings.faults.faults]}"
        )
        print("# Official bidi client (aws-sdk-sagemaker-runtime-http2, CRT transport):")
        print(f"export {ENV_ENDPOINT_HTTP2}={env[ENV_ENDPOINT_HTTP2]}")
        print(f"export SSL_CERT_FILE={env['SSL_CERT_FILE']}")
        print("# boto3 sagemaker-runtime (invoke_endpoint, invoke_endpoint_with_response_stream):")
        print(f"export {ENV_ENDPOINT_RUNTIME}={env[ENV_ENDPOINT_RUNTIME]}")
        print(
            "# Any credentials and region work: signatures are not checked (for example "
            "AWS_ACCESS_KEY_ID=any AWS_SECRET_ACCESS_KEY=any AWS_DEFAULT_REGION=us-east-1).",
            flush=True,
        )
        await stop.wait()
    finally:
        await simulator.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simulator`` and ``sagemaker-simulator``; returns the exit status.

    Ctrl-C before the signal handlers are in place (while the HTTP stacks load) ends it with status 130
    and no traceback; afterwards Ctrl-C and SIGTERM stop the simulator and its container in order.
    """
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        try:
            settings = settings_from_args(args)
            container = container_from_args(args)
            configure_logging("debug" if args.verbose else args.log_level, args.log_format)
        except ValueError as exc:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(serve(args, settings, container))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
