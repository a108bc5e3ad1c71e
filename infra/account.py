"""The AWS account the command-line tools act on, and the read-only look-ups they make in it.

boto3 is imported lazily so that ``--help``, ``list`` and the missing-prerequisite messages work
where it is not installed. Every look-up that finds nothing returns ``None`` instead of raising, so
``status`` can report "not deployed"; other AWS errors propagate as botocore's ``ClientError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.preflight import Problem

BOOTSTRAP_QUALIFIER = "hnb659fds"
"""The CDK default bootstrap qualifier (DefaultStackSynthesizer.DEFAULT_QUALIFIER)."""

CREDENTIALS_HELP = (
    "configure credentials: `aws configure` (access keys) or `aws configure sso` then "
    "`aws sso login`, or set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
    "(https://docs.aws.amazon.com/cli/latest/userguide/cli-chap-configure.html)"
)


@dataclass
class AwsAccount:
    """A boto3 session whose credentials STS accepted, with the account id and Region it acts in.

    ``client(service)`` returns one cached client per service; tests pass stubbed clients in
    ``clients``.
    """

    session: Any
    account_id: str
    region: str
    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """The boto3 client of ``service`` in this account's Region (created once)."""
        if service not in self.clients:
            self.clients[service] = self.session.client(service, region_name=self.region)
        return self.clients[service]


def connect(
    profile: str | None = None, region: str | None = None, *, clients: Mapping[str, Any] | None = None
) -> tuple[AwsAccount | None, list[Problem]]:
    """Open a session with the given (or default) profile and Region and check its credentials.

    Returns the account, or ``None`` with the problems that stop it: boto3 missing, unknown profile,
    no credentials, no Region, or credentials that STS rejects (expired SSO session, wrong keys).
    ``clients`` pre-seeds :attr:`AwsAccount.clients` (tests pass a stubbed ``sts`` client).
    """
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound
    except ImportError:
        return None, [Problem("boto3 (the AWS SDK for Python)", "install it: pip install -e '.[infra]'")]
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except ProfileNotFound:
        return None, [
            Problem(
                f"the AWS profile {profile!r}",
                f"create it: aws configure --profile {profile} (or aws configure sso)",
            )
        ]
    problems = []
    if session.get_credentials() is None:
        problems.append(Problem("AWS credentials", CREDENTIALS_HELP))
    if not session.region_name:
        problems.append(
            Problem(
                "an AWS Region",
                "pass --region REGION, set AWS_REGION, or run `aws configure set region REGION`",
            )
        )
    if problems:
        return None, problems
    account = AwsAccount(
        session=session, account_id="", region=session.region_name, clients=dict(clients or {})
    )
    try:
        identity = account.client("sts").get_caller_identity()
    except (BotoCoreError, ClientError) as error:
        return None, [
            Problem("valid AWS credentials", f"STS refused the current ones ({error}); {CREDENTIALS_HELP}")
        ]
    account.account_id = identity["Account"]
    return account, []


def check_bootstrap(account: AwsAccount, qualifier: str = BOOTSTRAP_QUALIFIER) -> list[Problem]:
    """Whether ``cdk bootstrap`` has run in this account and Region (its SSM version parameter exists).

    Returns one problem with the exact command when it has not; no problem when it has or when the
    parameter cannot be read (then ``cdk deploy`` gives its own verdict).
    """
    from botocore.exceptions import ClientError

    try:
        account.client("ssm").get_parameter(Name=f"/cdk-bootstrap/{qualifier}/version")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
            target = f"aws://{account.account_id}/{account.region}"
            return [Problem(f"the CDK bootstrap stack in {target}", f"run once: cdk bootstrap {target}")]
    return []


@dataclass(frozen=True)
class StackState:
    """A deployed stack's status (``CREATE_COMPLETE`` ...) and outputs by output key."""

    name: str
    status: str
    outputs: dict[str, str]


def describe_stack(account: AwsAccount, name: str) -> StackState | None:
    """The stack ``name``'s state, or ``None`` if no such stack exists."""
    from botocore.exceptions import ClientError

    try:
        response = account.client("cloudformation").describe_stacks(StackName=name)
    except ClientError as error:
        if "does not exist" in str(error.response.get("Error", {}).get("Message", "")):
            return None
        raise
    stack = response["Stacks"][0]
    outputs = {item["OutputKey"]: item["OutputValue"] for item in stack.get("Outputs", [])}
    return StackState(name=name, status=stack["StackStatus"], outputs=outputs)


def describe_endpoint(account: AwsAccount, endpoint_name: str) -> dict[str, Any] | None:
    """SageMaker DescribeEndpoint of ``endpoint_name``, or ``None`` if it does not exist."""
    from botocore.exceptions import ClientError

    try:
        return account.client("sagemaker").describe_endpoint(EndpointName=endpoint_name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ValidationException":
            return None
        raise


def describe_agent_runtime(account: AwsAccount, runtime_id: str) -> dict[str, Any] | None:
    """AgentCore GetAgentRuntime of ``runtime_id``, or ``None`` if it does not exist."""
    from botocore.exceptions import ClientError

    try:
        return account.client("bedrock-agentcore-control").get_agent_runtime(agentRuntimeId=runtime_id)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
