"""Benchmark results on disk: one JSON file per benchmark, with every trial and the machine it ran on.

A :class:`Result` holds the figures RESULTS.md shows, every trial behind them (in the order taken),
what was run (:attr:`Result.config`), caveats (:attr:`Result.notes`) and :func:`environment`. Files are
written whole to a temporary name and renamed, so an interrupted run never leaves half a file that
``python -m bench report`` would then read.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "RESULTS_DIR", "Result", "environment", "load_results", "save_result"]

RESULTS_DIR = Path(__file__).with_name("results")
"""Where ``make bench`` writes ``<name>.json`` and ``<name>.png``."""

PACKAGES = (
    "numpy",
    "onnxruntime",
    "phonemizer-fork",
    "misaki",
    "torch",
    "kokoro",
    "starlette",
    "uvicorn",
    "websockets",
    "aws-sdk-sagemaker-runtime-http2",
    "awscrt",
    "boto3",
    "strands-agents",
    "bedrock-agentcore",
    "sentencex",
    "lameenc",
    "av",
    "matplotlib",
)
"""Distributions whose versions shape the figures; each result records the installed ones."""


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def environment() -> dict[str, Any]:
    """Where a benchmark ran: CPUs (count, usable, model), load average, Python, OS, package versions, date.

    The load average is recorded because other work on a 2-core machine changes every figure here.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": _cpu_model(),
        "load_average": load,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": versions,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


@dataclass
class Result:
    """One benchmark's outcome.

    Attributes:
        name: file stem (``transport_latency`` → ``transport_latency.json``).
        title: the heading in RESULTS.md.
        figures: the numbers the RESULTS.md table shows (milliseconds as ``*_ms``, ratios unitless).
        trials: every measurement, in the order taken, each a flat dict.
        config: what was run: trial counts, texts, server settings.
        seed: the seed's figures for this benchmark (REFERENCE.md §3), or empty.
        notes: caveats: what was skipped and why, what a figure means.
        environment: :func:`environment` at the start of the run.
        wall_s: how long the benchmark took, seconds.
    """

    name: str
    title: str
    figures: dict[str, Any] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    seed: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=environment)
    wall_s: float | None = None

    def to_json(self) -> str:
        """The result as indented JSON (what :func:`save_result` writes)."""
        return json.dumps(asdict(self), indent=1, sort_keys=False, allow_nan=False) + "\n"


def save_result(result: Result, directory: Path = RESULTS_DIR) -> Path:
    """Write ``<directory>/<result.name>.json`` atomically; return its path.

    Raises:
        ValueError: a figure is NaN or infinite (JSON has no such numbers).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.name}.json"
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(result.to_json(), encoding="utf-8")
    temporary.replace(path)
    return path


def load_results(directory: Path = RESULTS_DIR) -> dict[str, dict[str, Any]]:
    """Every ``*.json`` result in ``directory``, by name (the file stem)."""
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(directory.glob("*.json"))
    }
