"""What ``destroy`` leaves behind on purpose, and the command that removes each thing.

CloudFormation deletes what the stacks manage, except the model bucket (retained: CloudFormation
cannot delete a bucket that holds objects). Three more things were never the stacks' to delete: the
images in the CDK asset repository (shared by every CDK app of the account and Region, so the
repository itself must stay), and the CloudWatch log groups SageMaker and AgentCore create at run time.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

from infra.account import BOOTSTRAP_QUALIFIER


@dataclass(frozen=True)
class Leftover:
    """One thing left in the account: what it is, why it stays, and the command that removes it."""

    what: str
    why: str
    remove: str


def aws_flags(region: str, profile: str | None) -> str:
    """``--region R [--profile P]`` for the printed AWS CLI commands."""
    return f"--region {region}" + (f" --profile {profile}" if profile else "")


def asset_repository(account_id: str, region: str) -> str:
    """The CDK asset repository name (DefaultStackSynthesizer's default)."""
    return f"cdk-{BOOTSTRAP_QUALIFIER}-container-assets-{account_id}-{region}"


def image_leftover(
    repository: str | None, tag: str | None, *, account_id: str, region: str, flags: str
) -> Leftover:
    """The image ``destroy`` leaves in the asset repository (exact tag when the stack reported it)."""
    repository = repository or asset_repository(account_id, region)
    why = (
        "the CDK asset repository is shared by every CDK app in this account and Region: "
        "delete the image, never the repository"
    )
    if tag:
        return Leftover(
            what=f"container image {tag} in the ECR repository {repository}",
            why=why,
            remove=f"aws ecr batch-delete-image --repository-name {repository} "
            f"--image-ids imageTag={tag} {flags}",
        )
    return Leftover(
        what=f"this app's container images in the ECR repository {repository}",
        why=why,
        remove=(
            f"aws ecr list-images --repository-name {repository} {flags}  # then, per tag: "
            f"aws ecr batch-delete-image --repository-name {repository} --image-ids imageTag=TAG {flags}"
        ),
    )


def bucket_leftover(bucket: str | None, *, stack_name: str, flags: str) -> Leftover:
    """The retained model bucket (exact name when the stack reported it)."""
    why = "retained on purpose: CloudFormation cannot delete a bucket that still holds objects"
    if bucket:
        return Leftover(
            what=f"S3 bucket {bucket} (the model weights)",
            why=why,
            remove=f"aws s3 rb s3://{bucket} --force {flags}",
        )
    return Leftover(
        what=f"the model bucket (its name starts with {stack_name.lower()}-)",
        why=why,
        remove=f"aws s3 ls {flags} | grep {stack_name.lower()}-  # then: aws s3 rb s3://NAME --force {flags}",
    )


def log_group_leftover(prefix: str, *, writer: str, flags: str) -> Leftover:
    """Log groups under ``prefix`` that ``writer`` created at run time."""
    return Leftover(
        what=f"CloudWatch log groups {prefix}*",
        why=f"created by {writer} at run time, not by the stacks",
        remove=(
            f"aws logs describe-log-groups --log-group-name-prefix {prefix} {flags}  # then, per group: "
            f"aws logs delete-log-group --log-group-name NAME {flags}"
        ),
    )


def print_leftovers(leftovers: list[Leftover], *, tool: str, stream: TextIO | None = None) -> None:
    """Print the leftovers as a list with their removal commands."""
    stream = stream or sys.stdout
    print(f"{tool}: left behind:", file=stream)
    for item in leftovers:
        print(f"  - {item.what}\n    why: {item.why}\n    remove: {item.remove}", file=stream)
