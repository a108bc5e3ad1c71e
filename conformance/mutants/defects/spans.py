"""Mutants of §14.4 text spans: servers that list ``text_spans`` and give word timings spans that a
read-along client would highlight wrongly. Each rewrites the ``words`` of ``synthesis_complete`` and
``marks`` frames on the way out, knowing the request's text from its request (:func:`_remember_text`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.mutants.defects.core import Defect, DefectConnection, Frame, is_request, map_controls

__all__ = ["SPAN_DEFECTS"]

WordsChange = Callable[[str, list[dict[str, Any]]], list[dict[str, Any]]]
"""Rewrites a frame's words, given the request's text."""


def _texts(session: DefectConnection) -> dict[str, str]:
    texts = getattr(session, "span_texts", None)
    if texts is None:
        texts = {}
        session.span_texts = texts  # type: ignore[attr-defined]
    return texts


def _remember_text(session: DefectConnection, obj: dict[str, Any]) -> Any:
    """Note each request's text by its id (the hook changes nothing)."""
    request_id, text = obj.get("request_id"), obj.get("text")
    if is_request(obj) and isinstance(request_id, str) and isinstance(text, str):
        _texts(session)[request_id] = text
    return None


_UTTERANCE_MESSAGES = ("utterance", "append", "flush", "end")


def _remember_fragments(session: DefectConnection, obj: dict[str, Any]) -> Any:
    """Note where each fragment of an utterance starts in its fragments joined, in code points (§15.2: a
    surrogate pair split across two fragments counts once), by the utterance's id (changes nothing)."""
    request_id, text = obj.get("request_id"), obj.get("text")
    if obj.get("type") not in _UTTERANCE_MESSAGES or not isinstance(request_id, str):
        return None
    if not isinstance(text, str) or not text:
        return None
    joined = getattr(session, "span_fragments", None)
    if joined is None:
        joined = session.span_fragments = {}  # type: ignore[attr-defined]
    raw, starts = joined.get(request_id, ("", []))
    starts = [*starts, len(_code_points(raw))]
    joined[request_id] = (raw + text, starts)
    return None


def _code_points(raw: str) -> str:
    """``raw`` with its surrogate pairs joined into the code points they encode."""
    return raw.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _per_fragment(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
    """An outgoing hook that counts each utterance word's span from the start of the fragment it falls in
    (as a server that maps every fragment on its own would), not from the utterance's first character."""

    def one(obj: dict[str, Any]) -> dict[str, Any]:
        words = obj.get("words")
        fragments = getattr(session, "span_fragments", {}).get(obj.get("request_id"))
        if obj.get("type") not in ("synthesis_complete", "marks") or not isinstance(words, list):
            return obj
        if fragments is None:
            return obj
        starts = fragments[1]
        out = []
        for word in words:
            start, end = (word.get("text_start"), word.get("text_end")) if isinstance(word, dict) else (0, 0)
            if isinstance(start, int) and isinstance(end, int):
                base = max((at for at in starts if at <= start), default=0)
                word = {**word, "text_start": start - base, "text_end": end - base}
            out.append(word)
        return {**obj, "words": out}

    if not any(isinstance(f, str) and '"words"' in f for f in frames):
        return frames
    return map_controls(one)(session, frames)


def _words_rewritten(change: WordsChange, types: tuple[str, ...] = ("synthesis_complete", "marks")) -> Any:
    """An outgoing hook applying ``change`` to the words of the frames of ``types``."""

    def fix(session: DefectConnection) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def one(obj: dict[str, Any]) -> dict[str, Any]:
            words = obj.get("words")
            if obj.get("type") not in types or not isinstance(words, list):
                return obj
            text = _texts(session).get(str(obj.get("request_id")))
            if text is None and change is not _no_spans:  # a request it did not see (an utterance)
                return obj
            return {**obj, "words": change(text or "", [dict(w) for w in words if isinstance(w, dict)])}

        return one

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        # Only frames with words are parsed: a flood of error frames (10.3.1) passes untouched.
        if not any(isinstance(f, str) and '"words"' in f for f in frames):
            return frames
        return map_controls(fix(session))(session, frames)

    return hook


def _utf16(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Offsets in UTF-16 code units, as a JavaScript server counts them: each astral character twice."""

    def units(index: int) -> int:
        return len(text[:index].encode("utf-16-le")) // 2

    for word in words:
        if isinstance(word.get("text_start"), int) and isinstance(word.get("text_end"), int):
            word["text_start"], word["text_end"] = units(word["text_start"]), units(word["text_end"])
    return words


def _spoken_offsets(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Offsets into the text as spoken (the words joined by spaces), not the text the client wrote."""
    position = 0
    for word in words:
        spoken = str(word.get("word", ""))
        word["text_start"], word["text_end"] = position, position + len(spoken)
        position += len(spoken) + 1
    return words


def _no_spans(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The feature listed, the spans left out."""
    return [{k: v for k, v in word.items() if k not in ("text_start", "text_end")} for word in words]


def _with_markup(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans that take in the markdown syntax around their word (``**dear**`` instead of ``dear``)."""
    for word in words:
        start, end = word.get("text_start"), word.get("text_end")
        if not isinstance(start, int) or not isinstance(end, int):
            continue
        if not 0 <= start <= end <= len(text):
            continue
        while start > 0 and text[start - 1] in "*_~`":
            start -= 1
        while end < len(text) and text[end] in "*_~`":
            end += 1
        word["text_start"], word["text_end"] = start, end
    return words


def _first_character(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A word read out from a figure points at the token's first character (``$`` of ``$12.50``) alone."""
    written = {"".join(c for c in token.casefold() if c.isalnum()) for token in text.split()}
    for word in words:
        start, end = word.get("text_start"), word.get("text_end")
        letters = "".join(c for c in str(word.get("word", "")).casefold() if c.isalnum())
        if isinstance(start, int) and isinstance(end, int) and end > start and letters not in written:
            word["text_end"] = start + 1
    return words


def _one_character(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every span cut to its first code point: a word of several characters no longer covers them."""
    for word in words:
        start, end = word.get("text_start"), word.get("text_end")
        if isinstance(start, int) and isinstance(end, int) and end > start:
            word["text_end"] = start + 1
    return words


def _past_the_end(text: str, words: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last word's span ends one code point past the end of the text (a count that takes a closing
    newline or a terminator the text does not have)."""
    for word in reversed(words):
        start, end = word.get("text_start"), word.get("text_end")
        if isinstance(start, int) and isinstance(end, int):
            word["text_end"] = len(text) + 1
            break
    return words


SPAN_DEFECTS: tuple[Defect, ...] = (
    Defect(
        "spans-in-utf16",
        "Counts text_start/text_end in UTF-16 code units (an emoji outside the BMP is two), not code points "
        "(§14.4)",
        ("R14.4-4", "R14.4-6"),
        incoming=_remember_text,
        outgoing=_words_rewritten(_utf16),
    ),
    Defect(
        "spans-of-spoken-text",
        "Gives each word's offsets in the text as spoken (normalized, markdown removed), not in the "
        "request's original text (§14.4)",
        ("R14.4-4", "R14.4-5"),
        incoming=_remember_text,
        outgoing=_words_rewritten(_spoken_offsets),
    ),
    Defect(
        "spans-missing",
        "Lists text_spans in capabilities.features but sends words without text_start/text_end (§14.4)",
        ("R14.4-2a",),
        outgoing=_words_rewritten(_no_spans),
    ),
    Defect(
        "spans-missing-in-marks",
        "Sends spans in synthesis_complete but not in the words of its marks frames (§14.4)",
        ("R14.4-2b",),
        outgoing=_words_rewritten(_no_spans, ("marks",)),
    ),
    Defect(
        "spans-take-markup",
        "Widens a word's span over the markdown emphasis markers around it (§14.4)",
        ("R14.4-4",),
        incoming=_remember_text,
        outgoing=_words_rewritten(_with_markup),
    ),
    Defect(
        "spans-first-character",
        "Points the words read out from a figure at its first character ('$' of '$12.50') instead of the "
        "whole token (§14.4)",
        ("R14.4-5", "R14.4-6"),
        incoming=_remember_text,
        outgoing=_words_rewritten(_first_character),
    ),
    Defect(
        "spans-one-character",
        "Points every word at its first character alone, so a word of a script without spaces (今天天气) "
        "does not cover what it reads (§14.4)",
        ("R14.4-6", "R14.4-4", "R14.4-5"),
        incoming=_remember_text,
        outgoing=_words_rewritten(_one_character),
    ),
    Defect(
        "spans-past-the-end",
        "Ends the last word's span one code point past the end of the request's text (§14.4)",
        ("R14.4-3",),
        incoming=_remember_text,
        outgoing=_words_rewritten(_past_the_end),
    ),
    Defect(
        "spans-per-fragment",
        "Counts an utterance word's text_start/text_end from the start of the fragment (utterance, append, "
        "flush or end) its text arrived in, not over the fragments' texts joined (§14.4, §15.2)",
        ("R14.4-2c",),
        incoming=_remember_fragments,
        outgoing=_per_fragment,
    ),
)
"""The §14.4 rows of :data:`conformance.mutants.defects.table.DEFECTS`."""
