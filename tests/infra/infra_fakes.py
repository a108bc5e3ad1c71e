"""Stand-ins for the infra tests: a CDK-tool recorder on PATH and an AWS account with stubbed clients.

Nothing here reaches AWS or needs the CDK command-line tool: ``cdk`` (and ``npx``, ``node``,
``docker``) are small scripts in a temporary PATH, and every boto3 client is wrapped in a botocore
``Stubber`` that answers from a queue the test fills.
"""

from __future__ import annotations

import datetime
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ACCOUNT = "123456789012"
REGION = "eu-west-1"

_RECORDER = """#!{python}
import json, os, sys
with open(os.environ["CDK_RECORDER_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}) + "\\n")
sys.exit(int(os.environ.get("CDK_RECORDER_EXIT", "0")))
"""


def write_script(path: Path, text: str) -> Path:
    """Write an executable script."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@dataclass
class FakeTools:
    """A PATH of stand-ins: ``cdk`` records each call; ``node`` and ``docker`` answer like healthy ones."""

    bin: Path
    log: Path

    def calls(self) -> list[dict]:
        """Every recorded CDK call: ``argv`` (without the program), ``cwd`` and ``env``."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def add(self, name: str, text: str) -> Path:
        return write_script(self.bin / name, text)

    def add_recorder(self, name: str) -> Path:
        return self.add(name, _RECORDER.format(python=sys.executable))

    def remove(self, name: str) -> None:
        (self.bin / name).unlink()


@pytest.fixture
def fake_tools(tmp_path, monkeypatch) -> FakeTools:
    """PATH = one folder holding a recording ``cdk``, ``node`` v22 and a ``docker`` whose daemon answers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = FakeTools(bin=bin_dir, log=tmp_path / "cdk-calls.jsonl")
    tools.add_recorder("cdk")
    tools.add("node", "#!/bin/sh\necho v22.11.0\n")
    tools.add("docker", '#!/bin/sh\n[ "$1" = info ] && echo 27.3.1\n')
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("CDK_RECORDER_LOG", str(tools.log))
    monkeypatch.delenv("CDK_RECORDER_EXIT", raising=False)
    return tools


@pytest.fixture
def no_aws_config(monkeypatch, tmp_path):
    """An environment with no AWS credentials, profile or Region anywhere boto3 looks."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    # Never ask the EC2 instance metadata service (a 1 s timeout per try on machines outside EC2).
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


SERVICES = ("sts", "ssm", "cloudformation", "s3", "sagemaker", "bedrock-agentcore-control")


@dataclass
class StubbedAws:
    """An ``AwsAccount`` whose clients answer from botocore Stubbers, and what ``connect`` was given."""

    account: object
    stubbers: dict
    connected_with: list

    def stub(self, service: str):
        return self.stubbers[service]

    def assert_done(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()


@pytest.fixture(scope="session")
def boto_session():
    """One boto3 session for all tests: it caches the service models, which are slow to load."""
    import boto3

    return boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name=REGION)


@pytest.fixture
def stubbed_aws(monkeypatch, no_aws_config, boto_session) -> StubbedAws:
    """Replace ``infra.account.connect`` with one returning an account of stubbed clients."""
    from botocore.stub import Stubber

    from infra import account as aws

    session = boto_session
    clients, stubbers = {}, {}
    for service in SERVICES:
        clients[service] = session.client(service, region_name=REGION)
        stubbers[service] = Stubber(clients[service])
        stubbers[service].activate()
    account = aws.AwsAccount(session=session, account_id=ACCOUNT, region=REGION, clients=clients)
    connected_with: list = []

    def connect(profile=None, region=None):
        connected_with.append((profile, region))
        return account, []

    monkeypatch.setattr(aws, "connect", connect)
    yield StubbedAws(account=account, stubbers=stubbers, connected_with=connected_with)
    for stubber in stubbers.values():
        stubber.deactivate()


NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def stack_response(name: str, outputs: dict[str, str], status: str = "CREATE_COMPLETE") -> dict:
    """A CloudFormation DescribeStacks answer for one stack."""
    return {
        "Stacks": [
            {
                "StackName": name,
                "CreationTime": NOW,
                "StackStatus": status,
                "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in outputs.items()],
            }
        ]
    }


def add_stack(
    stubbed: StubbedAws, name: str, outputs: dict[str, str] | None, status: str = "CREATE_COMPLETE"
):
    """Queue DescribeStacks of ``name``: the stack with ``outputs``, or "does not exist" for ``None``."""
    stubber = stubbed.stub("cloudformation")
    if outputs is None:
        stubber.add_client_error(
            "describe_stacks",
            service_error_code="ValidationError",
            service_message=f"Stack with id {name} does not exist",
            http_status_code=400,
            expected_params={"StackName": name},
        )
    else:
        stubber.add_response("describe_stacks", stack_response(name, outputs, status), {"StackName": name})


def endpoint_response(name: str, status: str = "InService", instances: int = 1) -> dict:
    """A SageMaker DescribeEndpoint answer."""
    return {
        "EndpointName": name,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{name}",
        "EndpointConfigName": "EndpointConfig-abc",
        "EndpointStatus": status,
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "CurrentInstanceCount": instances,
                "DesiredInstanceCount": instances,
            }
        ],
    }
