"""The endpoint stack: the reference server's GPU image on a SageMaker real-time endpoint, autoscaled.

Resources (L1, one each): ``AWS::SageMaker::Model`` (the image plus the weights folder of the model
bucket), ``AWS::SageMaker::EndpointConfig`` (one variant, ``AllTraffic``), ``AWS::SageMaker::Endpoint``
(named, so the agent role and clients can refer to it before it exists), and
``AWS::ApplicationAutoScaling::ScalableTarget`` + ``ScalingPolicy`` on the variant's
``sagemaker:variant:DesiredInstanceCount``.

Why target tracking on ``SageMakerVariantConcurrentRequestsPerModelHighResolution`` (streams open per
instance, published every 10 s) at the capacity figure of ``python -m bench run capacity``: a
bidirectional stream is one invocation however long the session lasts and however many sentences it
synthesizes (PROTOCOL.md §7, §12), so ``SageMakerVariantInvocationsPerInstance`` (invocations per minute)
says little about load, while the streams open at once are the load the capacity benchmark measures; and
GPU utilization, tracked before, stays low while Kokoro saturates the instance's CPU (the AWS sample's
benchmark on ml.g5.xlarge: saturated at 9.5-39 % GPU, REFERENCE.md §9), so an endpoint tracking it does not
scale out when it is full. ``scaling_metric="gpu-utilization"`` keeps the old policy.

SageMaker refuses an endpoint update that changes the instance type of a variant registered with
autoscaling (SageMaker developer guide, "Update endpoints that use auto scaling"), so changing
``instance_type`` means destroying the endpoint stack first; infra/README.md says so.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from infra.settings import SpeechSettings

VARIANT_NAME = "AllTraffic"
MODEL_DIR = "/opt/ml/model"
"""Where SageMaker places the model data of ``ModelDataSource`` inside the container."""

CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
"""The predefined metric of ``scaling_metric="concurrency"``: requests (here: bidirectional streams) open
in a variant's model containers, per instance, every 10 s (SageMaker developer guide, "Define a scaling
policy")."""

SCALE_OUT_COOLDOWN_S = 60
# Scale in slowly: instances take minutes to start, and a bidirectional session on an instance that
# is drained away ends (PROTOCOL.md §7.3), so removing capacity is the costlier mistake.
SCALE_IN_COOLDOWN_S = 600
# Startup covers the image pull, loading the weights and warming the model before GET /ping answers.
STARTUP_HEALTH_CHECK_TIMEOUT_S = 900
MODEL_DATA_DOWNLOAD_TIMEOUT_S = 900


class EndpointStack(cdk.Stack):
    """SageMaker Model, EndpointConfig, Endpoint and the variant's target-tracking autoscaling.

    ``bucket`` holds the weights under ``<model.s3_prefix>/<settings.model_data_version>/``; ``role``
    is the execution role from the foundation stack. Outputs: ``EndpointName``, ``ModelDataUrl``,
    ``ImageRepository`` and ``ImageTag`` (for clean-up after ``destroy``).

    Without ``settings.model_data_version`` the stack still synthesizes (so ``cdk destroy`` works)
    but carries an error annotation, which makes ``cdk deploy`` refuse it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: SpeechSettings,
        bucket: s3.IBucket,
        role: iam.IRole,
        **kwargs,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"{settings.model.key}: SageMaker endpoint {settings.endpoint_name} with autoscaling",
            **kwargs,
        )
        self.settings = settings
        self.image = ecr_assets.DockerImageAsset(
            self,
            "ServerImage",
            directory=str(settings.image.directory),
            file=settings.image.dockerfile,
            exclude=settings.image.exclude_patterns(),
            # SageMaker GPU instances (ml.g5, ml.g6, ml.p4d ...) are x86_64.
            platform=ecr_assets.Platform.LINUX_AMD64,
        )

        version = settings.model_data_version
        if version is None:
            cdk.Annotations.of(self).add_error(
                "The model weights have not been uploaded: deploy with `speech-infra deploy "
                f"{settings.model.key}`, which uploads them and sets {settings.model.key}.model_data_version."
            )
            prefix = f"{settings.model.s3_prefix}/"
        else:
            prefix = f"{settings.model.s3_prefix}/{version}/"
        self.model_data_url = f"s3://{bucket.bucket_name}/{prefix}"

        model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image.image_uri,
                # Uncompressed S3 prefix: SageMaker copies the folder as is to /opt/ml/model, no
                # model.tar.gz to build or unpack (SageMaker developer guide, "Deploy uncompressed models").
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=self.model_data_url, s3_data_type="S3Prefix", compression_type="None"
                    )
                ),
                environment={
                    # The folder has the layout of the local assets cache it was uploaded from.
                    "KOKORO_ASSETS_DIR": MODEL_DIR,
                    # Everything is in /opt/ml/model; never wait on the Hugging Face hub.
                    "HF_HUB_OFFLINE": "1",
                },
            ),
        )
        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=model.attr_model_name,
                    instance_type=settings.instance_type,
                    initial_instance_count=settings.min_instances,
                    container_startup_health_check_timeout_in_seconds=STARTUP_HEALTH_CHECK_TIMEOUT_S,
                    model_data_download_timeout_in_seconds=MODEL_DATA_DOWNLOAD_TIMEOUT_S,
                )
            ],
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            endpoint_config_name=config.attr_endpoint_config_name,
        )

        # No RoleARN: Application Auto Scaling then uses its service-linked role for SageMaker
        # (AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint), which it creates if needed.
        self.scalable_target = autoscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{settings.endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=settings.min_instances,
            max_capacity=settings.max_instances,
        )
        # The variant must exist before it can be registered.
        self.scalable_target.node.add_dependency(self.endpoint)
        policy = autoscaling.CfnScalingPolicy
        if settings.scaling_metric == "concurrency":
            name, target_value = "concurrency", settings.target_concurrency
            metric: dict[str, object] = {
                "predefined_metric_specification": policy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type=CONCURRENCY_METRIC
                )
            }
        else:
            name, target_value = "gpu-utilization", settings.target_gpu_utilization
            by = {"EndpointName": settings.endpoint_name, "VariantName": VARIANT_NAME}
            metric = {
                "customized_metric_specification": policy.CustomizedMetricSpecificationProperty(
                    namespace="/aws/sagemaker/Endpoints",
                    metric_name="GPUUtilization",
                    statistic="Average",
                    unit="Percent",
                    dimensions=[policy.MetricDimensionProperty(name=n, value=v) for n, v in by.items()],
                )
            }
        policy(
            self,
            "ConcurrencyScaling" if name == "concurrency" else "GpuUtilizationScaling",
            policy_name=f"{settings.endpoint_name}-{name}",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=policy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=target_value,
                scale_in_cooldown=SCALE_IN_COOLDOWN_S,
                scale_out_cooldown=SCALE_OUT_COOLDOWN_S,
                **metric,
            ),
        )

        cdk.CfnOutput(self, "EndpointName", value=self.endpoint.attr_endpoint_name)
        cdk.CfnOutput(self, "ModelDataUrl", value=self.model_data_url)
        cdk.CfnOutput(self, "ImageRepository", value=self.image.repository.repository_name)
        cdk.CfnOutput(self, "ImageTag", value=self.image.asset_hash)
