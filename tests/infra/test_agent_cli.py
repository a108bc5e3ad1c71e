"""``agent-infra``: the exact CDK calls (a recorder stands in for cdk), status, destroy leftovers, and
the hand-off of ``demo`` to the agent package."""

from __future__ import annotations

import os
import shlex
import sys
import types

import pytest
from infra_fakes import ACCOUNT, NOW, REGION, add_stack, endpoint_response

from infra.cli import agent_main
from infra.settings import REPO_ROOT

APP = f"{shlex.quote(sys.executable)} -m infra.app"
GLOBAL = ["--app", APP, "--output", str(REPO_ROOT / "cdk.out")]
STACKS = ["KokoroAgentFoundation", "KokoroAgentRuntime"]
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
BOOTSTRAP = "/cdk-bootstrap/hnb659fds/version"


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["deploy", "--help"], ["diff", "--help"], ["destroy", "--help"], ["status", "--help"]],
)
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        agent_main(argv)
    assert exit_.value.code == 0
    assert "usage: agent-infra" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["deploy", "diff"])
def test_deploy_and_diff_require_the_model_id(verb, capsys):
    with pytest.raises(SystemExit) as exit_:
        agent_main([verb])
    assert exit_.value.code == 2
    assert "--bedrock-model-id" in capsys.readouterr().err


def test_deploy(fake_tools, stubbed_aws, capsys):
    stubbed_aws.stub("ssm").add_response(
        "get_parameter",
        {"Parameter": {"Name": BOOTSTRAP, "Value": "30", "Type": "String"}},
        {"Name": BOOTSTRAP},
    )
    stubbed_aws.stub("sagemaker").add_response(
        "describe_endpoint", endpoint_response("tts-prod"), {"EndpointName": "tts-prod"}
    )
    status = agent_main(
        [
            "deploy",
            "--bedrock-model-id",
            MODEL,
            "--endpoint-name",
            "tts-prod",
            "--runtime-name",
            "voice_prod",
            "--region",
            REGION,
            "--yes",
        ]
    )
    assert status == 0
    stubbed_aws.assert_done()
    (call,) = fake_tools.calls()
    assert call["argv"] == [
        *GLOBAL,
        "--context",
        f"bedrock_model_id={MODEL}",
        "--context",
        "agent_endpoint_name=tts-prod",
        "--context",
        "agent_runtime_name=voice_prod",
        "deploy",
        "--exclusively",
        "--require-approval",
        "never",
        *STACKS,
    ]
    assert call["env"] == {**os.environ, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}
    assert call["cwd"] == str(REPO_ROOT)
    assert "no SageMaker endpoint" not in capsys.readouterr().err


def test_deploy_notes_a_missing_speech_endpoint(fake_tools, stubbed_aws, capsys):
    stubbed_aws.stub("ssm").add_response(
        "get_parameter", {"Parameter": {"Name": BOOTSTRAP, "Value": "30", "Type": "String"}}
    )
    stubbed_aws.stub("sagemaker").add_client_error(
        "describe_endpoint", service_error_code="ValidationException"
    )
    assert agent_main(["deploy", "--bedrock-model-id", MODEL]) == 0
    assert "no SageMaker endpoint kokoro-82m" in capsys.readouterr().err
    (call,) = fake_tools.calls()
    assert call["argv"] == [
        *GLOBAL,
        "--context",
        f"bedrock_model_id={MODEL}",
        "deploy",
        "--exclusively",
        *STACKS,
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["deploy", "--bedrock-model-id", "not a model"], "bedrock_model_id must be"),
        (
            ["deploy", "--bedrock-model-id", MODEL, "--runtime-name", "has-hyphen"],
            "agent_runtime_name must be",
        ),
    ],
)
def test_bad_settings_stop_before_any_call(fake_tools, argv, message, capsys):
    assert agent_main(argv) == 2
    assert message in capsys.readouterr().err
    assert fake_tools.calls() == []


def test_deploy_needs_docker(fake_tools, stubbed_aws, capsys):
    fake_tools.add("docker", "#!/bin/sh\nexit 1\n")
    stubbed_aws.stub("ssm").add_response(
        "get_parameter", {"Parameter": {"Name": BOOTSTRAP, "Value": "30", "Type": "String"}}
    )
    assert agent_main(["deploy", "--bedrock-model-id", MODEL]) == 2
    assert "missing: a running Docker daemon" in capsys.readouterr().err
    assert fake_tools.calls() == []


def test_diff(fake_tools, stubbed_aws):
    assert agent_main(["diff", "--bedrock-model-id", MODEL, "--profile", "dev"]) == 0
    (call,) = fake_tools.calls()
    assert call["argv"] == [
        *GLOBAL,
        "--profile",
        "dev",
        "--context",
        f"bedrock_model_id={MODEL}",
        "diff",
        "--exclusively",
        *STACKS,
    ]
    assert stubbed_aws.connected_with == [("dev", None)]


def test_destroy_without_model_id_and_its_leftovers(fake_tools, stubbed_aws, capsys):
    add_stack(
        stubbed_aws,
        "KokoroAgentRuntime",
        {"AgentRuntimeName": "voice_prod", "ImageRepository": "repo", "ImageTag": "t1"},
    )
    assert agent_main(["destroy"]) == 0
    (call,) = fake_tools.calls()
    assert call["argv"] == [*GLOBAL, "destroy", *STACKS]
    out = capsys.readouterr().out
    assert (
        f"aws ecr batch-delete-image --repository-name repo --image-ids imageTag=t1 --region {REGION}" in out
    )
    assert "--log-group-name-prefix /aws/bedrock-agentcore/runtimes/voice_prod-" in out


def test_destroy_with_yes_forces(fake_tools, stubbed_aws, capsys):
    add_stack(stubbed_aws, "KokoroAgentRuntime", None)
    assert agent_main(["destroy", "--yes", "--bedrock-model-id", MODEL]) == 0
    assert fake_tools.calls()[0]["argv"][-4:] == ["destroy", "--force", *STACKS]
    out = capsys.readouterr().out
    assert f"cdk-hnb659fds-container-assets-{ACCOUNT}-{REGION}" in out
    assert "/aws/bedrock-agentcore/runtimes/kokoro_voice_agent-" in out


def test_status(stubbed_aws, capsys):
    add_stack(stubbed_aws, "KokoroAgentFoundation", {})
    add_stack(stubbed_aws, "KokoroAgentRuntime", {"AgentRuntimeId": "voice_prod-AbC123"})
    stubbed_aws.stub("bedrock-agentcore-control").add_response(
        "get_agent_runtime",
        {
            "agentRuntimeArn": f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/voice_prod-AbC123",
            "agentRuntimeName": "voice_prod",
            "agentRuntimeId": "voice_prod-AbC123",
            "agentRuntimeVersion": "1",
            "createdAt": NOW,
            "lastUpdatedAt": NOW,
            "roleArn": f"arn:aws:iam::{ACCOUNT}:role/agent",
            "networkConfiguration": {"networkMode": "PUBLIC"},
            "status": "READY",
            "lifecycleConfiguration": {"idleRuntimeSessionTimeout": 900, "maxLifetime": 28800},
            "environmentVariables": {"KOKORO_ENDPOINT_NAME": "tts-prod", "BEDROCK_MODEL_ID": MODEL},
        },
        {"agentRuntimeId": "voice_prod-AbC123"},
    )
    stubbed_aws.stub("sagemaker").add_response(
        "describe_endpoint", endpoint_response("tts-prod"), {"EndpointName": "tts-prod"}
    )
    assert agent_main(["status"]) == 0
    stubbed_aws.assert_done()
    out = capsys.readouterr().out
    assert "stack KokoroAgentRuntime: CREATE_COMPLETE" in out
    assert "runtime voice_prod (" in out and "): READY" in out
    assert f"model: {MODEL}" in out
    assert "speech endpoint tts-prod: InService" in out


def test_status_when_nothing_is_deployed(stubbed_aws, capsys):
    add_stack(stubbed_aws, "KokoroAgentFoundation", None)
    add_stack(stubbed_aws, "KokoroAgentRuntime", None)
    assert agent_main(["status"]) == 0
    assert "runtime: not deployed" in capsys.readouterr().out


def test_demo_hands_every_argument_to_the_agent_package(monkeypatch):
    received = []
    demo = types.ModuleType("reference_agent.demo")
    demo.main = lambda args: received.append(args) or 7
    monkeypatch.setitem(sys.modules, "reference_agent.demo", demo)
    assert agent_main(["demo", "--help", "--prompt", "hi"]) == 7
    assert received == [["--help", "--prompt", "hi"]]


def test_demo_without_the_agent_package(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "reference_agent.demo", None)  # makes the import fail
    assert agent_main(["demo"]) == 2
    assert "reference agent package is not installed or not ready" in capsys.readouterr().err
