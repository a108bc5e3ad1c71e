"""Abuse probes of issue #25: what one careless or hostile client does to a reference server.

    python -m bench.abuse [--checkout DIR] [--output FILE] [--quick]

Starts ``python -m reference_server`` (ONNX, CPU) from ``--checkout`` (default: this one) on a free port,
waits for ``GET /ping`` 200, then runs four probes one after the other, sampling the server's resident
memory (``/proc/PID/status`` VmRSS) and ``GET /ping`` every 0.1 s from a child process (so that the
flooding client cannot starve the measurement) throughout. The probes:

* ``describe-flood``: one WebSocket client sends 40,000 ``describe`` messages and reads nothing (its
  library stops reading the socket after one queued message), stays connected 10 s more, still reading
  nothing, then drops the connection (at most 40 s in all);
* ``malformed-flood``: the same with 300,000 messages that are not JSON (``invalid_json`` each);
* ``costly-16-sessions``: 16 sessions at once, each sending 400 messages of 64 KB (a text of 10,001
  ``\\u00e9`` escapes, refused ``text_too_long`` after a full parse), reading nothing, then staying
  connected 5 s more;
* ``idle-sockets``: 200 WebSockets that open and never send; 15 s later a well-behaved client opens a
  session and sends ``describe``: does it get its answer (no lock-out)?

Each probe reports RSS before, at its peak and 5 s after the client left, and ``/ping``'s latency during
it (p95 and max, ms; a ``/ping`` that failed or took over 2 s counts as 2000 ms). Results go to
``--output`` as JSON (default ``bench/results/abuse/abuse.json``; a subfolder, since
``python -m bench report`` reads every JSON file of ``bench/results``) and to stdout as a Markdown
table. The figures come from whatever machine runs it: on a shared machine latency figures are upper
bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets import exceptions as websockets_exceptions
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "bench" / "results" / "abuse" / "abuse.json"
PING_FAIL_MS = 2000.0
"""A ``/ping`` that fails or takes longer counts as this (SageMaker's health check gives up after 2 s)."""


@dataclass
class Probe:
    """One probe's figures: RSS in MB, ``/ping`` latency in ms, and what the probe itself saw."""

    name: str
    rss_before_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_after_mb: float = 0.0
    ping_p95_ms: float = 0.0
    ping_max_ms: float = 0.0
    pings: int = 0
    sent: int = 0
    seconds: float = 0.0
    outcome: str = ""
    extra: dict[str, object] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _accept_ms(port: int, ws_path: str) -> float:
    """One WebSocket opening handshake to ``ws_path``: ms until the server accepted it (closed at once
    after); a refused or failed one, or one over 2 s, counts as :data:`PING_FAIL_MS`."""
    from websockets.sync.client import connect as connect_sync

    started = time.perf_counter()
    try:
        with connect_sync(
            f"ws://127.0.0.1:{port}{ws_path}", open_timeout=PING_FAIL_MS / 1000, close_timeout=1
        ):
            ms = (time.perf_counter() - started) * 1000
    except (OSError, TimeoutError, websockets_exceptions.WebSocketException):
        ms = PING_FAIL_MS
    return min(ms, PING_FAIL_MS)


def _sample(pid: int, port: int, stop: Any, out: Any, ws_path: str | None = None) -> None:
    """In a child process (so that the flooding client cannot starve it): every 0.1 s, the server's RSS
    and one ``GET /ping`` (and with ``ws_path`` one WebSocket accept, :func:`_accept_ms`), until ``stop``
    is set; then send the lists through ``out``."""
    rss: list[float] = []
    pings: list[float] = []
    accepts: list[float] = []
    while not stop.is_set():
        rss.append(_rss_mb(pid))
        started = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PING_FAIL_MS / 1000)
            connection.request("GET", "/ping")
            ok = connection.getresponse().status == 200
            connection.close()
            ms = (time.perf_counter() - started) * 1000 if ok else PING_FAIL_MS
        except OSError:
            ms = PING_FAIL_MS
        pings.append(min(ms, PING_FAIL_MS))
        if ws_path is not None:
            accepts.append(_accept_ms(port, ws_path))
        stop.wait(0.1)
    out.send((rss, pings, accepts))


class Watch:
    """Samples RSS and ``/ping`` latency (and, given ``ws_path``, WebSocket accept latency) in a child
    process while a probe runs: :attr:`rss` in MB, :attr:`pings` and :attr:`accepts` in ms."""

    def __init__(self, pid: int, port: int, ws_path: str | None = None) -> None:
        self.pid, self.port, self.ws_path = pid, port, ws_path
        self.rss: list[float] = []
        self.pings: list[float] = []
        self.accepts: list[float] = []

    def start(self) -> None:
        self._stop = multiprocessing.Event()
        self._receive, send = multiprocessing.Pipe(duplex=False)
        self._process = multiprocessing.Process(
            target=_sample, args=(self.pid, self.port, self._stop, send, self.ws_path)
        )
        self._process.start()

    async def stop(self) -> None:
        self._stop.set()
        self.rss, self.pings, self.accepts = await asyncio.to_thread(self._receive.recv)
        self._process.join()


def _p95(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


async def _flood(url: str, message: str, count: int, limit_s: float, hold_s: float = 10.0) -> tuple[int, str]:
    """Send ``message`` ``count`` times without reading, then stay connected ``hold_s`` more seconds,
    still reading nothing; return how many were sent and how it ended."""
    sent = 0
    outcome = "all sent"
    started = time.monotonic()
    try:
        async with asyncio.timeout(limit_s):
            ws = await connect(url, max_queue=1, max_size=None, compression=None, open_timeout=10)
            try:
                for _ in range(count):
                    await ws.send(message)
                    sent += 1
                await asyncio.sleep(hold_s)
            finally:
                ws.transport.abort()  # the client vanishes without a close handshake
    except TimeoutError:
        outcome = f"blocked after {time.monotonic() - started:.0f} s (the server stopped reading)"
    except Exception as exc:  # the server closed the session
        outcome = f"ended by the server: {type(exc).__name__}: {exc}"
    return sent, outcome


async def _idle_then_client(url: str, sockets: int, wait_s: float) -> tuple[int, str]:
    opened = []
    refused = 0
    for _ in range(sockets):
        try:
            ws = await connect(url, open_timeout=5, max_queue=4)
            opened.append(ws)
        except Exception:
            refused += 1
    await asyncio.sleep(wait_s)
    outcome = ""
    try:
        async with connect(url, open_timeout=5) as ws:
            await ws.send(json.dumps({"type": "describe", "request_id": "d1"}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 5))
            outcome = f"well-behaved client got {answer.get('type')}" + (
                f" {answer.get('code')}" if answer.get("type") == "error" else ""
            )
    except Exception as exc:
        outcome = f"well-behaved client failed: {type(exc).__name__}: {exc}"
    still_open = sum(1 for ws in opened if ws.state.name == "OPEN")
    for ws in opened:
        ws.transport.abort()
    return len(opened), f"{outcome}; {still_open} of {len(opened)} idle sockets still open"


async def run(checkout: Path, quick: bool) -> list[Probe]:
    """Start the server from ``checkout`` and run the four probes; return their figures."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "reference_server", "--port", str(port), "--log-level", "warning"],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"ws://127.0.0.1:{port}/invocations-bidirectional-stream"
    probes: list[Probe] = []
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(600):
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{port}/ping")).status_code == 200:
                        break
                await asyncio.sleep(0.5)
        watch = Watch(process.pid, port)
        scale = 10 if quick else 1
        plans = [
            ("describe-flood", json.dumps({"type": "describe"}), 40_000 // scale),
            ("malformed-flood", "not json", 300_000 // scale),
        ]
        for name, message, count in plans:
            probe = Probe(name, rss_before_mb=_rss_mb(process.pid))
            watch.start()
            started = time.monotonic()
            probe.sent, probe.outcome = await _flood(url, message, count, 40.0)
            probe.seconds = round(time.monotonic() - started, 1)
            await watch.stop()
            pings = list(watch.pings)
            await asyncio.sleep(5)
            probe.rss_peak_mb, probe.rss_after_mb = max(watch.rss), _rss_mb(process.pid)
            probe.pings, probe.ping_p95_ms, probe.ping_max_ms = len(pings), _p95(pings), max(pings, default=0)
            probes.append(probe)
        # 16 sessions at once, each 400 messages of 64 KB whose text is 10,001 escaped characters: a
        # parse of the whole message before the length refusal (text_too_long), the costliest refusal.
        costly = json.dumps({"type": "synthesize", "text": "é" * 10_001}, ensure_ascii=True)
        probe = Probe("costly-16-sessions", rss_before_mb=_rss_mb(process.pid))
        watch.start()
        started = time.monotonic()
        floods = await asyncio.gather(
            *(_flood(url, costly, 400 // scale, 40.0, hold_s=5.0) for _ in range(16))
        )
        probe.seconds = round(time.monotonic() - started, 1)
        await watch.stop()
        pings = list(watch.pings)
        await asyncio.sleep(5)
        probe.sent = sum(sent for sent, _ in floods)
        probe.outcome = "; ".join(sorted({outcome for _, outcome in floods}))
        probe.rss_peak_mb, probe.rss_after_mb = max(watch.rss), _rss_mb(process.pid)
        probe.pings, probe.ping_p95_ms, probe.ping_max_ms = len(pings), _p95(pings), max(pings, default=0)
        probes.append(probe)
        probe = Probe("idle-sockets", rss_before_mb=_rss_mb(process.pid))
        watch.start()
        started = time.monotonic()
        probe.sent, probe.outcome = await _idle_then_client(url, 200 // scale, 15.0)
        probe.seconds = round(time.monotonic() - started, 1)
        await watch.stop()
        pings = list(watch.pings)
        await asyncio.sleep(2)
        probe.rss_peak_mb, probe.rss_after_mb = max(watch.rss), _rss_mb(process.pid)
        probe.pings, probe.ping_p95_ms, probe.ping_max_ms = len(pings), _p95(pings), max(pings, default=0)
        probes.append(probe)
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(15)
        if process.poll() is None:
            process.kill()
    return probes


def table(probes: list[Probe]) -> str:
    """The probes as a Markdown table."""
    lines = [
        "| probe | sent | s | RSS before / peak / after (MB) | /ping p95 / max (ms) | outcome |",
        "|---|---|---|---|---|---|",
    ]
    for p in probes:
        lines.append(
            f"| {p.name} | {p.sent} | {p.seconds} | {p.rss_before_mb:.0f} / {p.rss_peak_mb:.0f} / "
            f"{p.rss_after_mb:.0f} | {p.ping_p95_ms:.0f} / {p.ping_max_ms:.0f} | {p.outcome} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the probes (see the module docstring); exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.abuse", description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose server is probed")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the JSON file to write")
    parser.add_argument("--quick", action="store_true", help="a tenth of each flood (a smoke run)")
    args = parser.parse_args(argv)
    probes = asyncio.run(run(args.checkout.resolve(), args.quick))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps([asdict(p) for p in probes], indent=1) + "\n")
    print(table(probes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
