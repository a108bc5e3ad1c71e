"""Every benchmark, end to end, in its tiny configuration: a crash fails CI, a slow machine does not.

One ``python -m bench run --smoke`` in a subprocess (real Kokoro on the CPU, the real reference server,
simulator and agent), then the report. Nothing here looks at a figure's value; the subprocess timeout
only guards against a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import report
from bench.runner import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 1_200


def _assets_missing() -> str | None:
    from reference_server.assets import AssetError, locate

    try:
        locate()
    except AssetError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = _assets_missing()
    if missing:
        pytest.skip(f"Kokoro assets not fetched (make assets): {missing}")
    results = tmp_path_factory.mktemp("bench") / "results"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--smoke", "--results", str(results)],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    return results


@pytest.mark.parametrize("name", BENCHMARKS)
def test_each_benchmark_saves_its_result_and_chart(smoke_results: Path, name: str) -> None:
    data = json.loads((smoke_results / f"{name}.json").read_text())
    assert data["name"] == name and data["trials"] and data["figures"]
    assert data["environment"]["python"]
    chart = smoke_results / f"{name}.png"
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size < 100_000


def test_the_report_shows_every_table(smoke_results: Path, tmp_path: Path) -> None:
    text = report.write_report(smoke_results, tmp_path / "RESULTS.md").read_text()
    # Benchmarks run on request (intelligibility) are not part of the smoke run: theirs says how to run it.
    assert "Not run yet: `make bench`" not in text
    for name in BENCHMARKS:
        assert f"![{name}](" in text
    assert text.count("| --- |") >= len(BENCHMARKS)
