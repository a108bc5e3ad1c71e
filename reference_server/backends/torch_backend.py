"""The ``torch`` backend: ``kokoro.KModel`` (kokoro 0.9.4) in PyTorch, on CUDA when there is one.

Weights: the official fp32 ``kokoro-v1_0.pth`` when ``fetch --hub`` could get it, else the state dict
rebuilt from the verified int8 ONNX (:mod:`reference_server.backends.onnx_to_torch`). The model is
built with ``KModel(config=<file>, model=<file>)``, which never touches the hub, and voices are given
as tensors, never as names.

G2P is the same as the ``onnx`` backend's (:mod:`reference_server.backends.g2p`), in every language,
so both backends give the model the same phonemes. ``kokoro.KPipeline`` is not used: its English G2P
needs the spaCy pipeline ``en_core_web_sm``, which no package registry ships verifiably, and its other
languages run the same misaki G2P that :mod:`~reference_server.backends.g2p` runs. ``KModel`` is called
directly per segment, the way ``KPipeline.infer`` calls it (style vector ``pack[len(phonemes) - 1]``),
and returns the predicted durations the word timings come from
(:func:`reference_server.backends.base.word_timings`, shared with the ``onnx`` backend).

Threads: forward passes of one shared model in eval mode under ``torch.inference_mode`` change no
module state, so ``synthesize`` may run on several threads at once. On the CPU ``threads`` sets
torch's intra-op pool, which is process-wide (default: the CPUs this process may use).

Abort (issue #26): every module of the model has a forward pre-hook that checks the calling thread's
:class:`~reference_server.backends.base.AbortSignal` (:func:`~reference_server.backends.base.aborting`), so
a cancelled request's pass stops before the next layer runs (the decoder's convolutions and resblocks,
the text side's ALBERT layers) with :class:`~reference_server.backends.base.PassAborted`. A hook that finds
no signal set does nothing: the audio of a pass that runs to its end is the same to the bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reference_server import assets as assets_module
from reference_server.backends.base import Backend, current_abort
from reference_server.backends.g2p import PhonemeSegment
from reference_server.backends.onnx_backend import usable_cpus

__all__ = ["TorchBackend"]


def _abort_between_layers(module: Any, args: Any) -> None:
    """Forward pre-hook: stop the pass before this layer if the thread's request was aborted."""
    signal = current_abort()
    if signal is not None:
        signal.check()


class TorchBackend(Backend):
    """Kokoro-82M in PyTorch.

    Args:
        model_dir: asset directory; ``None`` uses :func:`reference_server.assets.locate`.
        device: ``"cuda"``, ``"cpu"`` (or any torch device string); ``None`` → CUDA if available.
        threads: torch CPU threads (process-wide); ``None`` → :func:`usable_cpus`. Ignored on CUDA.
        languages: the language codes to serve; ``None``: every language whose G2P is installed.
    """

    name = "torch"

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        device: str | None = None,
        threads: int | None = None,
        languages: Iterable[str] | None = None,
    ) -> None:
        super().__init__(languages)
        self.model_dir = model_dir
        self.device = device
        self.threads = threads
        self._model = None

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
        for module in model.modules():
            module.register_forward_pre_hook(_abort_between_layers)
        self._model = model.to(device)
        self.device = device
        with np.load(found.voices) as voices:
            missing = self.voices - set(voices.files)
            if missing:
                raise assets_module.AssetError(f"{found.voices} lacks the voices {sorted(missing)}")
            self._packs = {
                voice: torch.from_numpy(np.array(voices[voice])).to(device) for voice in self.voices
            }
        self._load_phonemizer(found.config)

    def _speak(self, segment: PhonemeSegment, pack: Any, speed: float) -> tuple[np.ndarray, Sequence[int]]:
        import torch

        assert self._model is not None  # synthesize() checks that load() ran
        phonemes = segment.phonemes
        with torch.inference_mode():
            output = self._model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
        audio = output.audio.float().cpu().numpy()
        return audio, output.pred_dur.cpu().reshape(-1).tolist()
