"""Benchmark 1d: Kokoro's ONNX pass on this CPU per session setting, and the event loop beside it.
Run alone with ``python -m bench pass_settings`` (20 cells, about 5 min on two idle cores; it prints its
plan) or ``python -m bench pass_settings --smoke`` (two cells, under a minute).

On two cores the first audio a client measures is within a few percent of the first segment's model pass
(issue #26), so what is left to win is the pass itself. Each *cell* is one way of running it
(:class:`reference_server.backends.onnx_backend.PassSettings` plus the weights):

* intra-op ``threads`` (1, 2);
* ``spinning``: idle threads sleep (``off``), spin before sleeping (``on``), or spin only during a pass
  (``pass``: ``session.force_spinning_stop``);
* ``graph``: the text side and the decoder as two sessions (``split``, what ``lead_in early`` needs) or
  one (``whole``);
* ``optimization``: onnxruntime's graph optimization level (``basic``, ``extended``, ``all``);
* the weights: the shipped int8 export, or an fp32 graph exported here from the weights rebuilt out of it
  (:func:`export_fp32`: ``torch.onnx.export`` of ``kokoro``'s ``KModelForONNX`` on
  :mod:`reference_server.backends.onnx_to_torch`'s state dict), cached beside the assets, never
  committed. It has the int8 export's dequantized weights and float activations: it measures float
  kernels against int8 ones, not the official fp32 checkpoint (not reachable here, REFERENCE.md §4).

The grid (:func:`grid`): threads x spinning x graph at level ``all`` on int8; the other two levels with
the graph either way; fp32 (whole graph: its export has no split points) with each spinning mode, and
with one thread. Every cell's sessions are opened once, warmed up, then timed in rounds: each round
runs every cell in a shuffled order, the short segment then the long one, so that whatever else the
machine does hits every cell alike; a short pause after each pass lets spinning threads settle. Per
cell: *first audio* is the median pass of the short segment ("Sure thing.", a reply's typical first
segment), *xRT* the median pass of the long one over its audio's length (throughput: below 1 is faster
than real time). The chosen setting is the int8 cell (the server ships int8) with the least short +
long median.

Spinning threads hold a core that the event loop needs: the current default and the chosen setting
then each run in a real reference server (``--onnx-*`` flags) that synthesizes the long segment back to
back over ``POST /invocations`` while a child process samples ``GET /ping`` and a WebSocket accept every
0.1 s (:class:`bench.abuse.Watch`); p95 and max of each, against PROTOCOL.md §2.2's "well under a second".
"""

from __future__ import annotations

import asyncio
import random
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.record import Result
from bench.stack import ReferenceServer
from bench.summary import describe, percentile

__all__ = [
    "NAME",
    "SMOKE",
    "TITLE",
    "Cell",
    "Config",
    "choose",
    "export_fp32",
    "fp32_path",
    "grid",
    "notes",
    "plot",
    "run",
    "tables",
]

NAME = "pass_settings"
TITLE = "1d. The model pass on this CPU: threads, spinning, split or whole graph, optimization, int8 or fp32"

SAMPLE_RATE = 24_000
VOICE = "af_heart"
FP32_FILE = "kokoro-v1.0.fp32-from-int8.onnx"
"""The fp32 export's name in the asset cache (:func:`fp32_path`); derived from the pinned int8 export."""
PING_BUDGET_MS = 1000.0
"""PROTOCOL.md §2.2: ``/ping`` answers "well under a second" however busy the server is; an accept is
held to the same bound here."""


@dataclass(frozen=True)
class Cell:
    """One way of running the pass: the weights and the session settings (PassSettings' fields)."""

    model: str = "int8"
    threads: int = 2
    spinning: str = "off"
    graph: str = "split"
    optimization: str = "all"

    @property
    def label(self) -> str:
        """``int8 2t spin=off split all``: the cell in a table row."""
        return f"{self.model} {self.threads}t spin={self.spinning} {self.graph} {self.optimization}"

    def flags(self) -> list[str]:
        """The reference server's command-line flags for this cell (int8 only: the server ships it)."""
        return [
            *("--onnx-threads", str(self.threads)),
            *("--onnx-spinning", self.spinning),
            *("--onnx-graph", self.graph),
            *("--onnx-optimization", self.optimization),
        ]


@dataclass(frozen=True)
class Config:
    """What one run measures.

    Attributes:
        rounds: timed rounds (every cell, both segments, once per round), after ``warm_up`` untimed ones.
        threads, spinnings, graphs, optimizations: the values the grid combines (:func:`grid`).
        fp32: also measure the fp32 export (exported on first use: about 10 s and 330 MB on disk).
        short_text, long_text: the two segments (one pass each).
        settle_s: pause after each pass.
        probe_s: seconds of back-to-back synthesis per server while ``/ping`` and accepts are sampled;
            0 skips the server probe.
        probe_default: probe the current default as well as the chosen cell (when they differ).
        seed: the shuffle of each round's order.
    """

    rounds: int = 9
    warm_up: int = 2
    threads: tuple[int, ...] = (1, 2)
    spinnings: tuple[str, ...] = ("off", "on", "pass")
    graphs: tuple[str, ...] = ("split", "whole")
    optimizations: tuple[str, ...] = ("basic", "extended", "all")
    fp32: bool = True
    short_text: str = "Sure thing."
    long_text: str = "Let me check that for you right away, okay?"
    settle_s: float = 0.05
    probe_s: float = 20.0
    probe_default: bool = True
    seed: int = 26


SMOKE = Config(
    rounds=1,
    warm_up=1,
    threads=(2,),
    spinnings=("off", "pass"),
    graphs=("whole",),
    optimizations=("all",),
    fp32=False,
    probe_s=3.0,
    probe_default=False,
)
"""A tiny grid in about a minute: two cells, one round, a 3 s server probe of the chosen one."""


def grid(config: Config) -> list[Cell]:
    """The cells measured (module docstring): the full threads x spinning x graph grid at the last
    optimization level on int8, the other levels at the most threads with spinning off, and fp32
    (whole graph) at the most threads with each spinning mode and at the fewest threads with it off."""
    top, most = config.optimizations[-1], max(config.threads)
    cells = [
        Cell("int8", threads, spinning, graph, top)
        for threads in config.threads
        for spinning in config.spinnings
        for graph in config.graphs
    ]
    cells += [
        Cell("int8", most, config.spinnings[0], graph, level)
        for level in config.optimizations[:-1]
        for graph in config.graphs
    ]
    if config.fp32:
        cells += [Cell("fp32", most, spinning, "whole", top) for spinning in config.spinnings]
        if min(config.threads) != most:
            cells.append(Cell("fp32", min(config.threads), config.spinnings[0], "whole", top))
    return list(dict.fromkeys(cells))


def fp32_path() -> Path:
    """Where the fp32 export is cached: the asset cache (``$KOKORO_ASSETS_DIR`` or
    ``~/.cache/kokoro-bidi-tts``), never the repository."""
    from reference_server.asset_cache import default_dir

    return default_dir() / FP32_FILE


def export_fp32(path: Path) -> Path:
    """Export Kokoro as an fp32 ONNX graph to ``path`` (inputs ``tokens``, ``style``, ``speed`` as the
    int8 export's; outputs ``audio`` and ``durations``), from the state dict rebuilt out of the pinned
    int8 export. Builds that state dict first when the cache lacks it. About 10 s on 2 cores; run in a
    child process (:func:`_ensure_fp32`) so torch's threads and memory leave with it.

    Raises:
        reference_server.assets.AssetError: the int8 export is not in the cache.
        RuntimeError: torch's exporter failed.
    """
    import torch
    from kokoro.custom_stft import CustomSTFT
    from kokoro.model import KModelForONNX

    from reference_server import assets
    from reference_server.backends.onnx_to_torch import build_kmodel

    found = assets.locate()
    if found.torch_weights is None:
        found = assets.fetch(torch=True)
    kmodel = build_kmodel(found.config, found.torch_weights)
    generator = kmodel.decoder.generator
    # torch.stft's complex output cannot be exported; kokoro's own real-valued STFT computes the same.
    generator.stft = CustomSTFT(
        filter_length=generator.stft.filter_length,
        hop_length=generator.stft.hop_length,
        win_length=generator.stft.win_length,
    )
    model = KModelForONNX(kmodel).eval()
    tokens = torch.randint(1, 100, (1, 40))
    tokens[0, 0] = tokens[0, -1] = 0
    temporary = path.with_suffix(".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        model,
        (tokens, torch.zeros(1, 256), torch.tensor([1.0])),
        str(temporary),
        input_names=["tokens", "style", "speed"],
        output_names=["audio", "durations"],
        dynamic_axes={"tokens": {1: "tokens"}, "audio": {0: "samples"}, "durations": {0: "tokens"}},
        opset_version=17,
        dynamo=False,
    )
    temporary.replace(path)
    return path


def _ensure_fp32(log: Any) -> tuple[Path | None, str]:
    """The cached fp32 export, exported now in a child process if missing: ``(path, "")``, or ``(None,
    why not)``."""
    path = fp32_path()
    if path.exists():
        return path, ""
    log(f"  exporting the fp32 graph to {path} (about 10 s) ...")
    code = f"import pathlib, bench.pass_settings as b; b.export_fp32(pathlib.Path({str(path)!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.exists():
        return None, f"the fp32 export failed: {done.stderr.strip().splitlines()[-1:] or ['no output']}"
    return path, ""


def _open(cell: Cell, int8: bytes, parts: tuple[bytes, bytes] | None, fp32: Path | None) -> tuple[Any, ...]:
    """The cell's sessions, opened with the server's own code (:func:`open_sessions`)."""
    import onnxruntime

    from reference_server.backends.onnx_backend import PassSettings, open_sessions

    settings = PassSettings(cell.threads, cell.spinning, cell.graph, cell.optimization)
    if cell.model == "int8":
        return open_sessions(int8, settings, parts=parts if cell.graph == "split" else None)
    assert fp32 is not None and cell.graph == "whole"
    options = settings.session_options()
    return (
        onnxruntime.InferenceSession(str(fp32), sess_options=options, providers=["CPUExecutionProvider"]),
    )


def _measure(config: Config, log: Any) -> tuple[list[Cell], list[dict[str, Any]], dict[str, Any], list[str]]:
    """Open, warm and time every cell (module docstring); returns the cells, the trials, what was run,
    and notes. Runs in a worker thread."""
    from reference_server import assets
    from reference_server.backends.onnx_backend import OnnxBackend, run_pass, split_model

    notes: list[str] = []
    reference = OnnxBackend(languages=["a"])
    reference.load()
    texts = {"short": config.short_text, "long": config.long_text}
    inputs = {}
    for name, text in texts.items():
        (inputs[name],) = reference.model_inputs(text, VOICE)  # one pass each: the texts are one segment
    del reference
    fp32 = None
    if config.fp32:
        fp32, why = _ensure_fp32(log)
        if why:
            notes.append(f"fp32 not measured: {why}.")
    cells = [cell for cell in grid(config) if cell.model == "int8" or fp32 is not None]
    int8 = assets.locate().onnx_model.read_bytes()
    parts = split_model(int8) if "split" in config.graphs else None
    log(f"  opening {len(cells)} cells ...")
    sessions = {cell: _open(cell, int8, parts, fp32) for cell in cells}
    estimate: dict[Cell, float] = {}
    for cell in cells:
        for _ in range(config.warm_up):
            started = time.perf_counter()
            for name in texts:
                run_pass(sessions[cell], inputs[name])
            estimate[cell] = time.perf_counter() - started
    per_round = sum(estimate.values()) + 2 * len(cells) * config.settle_s
    servers = 2 if config.probe_default else 1
    planned = config.rounds * per_round + (servers * (config.probe_s + 20) if config.probe_s else 0)
    log(
        f"  planned: {config.rounds} rounds x {per_round:.0f} s + server probe: about {planned / 60:.1f} min "
        f"({len(cells)} cells, 2 segments each)"
    )
    shuffle = random.Random(config.seed)
    trials = []
    for number in range(1, config.rounds + 1):
        order = list(cells)
        shuffle.shuffle(order)
        for cell in order:
            for name in texts:
                started = time.perf_counter()
                audio, _ = run_pass(sessions[cell], inputs[name])
                elapsed = time.perf_counter() - started
                trials.append(
                    {
                        **asdict(cell),
                        "cell": cell.label,
                        "round": number,
                        "segment": name,
                        "pass_s": round(elapsed, 4),
                        "audio_s": round(len(audio) / SAMPLE_RATE, 3),
                    }
                )
                time.sleep(config.settle_s)
        log(f"  round {number}/{config.rounds} done")
    ran = {
        "cells": [asdict(cell) for cell in cells],
        "planned_s": round(planned),
        "fp32_model": str(fp32 or ""),
        # every cell's sessions stay open for the whole run: the memory this takes (Linux: KiB)
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    return cells, trials, ran, notes


def summarize(trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cell label: medians of the short and long pass (s), the long segment's audio (s), xRT and n."""
    out: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(t["cell"] for t in trials):
        mine = [t for t in trials if t["cell"] == label]
        short = [t["pass_s"] for t in mine if t["segment"] == "short"]
        long = [t["pass_s"] for t in mine if t["segment"] == "long"]
        long_audio = statistics.median(t["audio_s"] for t in mine if t["segment"] == "long")
        first = mine[0]
        out[label] = {
            **{key: first[key] for key in ("model", "threads", "spinning", "graph", "optimization")},
            "first_audio_s": round(statistics.median(short), 4),
            "first_audio_p90_s": round(percentile(short, 90), 4),
            "long_pass_s": round(statistics.median(long), 4),
            "long_audio_s": long_audio,
            "xrt": round(statistics.median(long) / long_audio, 3),
            "n": len(long),
        }
    return out


def choose(cells: dict[str, dict[str, Any]]) -> str:
    """The chosen cell's label: the int8 cell with the least first-audio + long-pass median (the
    server ships int8; fp32 is reported beside it). Ties go to the first measured.

    Raises:
        ValueError: no int8 cell.
    """
    int8 = [label for label, c in cells.items() if c["model"] == "int8"]
    if not int8:
        raise ValueError("no int8 cell was measured")
    return min(int8, key=lambda label: cells[label]["first_audio_s"] + cells[label]["long_pass_s"])


def default_cell() -> Cell:
    """The server's current default (:data:`reference_server.settings.DEFAULT_ONNX_PASS`) as a cell."""
    from reference_server.backends.onnx_backend import usable_cpus
    from reference_server.settings import DEFAULT_ONNX_PASS as default

    graph = "split" if default.split else "whole"
    return Cell("int8", default.threads or usable_cpus(), default.spinning, graph, default.optimization)


def settings_line(cell: dict[str, Any], cpus: int | None = None) -> str:
    """The line of reference_server/settings.py that makes ``cell`` the server's default; its threads
    become ``None`` (every usable CPU, whatever the machine) when they are all of this machine's ``cpus``
    (default: :func:`~reference_server.backends.onnx_backend.usable_cpus`)."""
    from reference_server.backends.onnx_backend import usable_cpus

    threads = None if cell["threads"] == (cpus or usable_cpus()) else cell["threads"]
    return (
        f'DEFAULT_ONNX_PASS = PassSettings(threads={threads}, spinning="{cell["spinning"]}", '
        f'graph="{cell["graph"]}", optimization="{cell["optimization"]}")'
    )


async def _probe(cell: Cell, config: Config, log: Any) -> dict[str, Any]:
    """``/ping`` and WebSocket accept latency of a real server running ``cell`` while it synthesizes the
    long segment back to back (module docstring)."""
    import httpx

    from bench.abuse import Watch
    from reference_server.ws import PATH

    server = ReferenceServer("onnx", extra_args=cell.flags())
    await server.start()
    try:
        assert server.pid is not None
        watch = Watch(server.pid, server.port, PATH)
        passes = 0
        async with httpx.AsyncClient(timeout=60) as client:
            body = {"text": config.long_text, "voice": VOICE, "format": "pcm", "stream": False}
            await client.post(f"{server.url}/invocations", json=body)  # warm the route
            watch.start()
            until = time.monotonic() + config.probe_s
            while time.monotonic() < until:
                response = await client.post(f"{server.url}/invocations", json=body)
                response.raise_for_status()
                passes += 1
            await watch.stop()
    finally:
        await server.stop()
    figures = {
        "cell": cell.label,
        "passes": passes,
        "ping_ms": describe(watch.pings),
        "accept_ms": describe(watch.accepts),
        "ping_max_ms": round(max(watch.pings, default=0.0), 1),
        "accept_max_ms": round(max(watch.accepts, default=0.0), 1),
    }
    log(
        f"  server {cell.label}: /ping p95 {figures['ping_ms']['p95']} ms, accept p95 "
        f"{figures['accept_ms']['p95']} ms over {passes} passes"
    )
    return figures


async def run(context: Any, config: Config = Config()) -> Result:
    """Time every cell, choose, then probe the server's event loop with the default and the chosen one."""
    result = Result(NAME, TITLE, config=asdict(config))
    cells, trials, ran, notes = await asyncio.to_thread(_measure, config, context.log)
    result.trials, result.notes = trials, notes
    result.config.update(ran)
    summary = summarize(trials)
    chosen = choose(summary)
    default = default_cell()
    figures: dict[str, Any] = {"cells": summary, "chosen": chosen, "default": default.label}
    figures["settings_line"] = settings_line(summary[chosen])
    probes = []
    if config.probe_s > 0:
        chosen_cell = next(cell for cell in cells if cell.label == chosen)
        for cell in dict.fromkeys([default, chosen_cell] if config.probe_default else [chosen_cell]):
            probes.append(await _probe(cell, config, context.log))
    figures["server"] = probes
    result.figures = figures
    return result


def _s(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The cells by first audio + long pass (the chosen one marked), then the server probes."""
    figures = result["figures"]
    cells = figures["cells"]
    best = min(c["first_audio_s"] for c in cells.values())
    headers = ["cell", "first audio (short pass), s", "vs best", "long pass, s", "xRT", "n"]
    rows = []
    for label in sorted(cells, key=lambda name: cells[name]["first_audio_s"] + cells[name]["long_pass_s"]):
        c = cells[label]
        mark = " **(chosen)**" if label == figures["chosen"] else ""
        mark += " (current default)" if label == figures["default"] else ""
        rows.append(
            [
                label + mark,
                _s(c["first_audio_s"]),
                f"+{100 * (c['first_audio_s'] / best - 1):.0f} %",
                _s(c["long_pass_s"]),
                f"{c['xrt']:.2f}",
                str(c["n"]),
            ]
        )
    out = [(headers, rows)]
    if figures.get("server"):
        probe_headers = [
            "server running",
            "passes",
            "/ping p50 / p95 / max, ms",
            "accept p50 / p95 / max, ms",
        ]
        probe_rows = [
            [
                p["cell"],
                str(p["passes"]),
                f"{p['ping_ms']['median']} / {p['ping_ms']['p95']} / {p['ping_max_ms']}",
                f"{p['accept_ms']['median']} / {p['accept_ms']['p95']} / {p['accept_max_ms']}",
            ]
            for p in figures["server"]
        ]
        out.append((probe_headers, probe_rows))
    return out


def notes(result: dict[str, Any]) -> list[str]:
    """The chosen setting and why, the budget check, and how to read the cells."""
    figures = result["figures"]
    cells, chosen, default = figures["cells"], figures["chosen"], figures["default"]
    c = cells[chosen]
    lines = [
        f"Chosen: `{chosen}`: the int8 cell with the least first audio + long pass "
        f"({c['first_audio_s']:.3f} s + {c['long_pass_s']:.3f} s, xRT {c['xrt']:.2f}). The server's default "
        f"when this ran: `{default}`"
        + (
            f" ({cells[default]['first_audio_s']:.3f} s + {cells[default]['long_pass_s']:.3f} s)."
            if default in cells
            else " (not in this grid)."
        )
        + f" To make the chosen cell the default, reference_server/settings.py's line becomes "
        f"`{figures['settings_line']}`.",
        "Cells: `int8`/`fp32` weights, intra-op threads, spinning (`off`: idle threads sleep; `on`: they "
        "spin before sleeping; `pass`: they spin only during a pass), `split`/`whole` graph, optimization "
        "level. "
        "First audio is the short segment's pass, xRT the long segment's pass over its audio (below 1: "
        "faster than real time). Medians over rounds in which every cell ran once, in a shuffled order.",
        "fp32 is exported here from the weights rebuilt out of the int8 export (float kernels, the same "
        "weights up to int8 rounding), not the official fp32 checkpoint; its durations may differ from "
        "int8's by a frame here and there, so its long segment's audio length can differ slightly.",
        f"Measured with onnxruntime {result['environment']['packages'].get('onnxruntime')}. One process "
        "loads one onnxruntime, so versions cannot alternate within a run; to compare another that pip can "
        "install, put it in front of the venv's and run this benchmark again into another folder: "
        "`pip install --no-deps --target /tmp/ort-X onnxruntime==X`, then `PYTHONPATH=/tmp/ort-X:$PWD python "
        "-m bench run pass_settings --results /tmp/ort-X-results` (the server it starts inherits it; the "
        "result records the version).",
        "With the `split` graph each of the two sessions has its own intra-op threads: with spinning `on` "
        "the text side's threads may still spin while the decoder runs; `pass` stops them after each run.",
        "A `whole` graph gives up what the split one enables: `--lead-in early` and the durations before "
        "the decoder runs (`OnnxBackend.align`).",
    ]
    for probe in figures.get("server", []):
        worst = max(probe["ping_ms"]["p95"] or 0, probe["accept_ms"]["p95"] or 0)
        verdict = "within" if worst < PING_BUDGET_MS else "OVER"
        lines.append(
            f"Event loop with `{probe['cell']}`: /ping p95 {probe['ping_ms']['p95']} ms, WebSocket accept "
            f"p95 {probe['accept_ms']['p95']} ms while synthesizing back to back: {verdict} the "
            f"{PING_BUDGET_MS:.0f} ms bound of PROTOCOL.md §2.2."
        )
    return lines


def plot(result: dict[str, Any], path: Path) -> None:
    """Horizontal bars: each cell's first audio and long pass, best first."""
    from bench.plots import labelled_bars

    cells = result["figures"]["cells"]
    labels = sorted(cells, key=lambda name: cells[name]["first_audio_s"] + cells[name]["long_pass_s"])
    labelled_bars(
        path,
        "seconds: first audio (short pass) + long pass, median",
        labels,
        [cells[name]["first_audio_s"] + cells[name]["long_pass_s"] for name in labels],
        [None] * len(labels),
        title="Kokoro's pass per setting (lower is faster)",
    )
