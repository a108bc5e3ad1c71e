"""Settings from flags, environment and defaults (reference_server/settings.py, PROTOCOL.md §10, §13)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest
from server_harness import ROOT

from protocol.limits import Limits
from reference_server.settings import (
    DEFAULT_HOST,
    ENV_PREFIX,
    Settings,
    SettingsError,
    build_parser,
    load_settings,
)


def test_defaults_are_safe():
    settings = load_settings([], environ={})
    assert (
        (settings.host, settings.port, settings.backend)
        == ("127.0.0.1", 8080, "onnx")
        == (DEFAULT_HOST, 8080, "onnx")
    )
    assert settings.limits == Limits()  # the protocol's defaults (§10)
    assert settings.ws_max_size == 1_048_576 > settings.limits.max_message_bytes


def test_every_limit_is_a_flag_and_an_environment_variable():
    help_text = build_parser().format_help()
    for limit in fields(Limits):
        assert f"--{limit.name.replace('_', '-')}" in help_text
        assert f"{ENV_PREFIX}{limit.name.upper()}" in help_text


def test_flag_beats_environment_beats_default():
    environ = {"KOKORO_MAX_SESSIONS": "7", "KOKORO_MAX_QUEUE": "5", "KOKORO_HOST": "0.0.0.0"}
    settings = load_settings(["--max-sessions", "3", "--lookahead", "0"], environ=environ)
    assert settings.limits.max_sessions == 3  # flag
    assert settings.limits.max_queue == 5  # environment
    assert settings.limits.lookahead == 0
    assert settings.limits.max_text_chars == Limits().max_text_chars  # default
    assert settings.host == "0.0.0.0"  # only when told


def test_transport_ceiling_follows_a_raised_message_limit():
    settings = load_settings(["--max-message-bytes", str(4 << 20)], environ={})
    assert settings.ws_max_size == 4 << 20
    with pytest.raises(SettingsError, match="transport_max_message_bytes"):
        load_settings(["--max-message-bytes", "70000", "--transport-max-message-bytes", "65536"], environ={})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"KOKORO_MAX_QUEUE": "many"}, "KOKORO_MAX_QUEUE"),
        ({"KOKORO_MAX_QUEUE": "0"}, "max_queue"),
        ({"KOKORO_BACKEND": "tensorflow"}, "KOKORO_BACKEND"),
        ({"KOKORO_MAX_AUDIO_FRAME_BYTES": "33"}, "max_audio_frame_bytes"),
        ({"KOKORO_SYNTHESIS_WORKERS": "0"}, "synthesis_workers"),
    ],
)
def test_bad_values_are_refused_by_name(environ, message):
    with pytest.raises(SettingsError, match=message):
        load_settings([], environ=environ)


def test_sagemaker_serve_word_is_accepted():
    assert load_settings(["serve"], environ={}) == Settings()
    with pytest.raises(SystemExit):
        load_settings(["train"], environ={})


def test_entry_command_reports_bad_settings_without_starting():
    result = subprocess.run(
        [sys.executable, "-m", "reference_server"],
        cwd=ROOT,
        env={"KOKORO_MAX_SESSIONS": "-1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "max_sessions" in result.stderr
