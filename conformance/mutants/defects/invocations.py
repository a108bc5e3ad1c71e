"""Hooks of the table on ``POST /invocations`` answers (§11, §11.7, §12.2): each rewrites the status,
headers or body of one answer (WAV sizes, Content-Type, SSE framing, error bodies, Ogg/Opus, FLAC and AAC
containers)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from starlette.responses import Response, StreamingResponse

from conformance.mutants.defects.core import DefectServer, Http
from protocol.encodings import decode_to_pcm16

# -- POST /invocations defects ---------------------------------------------------------------------------


async def _body(response: Response) -> bytes:
    if isinstance(response, StreamingResponse):
        return b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[misc]
    return bytes(response.body)


def _rebuild(response: Response, body: bytes, *, stream: bool, **headers: str) -> Response:
    kept = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", *headers)}
    kept.update(headers)
    if stream:

        async def chunks() -> Any:
            for i in range(0, len(body), 32768):
                yield body[i : i + 32768]

        return StreamingResponse(chunks(), status_code=response.status_code, headers=kept)
    return Response(body, status_code=response.status_code, headers=kept)


def _http_rewrite(
    change: Callable[[dict[str, Any], Response, bytes], tuple[bytes, bool, dict[str, str]] | None],
) -> Http:
    """An ``http`` hook: ``change(request, response, body)`` gives ``(body, stream, headers)`` or None."""

    async def hook(server: DefectServer, request: dict[str, Any], response: Response) -> Response:
        body = await _body(response)
        changed = change(request, response, body)
        if changed is None:
            return _rebuild(response, body, stream=isinstance(response, StreamingResponse))
        new_body, stream, headers = changed
        return _rebuild(response, new_body, stream=stream, **headers)

    return hook  # type: ignore[return-value]


def _wav(request: dict[str, Any]) -> bool:
    return request.get("format", "wav") == "wav" and request.get("transport", "binary") == "binary"


def _streamed_wav_exact_sizes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and request.get("stream", True) is True and response.status_code == 200):
        return None
    data = len(body) - 44
    header = body[:4] + (36 + data).to_bytes(4, "little") + body[8:40] + data.to_bytes(4, "little")
    return header + body[44:], True, {}


def _wav_eight_bits(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and response.status_code == 200):
        return None
    return body[:34] + (8).to_bytes(2, "little") + body[36:], isinstance(response, StreamingResponse), {}


def _whole_wav_unknown_sizes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not (_wav(request) and request.get("stream", True) is False and response.status_code == 200):
        return None
    unknown = b"\xff\xff\xff\xff"  # the streamed header's sizes in a whole body (§11.2)
    return body[:4] + unknown + body[8:40] + unknown + body[44:], False, {}


def _pcm_as_l16(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("format") != "pcm" or request.get("transport", "binary") != "binary":
        return None
    rate = request.get("sample_rate", 24000)
    return (
        body,
        isinstance(response, StreamingResponse),
        {"content-type": f"audio/L16;rate={rate};channels=1"},
    )


def _g711_body(request: dict[str, Any]) -> str | None:
    """The G.711 encoding of a binary ``format: "pcm"`` request (§11.3), else ``None``."""
    encoding = request.get("encoding")
    binary = request.get("format") == "pcm" and request.get("transport", "binary") == "binary"
    return encoding if binary and encoding in ("pcm_mulaw", "pcm_alaw") else None


def _mulaw_as_audio_basic(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if _g711_body(request) != "pcm_mulaw":
        return None
    return body, isinstance(response, StreamingResponse), {"content-type": "audio/basic"}


def _g711_sent_as_pcm16(request: dict[str, Any], response: Response, body: bytes) -> Any:
    encoding = _g711_body(request)
    if encoding is None:
        return None
    return decode_to_pcm16(body, encoding), isinstance(response, StreamingResponse), {}


def _sse_crlf(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None
    return body.replace(b"\n", b"\r\n"), True, {}


def _sse_seq_from_one(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None

    def bump(match: re.Match[bytes]) -> bytes:
        return b'"seq":' + str(int(match.group(1)) + 1).encode()

    return re.sub(rb'"seq":(\d+)', bump, body), True, {}


def _error_body_string(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if response.status_code < 400:
        return None
    error = json.loads(body)["error"]
    return json.dumps({"error": f"{error['code']}: {error['message']}"}).encode(), False, {}


def _no_header_bytes(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if request.get("transport") != "sse" or response.status_code != 200:
        return None
    return re.sub(rb',\s*"header_bytes":\s*44', b"", body), True, {}


# -- Ogg/Opus, FLAC and AAC bodies (§11.7) -------------------------------------------------------------------


def _binary_format(fmt: str, request: dict[str, Any], response: Response) -> bool:
    return (
        request.get("format") == fmt
        and request.get("transport", "binary") == "binary"
        and response.status_code == 200
    )


def _ogg_pages_bad_crc(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("opus", request, response):
        return None
    broken = bytearray(body)
    start = 0
    while (start := broken.find(b"OggS", start)) >= 0:
        broken[start + 22] ^= 0xFF  # the page's CRC-32 (RFC 3533 §6): a decoder drops the page
        start += 4
    return bytes(broken), isinstance(response, StreamingResponse), {}


def _flac_without_streaminfo(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("flac", request, response) or not body.startswith(b"fLaC"):
        return None
    at = 4
    while at < len(body):  # metadata blocks: 1 byte (last-block flag, type), 3 bytes of length
        last, length = body[at] & 0x80, int.from_bytes(body[at + 1 : at + 4], "big")
        at += 4 + length
        if last:
            break
    return body[at:], isinstance(response, StreamingResponse), {}


def _aac_without_adts(request: dict[str, Any], response: Response, body: bytes) -> Any:
    if not _binary_format("aac", request, response):
        return None
    raw, at = bytearray(), 0
    while at + 7 <= len(body) and body[at] == 0xFF and body[at + 1] & 0xF0 == 0xF0:
        header = 7 if body[at + 1] & 1 else 9  # protection_absent: no CRC
        length = (body[at + 3] & 3) << 11 | body[at + 4] << 3 | body[at + 5] >> 5
        raw += body[at + header : at + length]
        at += length
    return bytes(raw), isinstance(response, StreamingResponse), {}


def _container_sse_says_pcm(request: dict[str, Any], response: Response, body: bytes) -> Any:
    fmt = request.get("format")
    if request.get("transport") != "sse" or fmt not in ("opus", "flac", "aac"):
        return None
    return body.replace(f'"encoding":"{fmt}"'.encode(), b'"encoding":"pcm_s16le"', 1), True, {}
