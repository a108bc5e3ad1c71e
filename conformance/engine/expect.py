"""Assertions the cases share; each failure message says what was expected and what was seen (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.engine import clauses
from conformance.engine.audio import check_speech
from conformance.engine.observer import Answer, ErrorView

__all__ = ["completed", "one_error", "spoken"]


def completed(answer: Answer, *, status: str = "completed") -> None:
    """The request's bracket closed with ``status`` (§5.3) and carries audio when completed.

    A ``synthesis_complete`` without ``status`` passes (its missing member is the finding of §5.3's cases);
    the audio is still judged.
    """
    assert answer.complete is not None, f"{answer.request_id!r} got no synthesis_complete"
    assert answer.complete.status in (status, None), (
        f"{answer.request_id!r} ended with status {answer.complete.status!r}, expected {status!r}"
    )
    if status == "completed":
        assert answer.audio, f"{answer.request_id!r} completed without any audio"


def spoken(answer: Answer, text: str, *, speed: float = 1.0) -> None:
    """The request completed and its audio is plausible speech of ``text``
    (:mod:`conformance.engine.audio`)."""
    completed(answer)
    problems = check_speech(bytes(answer.audio), answer.start.sample_rate, text, speed)
    assert not problems, f"{answer.request_id!r}: " + "; ".join(problems)


def one_error(conf: Any, errors: Sequence[ErrorView], code: str, request_id: str | None) -> ErrorView:
    """Exactly one error frame arrived, per-message (``fatal`` false), with ``code``; it names ``request_id``.

    The id it names is checked without stopping the case (``conf.check``, clause
    :data:`conformance.engine.clauses.ERROR_NAMES_REQUEST`): a server whose error frames name no request fails
    the case that owns that clause, not every case that refuses something.
    """
    seen = [f"{e.code} (request_id={e.request_id!r}, fatal={e.fatal})" for e in errors]
    assert len(errors) == 1, f"expected exactly one error frame ({code}), got {len(errors)}: {seen}"
    error = errors[0]
    # An error frame without a code breaks R5-1 and R6.3-3 (judged by 3.2.1 and 9.2.8): a note here, which
    # fails the run on its clause all the same (issue 30).
    if conf.check(
        clauses.ERROR_NAMES_REQUEST, error.code is not None, f"an error frame without a code answers {code}"
    ):
        assert error.code == code, f"expected code {code}, got {error.code}: {error.message!r}"
    assert not error.fatal, f"{code} is a per-message refusal (§9.1) but the frame says fatal: true"
    conf.check(
        clauses.ERROR_NAMES_REQUEST,
        error.request_id == request_id,
        f"the {code} error frame's request_id is {error.request_id!r}, expected {request_id!r}",
    )
    return error
