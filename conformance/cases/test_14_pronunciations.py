"""§14.3 pronunciations (version 1.1, OPTIONAL feature ``lexicon``): a request's lexicon, the session's, the
inline form ``[word](/phonemes/)``, and the refusal of bad entries with ``invalid_lexicon``.

A pronunciation is heard, not seen: each case speaks the same English sentence with and without it and
compares the word timings (§5.3). The pronunciation given is four times longer than the word's own
(:data:`LONG`), so the word must last longer by far, while a longer word that contains it
(``Kokoros``) must not change. A server whose English has no word timings is judged on the audio's
length alone. A server whose ``capabilities.features`` lack ``lexicon``, or that offers no ``describe``,
gets UNIMPLEMENTED: the feature is optional (§1.7).
"""

from __future__ import annotations

from conformance.engine.case import Level, Unimplemented, case
from conformance.engine.describe import ask, require_features
from conformance.engine.probe import Probe
from conformance.engine.stream import Answer, ObservedStream

LONG = "kˈOkəɹO" * 4
"""A pronunciation of "Kokoro" in Kokoro's phoneme alphabet, four times as long as the word's own."""
TEXT = "Say Kokoro, not Kokoros, please."
WORD, LONGER = 1, 3
"""The indexes in :data:`TEXT`'s words of the word pronounced and of the longer word containing it."""
GREW_S = 0.3
"""Least growth of the pronounced word (or of the audio): 21 more phonemes last well over a second."""
SAME_S = 0.4
"""Most change allowed in a word the pronunciation does not name. Where a server cuts a sentence for
synthesis may depend on its pace at the moment (§10.1), and a word beside a cut is spoken up to about 0.2 s
longer; an entry wrongly applied to a word adds over a second (:data:`LONG`), so the margin still tells
the two apart."""
_PUNCTUATION = ".,;:!?\"'()"


async def _offer(session: ObservedStream) -> str:
    """``describe``; the English voice to speak in. UNIMPLEMENTED without describe, ``lexicon`` or English."""
    offer = await ask(session, "lex-caps")
    require_features(None if offer is None else offer.features, "lexicon")
    voices = [v.id for v in offer.capabilities().voices if v.language == "a"]
    if not voices:
        raise Unimplemented("the server has no American English voice to compare pronunciations in")
    return "af_heart" if "af_heart" in voices else voices[0]


def _length(answer: Answer, index: int | None) -> float:
    """Seconds the word at ``index`` of the answer's words lasts; the whole audio's for ``None``."""
    if index is None:
        return answer.duration_s
    word = answer.complete.words[index]
    return word.end_s - word.start_s


def _compare(plain: Answer, fixed: Answer, label: str, *, changed: int, same: tuple[int, ...]) -> list[str]:
    """What is wrong with ``fixed`` against ``plain``: word ``changed`` must be longer by :data:`GREW_S`,
    the words ``same`` as long within :data:`SAME_S`, and the words as written the same."""
    plain_words, fixed_words = plain.complete.words, fixed.complete.words
    if not plain_words or not fixed_words:  # no word timings in English: the audio's length alone
        grew = fixed.duration_s - plain.duration_s
        return [] if grew >= GREW_S else [f"{label}: the audio grew by {grew:.2f} s, not {GREW_S} s or more"]
    texts = [w.word.strip(_PUNCTUATION) for w in fixed_words]
    if texts != [w.word.strip(_PUNCTUATION) for w in plain_words] or len(texts) != len(TEXT.split()):
        return [f"{label}: words {texts}, not one per word of {TEXT!r} as without the lexicon"]
    problems = []
    grew = _length(fixed, changed) - _length(plain, changed)
    if grew < GREW_S:
        problems.append(f"{label}: {texts[changed]!r} grew by {grew:.2f} s, not {GREW_S} s or more")
    for index in same:
        moved = abs(_length(fixed, index) - _length(plain, index))
        if moved > SAME_S:
            problems.append(f"{label}: {texts[index]!r}, which it does not name, changed by {moved:.2f} s")
    return problems


@case(
    "14.3.1",
    "§14.3",
    Level.MUST,
    requirements=("R14.3-2", "R4.5-1", "R4.1-20", "R4.5-3"),
    requirement="A server MUST speak every matching word with the entry's phonemes, or with the G2P's "
    "phonemes of the respelling, and MUST leave every other word as it speaks it without the lexicon; the "
    "word stays one word of `words` (§5.3), its text the word as written.",
    description=f"describe; {TEXT!r} in English without a lexicon, with the request lexicon "
    f'{{"Kokoro": "{LONG}"}}, then after the message lexicon with the same entry, then after lexicon {{}}',
    expectation="every request completes with one word per word of the text; with either lexicon "
    f"'Kokoro' lasts {GREW_S} s longer and 'Kokoros' as long (within {SAME_S} s); after {{}} 'Kokoro' is "
    "as long as without; a server that does not list lexicon is UNIMPLEMENTED",
)
def test_a_lexicon_word_is_spoken_as_its_entry_says_and_nothing_else(conf: Probe) -> None:
    async def scenario() -> dict[str, Answer]:
        async with conf.session("lexicon") as s:
            voice = await _offer(s)
            await s.request(TEXT, request_id="lx-plain", voice=voice)
            await s.request(TEXT, request_id="lx-request", voice=voice, lexicon={"Kokoro": LONG})
            await s.send(b'{"type": "lexicon", "lexicon": {"Kokoro": "' + LONG.encode() + b'"}}')
            await s.request(TEXT, request_id="lx-session", voice=voice)
            await s.send(b'{"type": "lexicon", "lexicon": {}}')
            await s.request(TEXT, request_id="lx-cleared", voice=voice)
            ids = ("lx-plain", "lx-request", "lx-session", "lx-cleared")
            return {rid: await s.answer(rid) for rid in ids}

    answers = conf.run(scenario())
    plain = answers["lx-plain"]
    problems = _compare(plain, answers["lx-request"], "request lexicon", changed=WORD, same=(LONGER,))
    problems += _compare(plain, answers["lx-session"], "session lexicon", changed=WORD, same=(LONGER,))
    cleared = answers["lx-cleared"]
    if plain.complete.words and cleared.complete.words:
        moved = abs(_length(cleared, WORD) - _length(plain, WORD))
        if moved > SAME_S:
            problems.append(f"after lexicon {{}}: 'Kokoro' still differs by {moved:.2f} s")
    assert not problems, "; ".join(problems)


@case(
    "14.3.2",
    "§14.3",
    Level.MUST,
    requirements=("R14.3-3",),
    requirement="a server with the feature MUST speak its word with those phonemes as one word of `words` "
    "whose text is the word inside the brackets",
    description=f"describe; 'Say Kokoro, not [Kokoro](/{LONG}/), please.' and the same text without the "
    "inline form, in English",
    expectation=f"both complete with four words; the second 'Kokoro' lasts {GREW_S} s longer with the form "
    "and its word is 'Kokoro' (no brackets, no target), the first as long as without; a server that does "
    "not list lexicon is UNIMPLEMENTED",
)
def test_an_inline_form_gives_one_occurrence_its_phonemes(conf: Probe) -> None:
    text = "Say Kokoro, not Kokoro, please."
    inline = f"Say Kokoro, not [Kokoro](/{LONG}/), please."

    async def scenario() -> tuple[Answer, Answer]:
        async with conf.session("inline") as s:
            voice = await _offer(s)
            await s.request(text, request_id="in-plain", voice=voice)
            await s.request(inline, request_id="in-form", voice=voice)
            return await s.answer("in-plain"), await s.answer("in-form")

    plain, fixed = conf.run(scenario())
    problems = _compare(plain, fixed, "inline form", changed=3, same=(1,))
    if fixed.complete.words and any("[" in w.word or "/" in w.word for w in fixed.complete.words):
        problems.append(f"the words {[w.word for w in fixed.complete.words]} hold the form's syntax")
    assert not problems, "; ".join(problems)


BAD = {
    "symbol": ({"Kokoro": "kˈOkə9O"}, "Kokoro"),
    "empty-word": ({"": "kˈOkəɹO"}, None),
    "empty-phonemes": ({"Kokoro": ""}, "Kokoro"),
    "two-words": ({"Ko koro": "kˈOkəɹO"}, "Ko koro"),
    "shape": ({"Kokoro": {"sound": "kokoro"}}, "Kokoro"),
}
"""Lexicons a server with the feature must refuse (§14.3), each with the word its message should name."""


@case(
    "14.3.3",
    "§14.3",
    Level.MUST,
    requirements=("R14.3-1", "R9.1-1", "R4.5-2", "R10-2", "R4.1-5v"),
    requirement="A server that offers the feature MUST refuse with `invalid_lexicon` a lexicon whose word is "
    "empty or holds whitespace or no letter or digit, whose phonemes are empty or hold a symbol outside the "
    "alphabet, whose respelling is empty, whose entry has another shape, or that breaks a limit of §10",
    description="describe; requests whose lexicon has a symbol outside Kokoro's alphabet ('9'), an empty "
    "word, empty phonemes, a word with a space, an entry of another shape, a word of 65 characters, and "
    "max_lexicon_entries + 1 words; an inline form with the symbol '9'; the message lexicon with the "
    "symbol '9'; then a valid request",
    expectation="each is refused with invalid_lexicon naming its request (no bracket); the lexicon message "
    "too; the valid request completes: the session goes on; a server that does not list lexicon is "
    "UNIMPLEMENTED",
)
def test_bad_pronunciations_are_refused_and_the_session_goes_on(conf: Probe) -> None:
    async def scenario() -> tuple[dict[str, object], dict[str, object], Answer]:
        async with conf.session("bad-lexicon") as s:
            voice = await _offer(s)
            offer = await ask(s, "lex-limits")
            most = int((offer.limit("max_lexicon_entries") if offer else None) or 256)
            cases = {name: entries for name, (entries, _) in BAD.items()}
            cases["long-word"] = {"K" * 65: "kˈOkəɹO"}
            cases["too-many"] = {f"w{i}": "kˈOkəɹO" for i in range(most + 1)}
            sent = {}
            for name, entries in cases.items():
                sent[name] = len(s.observer.errors)
                await s.request(TEXT, request_id=f"bad-{name}", voice=voice, lexicon=entries)
            sent["inline"] = len(s.observer.errors)
            await s.request("Say [Kokoro](/kˈOkə9O/) now.", request_id="bad-inline", voice=voice)
            sent["message"] = len(s.observer.errors)
            await s.send(b'{"type": "lexicon", "request_id": "bad-message", "lexicon": {"Kokoro": "9"}}')
            await s.request(TEXT, request_id="after", voice=voice)
            after = await s.answer("after")
            refusals = {name: s.refusal(f"bad-{name}", since) for name, since in sent.items()}
            return refusals, {rid: a for rid, a in s.answers.items() if rid.startswith("bad-")}, after

    refusals, answered, after = conf.run(scenario())
    problems = [
        f"{name}: {'no refusal' if error is None else error.code}"  # type: ignore[attr-defined]
        for name, error in refusals.items()
        if error is None or error.code != "invalid_lexicon"  # type: ignore[attr-defined]
    ]
    problems += [f"{rid} was answered (a bracket), not refused" for rid in answered if rid != "bad-message"]
    assert after.complete is not None and after.complete.status in ("completed", None), (
        "the request after the refusals did not complete: the session did not go on"
    )
    assert not problems, "; ".join(problems)
