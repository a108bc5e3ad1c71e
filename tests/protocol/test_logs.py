"""One log format for every piece (protocol/logs.py): text for people, JSON by option, one record one line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys

import pytest

from protocol.logs import (
    ENV_LOG_FORMAT,
    ENV_LOG_LEVEL,
    JsonFormatter,
    TextFormatter,
    add_log_options,
    configure_logging,
    log_event,
    log_settings,
)


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    chatty = {name: logging.getLogger(name).level for name in ("httpx", "httpcore", "uvicorn.error")}
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, value in chatty.items():
        logging.getLogger(name).setLevel(value)


def _record(message: str = "request", **fields) -> logging.LogRecord:
    record = logging.LogRecord("reference_server", logging.INFO, __file__, 1, message, None, None)
    record.kokoro_fields = fields
    return record


def test_text_line_has_time_level_logger_message_and_fields():
    line = TextFormatter().format(_record(session="s3", chars=12, audio_s=1.525, status="completed"))
    stamp, (level, rest) = line[:23], line[24:].split(" ", 1)
    assert stamp[4] == "-" and stamp[19] == "." and level == "INFO"
    assert rest == "reference_server: request session=s3 chars=12 audio_s=1.525 status=completed"


def test_a_client_chosen_value_cannot_forge_a_line():
    # PROTOCOL.md §13: request_id is client-chosen; escape it when logging.
    forged = "a1\n2026-12-01 00:00:00.000 INFO reference_server: request status=completed"
    line = TextFormatter().format(_record(request_id=forged, voice="af heart"))
    assert "\n" not in line
    assert f"request_id={json.dumps(forged)}" in line and 'voice="af heart"' in line
    message = TextFormatter().format(_record("two\nlines"))
    assert "\n" not in message and "two\\nlines" in message


def test_json_line_is_one_object_with_the_fields_as_members():
    line = JsonFormatter().format(_record(session="s1", request_id='x"y', first_audio_ms=312.5))
    entry = json.loads(line)
    assert entry["level"] == "info" and entry["logger"] == "reference_server"
    assert entry["message"] == "request" and entry["time"].endswith("Z")
    assert (entry["session"], entry["request_id"], entry["first_audio_ms"]) == ("s1", 'x"y', 312.5)


def test_a_traceback_stays_with_its_record():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    assert "ValueError: boom" in json.loads(JsonFormatter().format(record))["exception"]
    text = TextFormatter().format(record)
    assert text.splitlines()[0].endswith("x: failed") and "ValueError: boom" in text


def test_settings_come_from_arguments_then_environment_then_defaults():
    assert log_settings(environ={}) == ("info", "text")
    assert log_settings(environ={ENV_LOG_FORMAT: "JSON", ENV_LOG_LEVEL: "debug"}) == ("debug", "json")
    assert log_settings("warning", "text", environ={ENV_LOG_FORMAT: "json"}) == ("warning", "text")
    with pytest.raises(ValueError, match=ENV_LOG_FORMAT):
        log_settings(environ={ENV_LOG_FORMAT: "xml"})
    with pytest.raises(ValueError, match="command line"):
        log_settings("loud")


def test_configure_logging_writes_one_format_and_quiets_per_call_loggers(restore_logging):
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream, environ={})
    log_event(logging.getLogger("simulator"), "session end", session="s1", outcome="input-ended", note=None)
    logging.getLogger("httpx").info('HTTP Request: GET http://127.0.0.1/ping "HTTP/1.1 200 OK"')
    logging.getLogger("uvicorn.error").info("connection open")
    logging.getLogger("uvicorn.error").info('%s - "WebSocket %s" [accepted]', "127.0.0.1:1", "/x")
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["session end", "Started server process [1]"]
    assert lines[1]["logger"] == "uvicorn"  # not "uvicorn.error": the line is not an error
    assert lines[0]["outcome"] == "input-ended" and "note" not in lines[0]
    configure_logging("debug", "text", stream=stream, environ={})  # reconfiguring never duplicates
    assert len(logging.getLogger().handlers) == 1
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)


def test_a_client_utf8_fault_in_uvicorn_is_one_line(restore_logging):
    stream = io.StringIO()
    configure_logging("info", "text", stream=stream, environ={})
    try:
        b"\xff".decode()
    except UnicodeDecodeError:
        logging.getLogger("uvicorn.error").exception("Invalid UTF-8 sequence received from client.")
    assert stream.getvalue().count("\n") == 1 and "Traceback" not in stream.getvalue()


def test_a_forced_exit_cancelling_uvicorns_lifespan_is_one_line(restore_logging):
    """A second Ctrl-C makes uvicorn skip the application's shutdown; the cancelled lifespan is not a
    traceback (issue 15: no traceback on Ctrl-C)."""
    stream = io.StringIO()
    configure_logging("info", "text", stream=stream, environ={})
    try:
        raise asyncio.CancelledError
    except asyncio.CancelledError as exc:
        logging.getLogger("uvicorn.error").error("Exception in 'lifespan' protocol\n", exc_info=exc)
    try:
        raise ValueError("a real failure")
    except ValueError as exc:
        logging.getLogger("uvicorn.error").error("Exception in 'lifespan' protocol\n", exc_info=exc)
    first, second = stream.getvalue().split("\n", 1)
    assert "INFO uvicorn: lifespan cancelled: forced exit" in first and "Traceback" not in first
    assert "ERROR uvicorn: Exception in 'lifespan' protocol" in second and "ValueError" in second


def test_command_line_options_name_their_variables_and_defaults():
    import argparse

    parser = argparse.ArgumentParser()
    add_log_options(parser)
    help_text = " ".join(parser.format_help().split())
    assert ENV_LOG_FORMAT in help_text and ENV_LOG_LEVEL in help_text
    assert "(default text)" in help_text and "(default info)" in help_text
    assert vars(parser.parse_args([])) == {"log_level": None, "log_format": None}


def test_payload_lines_never_reach_the_log_at_any_level(restore_logging):
    # python-websockets logs every frame it sends or receives at DEBUG ("< TEXT '...'"), through whatever
    # logger it was given (uvicorn hands the server's its uvicorn.error; the simulator's client uses
    # websockets.client); a frame carries request text, which is never logged (PROTOCOL.md §13).
    stream = io.StringIO()
    configure_logging("debug", "text", stream=stream, environ={})
    for name in ("uvicorn.error", "websockets.client", "websockets.server"):
        logging.getLogger(name).debug("< %s", 'TEXT \'{"text": "secret words"}\' [28 bytes]')
        logging.getLogger(name).debug("> %s", 'TEXT \'{"text": "secret words"}\' [28 bytes]')
    # The official SageMaker client's event stream and botocore print the bodies they carry at DEBUG.
    logging.getLogger("smithy_aws_event_stream.aio").debug("Publishing serialized event: %s", "secret words")
    logging.getLogger("botocore.endpoint").debug("Sending http request: %s", "body=b'secret words'")
    logging.getLogger("botocore.parsers").debug("Response body:\n%r", b"secret words")
    logging.getLogger("botocore.endpoint").warning("retrying")  # their other levels still come through
    logging.getLogger("websockets.client").debug("= connection is %s", "OPEN")
    out = stream.getvalue()
    assert "secret" not in out
    assert "connection is OPEN" in out  # the library's other debug lines still come through
    assert "retrying" in out
