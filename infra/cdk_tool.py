"""Running the AWS CDK command-line tool on this project's app.

Every CDK call the command-line tools make goes through :meth:`CdkTool.run`, which builds the
argument vector in one fixed shape (tests replace ``cdk`` with a recorder and compare it exactly)::

    <cdk> --app "<python> -m infra.app" --output <repo>/cdk.out [--profile P] [--context k=v]...
          <verb> [options] <stack>...

The app runs under the same Python as the tool itself, so it sees the same installed aws-cdk-lib.
``--region`` is not a CDK option: it reaches the CDK tool (and through it the app's
``CDK_DEFAULT_REGION``) as ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` in the environment.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra.settings import REPO_ROOT

APP_MODULE = "infra.app"


def app_command(python: str = sys.executable) -> str:
    """The ``--app`` command line: this Python running ``-m infra.app`` (quoted for the shell the
    CDK tool runs it with)."""
    return f"{shlex.quote(python)} -m {APP_MODULE}"


def aws_options() -> argparse.ArgumentParser:
    """Parent parser with ``--profile`` and ``--region``, shared by every subcommand that reaches AWS."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("AWS account")
    group.add_argument("--profile", help="AWS profile to use (default: AWS_PROFILE or the default profile)")
    group.add_argument("--region", help="AWS Region to use (default: AWS_REGION or the profile's Region)")
    return parent


@dataclass(frozen=True)
class CdkTool:
    """The CDK tool invocation: ``command`` (``["/usr/bin/cdk"]`` or ``["npx", "--yes", "aws-cdk@2"]``),
    the AWS profile and Region, and where the cloud assembly is written."""

    command: Sequence[str]
    profile: str | None = None
    region: str | None = None
    output_dir: Path = REPO_ROOT / "cdk.out"
    cwd: Path = REPO_ROOT
    python: str = field(default=sys.executable)

    def argv(
        self,
        verb: str,
        stacks: Sequence[str],
        *,
        context: Mapping[str, str] | None = None,
        options: Sequence[str] = (),
    ) -> list[str]:
        """The argument vector of ``cdk <verb>`` on ``stacks`` with ``context`` values and ``options``."""
        argv = [*self.command, "--app", app_command(self.python), "--output", str(self.output_dir)]
        if self.profile:
            argv += ["--profile", self.profile]
        for key, value in (context or {}).items():
            argv += ["--context", f"{key}={value}"]
        return [*argv, verb, *options, *stacks]

    def environment(self) -> dict[str, str]:
        """The CDK tool's environment: ours, plus the Region when one was given."""
        env = dict(os.environ)
        if self.region:
            env["AWS_REGION"] = self.region
            env["AWS_DEFAULT_REGION"] = self.region
        return env

    def run(
        self,
        verb: str,
        stacks: Sequence[str],
        *,
        context: Mapping[str, str] | None = None,
        options: Sequence[str] = (),
    ) -> int:
        """Run the CDK tool in the repository root (it prompts on this terminal); return its exit status."""
        argv = self.argv(verb, stacks, context=context, options=options)
        print(f"+ {shlex.join(argv)}", file=sys.stderr, flush=True)
        return subprocess.run(argv, cwd=self.cwd, env=self.environment(), check=False).returncode
