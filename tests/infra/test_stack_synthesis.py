"""Offline synthesis of every stack, checked with aws_cdk.assertions (no AWS, no CDK tool, no Docker).

Two apps are synthesized once each for the whole module: ``configured`` (explicit account and
Region, every setting given) and ``bare`` (environment-agnostic, nothing given: the defaults and the
deploy-blocking errors). The server image is a stand-in Dockerfile in a temporary folder, so these
tests never depend on reference_server/Dockerfile; the agent image is the repository's own.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

cdk = pytest.importorskip("aws_cdk")
pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="aws-cdk-lib synthesis needs Node.js")

from aws_cdk.assertions import Match, Template  # noqa: E402

from infra.app import add_stacks  # noqa: E402
from infra.foundation import UNSCOPED_ACTIONS  # noqa: E402
from infra.settings import AGENT_IMAGE, ImageSource  # noqa: E402

ACCOUNT = "123456789012"
REGION = "eu-west-1"
VERSION = "0123456789abcdef"
PROFILE_ID = "eu.anthropic.claude-3-7-sonnet-20250219-v1:0"

CONFIGURED = {
    "kokoro-82m.endpoint_name": "tts-prod",
    "kokoro-82m.instance_type": "ml.g6.2xlarge",
    "kokoro-82m.min_instances": "2",
    "kokoro-82m.max_instances": "6",
    "kokoro-82m.target_gpu_utilization": "45",
    "kokoro-82m.target_concurrency": "3",
    "kokoro-82m.model_data_version": VERSION,
    "bedrock_model_id": PROFILE_ID,
    "agent_endpoint_name": "tts-prod",
    "agent_runtime_name": "voice_agent_prod",
}

SPEECH = ("Kokoro82mModelCache", "Kokoro82mFoundation", "Kokoro82mEndpoint")
AGENT = ("KokoroAgentFoundation", "KokoroAgentRuntime")


@dataclass
class Synth:
    """One synthesized app: templates, asset manifests, messages and dependencies by stack name."""

    outdir: Path
    assembly: object

    def template(self, name: str) -> Template:
        return Template.from_json(self.raw(name))

    def raw(self, name: str) -> dict:
        return self.assembly.get_stack_by_name(name).template

    def resources(self, name: str, kind: str) -> dict:
        return {key: value for key, value in self.raw(name)["Resources"].items() if value["Type"] == kind}

    def one(self, name: str, kind: str) -> dict:
        (resource,) = self.resources(name, kind).values()
        return resource

    def errors(self, name: str) -> list[str]:
        stack = self.assembly.get_stack_by_name(name)
        return [message.entry.data for message in stack.messages if message.level.value == "ERROR"]

    def docker_images(self, name: str) -> list[dict]:
        manifest = json.loads((self.outdir / f"{name}.assets.json").read_text())
        return list(manifest.get("dockerImages", {}).values())

    def dependencies(self, name: str) -> set[str]:
        ids = {artifact.id for artifact in self.assembly.get_stack_by_name(name).dependencies}
        return {artifact_id for artifact_id in ids if not artifact_id.endswith(".assets")}


def _synth(tmp_path_factory, context: dict, env) -> Synth:
    server = tmp_path_factory.mktemp("server-image")
    (server / "Dockerfile").write_text('FROM python:3.12-slim\nCMD ["python", "-c", "pass"]\n')
    outdir = tmp_path_factory.mktemp("cdk-out")
    app = cdk.App(outdir=str(outdir), context=context)
    add_stacks(app, env=env, server_image=ImageSource(server), agent_image=AGENT_IMAGE)
    return Synth(outdir=outdir, assembly=app.synth())


@pytest.fixture(scope="module")
def configured(tmp_path_factory) -> Synth:
    return _synth(tmp_path_factory, CONFIGURED, cdk.Environment(account=ACCOUNT, region=REGION))


@pytest.fixture(scope="module")
def gpu_scaled(tmp_path_factory) -> Synth:
    context = {**CONFIGURED, "kokoro-82m.scaling_metric": "gpu-utilization"}
    return _synth(tmp_path_factory, context, cdk.Environment(account=ACCOUNT, region=REGION))


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Synth:
    return _synth(tmp_path_factory, {}, None)


def _statements(synth: Synth, stack: str) -> dict[str, dict]:
    """The Allow statements of the stack's IAM policies, by Sid."""
    statements = {}
    for policy in synth.resources(stack, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            statements[statement["Sid"]] = statement
    return statements


def _listify(value) -> list:
    return value if isinstance(value, list) else [value]


def _text(value) -> str:
    """A CloudFormation value flattened to text: Fn::Join parts concatenated, other intrinsics as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_text(part) for part in parts)
    return json.dumps(value, sort_keys=True)


# --- resource counts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("Kokoro82mModelCache", {"AWS::S3::Bucket": 1, "AWS::S3::BucketPolicy": 1}),
        ("Kokoro82mFoundation", {"AWS::IAM::Role": 1, "AWS::IAM::Policy": 1}),
        (
            "Kokoro82mEndpoint",
            {
                "AWS::SageMaker::Model": 1,
                "AWS::SageMaker::EndpointConfig": 1,
                "AWS::SageMaker::Endpoint": 1,
                "AWS::ApplicationAutoScaling::ScalableTarget": 1,
                "AWS::ApplicationAutoScaling::ScalingPolicy": 1,
            },
        ),
        ("KokoroAgentFoundation", {"AWS::IAM::Role": 1, "AWS::IAM::Policy": 1}),
        ("KokoroAgentRuntime", {"AWS::BedrockAgentCore::Runtime": 1}),
    ],
)
def test_each_stack_holds_exactly_its_resources(configured, stack, expected):
    kinds: dict[str, int] = {}
    for resource in configured.raw(stack)["Resources"].values():
        if resource["Type"] != "AWS::CDK::Metadata":
            kinds[resource["Type"]] = kinds.get(resource["Type"], 0) + 1
    assert kinds == expected
    for kind, count in expected.items():
        configured.template(stack).resource_count_is(kind, count)


def test_stack_dependencies_keep_agent_and_speech_independent(configured):
    assert configured.dependencies("Kokoro82mModelCache") == set()
    assert configured.dependencies("Kokoro82mFoundation") == {"Kokoro82mModelCache"}
    assert configured.dependencies("Kokoro82mEndpoint") == {"Kokoro82mModelCache", "Kokoro82mFoundation"}
    assert configured.dependencies("KokoroAgentFoundation") == set()
    assert configured.dependencies("KokoroAgentRuntime") == {"KokoroAgentFoundation"}


def test_configured_app_has_no_errors(configured):
    for stack in SPEECH + AGENT:
        assert configured.errors(stack) == [], stack


# --- model cache ---------------------------------------------------------------------------------


def test_bucket_blocks_public_access_and_is_retained(configured):
    configured.template("Kokoro82mModelCache").has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": {
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "BucketEncryption": Match.any_value(),
            },
            "DeletionPolicy": "Retain",
        },
    )


def test_bucket_policy_denies_every_request_without_tls(configured):
    policy = configured.one("Kokoro82mModelCache", "AWS::S3::BucketPolicy")
    assert policy["DeletionPolicy"] == "Retain"
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Action"] == "s3:*"
    assert statement["Principal"] == {"AWS": "*"}
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    covered = {_text(resource) for resource in statement["Resource"]}
    bucket = json.dumps({"Fn::GetAtt": ["ModelBucketB33D855B", "Arn"]}, sort_keys=True)
    assert covered == {bucket, bucket + "/*"}


# --- IAM: least privilege ------------------------------------------------------------------------


def _allow_statements(synth: Synth) -> list[tuple[str, dict]]:
    found = []
    for stack in SPEECH + AGENT:
        for resource in synth.raw(stack)["Resources"].values():
            documents = []
            if resource["Type"] == "AWS::IAM::Policy":
                documents.append(resource["Properties"]["PolicyDocument"])
            if resource["Type"] == "AWS::IAM::Role":
                documents += [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
                assert "ManagedPolicyArns" not in resource["Properties"], stack
            for document in documents:
                found += [(stack, s) for s in document["Statement"] if s["Effect"] == "Allow"]
    return found


@pytest.mark.parametrize("app", ["configured", "bare"])
def test_no_wildcard_actions_and_star_only_where_iam_cannot_scope(request, app):
    statements = _allow_statements(request.getfixturevalue(app))
    assert len(statements) >= 8
    for stack, statement in statements:
        actions = _listify(statement["Action"])
        assert all("*" not in action for action in actions), (stack, statement)
        resources = _listify(statement["Resource"])
        if "*" in resources:
            assert resources == ["*"] and set(actions) <= UNSCOPED_ACTIONS, (stack, statement)


def test_endpoint_role_reads_only_the_model_folder_and_its_image(configured):
    role = configured.one("Kokoro82mFoundation", "AWS::IAM::Role")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}
    ]
    statements = _statements(configured, "Kokoro82mFoundation")
    assert set(statements) == {"PullImage", "EcrLogin", "ReadModelData", "ListModelData", "WriteLogs"}
    bucket_arn = json.dumps(
        {"Fn::ImportValue": "Kokoro82mModelCache:ExportsOutputFnGetAttModelBucketB33D855BArn307A99BA"},
        sort_keys=True,
    )
    assert statements["ReadModelData"]["Action"] == "s3:GetObject"
    assert _text(statements["ReadModelData"]["Resource"]) == bucket_arn + "/kokoro-82m/*"
    assert statements["ListModelData"]["Action"] == "s3:ListBucket"
    assert _text(statements["ListModelData"]["Resource"]) == bucket_arn
    assert statements["ListModelData"]["Condition"] == {"StringLike": {"s3:prefix": ["kokoro-82m/*"]}}
    log_group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/tts-prod"
    logs = [_text(r).replace('{"Ref": "AWS::Partition"}', "aws") for r in statements["WriteLogs"]["Resource"]]
    assert logs == [log_group, log_group + ":*"]


@pytest.mark.parametrize(
    ("stack", "image_stack"),
    [("Kokoro82mFoundation", "Kokoro82mEndpoint"), ("KokoroAgentFoundation", "KokoroAgentRuntime")],
)
def test_roles_pull_only_from_the_repository_their_image_is_pushed_to(configured, stack, image_stack):
    (image,) = configured.docker_images(image_stack)
    (destination,) = image["destinations"].values()
    statement = _statements(configured, stack)["PullImage"]
    assert sorted(statement["Action"]) == [
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
    ]
    assert _text(statement["Resource"]).endswith(
        f":ecr:{REGION}:{ACCOUNT}:repository/{destination['repositoryName']}"
    )


def test_agent_role_invokes_only_its_model_and_its_endpoint(configured):
    statements = _statements(configured, "KokoroAgentFoundation")
    assert set(statements) == {
        "InvokeModel",
        "StreamSpeech",
        "PullImage",
        "EcrLogin",
        "CreateLogs",
        "FindLogGroups",
        "WriteLogs",
    }
    assert statements["InvokeModel"]["Action"] == "bedrock:InvokeModelWithResponseStream"
    partition = '{"Ref": "AWS::Partition"}'
    assert [_text(r) for r in statements["InvokeModel"]["Resource"]] == [
        f"arn:{partition}:bedrock:{REGION}:{ACCOUNT}:inference-profile/{PROFILE_ID}",
        f"arn:{partition}:bedrock:*::foundation-model/anthropic.claude-3-7-sonnet-20250219-v1:0",
    ]
    assert statements["StreamSpeech"]["Action"] == "sagemaker:InvokeEndpointWithBidirectionalStream"
    assert _text(statements["StreamSpeech"]["Resource"]) == (
        f"arn:{partition}:sagemaker:{REGION}:{ACCOUNT}:endpoint/tts-prod"
    )
    log_groups = f"arn:{partition}:logs:{REGION}:{ACCOUNT}:log-group"
    runtime_logs = f"{log_groups}:/aws/bedrock-agentcore/runtimes/voice_agent_prod-*"
    assert _text(statements["CreateLogs"]["Resource"]) == runtime_logs
    assert _text(statements["WriteLogs"]["Resource"]) == runtime_logs + ":log-stream:*"


def test_agent_role_trusts_agentcore_of_this_account_only(configured):
    role = configured.one("KokoroAgentFoundation", "AWS::IAM::Role")
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "bedrock-agentcore.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    assert _text(trust["Condition"]["ArnLike"]["aws:SourceArn"]) == (
        f'arn:{{"Ref": "AWS::Partition"}}:bedrock-agentcore:{REGION}:{ACCOUNT}:*'
    )


# --- endpoint ------------------------------------------------------------------------------------


def test_endpoint_variant_uses_the_instance_type_and_minimum(configured):
    config = configured.one("Kokoro82mEndpoint", "AWS::SageMaker::EndpointConfig")
    (variant,) = config["Properties"]["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6.2xlarge"
    assert variant["InitialInstanceCount"] == 2
    assert variant["VariantName"] == "AllTraffic"
    assert variant["ModelName"] == {"Fn::GetAtt": ["Model", "ModelName"]}
    configured.template("Kokoro82mEndpoint").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "tts-prod",
            "EndpointConfigName": {"Fn::GetAtt": ["EndpointConfig", "EndpointConfigName"]},
        },
    )


def test_model_reads_the_uncompressed_weights_folder_of_this_version(configured):
    model = configured.one("Kokoro82mEndpoint", "AWS::SageMaker::Model")["Properties"]
    source = model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix"
    assert source["CompressionType"] == "None"
    bucket = json.dumps(
        {"Fn::ImportValue": "Kokoro82mModelCache:ExportsOutputRefModelBucketB33D855BFE59FC6E"}, sort_keys=True
    )
    assert _text(source["S3Uri"]) == f"s3://{bucket}/kokoro-82m/{VERSION}/"
    assert model["PrimaryContainer"]["Environment"] == {
        "KOKORO_ASSETS_DIR": "/opt/ml/model",
        "HF_HUB_OFFLINE": "1",
    }
    assert model["ExecutionRoleArn"] == {
        "Fn::ImportValue": "Kokoro82mFoundation:ExportsOutputFnGetAttEndpointRole1A3BA5E6Arn3263C0CA"
    }


def test_server_image_is_an_amd64_asset_the_model_runs(configured):
    (image,) = configured.docker_images("Kokoro82mEndpoint")
    assert image["source"]["platform"] == "linux/amd64"
    assert image["source"]["dockerFile"] == "Dockerfile"
    (destination,) = image["destinations"].values()
    model = configured.one("Kokoro82mEndpoint", "AWS::SageMaker::Model")["Properties"]
    assert model["PrimaryContainer"]["Image"]["Fn::Sub"].endswith(
        f"/{destination['repositoryName']}:{destination['imageTag']}"
    )


def test_autoscaling_tracks_the_streams_open_per_instance_by_default(configured):
    """The capacity figure (bench §11) as the target of SageMaker's high-resolution concurrency metric."""
    policies = configured.resources("Kokoro82mEndpoint", "AWS::ApplicationAutoScaling::ScalingPolicy")
    (policy,) = policies.values()
    assert policy["Properties"]["PolicyName"] == "tts-prod-concurrency"
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 3,
        "ScaleInCooldown": 600,
        "ScaleOutCooldown": 60,
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
        },
    }


def test_autoscaling_can_track_gpu_utilization_of_the_variant(gpu_scaled):
    configured = gpu_scaled
    (policy,) = configured.resources(
        "Kokoro82mEndpoint", "AWS::ApplicationAutoScaling::ScalingPolicy"
    ).values()
    assert policy["Properties"]["PolicyName"] == "tts-prod-gpu-utilization"
    target = configured.one("Kokoro82mEndpoint", "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/tts-prod/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 2,
        "MaxCapacity": 6,
    }
    assert target["DependsOn"] == ["Endpoint"]
    configured.template("Kokoro82mEndpoint").has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "ScalingTargetId": {"Ref": "ScalableTarget"},
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": 45,
                "CustomizedMetricSpecification": {
                    "Namespace": "/aws/sagemaker/Endpoints",
                    "MetricName": "GPUUtilization",
                    "Statistic": "Average",
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": "tts-prod"},
                        {"Name": "VariantName", "Value": "AllTraffic"},
                    ],
                },
            },
        },
    )


def test_endpoint_outputs_name_the_image_for_cleanup(configured):
    (image,) = configured.docker_images("Kokoro82mEndpoint")
    (destination,) = image["destinations"].values()
    outputs = configured.raw("Kokoro82mEndpoint")["Outputs"]
    assert outputs["ImageTag"]["Value"] == destination["imageTag"]
    assert outputs["ImageRepository"]["Value"] == destination["repositoryName"]


# --- agent runtime -------------------------------------------------------------------------------


def test_agent_runtime_runs_an_arm64_image_with_endpoint_and_model(configured):
    (image,) = configured.docker_images("KokoroAgentRuntime")
    assert image["source"]["platform"] == "linux/arm64"
    assert image["source"]["dockerFile"] == "reference_agent/Dockerfile"
    (destination,) = image["destinations"].values()
    runtime = configured.one("KokoroAgentRuntime", "AWS::BedrockAgentCore::Runtime")["Properties"]
    assert runtime["AgentRuntimeArtifact"]["ContainerConfiguration"]["ContainerUri"]["Fn::Sub"].endswith(
        f"/{destination['repositoryName']}:{destination['imageTag']}"
    )
    assert runtime["AgentRuntimeName"] == "voice_agent_prod"
    assert runtime["EnvironmentVariables"] == {
        "KOKORO_ENDPOINT_NAME": "tts-prod",
        "KOKORO_ENDPOINT_REGION": REGION,
        "BEDROCK_MODEL_ID": PROFILE_ID,
    }
    assert runtime["NetworkConfiguration"] == {"NetworkMode": "PUBLIC"}
    assert runtime["ProtocolConfiguration"] == "HTTP"
    assert runtime["RoleArn"] == {
        "Fn::ImportValue": "KokoroAgentFoundation:ExportsOutputFnGetAttAgentRoleF4A42D6BArn2EB19505"
    }


def test_agent_image_context_holds_only_what_the_dockerfile_needs(configured):
    (image,) = configured.docker_images("KokoroAgentRuntime")
    staged = configured.outdir / image["source"]["directory"]
    assert sorted(path.name for path in staged.iterdir()) == sorted(AGENT_IMAGE.include)
    assert not list(staged.rglob("__pycache__"))


# --- defaults and missing settings -----------------------------------------------------------------


def test_defaults(bare):
    config = bare.one("Kokoro82mEndpoint", "AWS::SageMaker::EndpointConfig")
    (variant,) = config["Properties"]["ProductionVariants"]
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.g5.xlarge", 1)
    target = bare.one("Kokoro82mEndpoint", "AWS::ApplicationAutoScaling::ScalableTarget")["Properties"]
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
        "endpoint/kokoro-82m/variant/AllTraffic",
        1,
        2,
    )
    policy = bare.one("Kokoro82mEndpoint", "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 4  # streams open per instance (infra/README.md)
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"].startswith(
        "SageMakerVariantConcurrent"
    )
    runtime = bare.one("KokoroAgentRuntime", "AWS::BedrockAgentCore::Runtime")["Properties"]
    assert runtime["AgentRuntimeName"] == "kokoro_voice_agent"
    assert runtime["EnvironmentVariables"]["KOKORO_ENDPOINT_NAME"] == "kokoro-82m"


def test_missing_weights_version_and_model_id_block_deploy_only(bare):
    """Errors make `cdk deploy` refuse these stacks; `cdk destroy` does not validate, so it still works."""
    (error,) = bare.errors("Kokoro82mEndpoint")
    assert "speech-infra deploy kokoro-82m" in error
    for stack in AGENT:
        (error,) = bare.errors(stack)
        assert "--bedrock-model-id" in error
    assert bare.errors("Kokoro82mModelCache") == bare.errors("Kokoro82mFoundation") == []
    assert "InvokeModel" not in _statements(bare, "KokoroAgentFoundation")
    runtime = bare.one("KokoroAgentRuntime", "AWS::BedrockAgentCore::Runtime")["Properties"]
    assert "BEDROCK_MODEL_ID" not in runtime["EnvironmentVariables"]
