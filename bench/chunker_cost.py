"""Benchmark 7: the sentence chunker's cost, fed one character at a time.

An LLM can stream a reply in pieces as small as one character, and the agent feeds every piece to
:class:`protocol.chunker.IncrementalSentenceChunker`. A long reply fed one character at a time is the
worst case; its cost should grow linearly with the reply's length (the chunker's docstring argues it,
and its tests count the work), so twice the text should take about twice the time, not four times.

Texts are the benchmark reply repeated and cut to length; each trial feeds a new chunker every
character, then flushes. Sizes alternate trial by trial.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.record import Result
from bench.summary import describe, ratio
from bench.texts import REPLY

__all__ = ["NAME", "SMOKE", "TITLE", "Config", "feed_by_character", "notes", "plot", "run", "tables"]

NAME = "chunker_cost"
TITLE = "7. Chunker cost: a reply fed one character at a time"


@dataclass(frozen=True)
class Config:
    """Attributes: text lengths compared (characters); trials per length (after one warm-up)."""

    sizes: tuple[int, ...] = (10_000, 20_000)
    trials: int = 7


SMOKE = Config(sizes=(500, 1_000), trials=1)


def text_of_length(characters: int) -> str:
    """The benchmark reply repeated, cut to ``characters``."""
    copies = characters // (len(REPLY) + 1) + 1
    return " ".join([REPLY] * copies)[:characters]


def feed_by_character(text: str) -> tuple[float, int]:
    """Feed ``text`` to a new chunker one character at a time, then flush: ``(milliseconds, chunks)``."""
    from protocol.chunker import IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker()
    started = time.perf_counter()
    chunks = 0
    for character in text:
        chunks += len(chunker.feed(character))
    chunks += chunker.flush() is not None
    return (time.perf_counter() - started) * 1000.0, chunks


async def run(context: Any, config: Config = Config()) -> Result:
    """Time each size ``config.trials`` times, alternating sizes (pure CPU: no server involved)."""
    result = Result(NAME, TITLE, config=asdict(config))
    texts = {size: text_of_length(size) for size in config.sizes}
    for text in texts.values():
        feed_by_character(text)  # warm-up: sentencex's tables, the interpreter's caches
    for number in range(config.trials):
        for size in config.sizes if number % 2 == 0 else config.sizes[::-1]:
            elapsed_ms, chunks = feed_by_character(texts[size])
            result.trials.append(
                {"trial": number + 1, "chars": size, "ms": round(elapsed_ms, 2), "chunks": chunks}
            )
    figures: dict[str, Any] = {}
    for size in config.sizes:
        summary = describe([t["ms"] for t in result.trials if t["chars"] == size], digits=2)
        figures[str(size)] = {**summary, "us_per_char": round(1000.0 * summary["median"] / size, 3)}
    small, large = str(min(config.sizes)), str(max(config.sizes))
    figures["time_ratio"] = ratio(figures[large]["median"], figures[small]["median"])
    figures["size_ratio"] = ratio(max(config.sizes), min(config.sizes))
    result.figures = figures
    context.log(f"  {small} chars {figures[small]['median']} ms, {large} chars {figures[large]['median']} ms")
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """One row per size, then the ratio of times beside the ratio of sizes."""
    figures = result["figures"]
    headers = ["characters", "total, median", "per character", "n"]
    rows = [
        [
            f"{int(size):,}",
            f"{figures[size]['median']:,.1f} ms",
            f"{figures[size]['us_per_char']:.2f} µs",
            str(figures[size]["n"]),
        ]
        for size in figures
        if size.isdigit()
    ]
    rows.append(
        [f"ratio ({figures['size_ratio']:g}× the text)", f"{figures['time_ratio']:.2f}× the time", "", ""]
    )
    return [(headers, rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """What one trial does."""
    return [
        "One new chunker per trial, one `feed()` call per character, then `flush()`; linear cost shows as a "
        "time ratio close to the size ratio.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's total time per size."""
    from bench.plots import strip_chart

    figures = result["figures"]
    sizes = sorted({t["chars"] for t in result["trials"]})
    series = {f"{size:,} chars": [t["ms"] for t in result["trials"] if t["chars"] == size] for size in sizes}
    strip_chart(
        path,
        "Total time (ms)",
        series,
        title=f"{figures['time_ratio']}× the time for {figures['size_ratio']:g}× the text",
    )
