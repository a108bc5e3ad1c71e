"""Small statistics for benchmark trials: medians, percentiles, ratios, with the number of trials.

Benchmarks report medians (robust to the odd slow trial a busy machine produces) and p95 where the
issue asks for a tail; every summary carries ``n`` so a reader can judge how much it says.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["change_pct", "describe", "percentile", "ratio"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation between ranks (numpy's default).

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within [0, 100], not {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def describe(values: Sequence[float], digits: int = 1) -> dict[str, float | int | None]:
    """``{"n", "median", "p95", "min", "max"}`` of ``values``, rounded; ``None`` figures when empty."""
    if not values:
        return {"n": 0, "median": None, "p95": None, "min": None, "max": None}
    return {
        "n": len(values),
        "median": round(statistics.median(values), digits),
        "p95": round(percentile(values, 95), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def ratio(numerator: float | None, denominator: float | None, digits: int = 2) -> float | None:
    """``numerator / denominator`` rounded, or ``None`` when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)


def change_pct(new: float | None, old: float | None, digits: int = 1) -> float | None:
    """``(new − old) / old`` in percent (negative: ``new`` is smaller), or ``None`` when undefined."""
    if new is None or not old:
        return None
    return round(100.0 * (new - old) / old, digits)


def paired(trials: Sequence[Mapping[str, Any]], key: str, new: str, old: str) -> list[float]:
    """``new − old`` of ``key`` in each trial that ran both modes back to back (``trial`` numbers them,
    ``mode`` names them): a per-trial difference cancels the machine's slower and faster moments."""
    by_trial: dict[Any, dict[str, float]] = {}
    for trial in trials:
        by_trial.setdefault(trial["trial"], {})[trial["mode"]] = trial[key]
    return [pair[new] - pair[old] for pair in by_trial.values() if new in pair and old in pair]


def ms(value: float | None, digits: int = 1) -> str:
    """A duration in milliseconds for a table: ``"1,234.5 ms"``, or ``"–"`` when it is missing."""
    return "–" if value is None else f"{value:,.{digits}f} ms"
