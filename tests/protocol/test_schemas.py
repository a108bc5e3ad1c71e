"""The schema files (spec/schemas) and the executable examples of PROTOCOL.md (Appendix A)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from protocol import schemas
from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import Limits
from protocol.messages import (
    FORMATS,
    SAMPLE_RATES,
    SPEED_MAX,
    SPEED_MIN,
    STATUSES,
    VOICE_PATTERN,
    ErrorFrame,
    Marks,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    Utterance,
    parse_client_message,
    parse_invocations_request,
    parse_server_control,
    rfc3339_to_epoch,
)
from protocol.pcm import parse_wav_header
from protocol.voices import KOKORO_VOICES

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")
EXPECTED_SCHEMAS = {
    "synthesis_request",
    "cancel",
    "close",
    "utterance",
    "append",
    "flush",
    "end",
    "synthesis_start",
    "synthesis_complete",
    "error",
    "invocations_request",
    "sse_synthesis_start",
    "sse_audio_chunk",
    "sse_synthesis_complete",
    "sse_error",
    "http_error",
    "describe",
    "capabilities",
    "marks",
    "lexicon",
}
CLIENT_FRAMES = {
    "synthesis_request",
    "cancel",
    "close",
    "describe",
    "utterance",
    "append",
    "flush",
    "end",
    "lexicon",
}
SERVER_FRAMES = {"synthesis_start", "synthesis_complete", "error", "capabilities", "marks"}


# --- the schema files -----------------------------------------------------------------------------------


def test_schema_dir_is_spec_schemas():
    assert schemas.SCHEMA_DIR == ROOT / "spec" / "schemas"
    names = set(schemas.names())
    assert names >= EXPECTED_SCHEMAS
    # The only others are the reference agent's own API (Appendix A).
    assert all(name.startswith("agent_") for name in names - EXPECTED_SCHEMAS)


@pytest.mark.parametrize("name", schemas.names())
def test_schema_is_valid_2020_12_and_documented(name):
    schema = schemas.load(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://kokoro-bidi-tts.invalid/schemas/v1/{name}.schema.json"
    assert schema["title"]
    assert schema["description"]
    if name in EXPECTED_SCHEMAS:
        assert re.search(r"PROTOCOL\.md §\d+\.\d+", schema["description"])
    assert schema["type"] == "object"
    assert "$ref" not in json.dumps(schema)  # self-contained
    assert schemas.validator(name) is schemas.validator(name)


def test_load_returns_a_copy():
    schemas.load("close")["title"] = "changed"
    assert schemas.load("close")["title"] != "changed"


@pytest.mark.parametrize("name", ["nope", "../pyproject", "Close", ""])
def test_unknown_schema_names(name):
    with pytest.raises(KeyError):
        schemas.load(name)
    with pytest.raises(KeyError):
        schemas.validator(name)


def test_validate_raises_the_best_error():
    schemas.validate("close", {"type": "close"})
    with pytest.raises(ValidationError):
        schemas.validate("close", {"type": "cancel"})


def test_appendix_a_lists_every_schema():
    appendix = SPEC[SPEC.index("## Appendix A") :]
    listed = set(re.findall(r"^\| `([a-z_]+)\.schema\.json` \|", appendix, re.M))
    assert listed == EXPECTED_SCHEMAS
    readme = (ROOT / "spec" / "README.md").read_text(encoding="utf-8")
    for name in EXPECTED_SCHEMAS:
        assert f"`{name}`" in readme or f"`{name}`," in readme


def test_constants_agree_with_the_schemas():
    request = schemas.load("synthesis_request")["properties"]
    invocations = schemas.load("invocations_request")["properties"]

    def rules(member_schema: dict) -> dict:
        return {k: v for k, v in member_schema.items() if k != "description"}

    for member in ("voice", "speed", "sample_rate", "request_id", "request_timestamp"):
        assert rules(request[member]) == rules(invocations[member]), member
    assert request["voice"]["pattern"] == f"^{VOICE_PATTERN.pattern}$"
    assert request["sample_rate"]["enum"] == [*SAMPLE_RATES, None]
    assert (request["speed"]["minimum"], request["speed"]["maximum"]) == (SPEED_MIN, SPEED_MAX)
    assert schemas.load("synthesis_complete")["properties"]["status"]["enum"] == list(STATUSES)
    assert invocations["format"]["enum"] == [*FORMATS, None]
    start = schemas.load("synthesis_start")["properties"]
    assert start["sample_rate"]["enum"] == list(SAMPLE_RATES)
    for name in (
        "synthesis_start",
        "synthesis_complete",
        "error",
        "cancel",
        "sse_error",
        "describe",
        "capabilities",
    ):
        request_id = schemas.load(name)["properties"]["request_id"]
        assert (request_id["minLength"], request_id["maxLength"]) == (1, 128), name


def test_schema_patterns_match_the_code():
    """The RFC 3339 pattern of the schema accepts what the code converts, and nothing it refuses."""
    pattern = re.compile(
        schemas.load("synthesis_request")["properties"]["request_timestamp"]["anyOf"][2]["pattern"]
    )
    for value in ("2026-01-01T00:00:00Z", "2026-01-01t00:00:00.5+01:00"):
        assert pattern.search(value) and rfc3339_to_epoch(value) is not None
    for value in ("2026-01-01T00:00:00", "2026-01-01 00:00:00Z", "yesterday"):
        assert not pattern.search(value) and rfc3339_to_epoch(value) is None


# --- section numbering (others cite these) ----------------------------------------------------------------

STABLE_HEADINGS = [
    "## 1. Introduction, terms, conformance levels",
    "## 2. Transport and routes",
    "## 3. Frames",
    "### 3.1 Client frames",
    "### 3.2 Server control frames",
    "### 3.3 Audio frames",
    "### 3.4 The client classification rule",
    "## 4. Client messages",
    "### 4.1 Synthesis request",
    "### 4.2 Cancel",
    "### 4.3 Close",
    "## 5. Server frames",
    "### 5.1 synthesis_start",
    "### 5.2 Audio",
    "### 5.3 synthesis_complete",
    "### 5.4 error",
    "## 6. Ordering",
    "### 6.1 Brackets",
    "### 6.2 Arrival order, never interleaved",
    "### 6.3 Refusals and error frames",
    "## 7. Session lifetime",
    "### 7.1 close drains",
    "### 7.2 cancel, then close: abort",
    "### 7.3 Server shutdown",
    "### 7.4 Client disconnect",
    "## 8. Keepalive",
    "## 9. Errors",
    "### 9.1 The registry",
    "### 9.2 Order of checks",
    "## 10. Limits",
    "## 11. POST /invocations",
    "### 11.1 Request",
    "### 11.2 WAV",
    "### 11.3 Raw PCM",
    "### 11.4 Server-sent events",
    "### 11.5 MP3",
    "### 11.6 Errors",
    "## 12. Mapping onto SageMaker",
    "## 13. Security considerations",
    "## Appendix A. JSON Schemas",
]


def test_section_numbers_are_stable():
    headings = re.findall(r"^(#{2,4} .+)$", SPEC, re.M)
    for expected in STABLE_HEADINGS:
        assert any(h.startswith(expected) for h in headings), expected
    numbers = [m.group(1) for h in headings if (m := re.match(r"#+ (\d+(?:\.\d+)*)\.? ", h))]
    assert len(numbers) == len(set(numbers)), "duplicate section numbers"
    keys = [tuple(int(p) for p in n.split(".")) for n in numbers]
    assert keys == sorted(keys), "sections out of order"


def test_cited_sections_exist():
    """Every "§N" or "§N.M" the spec cites is a heading of the spec."""
    numbers = {
        m.group(1)
        for h in re.findall(r"^#{2,4} .+$", SPEC, re.M)
        if (m := re.match(r"#+ (\d+(?:\.\d+)*)", h))
    }
    own = SPEC.split("## Appendix B")[0]
    # Citations of other documents are written "REFERENCE.md §N" or "RFC ... §N".
    cited = set(re.findall(r"(?<!REFERENCE\.md )(?<!\d )(?<!RFC \d{4} )§(\d+(?:\.\d+)*)", own))
    assert cited <= numbers, sorted(cited - numbers)


# --- executable examples of PROTOCOL.md -----------------------------------------------------------------

BLOCK = re.compile(r"^(?P<indent>[ ]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)


def blocks(kind: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block whose info string starts with ``kind``."""
    found = []
    for match in BLOCK.finditer(SPEC):
        info = match.group("info").strip()
        if info.split(" ")[0] == kind:
            indent = len(match.group("indent"))
            body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
            found.append((info, body))
    return found


def stamp_of(obj: dict) -> float | None:
    value = obj.get("request_timestamp")
    if isinstance(value, str):
        return rfc3339_to_epoch(value)
    return value


JSON_EXAMPLES = [(info.split("frame=")[1], body) for info, body in blocks("json") if "frame=" in info]


def test_examples_were_found():
    names = {name for name, _ in JSON_EXAMPLES}
    assert names >= CLIENT_FRAMES | SERVER_FRAMES | {"invocations_request", "http_error"}
    assert len(blocks("exchange")) >= 4
    assert len(blocks("sse")) >= 2
    assert len(blocks("hex")) >= 2


@pytest.mark.parametrize(("name", "body"), JSON_EXAMPLES, ids=[name for name, _ in JSON_EXAMPLES])
def test_json_example(name, body):
    obj = json.loads(body)
    schemas.validate(name, obj)
    now = (stamp_of(obj) or 0) + 1
    if name in CLIENT_FRAMES:
        parse_client_message(body, now=now, known_voices=KOKORO_VOICES, voice_blends=True, lexicon=True)
    elif name == "invocations_request":
        parse_invocations_request(body, now=now, known_voices=KOKORO_VOICES, voice_blends=True, lexicon=True)
    elif name in SERVER_FRAMES:
        frame = parse_server_control(obj)
        assert json.loads(frame.to_json()) == obj  # examples are what the code writes
    if isinstance(obj.get("words"), list):
        assert all(w["start_s"] <= w["end_s"] for w in obj["words"])


CLIENT_LINE = re.compile(r"C: (?P<json>\{.*\})(?:\s+# (?P<how>rejected|session): (?P<code>[a-z_]+))?\s*")
SERVER_LINE = re.compile(r"S: (?:(?P<json>\{.*\})|<audio (?P<audio>\d+) bytes>)\s*")


@pytest.mark.parametrize("body", [body for _, body in blocks("exchange")])
def test_exchange_example(body):
    """Replay one example: client lines parse or fail as annotated; server lines obey §3.3 and §6."""
    now = None
    accepted: list[str] = []  # request ids in acceptance order (§6.2)
    expected_errors: list[tuple[str, str | None]] = []  # (code, request_id) the server must answer
    open_bracket: SynthesisStart | None = None
    audio_bytes = 0
    answered = 0
    max_frame = Limits().max_audio_frame_bytes
    for line in body.splitlines():
        if line.startswith("# now: "):
            now = float(line.removeprefix("# now: "))
        elif line.startswith("C: "):
            match = CLIENT_LINE.fullmatch(line)
            assert match, line
            if match["how"] == "rejected":
                with pytest.raises(ProtocolError) as info:
                    parse_client_message(match["json"], now=now, known_voices=KOKORO_VOICES)
                assert info.value.code == match["code"], line
                expected_errors.append((match["code"], info.value.request_id))
                continue
            message = parse_client_message(match["json"], now=now, known_voices=KOKORO_VOICES)
            if match["how"] == "session":
                expected_errors.append((match["code"], getattr(message, "request_id", None)))
            elif isinstance(message, SynthesisRequest | Utterance):
                assert message.request_id is not None, "examples name their requests"
                accepted.append(message.request_id)
        elif line.startswith("S: "):
            match = SERVER_LINE.fullmatch(line)
            assert match, line
            if match["audio"]:
                size = int(match["audio"])
                assert open_bracket is not None, "audio outside a bracket (§6.1)"
                assert size % 2 == 0 and 2 <= size <= max_frame, "§3.3.1"
                audio_bytes += size
                continue
            obj = json.loads(match["json"])
            schemas.validate(obj["type"], obj)
            frame = parse_server_control(obj)
            assert json.loads(frame.to_json()) == obj
            if isinstance(frame, SynthesisStart):
                assert open_bracket is None, "brackets never overlap (§6.2)"
                assert frame.request_id == accepted[answered], "answered in arrival order (§6.2)"
                open_bracket, audio_bytes = frame, 0
            elif isinstance(frame, SynthesisComplete):
                assert open_bracket is not None and frame.request_id == open_bracket.request_id, "§6.1"
                assert frame.audio_bytes == audio_bytes, "§5.3"
                assert math.isclose(frame.total_duration_s, audio_bytes / 2 / open_bracket.sample_rate)
                open_bracket = None
                answered += 1
            elif isinstance(frame, Marks):
                assert open_bracket is not None and frame.request_id == open_bracket.request_id, "§5.5"
                assert frame.end_s * 2 * open_bracket.sample_rate >= audio_bytes, "before later audio (§5.5)"
            else:
                assert isinstance(frame, ErrorFrame)
                if frame.code == ErrorCode.INTERNAL_ERROR:
                    assert open_bracket is not None and frame.request_id == open_bracket.request_id
                else:
                    assert (frame.code, frame.request_id) == expected_errors.pop(0), (
                        "one error per refusal (§6.3)"
                    )
                assert not frame.message.startswith(str(frame.code)), "message repeats the code (§9.3)"
        elif line.strip():
            assert line.startswith("#"), line
    assert open_bracket is None and answered == len(accepted), "every accepted request is answered (§6.1)"
    assert not expected_errors, "every refusal is answered (§6.3)"


SSE_EVENT = re.compile(r"event: (?P<event>[a-z_]+)\ndata: (?P<data>[^\n]+)\n\n")


@pytest.mark.parametrize("body", [body for _, body in blocks("sse")])
def test_sse_example(body):
    """The exact byte framing of §11.4 and the event rules, on each example stream."""
    events = []
    position = 0
    while position < len(body):
        match = SSE_EVENT.match(body, position)
        assert match, f"not an event at byte {position}: {body[position : position + 40]!r}"
        events.append((match["event"], match["data"]))
        position = match.end()
    objects = []
    for event, data in events:
        obj = json.loads(data)
        assert obj["type"] == event
        assert data == json.dumps(obj, separators=(",", ":"), ensure_ascii=False), "compact JSON (§11.4)"
        schemas.validate(f"sse_{event}", obj)
        objects.append(obj)
    start, *chunks, last = objects
    assert start["type"] == "synthesis_start"
    assert [c["type"] for c in chunks] == ["audio_chunk"] * len(chunks)
    assert [c["seq"] for c in chunks] == list(range(len(chunks)))
    decoded = b""
    for chunk in chunks:
        piece = base64.b64decode(chunk["data"], validate=True)
        assert base64.b64encode(piece).decode() == chunk["data"], "canonical base64"
        decoded += piece
    assert last["type"] in ("synthesis_complete", "error")
    assert last["request_id"] == start["request_id"]
    if last["type"] == "synthesis_complete":
        assert last["audio_bytes"] == len(decoded) and last["chunks"] == len(chunks)
        if start["format"] == "pcm":
            assert all(len(base64.b64decode(c["data"])) % 2 == 0 for c in chunks)
            assert math.isclose(last["total_duration_s"], len(decoded) / 2 / start["sample_rate"])
        if start["format"] == "wav":  # the header rides in front of the first chunk, marked (§11.4)
            assert chunks[0]["header_bytes"] == 44 and all("header_bytes" not in c for c in chunks[1:])
            header = parse_wav_header(decoded)
            assert header.header_bytes == 44 and header.data_bytes is None  # streamed: 0xFFFFFFFF
            assert math.isclose(last["total_duration_s"], (len(decoded) - 44) / 2 / start["sample_rate"])
    assert all("header_bytes" not in c for c in chunks) or start["format"] == "wav"
    with pytest.raises(binascii.Error):
        base64.b64decode("AAABAP//AgA", validate=True)  # unpadded is refused by strict decoders


@pytest.mark.parametrize("info_body", blocks("hex"), ids=lambda ib: ib[0])
def test_wav_header_example(info_body):
    info, body = info_body
    params = dict(item.split("=") for item in info.split()[2:])
    sample_rate = int(params["sample_rate"])
    data_bytes = params.get("data_bytes")
    riff, size = (0xFFFFFFFF, 0xFFFFFFFF) if data_bytes is None else (36 + int(data_bytes), int(data_bytes))
    expected = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        riff,
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        sample_rate,
        2 * sample_rate,
        2,
        16,
        b"data",
        size,
    )
    assert bytes.fromhex(body) == expected
    assert len(expected) == 44
    assert int(sample_rate) in SAMPLE_RATES
