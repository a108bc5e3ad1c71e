"""Benchmark 9: Kokoro-82M in PyTorch on a CUDA GPU: single-stream xRT, first audio, throughput.

Run by ``bench/gpu.sh`` on a GPU machine that has PyTorch but not this project's environment, and whose
working-tree budget (64 MiB) cannot carry the model's 92 MB ONNX plus the server's G2P stack (espeak-ng,
spaCy for misaki). So the work is split:

* ``prepare`` (here, with the project's venv): the text is cut into segments and phonemized exactly
  as the server does it (:class:`reference_server.backends.g2p.Phonemizer`), the voice pack
  is saved as ``.npy``, and the verified int8 ONNX is xz-compressed (about 58 MiB), all under
  ``.assets/gpu-bench/``; two pure-Python wheels (``kokoro``, ``loguru``) go to ``.whl/``;
* ``measure`` (there): the torch backend's weights are rebuilt from the ONNX with the project's own
  :mod:`reference_server.backends.onnx_to_torch`, and every segment is run the way
  :class:`reference_server.backends.torch_backend.TorchBackend` runs it
  (``KModel(phonemes, pack[len(phonemes) - 1], speed)`` under ``torch.inference_mode``, audio copied
  back to the host). Model-level: no WebSocket, no G2P (done ahead), no word timings;
* ``save`` (here): the JSON that came back goes to ``bench/results/gpu.json``, with its chart and
  RESULTS.md.

Figures: first audio (the reply's first segment, request to samples on the host), single-stream xRT
(the whole reply, segment after segment), and throughput with 1 to 16 threads each synthesizing
segments back to back, as ``--synthesis-workers N`` would, in hours of audio per hour (the
third-party figure for Kokoro-FastAPI on one H100 is 55–78 h/h).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import lzma
import shutil
import statistics
import sys
import tempfile
import threading
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import seeds
from bench.record import RESULTS_DIR, Result, save_result
from bench.summary import describe

__all__ = ["NAME", "PAYLOAD_DIR", "TITLE", "main", "measure", "notes", "plot", "prepare", "tables"]

NAME = "gpu"
TITLE = "9. GPU: the torch backend on CUDA"

REPO = Path(__file__).resolve().parent.parent
PAYLOAD_DIR = REPO / ".assets" / "gpu-bench"
"""What ``prepare`` writes and the GPU run reads (``.assets/`` is git-ignored; carried by the device tool)."""
VOICE = "af_heart"
SAMPLE_RATE = 24_000
LEVELS = (1, 2, 4, 8, 16)


# --- prepare (here) ----------------------------------------------------------------------------------


def prepare(payload: Path = PAYLOAD_DIR) -> Path:
    """Write the GPU run's inputs to ``payload``: phonemized texts, the voice pack, the config and the
    xz-compressed ONNX (minutes of CPU: xz preset 9, extreme). Returns ``payload``.

    Raises:
        reference_server.assets.AssetError: the verified assets are not in the cache (``make assets``).
    """
    import numpy as np

    from bench.texts import REPLY, THROUGHPUT_TEXT
    from reference_server.assets import CONFIG_PATH, locate
    from reference_server.backends.g2p import Phonemizer

    found = locate()
    payload.mkdir(parents=True, exist_ok=True)
    config = json.loads(CONFIG_PATH.read_text(encoding="utf-8"))
    phonemizer = Phonemizer(config["vocab"], VOICE[0])
    texts = {"reply": REPLY, "throughput": THROUGHPUT_TEXT}
    segments = {
        key: [{"text": s.text, "phonemes": s.phonemes} for s in phonemizer.segments(text, VOICE)]
        for key, text in texts.items()
    }
    (payload / "segments.json").write_text(
        json.dumps({"voice": VOICE, "texts": texts, "segments": segments}, indent=1)
    )
    shutil.copyfile(CONFIG_PATH, payload / "config.json")
    with np.load(found.voices) as voices:
        np.save(payload / f"{VOICE}.npy", np.array(voices[VOICE], dtype=np.float32))
    target = payload / "kokoro-v1.0.int8.onnx.xz"
    if not target.exists() or target.stat().st_mtime < found.onnx_model.stat().st_mtime:
        temporary = target.with_suffix(".xz.tmp")
        with (
            open(found.onnx_model, "rb") as source,
            lzma.open(temporary, "wb", preset=9 | lzma.PRESET_EXTREME) as out,
        ):
            shutil.copyfileobj(source, out, 1 << 20)
        temporary.replace(target)
    return payload


# --- measure (on the GPU machine) --------------------------------------------------------------------


def _load_onnx_to_torch() -> types.ModuleType:
    """:mod:`reference_server.backends.onnx_to_torch`, loaded from its file.

    Importing it as a package member would run ``reference_server.backends``' ``__init__``, which
    loads the espeak-ng G2P stack the GPU machine does not have and this run does not use.
    """
    path = REPO / "reference_server" / "backends" / "onnx_to_torch.py"
    spec = importlib.util.spec_from_file_location("onnx_to_torch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kokoro_model_only() -> None:
    """Make ``import kokoro.model`` work where ``misaki`` is missing.

    ``kokoro/__init__.py`` imports ``KPipeline``, whose G2P imports misaki and spaCy; only ``KModel``
    is needed here. When misaki is absent, an empty ``kokoro`` package module (same search path) is
    registered so that ``kokoro.model`` and its submodules load without the package's ``__init__``.
    """
    if "kokoro" in sys.modules:
        return
    try:
        if importlib.util.find_spec("misaki") is not None:
            return
    except ImportError:  # a finder that refuses the name: misaki cannot be imported
        pass
    spec = importlib.util.find_spec("kokoro")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("the kokoro package is not installed (bench/gpu.sh installs it from .whl/)")
    package = types.ModuleType("kokoro")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["kokoro"] = package


def _synthesizer(payload: Path, device: str) -> tuple[Any, Any]:
    """The model on ``device`` and a function ``speak(phonemes) -> float32 numpy audio``."""
    import numpy as np
    import torch

    _kokoro_model_only()
    onnx_to_torch = _load_onnx_to_torch()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / "kokoro.onnx"
        with lzma.open(payload / "kokoro-v1.0.int8.onnx.xz", "rb") as source, open(onnx_path, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        state = onnx_to_torch.rebuild_state_dict(onnx_path, payload / "config.json")
        weights = Path(tmp) / "kokoro.from-onnx.pth"
        torch.save(state, weights)
        model = onnx_to_torch.build_kmodel(payload / "config.json", weights).to(device).eval()
    pack = torch.from_numpy(np.load(payload / f"{VOICE}.npy")).to(device)

    def speak(phonemes: str) -> Any:
        # As TorchBackend._speak: the style vector for the token count, audio back on the host.
        with torch.inference_mode():
            output = model(phonemes, pack[len(phonemes) - 1], 1.0, return_output=True)
        return output.audio.float().cpu().numpy()

    return model, speak


def _throughput(speak: Any, phonemes: Sequence[str], threads: int, duration_s: float) -> dict[str, Any]:
    """``threads`` workers synthesize ``phonemes`` round-robin for ``duration_s``; audio per wall time."""
    lock = threading.Lock()
    audio_samples = 0
    latencies: list[float] = []
    stop_at = time.perf_counter() + duration_s

    def worker(offset: int) -> None:
        nonlocal audio_samples
        index = offset
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            audio = speak(phonemes[index % len(phonemes)])
            elapsed = time.perf_counter() - started
            with lock:
                audio_samples += len(audio)
                latencies.append(elapsed * 1000.0)
            index += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    wall_s = time.perf_counter() - started
    audio_s = audio_samples / SAMPLE_RATE
    return {
        "threads": threads,
        "wall_s": round(wall_s, 3),
        "audio_s": round(audio_s, 3),
        "xrt": round(audio_s / wall_s, 2),
        "hours_per_hour": round(audio_s / wall_s, 2),
        "segment_ms": describe(latencies),
    }


def measure(
    payload: Path = PAYLOAD_DIR,
    *,
    device: str | None = None,
    trials: int = 10,
    levels: Sequence[int] = LEVELS,
    duration_s: float = 10.0,
) -> Result:
    """Run the GPU benchmark (see the module docstring) and return its result.

    Args:
        payload: what :func:`prepare` wrote.
        device: torch device; ``None``: CUDA (required unless given).
        trials: first-audio and single-stream trials (after warm-up).
        levels: thread counts for the throughput runs.
        duration_s: how long each throughput level runs.

    Raises:
        RuntimeError: no CUDA device and none given.
    """
    import torch

    if device is None:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: bench/gpu.sh is for a GPU machine")
        device = "cuda"
    inputs = json.loads((payload / "segments.json").read_text(encoding="utf-8"))
    reply = [s["phonemes"] for s in inputs["segments"]["reply"]]
    throughput_phonemes = [s["phonemes"] for s in inputs["segments"]["throughput"]] + reply
    loading = time.perf_counter()
    _, speak = _synthesizer(payload, device)
    load_s = time.perf_counter() - loading
    for phonemes in reply * 3:  # warm-up: kernels, allocator, cuDNN autotuning
        speak(phonemes)
    result = Result(NAME, TITLE)
    firsts, xrts = [], []
    for number in range(trials):
        started = time.perf_counter()
        audio = [speak(reply[0])]
        first_ms = (time.perf_counter() - started) * 1000.0
        audio += [speak(phonemes) for phonemes in reply[1:]]
        wall_s = time.perf_counter() - started
        audio_s = sum(len(a) for a in audio) / SAMPLE_RATE
        firsts.append(first_ms)
        xrts.append(audio_s / wall_s)
        result.trials.append(
            {
                "kind": "single",
                "trial": number + 1,
                "first_audio_ms": round(first_ms, 2),
                "audio_s": round(audio_s, 3),
                "wall_s": round(wall_s, 4),
                "xrt": round(audio_s / wall_s, 2),
            }
        )
    levels_out = []
    for threads in levels:
        level = _throughput(speak, throughput_phonemes, threads, duration_s)
        levels_out.append(level)
        result.trials.append({"kind": "throughput", **level})
        print(f"  {threads} thread(s): {level['hours_per_hour']} h/h", flush=True)
    properties = torch.cuda.get_device_properties(0) if device.startswith("cuda") else None
    result.config = {
        "device": device,
        "device_name": properties.name if properties is not None else device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "voice": inputs["voice"],
        "reply_segments": [s["text"] for s in inputs["segments"]["reply"]],
        "trials": trials,
        "levels": list(levels),
        "duration_s": duration_s,
        "model_load_s": round(load_s, 1),
    }
    result.figures = {
        "first_audio_ms": describe(firsts, digits=2),
        "single_stream_xrt": round(statistics.median(xrts), 1),
        "levels": levels_out,
        "best_hours_per_hour": max(level["hours_per_hour"] for level in levels_out),
    }
    result.seed = {"hours_per_hour": list(seeds.GPU_HOURS_PER_HOUR), "hardware": "one H100 (Kokoro-FastAPI)"}
    return result


# --- report --------------------------------------------------------------------------------------------


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Single stream, then one row per thread count, beside the third-party figure."""
    figures, config = result["figures"], result["config"]
    first = figures["first_audio_ms"]
    seed = result["seed"]["hours_per_hour"]
    head = ["figure", f"ours ({config['device_name']}, torch {config['torch']})", "seed"]
    rows = [
        ["first audio (first segment, median)", f"{first['median']:.1f} ms (n = {first['n']})", "–"],
        ["single-stream xRT (whole reply, median)", f"{figures['single_stream_xrt']:.1f}×", "–"],
    ]
    for level in figures["levels"]:
        rows.append(
            [
                f"throughput, {level['threads']} thread(s)",
                f"{level['hours_per_hour']:.1f} h/h (segment p50 {level['segment_ms']['median']:.0f} ms, "
                f"p95 {level['segment_ms']['p95']:.0f} ms)",
                f"{seed[0]:g}–{seed[1]:g} h/h under concurrency" if level is figures["levels"][-1] else "",
            ]
        )
    return [(head, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """What was measured, and how it differs from the server."""
    config = result["config"]
    return [
        "Model level: KModel on the GPU, called per segment as the torch backend calls it, with weights "
        "rebuilt from the int8 ONNX; G2P was done ahead on the CPU; no WebSocket, no word timings.",
        f"Throughput: 1 to {max(config['levels'])} threads synthesizing back to back for "
        f"{config['duration_s']:g} s each, on one CUDA stream (as the server's synthesis workers would).",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Hours of audio per hour against threads, with the third-party band's ends as reference lines."""
    from bench.plots import line_chart

    levels = result["figures"]["levels"]
    threads = [level["threads"] for level in levels]
    seed = result["seed"]["hours_per_hour"]
    line_chart(
        path,
        "threads synthesizing at once",
        [
            ("hours of audio per hour", {"ours": (threads, [level["hours_per_hour"] for level in levels])}),
            (
                "segment latency (ms)",
                {
                    "p50": (threads, [level["segment_ms"]["median"] for level in levels]),
                    "p95": (threads, [level["segment_ms"]["p95"] for level in levels]),
                },
            ),
        ],
        title=f"{result['config']['device_name']}; third party: {seed[0]:g}–{seed[1]:g} h/h on one H100",
        hline=(seed[0], f"seed low end ({seed[0]:g} h/h)"),
    )


def save(path: Path, results_dir: Path = RESULTS_DIR) -> Path:
    """Store a ``gpu.json`` that came back from the GPU machine, draw its chart, rewrite RESULTS.md."""
    from bench.report import write_report

    data = json.loads(path.read_text(encoding="utf-8"))
    result = Result(**data)
    stored = save_result(result, results_dir)
    plot(data, results_dir / f"{NAME}.png")
    write_report(results_dir)
    return stored


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.gpu prepare | measure --out FILE | save FILE`` (``bench/gpu.sh`` calls these)."""
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="here: write the GPU run's inputs")
    p.add_argument("--payload", type=Path, default=PAYLOAD_DIR)
    m = commands.add_parser("measure", help="on the GPU machine: run and write the result JSON")
    m.add_argument("--payload", type=Path, default=PAYLOAD_DIR)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--device", default=None)
    m.add_argument("--duration", type=float, default=10.0, help="seconds per throughput level")
    s = commands.add_parser("save", help="here: store a gpu.json that came back")
    s.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(f"prepared {prepare(args.payload)}")
    elif args.command == "measure":
        started = time.perf_counter()
        result = measure(args.payload, device=args.device, duration_s=args.duration)
        result.wall_s = round(time.perf_counter() - started, 1)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(result.to_json(), encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(f"saved {save(args.path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
