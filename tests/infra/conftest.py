"""Fixtures of the infra tests (defined in infra_fakes.py, a name no other test folder uses)."""

import os

# aws-cdk-lib's jsii runtime prints a banner on Node 20; it is noise in test output.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra_fakes import boto_session, fake_tools, no_aws_config, stubbed_aws  # noqa: F401
