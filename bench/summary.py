"""Small statistics for benchmark trials: medians, percentiles, ratios, with the number of trials.

Benchmarks report medians (robust to the odd slow trial a busy machine produces) and p95 where the
issue asks for a tail; every summary carries ``n`` so a reader can judge how much it says.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

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
