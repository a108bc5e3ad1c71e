"""Foundation stacks: the least-privilege IAM roles the endpoint and the agent run as.

There are two foundation stacks, one per command-line tool, because the two roles have separate
lifecycles: ``speech-infra`` owns the endpoint role and ``agent-infra`` the agent role, so neither tool
ever redeploys the other's role with different settings.

Every Allow statement names its actions (no wildcards) and its resources. The one ``"*"`` resource is
``ecr:GetAuthorizationToken``, which IAM cannot scope to a resource (the Service Authorization
Reference for Amazon ECR lists no resource type for it); the token alone pulls nothing without the
repository-scoped statements next to it.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.settings import AgentSettings, SpeechSettings

ECR_PULL_ACTIONS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
"""What pulling one image needs, on the repository."""

UNSCOPED_ACTIONS = frozenset({"ecr:GetAuthorizationToken"})
"""Actions IAM cannot scope to a resource: the only ones allowed on ``"*"``."""

AGENT_ENDPOINT_ACTIONS = ("sagemaker:InvokeEndpointWithBidirectionalStream",)
"""What the agent may do on the speech endpoint (PROTOCOL.md §12: the bidirectional stream)."""

AGENT_MODEL_ACTIONS = ("bedrock:InvokeModelWithResponseStream",)
"""What the agent may do on its Bedrock model (ConverseStream is authorised by this action)."""

# Cross-region inference profile ids start with a geography (Bedrock user guide, "Supported Regions
# and models for inference profiles"); such a profile routes each call to a foundation model in one
# of several Regions, so the role needs the profile and the model in every Region.
_INFERENCE_PROFILE = re.compile(r"(?:us|us-gov|eu|apac|jp|au|ca|global)\.(?P<model>.+)")


def asset_repository_arn(stack: cdk.Stack) -> str:
    """ARN of the ECR repository that ``cdk deploy`` pushes this stack's image assets to.

    That is the CDK bootstrap repository ``cdk-<qualifier>-container-assets-<account>-<region>``
    (DefaultStackSynthesizer.DEFAULT_IMAGE_ASSETS_REPOSITORY_NAME); the qualifier follows the
    ``@aws-cdk/core:bootstrapQualifier`` context like the synthesizer does.
    """
    synthesizer = stack.synthesizer
    qualifier = (
        getattr(synthesizer, "bootstrap_qualifier", None) or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER
    )
    name = f"cdk-{qualifier}-container-assets-{stack.account}-{stack.region}"
    return stack.format_arn(service="ecr", resource="repository", resource_name=name)


def bedrock_model_arns(model_id: str, *, partition: str, region: str, account: str) -> list[str]:
    """The resource ARNs that invoking ``model_id`` through Bedrock is authorised against.

    - an ARN (foundation model, inference profile, provisioned model) is used as given;
    - a cross-region inference profile id (``us.anthropic.claude-...``) gives the profile in this
      account and Region plus the foundation model in any Region (the profile picks the Region);
    - any other id is a foundation model in this Region.

    ``partition``, ``region`` and ``account`` may be CDK tokens.
    """
    if model_id.startswith("arn:"):
        return [model_id]
    profile = _INFERENCE_PROFILE.fullmatch(model_id)
    if profile:
        return [
            f"arn:{partition}:bedrock:{region}:{account}:inference-profile/{model_id}",
            f"arn:{partition}:bedrock:*::foundation-model/{profile['model']}",
        ]
    return [f"arn:{partition}:bedrock:{region}::foundation-model/{model_id}"]


def endpoint_arn(stack: cdk.Stack, endpoint_name: str) -> str:
    """ARN of the SageMaker endpoint ``endpoint_name`` in ``stack``'s account and Region.

    SageMaker writes endpoint ARNs with the name in lower case (DescribeEndpoint.EndpointArn).
    """
    return stack.format_arn(service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower())


def _ecr_pull_statements(stack: cdk.Stack) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid="PullImage", actions=list(ECR_PULL_ACTIONS), resources=[asset_repository_arn(stack)]
        ),
        iam.PolicyStatement(sid="EcrLogin", actions=sorted(UNSCOPED_ACTIONS), resources=["*"]),
    ]


class SpeechFoundationStack(cdk.Stack):
    """The SageMaker execution role of one speech endpoint.

    It may pull images from the CDK asset repository, read the model's folder of the model bucket
    (and list only that folder), and write the endpoint's CloudWatch log group
    ``/aws/sagemaker/Endpoints/<endpoint name>``. Outputs: ``EndpointRoleArn``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: SpeechSettings, bucket: s3.IBucket, **kwargs
    ) -> None:
        super().__init__(
            scope, construct_id, description=f"{settings.model.key}: endpoint execution role", **kwargs
        )
        prefix = settings.model.s3_prefix
        log_group = self.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/sagemaker/Endpoints/{settings.endpoint_name}",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role = iam.Role(
            self,
            "EndpointRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of endpoint {settings.endpoint_name}",
        )
        for statement in [
            *_ecr_pull_statements(self),
            iam.PolicyStatement(
                sid="ReadModelData",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{prefix}/*")],
            ),
            iam.PolicyStatement(
                sid="ListModelData",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
            ),
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                ],
                resources=[log_group, f"{log_group}:*"],
            ),
        ]:
            self.role.add_to_policy(statement)
        cdk.CfnOutput(self, "EndpointRoleArn", value=self.role.role_arn)


class AgentFoundationStack(cdk.Stack):
    """The AgentCore Runtime execution role of the reference agent.

    It may stream from the configured Bedrock model only (``bedrock:InvokeModelWithResponseStream``),
    open bidirectional streams on the configured speech endpoint only, pull images from the CDK asset
    repository and write the runtime's log groups ``/aws/bedrock-agentcore/runtimes/<name>-*``. The
    trust policy admits AgentCore acting for this account only (confused-deputy conditions from the
    AgentCore developer guide, "Runtime execution role"). Outputs: ``AgentRoleArn``.

    Without a Bedrock model id the stack still synthesizes (so ``cdk destroy`` works) but has no model
    statement and carries an error annotation, which makes ``cdk deploy`` refuse it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: AgentSettings, **kwargs) -> None:
        super().__init__(scope, construct_id, description="Reference voice agent: execution role", **kwargs)
        runtime_logs = self.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/bedrock-agentcore/runtimes/{settings.runtime_name}-*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        any_log_group = self.format_arn(
            service="logs",
            resource="log-group",
            resource_name="*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        # Any runtime of this account and Region: the runtime's id is not known before it exists.
        agentcore_arns = f"arn:{self.partition}:bedrock-agentcore:{self.region}:{self.account}:*"
        self.role = iam.Role(
            self,
            "AgentRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnLike": {"aws:SourceArn": agentcore_arns},
                },
            ),
            description=f"AgentCore Runtime execution role of {settings.runtime_name}",
        )
        statements = [
            iam.PolicyStatement(
                sid="StreamSpeech",
                actions=list(AGENT_ENDPOINT_ACTIONS),
                resources=[endpoint_arn(self, settings.endpoint_name)],
            ),
            *_ecr_pull_statements(self),
            iam.PolicyStatement(
                sid="CreateLogs",
                actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"],
                resources=[runtime_logs],
            ),
            # The runtime's log agent looks its group up before creating it.
            iam.PolicyStatement(
                sid="FindLogGroups", actions=["logs:DescribeLogGroups"], resources=[any_log_group]
            ),
            iam.PolicyStatement(
                sid="WriteLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{runtime_logs}:log-stream:*"],
            ),
        ]
        if settings.bedrock_model_id is None:
            cdk.Annotations.of(self).add_error(
                "No Bedrock model chosen: deploy with `agent-infra deploy --bedrock-model-id ID` "
                "(or `cdk deploy -c bedrock_model_id=ID`)."
            )
        else:
            statements.insert(
                0,
                iam.PolicyStatement(
                    sid="InvokeModel",
                    actions=list(AGENT_MODEL_ACTIONS),
                    resources=bedrock_model_arns(
                        settings.bedrock_model_id,
                        partition=self.partition,
                        region=self.region,
                        account=self.account,
                    ),
                ),
            )
        for statement in statements:
            self.role.add_to_policy(statement)
        cdk.CfnOutput(self, "AgentRoleArn", value=self.role.role_arn)
