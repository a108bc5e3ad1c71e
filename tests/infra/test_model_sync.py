"""The content-addressed weights upload (infra.model_sync), against a stubbed S3 client."""

from __future__ import annotations

import hashlib

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from infra import model_sync
from infra.settings import MODELS
from reference_server import assets as server_assets


@pytest.fixture
def assets(tmp_path):
    root = tmp_path / "assets"
    root.mkdir()
    (root / "kokoro-v1.0.int8.onnx").write_bytes(b"onnx weights")
    (root / "voices-v1.0.bin").write_bytes(b"voice")
    (root / "kokoro-v1_0.from-onnx.pth").write_bytes(b"state dict")
    return root


def _files(root):
    return [root / "voices-v1.0.bin", root / "kokoro-v1.0.int8.onnx"]


def test_manifest_lists_files_sorted_with_sizes_and_hashes(assets):
    manifest = model_sync.manifest_of(assets, _files(assets))
    assert [f.relative_path for f in manifest.files] == ["kokoro-v1.0.int8.onnx", "voices-v1.0.bin"]
    assert [f.size for f in manifest.files] == [12, 5]
    assert manifest.files[0].sha256 == hashlib.sha256(b"onnx weights").hexdigest()
    assert manifest.total_bytes == 17
    lines = "".join(f"{f.sha256}  {f.relative_path}\n" for f in manifest.files)
    assert manifest.version == hashlib.sha256(lines.encode()).hexdigest()[:16]


def test_version_changes_with_content_and_with_names(assets):
    before = model_sync.manifest_of(assets, _files(assets)).version
    assert model_sync.manifest_of(assets, _files(assets)).version == before
    (assets / "voices-v1.0.bin").write_bytes(b"voicf")
    changed = model_sync.manifest_of(assets, _files(assets)).version
    assert changed != before
    (assets / "voices-v1.0.bin").rename(assets / "voices-v1.1.bin")
    renamed = [assets / "voices-v1.1.bin", assets / "kokoro-v1.0.int8.onnx"]
    assert model_sync.manifest_of(assets, renamed).version not in (before, changed)


def test_manifest_refuses_nothing_and_outsiders(assets, tmp_path):
    with pytest.raises(ValueError, match="no files"):
        model_sync.manifest_of(assets, [])
    (tmp_path / "elsewhere.bin").write_bytes(b"x")
    with pytest.raises(ValueError):
        model_sync.manifest_of(assets, [tmp_path / "elsewhere.bin"])


def _located(root, torch=True):
    return server_assets.Assets(
        directory=root,
        onnx_model=root / "kokoro-v1.0.int8.onnx",
        voices=root / "voices-v1.0.bin",
        config=server_assets.CONFIG_PATH,
        torch_weights=root / "kokoro-v1_0.from-onnx.pth" if torch else None,
    )


def test_verified_assets_are_the_files_reference_server_vouches_for(assets, monkeypatch):
    asked = []
    monkeypatch.setattr(
        server_assets, "locate", lambda directory: asked.append(directory) or _located(assets)
    )
    manifest = model_sync.verified_assets(assets)
    assert asked == [assets]
    assert [f.relative_path for f in manifest.files] == [
        "kokoro-v1.0.int8.onnx",
        "kokoro-v1_0.from-onnx.pth",
        "voices-v1.0.bin",
    ]


def test_verified_assets_default_to_the_assets_cache(assets, monkeypatch):
    monkeypatch.setenv("KOKORO_ASSETS_DIR", str(assets))
    asked = []
    monkeypatch.setattr(
        server_assets, "locate", lambda directory: asked.append(directory) or _located(assets)
    )
    model_sync.verified_assets()
    assert asked == [assets]


def test_verified_assets_need_the_torch_state_dict(assets, monkeypatch):
    monkeypatch.setattr(server_assets, "locate", lambda directory: _located(assets, torch=False))
    with pytest.raises(model_sync.AssetsNotReady, match="--torch yes"):
        model_sync.verified_assets(assets)


def test_unfetched_assets_name_the_fetch_command(tmp_path):
    with pytest.raises(model_sync.AssetsNotReady, match=r"python -m reference_server\.assets fetch"):
        model_sync.verified_assets(tmp_path)


def test_model_data_prefix():
    assert model_sync.model_data_prefix(MODELS["kokoro-82m"], "abcd") == "kokoro-82m/abcd/"


@pytest.fixture
def s3():
    client = boto3.client("s3", region_name="eu-west-1", aws_access_key_id="a", aws_secret_access_key="b")
    puts = []
    # Record what PutObject was asked to store, whatever checksum parameters boto3 adds around it.
    client.meta.events.register(
        "provide-client-params.s3.PutObject",
        lambda params, **_: puts.append((params["Key"], params.get("Metadata"), params["Body"].read())),
    )
    with Stubber(client) as stubber:
        yield client, stubber, puts
        stubber.assert_no_pending_responses()


def test_upload_skips_identical_objects_and_uploads_the_rest(assets, s3):
    client, stubber, puts = s3
    manifest = model_sync.manifest_of(assets, _files(assets))
    onnx, voice = manifest.files
    stubber.add_response(
        "head_object",
        {"ContentLength": onnx.size, "Metadata": {"sha256": onnx.sha256}},
        {"Bucket": "bucket", "Key": "kokoro-82m/v1/kokoro-v1.0.int8.onnx"},
    )
    stubber.add_client_error(
        "head_object",
        service_error_code="404",
        http_status_code=404,
        expected_params={"Bucket": "bucket", "Key": "kokoro-82m/v1/voices-v1.0.bin"},
    )
    stubber.add_response("put_object", {"ETag": '"e"'})
    log = []
    report = model_sync.upload_assets(
        client,
        manifest,
        bucket="bucket",
        prefix="kokoro-82m/v1/",
        transfer_config=TransferConfig(use_threads=False),
        log=log.append,
    )
    assert report == model_sync.UploadReport(
        uploaded=("voices-v1.0.bin",), skipped=("kokoro-v1.0.int8.onnx",)
    )
    assert puts == [("kokoro-82m/v1/voices-v1.0.bin", {"sha256": voice.sha256}, b"voice")]
    assert log == ["uploading voices-v1.0.bin (0.0 MB) to s3://bucket/kokoro-82m/v1/voices-v1.0.bin"]


def test_upload_replaces_an_object_with_other_content(assets, s3):
    client, stubber, puts = s3
    manifest = model_sync.manifest_of(assets, _files(assets))
    for item in manifest.files:
        stubber.add_response("head_object", {"ContentLength": item.size, "Metadata": {"sha256": "0" * 64}})
        stubber.add_response("put_object", {"ETag": '"e"'})
    report = model_sync.upload_assets(
        client,
        manifest,
        bucket="b",
        prefix="p/",
        transfer_config=TransferConfig(use_threads=False),
        log=lambda _: None,
    )
    assert report.uploaded == ("kokoro-v1.0.int8.onnx", "voices-v1.0.bin")
    assert [key for key, _, _ in puts] == ["p/kokoro-v1.0.int8.onnx", "p/voices-v1.0.bin"]


def test_upload_propagates_access_errors(assets, s3):
    client, stubber, _ = s3
    stubber.add_client_error("head_object", service_error_code="403", http_status_code=403)
    with pytest.raises(ClientError):
        model_sync.upload_assets(
            client,
            model_sync.manifest_of(assets, _files(assets)),
            bucket="b",
            prefix="p/",
            log=lambda _: None,
        )
