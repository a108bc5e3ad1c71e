"""Running benchmarks: the shared context, the list of benchmarks, and one run of all of them.

Each benchmark module has the same small surface:

* ``NAME`` (the results file stem) and ``TITLE`` (the RESULTS.md heading);
* ``Config`` (a frozen dataclass whose defaults are the full run) and ``SMOKE`` (a tiny run for CI);
* ``async def run(context, config) -> Result``;
* ``tables(result) -> [(headers, rows), ...]``, ``notes(result) -> [str, ...]`` (what a reader needs
  to read the figures) and ``plot(result, path)``, all from the saved JSON alone, so RESULTS.md can be
  rewritten without running anything again.

A benchmark that cannot run here (the torch weights are missing, say) still returns a result with a
note saying so; one that crashes stops the run with its traceback (``make bench`` fails), as the
issue asks.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.record import RESULTS_DIR, Result, save_result
from bench.stack import ServerPool

__all__ = ["BENCHMARKS", "ON_REQUEST", "Context", "benchmark_module", "result_dict", "run_benchmarks"]

BENCHMARKS = (
    "transport_latency",
    "first_audio",
    "barge_in",
    "pass_settings",
    "agent_latency",
    "transport_sizes",
    "audio_formats",
    "throughput",
    "simulator_overhead",
    "playback",
    "chunker_cost",
    "segmentation_quality",
    "capacity_model",
    "capacity",
)
"""The CPU benchmarks in the issue's order (the GPU one runs from ``bench/gpu.sh``)."""

ON_REQUEST = ("intelligibility",)
"""Benchmarks ``make bench`` leaves out, run by name (``python -m bench intelligibility``, ``make
intelligibility``): the round-trip intelligibility benchmark needs the ``quality`` extra and its ASR model and
takes minutes of CPU; RESULTS.md keeps its section from its last saved result."""


def benchmark_module(name: str) -> ModuleType:
    """The module of benchmark ``name`` (``bench.<name>``).

    Raises:
        ValueError: ``name`` is not a benchmark.
    """
    if name not in (*BENCHMARKS, *ON_REQUEST, "gpu"):
        raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join((*BENCHMARKS, *ON_REQUEST))}")
    return importlib.import_module(f"bench.{name}")


@dataclass
class Context:
    """What the benchmarks of one run share.

    Attributes:
        servers: the reference servers, started on first use.
        results_dir: where JSON and PNG files go.
        log: progress output (one line per call).
    """

    servers: ServerPool
    results_dir: Path = RESULTS_DIR
    log: Callable[[str], None] = field(default=print)


def _quiet_finished_crt_streams(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Drop one known, harmless report; pass everything else to the default handler.

    After the endpoint has ended a bidirectional stream, the CRT transport's own request-body task
    still tries to end the input and fails with ``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED`` (the
    simulator's client notes this in ``BidiStream.close_input``); asyncio reports the unretrieved
    exception at garbage collection, once per session, which would bury the benchmark's output.
    """
    error = context.get("exception")
    if isinstance(error, RuntimeError) and "HTTP_STREAM_HAS_COMPLETED" in str(error):
        return
    loop.default_exception_handler(context)


async def _run_all(names: Sequence[str], smoke: bool, context: Context) -> list[Result]:
    asyncio.get_running_loop().set_exception_handler(_quiet_finished_crt_streams)
    results = []
    try:
        for name in names:
            module = benchmark_module(name)
            config = module.SMOKE if smoke else module.Config()
            context.log(f"[{name}] {module.TITLE}")
            started = time.perf_counter()
            result: Result = await module.run(context, config)
            result.wall_s = round(time.perf_counter() - started, 1)
            path = save_result(result, context.results_dir)
            module.plot(result_dict(result), context.results_dir / f"{name}.png")
            context.log(f"[{name}] done in {result.wall_s:.0f} s -> {path}")
            results.append(result)
    finally:
        await context.servers.aclose()
    return results


def result_dict(result: Result) -> dict[str, Any]:
    """The result as :func:`bench.record.load_results` would read it back (plots work from this)."""
    return json.loads(result.to_json())


def run_benchmarks(
    names: Sequence[str] = BENCHMARKS,
    *,
    smoke: bool = False,
    results_dir: Path = RESULTS_DIR,
    log: Callable[[str], None] | None = None,
) -> list[Result]:
    """Run ``names`` in order in one event loop, saving each result and chart as it finishes.

    Args:
        names: benchmarks to run (see :data:`BENCHMARKS`).
        smoke: run each ``SMOKE`` configuration instead of the full one.
        results_dir: where results go.
        log: progress output; default prints to stdout, flushed.

    Raises:
        Exception: whatever a benchmark raised (a crash is a failure; a slow machine is not).
    """
    if log is None:

        def log(line: str) -> None:
            print(line, file=sys.stdout, flush=True)

    logging.getLogger("simulator").setLevel(logging.WARNING)
    context = Context(ServerPool(log), results_dir, log)
    return asyncio.run(_run_all(names, smoke, context))
