"""Command line: ``python -m simulator serve [--container-cmd CMD | --container-url URL] ...``.

``serve`` starts (or connects to) the container, opens the two doors, prints the environment
variables that point unmodified clients at it, and runs until Ctrl-C or SIGTERM, then stops the
container it started.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from protocol.logs import add_log_options, configure_logging
from simulator.container import CommandContainer, Container, ContainerStartError, UrlContainer
from simulator.faults import FaultPlan
from simulator.server import ENV_ENDPOINT_HTTP2, ENV_ENDPOINT_RUNTIME, Simulator
from simulator.settings import SimulatorSettings
from simulator.splitting import SplitPolicy


def _positive_ms(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value / 1000.0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``serve`` is the only command)."""
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser(
        "serve", help="run a simulated SageMaker endpoint in front of one container"
    )
    where = serve_parser.add_argument_group("container")
    where.add_argument(
        "--container-cmd", help="command that starts the container (run, awaited on /ping, stopped)"
    )
    where.add_argument(
        "--container-url",
        default="http://127.0.0.1:8080",
        help="where the container listens (default: %(default)s, the SageMaker port)",
    )
    where.add_argument(
        "--startup-timeout-s", type=float, default=300.0, help="how long /ping may take (default 300)"
    )
    doors = serve_parser.add_argument_group("front doors")
    doors.add_argument(
        "--port", type=int, default=8443, help="TLS + HTTP/2 port (default 8443; 0 = any free port)"
    )
    doors.add_argument("--http1-port", type=int, default=8081, help="HTTP/1.1 port (default 8081; 0 = any)")
    doors.add_argument("--endpoint-name", help="serve only this endpoint name (default: any name)")
    doors.add_argument("--tls-dir", type=Path, help="directory for the generated CA and certificate")
    shaping = serve_parser.add_argument_group("output shaping and faults")
    shaping.add_argument(
        "--split",
        type=SplitPolicy.parse,
        default=SplitPolicy(),
        help="none | fixed:N | random:LO-HI | byte | misaligned[:LO-HI] (default none)",
    )
    shaping.add_argument("--seed", type=int, default=0, help="seed of the split policy (default 0)")
    shaping.add_argument(
        "--fault",
        action="append",
        default=[],
        help="KIND[:ERROR_CODE][@AFTER_BYTES][*TIMES]; KIND: throttle, unavailable, internal, model_error, "
        "model_stream_error, internal_stream_failure (repeatable)",
    )
    shaping.add_argument("--latency-ms", type=_positive_ms, default=0.0, help="added delay per PayloadPart")
    limits = serve_parser.add_argument_group("container contract and limits")
    limits.add_argument(
        "--accept-timeout-ms", type=_positive_ms, default=0.25, help="WebSocket accept deadline (250)"
    )
    limits.add_argument("--ping-interval-s", type=float, default=5.0, help="0 disables pinging the container")
    limits.add_argument("--ping-timeout-s", type=float, default=10.0)
    limits.add_argument("--max-part-bytes", type=int, help="PayloadPart size limit (default: none)")
    limits.add_argument("--idle-timeout-s", type=float, help="session idle limit (default: none)")
    limits.add_argument("--max-session-s", type=float, help="session length limit (default: none)")
    serve_parser.add_argument("--wire-log-dir", type=Path, help="write each session's wire log here as JSONL")
    logs = serve_parser.add_argument_group("logging")
    add_log_options(logs)
    logs.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
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
        wire_log_dir=args.wire_log_dir,
    )


def container_from_args(args: argparse.Namespace) -> Container:
    """The container the ``serve`` arguments name."""
    if args.container_cmd:
        return CommandContainer(
            args.container_cmd, args.container_url, startup_timeout_s=args.startup_timeout_s
        )
    return UrlContainer(args.container_url)


async def serve(args: argparse.Namespace, settings: SimulatorSettings) -> int:
    """Run ``serve`` until SIGINT/SIGTERM; returns the exit status."""
    simulator = Simulator(
        container_from_args(args), settings, port=args.port, http1_port=args.http1_port, tls_dir=args.tls_dir
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
        if isinstance(error, ContainerStartError):
            print(f"error: {error}", file=sys.stderr)
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
        print("# Any credentials and region work: signatures are not checked.", flush=True)
        await stop.wait()
    finally:
        await simulator.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m simulator``."""
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        configure_logging("debug" if args.verbose else args.log_level, args.log_format)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(serve(args, settings))


if __name__ == "__main__":
    sys.exit(main())
