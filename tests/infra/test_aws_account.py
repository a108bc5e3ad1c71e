"""AWS session checks and look-ups (infra.account) and tool checks (infra.preflight), all offline."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from infra_fakes import ACCOUNT, REGION, add_stack, endpoint_response, write_script

from infra import account as aws
from infra import preflight


def _missing(problems) -> list[str]:
    return [problem.missing for problem in problems]


def test_connect_without_credentials_or_region_says_what_to_do(no_aws_config):
    account, problems = aws.connect()
    assert account is None
    assert _missing(problems) == ["AWS credentials", "an AWS Region"]
    assert "aws configure" in problems[0].remedy and "AWS_PROFILE" in problems[0].remedy
    assert "--region" in problems[1].remedy


def test_connect_with_an_unknown_profile(no_aws_config):
    account, problems = aws.connect(profile="nobody")
    assert account is None
    assert _missing(problems) == ["the AWS profile 'nobody'"]
    assert "aws configure --profile nobody" in problems[0].remedy


def _sts(stub) -> dict:
    client = boto3.client(
        "sts", region_name=REGION, aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stub(stubber)
    stubber.activate()
    return {"sts": client}


def test_connect_checks_the_credentials_with_sts(no_aws_config, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    clients = _sts(
        lambda s: s.add_response(
            "get_caller_identity",
            {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/me", "UserId": "AIDEXAMPLE"},
        )
    )
    account, problems = aws.connect(region=REGION, clients=clients)
    assert problems == []
    assert (account.account_id, account.region) == (ACCOUNT, REGION)
    assert account.client("sts") is clients["sts"]


def test_connect_reports_rejected_credentials(no_aws_config, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    clients = _sts(
        lambda s: s.add_client_error(
            "get_caller_identity", service_error_code="ExpiredToken", service_message="token expired"
        )
    )
    account, problems = aws.connect(region=REGION, clients=clients)
    assert account is None
    assert _missing(problems) == ["valid AWS credentials"]
    assert "ExpiredToken" in problems[0].remedy


def test_bootstrap_missing_gives_the_exact_command(stubbed_aws):
    stubbed_aws.stub("ssm").add_client_error("get_parameter", service_error_code="ParameterNotFound")
    (problem,) = aws.check_bootstrap(stubbed_aws.account)
    assert problem.remedy == f"run once: cdk bootstrap aws://{ACCOUNT}/{REGION}"
    stubbed_aws.stub("ssm").add_response(
        "get_parameter",
        {"Parameter": {"Name": "/cdk-bootstrap/hnb659fds/version", "Value": "30", "Type": "String"}},
        {"Name": "/cdk-bootstrap/hnb659fds/version"},
    )
    assert aws.check_bootstrap(stubbed_aws.account) == []
    stubbed_aws.stub("ssm").add_client_error("get_parameter", service_error_code="AccessDeniedException")
    assert aws.check_bootstrap(stubbed_aws.account) == []
    stubbed_aws.assert_done()


def test_describe_stack(stubbed_aws):
    add_stack(stubbed_aws, "A", {"BucketName": "b"}, status="UPDATE_COMPLETE")
    add_stack(stubbed_aws, "B", None)
    state = aws.describe_stack(stubbed_aws.account, "A")
    assert (state.status, state.outputs) == ("UPDATE_COMPLETE", {"BucketName": "b"})
    assert aws.describe_stack(stubbed_aws.account, "B") is None
    stubbed_aws.stub("cloudformation").add_client_error("describe_stacks", service_error_code="AccessDenied")
    with pytest.raises(Exception, match="AccessDenied"):
        aws.describe_stack(stubbed_aws.account, "C")


def test_describe_endpoint_and_runtime_return_none_when_absent(stubbed_aws):
    sagemaker = stubbed_aws.stub("sagemaker")
    sagemaker.add_response("describe_endpoint", endpoint_response("e"), {"EndpointName": "e"})
    sagemaker.add_client_error("describe_endpoint", service_error_code="ValidationException")
    assert aws.describe_endpoint(stubbed_aws.account, "e")["EndpointStatus"] == "InService"
    assert aws.describe_endpoint(stubbed_aws.account, "f") is None
    stubbed_aws.stub("bedrock-agentcore-control").add_client_error(
        "get_agent_runtime", service_error_code="ResourceNotFoundException"
    )
    assert aws.describe_agent_runtime(stubbed_aws.account, "r-1") is None
    stubbed_aws.assert_done()


# --- preflight ---------------------------------------------------------------------------------------


def test_find_cdk_prefers_cdk_then_npx():
    assert preflight.find_cdk({"cdk": "/bin/cdk", "npx": "/bin/npx"}.get) == (["/bin/cdk"], [])
    assert preflight.find_cdk({"npx": "/bin/npx"}.get) == (["/bin/npx", "--yes", "aws-cdk@2"], [])
    command, (problem,) = preflight.find_cdk({}.get)
    assert command is None
    assert "npm install -g aws-cdk" in problem.remedy


@pytest.mark.parametrize(
    ("script", "missing"),
    [
        ("echo v16.20.0", ["Node.js 18 or newer (found v16.20.0)"]),
        ("exit 3", ["a working Node.js"]),
        ("echo v20.20.2", []),
    ],
)
def test_check_node(tmp_path, script, missing):
    node = write_script(tmp_path / "node", f"#!/bin/sh\n{script}\n")
    assert _missing(preflight.check_node({"node": str(node)}.get)) == missing


def test_check_node_absent():
    (problem,) = preflight.check_node({}.get)
    assert problem.missing == "Node.js (node)" and "nodejs.org" in problem.remedy


def test_check_docker(tmp_path):
    (problem,) = preflight.check_docker({}.get)
    assert "docs.docker.com" in problem.remedy
    down = write_script(
        tmp_path / "docker", "#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2; exit 1\n"
    )
    (problem,) = preflight.check_docker({"docker": str(down)}.get)
    assert problem.missing == "a running Docker daemon (`docker info` failed)"
    up = write_script(tmp_path / "docker-up", "#!/bin/sh\necho 27.3.1\n")
    assert preflight.check_docker({"docker": str(up)}.get) == []
