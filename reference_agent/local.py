"""The whole voice stack on one machine, no GPU and no AWS account (``python -m reference_agent.local``).

Three parts, all on 127.0.0.1, wired as in production:

1. the reference TTS server (``python -m reference_server --backend onnx``: Kokoro-82M on the CPU),
   started and stopped by
2. the SageMaker simulator (:class:`simulator.server.Simulator`), which serves
   ``InvokeEndpointWithBidirectionalStream`` over TLS + HTTP/2 in front of it, and
3. the agent app (:func:`reference_agent.app.create_app`) on the scripted model, served by uvicorn,
   reaching the simulator through the official SageMaker client exactly as it reaches a live endpoint.

Send prompts with ``curl -N localhost:PORT/invocations -d '{"prompt": "...", "mode": "bidi"}'`` or run
``agent-infra demo`` against the printed URL. Needs the Kokoro assets (``make assets``).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import socket
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Self

from protocol.logs import add_log_options, configure_logging
from reference_agent.tts import TtsEndpoint

if TYPE_CHECKING:
    from reference_agent.app import AgentSettings

# reference_agent.app and .scripted import Strands (seconds): they load inside the functions that use
# them, so a Ctrl-C while they load ends the command quietly.

__all__ = ["LOCAL_ENDPOINT_NAME", "AgentPortError", "LocalStack", "main"]

LOCAL_ENDPOINT_NAME = "kokoro-local"
"""The endpoint name the agent asks the simulator for (the simulator serves any name)."""

LOCAL_REGION = "us-east-1"
"""Signing region of local calls (the simulator checks no signatures, but the client signs)."""


class AgentPortError(OSError):
    """The agent's port cannot be bound (taken, or not allowed); the message says which and the fix."""


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalStack:
    """Simulator + reference server + agent app, started together and stopped together.

    Use as ``async with LocalStack() as stack:`` and send requests to :attr:`agent_url`.

    Args:
        container: the TTS container behind the simulator; default the reference server
            (``python -m reference_server --backend BACKEND``) started as a process.
        backend: the reference server's backend when ``container`` is not given.
        agent_port: the agent's port (0: any free port).
        simulator_port: the simulator's TLS + HTTP/2 port (0: any free port).
        settings: the agent's settings; ``scripted`` is forced on and the endpoint points at the
            simulator.
        startup_timeout_s: how long the TTS container may take to answer ``/ping`` (Kokoro loads in
            about 15 s on two cores, REFERENCE.md §4).
        host: where everything listens; keep 127.0.0.1 (the simulator checks no signatures).
        server_log_level: the reference server's ``--log-level``: ``warning`` by default, since the agent's
            and the simulator's lines already say what each invocation did.
        log_format: the reference server's ``--log-format``; ``None`` leaves it to ``KOKORO_LOG_FORMAT``.
    """

    def __init__(
        self,
        *,
        container: Any = None,
        backend: str = "onnx",
        agent_port: int = 0,
        simulator_port: int = 0,
        settings: AgentSettings | None = None,
        startup_timeout_s: float = 300.0,
        host: str = "127.0.0.1",
        server_log_level: str = "warning",
        log_format: str | None = None,
    ) -> None:
        self.host = host
        self.server_log_level = server_log_level
        self.log_format = log_format
        self.backend = backend
        self.agent_port = agent_port
        self.simulator_port = simulator_port
        self.startup_timeout_s = startup_timeout_s
        from reference_agent.app import AgentSettings

        self._container = container
        self._settings = settings or AgentSettings()
        self.simulator: Any = None
        self._server: Any = None
        self._server_task: asyncio.Task[None] | None = None

    def _default_container(self) -> Any:
        from simulator.container import CommandContainer

        port = _free_port(self.host)
        arguments = [
            "--host",
            self.host,
            "--port",
            str(port),
            "--backend",
            self.backend,
            "--log-level",
            self.server_log_level,
        ]
        if self.log_format is not None:
            arguments += ["--log-format", self.log_format]
        command = shlex.join([sys.executable, "-m", "reference_server", *arguments])
        return CommandContainer(
            command, f"http://{self.host}:{port}", startup_timeout_s=self.startup_timeout_s
        )

    async def start(self) -> None:
        """Start the container (through the simulator), the simulator's doors, then the agent.

        Raises:
            AgentPortError: the agent's port cannot be bound (checked first, before anything starts).
            simulator.container.ContainerStartError: the TTS container did not become healthy.
            RuntimeError: the agent's server did not start.
        """
        listener = self._bind_agent_port()
        import uvicorn

        from reference_agent.app import create_app
        from reference_agent.sagemaker_tts import SageMakerTtsConnector
        from sagemaker_transport.client import LOCAL_CREDENTIALS, crt_transport
        from simulator.server import Simulator

        self.simulator = Simulator(
            self._container or self._default_container(), host=self.host, port=self.simulator_port
        )
        try:
            await self.simulator.start()
        except BaseException:
            listener.close()
            raise
        try:
            ca_file = self.simulator.ca_file
            settings = replace(
                self._settings,
                scripted=True,
                endpoint=TtsEndpoint(
                    LOCAL_ENDPOINT_NAME, url=self.simulator.endpoint_url, region=LOCAL_REGION
                ),
            )

            # The simulator's certificate is self-signed: this transport trusts its CA (and only this
            # transport, not the whole process). Its clients live on the agent app's worker loop and
            # end with the process.
            connect = SageMakerTtsConnector(
                transport_factory=lambda: crt_transport(ca_file), credentials=LOCAL_CREDENTIALS
            )
            app = create_app(settings, tts_connect=connect)
            config = uvicorn.Config(
                app,
                host=self.host,
                port=self.agent_port,
                log_level="warning",
                log_config=None,  # through the root logger, in the project's format (protocol.logs)
                access_log=False,
                lifespan="on",
            )
            self._server = uvicorn.Server(config)
            serving = self._server.serve(sockets=[listener])
            self._server_task = asyncio.create_task(serving, name="agent-server")
            while not self._server.started:
                if self._server_task.done():
                    self._server_task.result()  # raises what stopped it, if anything
                    raise RuntimeError(f"the agent server did not start on {self.host}:{self.agent_port}")
                await asyncio.sleep(0.02)
            self.agent_port = self._server.servers[0].sockets[0].getsockname()[1]
        except BaseException:
            listener.close()
            await self.stop()
            raise

    def _bind_agent_port(self) -> socket.socket:
        """The agent's listening socket, bound here rather than by uvicorn, which answers a taken port
        with sys.exit(3) inside its task (a traceback out of the event loop)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.host, self.agent_port))
        except OSError as exc:
            listener.close()
            raise AgentPortError(
                f"the agent cannot listen on {self.host}:{self.agent_port}: {exc.strerror}; "
                "choose another --port (0: any free port)"
            ) from exc
        return listener

    @property
    def agent_url(self) -> str:
        """``http://127.0.0.1:PORT``: POST agent requests to ``/invocations`` here."""
        return f"http://{self.host}:{self.agent_port}"

    async def wait(self) -> None:
        """Wait until the agent's server stops (Ctrl-C or SIGTERM, which uvicorn handles).

        Cancelling the waiter never cancels the server: it is stopped in order by :meth:`stop`.
        """
        if self._server_task is not None:
            await asyncio.shield(self._server_task)

    async def stop(self) -> None:
        """Stop the agent, then the simulator and its container; safe to call more than once."""
        task, self._server_task = self._server_task, None
        if task is not None:
            self._server.should_exit = True
            await asyncio.wait({task})  # never raises: how the server ended does not stop the rest
        simulator, self.simulator = self.simulator, None
        if simulator is not None:
            await simulator.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m reference_agent.local``."""
    from reference_agent.scripted import add_scripted_options

    parser = argparse.ArgumentParser(
        prog="python -m reference_agent.local",
        description="The whole voice stack on one machine, with no GPU and no AWS account: the reference "
        "server behind the SageMaker simulator, and the agent on a scripted model. Ctrl-C stops all three.",
    )
    parser.add_argument("--port", type=int, default=8080, help="the agent's port (default 8080; 0 = any)")
    parser.add_argument(
        "--simulator-port", type=int, default=0, help="the simulator's TLS port (default 0: any free port)"
    )
    parser.add_argument(
        "--backend",
        default="onnx",
        choices=["onnx", "torch"],
        help="the reference server's backend (default onnx)",
    )
    add_scripted_options(parser)
    add_log_options(parser.add_argument_group("logging"))
    return parser


def settings_from_args(args: argparse.Namespace) -> AgentSettings:
    """Agent settings from the scripted-model flags shared by ``local`` and ``python -m reference_agent``."""
    from reference_agent.app import AgentSettings

    settings = AgentSettings(scripted=True)
    if args.first_token_ms is not None:
        settings = replace(settings, first_token_s=args.first_token_ms / 1000.0)
    if args.tokens_per_s is not None:
        settings = replace(settings, tokens_per_s=args.tokens_per_s)
    if args.reply:
        settings = replace(settings, reply=args.reply)
    return settings


async def _serve(args: argparse.Namespace) -> int:
    from simulator.container import ContainerStartError

    # Ctrl-C or SIGTERM sets `stop`; the stack then stops in order (agent, simulator, container). Nothing
    # is cancelled by a signal: a cancelled uvicorn or model load prints tracebacks, and uvicorn, which
    # takes the signal too while it serves, raises it again once it has shut down (a second `set`).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stack = LocalStack(
        agent_port=args.port,
        simulator_port=args.simulator_port,
        backend=args.backend,
        settings=settings_from_args(args),
        server_log_level="debug" if args.log_level == "debug" else "warning",
        log_format=args.log_format,
    )
    stopping = asyncio.create_task(stop.wait(), name="signal")
    try:
        starting = asyncio.create_task(stack.start(), name="start")
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # interrupted while the model loads
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return 130
        if isinstance(error := starting.exception(), ContainerStartError):
            print(f"the reference server did not start: {error}", file=sys.stderr)
            return 1
        if isinstance(error, AgentPortError):
            print(f"python -m reference_agent.local: {error}", file=sys.stderr)
            return 1
        starting.result()  # any other failure is a bug: let it show
        print(f"agent     {stack.agent_url}/invocations  (scripted model)", flush=True)
        print(f"simulator {stack.simulator.endpoint_url}  (endpoint {LOCAL_ENDPOINT_NAME!r})", flush=True)
        print("Ctrl-C stops everything.", flush=True)
        waiting = asyncio.create_task(stack.wait(), name="serve")
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        return 0
    finally:
        stopping.cancel()
        await stack.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the local stack until interrupted; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        try:
            configure_logging(args.log_level, args.log_format)
        except ValueError as exc:
            print(f"python -m reference_agent.local: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(_serve(args))
    except KeyboardInterrupt:  # before the signal handlers are in place (while the stacks load)
        return 130


if __name__ == "__main__":
    sys.exit(main())
