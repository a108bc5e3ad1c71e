"""Upload the verified model assets to the model bucket, content-addressed.

``python -m reference_server.assets fetch`` downloads and verifies the Kokoro-82M assets into a local
cache (``$KOKORO_ASSETS_DIR``, default ``~/.cache/kokoro-bidi-tts``). ``speech-infra deploy`` takes the
files that module vouches for (:func:`verified_assets`: the pinned ONNX model, the pinned voices and the
torch state dict the endpoint's ``--backend torch`` loads), uploads them under
``<model prefix>/<version>/`` where ``version`` is a digest of every file's name and SHA-256
(:attr:`AssetManifest.version`), and hands the version to the endpoint stack. New weights therefore
mean a new S3 folder, a new SageMaker Model and a rolling endpoint update; unchanged weights mean no
upload and no change. SageMaker copies the folder to /opt/ml/model, where
``reference_server.assets.locate`` finds the files by name.

Why the CLI uploads instead of a CDK ``BucketDeployment``: a BucketDeployment zips the folder into
the CDK asset bucket and copies it again with a Lambda function carrying the AWS CLI, which needs its
memory and ephemeral storage sized for about 450 MB, stores the weights twice, and makes every
synthesis (``cdk destroy`` included) require the weights on the local disk. Here synthesis never
reads the weights and the upload goes straight to the bucket with boto3's multipart transfer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.settings import ModelSpec

VERSION_HEX_DIGITS = 16
"""64 bits of SHA-256: collisions between two asset sets of one bucket are not a practical concern."""

FETCH_COMMAND = "python -m reference_server.assets fetch"

_CHUNK = 1 << 20


class AssetsNotReady(Exception):
    """The verified assets cannot be uploaded yet; the message says which command fixes that."""


@dataclass(frozen=True)
class AssetFile:
    """One file to upload: its path relative to the assets folder (POSIX form), size and SHA-256."""

    relative_path: str
    path: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class AssetManifest:
    """The files to upload, sorted by relative path."""

    directory: Path
    files: tuple[AssetFile, ...]

    @property
    def version(self) -> str:
        """Hex digest naming this exact set of files: SHA-256 over ``"<sha256>  <path>\\n"`` lines."""
        digest = hashlib.sha256()
        for item in self.files:
            digest.update(f"{item.sha256}  {item.relative_path}\n".encode())
        return digest.hexdigest()[:VERSION_HEX_DIGITS]

    @property
    def total_bytes(self) -> int:
        """Sum of the file sizes."""
        return sum(item.size for item in self.files)


def manifest_of(directory: Path, paths: Sequence[Path]) -> AssetManifest:
    """Hash ``paths`` (files inside ``directory``) into a manifest.

    Raises ``ValueError`` for a path outside ``directory`` or an empty list, ``FileNotFoundError`` for
    a missing file.
    """
    if not paths:
        raise ValueError("no files to upload")
    files = []
    for path in paths:
        relative = path.relative_to(directory).as_posix()
        files.append(
            AssetFile(relative_path=relative, path=path, size=path.stat().st_size, sha256=_sha256(path))
        )
    return AssetManifest(directory=directory, files=tuple(sorted(files, key=lambda item: item.relative_path)))


def verified_assets(directory: Path | None = None) -> AssetManifest:
    """The manifest of the assets ``reference_server.assets`` verified in ``directory``.

    ``directory`` defaults to the assets cache (``reference_server.assets.default_dir()``). The files
    are the pinned ONNX model and voices and the torch state dict; the endpoint runs the torch
    backend, so a cache without one is not ready. Raises :class:`AssetsNotReady` when the reference
    server package is not importable, the pinned files are missing or unverified, or there is no
    torch state dict.
    """
    try:
        from reference_server import assets
    except ImportError as error:
        raise AssetsNotReady(
            f"the reference server package is not importable ({error}); run: pip install -e ."
        ) from None
    directory = Path(directory).expanduser() if directory is not None else assets.default_dir()
    try:
        found = assets.locate(directory)
    except assets.AssetError as error:
        raise AssetsNotReady(str(error)) from None
    if found.torch_weights is None:
        raise AssetsNotReady(
            f"{directory} has no torch state dict for the endpoint's torch backend; "
            f"run: {FETCH_COMMAND} --torch yes --dir {directory} (needs the torch extra)"
        )
    return manifest_of(found.directory, [found.onnx_model, found.voices, found.torch_weights])


def model_data_prefix(model: ModelSpec, version: str) -> str:
    """The S3 key prefix the endpoint reads: ``<model.s3_prefix>/<version>/``."""
    return f"{model.s3_prefix}/{version}/"


@dataclass(frozen=True)
class UploadReport:
    """What :func:`upload_assets` did: relative paths uploaded and skipped (already present)."""

    uploaded: tuple[str, ...]
    skipped: tuple[str, ...]


def upload_assets(
    s3_client: Any,
    manifest: AssetManifest,
    *,
    bucket: str,
    prefix: str,
    transfer_config: Any = None,
    log: Callable[[str], None] = print,
) -> UploadReport:
    """Upload every file of ``manifest`` to ``s3://bucket/prefix<relative path>``.

    A file whose object already exists with the same size and ``sha256`` metadata is skipped, so an
    interrupted upload resumes where it stopped. ``s3_client`` is a boto3 S3 client;
    ``transfer_config`` a ``boto3.s3.transfer.TransferConfig`` (default: boto3's multipart,
    multithreaded transfer). Raises botocore's ``ClientError`` for any S3 error other than a missing
    object.
    """
    uploaded, skipped = [], []
    for item in manifest.files:
        key = prefix + item.relative_path
        if _already_uploaded(s3_client, bucket, key, item):
            skipped.append(item.relative_path)
            continue
        log(f"uploading {item.relative_path} ({item.size / 1e6:.1f} MB) to s3://{bucket}/{key}")
        s3_client.upload_file(
            str(item.path),
            bucket,
            key,
            ExtraArgs={"Metadata": {"sha256": item.sha256}},
            Config=transfer_config,
        )
        uploaded.append(item.relative_path)
    return UploadReport(uploaded=tuple(uploaded), skipped=tuple(skipped))


def _already_uploaded(s3_client: Any, bucket: str, key: str, item: AssetFile) -> bool:
    from botocore.exceptions import ClientError

    try:
        head = s3_client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return head.get("ContentLength") == item.size and head.get("Metadata", {}).get("sha256") == item.sha256


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
