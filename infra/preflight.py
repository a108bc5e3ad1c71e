"""Checks that the tools a deployment needs are present, each failure saying what to install and how.

``speech-infra`` and ``agent-infra`` run these before calling the CDK tool, gather every
:class:`Problem`, print them all at once and exit with :data:`EXIT_MISSING` instead of failing
half-way through a deployment.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

EXIT_MISSING = 2
"""Exit status when a prerequisite is missing (argparse uses 2 for usage errors too)."""

MIN_NODE_MAJOR = 18
"""The CDK command-line tool's floor (aws-cdk package.json ``engines.node: >= 18.0.0``)."""

NPX_CDK = ("npx", "--yes", "aws-cdk@2")
"""How the CDK tool runs when only npx is installed (downloads it on first use)."""

_PROBE_TIMEOUT_S = 60


@dataclass(frozen=True)
class Problem:
    """A missing prerequisite: what is missing and how to get it."""

    missing: str
    remedy: str

    def __str__(self) -> str:
        return f"missing: {self.missing}\n  how to fix: {self.remedy}"


def find_cdk(which=shutil.which) -> tuple[list[str] | None, list[Problem]]:
    """The command that runs the CDK tool: ``cdk`` on PATH, else ``npx --yes aws-cdk@2``.

    Returns ``(command, [])`` or ``(None, [problem])`` when neither cdk nor npx is installed.
    """
    cdk = which("cdk")
    if cdk:
        return [cdk], []
    npx = which("npx")
    if npx:
        return [npx, *NPX_CDK[1:]], []
    return None, [
        Problem(
            "the AWS CDK command-line tool (cdk)",
            "install Node.js (https://nodejs.org), then `npm install -g aws-cdk`",
        )
    ]


def check_node(which=shutil.which) -> list[Problem]:
    """Node.js on PATH, major version at least :data:`MIN_NODE_MAJOR` (the CDK tool and the jsii
    runtime under aws-cdk-lib both run on it)."""
    node = which("node")
    if not node:
        return [Problem("Node.js (node)", "install Node.js 22 LTS or newer from https://nodejs.org")]
    output = _probe([node, "--version"])
    match = re.match(r"v(\d+)\.", output or "")
    if match is None:
        return [
            Problem(
                "a working Node.js", f"`{node} --version` failed; reinstall Node.js from https://nodejs.org"
            )
        ]
    if int(match.group(1)) < MIN_NODE_MAJOR:
        return [
            Problem(
                f"Node.js {MIN_NODE_MAJOR} or newer (found {output.strip()})",
                "install Node.js 22 LTS or newer from https://nodejs.org",
            )
        ]
    return []


def check_docker(which=shutil.which) -> list[Problem]:
    """Docker on PATH with a reachable daemon (``cdk deploy`` builds both images with it)."""
    docker = which("docker")
    if not docker:
        return [
            Problem(
                "Docker (docker)",
                "install Docker Engine or Docker Desktop: https://docs.docker.com/get-docker/",
            )
        ]
    if _probe([docker, "info", "--format", "{{.ServerVersion}}"]) is None:
        return [
            Problem(
                "a running Docker daemon (`docker info` failed)",
                "start Docker Desktop, or `sudo systemctl start docker`; check that your user may use it",
            )
        ]
    return []


def report(problems: Iterable[Problem], *, tool: str, stream: TextIO | None = None) -> None:
    """Print every problem, then one line saying that nothing in AWS was changed."""
    stream = stream or sys.stderr
    for problem in problems:
        print(f"{tool}: {problem}", file=stream)
    print(f"{tool}: stopped before changing anything in AWS.", file=stream)


def _probe(argv: list[str]) -> str | None:
    """stdout of ``argv`` if it exits 0 within the timeout, else ``None``."""
    try:
        completed = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout if completed.returncode == 0 else None
