"""The abuse probe's figures (bench/abuse.py): percentiles and the table, from saved results alone."""

from __future__ import annotations

import json
from pathlib import Path

from bench.abuse import Probe, _p95, table

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "abuse"


def test_p95_is_the_value_below_which_95_percent_lie():
    assert _p95([]) == 0.0
    assert _p95([float(n) for n in range(1, 101)]) == 96.0
    assert _p95([5.0]) == 5.0


def test_table_renders_each_probe_in_one_row():
    probe = Probe("describe-flood", 573.2, 575.9, 574.0, 8.0, 16.4, pings=100, sent=40_000, seconds=10.5)
    probe.outcome = "all sent"
    lines = table([probe]).splitlines()
    assert len(lines) == 3
    assert lines[2] == "| describe-flood | 40000 | 10.5 | 573 / 576 / 574 | 8 / 16 | all sent |"


def test_saved_results_load_as_probes():
    for name in ("main.json", "load-bounds.json"):
        probes = [Probe(**entry) for entry in json.loads((RESULTS / name).read_text())]
        names = [p.name for p in probes]
        assert names == ["describe-flood", "malformed-flood", "costly-16-sessions", "idle-sockets"]
