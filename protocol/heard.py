"""What a listener heard of a request: its word timings cut at the player's position (PROTOCOL.md §5.3).

After a barge-in a voice agent must keep in its context what the listener heard, not what it wrote (the
way OpenAI's realtime API truncates an item at the client's playback position). The server knows what it
sent; only the client knows how much of it was played. ``synthesis_complete`` carries the word timings of
the audio sent, also for a request cut short by ``cancel`` on a server that lists ``cancel_words``
(§4.2, §5.3); these functions turn "the player had played N ms of this request" into the text heard and
the text not heard. Pure functions: no I/O, no clock.

A word counts as **heard** when the player has played it to its end: ``end_s * 1000 <= played_ms``. A
word cut off in the middle is not heard (the listener heard a fragment, not the word).

Word timings name the words as the server spoke them, which may differ from the text the client sent
(§14.2: figures read out, markdown dropped). A word that carries its span of the text (``text_start``,
``text_end``: a server that lists the feature ``text_spans``, §14.4) takes that span, so ``forty-two``
cuts the text after ``$42`` and the text is cut in the original, markdown and all. A word without one is
looked for in the text, in order and ignoring case; a word not found there takes no span of its own. The text
between two words that were found is heard when every word spoken between them was heard; text after
the last word found is never counted as heard, since it may not have been spoken at all (a cancelled
request's words end where its audio ends).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.messages import SynthesisComplete, Word

__all__ = ["Heard", "NoWordTimings", "heard_of", "split_heard"]


class NoWordTimings(ValueError):
    """A request was played in part and its ``synthesis_complete`` carries no ``words``: what was heard
    cannot be told (a language without word timings, §14.1, or a server that does not list
    ``cancel_words``, §4.4)."""


@dataclass(frozen=True, slots=True)
class Heard:
    """A request's text split at the player's position.

    Attributes:
        heard: the text up to the end of the last word heard (``""`` when none was). ``heard +
            not_heard`` is always the whole text, whitespace included; strip it for display.
        not_heard: the rest of the text.
        words: the words heard, in order, as the server timed them.
    """

    heard: str
    not_heard: str
    words: tuple[Word, ...]


def _spans(text: str, words: Sequence[Word]) -> list[tuple[int, int] | None]:
    """Each word's ``(start, end)`` span in ``text`` (code points): the span it carries (§14.4) when that
    lies in ``text``, else found in order ignoring case; ``None`` for a word not found after the previous
    one."""
    folded = text.casefold()
    spans: list[tuple[int, int] | None] = []
    position = 0
    for word in words:
        carried = word.span
        if carried is not None and carried[1] <= len(text):
            spans.append(carried)
            position = max(position, carried[1])
            continue
        needle = word.word.strip().casefold()
        # casefold() keeps the length of most text; where it does not (ß → ss), the match is not trusted.
        found = folded.find(needle, position) if needle and len(folded) == len(text) else -1
        if found < 0:
            spans.append(None)
            continue
        spans.append((found, found + len(needle)))
        position = found + len(needle)
    return spans


def split_heard(text: str, words: Sequence[Word], played_ms: float) -> Heard:
    """Split ``text`` at the player's position, by the word timings of its audio.

    Args:
        text: the request's text as the client sent it (§4.1), or an utterance's whole text (§15).
        words: the word timings of the request's audio (``synthesis_complete.words``, §5.3): seconds from
            the request's first sample, in order.
        played_ms: milliseconds of this request's audio the player had played, from its first sample
            (0 or more; beyond the end means all of it).

    Returns:
        :class:`Heard`: the words with ``end_s * 1000 <= played_ms`` and the text they cover (see the module
        docstring for words not found in ``text``).

    Raises:
        ValueError: ``played_ms`` is negative or not a number.
    """
    if not isinstance(played_ms, int | float) or isinstance(played_ms, bool) or not played_ms >= 0:
        raise ValueError(f"played_ms must be a number >= 0, not {played_ms!r}")
    count = 0
    while count < len(words) and words[count].end_s * 1000.0 <= played_ms + 1e-6:
        count += 1  # the heard words are a prefix: timings only go forward (§5.3)
    cut = 0
    for index, span in enumerate(_spans(text, words)):
        if span is None:
            continue
        if index < count:
            cut = span[1]  # this word, and every word before it, was heard
        else:
            break
    return Heard(text[:cut], text[cut:], tuple(words[:count]))


def heard_of(text: str, complete: SynthesisComplete, played_ms: float) -> Heard:
    """What a listener heard of one answered request, given how much of its audio was played.

    A ``completed`` request played to its end (``played_ms >= total_duration_s * 1000``) was heard whole,
    with or without word timings. Otherwise the request's ``words`` decide (:func:`split_heard`): for a
    ``cancelled`` request they cover only the audio the server sent (§4.2, §5.3), so the text it never
    spoke is not heard whatever ``played_ms`` says.

    Args:
        text: the request's text as sent (§4.1).
        complete: its ``synthesis_complete`` (§5.3).
        played_ms: milliseconds of its audio played, from its first sample.

    Raises:
        NoWordTimings: played in part (or cancelled) and ``complete.words`` is absent.
        ValueError: ``played_ms`` is negative or not a number.
    """
    if not isinstance(played_ms, int | float) or isinstance(played_ms, bool) or not played_ms >= 0:
        raise ValueError(f"played_ms must be a number >= 0, not {played_ms!r}")
    whole = complete.status == "completed" and played_ms >= complete.total_duration_s * 1000.0
    if whole and complete.words is None:
        return Heard(text, "", ())
    if complete.words is None:
        if complete.audio_bytes == 0 or played_ms == 0:
            return Heard("", text, ())
        raise NoWordTimings(
            f"request {complete.request_id!r} was played for {played_ms:g} ms of "
            f"{complete.total_duration_s:g} s ({complete.status}) and carries no word timings"
        )
    split = split_heard(text, complete.words, played_ms)
    if whole:
        return Heard(text, "", split.words)
    return split
