"""OpenAI-compatible speech on the reference server, for local use: the routes OpenAI's clients call.

Tools that speak OpenAI's speech API (its official clients, editors, chat front-ends) can use a Kokoro
server on the user's own machine by pointing their base URL at ``http://127.0.0.1:8080/v1``:

* ``POST /v1/audio/speech``: ``{"model", "input", "voice", "response_format", "speed"}`` → the audio,
  streamed (chunked) as it is synthesized, through the same path as ``POST /invocations`` with
  ``stream: true`` (:func:`reference_server.http.stream_audio`: invocation slot, encoders, log line and
  metrics are shared).
* ``GET /v1/models`` and ``GET /v1/models/{model}``: the model names the route accepts.
* ``GET /v1/audio/voices``: the voices (``{"voices": [...], "openai_voices": {...}}``, the shape the
  Kokoro-FastAPI server answers with, plus the OpenAI names this server maps).

How OpenAI's request maps onto the protocol's (PROTOCOL.md §4.1, §11.1):

* ``model``: one of :data:`MODELS` (OpenAI's speech models and ``kokoro``); all are the one Kokoro-82M.
  Another name is 404 ``model_not_found``, as OpenAI answers.
* ``voice``: a Kokoro voice id (``af_heart``) or blend (``af_bella(2)+af_sky(1)``), checked as the
  protocol checks ``voice``; or one of OpenAI's voice names, mapped by :data:`OPENAI_VOICES` (the Kokoro
  voice of the same name where Kokoro has one, else a voice of the same register).
* ``response_format``: ``mp3`` (OpenAI's default), ``opus`` (Ogg), ``aac`` (ADTS), ``flac``, ``wav``
  (streamed: sizes 0xFFFFFFFF, §11.2) or ``pcm`` (16-bit signed little-endian, mono, 24 kHz: OpenAI's
  own ``pcm``). The audio is always 24 kHz.
* ``speed``: OpenAI accepts 0.25 to 4.0, Kokoro speaks 0.5 to 2.0 (§4.1). A speed outside OpenAI's
  range is refused (400, ``param: "speed"``); one inside it but outside Kokoro's is clamped to the
  nearest of 0.5 and 2.0, and the speed used is in the ``X-Kokoro-Speed`` response header, so tools
  that send OpenAI's whole range still get speech.
* ``instructions`` (gpt-4o-mini-tts's style prompt) is accepted and ignored: Kokoro takes no prompt.
  ``stream_format`` may be ``audio`` (the default); ``sse`` is refused.
* The ``Authorization`` header is not checked: the routes are for a server on the user's own machine,
  which is why they are served by default only on a loopback address (:attr:`Settings.serves_openai
  <reference_server.settings.Settings.serves_openai>`, ``--openai``/``KOKORO_OPENAI``).

Errors on these routes (and only these) are OpenAI's shape: ``{"error": {"message", "type", "param",
"code"}}`` with ``type`` ``invalid_request_error`` (4xx) or ``server_error`` (5xx); ``code`` is OpenAI's
word where OpenAI has one (``model_not_found``, ``invalid_value``, ``missing_required_parameter``)
and the protocol's registry code otherwise (``invalid_voice``, ``text_too_long``, ``queue_full``, §9.1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import Describe, decode_json_object, parse_invocations_body
from reference_server import http
from reference_server.runtime import Runtime

__all__ = [
    "FORMATS",
    "KOKORO_SPEED_RANGE",
    "MODELS",
    "OPENAI_SPEED_RANGE",
    "OPENAI_VOICES",
    "PREFIX",
    "SAMPLE_RATE",
    "OpenAIError",
    "error_handler",
    "routes",
]

PREFIX = "/v1"
"""Where the routes live: OpenAI clients take ``http://HOST:PORT/v1`` as their base URL."""

MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
"""Model names ``POST /v1/audio/speech`` accepts; every one is the server's Kokoro-82M."""

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
"""OpenAI's ``response_format`` values; each is the protocol's ``format`` of the same name (§11.1)."""

SAMPLE_RATE = 24_000
"""Every response's rate in Hz: Kokoro's own, and the rate of OpenAI's ``pcm``."""

OPENAI_SPEED_RANGE = (0.25, 4.0)
"""OpenAI's ``speed`` range: values outside it are refused."""
KOKORO_SPEED_RANGE = (0.5, 2.0)
"""The protocol's ``speed`` range (§4.1): values inside OpenAI's range but outside this are clamped."""

OPENAI_VOICES: dict[str, str] = {
    # Kokoro v1.0 has a voice of the same name.
    "alloy": "af_alloy",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    # The rest: a Kokoro voice of the same register (OpenAI describes each; the choice is ours).
    "ash": "am_adam",
    "ballad": "bm_george",
    "cedar": "am_michael",
    "coral": "af_heart",
    "marin": "af_bella",
    "sage": "af_sarah",
    "shimmer": "af_sky",
    "verse": "am_puck",
}
"""OpenAI's voice names → Kokoro voice ids. A request may also name any Kokoro voice or blend."""

_CREATED = 1_735_689_600
"""``created`` of every model object (2025-01-01T00:00:00Z, Kokoro-82M v1.0's year): OpenAI's clients
read the field as an integer, and a fixed value keeps the answer the same from one start to the next."""
_OWNED_BY = "kokoro-bidi-tts"

# The protocol's codes that concern one OpenAI parameter (OpenAI's error names the parameter).
_PARAM_OF_CODE = {
    ErrorCode.TEXT_REQUIRED: "input",
    ErrorCode.TEXT_TOO_LONG: "input",
    ErrorCode.INVALID_VOICE: "voice",
    ErrorCode.INVALID_SPEED: "speed",
    ErrorCode.UNSUPPORTED_FORMAT: "response_format",
}


class OpenAIError(Exception):
    """A refusal in OpenAI's error shape.

    Args:
        status: the HTTP status (400, 404, 405, 413, 500, 503 …).
        message: a sentence for people; never quotes the request's ``input`` (PROTOCOL.md §13).
        param: the request parameter at fault, or ``None``.
        code: a short machine-readable word, or ``None``.
    """

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    @classmethod
    def from_protocol(cls, exc: ProtocolError) -> OpenAIError:
        """The OpenAI form of a protocol refusal: the registry's HTTP status (§11.6) and code. A pointer to
        the bidi session's ``describe`` becomes one to ``GET /v1/audio/voices``, this API's voice list."""
        message = exc.message.replace(
            'send {"type":"describe"} for the voice list', "GET /v1/audio/voices lists them"
        )
        return cls(exc.code.http_status or 400, message, _PARAM_OF_CODE.get(exc.code), exc.code.value)

    def response(self) -> JSONResponse:
        """``{"error": {"message", "type", "param", "code"}}`` with :attr:`status`."""
        kind = "server_error" if self.status >= 500 else "invalid_request_error"
        body = {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


def _refusing(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """The route ``handler``, its :class:`OpenAIError` and :class:`ProtocolError` answered as OpenAI does."""

    async def route(request: Request) -> Response:
        try:
            return await handler(request)
        except OpenAIError as exc:
            return exc.response()
        except ProtocolError as exc:
            request.app.state.runtime.metrics.refusals.labels(exc.code.value).inc()
            return OpenAIError.from_protocol(exc).response()

    return route


def _model_object(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": _CREATED, "owned_by": _OWNED_BY}


def _check_model(model: Any) -> None:
    if model is None:
        raise OpenAIError(400, "you must provide a model parameter", "model", "missing_required_parameter")
    if not isinstance(model, str):
        raise OpenAIError(400, "model must be a string", "model", "invalid_type")
    if model not in MODELS:
        raise OpenAIError(
            404,
            f"The model `{model[:100]}` does not exist; this server has {', '.join(MODELS)}",
            "model",
            "model_not_found",
        )


def _speed(raw: Any) -> float:
    """OpenAI's ``speed`` → the protocol's: refused outside 0.25–4.0, clamped to 0.5–2.0 inside it."""
    if raw is None:
        return 1.0
    low, high = OPENAI_SPEED_RANGE
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise OpenAIError(400, "speed must be a number", "speed", "invalid_type")
    if not low <= raw <= high:
        raise OpenAIError(400, f"speed must be from {low} to {high}, not {raw}", "speed", "invalid_value")
    return min(max(float(raw), KOKORO_SPEED_RANGE[0]), KOKORO_SPEED_RANGE[1])


def _voice(raw: Any) -> str:
    if raw is None:
        raise OpenAIError(400, "you must provide a voice parameter", "voice", "missing_required_parameter")
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):  # the clients' custom-voice object
        raw = raw["id"]
    if not isinstance(raw, str):
        raise OpenAIError(400, "voice must be a string", "voice", "invalid_type")
    return OPENAI_VOICES.get(raw, raw)


def _format(raw: Any) -> str:
    if raw is None:
        return "mp3"
    if raw not in FORMATS:
        shown = raw if isinstance(raw, str) else type(raw).__name__
        raise OpenAIError(
            400, f"response_format must be one of {', '.join(FORMATS)}, not {shown}", "response_format",
            "invalid_value",
        )  # fmt: skip
    return str(raw)


async def speech(request: Request) -> Response:
    """``POST /v1/audio/speech``: OpenAI's create-speech request → the audio, streamed (module docstring).

    Raises (answered as OpenAI errors by the route):
        OpenAIError: a parameter OpenAI defines is missing or out of OpenAI's range, or the model is unknown.
        ProtocolError: the protocol refuses the request (empty or too long ``input``, unknown voice, a
            format this install cannot encode, the server busy or its model failed to load).
    """
    runtime: Runtime = request.app.state.runtime
    limits = runtime.limits
    body = await http.read_body(request, limits.max_message_bytes)
    if body is None:
        too_large = f"the body is longer than {limits.max_message_bytes} bytes"
        raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, too_large)
    obj = decode_json_object(body, max_bytes=limits.max_message_bytes, max_depth=limits.max_json_depth)
    _check_model(obj.get("model"))
    if "input" not in obj or obj["input"] is None:
        raise OpenAIError(400, "you must provide an input parameter", "input", "missing_required_parameter")
    if not isinstance(obj["input"], str):
        raise OpenAIError(400, "input must be a string", "input", "invalid_type")
    voice = _voice(obj.get("voice"))
    fmt = _format(obj.get("response_format"))
    speed = _speed(obj.get("speed"))
    if obj.get("stream_format") not in (None, "audio"):
        raise OpenAIError(
            400, 'stream_format must be "audio": this server streams the audio itself, not SSE events',
            "stream_format", "invalid_value",
        )  # fmt: skip
    if not await runtime.wait_ready():
        raise ProtocolError(ErrorCode.INTERNAL_ERROR, f"the model failed to load: {runtime.failure}")
    translated = {
        "text": obj["input"],
        "voice": voice,
        "speed": speed,
        "format": fmt,
        "sample_rate": SAMPLE_RATE,
        "stream": True,
    }
    parsed = parse_invocations_body(
        _json_bytes(translated),
        limits=limits,
        known_voices=runtime.voices,
        mp3_available=http.MP3_AVAILABLE,
        encodings=runtime.capabilities.encodings,
        formats=runtime.capabilities.formats,
        voice_blends=runtime.voice_blends,
    )
    assert not isinstance(parsed, Describe)  # the translated body has no "type"
    return http.stream_audio(runtime, parsed, headers={"X-Kokoro-Speed": f"{speed:g}"})


def _json_bytes(obj: dict[str, Any]) -> bytes:
    """``obj`` as the strict JSON text the protocol's parser reads (§3.1)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()


async def models(request: Request) -> Response:
    """``GET /v1/models``: ``{"object": "list", "data": [model, ...]}``, each model
    ``{"id", "object": "model", "created", "owned_by"}``."""
    return JSONResponse({"object": "list", "data": [_model_object(m) for m in MODELS]})


async def model(request: Request) -> Response:
    """``GET /v1/models/{model}``: one model object, or 404 ``model_not_found``."""
    name = request.path_params["model"]
    _check_model(name)
    return JSONResponse(_model_object(name))


async def voices(request: Request) -> Response:
    """``GET /v1/audio/voices``: ``{"voices": [Kokoro ids, sorted], "openai_voices": {name: Kokoro id}}``;
    ``openai_voices`` lists only the names whose Kokoro voice this server has (503 until the model is
    loaded, as ``GET /ping``)."""
    runtime: Runtime = request.app.state.runtime
    if not await runtime.wait_ready():
        raise ProtocolError(ErrorCode.INTERNAL_ERROR, f"the model failed to load: {runtime.failure}")
    have = runtime.voices
    return JSONResponse(
        {
            "voices": sorted(have),
            "openai_voices": {name: voice for name, voice in OPENAI_VOICES.items() if voice in have},
        }
    )


def routes() -> list[BaseRoute]:
    """The routes under :data:`PREFIX` (module docstring); their errors are OpenAI's shape."""
    return [
        Route(PREFIX + "/audio/speech", _refusing(speech), methods=["POST"]),
        Route(PREFIX + "/audio/voices", _refusing(voices), methods=["GET"]),
        Route(PREFIX + "/models", _refusing(models), methods=["GET"]),
        Route(PREFIX + "/models/{model}", _refusing(model), methods=["GET"]),
    ]


def error_handler(
    fallback: Callable[[Request, Exception], Awaitable[Response]],
) -> Callable[[Request, Exception], Awaitable[Response]]:
    """Starlette's HTTP errors (404 path, 405 method) under :data:`PREFIX` in OpenAI's shape; any other
    path keeps ``fallback`` (the protocol's shape, §11.6)."""

    async def handle(request: Request, exc: Exception) -> Response:
        path = request.url.path
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            return await fallback(request, exc)
        assert isinstance(exc, HTTPException)
        what = f"{request.method} {path}"
        message = {404: f"no route serves {what}", 405: f"{what}: method not allowed"}.get(
            exc.status_code, str(exc.detail)
        )
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        response = OpenAIError(exc.status_code, message, None, code).response()
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    return handle
