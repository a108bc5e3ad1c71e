"""Open a report's ``index.html`` in headless Chromium, read what it renders, keep a screenshot.

``python -m conformance.screenshot DIR`` writes ``DIR/index.png`` and prints the summary line the page shows
(``make conformance`` runs it after the suite). It drives Debian's ``chromium`` (``/usr/bin/chromium``,
installed by the Makefile) through Playwright; Playwright's own browser download is never used
(REFERENCE.md §7). The page is opened from disk: a report needs no network.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "Rendered", "main", "render"]

CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium (``apt-get install chromium``)."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
"""Root in a container needs ``--no-sandbox``; the rest keep the browser off the network and quiet."""


@dataclass(frozen=True)
class Rendered:
    """What the browser showed.

    Attributes:
        title: the page title.
        headline: the text of the summary box (``"3 distinct defects ..."``).
        defects: how many defect entries the page lists.
        case_rows: how many case rows it has.
        requests: URLs the page tried to load besides itself (a self-contained page has none).
        screenshot: where the PNG went.
    """

    title: str
    headline: str
    defects: int
    case_rows: int
    requests: list[str]
    screenshot: Path


def render(
    html: Path, png: Path, *, width: int = 1280, height: int = 900, executable: str = CHROMIUM
) -> Rendered:
    """Open ``html`` from disk in headless Chromium and screenshot the first screen into ``png``.

    Raises:
        FileNotFoundError: ``executable`` is not installed (``apt-get install chromium``).
        ImportError: Playwright is not installed (``pip install playwright``).
    """
    if shutil.which(executable) is None:
        raise FileNotFoundError(f"{executable} not found: install Debian's chromium (make installs it)")
    from playwright.sync_api import sync_playwright

    url = html.resolve().as_uri()
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
            page.goto(url, wait_until="load")
            title = page.title()
            headline = page.locator("#summary").inner_text() if page.locator("#summary").count() else ""
            defects = page.locator("article.defect").count()
            rows = page.locator("td.id").count()
            png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(png), full_page=False)
        finally:
            browser.close()
    return Rendered(title, " ".join(headline.split()), defects, rows, requests, png)


def main(argv: list[str] | None = None) -> int:
    """``python -m conformance.screenshot DIR``: screenshot ``DIR/index.html`` into ``DIR/index.png``."""
    parser = argparse.ArgumentParser(prog="python -m conformance.screenshot", description=__doc__)
    parser.add_argument("directory", type=Path, help="a --report directory")
    args = parser.parse_args(argv)
    html = args.directory / "index.html"
    if not html.exists():
        print(f"{html} does not exist: run the suite with --report {args.directory}", file=sys.stderr)
        return 2
    shown = render(html, args.directory / "index.png")
    print(f"{shown.screenshot}: {shown.headline[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
