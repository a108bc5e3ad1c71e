"""``protocol`` and ``speech`` stay light and sans-I/O: importing them pulls in no server, client, SDK or
model stack, and ``protocol`` (the wire rules) never imports ``speech`` (the text front-end built on it).

Every module of each package is found with pkgutil, so modules added later are covered too. Each check
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
package = importlib.import_module(sys.argv[1])
names = [package.__name__]
for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
    importlib.import_module(info.name)
    names.append(info.name)
print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))
"""


def probe(package: str) -> dict[str, list[str]]:
    """Import every module of ``package`` in a fresh interpreter: ``{"modules": [...], "loaded": [...]}``."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, package],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def forbidden(module: str) -> bool:
    top = module.split(".")[0]
    return any(top == name or (name == "smithy" and top.startswith("smithy")) for name in FORBIDDEN)


def test_forbidden_matches_names_and_prefixes():
    assert forbidden("websockets.asyncio.server") and forbidden("smithy_core") and forbidden("h2.connection")
    assert not forbidden("h11") and not forbidden("protocol.reader") and not forbidden("httpcore_like")


def test_importing_protocol_loads_no_heavy_dependency():
    report = probe("protocol")
    assert {"protocol.errors", "protocol.limits", "protocol.messages", "protocol.schemas"} <= set(
        report["modules"]
    )
    offenders = [name for name in report["loaded"] if forbidden(name)]
    assert not offenders, f"protocol imports {offenders}"
    upward = [name for name in report["loaded"] if name.split(".")[0] == "speech"]
    assert not upward, f"protocol imports the text front-end {upward}: speech builds on protocol, not back"


def test_importing_speech_loads_no_heavy_dependency():
    report = probe("speech")
    assert {"speech.chunker", "speech.frontend", "speech.normalization", "speech.segmenter"} <= set(
        report["modules"]
    )
    offenders = [name for name in report["loaded"] if forbidden(name)]
    assert not offenders, f"speech imports {offenders}"
