"""The onnx backend's session options as server settings (issue #26 point 3): flags, environment,
defaults from one line, the onnxruntime options they produce, and the audio they leave unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from reference_server import assets
from reference_server.backends import create_backend
from reference_server.backends.onnx_backend import OnnxBackend, PassSettings, open_sessions, run_pass
from reference_server.settings import DEFAULT_ONNX_PASS, Settings, SettingsError, load_settings


def test_the_defaults_come_from_one_line() -> None:
    assert Settings().onnx_pass == DEFAULT_ONNX_PASS
    # bench §1d's choice: threads from the CPUs, spinning only during a pass, split when onnx is installed.
    assert DEFAULT_ONNX_PASS == PassSettings(threads=None, spinning="pass", graph="auto", optimization="all")


def test_flags_and_environment_set_each_option() -> None:
    settings = load_settings(
        ["--onnx-threads", "1", "--onnx-spinning", "pass"],
        {"KOKORO_ONNX_GRAPH": "whole", "KOKORO_ONNX_OPTIMIZATION": "basic", "KOKORO_ONNX_SPINNING": "on"},
    )
    assert settings.onnx_pass == PassSettings(threads=1, spinning="pass", graph="whole", optimization="basic")


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"KOKORO_ONNX_THREADS": "0"}, "onnx_threads must be at least 1"),
        ({"KOKORO_ONNX_SPINNING": "sometimes"}, "KOKORO_ONNX_SPINNING must be one of off, on, pass"),
        ({"KOKORO_ONNX_GRAPH": "halves"}, "KOKORO_ONNX_GRAPH must be one of auto, split, whole"),
        ({"KOKORO_ONNX_OPTIMIZATION": "max"}, "KOKORO_ONNX_OPTIMIZATION must be one of basic, extended, all"),
    ],
)
def test_bad_values_are_refused_by_name(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings([], environ)


@pytest.mark.parametrize(
    ("spinning", "allow", "stop"), [("off", "0", ""), ("on", "1", ""), ("pass", "1", "1")]
)
def test_spinning_sets_onnxruntimes_entries(spinning: str, allow: str, stop: str) -> None:
    import onnxruntime

    options = PassSettings(threads=1, spinning=spinning, optimization="basic").session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == allow
    assert (options.get_session_config_entry("session.force_spinning_stop") if stop else "") == stop
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
    assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC


def test_create_backend_passes_the_settings_and_explicit_arguments_win() -> None:
    backend = create_backend("onnx", onnx=PassSettings(threads=1, graph="whole", spinning="pass"))
    assert isinstance(backend, OnnxBackend)
    assert backend.threads == 1 and backend.settings.spinning == "pass" and not backend.settings.split
    overridden = OnnxBackend(threads=2, split=True, settings=PassSettings(threads=1, graph="whole"))
    assert overridden.threads == 2 and overridden.settings.split


def test_settings_change_the_speed_not_the_audio() -> None:
    """The same pass under the server's default and under spinning, one thread, the whole graph and
    another optimization level: durations equal, audio equal up to float rounding."""
    found = assets.fetch()
    backend = OnnxBackend(found.directory, languages=["a"], settings=PassSettings(graph="split"))
    backend.load()
    (inputs,) = backend.model_inputs("Sure thing.", "af_heart")
    model = found.onnx_model.read_bytes()
    reference_audio, reference_durations = run_pass(open_sessions(model, PassSettings(graph="split")), inputs)
    (segment,) = backend.synthesize("Sure thing.", "af_heart")
    np.testing.assert_array_equal(segment.audio, reference_audio)  # run_pass is the backend's pass
    other = PassSettings(threads=1, spinning="pass", graph="whole", optimization="extended")
    audio, durations = run_pass(open_sessions(model, other), inputs)
    np.testing.assert_array_equal(durations, reference_durations)
    assert audio.shape == reference_audio.shape
    assert np.max(np.abs(audio - reference_audio)) < 1e-2
