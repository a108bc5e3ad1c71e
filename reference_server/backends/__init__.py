"""Kokoro-82M synthesis backends for the reference server.

``onnx`` (:class:`~reference_server.backends.onnx_backend.OnnxBackend`): the official int8 ONNX on
onnxruntime, the default on CPU. ``torch`` (:class:`~reference_server.backends.torch_backend.TorchBackend`):
``kokoro.KModel`` in PyTorch, the default where CUDA is available. ``tone``
(:class:`~reference_server.backends.tone.ToneBackend`): no model, a tone per word, for running the
conformance suite against the shipped code in a minute. Both serve the 54 voices of the nine
languages (PROTOCOL.md §14.1) with word timings, read the assets of :mod:`reference_server.assets` and
share the text cutting and per-language G2P of :mod:`reference_server.backends.g2p`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reference_server.backends.base import (
    ENGLISH_VOICES,
    SAMPLE_RATE,
    Backend,
    BackendNotLoadedError,
    Segment,
    UnknownVoiceError,
)

if TYPE_CHECKING:
    from reference_server.backends.onnx_backend import PassSettings

__all__ = [
    "BACKEND_NAMES",
    "ENGLISH_VOICES",
    "SAMPLE_RATE",
    "Backend",
    "BackendNotLoadedError",
    "Segment",
    "UnknownVoiceError",
    "create_backend",
    "default_backend_name",
]

BACKEND_NAMES = ("onnx", "torch", "tone")


def default_backend_name() -> str:
    """``"torch"`` when torch is installed and sees a CUDA device, else ``"onnx"``."""
    try:
        import torch
    except ImportError:
        return "onnx"
    return "torch" if torch.cuda.is_available() else "onnx"


def create_backend(
    name: str | None = None,
    *,
    model_dir: Path | str | None = None,
    onnx: PassSettings | None = None,
    **options: object,
) -> Backend:
    """A backend, not yet loaded (call ``load()`` then ``warm_up()`` off the event loop).

    Args:
        name: ``"onnx"``, ``"torch"``, ``"tone"`` (:mod:`reference_server.backends.tone`: the shipped
            server without a model) or ``None`` (:func:`default_backend_name`).
        model_dir: asset directory; ``None`` lets :func:`reference_server.assets.locate` choose.
        onnx: the onnx backend's session options (the server's ``--onnx-*`` settings); ignored by the
            other backends; ``None``: the defaults of
            :class:`~reference_server.backends.onnx_backend.PassSettings`.
        options: backend keyword arguments (``threads``; ``device`` for torch).

    Raises:
        ValueError: unknown ``name``.
    """
    name = default_backend_name() if name is None else name
    if name == "onnx":
        from reference_server.backends.onnx_backend import OnnxBackend

        return OnnxBackend(model_dir, settings=onnx, **options)  # type: ignore[arg-type]
    if name == "torch":
        from reference_server.backends.torch_backend import TorchBackend

        return TorchBackend(model_dir, **options)  # type: ignore[arg-type]
    if name == "tone":
        from reference_server.backends.tone import ToneBackend

        return ToneBackend(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")
