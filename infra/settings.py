"""Deployment settings: the model catalogue, the speech and agent settings, and where images come from.

Settings reach the CDK app as context values (``cdk -c key=value``, or ``cdk.App(context=...)`` in
tests); ``speech-infra`` and ``agent-infra`` turn their flags into exactly those context values, so a
raw ``cdk --app "python -m infra.app" ...`` run and a CLI run build the same stacks. Speech keys are
prefixed with the model key (``kokoro-82m.instance_type``) because each model in the catalogue is its
own set of stacks; agent keys are flat (``bedrock_model_id``). infra/README.md lists every key.

Every value is validated here, before any stack is built, and a bad value raises
:class:`SettingsError` with a message naming the key and the accepted form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository checkout; both images are built with it as the Docker build context."""


class SettingsError(ValueError):
    """A setting (CDK context value or CLI flag) has a value the stacks cannot use."""


@dataclass(frozen=True)
class ModelSpec:
    """One deployable speech model: its catalogue key and the names its stacks use.

    ``stack_prefix`` names the CloudFormation stacks (``<prefix>ModelCache``, ``<prefix>Foundation``,
    ``<prefix>Endpoint``); ``s3_prefix`` is the folder of the model bucket that holds its weights.
    """

    key: str
    description: str
    stack_prefix: str
    default_endpoint_name: str
    s3_prefix: str

    @property
    def model_cache_stack(self) -> str:
        """Name of the stack holding the model bucket."""
        return f"{self.stack_prefix}ModelCache"

    @property
    def foundation_stack(self) -> str:
        """Name of the stack holding the endpoint's IAM role."""
        return f"{self.stack_prefix}Foundation"

    @property
    def endpoint_stack(self) -> str:
        """Name of the stack holding the SageMaker model, endpoint and autoscaling."""
        return f"{self.stack_prefix}Endpoint"

    @property
    def stacks(self) -> tuple[str, str, str]:
        """All stacks of this model, in deployment order."""
        return (self.model_cache_stack, self.foundation_stack, self.endpoint_stack)


MODELS: Mapping[str, ModelSpec] = {
    "kokoro-82m": ModelSpec(
        key="kokoro-82m",
        description="Kokoro-82M text-to-speech, 24 kHz PCM16 over bidirectional streaming",
        stack_prefix="Kokoro82m",
        default_endpoint_name="kokoro-82m",
        s3_prefix="kokoro-82m",
    ),
}
"""The speech models ``speech-infra`` can deploy, by catalogue key."""

AGENT_FOUNDATION_STACK = "KokoroAgentFoundation"
AGENT_RUNTIME_STACK = "KokoroAgentRuntime"
AGENT_STACKS = (AGENT_FOUNDATION_STACK, AGENT_RUNTIME_STACK)

# SageMaker: EndpointName pattern `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}` (CreateEndpoint API reference).
_ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
# SageMaker instance types are `ml.<family>.<size>`, e.g. ml.g5.xlarge, ml.g6e.2xlarge.
_INSTANCE_TYPE = re.compile(r"ml\.[a-z0-9-]+\.[a-z0-9]+")
# AgentCore: agentRuntimeName pattern `[a-zA-Z][a-zA-Z0-9_]{0,47}` (CreateAgentRuntime API reference).
_RUNTIME_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
# Bedrock model identifiers: a model id (anthropic.claude-3-5-haiku-20241022-v1:0), an inference
# profile id (us.anthropic...), or an ARN of either.
_BEDROCK_MODEL_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9.:/_-]{0,2047}")
# The model data version is the hex digest prefix infra.model_sync computes.
_MODEL_DATA_VERSION = re.compile(r"[0-9a-f]{8,64}")


@dataclass(frozen=True)
class ImageSource:
    """Where a container image is built from.

    ``directory`` is the Docker build context and ``dockerfile`` a path relative to it. ``include``
    lists the only top-level entries staged into the context (everything else, such as .venv and
    .git, stays out, so the image hash changes only when these change); an empty tuple stages the
    whole directory.
    """

    directory: Path
    dockerfile: str = "Dockerfile"
    include: tuple[str, ...] = ()

    @property
    def dockerfile_path(self) -> Path:
        """The Dockerfile's absolute path."""
        return self.directory / self.dockerfile

    def check(self, what: str) -> None:
        """Raise :class:`SettingsError` naming ``what`` image when the Dockerfile does not exist."""
        if not self.dockerfile_path.is_file():
            raise SettingsError(f"no Dockerfile at {self.dockerfile_path}: the {what} image is built from it")

    def exclude_patterns(self) -> list[str]:
        """Docker-style exclude patterns for ``DockerImageAsset(exclude=...)``.

        ``*`` drops every top-level entry, each ``!entry`` brings one back, and the last two patterns
        drop bytecode caches from what was brought back (later patterns win, as in .dockerignore).
        """
        if not self.include:
            return ["**/__pycache__", "**/*.pyc"]
        return ["*", *(f"!{entry}" for entry in self.include), "**/__pycache__", "**/*.pyc"]


SERVER_IMAGE = ImageSource(
    directory=REPO_ROOT,
    dockerfile="reference_server/Dockerfile",
    include=(
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "THIRD_PARTY.md",
        "locks",
        "protocol",
        "speech",
        "spec",
        "reference_server",
    ),
)
"""The reference server's GPU image (linux/amd64, SageMaker bidirectional-streaming label)."""

AGENT_IMAGE = ImageSource(
    directory=REPO_ROOT,
    dockerfile="reference_agent/Dockerfile",
    include=(
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "THIRD_PARTY.md",
        "locks",
        "protocol",
        "speech",
        "spec",
        "reference_agent",
        "sagemaker_transport",
    ),
)
"""The reference agent's image (linux/arm64, as AgentCore Runtime requires)."""


SCALING_METRICS = ("concurrency", "gpu-utilization")
"""What the endpoint's target-tracking policy may hold (:attr:`SpeechSettings.scaling_metric`)."""

DEFAULT_TARGET_CONCURRENCY = 4.0
"""Streams open per instance the policy holds by default. Not measured on the default instance kind
(``ml.g5.xlarge``; this project's machines have no GPU): one reference server on two shared CPU cores
keeps one conversation within the latency targets, 0.5 streams open on average (bench/RESULTS.md §11),
and an A10G with four vCPUs serves several times more; run ``python -m bench run capacity`` on the
instance kind and set ``target_concurrency`` to its figure (infra/README.md, "What one instance
serves")."""


@dataclass(frozen=True)
class SpeechSettings:
    """Settings of one speech model's stacks.

    ``instance_type``: SageMaker instance type of the variant (default ``ml.g5.xlarge``, one A10G GPU).
    ``min_instances`` / ``max_instances``: bounds of target-tracking autoscaling; the endpoint starts
    with ``min_instances``. SageMaker real-time endpoints cannot scale to zero, so the minimum is 1.
    ``scaling_metric``: what the target-tracking policy holds: ``"concurrency"`` (default), SageMaker's
    high-resolution ``SageMakerVariantConcurrentRequestsPerModelHighResolution`` (streams open per
    instance, published every 10 s) at ``target_concurrency``; or ``"gpu-utilization"``, the variant's
    average ``GPUUtilization`` at ``target_gpu_utilization`` percent (infra/endpoint.py says why the
    default changed: Kokoro saturates an instance's CPU while its GPU is far from busy).
    ``target_concurrency``: bidirectional streams open per instance the policy holds: the capacity
    figure of ``python -m bench run capacity`` (bench/RESULTS.md §11), measured on the instance kind.
    ``target_gpu_utilization``: percent of the variant's average GPUUtilization the policy holds with
    ``scaling_metric="gpu-utilization"``.
    ``model_data_version``: hex digest of the uploaded model assets (infra.model_sync); the weights
    live under ``s3://<bucket>/<s3_prefix>/<model_data_version>/``. ``None`` means "not uploaded yet":
    the stacks still synthesize (``cdk destroy`` needs that) but the endpoint stack carries an error
    that stops ``cdk deploy``.
    """

    model: ModelSpec
    endpoint_name: str
    instance_type: str = "ml.g5.xlarge"
    min_instances: int = 1
    max_instances: int = 2
    target_gpu_utilization: float = 60.0
    scaling_metric: str = "concurrency"
    target_concurrency: float = DEFAULT_TARGET_CONCURRENCY
    model_data_version: str | None = None
    image: ImageSource = SERVER_IMAGE

    def __post_init__(self) -> None:
        prefix = self.model.key
        _check(_ENDPOINT_NAME, self.endpoint_name, f"{prefix}.endpoint_name", "1-63 letters, digits, '-'")
        _check(_INSTANCE_TYPE, self.instance_type, f"{prefix}.instance_type", "ml.<family>.<size>")
        if self.min_instances < 1:
            raise SettingsError(f"{prefix}.min_instances must be at least 1 (got {self.min_instances})")
        if self.max_instances < self.min_instances:
            raise SettingsError(
                f"{prefix}.max_instances ({self.max_instances}) must be >= "
                f"{prefix}.min_instances ({self.min_instances})"
            )
        if not 0 < self.target_gpu_utilization <= 100:
            raise SettingsError(
                f"{prefix}.target_gpu_utilization must be in (0, 100] (got {self.target_gpu_utilization})"
            )
        if self.scaling_metric not in SCALING_METRICS:
            raise SettingsError(
                f"{prefix}.scaling_metric must be one of {', '.join(SCALING_METRICS)} "
                f"(got {self.scaling_metric!r})"
            )
        if not 0 < self.target_concurrency <= 1000:
            raise SettingsError(
                f"{prefix}.target_concurrency must be in (0, 1000] (got {self.target_concurrency})"
            )
        if self.model_data_version is not None:
            _check(_MODEL_DATA_VERSION, self.model_data_version, f"{prefix}.model_data_version", "hex digest")

    @classmethod
    def from_context(
        cls, model: ModelSpec, context: Callable[[str], Any], **overrides: Any
    ) -> SpeechSettings:
        """Read ``<model.key>.<setting>`` context values; absent keys keep their defaults.

        ``context`` is a lookup such as ``app.node.try_get_context`` (``None`` for absent keys).
        Values given with ``cdk -c`` arrive as strings and are converted here.
        Raises :class:`SettingsError` for unparseable or out-of-range values.
        """
        values: dict[str, Any] = {"endpoint_name": model.default_endpoint_name}
        for name, convert in (
            ("endpoint_name", str),
            ("instance_type", str),
            ("min_instances", int),
            ("max_instances", int),
            ("target_gpu_utilization", float),
            ("scaling_metric", str),
            ("target_concurrency", float),
            ("model_data_version", str),
        ):
            raw = context(f"{model.key}.{name}")
            if raw is not None:
                values[name] = _convert(f"{model.key}.{name}", raw, convert)
        values.update(overrides)
        return cls(model=model, **values)


@dataclass(frozen=True)
class AgentSettings:
    """Settings of the agent stacks.

    ``bedrock_model_id``: the Bedrock model (or inference profile, or ARN) the agent converses with;
    the agent role may invoke only that model. ``None`` means "not chosen": the stacks synthesize
    (for ``cdk destroy``) but carry an error that stops ``cdk deploy``.
    ``endpoint_name``: the speech endpoint the agent streams to (the agent role may open
    bidirectional streams on that endpoint only). ``runtime_name``: the AgentCore runtime's name.
    """

    bedrock_model_id: str | None = None
    endpoint_name: str = MODELS["kokoro-82m"].default_endpoint_name
    runtime_name: str = "kokoro_voice_agent"
    image: ImageSource = AGENT_IMAGE

    def __post_init__(self) -> None:
        if self.bedrock_model_id is not None:
            _check(_BEDROCK_MODEL_ID, self.bedrock_model_id, "bedrock_model_id", "a Bedrock model id or ARN")
        _check(_ENDPOINT_NAME, self.endpoint_name, "agent_endpoint_name", "1-63 letters, digits, '-'")
        _check(_RUNTIME_NAME, self.runtime_name, "agent_runtime_name", "a letter, then letters, digits, '_'")

    @classmethod
    def from_context(cls, context: Callable[[str], Any], **overrides: Any) -> AgentSettings:
        """Read ``bedrock_model_id``, ``agent_endpoint_name`` and ``agent_runtime_name`` context values.

        Raises :class:`SettingsError` for invalid values.
        """
        values: dict[str, Any] = {}
        for key, name in (
            ("bedrock_model_id", "bedrock_model_id"),
            ("agent_endpoint_name", "endpoint_name"),
            ("agent_runtime_name", "runtime_name"),
        ):
            raw = context(key)
            if raw is not None:
                values[name] = str(raw)
        values.update(overrides)
        return cls(**values)


def _check(pattern: re.Pattern[str], value: str, key: str, form: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SettingsError(f"{key} must be {form} (got {value!r})")


def _convert(key: str, raw: Any, convert: Callable[[Any], Any]) -> Any:
    if isinstance(raw, bool):
        raise SettingsError(f"{key} must be a {convert.__name__}, not a boolean")
    try:
        return convert(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{key} must be a {convert.__name__} (got {raw!r})") from None
