"""The agent as a Bedrock AgentCore app: ``POST /invocations`` streams the SSE events of one invocation.

``BedrockAgentCoreApp`` (bedrock-agentcore 1.25, REFERENCE.md §5) is a Starlette app with
``POST /invocations`` and ``GET /ping``. The entrypoint here is an ``async def`` that validates the
request first — a bad one gets HTTP 400 with ``{"error": {"code": "invalid_request", ...}}`` — and
otherwise returns the async generator of :func:`reference_agent.pipeline.run_agent`, which the app
frames as ``data: {json}\\n\\n`` events. Nothing non-serialisable is ever yielded (the app would
silently ``str()`` it).

Configuration comes from :class:`AgentSettings`, read from the environment by default (the names the
deployment stack sets, ``infra/agent_runtime.py``).

An invocation that carries the AgentCore session header (``context.session_id``) is a turn of that
session's :class:`~reference_agent.conversation.Conversation`: the model sees the session's earlier turns,
one turn runs at a time, and a request's ``barge_in`` member (``{"played_ms": N}``: the listener spoke over
the previous reply after N ms of its audio) stops that reply and keeps in the history only what was heard.
The app keeps the :data:`MAX_CONVERSATIONS` most recently used sessions, in memory.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from reference_agent.conversation import Conversation
from reference_agent.pipeline import DEFAULT_CONNECT_TIMEOUT_S, PipelineSettings, run_agent
from reference_agent.request import AgentRequest, InvalidRequest, parse_request
from reference_agent.sagemaker_tts import SageMakerTtsConnector
from reference_agent.scripted import DEFAULT_FIRST_TOKEN_S, DEFAULT_REPLY, DEFAULT_TOKENS_PER_S, ScriptedModel
from reference_agent.tts import DEFAULT_IDLE_TIMEOUT_S, TtsConnect, TtsEndpoint

__all__ = [
    "DEFAULT_ENDPOINT_NAME",
    "MAX_CONVERSATIONS",
    "SYSTEM_PROMPT",
    "AgentSettings",
    "build_agent",
    "create_app",
]

MAX_CONVERSATIONS = 256
"""Sessions whose conversation an app keeps; the least recently used is forgotten first."""

DEFAULT_ENDPOINT_NAME = "kokoro-tts"
"""Endpoint name used when none is configured (the simulator accepts any name)."""

SYSTEM_PROMPT = (
    "You are a voice assistant. Your reply is read aloud as it is written, so answer in a few short, "
    "complete spoken sentences: no markdown, no lists, no code, no emoji."
)
"""Steers a real model toward text a TTS can speak sentence by sentence."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Everything an agent process is configured with.

    Attributes:
        scripted: use :class:`~reference_agent.scripted.ScriptedModel` instead of Bedrock.
        model_id: the Bedrock model id (``BEDROCK_MODEL_ID``); ``None`` uses Strands' default.
        model_region: the Bedrock region, or ``None`` for the default chain (``AWS_REGION``).
        endpoint: the default TTS endpoint (``KOKORO_ENDPOINT_NAME``, ``KOKORO_ENDPOINT_URL``,
            ``KOKORO_ENDPOINT_REGION``).
        allow_endpoint_url: accept ``endpoint_url`` in requests (see
            :func:`reference_agent.request.parse_request`).
        reply, first_token_s, tokens_per_s: the scripted model's defaults.
        connect_timeout_s, idle_timeout_s: TTS time limits (see :class:`PipelineSettings`).
        system_prompt: the system prompt of every agent.
    """

    scripted: bool = False
    model_id: str | None = None
    model_region: str | None = None
    endpoint: TtsEndpoint = field(default_factory=lambda: TtsEndpoint(DEFAULT_ENDPOINT_NAME))
    allow_endpoint_url: bool = False
    reply: str = DEFAULT_REPLY
    first_token_s: float = DEFAULT_FIRST_TOKEN_S
    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    system_prompt: str = SYSTEM_PROMPT

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> AgentSettings:
        """Read settings from environment variables; ``overrides`` win.

        ``AGENT_SCRIPTED`` (``1``/``true``), ``BEDROCK_MODEL_ID``, ``AWS_REGION``,
        ``KOKORO_ENDPOINT_NAME``, ``KOKORO_ENDPOINT_URL``, ``KOKORO_ENDPOINT_REGION``,
        ``AGENT_ALLOW_ENDPOINT_URL`` (``1``/``true``).
        """
        env = os.environ if environ is None else environ
        flag = {"1", "true", "yes", "on"}
        settings = cls(
            scripted=env.get("AGENT_SCRIPTED", "").lower() in flag,
            model_id=env.get("BEDROCK_MODEL_ID") or None,
            model_region=env.get("AWS_REGION") or None,
            endpoint=TtsEndpoint(
                name=env.get("KOKORO_ENDPOINT_NAME") or DEFAULT_ENDPOINT_NAME,
                url=env.get("KOKORO_ENDPOINT_URL") or None,
                region=env.get("KOKORO_ENDPOINT_REGION") or None,
            ),
            allow_endpoint_url=env.get("AGENT_ALLOW_ENDPOINT_URL", "").lower() in flag,
        )
        return replace(settings, **overrides)


def build_agent(settings: AgentSettings, request: AgentRequest) -> Any:
    """One Strands ``Agent`` for one request, on the scripted model or Bedrock.

    The agent has no tools and no callback handler (the default one prints to stdout).
    """
    from strands import Agent

    if settings.scripted:
        overrides = request.scripted
        model: Any = ScriptedModel(
            (overrides and overrides.reply) or settings.reply,
            first_token_s=_pick(overrides and overrides.first_token_s, settings.first_token_s),
            tokens_per_s=_pick(overrides and overrides.tokens_per_s, settings.tokens_per_s),
        )
    else:
        from strands.models.bedrock import BedrockModel

        kwargs: dict[str, Any] = {}
        if settings.model_id:
            kwargs["model_id"] = settings.model_id
        if settings.model_region:
            kwargs["region_name"] = settings.model_region
        model = BedrockModel(**kwargs)
    return Agent(model=model, system_prompt=settings.system_prompt, callback_handler=None)


def _pick(value: float | None, default: float) -> float:
    return default if value is None else value


def create_app(
    settings: AgentSettings | None = None,
    *,
    tts_connect: TtsConnect | None = None,
    agent_factory: Any = None,
) -> Any:
    """Build the ``BedrockAgentCoreApp``.

    Args:
        settings: defaults to :meth:`AgentSettings.from_env`.
        tts_connect: opens TTS sessions; default the official SageMaker client
            (:class:`reference_agent.sagemaker_tts.SageMakerTtsConnector`).
        agent_factory: ``(AgentRequest) -> strands.Agent``; default :func:`build_agent` with
            ``settings``.

    Returns:
        The app (an ASGI application; ``app.run(port=..., host=...)`` serves it with uvicorn).
    """
    from bedrock_agentcore.runtime import BedrockAgentCoreContext
    from starlette.responses import JSONResponse

    _AgentApp = _agent_app_class()

    settings = settings or AgentSettings.from_env()
    connect = tts_connect or SageMakerTtsConnector()
    factory = agent_factory or (lambda request: build_agent(settings, request))
    app = _AgentApp()
    conversations: OrderedDict[str, Conversation] = OrderedDict()
    # The app logs each call at INFO through a JSON handler of its own; the agent logs one line per
    # invocation instead (reference_agent.pipeline), in the project's one format (protocol.logs).
    app.logger.handlers.clear()
    app.logger.setLevel(logging.WARNING)

    @app.entrypoint
    async def invoke(payload: Any, context: Any) -> Any:
        # The second parameter must be named `context` for the app to pass it (REFERENCE.md §5).
        try:
            request = parse_request(
                payload, allow_endpoint_url=settings.allow_endpoint_url, allow_scripted=settings.scripted
            )
        except InvalidRequest as exc:
            return JSONResponse(exc.to_json(), status_code=400)
        session_id = getattr(context, "session_id", None)
        conversation = None
        if session_id:
            conversation = conversations.pop(session_id, None) or Conversation()
            conversations[session_id] = conversation  # the most recently used last
            while len(conversations) > MAX_CONVERSATIONS:
                conversations.popitem(last=False)
        if request.barge_in_ms is not None:
            if conversation is None:
                error = InvalidRequest(
                    "barge_in: needs the AgentCore session header (a conversation to trim)"
                )
                return JSONResponse(error.to_json(), status_code=400)
            if conversation.turn is not None:
                conversation.barge_in(request.barge_in_ms)
        default = settings.endpoint
        endpoint = TtsEndpoint(
            name=request.endpoint or default.name,
            url=request.endpoint_url or default.url,
            region=request.region or default.region,
        )
        pipeline = PipelineSettings(
            agent_factory=factory,
            tts_connect=connect,
            endpoint=endpoint,
            connect_timeout_s=settings.connect_timeout_s,
            idle_timeout_s=settings.idle_timeout_s,
        )
        request_id = BedrockAgentCoreContext.get_request_id() or uuid.uuid4().hex
        return run_agent(
            request, pipeline, request_id=request_id, session_id=session_id, conversation=conversation
        )

    return app


def _agent_app_class() -> type:
    """``BedrockAgentCoreApp`` whose refusal of a body that is not JSON has the one error shape.

    The app answers such a body itself, before the entrypoint runs, with ``{"error": "Invalid JSON",
    "details": ...}``; here it is ``{"error": {"code": "invalid_json" | "invalid_utf8", "message"}}``
    (PROTOCOL.md §11.6), like every other refusal of the agent.
    """
    import json

    from bedrock_agentcore.runtime import BedrockAgentCoreApp
    from starlette.responses import JSONResponse

    class AgentApp(BedrockAgentCoreApp):
        async def _handle_invocation(self, request: Any) -> Any:
            body = await request.body()  # Starlette keeps it: the app's own request.json() reads it again
            try:
                json.loads(body.decode("utf-8"))
            except UnicodeDecodeError as exc:
                error = InvalidRequest(f"the body is not UTF-8 (byte {exc.start})", "invalid_utf8")
            except ValueError as exc:
                error = InvalidRequest(f"the body is not JSON: {exc}", "invalid_json")
            else:
                return await super()._handle_invocation(request)
            return JSONResponse(error.to_json(), status_code=400)

    return AgentApp
