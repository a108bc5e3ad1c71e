"""The ``onnx`` backend: the official int8 ONNX export on onnxruntime through ``kokoro-onnx`` (CPU default).

Each segment is one ``kokoro_onnx.Kokoro.create(phonemes, is_phonemes=True, trim=False)`` call: the
library picks the voice's style vector for the token count and runs the session; ``trim=False`` keeps
the model's own lead-in and trailing silence, which are the pauses between segments. This export has
no duration output, so there are no word timings (``Segment.words`` is ``None``).

Threads: ``InferenceSession.run`` is thread-safe and ``Kokoro.create`` keeps no per-call state on the
object, so ``synthesize`` may run on several threads at once; G2P is serialized
(:mod:`reference_server.backends.phonemes`). The session's intra-op pool is ``threads`` wide (default:
the CPUs this process may use, 2 on the CI machine); concurrent calls share it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from protocol.messages import Word
from reference_server import assets as assets_module
from reference_server.backends.base import ENGLISH_VOICES, Backend
from reference_server.backends.phonemes import PhonemeSegment

__all__ = ["OnnxBackend", "usable_cpus"]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class OnnxBackend(Backend):
    """Kokoro-82M int8 on onnxruntime's CPU provider.

    Args:
        model_dir: asset directory; ``None`` uses :func:`reference_server.assets.locate` (SageMaker
            model directory, then the cache).
        threads: onnxruntime intra-op threads; ``None`` → :func:`usable_cpus`.
    """

    name = "onnx"

    def __init__(self, model_dir: Path | str | None = None, *, threads: int | None = None) -> None:
        super().__init__()
        self.model_dir = model_dir
        self.threads = threads if threads is not None else usable_cpus()
        self._kokoro = None
        self._packs: dict[str, np.ndarray] = {}

    def load(self) -> None:
        import onnxruntime
        from kokoro_onnx import Kokoro

        found = assets_module.locate(self.model_dir)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1  # the graph is one chain; parallel branches would only compete
        session = onnxruntime.InferenceSession(
            str(found.onnx_model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        vocab_config = json.loads(found.config.read_text(encoding="utf-8"))
        kokoro = Kokoro.from_session(session, str(found.voices), vocab_config=vocab_config)
        # The voices file is an npz read lazily through one zip handle, which threads must not share:
        # read the voices this backend speaks once, here.
        missing = ENGLISH_VOICES - set(kokoro.voices.keys())
        if missing:
            raise assets_module.AssetError(f"{found.voices} lacks the voices {sorted(missing)}")
        self._packs = {voice: np.array(kokoro.voices[voice], dtype=np.float32) for voice in ENGLISH_VOICES}
        self._kokoro = kokoro
        self._load_phonemizer(found.config)

    def _speak(
        self, segment: PhonemeSegment, voice: str, speed: float
    ) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        assert self._kokoro is not None  # synthesize() checks that load() ran
        audio, _ = self._kokoro.create(
            segment.phonemes, self._packs[voice], speed=speed, is_phonemes=True, trim=False
        )
        return np.asarray(audio, dtype=np.float32), None
