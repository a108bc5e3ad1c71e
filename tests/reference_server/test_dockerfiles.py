"""Static checks of the two container images (no docker engine here): reference_server/Dockerfile (GPU,
torch on CUDA) and reference_server/Dockerfile.cpu (ONNX).

The final stage of each must carry SageMaker's bidirectional-streaming label, run as a non-root user,
expose 8080, and start exactly the entry command the tests start (``python -m reference_server``),
bound to 0.0.0.0:8080 and accepting SageMaker's ``serve`` argument. The GPU image's lock pins torch ≥ 2.10
(PYSEC-2026-2286).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.version import Version
from server_harness import ROOT, ServerProcess

from reference_server.settings import load_settings

LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
DOCKERFILES = {
    "gpu": ROOT / "reference_server" / "Dockerfile",
    "cpu": ROOT / "reference_server" / "Dockerfile.cpu",
}


@dataclass
class Stage:
    """One build stage: its base image and instructions, ``(KEYWORD, arguments)`` in order."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def all(self, keyword: str) -> list[str]:
        return [value for key, value in self.instructions if key == keyword]

    def env(self) -> dict[str, str]:
        """ENV and ARG defaults in effect at the end of the stage (``KEY=value`` forms only)."""
        values = dict(self.args)
        for value in self.all("ENV"):
            for pair in shlex.split(value):
                key, _, val = pair.partition("=")
                values[key] = val
        return values


def parse(path: Path) -> list[Stage]:
    """Instructions of a Dockerfile by stage: comments dropped, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, f"{path}: dangling line continuation"
    stages: list[Stage] = []
    global_args: dict[str, str] = {}
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            stages.append(Stage(parts[0], parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None))
            continue
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            global_args[name] = default
            continue
        assert stages, f"{path}: {keyword} before FROM"
        stage = stages[-1]
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            stage.args[name] = default
        stage.instructions.append((keyword, rest))
    return stages


@pytest.fixture(params=sorted(DOCKERFILES))
def image(request) -> tuple[str, Stage, list[Stage]]:
    stages = parse(DOCKERFILES[request.param])
    return request.param, stages[-1], stages


def test_final_stage_declares_bidirectional_streaming(image):
    _, final, _ = image
    labels = " ".join(final.all("LABEL"))
    assert f"{LABEL}=true" in labels.replace('"', "")


def test_runs_as_a_non_root_user(image):
    _, final, _ = image
    users = final.all("USER")
    assert users, "no USER: the server would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    last_user = max(i for i, (key, _) in enumerate(final.instructions) if key == "USER")
    assert all(key != "RUN" for key, _ in final.instructions[last_user:]), "RUN after USER runs as that user"


def test_exposes_8080_and_checks_ping(image):
    _, final, _ = image
    assert "8080" in " ".join(final.all("EXPOSE")).split()
    assert "/ping" in " ".join(final.all("HEALTHCHECK"))


def test_entry_command_is_the_tested_server_bound_for_sagemaker(image):
    kind, final, _ = image
    (entrypoint,) = final.all("ENTRYPOINT")
    argv = json.loads(entrypoint)  # exec form: signals reach the server itself, not a shell
    assert argv[:3] == ["python", "-m", "reference_server"]
    assert not final.all("CMD"), "a CMD would be appended to the entry command"
    # The tests start the same module with the same flags (only host and port differ).
    assert ServerProcess.COMMAND_PREFIX == argv[1:3]
    for extra in ([], ["serve"]):  # `docker run <image>` and SageMaker's `docker run <image> serve`
        settings = load_settings([*argv[3:], *extra], environ=final.env())
        assert (settings.host, settings.port) == ("0.0.0.0", 8080)
        assert settings.backend == {"gpu": "torch", "cpu": "onnx"}[kind]


def test_sources_the_server_imports_are_copied(image):
    _, final, _ = image
    copied = {value.split()[0].rstrip("/") for value in final.all("COPY") if not value.startswith("--from")}
    assert {"protocol", "speech", "reference_server", "spec", "pyproject.toml"} <= copied
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_gpu_image_pins_a_fixed_torch():
    """torch comes from the GPU image's lock (README "Installs"), at one version with its hashes, >= 2.10."""
    final = parse(DOCKERFILES["gpu"])[-1]
    runs = " ".join(final.all("RUN"))
    assert "--require-hashes -r locks/image-gpu.txt" in runs
    assert "torch" not in runs.replace("[server,torch]", ""), "torch is installed from the lock alone"
    lock = (ROOT / "locks" / "image-gpu.txt").read_text()
    (pinned,) = re.findall(r"^torch==([^\s;]+)", lock, re.MULTILINE)
    assert Version(pinned) >= Version("2.10"), "PYSEC-2026-2286 is fixed in torch 2.10.0"
    assert final.env()["KOKORO_BACKEND"] == "torch"
    assert any("[server,torch]" in run for run in final.all("RUN"))


KIT = ROOT / "conformance" / "Dockerfile"
"""The conformance kit's image: the suite alone, no server (its run: tests/conformance/test_kit_image.py)."""


def test_kit_image_installs_its_lock_and_runs_the_suite_as_a_user():
    stages = parse(KIT)
    (final,) = stages
    runs = final.all("RUN")
    assert "pip install --require-hashes -r locks/kit.txt" in runs
    (project,) = [run for run in runs if "pip install --no-deps" in run]
    assert "pip check" in project
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["kokoro-conformance"]
    users = final.all("USER")
    assert users and users[-1] not in {"root", "0"}
    copied = {value.split()[0].rstrip("/") for value in final.all("COPY")}
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert {
        "locks/kit.txt",
        "conformance",
        "simulator",
        "protocol",
        "speech",
        "spec",
        "pyproject.toml",
    } <= copied


KIT_OPTIONAL = {
    "playwright": "conformance/screenshot.py, which make conformance runs after the suite",
    "mutmut": "conformance/mutation: mutation testing of this checkout's own server (make mutation), not a "
    "step of certifying a container",
    "coverage": "conformance/mutation/covered.py, the same tool's measure of the lines the suite runs",
}
"""Imports the kit image does without, and why."""


def test_kit_image_carries_every_package_the_suite_imports():
    """Each top-level package that a module of the suite imports is a COPY of the kit image, the standard
    library, or a distribution of the kit's lock: the image cannot fail on an import the checkout hides."""
    import ast
    import sys

    from packaging.utils import canonicalize_name

    copied = {value.split()[0].rstrip("/") for value in parse(KIT)[0].all("COPY")}
    lock = (ROOT / "locks" / "kit.txt").read_text()
    locked = {canonicalize_name(m) for m in re.findall(r"^([A-Za-z0-9_.-]+)==", lock, re.MULTILINE)}
    import importlib.metadata as md

    provided = md.packages_distributions()
    missing = set()
    for path in (ROOT / "conformance").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in copied or top in KIT_OPTIONAL:
                    continue
                if not {canonicalize_name(d) for d in provided.get(top, [])} & locked:
                    missing.add(f"{top} ({path.relative_to(ROOT)})")
    assert not missing, f"the kit image lacks what the suite imports: {sorted(missing)}"
