"""The ``onnx`` backend: the official int8 ONNX export of Kokoro-82M on onnxruntime (the CPU default).

The session is run directly (no wrapper library): input ``tokens`` int64 ``[1, T + 2]`` (the phoneme
ids between two 0 pads), ``style`` float32 ``[1, 256]`` (row ``T - 1`` of the voice pack, as
``kokoro.KPipeline`` picks it) and ``speed`` float32 ``[1]``; output ``audio`` float32, 24 kHz.

**Word timings.** The export's only output is the audio, but the graph computes each token's duration
(``/encoder/Cast_output_0``: the predicted frames per token, rounded and clipped to at least 1, as int64
``[1, T + 2]``, after dividing by ``speed``) before it expands the text features to frames. The model
is loaded with that tensor declared as a second graph output (:func:`with_durations_output`): the
bytes on disk stay the verified ones, and the audio is unchanged (the output only exposes a value the
graph computes anyway). ``600 * sum(durations)`` is the audio's length in samples.

**Two halves.** When the ``onnx`` package is installed, the graph is split at load time
(:func:`split_model`) into its text side (``tokens``, ``style``, ``speed`` → the aligned features and
the durations) and its decoder (aligned features, ``style`` → ``audio``), each its own session, so that
:meth:`OnnxBackend.align` can return the durations (and so the lead-in, word timings and length) before
the decoder, 95 % of the pass, has run. The two runs give the same samples as the whole graph (the
decoder's inputs are the same tensors; checked in the tests) and take the same time in all. Without
``onnx`` the whole graph is one session and :attr:`OnnxBackend.aligns` is false.

Decoding the aligned features in windows (a short first window, then the rest) does NOT give the
one-pass audio: the decoder normalizes each AdaIN layer over the whole time axis (instance norm) and
quantizes every activation with one scale for the whole tensor (``DynamicQuantizeLinear``), so any window
changes every sample: cutting 10 frames of trailing silence leaves the kept audio at 9 dB SNR against the
one-pass audio, decoding from frame 16 on with 24 frames of context at 10.6 dB (measured on "Let me check
that for you right away, okay?", af_heart). Only the lead-in silence can go out before the decoder runs.

Threads: ``InferenceSession.run`` is thread-safe and this backend keeps no per-call state, so
``synthesize`` may run on several threads at once; G2P is serialized (:mod:`reference_server.backends.g2p`).
The session's intra-op pool is ``threads`` wide (default: the CPUs this process may use, 2 on the CI
machine); concurrent calls share it. How the pool waits (spinning or sleeping), the split or whole graph and
the graph optimization level are :class:`PassSettings` (the server's ``--onnx-*`` settings,
:mod:`reference_server.settings`); ``bench/pass_settings.py`` measures them. By default the threads spin
during a pass and sleep as soon as it returns (``pass``: bench §1d's fastest, 6 % sooner first audio than
sleeping), so that between two model calls they leave the cores to the server's event loop and its
neighbours.

Abort (issue #26): a run made under :func:`reference_server.backends.base.aborting` carries its own
``RunOptions``; when the request is cancelled the event loop sets their ``terminate`` flag and the run
stops at its next node (:meth:`OnnxBackend._run`), so the model is free for the next request at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from reference_server import assets as assets_module
from reference_server.backends.base import Alignment, Backend, Segment, current_abort
from reference_server.backends.g2p import PhonemeSegment

__all__ = [
    "DECODER_INPUTS",
    "DURATIONS_TENSOR",
    "GRAPHS",
    "OPTIMIZATIONS",
    "SPINNINGS",
    "OnnxBackend",
    "PassSettings",
    "open_sessions",
    "run_pass",
    "split_model",
    "usable_cpus",
    "with_durations_output",
]

DURATIONS_TENSOR = "/encoder/Cast_output_0"
"""The graph's per-token durations (int64 frames) in ``kokoro-v1.0.int8.onnx``; found by reading the graph:
``Round(ReduceSum(Sigmoid(duration_proj)) / speed)`` → ``Clip(min=1)`` → this ``Cast``, which feeds the
frame expansion (``CumSum``, ``Range``)."""

DECODER_INPUTS = ("/encoder/MatMul_1_output_0", "/encoder/Reshape_output_0", "/encoder/Reshape_1_output_0")
"""The values the decoder reads from the text side in ``kokoro-v1.0.int8.onnx``, besides ``style``: the
aligned text features float32 ``[1, 512, F]`` (``F = sum(durations)`` frames of 600 samples), the
predicted F0 curve and the noise (energy) curve, float32 ``[1, 2F]`` each."""

_INT64 = 7  # onnx TensorProto.INT64

SPINNINGS = ("off", "on", "pass")
"""How the intra-op threads wait for work (:attr:`PassSettings.spinning`): ``off``: they sleep
(``session.intra_op.allow_spinning`` 0); ``on``: they spin (busy-wait) before sleeping, during a pass and
after it; ``pass``: they spin during a pass and stop as soon as it returns (``session.force_spinning_stop``
1), so that nothing spins between two passes."""
GRAPHS = ("auto", "split", "whole")
"""How the graph runs (:attr:`PassSettings.graph`): ``split``: text side and decoder as two sessions
(:func:`split_model`, needs ``onnx``); ``whole``: one session; ``auto``: split when ``onnx`` is installed."""
OPTIMIZATIONS = ("basic", "extended", "all")
"""onnxruntime's graph optimization levels (``GraphOptimizationLevel.ORT_ENABLE_*``); ``all`` is
onnxruntime's own default."""


@dataclass(frozen=True)
class PassSettings:
    """How onnxruntime runs Kokoro's pass: the session options the server's ``--onnx-*`` settings choose.

    Every value leaves the audio as it is up to onnxruntime's float rounding (the same kernels on the
    same inputs; the optimization level may fuse nodes), and changes only how fast a pass runs and what
    the other threads of the host get meanwhile (``bench/pass_settings.py`` measures both).

    Attributes:
        threads: intra-op threads (the calling thread included); ``None``: :func:`usable_cpus`.
        spinning: one of :data:`SPINNINGS`.
        graph: one of :data:`GRAPHS`.
        optimization: one of :data:`OPTIMIZATIONS`.

    Raises:
        ValueError: a value outside its choices, or ``threads`` below 1.
    """

    threads: int | None = None
    spinning: str = "off"
    graph: str = "auto"
    optimization: str = "all"

    def __post_init__(self) -> None:
        if self.threads is not None and (isinstance(self.threads, bool) or self.threads < 1):
            raise ValueError(f"threads must be at least 1, not {self.threads!r}")
        for name, choices in (("spinning", SPINNINGS), ("graph", GRAPHS), ("optimization", OPTIMIZATIONS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, not {getattr(self, name)!r}")

    @property
    def split(self) -> bool:
        """Whether the graph runs as two sessions (``auto``: when the ``onnx`` package is installed)."""
        if self.graph == "auto":
            import importlib.util

            return importlib.util.find_spec("onnx") is not None
        return self.graph == "split"

    def session_options(self) -> Any:
        """The ``onnxruntime.SessionOptions`` of these settings (one inter-op thread: the graph is one
        chain, and parallel branches would only compete)."""
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads if self.threads is not None else usable_cpus()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = getattr(
            onnxruntime.GraphOptimizationLevel, f"ORT_ENABLE_{self.optimization.upper()}"
        )
        # Sleeping idle threads (the default, "off") leave the cores to the event loop, the encoders and
        # the host's other processes between two model calls. Measured on two cores, the whole
        # conformance run (the model beside the suite's client and the simulator): long requests at
        # 1.88-2.04x real time against 1.59-1.61x spinning, the run 179 s against 192 s; alone the model
        # ran at about the same speed either way. bench/pass_settings.py measures the pass alone.
        spin = "0" if self.spinning == "off" else "1"
        options.add_session_config_entry("session.intra_op.allow_spinning", spin)
        if self.spinning == "pass":
            options.add_session_config_entry("session.force_spinning_stop", "1")
        return options


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def with_durations_output(model: bytes, tensor: str = DURATIONS_TENSOR) -> bytes:
    """The ONNX ``model`` bytes with ``tensor`` (an int64 value of the graph) declared as one more output.

    Protobuf merges a message field that occurs twice, and appends to repeated fields, so a second
    ``ModelProto.graph`` (field 7) holding only ``GraphProto.output`` (field 12) =
    ``ValueInfoProto{name (1), type (2) = TypeProto{tensor_type (1) = {elem_type (1) = INT64}}}``,
    appended to the file's bytes, adds exactly one graph output and changes nothing else. This needs no
    ``onnx`` package in the server image.
    """
    tensor_type = _varint(1 << 3 | 0) + _varint(_INT64)
    value_info = _field(1, tensor.encode()) + _field(2, _field(1, tensor_type))
    return model + _field(7, _field(12, value_info))


def split_model(model: bytes) -> tuple[bytes, bytes]:
    """The text side and the decoder of the Kokoro ONNX graph ``model``, as two ONNX models' bytes.

    The text side takes ``tokens``, ``style``, ``speed`` and gives :data:`DECODER_INPUTS` and
    :data:`DURATIONS_TENSOR`; the decoder takes :data:`DECODER_INPUTS` and ``style`` and gives ``audio``.
    Uses the ``onnx`` package (:class:`onnx.utils.Extractor`); a few seconds on 2 cores.

    Raises:
        ImportError: ``onnx`` is not installed.
    """
    import onnx
    from onnx.utils import Extractor

    extractor = Extractor(onnx.load_model_from_string(model))
    text = extractor.extract_model(["tokens", "style", "speed"], [*DECODER_INPUTS, DURATIONS_TENSOR])
    decoder = extractor.extract_model([*DECODER_INPUTS, "style"], ["audio"])
    return text.SerializeToString(), decoder.SerializeToString()


def open_sessions(
    model: bytes, settings: PassSettings, *, parts: tuple[bytes, bytes] | None = None
) -> tuple[Any, ...]:
    """onnxruntime sessions of the Kokoro graph ``model`` as ``settings`` run it (CPU provider).

    Returns ``(whole,)``, the whole graph with the durations as a second output
    (:func:`with_durations_output`), or with ``settings.split`` ``(text_side, decoder)``
    (:func:`split_model`; pass ``parts``, its result for ``model``, to skip splitting again).

    Raises:
        ImportError: the graph is to be split and ``onnx`` is not installed.
        onnxruntime's errors: ``model`` is not a loadable graph.
    """
    import onnxruntime

    options = settings.session_options()
    if settings.split:
        models = parts or split_model(model)
    else:
        models = (with_durations_output(model),)
    return tuple(
        onnxruntime.InferenceSession(part, sess_options=options, providers=["CPUExecutionProvider"])
        for part in models
    )


def run_pass(sessions: Sequence[Any], inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One model pass on :func:`open_sessions`' sessions, as :class:`OnnxBackend` runs it (without the
    abort hook): ``(audio, durations)``, float32 samples at 24 kHz and int64 frames per token.

    ``inputs`` are the graph's (:meth:`OnnxBackend.model_inputs`); with two sessions the text side's
    :data:`DECODER_INPUTS` and ``style`` feed the decoder.
    """
    if len(sessions) == 1:
        audio, durations = sessions[0].run(None, inputs)
        return np.asarray(audio).ravel(), np.asarray(durations).ravel()
    text_side, decoder = sessions
    *features, durations = text_side.run(None, inputs)
    (audio,) = decoder.run(
        None, dict(zip([*DECODER_INPUTS, "style"], [*features, inputs["style"]], strict=True))
    )
    return np.asarray(audio).ravel(), np.asarray(durations).ravel()


class OnnxBackend(Backend):
    """Kokoro-82M int8 on onnxruntime's CPU provider.

    Args:
        model_dir: asset directory; ``None`` uses :func:`reference_server.assets.locate` (SageMaker
            model directory, then the cache).
        threads: onnxruntime intra-op threads; ``None`` → ``settings.threads``.
        languages: the language codes to serve; ``None``: every language whose G2P is installed.
        split: run the text side and the decoder as two sessions (:func:`split_model`) so that
            :meth:`align` works; ``None`` → ``settings.graph``.
        settings: the session options (:class:`PassSettings`); ``None``: its defaults. ``threads`` and
            ``split``, when given, override its ``threads`` and ``graph``.
    """

    name = "onnx"

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        threads: int | None = None,
        languages: Iterable[str] | None = None,
        split: bool | None = None,
        settings: PassSettings | None = None,
    ) -> None:
        super().__init__(languages)
        settings = settings or PassSettings()
        if threads is not None:
            settings = replace(settings, threads=threads)
        if split is not None:
            settings = replace(settings, graph="split" if split else "whole")
        self.settings = settings
        self.model_dir = model_dir
        self.threads = settings.threads if settings.threads is not None else usable_cpus()
        self._session = None
        self._text_session = None
        self._decoder_session = None
        self._vocab: dict[str, int] = {}

    def load(self) -> None:
        found = assets_module.locate(self.model_dir)
        split = self.settings.split
        sessions = open_sessions(found.onnx_model.read_bytes(), replace(self.settings, threads=self.threads))
        if split:
            text_session, decoder_session = sessions
            outputs = [output.name for output in text_session.get_outputs()]
            if outputs != [*DECODER_INPUTS, DURATIONS_TENSOR]:
                raise assets_module.AssetError(f"{found.onnx_model}: unexpected text-side outputs {outputs}")
            session = None
        else:
            (session,) = sessions
            outputs = [output.name for output in session.get_outputs()]
            if outputs != ["audio", DURATIONS_TENSOR]:
                raise assets_module.AssetError(f"{found.onnx_model}: unexpected outputs {outputs}")
        self._vocab = json.loads(found.config.read_text(encoding="utf-8"))["vocab"]
        with np.load(found.voices) as packs:
            missing = self.voices - set(packs.files)
            if missing:
                raise assets_module.AssetError(f"{found.voices} lacks the voices {sorted(missing)}")
            # Read once here: an npz is read through one zip handle, which threads must not share.
            self._packs = {voice: np.array(packs[voice], dtype=np.float32) for voice in self.voices}
        self._session = session
        if split:
            self._text_session, self._decoder_session = text_session, decoder_session
        self.aligns = bool(split)
        self._load_phonemizer(found.config)

    @staticmethod
    def _run(session: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """``session.run`` that the thread's :class:`~reference_server.backends.base.AbortSignal` can stop.

        Each call gets its own ``RunOptions``; setting the signal (from any thread) sets its ``terminate``
        flag, and onnxruntime gives up the run at its next node (REFERENCE.md §9) with an error, raised
        here as :class:`~reference_server.backends.base.PassAborted`. The session stays usable: a later
        run has fresh options. Without a signal, or with one never set, the run is the plain one and its
        output the same to the bit (the options change nothing else).

        Raises:
            PassAborted: the signal was set before or during the run.
        """
        signal = current_abort()
        if signal is None:
            return session.run(None, inputs)
        import onnxruntime

        options = onnxruntime.RunOptions()
        with signal.hook(lambda: setattr(options, "terminate", True)):
            signal.check()
            try:
                return session.run(None, inputs, run_options=options)
            except Exception as exc:
                if signal.is_set:  # "Exiting due to terminate flag being set to true."
                    raise signal.stopped() from exc
                raise

    def model_inputs(self, text: str, voice: str, speed: float = 1.0) -> list[dict[str, np.ndarray]]:
        """The graph's inputs (``tokens``, ``style``, ``speed``; module docstring) for each pass of
        :meth:`synthesize` of the same arguments, in order: what a benchmark of the pass alone feeds.

        Raises:
            UnknownVoiceError, ValueError, BackendNotLoadedError: as :meth:`synthesize`.
        """
        voice, speed, phonemizer = self._check(voice, speed)
        pack, _ = self.resolve_voice(voice)
        return [self._inputs(segment, pack, speed) for segment in phonemizer.segments(text, voice)]

    def _inputs(self, segment: PhonemeSegment, pack: np.ndarray, speed: float) -> dict[str, np.ndarray]:
        tokens = [self._vocab[symbol] for symbol in segment.phonemes]
        return {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": pack[len(tokens) - 1],
            "speed": np.array([speed], dtype=np.float32),
        }

    def _speak(
        self, segment: PhonemeSegment, pack: np.ndarray, speed: float
    ) -> tuple[np.ndarray, Sequence[int]]:
        if self.aligns:
            alignment = self._align(segment, pack, speed)
            return self.decode(alignment).audio, alignment.durations
        assert self._session is not None  # synthesize() checks that load() ran
        audio, durations = self._run(self._session, self._inputs(segment, pack, speed))
        return np.asarray(audio, dtype=np.float32).ravel(), np.asarray(durations).ravel().tolist()

    def _align(self, segment: PhonemeSegment, pack: np.ndarray, speed: float) -> Alignment:
        assert self._text_session is not None  # align() checks that load() split the graph
        inputs = self._inputs(segment, pack, speed)
        *features, durations = self._run(self._text_session, inputs)
        return Alignment.of(
            segment,
            np.asarray(durations).ravel().tolist(),
            speed,
            dict(zip([*DECODER_INPUTS, "style"], [*features, inputs["style"]], strict=True)),
        )

    def decode(self, alignment: Alignment) -> Segment:
        """The decoder's audio for an alignment of :meth:`align`: float32 ``[alignment.samples]`` at
        24 kHz, the same samples as one run of the whole graph."""
        if self._decoder_session is None:
            return super().decode(alignment)
        (audio,) = self._run(self._decoder_session, alignment.features)
        segment = alignment.segment
        return Segment(
            segment.text, np.asarray(audio, dtype=np.float32).ravel(), alignment.words, segment.phonemes
        )
