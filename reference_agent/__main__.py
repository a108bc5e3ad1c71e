"""``python -m reference_agent``: serve the agent app (the container's command too).

    python -m reference_agent [--host H] [--port 8080] [--scripted] [--model-id ID]
                              [--endpoint NAME] [--endpoint-url URL] [--region R] ...

Settings not given as flags come from the environment (:meth:`reference_agent.app.AgentSettings.from_env`:
``BEDROCK_MODEL_ID``, ``KOKORO_ENDPOINT_NAME``, ``KOKORO_ENDPOINT_URL``, ``KOKORO_ENDPOINT_REGION``,
``AGENT_SCRIPTED``, ...). ``BedrockAgentCoreApp.run`` binds 127.0.0.1 unless ``DOCKER_CONTAINER`` is set
(REFERENCE.md §5); ``--host`` overrides it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from protocol.logs import add_log_options, configure_logging
from reference_agent.app import DEFAULT_ENDPOINT_NAME, AgentSettings, create_app
from reference_agent.scripted import add_scripted_options
from reference_agent.tts import TtsEndpoint


def build_parser() -> argparse.ArgumentParser:
    """The command line; every flag defaults to the environment's setting."""
    parser = argparse.ArgumentParser(
        prog="python -m reference_agent",
        description="Serve the reference voice agent (a Strands agent on Bedrock AgentCore that speaks its "
        "reply through a SageMaker TTS endpoint) on POST /invocations; the container's command too.",
    )
    parser.add_argument("--host", help="bind address (default 127.0.0.1, or 0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080, the AgentCore contract)")
    model = parser.add_argument_group("language model")
    model.add_argument("--scripted", action="store_true", help="use the scripted offline model (no AWS)")
    model.add_argument(
        "--model-id", help="Bedrock model id (default: Strands' default) [env BEDROCK_MODEL_ID]"
    )
    add_scripted_options(model)
    tts = parser.add_argument_group("TTS endpoint")
    tts.add_argument(
        "--endpoint",
        help=f"SageMaker endpoint name (default {DEFAULT_ENDPOINT_NAME}) [env KOKORO_ENDPOINT_NAME]",
    )
    tts.add_argument(
        "--endpoint-url",
        help="endpoint URL override (default: the region's SageMaker runtime) [env KOKORO_ENDPOINT_URL]",
    )
    tts.add_argument(
        "--region",
        help="the endpoint's region (default: the AWS default chain) [env KOKORO_ENDPOINT_REGION]",
    )
    tts.add_argument(
        "--allow-endpoint-url",
        action="store_true",
        help="accept endpoint_url in requests (local testing only) [env AGENT_ALLOW_ENDPOINT_URL]",
    )
    add_log_options(parser.add_argument_group("logging"))
    return parser


def settings_from_args(args: argparse.Namespace) -> AgentSettings:
    """:meth:`AgentSettings.from_env` with the flags that were given applied on top."""
    settings = AgentSettings.from_env()
    changes: dict[str, object] = {}
    if args.scripted:
        changes["scripted"] = True
    if args.model_id:
        changes["model_id"] = args.model_id
    if args.reply:
        changes["reply"] = args.reply
    if args.first_token_ms is not None:
        changes["first_token_s"] = args.first_token_ms / 1000.0
    if args.tokens_per_s is not None:
        changes["tokens_per_s"] = args.tokens_per_s
    if args.allow_endpoint_url:
        changes["allow_endpoint_url"] = True
    endpoint = settings.endpoint
    changes["endpoint"] = TtsEndpoint(
        name=args.endpoint or endpoint.name,
        url=args.endpoint_url or endpoint.url,
        region=args.region or endpoint.region,
    )
    return replace(settings, **changes)


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted (uvicorn handles Ctrl-C and SIGTERM)."""
    args = build_parser().parse_args(argv)
    try:
        configure_logging(args.log_level, args.log_format)
    except ValueError as exc:
        print(f"python -m reference_agent: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings_from_args(args))
    try:
        # log_config=None: uvicorn logs through the root logger in the project's format (protocol.logs).
        app.run(port=args.port, host=args.host, log_config=None)
    except KeyboardInterrupt:  # uvicorn shut down, then re-raised the Ctrl-C it caught
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
