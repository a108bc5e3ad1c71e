"""Settings validation and context parsing (infra.settings), and the ARN helpers of infra.foundation."""

from __future__ import annotations

import pytest

from infra.settings import MODELS, AgentSettings, ImageSource, SettingsError, SpeechSettings

KOKORO = MODELS["kokoro-82m"]


def _context(values: dict):
    return values.get


def test_speech_defaults():
    settings = SpeechSettings.from_context(KOKORO, _context({}))
    assert settings.endpoint_name == "kokoro-82m"
    assert settings.instance_type == "ml.g5.xlarge"
    assert (settings.min_instances, settings.max_instances) == (1, 2)
    assert settings.target_gpu_utilization == 60.0
    assert (settings.scaling_metric, settings.target_concurrency) == ("concurrency", 4.0)
    assert settings.model_data_version is None


def test_speech_context_strings_are_converted():
    settings = SpeechSettings.from_context(
        KOKORO,
        _context(
            {
                "kokoro-82m.min_instances": "2",
                "kokoro-82m.max_instances": "4",
                "kokoro-82m.target_gpu_utilization": "72.5",
                "kokoro-82m.scaling_metric": "gpu-utilization",
                "kokoro-82m.target_concurrency": "2.5",
                "kokoro-82m.instance_type": "ml.g6e.2xlarge",
                "kokoro-82m.model_data_version": "00ff00ff00ff00ff",
                "min_instances": "9",  # not this model's key: ignored
            }
        ),
    )
    assert (settings.min_instances, settings.max_instances, settings.target_gpu_utilization) == (2, 4, 72.5)
    assert settings.instance_type == "ml.g6e.2xlarge"
    assert (settings.scaling_metric, settings.target_concurrency) == ("gpu-utilization", 2.5)
    assert settings.model_data_version == "00ff00ff00ff00ff"


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"kokoro-82m.min_instances": "0"}, "kokoro-82m.min_instances"),
        ({"kokoro-82m.min_instances": "3", "kokoro-82m.max_instances": "2"}, "kokoro-82m.max_instances"),
        ({"kokoro-82m.min_instances": "1.5"}, "kokoro-82m.min_instances"),
        ({"kokoro-82m.min_instances": True}, "kokoro-82m.min_instances"),
        ({"kokoro-82m.instance_type": "g5.xlarge"}, "kokoro-82m.instance_type"),
        ({"kokoro-82m.endpoint_name": "bad_name"}, "kokoro-82m.endpoint_name"),
        ({"kokoro-82m.endpoint_name": "x" * 64}, "kokoro-82m.endpoint_name"),
        ({"kokoro-82m.target_gpu_utilization": "0"}, "kokoro-82m.target_gpu_utilization"),
        ({"kokoro-82m.target_gpu_utilization": "nan"}, "kokoro-82m.target_gpu_utilization"),
        ({"kokoro-82m.model_data_version": "../../etc"}, "kokoro-82m.model_data_version"),
        ({"kokoro-82m.scaling_metric": "invocations"}, "kokoro-82m.scaling_metric"),
        ({"kokoro-82m.target_concurrency": "0"}, "kokoro-82m.target_concurrency"),
        ({"kokoro-82m.target_concurrency": "nan"}, "kokoro-82m.target_concurrency"),
    ],
)
def test_speech_invalid_values_name_their_key(values, key):
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        SpeechSettings.from_context(KOKORO, _context(values))


def test_agent_context():
    settings = AgentSettings.from_context(
        _context(
            {
                "bedrock_model_id": "amazon.nova-lite-v1:0",
                "agent_endpoint_name": "tts",
                "agent_runtime_name": "a_b",
            }
        )
    )
    assert (settings.bedrock_model_id, settings.endpoint_name, settings.runtime_name) == (
        "amazon.nova-lite-v1:0",
        "tts",
        "a_b",
    )
    assert AgentSettings.from_context(_context({})).bedrock_model_id is None


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"bedrock_model_id": "model id with spaces"}, "bedrock_model_id"),
        ({"bedrock_model_id": ""}, "bedrock_model_id"),
        ({"agent_runtime_name": "has-hyphen"}, "agent_runtime_name"),
        ({"agent_runtime_name": "1starts_with_digit"}, "agent_runtime_name"),
        ({"agent_endpoint_name": "-x"}, "agent_endpoint_name"),
    ],
)
def test_agent_invalid_values_name_their_key(values, key):
    with pytest.raises(SettingsError, match=key):
        AgentSettings.from_context(_context(values))


def test_image_source_excludes_everything_but_its_entries(tmp_path):
    source = ImageSource(tmp_path, "Dockerfile", include=("a", "b"))
    assert source.exclude_patterns() == ["*", "!a", "!b", "**/__pycache__", "**/*.pyc"]
    assert ImageSource(tmp_path).exclude_patterns() == ["**/__pycache__", "**/*.pyc"]
    with pytest.raises(SettingsError, match="no Dockerfile at"):
        source.check("test")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    source.check("test")


def test_model_stack_names():
    assert KOKORO.stacks == ("Kokoro82mModelCache", "Kokoro82mFoundation", "Kokoro82mEndpoint")


# --- ARN helpers (infra.foundation imports aws_cdk) ---------------------------------------------------


@pytest.fixture(scope="module")
def foundation():
    pytest.importorskip("aws_cdk")
    from infra import foundation

    return foundation


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        (
            "anthropic.claude-3-5-haiku-20241022-v1:0",
            ["arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"],
        ),
        (
            "us.amazon.nova-pro-v1:0",
            [
                "arn:aws:bedrock:us-west-2:111122223333:inference-profile/us.amazon.nova-pro-v1:0",
                "arn:aws:bedrock:*::foundation-model/amazon.nova-pro-v1:0",
            ],
        ),
        (
            "global.anthropic.claude-sonnet-4-20250514-v1:0",
            [
                "arn:aws:bedrock:us-west-2:111122223333:inference-profile/global.anthropic.claude-sonnet-4-20250514-v1:0",
                "arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0",
            ],
        ),
        (
            "arn:aws:bedrock:us-west-2:111122223333:application-inference-profile/abc123",
            ["arn:aws:bedrock:us-west-2:111122223333:application-inference-profile/abc123"],
        ),
    ],
)
def test_bedrock_model_arns(foundation, model_id, expected):
    arns = foundation.bedrock_model_arns(
        model_id, partition="aws", region="us-west-2", account="111122223333"
    )
    assert arns == expected
