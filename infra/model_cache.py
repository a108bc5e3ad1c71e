"""The model cache stack: the private S3 bucket that holds a speech model's verified weights.

The weights themselves are uploaded by ``speech-infra deploy`` (infra.model_sync), not by a CDK
``BucketDeployment``: see infra/README.md, "Why the CLI uploads the weights". SageMaker copies them
from ``s3://<bucket>/<model prefix>/<version>/`` to /opt/ml/model when an instance starts.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.settings import ModelSpec


class ModelCacheStack(cdk.Stack):
    """One bucket: no public access, TLS only, S3-managed encryption, kept when the stack is deleted.

    The bucket is retained on ``destroy`` because CloudFormation cannot delete a bucket that still
    holds objects, and emptying it would need a custom-resource Lambda; ``speech-infra destroy``
    prints its name and the command that removes it. Outputs: ``BucketName``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, model: ModelSpec, **kwargs) -> None:
        super().__init__(scope, construct_id, description=f"{model.key}: model weights bucket", **kwargs)
        self.model = model
        self.bucket = s3.Bucket(
            self,
            "ModelBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # The TLS-only policy stays with the retained bucket instead of being deleted from under it.
        self.bucket.policy.apply_removal_policy(cdk.RemovalPolicy.RETAIN)
        cdk.CfnOutput(self, "BucketName", value=self.bucket.bucket_name, description="Model weights bucket")
