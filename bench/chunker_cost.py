"""Benchmark 7: the sentence chunker's and the text front-end's cost, fed one character at a time.

An LLM can stream a reply in pieces as small as one character, and the agent feeds every piece to
:class:`speech.chunker.IncrementalSentenceChunker`; the server puts a request's or an utterance's text
through :class:`speech.frontend.SpeechFrontend` (markdown removal, the chunker, normalization of
figures and emoji, PROTOCOL.md §14.2). A long reply fed one character at a time is the worst case; the
cost should grow linearly with the reply's length (the docstrings argue it, and the tests count the
work), so twice the text should take about twice the time, not four times.

Texts: for the chunker, the benchmark reply repeated and cut to length; for the front-end, a markdown
reply of the kind a language model writes (:data:`MARKDOWN_REPLY`: headings, a list, a table, a code
block, prices, times, dates, percentages, a link, emoji) repeated and cut to length. Each trial feeds a
new object every character, then flushes. Sizes alternate trial by trial.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.record import Result
from bench.summary import describe, ratio
from bench.texts import REPLY

__all__ = [
    "MARKDOWN_REPLY",
    "NAME",
    "SMOKE",
    "TITLE",
    "Config",
    "feed_by_character",
    "feed_frontend_by_character",
    "notes",
    "plot",
    "run",
    "tables",
]

NAME = "chunker_cost"
TITLE = "7. Chunker and text front-end cost: a reply fed one character at a time"

MARKDOWN_REPLY = (
    "## Your order 📦\n\nGood news: it **shipped** on 2024-03-15 at 10:30 a.m. and costs $1,234.50 "
    "(12.5% off). Dr. Lee says it weighs 2.5 kg.\n\n- Track it at [the portal](https://example.com/t).\n"
    "- Questions? Email help@example.com.\n\n| Item | Price |\n|---|---|\n| Desk | $899 |\n\n"
    '```\ntrack --id 42\n```\n\n"Thanks!" she said. Delivery takes 3–5 days… 🎉\n'
)
"""A markdown reply of the kind a language model writes, for the front-end measurement (339 characters)."""


@dataclass(frozen=True)
class Config:
    """Attributes: text lengths compared (characters); trials per length (after one warm-up)."""

    sizes: tuple[int, ...] = (10_000, 20_000)
    trials: int = 7


SMOKE = Config(sizes=(500, 1_000), trials=1)


def text_of_length(characters: int, reply: str = REPLY) -> str:
    """``reply`` (the benchmark reply by default) repeated, cut to ``characters``."""
    copies = characters // (len(reply) + 1) + 1
    return " ".join([reply] * copies)[:characters]


def feed_by_character(text: str) -> tuple[float, int]:
    """Feed ``text`` to a new chunker one character at a time, then flush: ``(milliseconds, chunks)``."""
    from speech.chunker import IncrementalSentenceChunker

    chunker = IncrementalSentenceChunker()
    started = time.perf_counter()
    chunks = 0
    for character in text:
        chunks += len(chunker.feed(character))
    chunks += chunker.flush() is not None
    return (time.perf_counter() - started) * 1000.0, chunks


def feed_frontend_by_character(text: str, language: str = "a") -> tuple[float, int]:
    """Feed ``text`` to a new :class:`~speech.frontend.SpeechFrontend` one character at a time, then
    flush: ``(milliseconds, pieces)``."""
    from speech.frontend import SpeechFrontend

    frontend = SpeechFrontend(language)
    started = time.perf_counter()
    pieces = 0
    for character in text:
        pieces += len(frontend.feed(character))
    pieces += len(frontend.flush())
    return (time.perf_counter() - started) * 1000.0, pieces


def _summaries(trials: list[dict[str, Any]], sizes: tuple[int, ...]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for size in sizes:
        summary = describe([t["ms"] for t in trials if t["chars"] == size], digits=2)
        figures[str(size)] = {**summary, "us_per_char": round(1000.0 * summary["median"] / size, 3)}
    small, large = str(min(sizes)), str(max(sizes))
    figures["time_ratio"] = ratio(figures[large]["median"], figures[small]["median"])
    figures["size_ratio"] = ratio(max(sizes), min(sizes))
    return figures


async def run(context: Any, config: Config = Config()) -> Result:
    """Time each size ``config.trials`` times, alternating sizes (pure CPU: no server involved)."""
    result = Result(NAME, TITLE, config=asdict(config))
    texts = {size: text_of_length(size) for size in config.sizes}
    markdown = {size: text_of_length(size, MARKDOWN_REPLY) for size in config.sizes}
    for size in config.sizes:
        feed_by_character(texts[size])  # warm-up: sentencex's tables, the interpreter's caches
        feed_frontend_by_character(markdown[size])  # and the front-end's compiled patterns
    for number in range(config.trials):
        for size in config.sizes if number % 2 == 0 else config.sizes[::-1]:
            elapsed_ms, chunks = feed_by_character(texts[size])
            result.trials.append(
                {"trial": number + 1, "chars": size, "ms": round(elapsed_ms, 2), "chunks": chunks}
            )
            elapsed_ms, pieces = feed_frontend_by_character(markdown[size])
            result.trials.append(
                {
                    "trial": number + 1,
                    "stage": "frontend",
                    "chars": size,
                    "ms": round(elapsed_ms, 2),
                    "chunks": pieces,
                }
            )
    chunker_trials = [t for t in result.trials if "stage" not in t]
    frontend_trials = [t for t in result.trials if t.get("stage") == "frontend"]
    figures = _summaries(chunker_trials, config.sizes)
    figures["frontend"] = _summaries(frontend_trials, config.sizes)
    result.figures = figures
    small, large = str(min(config.sizes)), str(max(config.sizes))
    front = figures["frontend"]
    context.log(
        f"  chunker: {small} chars {figures[small]['median']} ms, {large} chars {figures[large]['median']} ms"
    )
    context.log(
        f"  front-end: {small} chars {front[small]['median']} ms, {large} chars {front[large]['median']} ms"
    )
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Per stage (the chunker; the front-end when measured): one row per size, then the ratio of times
    beside the ratio of sizes."""
    figures = result["figures"]
    out = [_table(figures)]
    if isinstance(figures.get("frontend"), dict):
        out.append(_table(figures["frontend"], stage="front-end, markdown reply"))
    return out


def _table(figures: dict[str, Any], stage: str = "") -> tuple[list[str], list[list[str]]]:
    headers = [f"characters ({stage})" if stage else "characters", "total, median", "per character", "n"]
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
    return headers, rows


def notes(result: dict[str, Any]) -> list[str]:
    """What one trial does."""
    return [
        "One new chunker per trial, one `feed()` call per character, then `flush()`; linear cost shows as a "
        "time ratio close to the size ratio.",
        "The front-end (`speech.frontend.SpeechFrontend`: markdown removal, the chunker, normalization of "
        "figures and emoji) gets a markdown reply of the kind a language model writes, the same way; its "
        "per-character figure is what a server adds to a request's text before G2P.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Every trial's total time per size."""
    from bench.plots import strip_chart

    figures = result["figures"]
    trials = [t for t in result["trials"] if "stage" not in t]
    sizes = sorted({t["chars"] for t in trials})
    series = {f"{size:,} chars": [t["ms"] for t in trials if t["chars"] == size] for size in sizes}
    strip_chart(
        path,
        "Total time (ms)",
        series,
        title=f"{figures['time_ratio']}× the time for {figures['size_ratio']:g}× the text",
    )
