"""The agent's request: JSON body of ``POST /invocations`` → :class:`AgentRequest`.

The shape is ``spec/schemas/agent_request.schema.json`` (REFERENCE.md §3: ``prompt``, ``mode``,
``voice``, ``speed`` and the TTS endpoint). A bad request is refused before the stream starts, with
HTTP 400 and ``{"error": {"code": "invalid_request", "message": ...}}`` — the shape of PROTOCOL.md §11.6
(``invalid_voice`` for a voice Kokoro-82M does not have and no valid blend of its voices, checked by the
server's own :meth:`protocol.voices.Voice.parse`; ``invalid_json`` / ``invalid_utf8`` for a body
that is not JSON).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol import schemas
from protocol.voices import DEFAULT_VOICE, KOKORO_VOICES, InvalidVoiceError, Voice, is_blend

__all__ = [
    "DEFAULT_SAMPLE_RATE",
    "MODES",
    "AgentRequest",
    "InvalidRequest",
    "ScriptOverrides",
    "parse_request",
]

MODES = ("bidi", "stream", "batch")
"""``bidi`` chunks the reply itself and sends each sentence as soon as it is written; ``stream`` pipes
the model's tokens into one TTS utterance and lets the TTS cut it (PROTOCOL.md §15); ``batch`` waits
for the whole reply."""

DEFAULT_SAMPLE_RATE = 24_000
"""Kokoro's native rate (PROTOCOL.md §4.1 default)."""


class InvalidRequest(ValueError):
    """The request body breaks ``agent_request.schema.json`` or a rule the schema cannot express.

    Args:
        message: for people: what is wrong.
        code: ``invalid_request`` (default), or the protocol's own code where one fits (``invalid_json``,
            ``invalid_utf8``, ``invalid_voice``; PROTOCOL.md §9.1).
    """

    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.code = code

    def to_json(self) -> dict[str, Any]:
        """The HTTP 400 body, the one error shape of PROTOCOL.md §11.6: ``{"error": {"code", "message"}}``."""
        return {"error": {"code": self.code, "message": str(self)}}


@dataclass(frozen=True, slots=True)
class ScriptOverrides:
    """Per-request settings for the scripted model (``scripted`` member); ``None`` keeps the agent's."""

    reply: str | None = None
    first_token_s: float | None = None
    tokens_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One validated agent request.

    Attributes:
        prompt: the user's words for the model.
        mode: ``"bidi"``, ``"stream"`` or ``"batch"``.
        voice, speed, sample_rate: passed to every TTS request (PROTOCOL.md §4.1).
        endpoint: SageMaker endpoint name, or ``None`` for the agent's configured one.
        endpoint_url: where to reach it, or ``None`` for the agent's configured URL.
        region: AWS region, or ``None`` for the agent's.
        scripted: overrides for the scripted model, or ``None``.
        barge_in_ms: the listener spoke over the session's previous reply after this many milliseconds
            of its audio (``barge_in.played_ms``), or ``None``
            (:meth:`reference_agent.conversation.Conversation.barge_in`).
    """

    prompt: str
    mode: str = "bidi"
    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    sample_rate: int = DEFAULT_SAMPLE_RATE
    endpoint: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    scripted: ScriptOverrides | None = None
    barge_in_ms: float | None = None


def parse_request(
    payload: Any, *, allow_endpoint_url: bool = False, allow_scripted: bool = False
) -> AgentRequest:
    """Validate an agent request body.

    Args:
        payload: the decoded JSON body.
        allow_endpoint_url: accept ``endpoint_url`` and ``region``. Off by default: a deployed agent
            holds AWS credentials, and a caller who could point it at any host could make it send
            signed requests anywhere (PROTOCOL.md §13); each location also keeps a client open.
        allow_scripted: accept ``scripted`` (only meaningful when the agent runs the scripted model).

    Raises:
        InvalidRequest: the body is not a valid request; the message names the first problem.
    """
    from jsonschema.exceptions import best_match

    error = best_match(schemas.validator("agent_request").iter_errors(payload))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "request"
        raise InvalidRequest(f"{where}: {error.message}")
    if not payload["prompt"].strip():
        raise InvalidRequest("prompt: must hold a non-whitespace character")
    voice = payload.get("voice", DEFAULT_VOICE)
    try:
        # The server's own check (PROTOCOL.md §4.1), blends included; made before the stream starts, so a
        # typo is a 400 here rather than a 200 and a tts_error later.
        Voice.parse(voice, KOKORO_VOICES)
    except InvalidVoiceError as exc:
        raise InvalidRequest(
            f"voice: {voice!r} is not a valid blend of Kokoro-82M's voices: {exc}"
            if is_blend(voice)
            else f"voice: {voice!r} is not one of Kokoro-82M's {len(KOKORO_VOICES)} voices (for example "
            f"{DEFAULT_VOICE}, or a blend such as af_bella(2)+af_sky(1))",
            code="invalid_voice",
        ) from None
    for name in ("endpoint_url", "region"):
        if name in payload and not allow_endpoint_url:
            raise InvalidRequest(f"{name}: this agent does not accept a TTS endpoint location per request")
    scripted = payload.get("scripted")
    if scripted is not None and not allow_scripted:
        raise InvalidRequest("scripted: this agent does not run the scripted model")
    overrides = None
    if scripted is not None:
        first_token_ms = scripted.get("first_token_ms")
        overrides = ScriptOverrides(
            reply=scripted.get("reply"),
            first_token_s=None if first_token_ms is None else first_token_ms / 1000.0,
            tokens_per_s=scripted.get("tokens_per_s"),
        )
    return AgentRequest(
        prompt=payload["prompt"],
        mode=payload.get("mode", "bidi"),
        voice=payload.get("voice", DEFAULT_VOICE),
        speed=float(payload.get("speed", 1.0)),
        sample_rate=payload.get("sample_rate", DEFAULT_SAMPLE_RATE),
        endpoint=payload.get("endpoint"),
        endpoint_url=payload.get("endpoint_url"),
        region=payload.get("region"),
        scripted=overrides,
        barge_in_ms=None if payload.get("barge_in") is None else float(payload["barge_in"]["played_ms"]),
    )
