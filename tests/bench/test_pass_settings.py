"""Benchmark 1d's figures from trials (no model): the grid, the medians, the choice, the one-line default
it prints, its tables; and the WebSocket accept probe it shares with the abuse probes. The benchmark
itself runs end to end in test_bench_smoke.py (``SMOKE``)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import asdict

import pytest

from bench import abuse, pass_settings
from bench.pass_settings import SMOKE, Cell, Config, choose, grid, settings_line, summarize
from reference_server.backends.onnx_backend import PassSettings


def _trials(times: dict[Cell, tuple[float, float]], rounds: int = 3) -> list[dict[str, object]]:
    return [
        {
            **asdict(cell),
            "cell": cell.label,
            "round": r,
            "segment": segment,
            "pass_s": seconds,
            "audio_s": audio,
        }
        for r in range(1, rounds + 1)
        for cell, (short, long) in times.items()
        for segment, seconds, audio in (("short", short + r / 100, 1.475), ("long", long + r / 100, 2.75))
    ]


def test_the_grid_covers_each_setting_without_repeats() -> None:
    cells = grid(Config())
    assert len(cells) == len(set(cells)) == 20
    assert {c.threads for c in cells} == {1, 2} and {c.spinning for c in cells} == {"off", "on", "pass"}
    assert {c.graph for c in cells} == {"split", "whole"}
    assert {c.optimization for c in cells} == {"basic", "extended", "all"}
    assert all(c.graph == "whole" for c in cells if c.model == "fp32")  # its export has no split points
    assert len(grid(SMOKE)) == 2 and not any(c.model == "fp32" for c in grid(SMOKE))


def test_medians_xrt_and_the_choice_take_the_fastest_int8_cell() -> None:
    slow, fast, fp32 = Cell(spinning="off"), Cell(spinning="pass", graph="whole"), Cell("fp32", graph="whole")
    summary = summarize(_trials({slow: (0.6, 1.4), fast: (0.5, 1.1), fp32: (0.1, 0.2)}))
    assert summary[fast.label]["first_audio_s"] == 0.52 and summary[fast.label]["long_pass_s"] == 1.12
    assert summary[fast.label]["xrt"] == round(1.12 / 2.75, 3) and summary[fast.label]["n"] == 3
    assert choose(summary) == fast.label  # fp32 is faster here, but the server ships int8
    with pytest.raises(ValueError, match="no int8 cell"):
        choose({fp32.label: summary[fp32.label]})


def test_the_printed_default_line_builds_the_chosen_settings() -> None:
    cell = Cell(threads=1, spinning="pass", graph="whole", optimization="extended")
    namespace: dict[str, object] = {"PassSettings": PassSettings}
    exec(settings_line(asdict(cell), cpus=2), namespace)  # what goes into reference_server/settings.py
    assert namespace["DEFAULT_ONNX_PASS"] == PassSettings(1, "pass", "whole", "extended")
    exec(settings_line(asdict(cell), cpus=1), namespace)  # all the CPUs there are: "every usable CPU"
    assert namespace["DEFAULT_ONNX_PASS"] == PassSettings(None, "pass", "whole", "extended")
    assert cell.flags() == [
        *("--onnx-threads", "1", "--onnx-spinning", "pass"),
        *("--onnx-graph", "whole", "--onnx-optimization", "extended"),
    ]


def test_tables_mark_the_chosen_cell_and_show_the_server_probe() -> None:
    fast, slow = Cell(graph="whole"), Cell()
    summary = summarize(_trials({slow: (0.6, 1.4), fast: (0.5, 1.1)}))
    probe = {
        "cell": fast.label,
        "passes": 4,
        "ping_ms": {"median": 3.0, "p95": 1500.0},
        "ping_max_ms": 1900.0,
    }
    probe |= {"accept_ms": {"median": 4.0, "p95": 9.0}, "accept_max_ms": 12.0}
    figures = {"cells": summary, "chosen": fast.label, "default": slow.label, "server": [probe]}
    figures["settings_line"] = settings_line(summary[fast.label])
    result = {"figures": figures, "trials": [], "environment": {"packages": {"onnxruntime": "1.32.0"}}}
    (_, rows), (_, probes) = pass_settings.tables(result)
    assert rows[0][0] == f"{fast.label} **(chosen)**" and rows[1][0] == f"{slow.label} (current default)"
    assert rows[1][2] == "+19 %" and probes == [
        [fast.label, "4", "3.0 / 1500.0 / 1900.0", "4.0 / 9.0 / 12.0"]
    ]
    text = " ".join(pass_settings.notes(result))
    assert figures["settings_line"] in text and "OVER the 1000 ms bound" in text


def test_an_accept_nobody_answers_counts_as_a_failed_one() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: the connection is refused
        assert abuse._accept_ms(port, "/invocations-bidirectional-stream") == abuse.PING_FAIL_MS


def test_an_accept_is_timed_against_a_real_websocket_server() -> None:
    from websockets.asyncio.server import serve

    async def main() -> float:
        async with serve(lambda ws: ws.wait_closed(), "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            return await asyncio.to_thread(abuse._accept_ms, port, "/")

    assert 0 < asyncio.run(main()) < abuse.PING_FAIL_MS
