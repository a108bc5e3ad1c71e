"""Every install comes from a lock that agrees with pyproject.toml (README "Installs", locks/lock.py).

A lock is stale when what it was compiled from changed (pyproject.toml's requirements, the build backend,
locks/holds.txt, the resolver's version): its recorded inputs digest no longer matches, and each direct
requirement is checked against the pins as well, so the message names what disagrees. A lock edited by
hand no longer matches its body digest. Every install of the project (the two make commands, the three
images) reads its lock with ``--require-hashes`` and installs the project with ``--no-deps``, and the
locks agree with each other on every version they share.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from third_party_closure import ROOT, _environment, lock_entries


def _load_lock_module():
    spec = importlib.util.spec_from_file_location("project_lock", ROOT / "locks" / "lock.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lock = _load_lock_module()
LOCKS = {entry.name: entry for entry in lock.LOCKS}
MACHINES = ("x86_64", "aarch64")


def _pins(path: Path, machine: str) -> dict[str, str]:
    """canonical name → locked version, for the entries ``machine`` (Linux, CPython 3.12) installs."""
    env = _environment(machine)
    found = {}
    for entry in lock_entries(path):
        if entry.marker is None or entry.marker.evaluate(env):
            (spec,) = entry.specifier
            found[canonicalize_name(entry.name)] = spec.version
    return found


def _direct(extras: tuple[str, ...]) -> list[Requirement]:
    """The project's own requirements for ``extras`` (self-references expanded) and the build ones."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [Requirement(line) for line in project["dependencies"]]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in project["optional-dependencies"][extra]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
                pending += sorted(requirement.extras)
            else:
                found.append(requirement)
    return found + [Requirement(line) for line in lock.build_requirements()]


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_lock_was_written_from_todays_pyproject(name: str) -> None:
    entry = LOCKS[name]
    inputs, _, _ = lock.recorded(entry.path)
    assert inputs == lock.inputs_digest(entry), (
        f"locks/{entry.path.name} was not written from today's pyproject.toml, locks/holds.txt and resolver "
        "(its inputs digest differs): run `make lock` and commit the locks (README 'Installs')"
    )


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_lock_is_not_edited_by_hand(name: str) -> None:
    _, own, body = lock.recorded(LOCKS[name].path)
    assert own == lock.body_digest(body), f"locks/{name}.txt was edited after `make lock` wrote it"


@pytest.mark.parametrize("name", sorted(LOCKS))
@pytest.mark.parametrize("machine", MACHINES)
def test_every_direct_requirement_is_pinned_within_its_range(name: str, machine: str) -> None:
    entry = LOCKS[name]
    pins = _pins(entry.path, machine)
    env = _environment(machine)
    holds = [Requirement(line) for line in lock.HOLDS.read_text().splitlines() if line and line[0] != "#"]
    for requirement in [*_direct(entry.extras), *holds]:
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        key = canonicalize_name(requirement.name)
        if requirement in holds and key not in pins:
            continue  # a hold constrains; it does not add
        assert key in pins, f"locks/{name}.txt has no pin for {requirement} (on {machine}): run `make lock`"
        assert requirement.specifier.contains(pins[key], prereleases=True), (
            f"locks/{name}.txt pins {requirement.name}=={pins[key]}, outside pyproject's {requirement}: "
            "run `make lock`"
        )


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_entry_is_one_version_with_hashes(name: str) -> None:
    text = LOCKS[name].path.read_text(encoding="utf-8")
    entries = re.split(r"\n(?=[^\s#])", lock.split(text)[1])
    assert len(entries) > 10
    for block in entries:
        head = block.split("\n", 1)[0]
        assert "==" in head, f"locks/{name}.txt: {head!r} is not pinned to one version"
        assert "--hash=sha256:" in block, f"locks/{name}.txt: {head!r} carries no hash"
    assert "://" not in text, "a lock names no index: pip and uv use the machine's own configuration"


def test_the_test_lock_covers_every_other_lock_at_the_same_versions() -> None:
    for machine in MACHINES:
        reference = _pins(LOCKS["test"].path, machine)
        for name, entry in LOCKS.items():
            pins = _pins(entry.path, machine)
            differ = {n: (v, reference.get(n)) for n, v in pins.items() if reference.get(n) != v}
            assert not differ, f"locks/{name}.txt and locks/test.txt disagree on {machine}: {differ}"
            outside = sorted(set(pins) - set(reference))
            assert not outside, (
                f"locks/{name}.txt installs {outside}, which locks/test.txt lacks on {machine}: `make test` "
                "would not test them (locks/lock.py: the test lock's extras must cover every install's)"
            )


def test_a_changed_requirement_makes_the_lock_stale(tmp_path, monkeypatch) -> None:
    """The digest is not vacuous: a widened range, or a new dependency, changes it."""
    before = lock.inputs_digest(LOCKS["image-cpu"])
    copy = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", copy)
    monkeypatch.setattr(lock, "PYPROJECT", copy)
    assert lock.inputs_digest(LOCKS["image-cpu"]) == before
    copy.write_text(copy.read_text().replace('"jsonschema>=4.23",', '"jsonschema>=4.22",'))
    assert lock.inputs_digest(LOCKS["image-cpu"]) != before
    assert lock.inputs_digest(LOCKS["kit"]) != lock.recorded(LOCKS["kit"].path)[0]


def test_upgrading_a_distribution_no_lock_pins_is_refused_before_any_work(monkeypatch, capsys) -> None:
    """A misspelt ``--upgrade-package`` would otherwise rewrite nothing and say nothing."""
    monkeypatch.setattr(lock, "compile_uv_lock", lambda: pytest.fail("compiled despite the bad name"))
    with pytest.raises(SystemExit) as exited:
        lock.main(["--upgrade-package", "nosuch-distribution"])
    assert exited.value.code == 2
    assert "nosuch-distribution: no lock pins such a distribution" in capsys.readouterr().err
    assert lock.normalized("Typing_Extensions") == "typing-extensions"
    assert "typing-extensions" in lock.pinned_names(LOCKS["test"].path)


def test_this_environment_is_the_test_lock() -> None:
    """`make test` installed exactly what locks/test.txt pins (so every test ran on the locked set)."""
    import importlib.metadata as md
    import platform

    pins = _pins(LOCKS["test"].path, platform.machine())
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in md.distributions()}
    differ = {n: (v, installed.get(n)) for n, v in pins.items() if installed.get(n) != v}
    assert not differ, f"(locked, installed) differ: {differ}; reinstall: `rm .venv/.test-stamp && make test`"


def _makefile_recipe() -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return text[text.index("define install") : text.index("endef")]


def test_make_installs_from_the_locks_with_hashes() -> None:
    recipe = _makefile_recipe()
    assert "--require-hashes -r $(1)" in recipe
    assert "--no-deps" in recipe and "pip check" in recipe
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(call install,locks/conformance.txt)" in makefile
    assert "$(call install,locks/test.txt)" in makefile
    assert not re.search(r"pip install[^\n]*-e '\.\[", makefile), "an install that resolves extras itself"


@pytest.mark.parametrize(
    ("dockerfile", "lock_name"),
    [
        ("reference_server/Dockerfile.cpu", "image-cpu"),
        ("reference_server/Dockerfile", "image-gpu"),
        ("reference_agent/Dockerfile", "image-agent"),
    ],
)
def test_each_image_installs_its_lock(dockerfile: str, lock_name: str) -> None:
    text = (ROOT / dockerfile).read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^\n&]*)", text)
    assert f"--require-hashes -r locks/{lock_name}.txt" in installs
    for arguments in installs:
        assert "--require-hashes" in arguments or "--no-deps" in arguments, (
            f"{dockerfile}: `pip install {arguments}` installs something the lock does not hash"
        )
