"""§11 POST /invocations through InvokeEndpoint and InvokeEndpointWithResponseStream (boto3), §12.2 split
policies, and the service's errors (§11.6, §12.5)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from botocore.exceptions import ClientError, EventStreamError

from conformance.engine import deadline
from conformance.engine.audio import check_speech, rms
from conformance.engine.bodies import decode_pcm, decode_sse, decode_wav
from conformance.engine.case import Case, Level, Unimplemented, case, param
from conformance.engine.probe import Probe
from conformance.engine.texts import FAST, SHORT, TWO_SENTENCES
from protocol import schemas
from protocol.encodings import decode_to_pcm16
from protocol.reader import code_named_in
from protocol.sse import SSEDecoder
from simulator import FaultPlan, SplitPolicy

MAX_PARTS = 200_000
"""PayloadParts of one body read at most (a byte-split body of these cases is about 16,000)."""

RATE = 8000
"""Bodies are requested at 8 kHz: a third of the bytes of 24 kHz, which keeps byte-by-byte splits quick."""

SPLITS = ("fixed:7", "random:1-97", "byte", "misaligned")
"""The simulator's split policies other than ``none`` (simulator/splitting.py); each cuts the body into
PayloadParts differently, down to single bytes and cuts that never fall on a sample boundary."""

_PARTS = (
    "Consumers buffer and cut at their own delimiters: blank lines for SSE (§11.4), whole samples for PCM."
)


def _body(fmt: str, transport: str = "binary", **extra: Any) -> dict[str, Any]:
    return {"text": SHORT, "speed": FAST, "sample_rate": RATE, "format": fmt, "transport": transport, **extra}


@contextlib.contextmanager
def _split(conf: Probe, policy: str | None) -> Iterator[None]:
    if policy is None:
        yield
        return
    # The stream ends with the case's deadline: a server that answers megabytes must not keep the simulator
    # splitting them after the case is over (as for the sessions of 12.3).
    with conf.configure(split=SplitPolicy.parse(policy), seed=11, max_session_s=deadline.remaining() + 1.0):
        yield


def _stream(
    conf: Probe, body: dict[str, Any], policy: str | None = None, **kwargs: Any
) -> tuple[str, list[bytes]]:
    """InvokeEndpointWithResponseStream: (content type, PayloadPart bytes in order)."""
    content_type = kwargs.pop("content_type", "application/json")

    def call() -> tuple[str, list[bytes]]:
        response = conf.runtime().invoke_endpoint_with_response_stream(
            EndpointName=conf.target.endpoint_name,
            Body=json.dumps(body).encode(),
            ContentType=content_type,
            **kwargs,
        )
        parts: list[bytes] = []
        for event in response["Body"]:
            if "PayloadPart" in event:
                parts.append(event["PayloadPart"]["Bytes"])
                if len(parts) > MAX_PARTS:
                    response["Body"].close()
                    raise AssertionError(
                        f"the body came in more than {MAX_PARTS} parts; the suite stopped reading"
                    )
        return response.get("ContentType", ""), parts

    with _split(conf, policy):
        content, parts = conf.blocking(call, "InvokeEndpointWithResponseStream answered")
    conf.observe(content_type=content, parts=len(parts), bytes=sum(map(len, parts)))
    return content, parts


def _check_pcm(conf: Probe, pcm: bytes) -> None:
    problems = check_speech(pcm, RATE, SHORT, FAST)
    conf.observe(audio_s=len(pcm) / 2 / RATE)
    assert not problems, "; ".join(problems)


def _wav(conf: Probe, policy: str | None) -> None:
    content_type, parts = _stream(conf, _body("wav"), policy)
    assert content_type.split(";")[0].strip() == "audio/wav", f"Content-Type {content_type!r}"
    _check_pcm(conf, decode_wav(parts, sample_rate=RATE, streamed=True))


def _pcm(conf: Probe, policy: str | None) -> None:
    content_type, parts = _stream(conf, _body("pcm"), policy)
    expected = f"audio/pcm;rate={RATE};encoding=s16le;channels=1"
    assert content_type.replace(" ", "") == expected, f"Content-Type {content_type!r}, expected {expected!r}"
    _check_pcm(conf, decode_pcm(parts))


def _sse(conf: Probe, policy: str | None) -> None:
    content_type, parts = _stream(conf, _body("wav", "sse"), policy)
    assert content_type.split(";")[0].strip() == "text/event-stream", f"Content-Type {content_type!r}"
    sse = decode_sse(parts)
    assert sse.types[-1] == "synthesis_complete", f"the stream ended with {sse.last()}"
    start = sse.events[0][1]
    assert (start["sample_rate"], start["format"]) == (RATE, "wav"), f"synthesis_start: {start}"
    _check_pcm(conf, decode_wav([sse.audio], sample_rate=RATE, streamed=True))


@case(
    "11.2.1",
    "§11.2",
    Level.MUST,
    requirements=(
        "R11.2-2",
        "R11.2-1",
    ),
    requirement="the header's RIFF size (bytes 4–7) and data size (bytes 40–43) MUST both be "
    "**`0xFFFFFFFF`**",
    description="InvokeEndpointWithResponseStream with format wav (streamed, the default), 8 kHz",
    expectation="Content-Type audio/wav; a 44-byte header for 8000 Hz mono 16-bit with 0xFFFFFFFF sizes; "
    "then whole samples of plausible speech",
)
def test_wav_streamed(conf: Probe) -> None:
    _wav(conf, None)


@case(
    "11.2.2",
    "§11.2",
    Level.MUST,
    requirements=(
        "R11.2-3",
        "R11.2-1",
    ),
    requirement="`stream: false`: the sizes MUST be exact (RIFF size = 36 + data bytes) and the "
    "response MUST have a `Content-Length`.",
    description="InvokeEndpoint with format wav and stream false, 8 kHz",
    expectation="Content-Type audio/wav (as streamed, 11.2.1); a 44-byte header with exact RIFF and data "
    "sizes, then plausible speech",
)
def test_wav_whole(conf: Probe) -> None:
    def call() -> tuple[str, bytes]:
        response = conf.runtime().invoke_endpoint(
            EndpointName=conf.target.endpoint_name,
            Body=json.dumps(_body("wav", stream=False)).encode(),
            ContentType="application/json",
        )
        return response.get("ContentType", ""), response["Body"].read()

    content_type, body = conf.blocking(call, "InvokeEndpoint answered")
    conf.observe(content_type=content_type, bytes=len(body))
    assert content_type.split(";")[0].strip() == "audio/wav", f"Content-Type {content_type!r}"
    _check_pcm(conf, decode_wav([body], sample_rate=RATE, streamed=False))


@case(
    "11.1.1",
    "§11.1",
    Level.MUST,
    requirements=("R11.1-1",),
    requirement="The server MUST NOT require a particular `Content-Type` (SageMaker callers set it freely)",
    description="InvokeEndpointWithResponseStream with Content-Type 'text/plain; charset=utf-8', format pcm",
    expectation="the body is plausible speech",
)
def test_any_content_type(conf: Probe) -> None:
    _, parts = _stream(conf, _body("pcm"), content_type="text/plain; charset=utf-8")
    _check_pcm(conf, decode_pcm(parts))


@case(
    "11.3.1",
    "§11.3",
    Level.MUST,
    requirements=("R11.3-1",),
    requirement="`Content-Type: audio/pcm;rate=<sample_rate>;encoding=s16le;channels=1`",
    description="InvokeEndpointWithResponseStream with format pcm, 8 kHz",
    expectation="Content-Type audio/pcm;rate=8000;encoding=s16le;channels=1; the body is whole samples of "
    "plausible speech",
)
def test_pcm_streamed(conf: Probe) -> None:
    _pcm(conf, None)


@case(
    "11.4.1",
    "§11.4",
    Level.MUST,
    requirements=(
        "R11.4-5",
        "R11.4-6b",
    ),
    requirement="Every event the server sends MUST be **exactly** these UTF-8 bytes",
    description="InvokeEndpointWithResponseStream with transport sse, format wav, 8 kHz",
    expectation="Content-Type text/event-stream; only 'event: <type>\\ndata: <JSON>\\n\\n' blocks; "
    "synthesis_start, audio_chunk (seq 0, 1, ...), synthesis_complete, each valid against its schema; the "
    "chunks, each base64-decoded on its own, are a streamed WAV of plausible speech whose size "
    "synthesis_complete states",
)
def test_sse(conf: Probe) -> None:
    _sse(conf, None)


@case(
    "11.4.2",
    "§11.4",
    Level.SHOULD,
    requirements=("R11.4-7",),
    requirement="the first `audio_chunk` of a `wav` stream SHOULD carry the member `header_bytes` with the "
    "value `44`",
    description="InvokeEndpointWithResponseStream with transport sse, format wav, 8 kHz; each event read on "
    "its own with a WHATWG event-stream decoder",
    expectation="the first audio_chunk carries header_bytes: 44; no other chunk carries it",
)
def test_sse_wav_header_bytes(conf: Probe) -> None:
    _, parts = _stream(conf, _body("wav", "sse"))
    decoder = SSEDecoder()
    chunks = []
    for event in (e for part in parts for e in decoder.feed(part)):
        obj = _json_or_none(event.data)
        if event.event == "audio_chunk" and isinstance(obj, dict):
            chunks.append(obj)
    assert chunks, "the stream has no audio_chunk event that holds a JSON object"
    marked = [(n, c.get("header_bytes")) for n, c in enumerate(chunks) if "header_bytes" in c]
    conf.observe(chunks=len(chunks), header_bytes=marked)
    assert chunks[0].get("header_bytes") == 44, (
        f"the first audio_chunk of the wav stream has header_bytes {chunks[0].get('header_bytes')!r}, not 44"
    )
    assert len(marked) == 1, f"audio_chunk events other than the first carry header_bytes: {marked[1:]}"


G711_TYPES = {"pcm_mulaw": "audio/pcmu", "pcm_alaw": "audio/pcma"}
"""The registered types of RFC 4856 for a G.711 body (§11.3), lowercased: media types ignore case."""

_G711_TYPE_CONDITION = {"pcm_mulaw": "R11.3-2b", "pcm_alaw": "R11.3-2c"}
"""The condition of §11.3's G.711 rule (R11.3-2) that names each encoding's type."""


def _g711(conf: Probe, name: str) -> None:
    try:
        content_type, parts = _stream(conf, _body("pcm", encoding=name))
    except ClientError as exc:
        original = str(exc.response.get("OriginalMessage", ""))
        if exc.response.get("OriginalStatusCode") == 400 and "unsupported_encoding" in original:
            raise Unimplemented(f"the server does not offer {name} (400 unsupported_encoding)") from None
        raise
    declared = content_type.replace(" ", "").lower()
    if declared == f"audio/pcm;rate={RATE};encoding=s16le;channels=1":
        raise Unimplemented(f"the server ignored encoding {name} and answered PCM16 (version 1)")
    expected = f"{G711_TYPES[name]};rate={RATE}"
    assert declared == expected, f"asked for {name}: Content-Type {content_type!r}, not {expected!r}"
    decoded = decode_to_pcm16(b"".join(parts), name)
    _check_pcm(conf, decoded)
    # The same text as PCM16: as many samples, as loud (within G.711's error).
    linear = decode_pcm(_stream(conf, _body("pcm"))[1])
    samples, reference = len(decoded) // 2, len(linear) // 2
    level_db = 20 * np.log10(max(rms(decoded), 1e-9) / max(rms(linear), 1e-9))
    conf.observe(samples=samples, pcm16_samples=reference, level_vs_pcm16_db=round(float(level_db), 2))
    assert abs(samples - reference) <= 0.05 * reference, (
        f"{samples} samples of {name} against {reference} of PCM16 for the same text: not one byte a sample"
    )
    assert abs(level_db) <= 2.0, f"decoded {name} is {level_db:.1f} dB off the PCM16 answer's level"


@pytest.mark.parametrize(
    "name",
    [
        param(
            name,
            Case(
                f"11.3.{n}",
                "§11.3",
                Level.MUST,
                'With `"encoding": "pcm_mulaw"` or `"pcm_alaw"` the body MUST be G.711 codes instead, '
                "one byte per sample, no header, under the registered types of RFC 4856",
                f"InvokeEndpointWithResponseStream with format pcm, encoding {name}, 8 kHz, and the same "
                "text as pcm_s16le",
                f"Content-Type {G711_TYPES[name].replace('pcm', 'PCM')};rate=8000; the body, decoded with a "
                "G.711 decoder, is plausible speech as many samples long and as loud (±2 dB) as the PCM16 "
                "body; a server without it answers 400 unsupported_encoding or PCM16 (UNIMPLEMENTED)",
                requirements=("R11.3-2a", _G711_TYPE_CONDITION[name], "R11.3-2d"),
            ),
        )
        for n, name in enumerate(G711_TYPES, 2)
    ],
)
def test_g711_body(conf: Probe, name: str) -> None:
    _g711(conf, name)


@case(
    "11.3.4",
    "§11.3",
    Level.MUST,
    requirements=("R11.3-2a", "R11.3-2b", "R11.3-2e"),
    requirement='With `"encoding": "pcm_mulaw"` or `"pcm_alaw"` the body MUST be G.711 codes instead, '
    "one byte per sample, no header, under the registered types of RFC 4856",
    description="InvokeEndpoint (not streamed) with format pcm, encoding pcm_mulaw, stream false, 8 kHz",
    expectation="Content-Type audio/PCMU;rate=8000 and a body of G.711 codes that decode to plausible "
    "speech, as when streamed (11.3.2); a server without pcm_mulaw answers 400 unsupported_encoding "
    "(UNIMPLEMENTED)",
)
def test_g711_whole(conf: Probe) -> None:
    """A body answered whole takes another path than a streamed one in most servers (a buffer, a length):
    its Content-Type must still name the encoding (found by mutation testing: the reference server's whole
    body once said PCM16 while carrying G.711 codes)."""

    def call() -> tuple[str, bytes]:
        response = conf.runtime().invoke_endpoint(
            EndpointName=conf.target.endpoint_name,
            Body=json.dumps(_body("pcm", encoding="pcm_mulaw", stream=False)).encode(),
            ContentType="application/json",
        )
        return response.get("ContentType", ""), response["Body"].read()

    try:
        content_type, body = conf.blocking(call, "InvokeEndpoint answered")
    except ClientError as exc:
        original = str(exc.response.get("OriginalMessage", ""))
        if exc.response.get("OriginalStatusCode") == 400 and "unsupported_encoding" in original:
            raise Unimplemented("the server does not offer pcm_mulaw (400 unsupported_encoding)") from None
        raise
    declared = content_type.replace(" ", "").lower()
    conf.observe(content_type=content_type, bytes=len(body))
    if declared == f"audio/pcm;rate={RATE};encoding=s16le;channels=1" and len(body) % 2 == 0:
        # Either PCM16 (the encoding ignored: version 1) or G.711 mislabelled: the codes tell.
        as_pcm16 = check_speech(body, RATE, SHORT, FAST)
        if not as_pcm16:
            raise Unimplemented("the server ignored encoding pcm_mulaw and answered PCM16 (version 1)")
    expected = f"{G711_TYPES['pcm_mulaw']};rate={RATE}"
    assert declared == expected, (
        f"asked for pcm_mulaw, whole: Content-Type {content_type!r}, not {expected!r}"
    )
    _check_pcm(conf, decode_to_pcm16(body, "pcm_mulaw"))


def _split_cases(number: int, what: str, decoder: str, requirements: tuple[str, ...]) -> list[Any]:
    return [
        param(
            policy,
            Case(
                f"12.2.{number}.{n}",
                "§12.2",
                Level.MUST,
                _PARTS,
                f"{what} with the simulator splitting the body with policy {policy}",
                f"the body, {decoder}, is the same valid body as without splitting",
                requirements=requirements,
            ),
        )
        for n, policy in enumerate(SPLITS, 1)
    ]


@pytest.mark.parametrize(
    "policy",
    _split_cases(1, "a streamed WAV (11.2.1)", "joined and cut after its header", ("R11.2-2", "R11.2-1")),
)
def test_wav_under_split_policy(conf: Probe, policy: str) -> None:
    _wav(conf, policy)


@pytest.mark.parametrize(
    "policy", _split_cases(2, "a PCM body (11.3.1)", "joined into whole samples", ("R11.3-1",))
)
def test_pcm_under_split_policy(conf: Probe, policy: str) -> None:
    _pcm(conf, policy)


@pytest.mark.parametrize(
    "policy",
    _split_cases(3, "an SSE body (11.4.1)", "decoded incrementally part by part", ("R11.4-5", "R11.4-6b")),
)
def test_sse_under_split_policy(conf: Probe, policy: str) -> None:
    _sse(conf, policy)


@case(
    "11.5.1",
    "§11.5",
    Level.MAY,
    requirements=("R11.5-1",),
    requirement="OPTIONAL. `Content-Type: audio/mpeg`.",
    description="InvokeEndpointWithResponseStream with format mp3",
    expectation="Content-Type audio/mpeg and a body that starts with an MPEG audio frame header; a server "
    "without MP3 answers 400 unsupported_format (verdict UNIMPLEMENTED)",
)
def test_mp3(conf: Probe) -> None:
    try:
        content_type, parts = _stream(conf, _body("mp3"))
    except ClientError as exc:
        original = exc.response.get("OriginalMessage", "")
        if exc.response.get("OriginalStatusCode") == 400 and "unsupported_format" in original:
            raise Unimplemented("the server does not offer MP3 (400 unsupported_format)") from None
        raise
    body = b"".join(parts)
    assert content_type.split(";")[0].strip() == "audio/mpeg", f"Content-Type {content_type!r}"
    assert len(body) > 4 and body[0] == 0xFF and body[1] & 0xE0 == 0xE0, (
        f"no MPEG frame sync at the start: {body[:4]!r}"
    )


# --- errors (§11.6) ---------------------------------------------------------------------------------------

_REFUSALS: list[tuple[str, bytes, int, str]] = [
    ("a body that is not JSON", b"{", 400, "invalid_json"),
    ("a JSON array", b"[]", 400, "not_an_object"),
    ("empty text", json.dumps({"text": ""}).encode(), 400, "text_required"),
    ("an unknown voice", json.dumps({"text": SHORT, "voice": "zz_nobody"}).encode(), 400, "invalid_voice"),
    ("stream 'yes'", json.dumps({"text": SHORT, "stream": "yes"}).encode(), 400, "invalid_field"),
    (
        "transport 'websocket'",
        json.dumps({"text": SHORT, "transport": "websocket"}).encode(),
        400,
        "invalid_field",
    ),
    ("format 'ogg'", json.dumps({"text": SHORT, "format": "ogg"}).encode(), 400, "unsupported_format"),
    (
        "a stale request_timestamp (1.0)",
        json.dumps({"text": SHORT, "request_timestamp": 1.0}).encode(),
        408,
        "request_stale",
    ),
    ("text of 10,001 characters", json.dumps({"text": "a" * 10_001}).encode(), 413, "text_too_long"),
    (
        "a body of 70,000 bytes",
        json.dumps({"text": SHORT, "padding": "x" * 69_950}).encode(),
        413,
        "message_too_large",
    ),
]


def _refusal(conf: Probe, body: bytes) -> dict[str, Any]:
    """InvokeEndpoint with ``body``, which the container must refuse: the service's error response."""

    def call() -> dict[str, Any]:
        try:
            response = conf.runtime().invoke_endpoint(
                EndpointName=conf.target.endpoint_name, Body=body, ContentType="application/json"
            )
        except ClientError as exc:
            return exc.response
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return {"accepted": True, "status": status, "body": response["Body"].read()[:200]}

    response = conf.blocking(call, "InvokeEndpoint answered")
    assert not response.get("accepted"), (
        f"the container accepted the request (HTTP {response.get('status')}, body {response.get('body')!r})"
    )
    conf.observe(
        error=response.get("Error"),
        original_status=response.get("OriginalStatusCode"),
        original_message=str(response.get("OriginalMessage"))[:300],
    )
    return response


def _json_or_none(text: object) -> Any:
    try:
        return json.loads(text) if isinstance(text, str | bytes) else None
    except (ValueError, RecursionError):
        return None


def _refusal_code(original: object) -> str | None:
    """The code a refusal body carries: ``error.code`` (§11.6), or a registry code the body names (the AWS
    sample answered ``{"error": "request_stale"}``; a client searching the body for the code works with both).
    """
    body = _json_or_none(original)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        return error["code"]
    return code_named_in(original if isinstance(original, str) else None)


@pytest.mark.parametrize(
    "row",
    [
        param(
            row,
            Case(
                f"11.6.{n}",
                "§11.6",
                Level.MUST,
                "A refusal found before the response starts MUST be answered with the HTTP status of §9.1 "
                "and a JSON body",
                f"InvokeEndpoint with {row[0]}",
                f"ModelError (424) with OriginalStatusCode {row[2]} and a body naming {row[3]} (its shape is "
                "judged by 11.6.11)",
                requirements=("R11.6-2a",),
            ),
        )
        for n, row in enumerate(_REFUSALS, 1)
    ],
)
def test_refused_invocation(conf: Probe, row: tuple[str, bytes, int, str]) -> None:
    _, body, status, code = row
    response = _refusal(conf, body)
    error = response.get("Error") or {}
    assert error.get("Code") == "ModelError", f"the service answered {error}"
    assert response.get("OriginalStatusCode") == status, (
        f"the container answered {response.get('OriginalStatusCode')}, expected {status}"
    )
    original = response.get("OriginalMessage", "")
    assert _refusal_code(original) == code, (
        f"the container's body names no code {code}: {str(original)[:200]!r}"
    )


@case(
    "11.6.11",
    "§11.6",
    Level.MUST,
    requirement="A refusal found before the response starts MUST be answered with the HTTP status of §9.1 "
    "and a JSON body (`Content-Type: application/json`, schema `http_error.schema.json`)",
    description="InvokeEndpoint with empty text; read the container's refusal body (OriginalMessage)",
    expectation='the body validates against http_error.schema.json: {"error": {"code": "text_required", '
    '"message": ...}}',
    requirements=("R11.6-2b",),
)
def test_refusal_body_shape(conf: Probe) -> None:
    response = _refusal(conf, json.dumps({"text": ""}).encode())
    original = response.get("OriginalMessage", "")
    body = _json_or_none(original)
    assert body is not None, f"the refusal body is not JSON: {str(original)[:200]!r}"
    problems = sorted(e.message for e in schemas.validator("http_error").iter_errors(body))
    assert not problems, (
        f"the refusal body {str(original)[:200]!r} breaks http_error.schema.json: {problems[:3]}"
    )


_HTTP_LAYER = (
    ("GET", "/no-such-route", 404, "not_found"),
    ("GET", "/invocations", 405, "method_not_allowed"),
)
"""Requests no protocol rule answers (§11.6): a path the container does not serve, a method a path does not
take."""


@case(
    "11.6.12",
    "§11.6",
    Level.SHOULD,
    requirements=("R11.6-3",),
    requirement="A server SHOULD use it for the errors of its HTTP layer too: `404` with `not_found` for a "
    "path it does not serve, `405` with `method_not_allowed` for a method a path does not take.",
    description="straight to the container (SageMaker routes neither): "
    + "; ".join(f"{method} {path}" for method, path, _, _ in _HTTP_LAYER),
    expectation="; ".join(
        f"{status} with a body of http_error.schema.json naming {code}" for _, _, status, code in _HTTP_LAYER
    ),
)
def test_http_layer_errors_in_the_one_shape(conf: Probe) -> None:
    url = conf.require_container("send it requests SageMaker does not route")
    problems = []
    for method, path, status, code in _HTTP_LAYER:

        def call(method: str = method, path: str = path) -> httpx.Response:
            return httpx.request(method, f"{url}{path}", timeout=deadline.bound(10.0))

        response = conf.blocking(call, f"{method} {path} answered")
        body = _json_or_none(response.content)
        shape = [] if body is None else list(schemas.validator("http_error").iter_errors(body))
        error = body.get("error") if isinstance(body, dict) else None
        seen = error.get("code") if isinstance(error, dict) else None
        if response.status_code != status or body is None or shape or seen != code:
            problems.append(
                f"{method} {path}: {response.status_code} {response.headers.get('content-type')!r} "
                f"{response.content[:120]!r} (expected {status} with code {code})"
            )
    assert not problems, "; ".join(problems)


MAX_INVOCATIONS_CHECKED = 256
"""Most ``max_invocations`` the slot case counts through: a server that answers more at once is checked up to
this many (each invocation is a short synthesis: about 0.15 s on Kokoro-82M's CPU reference)."""
ABANDON_EVERY = 8
"""Every this many invocations, one more whose caller leaves after the first bytes of the streamed answer."""
AT_ONCE_TRIES = 5
"""How many times the invocations sent at once are sent again while the server answers them all
``server_busy`` (still busy with an earlier case's work), a second apart."""
RELEASE_WAIT_S = 3.0
"""How long a ``queue_full`` right after a left invocation is asked again: the server frees that slot when it
sees its caller has gone, not at once."""


def _queue_full(response: httpx.Response) -> bool:
    """Whether ``response`` refuses its invocation with ``queue_full`` (§11.6)."""
    return response.status_code != 200 and _refusal_code(response.text) == "queue_full"


def _max_invocations(url: str) -> int:
    """``limits.max_invocations`` from ``POST /invocations`` ``describe`` (§4.4, §11.1); the default of §10
    (64) when the server does not describe itself."""
    response = httpx.post(f"{url}/invocations", json={"type": "describe"}, timeout=deadline.bound(10.0))
    body = _json_or_none(response.content) if response.status_code == 200 else None
    limits = body.get("limits") if isinstance(body, dict) else None
    value = limits.get("max_invocations") if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 64


@case(
    "11.6.13",
    "§11.6",
    Level.MUST,
    requirements=("R11.6-4a", "R11.6-4b"),
    requirement="a server MUST NOT refuse a `POST /invocations` with it while fewer than `max_invocations` "
    "invocations are being answered, and an invocation stops counting when its response has ended, however "
    "it ended (sent whole, aborted, or left by its caller)",
    description="straight to the container (max_invocations from describe, at most "
    f"{MAX_INVOCATIONS_CHECKED}): max_invocations invocations at once; then max_invocations + 1 one after "
    f"another, each read to its end, and every {ABANDON_EVERY}th one more whose caller closes the connection "
    "after the first bytes",
    expectation="no invocation is refused with 503 queue_full: at once, each is answered 200 or, when its "
    "first audio would come too late, 503 server_busy (§10.2); one after another, each is answered 200 with "
    "audio (at most one is in progress, so a queue_full means a slot was kept after its response)",
)
def test_invocation_slots_are_freed_when_responses_end(conf: Probe) -> None:
    url = conf.require_container("count its invocation slots")
    whole = {"text": SHORT, "speed": FAST, "format": "pcm", "stream": False}
    left = {"text": TWO_SENTENCES, "speed": FAST, "format": "pcm", "stream": True}

    stop_at = time.monotonic() + deadline.remaining()  # a thread the case's deadline left stops too

    async def at_once(limit: int) -> tuple[list[str], int]:
        """The queue_full refusals of ``limit`` invocations sent at once, and how many were answered 200. A
        server still busy with earlier work answers them all server_busy (§10.2), which shows nothing about
        its slots: then they are sent again, up to :data:`AT_ONCE_TRIES` times."""
        async with httpx.AsyncClient(
            timeout=deadline.bound(30.0), limits=httpx.Limits(max_connections=None)
        ) as client:
            for _ in range(AT_ONCE_TRIES):
                answers = await asyncio.gather(
                    *(client.post(f"{url}/invocations", json=whole) for _ in range(limit))
                )
                full = [f"{a.status_code} {a.text[:120]!r}" for a in answers if _queue_full(a)]
                spoken = sum(a.status_code == 200 for a in answers)
                if full or spoken >= min(2, limit) or time.monotonic() >= stop_at:
                    break
                await asyncio.sleep(1.0)
        return full, spoken

    def one_after_another(client: httpx.Client, after_left: bool) -> httpx.Response:
        """One invocation read to its end; right after a left one, a queue_full is asked again for up to
        :data:`RELEASE_WAIT_S` (the server frees that slot when it sees its caller has gone)."""
        waited = 0.0
        while True:
            response = client.post(f"{url}/invocations", json=whole)
            if not (after_left and _queue_full(response) and waited < RELEASE_WAIT_S):
                return response
            time.sleep(0.1)
            waited += 0.1

    def run() -> tuple[int, list[str], int, int, list[str]]:
        limit = min(_max_invocations(url), MAX_INVOCATIONS_CHECKED)
        crowded, spoken = asyncio.run(at_once(limit))
        refused: list[str] = []
        abandoned = 0
        with httpx.Client(timeout=deadline.bound(30.0)) as client:
            for n in range(1, limit + 2):
                if time.monotonic() >= stop_at:
                    raise AssertionError(f"the deadline ran out after {n - 1} of {limit + 1} invocations")
                after_left = n % ABANDON_EVERY == 0
                if after_left:
                    with client.stream("POST", f"{url}/invocations", json=left) as response:
                        if response.status_code == 200:
                            next(response.iter_raw(), None)  # the first bytes; then the caller is gone
                            abandoned += 1
                response = one_after_another(client, after_left)
                if response.status_code != 200 or not response.content:
                    refused.append(f"invocation {n}: {response.status_code} {response.text[:120]!r}")
                    if len(refused) >= 3:
                        break
        return limit, crowded, spoken, abandoned, refused

    limit, crowded, spoken, abandoned, refused = conf.blocking(run, "the invocations were answered")
    conf.observe(
        max_invocations=limit, queue_full_at_once=len(crowded), answered_at_once=spoken, abandoned=abandoned
    )
    assert not crowded, (
        f"{len(crowded)} of {limit} invocations sent at once (max_invocations {limit}) were refused with "
        f"queue_full: {crowded[0]}"
    )
    assert not refused, (
        f"with one invocation at a time, {len(refused)} of the {limit + 1} invocations read to their end "
        f"were refused (max_invocations {limit}; {abandoned} left by their caller meanwhile): "
        + "; ".join(refused)
    )


# --- faults as the service reports them (§12.2, §12.5) ------------------------------------------------------


@case(
    "12.2.5",
    "§12.2",
    Level.MUST,
    requirement="Mid-stream failures arrive as `ModelStreamError` (codes `ModelInvocationTimeExceeded`, "
    "`StreamBroken`) or `InternalStreamFailure`; botocore raises `EventStreamError`",
    description="InvokeEndpointWithResponseStream (format pcm) with the simulator breaking the stream after "
    "1,000 bytes (fault model_stream_error@1000)",
    expectation="exactly the first 1,000 bytes of the body arrive, then boto3 raises EventStreamError "
    "(ModelStreamError): the caller sees a failed transfer, not a short body",
)
def test_response_stream_fault(conf: Probe) -> None:
    conf.require_simulator("inject a mid-stream fault")
    received = bytearray()

    def call() -> None:
        response = conf.runtime().invoke_endpoint_with_response_stream(
            EndpointName=conf.target.endpoint_name,
            Body=json.dumps(_body("pcm")).encode(),
            ContentType="application/json",
        )
        for event in response["Body"]:
            received.extend(event.get("PayloadPart", {}).get("Bytes", b""))

    with (
        conf.configure(faults=FaultPlan.parse(["model_stream_error@1000"])),
        pytest.raises(EventStreamError) as caught,
    ):
        conf.blocking(call, "the response stream ended")
    conf.observe(received=len(received), error=str(caught.value)[:300])
    assert "ModelStreamError" in str(caught.value), f"boto3 raised {caught.value}"
    assert len(received) == 1000, f"{len(received)} bytes arrived before the fault, expected 1000"


@case(
    "12.5.1",
    "§12.5",
    Level.MUST,
    requirements=(),
    requirement="HTTP status with `x-amzn-errortype`: `InputValidationError` 400 (throttling also 400)",
    description="InvokeEndpoint while the simulator throttles (fault throttle)",
    expectation="boto3 raises ThrottlingException with HTTP status 400, and the container is not invoked",
)
def test_throttled_invocation(conf: Probe) -> None:
    conf.require_simulator("throttle an invocation")
    with conf.configure(faults=FaultPlan.parse(["throttle"])), pytest.raises(ClientError) as caught:
        conf.blocking(
            lambda: conf.runtime().invoke_endpoint(
                EndpointName=conf.target.endpoint_name,
                Body=json.dumps(_body("pcm")).encode(),
                ContentType="application/json",
            ),
            "InvokeEndpoint answered",
        )
    response = caught.value.response
    conf.observe(error=response.get("Error"), status=response["ResponseMetadata"]["HTTPStatusCode"])
    assert response["Error"]["Code"] == "ThrottlingException", f"boto3 raised {response['Error']}"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
