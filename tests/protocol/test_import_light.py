"""``protocol`` stays a light, sans-I/O core: importing it pulls in no server, client, SDK or model stack.

Every module of the package is found with pkgutil, so modules added later are covered too. The check
runs in a fresh interpreter so that what other tests imported does not hide a violation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN = (
    "starlette",
    "uvicorn",
    "websockets",
    "torch",
    "onnxruntime",
    "kokoro",
    "kokoro_onnx",
    "boto3",
    "botocore",
    "smithy",  # every smithy_* package of the AWS SDK
    "awscrt",
    "aiohttp",
    "hypercorn",
    "h2",
    "httpx",
)

PROBE = """
import importlib, json, pkgutil, sys
import protocol
names = ["protocol"]
for info in pkgutil.walk_packages(protocol.__path__, prefix="protocol."):
    importlib.import_module(info.name)
    names.append(info.name)
print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))
"""


def forbidden(module: str) -> bool:
    top = module.split(".")[0]
    return any(top == name or (name == "smithy" and top.startswith("smithy")) for name in FORBIDDEN)


def test_forbidden_matches_names_and_prefixes():
    assert forbidden("websockets.asyncio.server") and forbidden("smithy_core") and forbidden("h2.connection")
    assert not forbidden("h11") and not forbidden("protocol.reader") and not forbidden("httpcore_like")


def test_importing_protocol_loads_no_heavy_dependency():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"protocol.errors", "protocol.limits", "protocol.messages", "protocol.schemas"} <= set(
        report["modules"]
    )
    offenders = [name for name in report["loaded"] if forbidden(name)]
    assert not offenders, f"protocol imports {offenders}"
