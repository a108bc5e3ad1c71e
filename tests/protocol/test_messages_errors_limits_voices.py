"""protocol.errors, .limits and .voices: the registry of §9.1, the limits of §10, the voices and languages."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import schemas
from protocol.errors import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_TRY_AGAIN_LATER,
    REGISTRY,
    ErrorCode,
    ProtocolError,
)
from protocol.limits import AUDIO_FRAME_HARD_LIMIT, Limits
from protocol.messages import ErrorFrame
from protocol.voices import (
    DEFAULT_VOICE,
    KOKORO_VOICES,
    LANGUAGE_NAMES,
    LANGUAGE_TAGS,
    LANGUAGES,
    VOICE_LANGUAGE,
    language,
    language_of,
    voice_gender,
    voice_language,
)

SPEC = (Path(__file__).resolve().parents[2] / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")


# --- the registry (§9.1) ------------------------------------------------------------------------------


def spec_section(number: str) -> str:
    """The text of one '### <number> ...' subsection of PROTOCOL.md."""
    match = re.search(rf"^### {re.escape(number)} .*?(?=^### |^## )", SPEC, re.M | re.S)
    assert match, number
    return match.group(0)


def table_rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_registry_covers_every_code():
    assert set(REGISTRY) == set(ErrorCode)


def test_registry_matches_the_spec_table():
    rows = {row[0].strip("`"): row for row in table_rows(spec_section("9.1"))}
    assert set(rows) == {code.value for code in ErrorCode}
    for code in ErrorCode:
        _, _, scope, close, http = rows[code.value]
        assert code.fatal == (scope == "fatal"), code
        if close == "—":
            assert code.close_code is None, code
        else:
            assert code.close_code == int(close.split()[0]), code
        assert code.http_status == (None if http == "—" else int(http)), code


def test_fatal_codes_and_close_codes():
    assert [code for code in ErrorCode if code.fatal] == [
        ErrorCode.SESSION_IDLE,
        ErrorCode.CLIENT_NOT_READING,
        ErrorCode.TOO_MANY_SESSIONS,
    ]
    assert ErrorCode.TOO_MANY_SESSIONS.close_code == CLOSE_TRY_AGAIN_LATER == 1013
    assert ErrorCode.INTERNAL_ERROR.close_code == CLOSE_INTERNAL_ERROR == 1011
    assert not ErrorCode.INTERNAL_ERROR.fatal
    assert ErrorCode.REQUEST_STALE.http_status == 408
    assert ErrorCode.TEXT_TOO_LONG.http_status == ErrorCode.MESSAGE_TOO_LARGE.http_status == 413
    assert ErrorCode.QUEUE_FULL.http_status == 503


def test_protocol_error_frame_and_http_body():
    error = ProtocolError(ErrorCode.QUEUE_FULL, "32 requests are queued", request_id="a1")
    assert str(error) == "queue_full: 32 requests are queued"
    frame = ErrorFrame.from_error(error).to_dict()
    assert frame == {
        "type": "error",
        "code": "queue_full",
        "message": "32 requests are queued",  # the code is not repeated (§9.3)
        "request_id": "a1",
        "fatal": False,
    }
    schemas.validate("error", frame)
    schemas.validate("http_error", error.http_body())
    assert error.http_body() == {"error": {"code": "queue_full", "message": "32 requests are queued"}}
    fatal = ProtocolError(ErrorCode.TOO_MANY_SESSIONS, "64 sessions")
    assert fatal.fatal and ErrorFrame.from_error(fatal).to_dict()["fatal"] is True
    assert ProtocolError(ErrorCode.INTERNAL_ERROR, "boom", fatal=True).fatal


# --- limits (§10) -------------------------------------------------------------------------------------


def test_limit_defaults_match_the_spec_table():
    match = re.search(r"^## 10\. Limits.*?(?=^## )", SPEC, re.M | re.S)
    assert match
    rows = table_rows(match.group(0))
    defaults = Limits()
    assert {row[0].strip("`") for row in rows} == set(Limits.__dataclass_fields__)
    for row in rows:
        name, default = row[0].strip("`"), float(row[1].replace(",", ""))
        assert getattr(defaults, name) == default, name


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_message_bytes": 0},
        {"max_text_chars": -1},
        {"max_queue": True},
        {"max_sessions": 1.5},
        {"max_json_depth": 0},
        {"lookahead": -1},
        {"max_audio_frame_bytes": 33},
        {"max_audio_frame_bytes": 62},
        {"max_audio_frame_bytes": AUDIO_FRAME_HARD_LIMIT + 2},
        {"max_request_age_s": 0},
        {"max_request_age_s": float("nan")},
        {"close_timeout_s": -1.0},
    ],
)
def test_limits_refuse_out_of_range_values(kwargs):
    with pytest.raises(ValueError):
        Limits(**kwargs)


def test_limits_accept_their_bounds():
    Limits(max_audio_frame_bytes=AUDIO_FRAME_HARD_LIMIT, lookahead=0, max_request_age_s=math.inf)
    Limits(max_audio_frame_bytes=64)


# --- voices -------------------------------------------------------------------------------------------


def test_voices():
    assert len(KOKORO_VOICES) == 54
    assert DEFAULT_VOICE in KOKORO_VOICES
    assert set(VOICE_LANGUAGE) == KOKORO_VOICES
    assert set(VOICE_LANGUAGE.values()) == set(LANGUAGE_NAMES) == set(LANGUAGE_TAGS)
    assert voice_language("ff_siwis") == "f" and voice_language("zm_yunxi") == "z"
    assert sum(1 for v in KOKORO_VOICES if v.startswith("a")) == 20
    for voice in KOKORO_VOICES:
        assert re.fullmatch(r"[abefhijpz][fm]_[a-z]+", voice)
    with pytest.raises(KeyError):
        voice_language("xx_nobody")


def test_languages_table():
    assert "".join(LANGUAGES) == "abefhijpz"
    assert language_of("jf_alpha").tag == "ja" and language_of("af_heart+af_bella").code == "a"
    assert language_of("pm_santa").primary == "pt"
    for code_or_tag, code in [
        ("j", "j"),
        ("ja", "j"),
        ("JA-jp", "j"),
        ("pt_BR", "p"),
        ("pt-br", "p"),
        ("en", "a"),
        ("en-GB", "b"),
        ("cmn", "z"),
        ("zh", "z"),
        ("fr-fr", "f"),
        ("Hindi", "h"),
    ]:
        assert language(code_or_tag).code == code, code_or_tag
    for bad in ("xx", "", "de"):
        with pytest.raises(KeyError):
            language(bad)
    with pytest.raises(KeyError):
        language_of("xf_nobody")
    assert voice_gender("zm_yunxi") == "male" and voice_gender("ef_dora") == "female"
    assert voice_gender("x") is None


# --- errors and the message layer ------------------------------------------------------------------------


def test_the_error_registry_imports_nothing_of_the_message_layer():
    """errors <-> messages was an import circle (ProtocolError.to_frame); the frame has one home now."""
    probe = "import sys, protocol.errors; print('protocol.messages' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
    assert not hasattr(ProtocolError, "to_frame")
