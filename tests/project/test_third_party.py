"""THIRD_PARTY.md lists every distribution each image installs, and marks the copyleft ones.

What an image installs is read from its lock (locks/image-*.txt, third_party_closure.py), so a lock that
changes (`make lock`) without its rows fails here, printing the rows to paste; an upstream release changes
nothing until the lock is refreshed.
"""

from __future__ import annotations

import pytest
from third_party_closure import (
    IMAGES,
    ROOT,
    THIRD_PARTY,
    Image,
    closure,
    declared_licence_text,
    is_copyleft,
    listed,
    locked,
    rows,
)

TABLES = listed(THIRD_PARTY.read_text(encoding="utf-8"))


def test_every_image_has_a_table() -> None:
    assert set(TABLES) == {image.key for image in IMAGES}
    assert all(TABLES.values()), "an image table has no rows"


@pytest.mark.parametrize("image", IMAGES, ids=lambda image: image.key)
def test_third_party_lists_what_the_image_installs(image: Image) -> None:
    dists, not_installed = closure(image)
    assert not not_installed, (
        f"the {image.key} image's lock ({image.lock_path.name}) has {sorted(not_installed)}, which this "
        f"environment lacks, so their licences cannot be read: `make test` installs every lock's entries"
    )
    versions = locked(image)
    drifted = sorted(n for n, d in dists.items() if d.version != versions[n])
    assert not drifted, (
        f"installed versions differ from {image.lock_path.name} for {drifted}: their metadata is not the "
        f"locked release's; reinstall (`rm .venv/.test-stamp && make test`)"
    )
    table = TABLES[image.key]
    missing = sorted(set(dists) - set(table))
    assert not missing, (
        f"THIRD_PARTY.md, table `{image.key}`, lacks distributions the image installs. Add these rows "
        f"(licence as the metadata declares it: check it, mark GPL/LGPL ones **copyleft**, and add them to "
        f"'Copyleft parts'):\n{rows(dists, missing)}"
    )
    extra = sorted(set(table) - set(dists))
    assert not extra, f"THIRD_PARTY.md, table `{image.key}`, lists what the image no longer installs: {extra}"


@pytest.mark.parametrize("image", IMAGES, ids=lambda image: image.key)
def test_copyleft_distributions_are_marked(image: Image) -> None:
    dists, _ = closure(image)
    table = TABLES[image.key]
    unmarked = [
        name
        for name, dist in dists.items()
        if is_copyleft(declared_licence_text(dist)) and not is_copyleft(table.get(name, ""))
    ]
    assert not unmarked, f"GPL/LGPL distributions not named as such in table `{image.key}`: {unmarked}"
    copyleft_section = THIRD_PARTY.read_text(encoding="utf-8").split("## Copyleft parts", 1)[1]
    copyleft_section = copyleft_section.split("\n## ", 1)[0]
    for name, licence in table.items():
        if is_copyleft(licence):
            assert f"`{dists[name].metadata['Name']}`" in copyleft_section or name in copyleft_section, (
                f"{name} is copyleft but not in THIRD_PARTY.md's 'Copyleft parts' table"
            )


def test_the_checker_sees_a_real_dependency() -> None:
    """The closure is not vacuous: the CPU image pulls the GPL G2P and the LGPL encoders, and a platform's
    markers count (the CUDA wheels are in the GPU image, not in the CPU one)."""
    dists, _ = closure(IMAGES[0])
    assert "torch" not in dists and "torch" in closure(IMAGES[1])[0]
    assert any(name.startswith("nvidia-") for name in closure(IMAGES[1])[0])
    assert {"phonemizer-fork", "espeakng-loader", "lameenc", "soxr", "starlette"} <= set(dists)
    assert is_copyleft(declared_licence_text(dists["phonemizer-fork"]))
    assert "kokoro-bidi-tts" not in dists


def test_licence_file_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
