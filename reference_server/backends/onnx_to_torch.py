"""Rebuild a ``kokoro.KModel`` state dict from the official int8 ONNX export of Kokoro-82M v1.0.

The official fp32 ``kokoro-v1_0.pth`` is only on the Hugging Face hub; the int8 ONNX is reachable
through a package registry (REFERENCE.md §4). The ONNX holds every weight the network uses, so the
torch backend can run the unmodified ``kokoro`` code on weights read back out of it:

* **Quantized weights** (onnxruntime dynamic quantization): a ``MatMulInteger`` / ``ConvInteger`` node
  reads ``<w>_quantized`` (int8/uint8) with its zero point (the node's fourth input; identical zero
  points are shared between weights) and the scale ``<w>_scale``; the float weight is
  ``(q - zero_point) * scale``. ``MatMul`` weights are stored as [in, out], so ``nn.Linear`` gets the
  transpose. Embedding tables are ``Gather`` on int8 followed by ``DequantizeLinear``.
* **LSTMs** are ``DynamicQuantizeLSTM`` nodes: W [dirs, in, 4H], R [dirs, H, 4H] (quantized per
  direction) and B [dirs, 8H] (input then recurrent bias), gates in ONNX order i, o, f, c; torch wants
  [4H, in] with gates i, f, g(=c), o.
* **Weight norm**: the export folded ``g * v / ‖v‖`` into one weight W per convolution. ``v = W`` and
  ``g = ‖W‖`` over every dimension but 0 (``torch.nn.utils.weight_norm``'s default ``dim=0``) give the
  same W back. Quantization rounds a few output channels to all zeros; their ``v`` is set to ones
  so that ``g = 0`` still yields W = 0 instead of 0/0.
* **Names**: parameters named in the ONNX keep their torch names below a wrapper prefix
  (``encoder.bert.…`` → ``bert.…``, ``decoder.decoder.…`` → ``decoder.…``). Weights the exporter left
  anonymous (``onnx::MatMul_…``, ``onnx::LSTM_…``, folded weight-norm products) are matched through the
  node that reads them: its name is the module scope (``/encoder/F0.0/conv1/Conv_quant``) and the
  shortest scope suffix that names exactly one ``KModel`` module (``F0.0.conv1`` →
  ``predictor.F0.0.conv1``) is the module.
* **Not in the graph**, so set to the value the graph computes with: the affine parameters of the
  ``InstanceNorm1d`` inside every ``AdaIN1d`` (the graph normalizes and modulates with no scale or
  shift in between, so weight 1 and bias 0; kokoro's own comment says they exist only to work around
  an old exporter bug), and ALBERT's pooler, whose output ``kokoro.modules.CustomAlbert`` discards
  (zeros).

:func:`rebuild_state_dict` checks that every ``KModel`` parameter is assigned exactly once with its
exact shape, that every named or anonymous weight of the graph was used, and finally loads the result
into a ``KModel`` with ``strict=True``. The torch backend's tests compare its durations and intermediate
tensors with onnxruntime's on the same model.
"""

from __future__ import annotations

import json
import re
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RebuildError", "build_kmodel", "check_state_dict", "rebuild_state_dict"]

# Where a KModel sub-module's torch name sits in the ONNX initializer names.
_NAMED_PREFIXES = ("encoder.", "decoder.")
# Constants of the export that KModel computes from its hyper-parameters instead of storing them.
_DERIVED_CONSTANTS = frozenset(
    {
        "decoder.decoder.generator.stft.istft.stft.inverse_basis",
        "decoder.decoder.generator.stft.istft.stft.window_sum",
    }
)
_NOT_IN_GRAPH = (
    (re.compile(r"\.norm\.weight$"), "InstanceNorm1d", 1.0),
    (re.compile(r"\.norm\.bias$"), "InstanceNorm1d", 0.0),
    (re.compile(r"^bert\.pooler\.(weight|bias)$"), "Linear", 0.0),
)
# The top-level KModel attributes, the keys of the official .pth.
_TOP_LEVEL = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")


class RebuildError(Exception):
    """The ONNX graph does not map onto ``KModel`` one to one; the message names the tensor or parameter."""


def build_kmodel(config: Path | str | dict[str, Any], weights: Path | str | None = None) -> Any:
    """A ``kokoro.KModel`` built from ``config`` without touching the hub, in eval mode, on the CPU.

    Args:
        config: the ``KModel`` configuration (path or dict).
        weights: a state dict file (the official layout, or :func:`rebuild_state_dict`'s), loaded
            strictly; ``None`` leaves the random initial weights (used to learn parameter names and shapes).

    Raises:
        RebuildError: ``weights`` does not hold exactly the model's parameters.
    """
    import torch
    from kokoro.model import KModel

    if not isinstance(config, dict):
        config = json.loads(Path(config).read_text(encoding="utf-8"))
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        # kokoro's modules use the deprecated weight_norm and one-layer LSTMs with dropout, both harmless
        # at inference; without this each of the ~100 modules prints a warning.
        warnings.filterwarnings("ignore", message=r".*weight_norm.* is deprecated", category=FutureWarning)
        warnings.filterwarnings("ignore", message=r"dropout option adds dropout", category=UserWarning)
        # KModel loads whatever top-level keys its file has and goes to the hub only when given no file
        # at all, so an empty state dict gives the bare module tree. The weights are loaded below
        # instead of by KModel, which falls back to a non-strict load when a strict one fails.
        empty = Path(tmp) / "empty.pth"
        torch.save({}, empty)
        model = KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=str(empty)).eval()
    if weights is not None:
        # mmap: the file is read once, straight into the parameters.
        state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
        check_state_dict(state, model)
        flat = {
            f"{top}.{key.removeprefix('module.')}": value
            for top, inner in state.items()
            for key, value in inner.items()
        }
        model.load_state_dict(flat, strict=True)
    return model


def check_state_dict(state: dict[str, dict[str, Any]], model: Any) -> None:
    """Check that ``state`` ({top-level name: state dict}) holds exactly ``model``'s parameters.

    A ``module.`` prefix on the inner keys (the official file has one) is ignored.

    Raises:
        RebuildError: a parameter is missing, unexpected, or of another shape.
    """
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    found = {}
    for top, inner in state.items():
        for key, tensor in inner.items():
            key = key.removeprefix("module.")
            found[f"{top}.{key}"] = tuple(tensor.shape)
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    wrong = sorted(name for name in set(expected) & set(found) if expected[name] != found[name])
    if missing or unexpected or wrong:
        raise RebuildError(
            f"state dict does not match KModel: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"wrong shape {wrong[:5]} ({len(missing)}/{len(unexpected)}/{len(wrong)})"
        )


class _Rebuild:
    """One pass over the graph, assigning each ``KModel`` parameter from the tensors that hold it."""

    def __init__(self, onnx_path: Path, config: Path | str | dict[str, Any]) -> None:
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(onnx_path)).graph
        self.nodes = list(graph.node)
        self.tensors: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        self.readers: dict[str, list[Any]] = defaultdict(list)
        for node in self.nodes:
            for name in node.input:
                self.readers[name].append(node)
        self.model = build_kmodel(config)
        self.shapes = {name: tuple(t.shape) for name, t in self.model.state_dict().items()}
        self.modules = {name: type(module).__name__ for name, module in self.model.named_modules()}
        self.out: dict[str, np.ndarray] = {}
        self.used: set[str] = set()

    # -- helpers

    def put(self, name: str, value: np.ndarray, source: str) -> None:
        if name not in self.shapes:
            raise RebuildError(f"{source} maps to {name!r}, which KModel does not have")
        if name in self.out:
            raise RebuildError(f"{name} is assigned twice (second time from {source})")
        # Writable and contiguous: torch.from_numpy shares the memory and warns on read-only arrays.
        value = np.require(value, np.float32, ["C_CONTIGUOUS", "WRITEABLE"])
        if value.shape != self.shapes[name]:
            raise RebuildError(f"{source} has shape {value.shape}, {name} needs {self.shapes[name]}")
        self.out[name] = value
        self.used.add(source)

    @staticmethod
    def torch_name(onnx_name: str) -> str | None:
        """``encoder.bert.x`` → ``bert.x``; ``decoder.decoder.x`` → ``decoder.x``; anonymous → None."""
        if onnx_name.startswith(_NAMED_PREFIXES):
            return onnx_name.split(".", 1)[1]
        return None

    def module_of(self, node: Any, parameter: str) -> str:
        """The ``KModel`` module a node belongs to, from its scope, among modules having ``parameter``."""
        scope = node.name.strip("/").split("/")[:-1]
        for start in range(len(scope) - 1, -1, -1):
            suffix = ".".join(scope[start:])
            candidates = [
                module
                for module in self.modules
                if (module == suffix or module.endswith("." + suffix))
                and f"{module}.{parameter}" in self.shapes
            ]
            if len(candidates) == 1:
                return candidates[0]
        raise RebuildError(f"no single KModel module with {parameter!r} matches node {node.name!r}")

    def dequantized(self, node: Any, weight_input: int, zero_point_input: int) -> tuple[str, np.ndarray]:
        quantized = node.input[weight_input]
        if not quantized.endswith("_quantized"):
            raise RebuildError(f"{node.name}: weight {quantized!r} is not a quantized initializer")
        base = quantized.removesuffix("_quantized")
        scale = self.tensors.get(base + "_scale")
        if scale is None:
            raise RebuildError(f"{node.name}: no scale {base}_scale")
        zero_point = self.tensors[node.input[zero_point_input]].astype(np.float32)
        return base, (self.tensors[quantized].astype(np.float32) - zero_point) * scale

    def put_weight_norm(self, module: str, weight: np.ndarray, source: str) -> None:
        norm = np.sqrt(
            np.square(weight, dtype=np.float64).sum(axis=tuple(range(1, weight.ndim)), keepdims=True)
        )
        self.put(f"{module}.weight_g", norm, source)
        self.put(f"{module}.weight_v", np.where(norm == 0, 1.0, weight), source)

    # -- one handler per kind of weight-reading node

    def matmul_integer(self, node: Any) -> None:
        base, weight = self.dequantized(node, 1, 3)
        name = self.torch_name(base) or self.module_of(node, "weight") + ".weight"
        self.put(name, weight.T, node.input[1])

    def conv_integer(self, node: Any) -> None:
        base, weight = self.dequantized(node, 1, 3)
        name = self.torch_name(base)
        if name is not None:
            self.put(name, weight, node.input[1])
        else:
            self.put_weight_norm(self.module_of(node, "weight_g"), weight, node.input[1])

    def conv_float(self, node: Any) -> None:
        source = node.input[1]
        if source in _DERIVED_CONSTANTS:
            return
        name = self.torch_name(source)
        if name is not None:
            self.put(name, self.tensors[source], source)
        else:
            self.put_weight_norm(self.module_of(node, "weight_g"), self.tensors[source], source)

    def matmul_float(self, node: Any) -> None:
        source = node.input[1]
        name = self.torch_name(source) or self.module_of(node, "weight") + ".weight"
        self.put(name, self.tensors[source].T, source)

    def gather_quantized(self, node: Any) -> None:
        source = node.input[0]
        dequantize = [n for n in self.readers[node.output[0]] if n.op_type == "DequantizeLinear"]
        if len(dequantize) != 1 or not source.endswith("_quantized"):
            raise RebuildError(f"{node.name}: int8 Gather without a single DequantizeLinear")
        scale = self.tensors[dequantize[0].input[1]]
        zero_point = self.tensors[dequantize[0].input[2]].astype(np.float32)
        name = self.torch_name(source.removesuffix("_quantized"))
        if name is None:
            raise RebuildError(f"{node.name}: anonymous embedding table {source!r}")
        self.put(name, (self.tensors[source].astype(np.float32) - zero_point) * scale, source)

    def lstm(self, node: Any) -> None:
        module = self.module_of(node, "weight_ih_l0")
        w_q, r_q, bias = (self.tensors[node.input[i]] for i in (1, 2, 3))
        w_scale, w_zero, r_scale, r_zero = (self.tensors[node.input[i]] for i in (8, 9, 10, 11))
        hidden = r_q.shape[1]

        def torch_gates(x: np.ndarray) -> np.ndarray:
            i, o, f, c = np.split(x, 4, axis=0)
            return np.concatenate([i, f, c, o], axis=0)

        for direction, suffix in enumerate(("", "_reverse")):
            w = (w_q[direction].astype(np.float32) - np.float32(w_zero[direction])) * w_scale[direction]
            r = (r_q[direction].astype(np.float32) - np.float32(r_zero[direction])) * r_scale[direction]
            self.put(f"{module}.weight_ih_l0{suffix}", torch_gates(w.T), node.input[1])
            self.put(f"{module}.weight_hh_l0{suffix}", torch_gates(r.T), node.input[2])
            self.put(
                f"{module}.bias_ih_l0{suffix}", torch_gates(bias[direction, : 4 * hidden]), node.input[3]
            )
            self.put(
                f"{module}.bias_hh_l0{suffix}", torch_gates(bias[direction, 4 * hidden :]), node.input[3]
            )

    def run(self) -> dict[str, np.ndarray]:
        seen: set[str] = set()  # ALBERT's one shared layer is unrolled 12 times over the same weights
        for node in self.nodes:
            op = node.op_type
            if op == "Gather":
                weight = node.input[0]
                if weight not in self.tensors or self.tensors[weight].dtype != np.int8:
                    continue
            elif op in {
                "MatMulInteger",
                "ConvInteger",
                "Conv",
                "ConvTranspose",
                "MatMul",
                "DynamicQuantizeLSTM",
            }:
                weight = node.input[1]
                if weight not in self.tensors:
                    continue
            else:
                continue
            if weight in seen:
                continue
            seen.add(weight)
            {
                "MatMulInteger": self.matmul_integer,
                "ConvInteger": self.conv_integer,
                "Conv": self.conv_float,
                "ConvTranspose": self.conv_float,
                "MatMul": self.matmul_float,
                "Gather": self.gather_quantized,
                "DynamicQuantizeLSTM": self.lstm,
            }[op](node)
        # Float parameters that keep their torch name: biases, LayerNorm weights, Snake alphas, ...
        for source, value in self.tensors.items():
            name = self.torch_name(source)
            if name is None or value.dtype != np.float32 or source in _DERIVED_CONSTANTS:
                continue
            if name.endswith(("_scale", "_zero_point")) or name in self.out:
                continue
            if name in self.shapes:
                self.put(name, value, source)
        for name in self.shapes:
            if name in self.out:
                continue
            for pattern, module_type, fill in _NOT_IN_GRAPH:
                if pattern.search(name) and self.modules.get(name.rsplit(".", 1)[0]) == module_type:
                    self.out[name] = np.full(self.shapes[name], fill, dtype=np.float32)
                    break
            else:
                raise RebuildError(f"{name} is not in the ONNX graph")
        self.check_all_weights_used()
        return self.out

    def check_all_weights_used(self) -> None:
        """Every named parameter and every quantized or anonymous weight of the graph must have been used."""
        unused = []
        for source, value in self.tensors.items():
            if source in self.used or source in _DERIVED_CONSTANTS or value.dtype == np.int64:
                continue
            if source.endswith(("_scale", "_zero_point")):
                continue  # read together with their weight
            weight = (
                self.torch_name(source) is not None
                or source.endswith("_quantized")
                or source.startswith(("onnx::MatMul", "onnx::LSTM"))
            )
            if weight:
                unused.append(source)
        if unused:
            raise RebuildError(f"{len(unused)} ONNX weights map to no KModel parameter: {unused[:5]}")


def rebuild_state_dict(
    onnx_path: Path | str, config: Path | str | dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Read the int8 ONNX export and return a state dict in the official ``.pth`` layout.

    Args:
        onnx_path: ``kokoro-v1.0.int8.onnx`` (verified by the caller).
        config: the ``KModel`` configuration (path or dict).

    Returns:
        ``{"bert": {...}, "bert_encoder": {...}, "predictor": {...}, "text_encoder": {...},
        "decoder": {...}}`` of float32 CPU tensors, loadable by ``kokoro.KModel(model=<file>)``.

    Raises:
        RebuildError: a parameter is missing, assigned twice or of the wrong shape, or a weight of the
            graph is left over (see the module docstring for the mapping).
    """
    import torch

    rebuild = _Rebuild(Path(onnx_path), config)
    flat = {name: torch.from_numpy(value) for name, value in rebuild.run().items()}
    rebuild.model.load_state_dict(flat, strict=True)
    state: dict[str, dict[str, Any]] = {top: {} for top in _TOP_LEVEL}
    for name, tensor in flat.items():
        top, key = name.split(".", 1)
        state[top][key] = tensor
    return state
