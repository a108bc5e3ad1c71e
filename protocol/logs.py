"""One log format for every piece: the server, the simulator, the agent and the command-line tools.

Every process of this project logs through :func:`configure_logging`, so a stack started together (the
agent's local stack runs all three) writes one kind of line:

* ``text`` (default), for people::

      2026-12-01 18:50:00.123 INFO reference_server: request session=s3 request_id="a1" voice=af_heart ...

* ``json``, for log collectors: one object per line with ``time`` (UTC, ISO 8601), ``level``, ``logger``,
  ``message`` and the record's fields as members.

Events that describe a unit of work (a request, a session) are logged with :func:`log_event`: a short
event name as the message and the facts as fields, never free text that would need parsing. Values that
a client chose (request ids) are quoted and escaped in text lines, so a client cannot forge a log line
(PROTOCOL.md §13); request ``text`` is never logged (§13).

Settings shared by every piece, so that one variable changes them all:

* ``KOKORO_LOG_FORMAT``: ``text`` or ``json`` (each command line also has ``--log-format``);
* ``KOKORO_LOG_LEVEL``: ``critical``, ``error``, ``warning``, ``info`` (default) or ``debug``
  (``--log-level``).

Only the standard library is used here: importing this module pulls in no I/O framework, so the
sans-I/O core and every shell can share it. It quiets third-party loggers that would otherwise log each
HTTP call at INFO (httpx, httpcore) and replaces uvicorn's per-connection lines with the pieces' own
per-session lines. At every level, ``debug`` included, it drops the lines in which a library prints
what it carries, since that holds request text (PROTOCOL.md §13): python-websockets' per-frame lines
(``< TEXT '...'``, whichever logger carries them: uvicorn hands the server's its ``uvicorn.error``), the
AWS event-stream library's serialized events (the official SageMaker client's, ``smithy_aws_event_stream``)
and botocore's request and response bodies (``botocore.endpoint``, ``botocore.parsers``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

__all__ = [
    "ENV_LOG_FORMAT",
    "ENV_LOG_LEVEL",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "TextFormatter",
    "add_log_options",
    "configure_logging",
    "log_event",
    "log_settings",
]

LOG_FORMATS = ("text", "json")
"""``text``: one human-readable line per record; ``json``: one JSON object per line."""
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""Level names accepted by ``--log-level`` and ``KOKORO_LOG_LEVEL``."""
ENV_LOG_FORMAT = "KOKORO_LOG_FORMAT"
"""Environment variable every piece reads for the log format."""
ENV_LOG_LEVEL = "KOKORO_LOG_LEVEL"
"""Environment variable every piece reads for the log level."""

DEFAULT_FORMAT = "text"
DEFAULT_LEVEL = "info"

_FIELDS = "kokoro_fields"
# Third-party loggers that speak at INFO about every call; their warnings still come through.
_CHATTY = (
    "httpx",
    "httpcore",
    "hpack",
    "botocore",
    "urllib3",
    "hypercorn.access",
    "uvicorn.access",
    "strands",
)
# uvicorn's lines per WebSocket connection (message templates); each piece logs its own session start
# and end instead.
_UVICORN_CONNECTION_LINES = frozenset(
    {"connection open", "connection closed", '%s - "WebSocket %s" [accepted]'}
)
# python-websockets' per-frame debug lines ("< TEXT '{\"text\": ...}' [40 bytes]", "> BINARY ..."): the
# templates of its sans-I/O protocol (and of its legacy one). The frame is the argument, so a frame of
# request text would be printed whole; they are dropped at every level (PROTOCOL.md §13).
_FRAME_LINES = frozenset({"< %s", "> %s"})
# Loggers whose DEBUG records print the messages they carry: the official SageMaker client's event stream
# ("Publishing serialized event: ..." with the PayloadPart's bytes) and botocore's request and response
# bodies (InvokeEndpoint's JSON text). Their other levels still come through.
_PAYLOAD_LOGGERS = ("smithy_aws_event_stream", "botocore.endpoint", "botocore.parsers")
# uvicorn logs a client's invalid UTF-8 (which it answers with close 1007, RFC 6455) with a traceback;
# it is the client's mistake, not the server's, so it is kept as one line.
_UVICORN_CLIENT_FAULTS = frozenset({"Invalid UTF-8 sequence received from client."})


def _text_value(value: Any) -> str:
    """A field value in a text line: bare when it is a plain token, else JSON-quoted (escapes included)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    if text and all(c.isalnum() or c in "._-:/" for c in text) and text.isascii():
        return text
    return json.dumps(text, ensure_ascii=True)


class TextFormatter(logging.Formatter):
    """``2026-12-01 18:50:00.123 INFO logger: message key=value ...`` (local time, milliseconds).

    Fields whose value a client chose are JSON-quoted when they hold anything but plain characters, and
    a message's own line breaks are escaped, so one record is always one line.
    """

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        line = f"{stamp}.{int(record.msecs):03d} {record.levelname} {record.name}: {record.getMessage()}"
        fields: Mapping[str, Any] = getattr(record, _FIELDS, None) or {}
        if fields:
            line += " " + " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        line = line.replace("\r", "\\r").replace("\n", "\\n")
        if record.exc_info:
            # A traceback is for a bug; it keeps its own lines after the record's one.
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC ISO 8601), ``level``, ``logger``, ``message``, the fields,
    and ``exception`` (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in (getattr(record, _FIELDS, None) or {}).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class _UvicornLines(logging.Filter):
    """uvicorn's lines as the project's: named ``uvicorn`` (its general log is the logger ``uvicorn.error``,
    which made "INFO uvicorn.error: Started server process" read as an error), its per-connection lines
    dropped, and one line without a traceback for a client's protocol fault and for the lifespan cancelled
    by a forced exit (a second Ctrl-C)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "uvicorn.error":
            return True
        record.name = "uvicorn"
        if record.msg in _UVICORN_CLIENT_FAULTS or _forced_exit(record):
            if record.exc_info and record.msg not in _UVICORN_CLIENT_FAULTS:
                record.msg, record.args = "lifespan cancelled: forced exit, application shutdown skipped", ()
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return record.msg not in _UVICORN_CONNECTION_LINES


class _NoPayloads(logging.Filter):
    """Drops the DEBUG lines that print payloads: WebSocket frames (:data:`_FRAME_LINES`, any logger) and
    the records of :data:`_PAYLOAD_LOGGERS` and their children."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG:
            return True
        if record.msg in _FRAME_LINES:
            return False
        name = record.name
        return not any(name == n or name.startswith(n + ".") for n in _PAYLOAD_LOGGERS)


def _forced_exit(record: logging.LogRecord) -> bool:
    """uvicorn's lifespan error when a second Ctrl-C forced the exit: the lifespan task was cancelled."""
    exc = record.exc_info[1] if record.exc_info else None
    return str(record.msg).startswith("Exception in 'lifespan' protocol") and isinstance(
        exc, asyncio.CancelledError | KeyboardInterrupt
    )


def log_settings(
    level: str | None = None, fmt: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """The level and format to use: the arguments when given, else the environment, else the defaults.

    Raises:
        ValueError: a level or format that is not one of :data:`LOG_LEVELS` / :data:`LOG_FORMATS`; the
            message names the variable it came from.
    """
    environ = os.environ if environ is None else environ
    resolved = []
    for given, env, allowed, default in (
        (level, ENV_LOG_LEVEL, LOG_LEVELS, DEFAULT_LEVEL),
        (fmt, ENV_LOG_FORMAT, LOG_FORMATS, DEFAULT_FORMAT),
    ):
        source = "the command line"
        if given is None:
            given, source = environ.get(env) or default, env
        value = given.strip().lower()
        if value not in allowed:
            raise ValueError(f"{source}: {given!r} is not one of {', '.join(allowed)}")
        resolved.append(value)
    return resolved[0], resolved[1]


def configure_logging(
    level: str | None = None,
    fmt: str | None = None,
    *,
    stream: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Send every logger's records to ``stream`` (default stderr) in one format, at one level.

    Args:
        level: a name of :data:`LOG_LEVELS`; ``None`` reads ``KOKORO_LOG_LEVEL`` (default ``info``).
        fmt: ``"text"`` or ``"json"``; ``None`` reads ``KOKORO_LOG_FORMAT`` (default ``text``).
        stream: where lines go.
        environ: the environment to read; ``None`` is ``os.environ``.

    Replaces the root logger's handlers (calling it twice reconfigures, never duplicates lines). Loggers of
    libraries that log each HTTP call at INFO are set to WARNING unless ``level`` is ``debug``.

    Raises:
        ValueError: see :func:`log_settings`.
    """
    level, fmt = log_settings(level, fmt, environ)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    # The handler filters too: a library that sets its own logger to DEBUG (jieba) must not get past the
    # level chosen here through propagation.
    handler.setLevel(level.upper())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_UvicornLines())
    handler.addFilter(_NoPayloads())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
    # Libraries that install their own handlers and levels (uvicorn when given a log config or a log level)
    # log through root instead, at the level chosen here.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "hypercorn.error", "bedrock_agentcore"):
        named = logging.getLogger(name)
        for old in list(named.handlers):
            named.removeHandler(old)
        named.setLevel(logging.NOTSET)
        named.disabled = False
        named.propagate = True


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event: ``event`` is the message, ``fields`` are its facts (``None`` values are left out).

    Example: ``log_event(logger, "request", session="s3", request_id="a1", chars=12, status="completed")``.
    """
    if logger.isEnabledFor(level):
        kept = {key: value for key, value in fields.items() if value is not None}
        logger.log(level, event, extra={_FIELDS: kept}, stacklevel=2)


def add_log_options(parser: argparse.ArgumentParser | Any) -> None:
    """Add ``--log-level`` and ``--log-format`` to ``parser`` (or an argument group).

    Both default to ``None`` (:func:`configure_logging` then reads the environment); the help text names
    the variables and the defaults.
    """
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help=f"how much to log (default {DEFAULT_LEVEL}) [env {ENV_LOG_LEVEL}]",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=None,
        help=f"text lines for people or one JSON object per line (default {DEFAULT_FORMAT}) "
        f"[env {ENV_LOG_FORMAT}]",
    )
