"""The test folders have no ``__init__.py``: pytest imports each test file by its basename alone, so two
files of one name in different folders stop the whole run at collection ("import file mismatch")."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_file_has_a_name_of_its_own() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        places[path.name].append(str(path.parent.relative_to(ROOT)))
    shared = {name: folders for name, folders in places.items() if len(folders) > 1}
    assert not shared, f"test files sharing a name (rename one): {shared}"
