"""A cache directory of pinned files: where it is, how a file is proved, stamped and written.

The mechanics under :mod:`reference_server.assets` (which says which files Kokoro-82M needs and where they
come from): a :class:`PinnedFile` is known in advance by size and sha256; a file is written to a temporary
file in the same directory and renamed into place (:func:`atomic_open`), so a crash never leaves a half
file under a final name; ``stamps.json`` (:class:`Stamps`) records the size, mtime and sha256 each file had
when it was verified, so a warm start trusts a file without reading it. Errors are :class:`AssetError`
(:class:`HashMismatchError` for bytes that are not the pinned ones); their messages say what to run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "ENV_DIR",
    "STAMPS",
    "AssetError",
    "HashMismatchError",
    "Log",
    "PinnedFile",
    "Stamps",
    "atomic_open",
    "check_pinned",
    "default_dir",
    "log_to_stderr",
    "sagemaker_dir",
    "sha256_file",
]

STAMPS = "stamps.json"
"""The stamps file's name in a cache directory (:class:`Stamps`)."""
ENV_DIR = "KOKORO_ASSETS_DIR"
"""The environment variable that names the cache directory (:func:`default_dir`)."""


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """A file whose exact bytes are known in advance: name in the cache, sha256 (hex) and size in bytes."""

    name: str
    sha256: str
    size: int


class AssetError(Exception):
    """An asset is missing, cannot be fetched, or is not what it must be; the message says what to do."""


class HashMismatchError(AssetError):
    """A file's bytes are not the pinned ones; ``path``, ``expected`` and ``actual`` (sha256 hex) say how.

    ``fix``, when given, is the command that replaces the file and ends the message.
    """

    def __init__(self, path: Path | str, expected: str, actual: str, *, fix: str | None = None) -> None:
        message = f"{path}: sha256 {actual} does not match the expected {expected}; refusing to use it"
        super().__init__(message + (f"; run: {fix}" if fix else ""))
        self.path = Path(path)
        self.expected = expected
        self.actual = actual
        self.fix = fix


Log = Callable[[str], None]
"""Where progress lines go: one call per line, without the newline."""


def log_to_stderr(message: str) -> None:
    """The default :data:`Log`: ``assets: <message>`` on stderr."""
    print(f"assets: {message}", file=sys.stderr, flush=True)


def default_dir() -> Path:
    """The cache directory: ``$KOKORO_ASSETS_DIR`` if set, else ``~/.cache/kokoro-bidi-tts``."""
    configured = os.environ.get(ENV_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "kokoro-bidi-tts"


def sagemaker_dir() -> Path:
    """SageMaker's model directory: ``$SM_MODEL_DIR``, else ``/opt/ml/model``."""
    return Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))


# --- hashing and stamps -------------------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    """sha256 (hex) of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class Stamps:
    """``stamps.json``: for each file name, the size, mtime and sha256 it had when last verified.

    A stamp lets a warm start trust a file without reading it: a file rewritten in place changes size
    or mtime. It is a cache, never a proof; ``verify`` re-hashes.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / STAMPS
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}

    def fresh(self, name: str, sha256: str | None = None, **extra: str) -> bool:
        """True if ``name`` exists, matches its stamp, and the stamp records ``sha256`` and ``extra``."""
        entry = self.entries.get(name)
        try:
            stat = (self.path.parent / name).stat()
        except OSError:
            return False
        if not entry or entry.get("size") != stat.st_size or entry.get("mtime_ns") != stat.st_mtime_ns:
            return False
        if sha256 is not None and entry.get("sha256") != sha256:
            return False
        return all(entry.get(key) == value for key, value in extra.items())

    def record(self, name: str, sha256: str, **extra: str) -> None:
        """Stamp ``name`` as it is now on disk, then save the stamps atomically."""
        stat = (self.path.parent / name).stat()
        self.entries[name] = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, **extra}
        text = json.dumps(self.entries, indent=2, sort_keys=True) + "\n"
        with atomic_open(self.path) as f:
            f.write(text.encode())


@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only when the block ends without an exception."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        # mkstemp makes the file private (0600); the assets are public model files that a container may
        # read as another user than the one that fetched them.
        os.chmod(temporary, 0o644)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def check_pinned(path: Path, pinned: PinnedFile, *, size: int, sha256: str) -> None:
    """Refuse a file whose size or sha256 is not the pinned one.

    Raises:
        HashMismatchError: ``size`` or ``sha256`` differs from ``pinned``'s.
    """
    if size != pinned.size or sha256 != pinned.sha256:
        raise HashMismatchError(path, pinned.sha256, sha256)
