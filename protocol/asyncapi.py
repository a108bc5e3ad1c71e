"""The protocol as an AsyncAPI 3.0 document (``spec/asyncapi.json``), generated from ``spec/schemas/``.

    python -m protocol.asyncapi              # write spec/asyncapi.json
    python -m protocol.asyncapi --check      # exit 1 when the file differs from what would be written
    python -m protocol.asyncapi --validate   # also validate it against AsyncAPI's own JSON Schema

The document describes what PROTOCOL.md specifies, for tools that read AsyncAPI (documentation
generators, code generators, linters): the WebSocket session (§2.3-§10, §15) and the HTTP routes
``GET /ping`` (§2.2) and ``POST /invocations`` (§11), from the point of view of the server; and, as a
separate server, the reference agent's ``POST /invocations`` (its ``agent_*`` schemas).

Every JSON payload is the schema file itself, read from ``spec/schemas/`` when the document is built,
never copied by hand: the schemas are draft 2020-12, so each is a Multi Format Schema Object with
``schemaFormat`` :data:`SCHEMA_FORMAT`. What no schema file describes (binary audio frames and bodies,
the ``/ping`` body) is written here with the section that specifies it. Which schema travels on which
channel, in which direction, is :data:`SESSION_IN`, :data:`SESSION_OUT`, :data:`INVOCATIONS_IN`,
:data:`INVOCATIONS_OUT`, :data:`AGENT_IN` and :data:`AGENT_OUT`; :func:`build_document` refuses a schema
file that none of them names, so a new schema cannot be left out.

Why here: the generator reads the schemas through :mod:`protocol.schemas`, the one reader of
``spec/schemas``, and ``spec/`` stays data only (it is installed as a data package). The document is
validated against the official AsyncAPI 3.0.0 JSON Schema from the npm package
:data:`SPECS_PACKAGE` (fetched with ``npm pack``, like the voices, and checked against its pinned
sha512; nothing of it is committed): :func:`meta_schema`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol import schemas

__all__ = [
    "AGENT_IN",
    "AGENT_OUT",
    "ASYNCAPI_VERSION",
    "DOCUMENT",
    "INVOCATIONS_IN",
    "INVOCATIONS_OUT",
    "SCHEMA_FORMAT",
    "SESSION_IN",
    "SESSION_OUT",
    "SPECS_INTEGRITY",
    "SPECS_PACKAGE",
    "MetaSchemaError",
    "build_document",
    "build_parser",
    "main",
    "meta_schema",
    "render",
    "validate",
]

ASYNCAPI_VERSION = "3.0.0"
"""The AsyncAPI version of the document (the 3.0 specification, the one most tools read)."""

DOCUMENT = schemas.SCHEMA_DIR.parent / "asyncapi.json"
"""Where the document lives: ``spec/asyncapi.json``, beside PROTOCOL.md."""

SCHEMA_FORMAT = "application/schema+json;version=2020-12"
"""The schema format of every payload taken from ``spec/schemas`` (JSON Schema draft 2020-12)."""

SPECS_PACKAGE = "@asyncapi/specs@6.11.1"
"""The npm package that publishes AsyncAPI's JSON Schemas (Apache-2.0), pinned."""
SPECS_INTEGRITY = (
    "sha512-A3WBLqAKGoJ2+6FWFtpjBlCQ1oFCcs4GxF7zsIGvNqp/klGUHjlA3aAcZ9XMMpLGE8zPeYDz2x9FmO6DSuKraQ=="
)
"""The registry's integrity string of that package's tarball (``npm view @asyncapi/specs@6.11.1
dist.integrity``); the tarball is refused unless its sha512 matches."""
SPECS_MEMBER = f"package/schemas/{ASYNCAPI_VERSION}.json"
"""The bundled JSON Schema (draft-07) of AsyncAPI 3.0.0 inside the tarball."""

# --- which schema goes where ------------------------------------------------------------------------

SESSION_IN = (
    "synthesis_request",
    "cancel",
    "close",
    "describe",
    "utterance",
    "append",
    "flush",
    "end",
    "lexicon",
)
"""Client messages of the WebSocket session (§4, §15.1), TEXT or BINARY frames (§3.1)."""
SESSION_OUT = ("synthesis_start", "synthesis_complete", "error", "marks", "capabilities")
"""Server control frames of the session (§5, §4.4), TEXT frames (§3.2); audio frames besides."""
INVOCATIONS_IN = ("invocations_request", "describe")
"""Bodies of ``POST /invocations`` (§11.1, §4.4)."""
INVOCATIONS_OUT = (
    "capabilities",
    "sse_synthesis_start",
    "sse_audio_chunk",
    "sse_synthesis_complete",
    "sse_error",
    "http_error",
)
"""JSON answers of ``POST /invocations``: the ``describe`` answer, the SSE events (§11.4), the error
body (§11.6); audio bodies besides."""
AGENT_IN = ("agent_request",)
"""The reference agent's request body (not part of the protocol)."""
AGENT_OUT = (
    "agent_start",
    "agent_text_delta",
    "agent_audio_stream_start",
    "agent_audio_chunk",
    "agent_audio_stream_end",
    "agent_end",
    "agent_error",
)
"""The reference agent's SSE events, in stream order."""

_AUDIO_FRAME = {
    "name": "audio",
    "title": "Audio frame (server → client)",
    "summary": "PROTOCOL.md §3.3: raw audio of the open bracket, a BINARY message.",
    "description": "Samples in the encoding of the open bracket's synthesis_start (pcm_s16le by default: "
    "signed 16-bit little-endian, one channel, at its sample_rate), no header, a whole number of samples, "
    "at most max_audio_frame_bytes. Never a JSON object under the classification rule of §3.4.",
    "contentType": "application/octet-stream",
    "payload": {"type": "string", "format": "binary"},
}
_AUDIO_BODY = {
    "name": "audioBody",
    "title": "Audio body of POST /invocations",
    "summary": "PROTOCOL.md §11.2, §11.3, §11.5, §11.7: the audio itself (transport binary).",
    "description": "By format: audio/wav (a streamed WAV has RIFF and data sizes 0xFFFFFFFF, §11.2); "
    "audio/pcm;rate=<Hz>;encoding=s16le;channels=1, audio/PCMU;rate=<Hz> or audio/PCMA;rate=<Hz> (§11.3); "
    "audio/mpeg (§11.5); audio/ogg;codecs=opus, audio/flac, audio/aac (§11.7).",
    "contentType": "application/octet-stream",
    "payload": {"type": "string", "format": "binary"},
}
_PING_ANSWER = {
    "name": "pingAnswer",
    "title": "GET /ping answer",
    "summary": "PROTOCOL.md §2.2: 200 once the server can synthesize, 503 before; the body is not "
    "significant.",
    "contentType": "application/json",
    "payload": {"type": "object"},
}
_SECTION = re.compile(r"§[0-9]+(?:\.[0-9]+)*")


class MetaSchemaError(RuntimeError):
    """AsyncAPI's JSON Schema could not be fetched or is not the pinned package."""


def _schema_message(name: str) -> dict[str, Any]:
    schema = schemas.load(name)
    description = schema.get("description", "")
    # "PROTOCOL.md §4.2. Cancels ...": the sections the schema's first sentence cites (agent schemas cite
    # REFERENCE.md, which is not the protocol, and get none).
    first = description.split(". ")[0]
    sections = ", ".join(dict.fromkeys(_SECTION.findall(first))) if first.startswith("PROTOCOL.md") else ""
    message: dict[str, Any] = {
        "name": name,
        "title": schema.get("title", name),
        "contentType": "application/json",
        "payload": {"$ref": f"#/components/schemas/{name}"},
    }
    if sections:
        message["summary"] = f"PROTOCOL.md {sections}"
    if description:
        message["description"] = description
    return message


def _refs(channel: str, names: Sequence[str]) -> list[dict[str, str]]:
    return [{"$ref": f"#/channels/{channel}/messages/{name}"} for name in names]


def _channel_messages(names: Sequence[str]) -> dict[str, Any]:
    return {name: {"$ref": f"#/components/messages/{name}"} for name in dict.fromkeys(names)}


def build_document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the protocol, as a JSON-ready dict (module docstring).

    Raises:
        ValueError: a schema file of ``spec/schemas`` is on no channel, or a channel names a schema that
            does not exist.
    """
    from protocol.messages import PROTOCOL_VERSION

    placed = set(SESSION_IN + SESSION_OUT + INVOCATIONS_IN + INVOCATIONS_OUT + AGENT_IN + AGENT_OUT)
    files = set(schemas.names())
    if placed != files:
        unplaced, unknown = sorted(files - placed), sorted(placed - files)
        raise ValueError(f"schemas on no channel: {unplaced}; channels naming no schema: {unknown}")
    messages: dict[str, Any] = {name: _schema_message(name) for name in sorted(files)}
    messages.update(audio=_AUDIO_FRAME, audioBody=_AUDIO_BODY, pingAnswer=_PING_ANSWER)
    ws = {"ws": {"method": "GET", "bindingVersion": "0.1.0"}}

    def http(method: str) -> dict[str, Any]:
        return {"http": {"method": method, "bindingVersion": "0.3.0"}}

    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "Kokoro bidirectional TTS protocol",
            "version": PROTOCOL_VERSION,
            "description": "Streaming text-to-speech over a WebSocket session and HTTP, as served by a model "
            "container behind Amazon SageMaker AI bidirectional streaming (spec/PROTOCOL.md, the normative "
            "text). Generated by `python -m protocol.asyncapi` from spec/schemas: do not edit.",
            "license": {"name": "Apache-2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "container": {
                "host": "localhost:8080",
                "protocol": "ws",
                "description": "A model container (PROTOCOL.md §2.1): the WebSocket session.",
            },
            "containerHttp": {
                "host": "localhost:8080",
                "protocol": "http",
                "description": "The same container's HTTP routes (PROTOCOL.md §2.2, §11).",
            },
            "agent": {
                "host": "localhost:8080",
                "protocol": "http",
                "description": "The reference agent (reference_agent/): not part of the protocol.",
            },
        },
        "channels": {
            "session": {
                "address": "/invocations-bidirectional-stream",
                "title": "Bidirectional session",
                "description": "One session (PROTOCOL.md §2.3-§10, §15): any number of requests; audio "
                "frames inside the bracket of their request (§6.1).",
                "servers": [{"$ref": "#/servers/container"}],
                "messages": _channel_messages([*SESSION_IN, *SESSION_OUT, "audio"]),
                "bindings": ws,
            },
            "ping": {
                "address": "/ping",
                "title": "Health check",
                "servers": [{"$ref": "#/servers/containerHttp"}],
                "messages": _channel_messages(["pingAnswer"]),
            },
            "invocations": {
                "address": "/invocations",
                "title": "One-shot synthesis",
                "description": "PROTOCOL.md §11: one request, answered with audio (streamed or whole), "
                "server-sent events, the capabilities object, or an error.",
                "servers": [{"$ref": "#/servers/containerHttp"}],
                "messages": _channel_messages([*INVOCATIONS_IN, *INVOCATIONS_OUT, "audioBody"]),
            },
            "agentInvocations": {
                "address": "/invocations",
                "title": "The reference agent",
                "servers": [{"$ref": "#/servers/agent"}],
                "messages": _channel_messages([*AGENT_IN, *AGENT_OUT]),
            },
        },
        "operations": {
            "receiveSessionMessage": {
                "action": "receive",
                "title": "Client messages",
                "channel": {"$ref": "#/channels/session"},
                "messages": _refs("session", SESSION_IN),
            },
            "sendSessionFrame": {
                "action": "send",
                "title": "Server frames",
                "channel": {"$ref": "#/channels/session"},
                "messages": _refs("session", [*SESSION_OUT, "audio"]),
            },
            "answerPing": {
                "action": "receive",
                "title": "GET /ping",
                "channel": {"$ref": "#/channels/ping"},
                "bindings": http("GET"),
                "reply": {"channel": {"$ref": "#/channels/ping"}, "messages": _refs("ping", ["pingAnswer"])},
            },
            "invoke": {
                "action": "receive",
                "title": "POST /invocations",
                "channel": {"$ref": "#/channels/invocations"},
                "messages": _refs("invocations", INVOCATIONS_IN),
                "bindings": http("POST"),
                "reply": {
                    "channel": {"$ref": "#/channels/invocations"},
                    "messages": _refs("invocations", [*INVOCATIONS_OUT, "audioBody"]),
                },
            },
            "invokeAgent": {
                "action": "receive",
                "title": "POST /invocations of the reference agent",
                "channel": {"$ref": "#/channels/agentInvocations"},
                "messages": _refs("agentInvocations", AGENT_IN),
                "bindings": http("POST"),
                "reply": {
                    "channel": {"$ref": "#/channels/agentInvocations"},
                    "messages": _refs("agentInvocations", AGENT_OUT),
                },
            },
        },
        "components": {
            "schemas": {
                name: {"schemaFormat": SCHEMA_FORMAT, "schema": schemas.load(name)} for name in sorted(files)
            },
            "messages": messages,
        },
    }


def render(document: dict[str, Any]) -> str:
    """The document's text as written to :data:`DOCUMENT`: two-space JSON, UTF-8 as is, final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# --- AsyncAPI's own JSON Schema -----------------------------------------------------------------------


def _cache_dir() -> Path:
    configured = os.environ.get("KOKORO_ASSETS_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "kokoro-bidi-tts"


def _integrity_ok(data: bytes) -> bool:
    algorithm, _, digest = SPECS_INTEGRITY.partition("-")
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode() == digest


def meta_schema(cache_dir: Path | None = None) -> dict[str, Any]:
    """AsyncAPI's JSON Schema of version :data:`ASYNCAPI_VERSION` (draft-07, bundled), from the pinned
    npm package :data:`SPECS_PACKAGE`.

    The tarball is fetched once with ``npm pack`` into ``cache_dir`` (default ``$KOKORO_ASSETS_DIR``,
    else ``~/.cache/kokoro-bidi-tts``, the project's asset cache) and checked against
    :data:`SPECS_INTEGRITY` every time it is read.

    Raises:
        MetaSchemaError: npm is missing or failed, or the tarball is not the pinned one.
    """
    folder = cache_dir or _cache_dir()
    tarball = folder / (SPECS_PACKAGE.lstrip("@").replace("/", "-").replace("@", "-") + ".tgz")
    if not tarball.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise MetaSchemaError(f"npm is needed to fetch {SPECS_PACKAGE}; install Node.js (make test does)")
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            done = subprocess.run(
                [npm, "pack", SPECS_PACKAGE, "--pack-destination", tmp],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=300,
            )
            packed = sorted(Path(tmp).glob("*.tgz"))
            if done.returncode != 0 or len(packed) != 1:
                raise MetaSchemaError(f"npm pack {SPECS_PACKAGE} failed: {done.stderr.strip()[-300:]}")
            packed[0].replace(tarball)
    data = tarball.read_bytes()
    if not _integrity_ok(data):
        raise MetaSchemaError(f"{tarball} is not {SPECS_PACKAGE} (sha512 differs); delete it to fetch again")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        member = archive.extractfile(SPECS_MEMBER)
        if member is None:
            raise MetaSchemaError(f"{SPECS_PACKAGE} has no {SPECS_MEMBER}")
        return json.loads(member.read())


def validate(document: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    """Every violation of AsyncAPI's JSON Schema by ``document``, as ``"<path>: <message>"`` lines
    (empty: valid). ``schema`` defaults to :func:`meta_schema`.

    Raises:
        MetaSchemaError: as :func:`meta_schema`.
    """
    import jsonschema

    schema = schema if schema is not None else meta_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"/{'/'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    ]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m protocol.asyncapi`` (module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m protocol.asyncapi",
        description="Generate spec/asyncapi.json (AsyncAPI 3.0) from spec/schemas.",
    )
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the file is stale")
    parser.add_argument(
        "--validate",
        action="store_true",
        help=f"also validate against AsyncAPI's JSON Schema ({SPECS_PACKAGE}, fetched with npm)",
    )
    parser.add_argument(
        "--output", type=Path, default=DOCUMENT, help="the document's file (default spec/asyncapi.json)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m protocol.asyncapi``: write, check or validate the document.

    Returns 0 when done (or up to date and valid), 1 when ``--check`` finds the file stale or
    ``--validate`` finds violations or cannot fetch AsyncAPI's schema, 2 for bad arguments (argparse) or
    an ``--output`` that cannot be written (one line, no traceback).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    document = build_document()
    text = render(document)
    name = args.output
    if args.check:
        current = name.read_text(encoding="utf-8") if name.is_file() else None
        if current != text:
            print(f"{name} is stale: run python -m protocol.asyncapi", file=sys.stderr)
            return 1
    else:
        try:
            name.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"python -m protocol.asyncapi: --output {name}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"wrote {name} ({len(text.encode()):,} bytes)")
    if args.validate:
        try:
            problems = validate(document)
        except MetaSchemaError as exc:
            print(f"cannot validate: {exc}", file=sys.stderr)
            return 1
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            return 1
        print(f"valid AsyncAPI {ASYNCAPI_VERSION} ({SPECS_PACKAGE})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
