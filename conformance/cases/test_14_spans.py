"""§14.4 text spans (version 1.1, OPTIONAL feature ``text_spans``): every word timing says which characters
of the request's original text it reads, in code points, through markdown, normalization and emoji.

Each case sends a text whose words a client could not find by their spoken form (emoji outside the Basic
Multilingual Plane before them, markdown around them, figures read out) and checks the spans of the
``words`` of ``synthesis_complete`` (and of ``marks``, asked for) against the text it sent. A server whose
``capabilities.features`` lack ``text_spans``, or that offers no ``describe``, gets UNIMPLEMENTED: the
feature is optional (§1.7); so does one whose language has no word timings.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.describe import ask, require_features
from conformance.engine.probe import Probe
from conformance.engine.stream import Answer, ObservedStream

WRITTEN = "🎉🎉 Good morning, **dear**, friend 😀 of Dr. Smith, see [the notes](https://example.com/n)."
"""Words spoken as written, behind astral emoji (one code point each, two UTF-16 units), inside markdown
emphasis and a link whose target is not spoken, two of them with punctuation beyond the markup (``dear,``,
``notes.``): their spans must not reach over the markup to it."""
LINK_TARGET = "](https://example.com/n)"
"""The part of :data:`WRITTEN` that is no word: the words are found in the text without it."""
FIGURES = "It costs $12.50 today, at 10:30."
"""Figures a server reads out: each of their words points at the whole written token (§14.4)."""
TOKENS = ("$12.50", "10:30")
CJK = {"z": "今天🎉天气很好。我们走吧。", "j": "今日は🎉いい天気です。"}
"""A sentence per language whose words are not separated by spaces, with an astral emoji among them."""
_MARKUP = "*_~`#[]()<>"


def _core(text: str) -> str:
    """``text`` without the punctuation at its edges, case-folded."""
    start, end = 0, len(text)
    while start < end and not text[start].isalnum():
        start += 1
    while end > start and not text[end - 1].isalnum():
        end -= 1
    return text[start:end].casefold()


def _letters(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum())


async def _offer(
    session: ObservedStream, codes: str = "a", features: tuple[str, ...] = ("text_spans",)
) -> str:
    """``describe``; a voice of the first of ``codes`` the server speaks with word timings. UNIMPLEMENTED
    without describe, one of ``features`` or such a voice."""
    offer = await ask(session, "spans-caps")
    require_features(None if offer is None else offer.features, *features)
    capabilities = offer.capabilities()
    timed = {language.code for language in capabilities.languages if language.word_timings}
    for code in codes:
        voices = [v.id for v in capabilities.voices if v.language == code and code in timed]
        if voices:
            return voices[0]
    raise Unimplemented(f"the server has no voice with word timings in {', '.join(codes)}")


def _span_problems(text: str, words: Any, where: str) -> list[str]:
    """Rules every span keeps (R14.4-2a, R14.4-3): both members, integers, inside the text, in order."""
    if not isinstance(words, list) or not words:
        return [f"{where}: no words"]
    problems = []
    last = 0
    for entry in words:
        start, end = entry.get("text_start"), entry.get("text_end")
        label = f"{where}: word {entry.get('word')!r}"
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            problems.append(f"{label} has no integer text_start/text_end ({start!r}, {end!r})")
            continue
        if not 0 <= start <= end <= len(text):
            problems.append(f"{label}: span [{start}, {end}) is not inside the {len(text)} code points")
        if start < last:
            problems.append(f"{label}: text_start {start} is before the previous word's {last}")
        last = max(last, start)
    return problems


def _words(answer: Answer) -> list[dict[str, Any]]:
    complete = answer.complete
    raw = None if complete is None else complete.obj.get("words")
    if complete is None or complete.status != "completed":
        raise AssertionError(
            f"{answer.request_id} did not complete ({None if complete is None else complete.status})"
        )
    if raw is None:
        raise Unimplemented(f"{answer.request_id} carried no words: its language has no word timings here")
    return [w for w in raw if isinstance(w, dict)] if isinstance(raw, list) else raw


def _marks_words(answer: Answer) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for mark in answer.marks:
        words = mark.obj.get("words")
        if isinstance(words, list):
            out += [w for w in words if isinstance(w, dict)]
    return out


async def _speak(conf_session: ObservedStream, text: str, request_id: str, voice: str) -> Answer:
    await conf_session.request(text, request_id=request_id, voice=voice, marks=True)
    return await conf_session.answer(request_id)


@case(
    "14.4.1",
    "§14.4",
    Level.MUST,
    requirements=("R14.4-4", "R14.4-2a", "R14.4-2b", "R14.4-3", "R14.4-1"),
    requirement="For a word spoken as written, MUST give the span of exactly the characters written for it: "
    "markup around it is left out (`**bold**` → the four letters `bold`; a heading's `#`, a link's target), "
    "and the punctuation the server counts as part of the word (§14.1: `today,` in English) is in.",
    description=f"describe; {WRITTEN!r} in English with marks: true",
    expectation="every word of synthesis_complete and of the marks frames carries integer text_start and "
    "text_end inside the text (code points), text_start never decreasing, the marks' words the same as "
    "synthesis_complete's; each word whose letters are a word of the text has a span that holds the same "
    "letters and no markdown syntax; a server that does not list text_spans is UNIMPLEMENTED",
)
def test_words_spoken_as_written_point_at_their_characters(conf: Probe) -> None:
    async def scenario() -> Answer:
        async with conf.session("spans-written") as s:
            voice = await _offer(s)
            return await _speak(s, WRITTEN, "sp-written", voice)

    answer = conf.run(scenario())
    words = _words(answer)
    problems = _span_problems(WRITTEN, words, "synthesis_complete")
    marked = _marks_words(answer)
    if answer.marks and [(w.get("text_start"), w.get("text_end")) for w in marked] != [
        (w.get("text_start"), w.get("text_end")) for w in words
    ]:
        problems.append("the marks frames' words do not carry the spans synthesis_complete's words carry")
    written = {_letters(token) for token in WRITTEN.replace(LINK_TARGET, "]").split()} - {""}
    checked = 0
    for entry in words:
        start, end, word = entry.get("text_start"), entry.get("text_end"), entry.get("word")
        if not isinstance(word, str) or _letters(word) not in written or not isinstance(start, int):
            continue
        if not isinstance(end, int):
            continue
        checked += 1
        span = WRITTEN[start:end]
        if _core(span) != _core(word) or any(char in _MARKUP for char in span):
            problems.append(f"word {word!r} points at {span!r} ([{start}, {end})), not at its own characters")
    if not checked and not problems:
        problems.append(f"no word of {[w.get('word') for w in words]} is a word of the text as written")
    conf.observe(words=[[w.get("word"), w.get("text_start"), w.get("text_end")] for w in words])
    assert not problems, "; ".join(problems[:6]) + (
        f" and {len(problems) - 6} more" if len(problems) > 6 else ""
    )


@case(
    "14.4.2",
    "§14.4",
    Level.MUST,
    requirements=("R14.4-5", "R14.4-3", "R14.4-2a"),
    requirement="For a word that normalization wrote in place of a written token (a figure, an amount, a "
    "time, a symbol, an abbreviation read out, §14.2), MUST give every word read from that token the span "
    "of the whole token",
    description=f"describe; {FIGURES!r} in English",
    expectation="spans inside the text and in order; every word whose letters are no word of the text (read "
    f"out from a figure) points at one whole token of {TOKENS} (its trailing punctuation aside), and each "
    "token is pointed at; a server that does not list text_spans is UNIMPLEMENTED",
)
def test_words_read_from_a_figure_point_at_the_whole_figure(conf: Probe) -> None:
    async def scenario() -> Answer:
        async with conf.session("spans-figures") as s:
            voice = await _offer(s)
            return await _speak(s, FIGURES, "sp-figures", voice)

    answer = conf.run(scenario())
    words = _words(answer)
    problems = _span_problems(FIGURES, words, "synthesis_complete")
    written = {_letters(token) for token in FIGURES.split()}
    pointed: set[str] = set()
    for entry in words:
        start, end, word = entry.get("text_start"), entry.get("text_end"), entry.get("word")
        if not isinstance(word, str) or not isinstance(start, int) or not isinstance(end, int):
            continue
        if _letters(word) in written:
            continue  # spoken as written (a server may leave a figure as it is)
        span = FIGURES[start:end].rstrip(".,")
        if span not in TOKENS:
            problems.append(f"word {word!r} read out from a figure points at {span!r}, not at a whole token")
        pointed.add(span)
    if not problems and (missing := [t for t in TOKENS if t not in pointed]):
        spoken = [w.get("word") for w in words]
        if any(_letters(t) in {_letters(str(w)) for w in spoken} for t in missing):
            missing = []  # the server spoke the figure as written: 14.4.1's rule applies to it
        if missing:
            problems.append(f"no word points at {missing}: the words {spoken}")
    conf.observe(words=[[w.get("word"), w.get("text_start"), w.get("text_end")] for w in words])
    assert not problems, "; ".join(problems[:6])


def _cjk(char: str) -> bool:
    return unicodedata.category(char) == "Lo"


@case(
    "14.4.3",
    "§14.4",
    Level.MUST,
    requirements=("R14.4-6", "R14.4-3", "R14.4-2a"),
    requirement="in a language whose G2P rewrites the text itself (Japanese and Chinese numerals, §14.1) the "
    "span of such a word SHOULD be the smallest the server can tell, and MUST still cover the characters "
    "the word reads.",
    description="describe; in Chinese (else Japanese) a text without spaces with an emoji among its words: "
    + "; ".join(f"{code}: {text!r}" for code, text in CJK.items()),
    expectation="spans inside the text (code points: the emoji is one) and in order; every Han or kana "
    "character of a word lies inside its span; a server without text_spans or without a Chinese or "
    "Japanese voice with word timings is UNIMPLEMENTED",
)
def test_words_of_an_unspaced_script_cover_what_they_read(conf: Probe) -> None:
    async def scenario() -> tuple[str, Answer]:
        async with conf.session("spans-cjk") as s:
            voice = await _offer(s, "zj")
            text = CJK["z"] if voice.startswith("z") else CJK["j"]
            return text, await _speak(s, text, "sp-cjk", voice)

    text, answer = conf.run(scenario())
    words = _words(answer)
    problems = _span_problems(text, words, "synthesis_complete")
    for entry in words:
        start, end, word = entry.get("text_start"), entry.get("text_end"), entry.get("word")
        if not isinstance(word, str) or not isinstance(start, int) or not isinstance(end, int):
            continue
        span = text[start:end]
        lost = [char for char in word if _cjk(char) and char not in span]
        if lost and any(char in text for char in lost):
            problems.append(
                f"word {word!r} points at {span!r} ([{start}, {end})), which lacks {''.join(lost)!r}"
            )
    conf.observe(words=[[w.get("word"), w.get("text_start"), w.get("text_end")] for w in words])
    assert not problems, "; ".join(problems[:6])


UTTERANCE = (
    ("utterance", "🎉 Good mor"),
    ("append", "ning,  **de"),
    ("append", "ar** friend \ud83d"),
    ("flush", "\ude00 of Dr. Smith."),
    ("append", "\nIt costs $12"),
    ("append", ".50 to"),
    ("end", "day, see [the notes](https://example.com/n) now."),
)
"""An utterance's messages and their texts (§15.1): words, markdown emphasis and a figure split across
fragments, a whitespace run the server collapses, and an emoji whose surrogate halves arrive in two
fragments (one code point of the text, §15.2)."""
UTTERANCE_TEXT = (
    "".join(text for _, text in UTTERANCE).encode("utf-16-le", "surrogatepass").decode("utf-16-le")
)
"""The text the spans of :data:`UTTERANCE` count in: its fragments joined, in code points (§14.4)."""
_WORD_BREAKS = re.compile(r"[\s*_~`#\[\]()<>]+")


@case(
    "14.4.4",
    "§14.4",
    Level.MUST,
    requirements=("R14.4-2c", "R14.4-1"),
    requirement="for utterances as for requests, an utterance's words counted over its texts joined",
    description="describe; an English utterance whose text arrives in "
    + ", ".join(kind for kind, _ in UTTERANCE)
    + f" messages, split inside words, markdown, a figure and an emoji's surrogate pair: {UTTERANCE_TEXT!r}",
    expectation="every word of synthesis_complete and of the marks frames carries text_start and text_end "
    "inside the joined text (code points), in order, the marks' the same as synthesis_complete's; each "
    "word spoken as written points at its own characters there (no markdown syntax), each word read out "
    "from '$12.50' or 'Dr.' at that whole token; a server that does not list utterance and text_spans "
    "is UNIMPLEMENTED",
)
def test_words_of_an_utterance_point_into_its_fragments_joined(conf: Probe) -> None:
    async def scenario() -> Answer:
        async with conf.session("spans-utterance") as s:
            voice = await _offer(s, features=("text_spans", "utterance"))
            request_id = "sp-utterance"
            (_, first), *rest = UTTERANCE
            await s.utterance(request_id, text=first, voice=voice, marks=True)
            for kind, text in rest:
                await s.fragment(kind, request_id, text)
            return await s.answer(request_id)

    answer = conf.run(scenario())
    text = UTTERANCE_TEXT
    words = _words(answer)
    problems = _span_problems(text, words, "synthesis_complete")
    marked = _marks_words(answer)
    if answer.marks and [(w.get("text_start"), w.get("text_end")) for w in marked] != [
        (w.get("text_start"), w.get("text_end")) for w in words
    ]:
        problems.append("the marks frames' words do not carry the spans synthesis_complete's words carry")
    written = {_letters(part) for part in _WORD_BREAKS.split(text)} - {""}
    tokens = {token.rstrip(".,") for token in ("$12.50", "Dr.")}
    for entry in words:
        start, end, word = entry.get("text_start"), entry.get("text_end"), entry.get("word")
        if not isinstance(word, str) or not isinstance(start, int) or not isinstance(end, int):
            continue
        span = text[start:end]
        if _letters(word) in written:
            if _core(span) != _core(word) or any(char in _MARKUP for char in span):
                problems.append(f"word {word!r} points at {span!r} ([{start}, {end})), not at its characters")
        elif span.rstrip(".,") not in tokens:
            problems.append(f"word {word!r} read out from a figure points at {span!r}, not at a whole token")
    if not any(text[w["text_start"] : w["text_end"]] == "$12.50" for w in words if _has_span(w)) and (
        "1250" not in {_letters(str(w.get("word"))) for w in words}
    ):
        problems.append(f"no word points at '$12.50': the words {[w.get('word') for w in words]}")
    conf.observe(words=[[w.get("word"), w.get("text_start"), w.get("text_end")] for w in words])
    assert not problems, "; ".join(problems[:6]) + (
        f" and {len(problems) - 6} more" if len(problems) > 6 else ""
    )


def _has_span(entry: dict[str, Any]) -> bool:
    return all(isinstance(entry.get(k), int) for k in ("text_start", "text_end"))
