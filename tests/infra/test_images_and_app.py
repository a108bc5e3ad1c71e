"""The two Dockerfiles against what infra stages for them, and ``python -m infra.app`` as the CDK tool
runs it (settings from ``CDK_CONTEXT_JSON``, output into ``CDK_OUTDIR``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from infra.settings import AGENT_IMAGE, REPO_ROOT, SERVER_IMAGE, ImageSource

BIDI_LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true"


def _instructions(dockerfile) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comment lines dropped (Docker drops
    them inside continued instructions too)."""
    logical, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    pairs = []
    for line in logical:
        if line.strip() and not line.lstrip().startswith("#"):
            instruction, _, arguments = line.strip().partition(" ")
            pairs.append((instruction.upper(), arguments.strip()))
    return pairs


def _copy_sources(instructions) -> list[str]:
    """Top-level build-context entries COPY/ADD read (copies from other stages are skipped)."""
    sources = []
    for instruction, arguments in instructions:
        if instruction not in ("COPY", "ADD"):
            continue
        if arguments.startswith("["):
            words = json.loads(arguments)
        else:
            words = arguments.split()
        if any(word.startswith("--from") for word in words):
            continue
        paths = [word for word in words if not word.startswith("--")][:-1]
        sources += [path.lstrip("./").split("/")[0] for path in paths]
    return sources


def _check_context(image: ImageSource) -> list[tuple[str, str]]:
    instructions = _instructions(image.dockerfile_path)
    sources = _copy_sources(instructions)
    assert sources, "the image copies nothing from the repository"
    outside = sorted(set(sources) - set(image.include))
    assert outside == [], (
        f"{image.dockerfile} copies {outside}, which infra does not stage into its build context"
    )
    return instructions


def test_agent_image_serves_the_agent_app_on_8080():
    instructions = _check_context(AGENT_IMAGE)
    assert ("CMD", '["python", "-m", "reference_agent"]') in instructions
    assert ("EXPOSE", "8080") in instructions
    env = " ".join(arguments for instruction, arguments in instructions if instruction == "ENV")
    assert "DOCKER_CONTAINER=1" in env  # else BedrockAgentCoreApp binds 127.0.0.1
    assert any(
        instruction == "RUN" and '--editable ".[agent]"' in arguments
        for instruction, arguments in instructions
    )
    assert ("USER", "agent") in instructions


@pytest.mark.skipif(
    not SERVER_IMAGE.dockerfile_path.is_file(), reason="reference_server/Dockerfile not written yet"
)
def test_server_image_copies_only_what_infra_stages_and_declares_bidi_streaming():
    instructions = _check_context(SERVER_IMAGE)
    labels = " ".join(arguments for instruction, arguments in instructions if instruction == "LABEL")
    assert re.search(r'com\.amazonaws\.sagemaker\.capabilities\.bidirectional-streaming="?true"?', labels), (
        labels
    )


def _run_app(tmp_path, context: dict) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(
        [sys.executable, "-m", "infra.app"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="aws-cdk-lib needs Node.js")
def test_app_rejects_a_bad_setting_with_one_line(tmp_path):
    pytest.importorskip("aws_cdk")
    completed = _run_app(tmp_path, {"kokoro-82m.max_instances": "lots"})
    assert completed.returncode == 1
    assert "infra.app: kokoro-82m.max_instances must be a int (got 'lots')" in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.skipif(shutil.which("node") is None, reason="aws-cdk-lib needs Node.js")
@pytest.mark.skipif(
    not SERVER_IMAGE.dockerfile_path.is_file(), reason="reference_server/Dockerfile not written yet"
)
def test_app_synthesizes_with_the_repository_dockerfiles(tmp_path):
    pytest.importorskip("aws_cdk")
    completed = _run_app(
        tmp_path, {"kokoro-82m.model_data_version": "0123456789abcdef", "bedrock_model_id": "x.y"}
    )
    assert completed.returncode == 0, completed.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    stacks = {
        name
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
    assert stacks == {
        "Kokoro82mModelCache",
        "Kokoro82mFoundation",
        "Kokoro82mEndpoint",
        "KokoroAgentFoundation",
        "KokoroAgentRuntime",
    }
    for name in stacks:
        errors = [
            entry
            for entries in manifest["artifacts"][name].get("metadata", {}).values()
            for entry in entries
            if entry["type"] == "aws:cdk:error"
        ]
        assert errors == [], name
