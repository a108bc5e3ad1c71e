"""The agent runtime stack: the reference agent's ARM64 image on an Amazon Bedrock AgentCore Runtime.

The container (reference_agent/Dockerfile) serves ``python -m reference_agent``, a
BedrockAgentCoreApp on port 8080. Its configuration arrives as environment variables:

- ``KOKORO_ENDPOINT_NAME``: the SageMaker endpoint to stream speech from;
- ``KOKORO_ENDPOINT_REGION``: that endpoint's Region (the stack's Region);
- ``BEDROCK_MODEL_ID``: the Bedrock model the agent converses with.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.settings import AgentSettings


class AgentRuntimeStack(cdk.Stack):
    """One ``AWS::BedrockAgentCore::Runtime`` running the agent image, public network, HTTP protocol.

    ``role`` is the execution role from the agent foundation stack. Outputs: ``AgentRuntimeArn``,
    ``AgentRuntimeId``, ``AgentRuntimeName``, ``ImageRepository`` and ``ImageTag``. Without a Bedrock
    model id the stack synthesizes (for ``cdk destroy``) but carries an error annotation that makes
    ``cdk deploy`` refuse.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: AgentSettings, role: iam.IRole, **kwargs
    ) -> None:
        super().__init__(
            scope, construct_id, description="Reference voice agent on AgentCore Runtime", **kwargs
        )
        self.settings = settings
        self.image = ecr_assets.DockerImageAsset(
            self,
            "AgentImage",
            directory=str(settings.image.directory),
            file=settings.image.dockerfile,
            exclude=settings.image.exclude_patterns(),
            # AgentCore Runtime runs ARM64 (Graviton) containers only.
            platform=ecr_assets.Platform.LINUX_ARM64,
        )
        environment = {
            "KOKORO_ENDPOINT_NAME": settings.endpoint_name,
            "KOKORO_ENDPOINT_REGION": self.region,
        }
        if settings.bedrock_model_id is None:
            cdk.Annotations.of(self).add_error(
                "No Bedrock model chosen: deploy with `agent-infra deploy --bedrock-model-id ID` "
                "(or `cdk deploy -c bedrock_model_id=ID`)."
            )
        else:
            environment["BEDROCK_MODEL_ID"] = settings.bedrock_model_id
        self.runtime = agentcore.CfnRuntime(
            self,
            "Runtime",
            agent_runtime_name=settings.runtime_name,
            description="Voice agent: Bedrock text streamed sentence by sentence into Kokoro-82M speech",
            role_arn=role.role_arn,
            agent_runtime_artifact=agentcore.CfnRuntime.AgentRuntimeArtifactProperty(
                container_configuration=agentcore.CfnRuntime.ContainerConfigurationProperty(
                    container_uri=self.image.image_uri
                )
            ),
            network_configuration=agentcore.CfnRuntime.NetworkConfigurationProperty(network_mode="PUBLIC"),
            protocol_configuration="HTTP",
            environment_variables=environment,
        )
        cdk.CfnOutput(self, "AgentRuntimeArn", value=self.runtime.attr_agent_runtime_arn)
        cdk.CfnOutput(self, "AgentRuntimeId", value=self.runtime.attr_agent_runtime_id)
        cdk.CfnOutput(self, "AgentRuntimeName", value=settings.runtime_name)
        cdk.CfnOutput(self, "ImageRepository", value=self.image.repository.repository_name)
        cdk.CfnOutput(self, "ImageTag", value=self.image.asset_hash)
