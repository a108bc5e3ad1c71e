"""The report's status badge (``badge.svg``): the protocol version and the run's verdict in one line.

A server's README can show its latest certification as Autobahn|Testsuite and CI services show theirs:
``kokoro-bidi v1.1 | 229 OK`` (green), ``... | 3 FAILED`` (red), or, when the run passed with known failures
listed in ``--expect`` (:mod:`conformance.engine.expectations`), ``... | 226 OK, 3 expected`` (yellow). The
SVG is drawn by anybadge, the shields.io look without a network call.
"""

from __future__ import annotations

__all__ = ["badge_svg", "badge_text"]

COLOURS = {"passed": "green", "expected": "yellow", "failed": "red"}


def badge_text(protocol: str, *, ok: int, failed: int, expected: int = 0) -> tuple[str, str, str]:
    """(label, value, colour name) of the badge.

    Args:
        protocol: the protocol version certified (``protocol.messages.PROTOCOL_VERSION``).
        ok: cases and clauses that passed.
        failed: cases and clauses that fail the run (unexpected failures and unexpected passes included).
        expected: failures the expectations file lists (they do not fail the run).
    """
    label = f"kokoro-bidi v{protocol}"
    if failed:
        return label, f"{failed} FAILED", COLOURS["failed"]
    if expected:
        return label, f"{ok} OK, {expected} expected", COLOURS["expected"]
    return label, f"{ok} OK", COLOURS["passed"]


def badge_svg(protocol: str, *, ok: int, failed: int, expected: int = 0) -> str:
    """The badge as SVG text (see :func:`badge_text` for the arguments)."""
    import anybadge

    label, value, colour = badge_text(protocol, ok=ok, failed=failed, expected=expected)
    return anybadge.Badge(label, value, default_color=colour).badge_svg_text
