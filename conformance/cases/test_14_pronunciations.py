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

import json

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


async def _offer(session: ObservedStream, *also: str) -> str:
    """``describe``; the English voice to speak in. UNIMPLEMENTED without describe, ``lexicon`` (or a feature
    of ``also``) or English."""
    offer = await ask(session, "lex-caps")
    require_features(None if offer is None else offer.features, "lexicon", *also)
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
    requirements=("R14.3-2", "R4.5-1a", "R4.1-20", "R4.5-3"),
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
    requirements=("R14.3-1", "R9.1-1a", "R4.5-2a", "R4.5-2c", "R10-2", "R4.1-5v"),
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


OWN = "kˈOkəɹO"
"""A request's own entry for "Kokoro": about the word's own length, far shorter than :data:`LONG`."""


def _grew(plain: Answer, fixed: Answer, label: str) -> list[str]:
    """What is wrong when ``fixed`` should speak 'Kokoro' with :data:`LONG` (``plain``: without)."""
    return _compare(plain, fixed, label, changed=WORD, same=(LONGER,))


def _kept(plain: Answer, fixed: Answer, label: str) -> list[str]:
    """What is wrong when ``fixed`` should speak 'Kokoro' as long as ``plain`` does (within :data:`SAME_S`;
    the audio's length within :data:`GREW_S` where English has no word timings)."""
    if not plain.complete.words or not fixed.complete.words:
        moved = abs(fixed.duration_s - plain.duration_s)
        return [] if moved < GREW_S else [f"{label}: the audio changed by {moved:.2f} s"]
    if len(fixed.complete.words) != len(plain.complete.words):
        return [f"{label}: {len(fixed.complete.words)} words, not {len(plain.complete.words)} as without"]
    moved = abs(_length(fixed, WORD) - _length(plain, WORD))
    return [] if moved <= SAME_S else [f"{label}: 'Kokoro' changed by {moved:.2f} s"]


def _session_lexicon(entries: dict[str, object], request_id: str | None = None) -> bytes:
    """A ``lexicon`` message (§4.5) with ``entries`` as given (valid or not) and ``request_id`` when set."""
    message: dict[str, object] = {"type": "lexicon", "lexicon": entries}
    if request_id is not None:
        message["request_id"] = request_id
    return json.dumps(message, ensure_ascii=False).encode()


@case(
    "4.5.1",
    "§4.5",
    Level.MUST,
    requirements=("R4.5-1c",),
    requirement="the request's own `lexicon` entries taking precedence word by word",
    description=f'describe; {TEXT!r} in English without a lexicon; the message lexicon {{"Kokoro": LONG}}; '
    f'then the text with the request lexicon {{"Kokoro": "{OWN}"}}, and with the request lexicon '
    '{"Tokyo": ...} (a word the text lacks)',
    expectation="with its own entry for 'Kokoro' the request speaks it as without a lexicon (the request's "
    f"entry wins), with its entry for another word 'Kokoro' lasts {GREW_S} s longer (the session's entry "
    "still applies to every word the request's lexicon does not name); a server that does not list lexicon "
    "is UNIMPLEMENTED",
)
def test_a_request_entry_wins_over_the_session_entry_word_by_word(conf: Probe) -> None:
    async def scenario() -> dict[str, Answer]:
        async with conf.session("lexicon-precedence") as s:
            voice = await _offer(s)
            await s.request(TEXT, request_id="pr-plain", voice=voice)
            await s.send(_session_lexicon({"Kokoro": LONG}))
            await s.request(TEXT, request_id="pr-own", voice=voice, lexicon={"Kokoro": OWN})
            await s.request(TEXT, request_id="pr-other", voice=voice, lexicon={"Tokyo": "tˈOkiO"})
            return {rid: await s.answer(rid) for rid in ("pr-plain", "pr-own", "pr-other")}

    answers = conf.run(scenario())
    plain = answers["pr-plain"]
    problems = _kept(plain, answers["pr-own"], "the request's own entry under the session's")
    problems += _grew(plain, answers["pr-other"], "the session entry beside a request entry for another word")
    assert not problems, "; ".join(problems)


FILLER = " ".join([TEXT] * 3)
"""Three sentences: the request that is active while the lexicon message arrives."""


@case(
    "4.5.2",
    "§4.5",
    Level.MUST,
    requirements=("R4.5-1d",),
    requirement="MUST NOT apply it to a request accepted before",
    description=f"describe; {TEXT!r} in English (the reference), {FILLER!r}, and, once the second is active "
    f'(its synthesis_start read), {TEXT!r} again (queued behind it), then the message lexicon {{"Kokoro": '
    f"LONG}}, then {TEXT!r} a last time",
    expectation="the lexicon message is sent while the second request is active and the third queued; "
    "neither speaks 'Kokoro' with the entry (each occurrence as long as in the reference, within "
    f"{SAME_S} s); the last request does ({GREW_S} s longer); a server that does not list lexicon is "
    "UNIMPLEMENTED",
)
def test_the_session_lexicon_spares_requests_accepted_before_it(conf: Probe) -> None:
    async def scenario() -> tuple[dict[str, Answer], bool]:
        async with conf.session("lexicon-before") as s:
            voice = await _offer(s)
            await s.request(TEXT, request_id="bf-plain", voice=voice)
            await s.request(FILLER, request_id="bf-active", voice=voice)
            await s.started("bf-active")
            await s.request(TEXT, request_id="bf-queued", voice=voice)
            await s.send(_session_lexicon({"Kokoro": LONG}))
            # Driven, not left to chance: the queued request cannot start before bf-active completes.
            driven = not s.observer.completed("bf-active") and "bf-queued" not in s.observer.answers
            await s.request(TEXT, request_id="bf-after", voice=voice)
            ids = ("bf-plain", "bf-active", "bf-queued", "bf-after")
            return {rid: await s.answer(rid) for rid in ids}, driven

    answers, driven = conf.run(scenario())
    conf.observe(sent_while_active_and_queued=driven)
    plain = answers["bf-plain"]
    problems = _kept(plain, answers["bf-queued"], "a request queued when the lexicon arrived")
    active = answers["bf-active"]
    if plain.complete.words and active.complete.words:
        longest = _length(plain, WORD) + SAME_S
        spoken = [w for w in active.complete.words if w.word.strip(_PUNCTUATION) == "Kokoro"]
        problems += [
            f"the request active when the lexicon arrived: 'Kokoro' lasts {w.end_s - w.start_s:.2f} s"
            for w in spoken
            if w.end_s - w.start_s > longest
        ]
    problems += _grew(plain, answers["bf-after"], "the request accepted after the lexicon")
    assert not problems, "; ".join(problems)


@case(
    "4.5.3",
    "§4.5",
    Level.MUST,
    requirements=("R4.5-1b",),
    requirement="every utterance it accepts after it as well",
    description=f'describe; {TEXT!r} in English without a lexicon; the message lexicon {{"Kokoro": LONG}}; '
    f"then an utterance whose one fragment is {TEXT!r}, ended",
    expectation=f"the utterance speaks 'Kokoro' {GREW_S} s longer than the request and 'Kokoros' as long; a "
    "server that does not list lexicon and utterance is UNIMPLEMENTED",
)
def test_the_session_lexicon_reaches_utterances(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, Answer]:
        async with conf.session("lexicon-utterance") as s:
            voice = await _offer(s, "utterance")
            await s.request(TEXT, request_id="ut-plain", voice=voice)
            await s.send(_session_lexicon({"Kokoro": LONG}))
            await s.utterance("ut-lexicon", voice=voice)
            await s.fragment("append", "ut-lexicon", TEXT)
            await s.fragment("end", "ut-lexicon")
            return await s.answer("ut-plain"), await s.answer("ut-lexicon")

    plain, spoken = conf.run(scenario())
    problems = _grew(plain, spoken, "an utterance accepted after the lexicon")
    assert not problems, "; ".join(problems)


@case(
    "4.5.4",
    "§4.5",
    Level.MUST,
    requirements=("R4.5-2b",),
    requirement="the session's lexicon stays as it was",
    description=f'describe; {TEXT!r} in English without a lexicon; the message lexicon {{"Kokoro": LONG}}; '
    'then the message lexicon {"Kokoro": "9"} (a symbol outside the alphabet) and {"": ...} (an empty word); '
    f"then {TEXT!r} again",
    expectation="both bad messages are refused with invalid_lexicon; the last request still speaks 'Kokoro' "
    f"{GREW_S} s longer: the refused messages changed nothing; a server that does not list lexicon is "
    "UNIMPLEMENTED",
)
def test_a_refused_lexicon_message_keeps_the_session_lexicon(conf: Probe) -> None:
    async def scenario() -> tuple[Answer, Answer, list[object]]:
        async with conf.session("lexicon-kept") as s:
            voice = await _offer(s)
            await s.request(TEXT, request_id="kp-plain", voice=voice)
            await s.send(_session_lexicon({"Kokoro": LONG}))
            since = len(s.observer.errors)
            await s.send(_session_lexicon({"Kokoro": "9"}, "kp-bad-symbol"))
            await s.send(_session_lexicon({"": OWN}, "kp-bad-word"))
            await s.request(TEXT, request_id="kp-after", voice=voice)
            plain, after = await s.answer("kp-plain"), await s.answer("kp-after")
            return plain, after, [s.refusal(rid, since) for rid in ("kp-bad-symbol", "kp-bad-word")]

    plain, after, refusals = conf.run(scenario())
    codes = [None if e is None else e.code for e in refusals]  # type: ignore[attr-defined]
    assert codes == ["invalid_lexicon", "invalid_lexicon"], f"the bad lexicon messages were answered {codes}"
    problems = _grew(plain, after, "after two refused lexicon messages")
    assert not problems, "; ".join(problems)


@case(
    "9.1.100",  # hand-written: the bad-input rows number 9.1.1 up
    "§9.1",
    Level.SHOULD,
    requirements=("R9.1-1b",),
    requirement="the frame's `message` SHOULD name the entry at fault",
    description="describe; requests whose lexicon has a symbol outside Kokoro's alphabet, empty phonemes, a "
    "word with a space and an entry of another shape",
    expectation="each is refused with invalid_lexicon whose message names the word of the entry at fault; a "
    "server that does not list lexicon is UNIMPLEMENTED",
)
def test_an_invalid_lexicon_message_names_the_entry(conf: Probe) -> None:
    named = {name: (entries, word) for name, (entries, word) in BAD.items() if word is not None}

    async def scenario() -> dict[str, object]:
        async with conf.session("lexicon-named") as s:
            voice = await _offer(s)
            sent = {}
            for name, (entries, _) in named.items():
                sent[name] = len(s.observer.errors)
                await s.request(TEXT, request_id=f"nm-{name}", voice=voice, lexicon=entries)
            await s.request(TEXT, request_id="nm-after", voice=voice)
            await s.answer("nm-after")
            return {name: s.refusal(f"nm-{name}", since) for name, since in sent.items()}

    refusals = conf.run(scenario())
    problems = []
    for name, error in refusals.items():
        word = named[name][1]
        if error is None or error.code != "invalid_lexicon":  # type: ignore[attr-defined]
            problems.append(f"{name}: {'no refusal' if error is None else error.code}")  # type: ignore[attr-defined]
        elif word not in error.message:  # type: ignore[attr-defined]
            problems.append(f"{name}: the message {error.message!r} does not name {word!r}")  # type: ignore[attr-defined]
    assert not problems, "; ".join(problems)
