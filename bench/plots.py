"""The charts of RESULTS.md: small PNGs (matplotlib, Agg backend, 100 dpi, well under 100 KB each).

Four shapes cover every benchmark: :func:`strip_chart` (every trial as a dot, the median as a bar,
seed figures as crosses), :func:`grouped_bars` (a few figures side by side with the seed's),
:func:`labelled_bars` (many labelled rows, one bar each, the seed's beside where it has one) and
:func:`line_chart` (a figure against a level, one line per series).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["grouped_bars", "labelled_bars", "line_chart", "strip_chart"]

_SIZE = (7.0, 3.4)
_DPI = 100
_OURS = "#1f77b4"
_SEED = "#d62728"


def _figure(size: tuple[float, float] = _SIZE) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size, dpi=_DPI)


def _save(figure: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    # Fixed metadata keeps the PNG bytes the same for the same figures (no date in the file).
    figure.savefig(path, dpi=_DPI, metadata={"Software": None}, pil_kwargs={"optimize": True})
    plt.close(figure)


def strip_chart(
    path: Path,
    ylabel: str,
    series: Mapping[str, Sequence[float]],
    references: Mapping[str, float] | None = None,
    *,
    title: str = "",
) -> None:
    """One column per series: each value a dot, the median a short bar; ``references`` (seed figures)
    as red crosses on the column of the same label."""
    figure, axes = _figure()
    labels = list(series)
    for index, label in enumerate(labels):
        values = [v for v in series[label] if v is not None]
        if values:
            axes.scatter([index] * len(values), values, color=_OURS, alpha=0.6, s=18, zorder=3)
            median = statistics.median(values)
            axes.hlines(median, index - 0.25, index + 0.25, color=_OURS, linewidth=2.5, zorder=4)
            axes.annotate(f"{median:,.0f}", (index + 0.28, median), va="center", fontsize=8, color=_OURS)
        reference = (references or {}).get(label)
        if reference is not None:
            axes.scatter([index], [reference], marker="x", color=_SEED, s=50, zorder=5)
    if references:
        axes.scatter([], [], marker="x", color=_SEED, label="seed (REFERENCE.md §3)")
        axes.scatter([], [], color=_OURS, label="ours: trials; bar = median")
        axes.legend(fontsize=8, loc="best")
    axes.set_xticks(range(len(labels)), labels, fontsize=8)
    axes.set_xlim(-0.5, len(labels) - 0.5)
    axes.set_ylim(bottom=0)
    axes.set_ylabel(ylabel, fontsize=9)
    axes.grid(axis="y", alpha=0.3)
    if title:
        axes.set_title(title, fontsize=9)
    _save(figure, path)


def grouped_bars(
    path: Path,
    ylabel: str,
    categories: Sequence[str],
    groups: Mapping[str, Sequence[float | None]],
    *,
    title: str = "",
    log: bool = False,
) -> None:
    """Bars of each group side by side per category (``groups``: name → one value per category; a
    group named ``seed …`` is drawn in the seed's colour)."""
    figure, axes = _figure()
    width = 0.8 / max(len(groups), 1)
    palette = [_OURS, "#2ca02c", "#9467bd", "#8c564b", "#ff7f0e"]
    for number, (name, values) in enumerate(groups.items()):
        color = _SEED if name.startswith("seed") else palette[number % len(palette)]
        offsets = [i - 0.4 + width * (number + 0.5) for i in range(len(categories))]
        heights = [0 if v is None else v for v in values]
        bars = axes.bar(offsets, heights, width, label=name, color=color)
        for bar, value in zip(bars, values, strict=True):
            if value is not None:
                axes.annotate(
                    f"{value:,.3g}",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    axes.set_xticks(range(len(categories)), categories, fontsize=8)
    axes.set_ylabel(ylabel, fontsize=9)
    if log:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(ScalarFormatter())
        axes.yaxis.set_minor_formatter(NullFormatter())
    axes.legend(fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    if title:
        axes.set_title(title, fontsize=9)
    _save(figure, path)


def labelled_bars(
    path: Path,
    xlabel: str,
    labels: Sequence[str],
    ours: Sequence[float | None],
    seed: Sequence[float | None],
    *,
    title: str = "",
    log: bool = False,
) -> None:
    """Horizontal bars, one row per label (top to bottom), for many categories with long names; a seed
    bar is drawn beside ours where ``seed`` has a value."""
    figure, axes = _figure((7.0, 0.8 + 0.24 * len(labels)))
    rows = list(range(len(labels)))[::-1]
    for row, value, theirs in zip(rows, ours, seed, strict=True):
        if value is not None:
            axes.barh(row + 0.18, value, 0.36, color=_OURS, label="ours" if row == rows[0] else None)
            axes.annotate(
                f"{value:,.3g}",
                (value, row + 0.18),
                va="center",
                fontsize=7,
                xytext=(2, 0),
                textcoords="offset points",
            )
        if theirs is not None:
            axes.barh(row - 0.18, theirs, 0.36, color=_SEED, label="seed (REFERENCE.md §3)")
    axes.set_yticks(rows, labels, fontsize=8)
    axes.set_xlabel(xlabel, fontsize=9)
    if log:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        axes.set_xscale("log")
        axes.xaxis.set_major_formatter(ScalarFormatter())
        axes.xaxis.set_minor_formatter(NullFormatter())
    handles, names = axes.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    axes.legend(unique.values(), unique.keys(), fontsize=8, loc="lower right")
    axes.grid(axis="x", alpha=0.3)
    if title:
        axes.set_title(title, fontsize=9)
    _save(figure, path)


def line_chart(
    path: Path,
    xlabel: str,
    panels: Sequence[tuple[str, Mapping[str, tuple[Sequence[float], Sequence[float | None]]]]],
    *,
    title: str = "",
    hline: tuple[float, str] | None = None,
) -> None:
    """Panels side by side, each ``(ylabel, {name: (xs, ys)})`` with one line per series (``None`` values
    are skipped); ``hline`` = (value, label) draws a reference line on the first panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes_list = plt.subplots(1, len(panels), figsize=_SIZE, dpi=_DPI, squeeze=False)
    for number, (axes, (ylabel, lines)) in enumerate(zip(axes_list[0], panels, strict=True)):
        for name, (xs, ys) in lines.items():
            points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if points:
                axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        if hline is not None and number == 0:
            axes.axhline(hline[0], color=_SEED, linestyle="--", linewidth=1, label=hline[1])
        axes.set_xlabel(xlabel, fontsize=9)
        axes.set_ylabel(ylabel, fontsize=9)
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        axes.tick_params(labelsize=8)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=7)
    if title:
        figure.suptitle(title, fontsize=9)
    _save(figure, path)
