"""The CDK app: every stack of every catalogued speech model, and the agent's stacks.

``python -m infra.app`` is the ``--app`` command ``speech-infra`` and ``agent-infra`` hand to the CDK
command-line tool; it reads its settings from CDK context (infra.settings) and the target account and
Region from ``CDK_DEFAULT_ACCOUNT`` / ``CDK_DEFAULT_REGION``, which the CDK tool sets from the AWS
profile it runs with. Without them the stacks are environment-agnostic (fine for synthesis).

Stack graph (arrows are CloudFormation exports)::

    <Model>ModelCache --bucket--> <Model>Foundation --role--> <Model>Endpoint
            '--------------------------bucket--------------------^
    KokoroAgentFoundation --role--> KokoroAgentRuntime

The agent stacks refer to the speech endpoint by name only, so they deploy, change and tear down
independently of the speech stacks (even against an endpoint deployed elsewhere).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import aws_cdk as cdk

from infra.agent_runtime import AgentRuntimeStack
from infra.endpoint import EndpointStack
from infra.foundation import AgentFoundationStack, SpeechFoundationStack
from infra.model_cache import ModelCacheStack
from infra.settings import (
    AGENT_FOUNDATION_STACK,
    AGENT_RUNTIME_STACK,
    MODELS,
    AgentSettings,
    ImageSource,
    SettingsError,
    SpeechSettings,
)

CROSS_STACK_REFERENCES = "@aws-cdk/core:defaultCrossStackReferences"


@dataclass(frozen=True)
class SpeechStacks:
    """The three stacks of one speech model."""

    model_cache: ModelCacheStack
    foundation: SpeechFoundationStack
    endpoint: EndpointStack


@dataclass(frozen=True)
class AgentStacks:
    """The two stacks of the agent."""

    foundation: AgentFoundationStack
    runtime: AgentRuntimeStack


@dataclass(frozen=True)
class Stacks:
    """Everything :func:`add_stacks` created: ``speech`` by model key, and ``agent``."""

    speech: dict[str, SpeechStacks]
    agent: AgentStacks


def environment_from_os() -> cdk.Environment | None:
    """The account and Region the CDK tool resolved (``CDK_DEFAULT_*``), or ``None`` when unset."""
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = os.environ.get("CDK_DEFAULT_REGION")
    if not account and not region:
        return None
    return cdk.Environment(account=account, region=region)


def add_stacks(
    app: cdk.App,
    *,
    env: cdk.Environment | None = None,
    server_image: ImageSource | None = None,
    agent_image: ImageSource | None = None,
) -> Stacks:
    """Add every stack to ``app``, with settings read from ``app``'s context.

    ``server_image`` / ``agent_image`` replace the repository's Dockerfiles as image sources (tests
    synthesize against small stand-ins). Raises :class:`infra.settings.SettingsError` for an invalid
    context value or a missing Dockerfile.
    """
    context = app.node.try_get_context
    if context(CROSS_STACK_REFERENCES) is None:
        # Exports (Fn::ImportValue), so CloudFormation refuses to delete the bucket's or a role's
        # stack while a stack that uses it still exists.
        app.node.set_context(CROSS_STACK_REFERENCES, "strong")
    speech: dict[str, SpeechStacks] = {}
    for model in MODELS.values():
        overrides = {"image": server_image} if server_image is not None else {}
        settings = SpeechSettings.from_context(model, context, **overrides)
        settings.image.check("reference server")
        cache = ModelCacheStack(app, model.model_cache_stack, model=model, env=env)
        foundation = SpeechFoundationStack(
            app, model.foundation_stack, settings=settings, bucket=cache.bucket, env=env
        )
        endpoint = EndpointStack(
            app,
            model.endpoint_stack,
            settings=settings,
            bucket=cache.bucket,
            role=foundation.role,
            env=env,
        )
        speech[model.key] = SpeechStacks(cache, foundation, endpoint)

    overrides = {"image": agent_image} if agent_image is not None else {}
    agent_settings = AgentSettings.from_context(context, **overrides)
    agent_settings.image.check("reference agent")
    agent_foundation = AgentFoundationStack(app, AGENT_FOUNDATION_STACK, settings=agent_settings, env=env)
    runtime = AgentRuntimeStack(
        app, AGENT_RUNTIME_STACK, settings=agent_settings, role=agent_foundation.role, env=env
    )
    return Stacks(speech=speech, agent=AgentStacks(agent_foundation, runtime))


def main() -> int:
    """Synthesize the app into the directory the CDK tool asked for; 1 on an invalid setting."""
    app = cdk.App()
    try:
        add_stacks(app, env=environment_from_os())
    except SettingsError as error:
        print(f"infra.app: {error}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
