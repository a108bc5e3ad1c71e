"""Pronunciations a user can fix (PROTOCOL.md §4.1, §4.5, §14.3): lexicons and misaki's inline form.

With real Kokoro-82M (onnx, and torch where installed): a lexicon word's phonemes are the entry's and every
other word's are what the G2P gives without the lexicon; the word stays one word of the timings, with its
text as written. English (espeak-ng word by word), Spanish (espeak-ng through misaki, the sentence whole)
and Japanese (misaki's Cutlet, inline only). Then the WebSocket route with the shipped tone backend (the
same G2P, tones for audio): the session's lexicon, the request's over it, refusals that leave the session
going.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from server_harness import run
from test_backends import backend, kokoro_assets, onnx_backend, torch_backend  # noqa: F401
from ws_conversation import open_session

from protocol.errors import ErrorCode
from protocol.lexicon import Lexicon, LexiconError, extract_inline, parse_lexicon
from reference_server.backends.tone import PHONEME_FRAMES, ToneBackend

KOKORO = "kˈOkəɹOkˈOkəɹO"  # long on purpose: the word's time must grow with it
FRAME_S = 0.025


def _lexicon(entries: dict) -> Lexicon:
    return Lexicon(parse_lexicon(entries, max_entries=16))


def _spoken(backend, text: str, voice: str, lexicon: Lexicon | None = None):  # noqa: F811
    segments = list(backend.synthesize(text, voice, 1.0, lexicon=lexicon))
    phonemes = " ".join(s.phonemes for s in segments)
    words = [w for s in segments for w in s.words]
    return phonemes, words


def _changed_only(plain: str, fixed: str, index: int, expected: str) -> None:
    """The phoneme strings differ in word ``index`` alone, which became ``expected``."""
    before, after = plain.split(), fixed.split()
    assert len(before) == len(after)
    assert after[index].strip(",.;") == expected
    assert [w for i, w in enumerate(before) if i != index] == [w for i, w in enumerate(after) if i != index]


@pytest.mark.parametrize(
    ("voice", "text", "index"),
    [("af_heart", "Please say Kokoro again, slowly.", 2), ("ef_dora", "Por favor di Kokoro otra vez.", 3)],
)
def test_a_lexicon_changes_the_word_and_nothing_else(backend, voice, text, index):  # noqa: F811
    plain, plain_words = _spoken(backend, text, voice)
    fixed, fixed_words = _spoken(backend, text, voice, _lexicon({"Kokoro": KOKORO}))
    _changed_only(plain, fixed, index, KOKORO)
    # One word each, the same words as written, in order; the fixed word lasts longer (more phonemes).
    assert [w.word for w in fixed_words] == [w.word for w in plain_words] == text.split()
    grew = (fixed_words[index].end_s - fixed_words[index].start_s) - (
        plain_words[index].end_s - plain_words[index].start_s
    )
    assert grew > 0.15
    for i, (a, b) in enumerate(zip(plain_words, fixed_words, strict=True)):
        if i != index:  # the other words keep their length within a few of Kokoro's frames
            assert abs((a.end_s - a.start_s) - (b.end_s - b.start_s)) <= 4 * FRAME_S, (a, b)


def test_a_lexicon_word_is_never_part_of_a_longer_word_and_matches_any_case(onnx_backend):  # noqa: F811
    text = "Kokoros and KOKORO, kokoro!"
    plain, _ = _spoken(onnx_backend, text, "af_heart")
    fixed, words = _spoken(onnx_backend, text, "af_heart", _lexicon({"Kokoro": KOKORO}))
    assert fixed.split()[0] == plain.split()[0]  # Kokoros: another word
    assert fixed.split()[2] == KOKORO + "," and fixed.split()[3] == KOKORO + "!"
    assert [w.word for w in words] == text.split()


def test_a_key_with_punctuation_matches_as_written(onnx_backend):  # noqa: F811
    fixed, words = _spoken(onnx_backend, "Ask Dr. Who.", "af_heart", _lexicon({"Dr.": "dˈɑktəɹ"}))
    assert fixed.split()[1] == "dˈɑktəɹ" and [w.word for w in words] == ["Ask", "Dr.", "Who."]


def test_a_respelling_is_read_by_the_languages_g2p(onnx_backend):  # noqa: F811
    fixed, words = _spoken(
        onnx_backend, "Our SQL server.", "af_heart", _lexicon({"SQL": {"respell": "sequel"}})
    )
    sequel, _ = _spoken(onnx_backend, "Our sequel server.", "af_heart")
    assert fixed == sequel
    assert [w.word for w in words] == ["Our", "SQL", "server."]


@pytest.mark.parametrize(
    ("voice", "text", "word", "phonemes"),
    [
        ("af_heart", "I [read](/ɹˈɛd/) it, and read it again.", "read", "ɹˈɛd"),
        ("ef_dora", "Ayer [leí](/lˈeji/) el libro.", "leí", "lˈeji"),
        ("jf_alpha", "今日は[東京](/tˈoːkjoː/)に行きます。", "東京", "tˈoːkjoː"),
        ("zf_xiaobei", "我喜欢[北京](/pˈekɪŋ/)的秋天。", "北京", "pˈekɪŋ"),
        ("ff_siwis", "Les [amis](/ɐmˈi/) arrivent.", "amis", "ɐmˈi"),
    ],
)
def test_an_inline_form_gives_its_one_occurrence_its_phonemes(onnx_backend, voice, text, word, phonemes):  # noqa: F811
    marked, inline = extract_inline(text, max_entries=4)
    fixed, words = _spoken(onnx_backend, marked, voice, Lexicon({}, inline))
    plain, plain_words = _spoken(onnx_backend, text.replace(f"[{word}](/{phonemes}/)", word), voice)
    assert phonemes in fixed and phonemes not in plain
    assert [w.word for w in words] == [w.word for w in plain_words]
    assert word in [w.word.strip(",.") for w in words]
    if voice == "af_heart":  # the second "read" keeps the G2P's reading
        assert fixed.split()[-3:] == plain.split()[-3:]
    if voice == "ff_siwis":  # the liaison into the word stays: "Les" is still said "lez"
        assert fixed.split()[0] == plain.split()[0] == "lez"


@pytest.mark.parametrize(
    ("entries", "fault"),
    [
        ({"": "a"}, "empty"),
        ({"Kokoro": "k0k0ro"}, "'0' (U+0030) not in Kokoro's phoneme alphabet"),
        ({"two words": "tu"}, "whitespace"),
        ({"SQL": {"respell": ""}}, "respelling is empty"),
        ({"SQL": {"say": "sequel"}}, "must be phonemes"),
        ({f"w{i}": "a" for i in range(17)}, "limit is 16"),
    ],
)
def test_bad_entries_are_refused_naming_them(entries, fault):
    with pytest.raises(LexiconError, match=re.escape(fault)):
        parse_lexicon(entries, max_entries=16)


# --- the WebSocket route, shipped tone backend (the same G2P) ------------------------------------------


@pytest.fixture(scope="module")
def tone():
    tones = ToneBackend(["a"], xrt=float("inf"))
    tones.load()
    return tones


def test_the_session_lexicon_and_the_requests_over_it_and_refusals_leave_the_session_going(serve, tone):
    server = serve(tone)
    text = "Say Kokoro and SQL."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            described = await conv.describe()
            plain = await conv.until_complete(await conv.request(text, request_id="plain"))
            await conv.send({"type": "lexicon", "lexicon": {"Kokoro": KOKORO}})
            session = await conv.until_complete(await conv.request(text, request_id="session"))
            both = await conv.until_complete(
                await conv.request(text, request_id="both", lexicon={"SQL": {"respell": "sequel"}})
            )
            await conv.send({"text": text, "request_id": "bad", "lexicon": {"SQL": "ʃ9"}})
            bad = await conv.until_error()
            await conv.send(json.dumps({"text": "Say [it](/ɪt/) [x](/1/).", "request_id": "bad2"}))
            bad_inline = await conv.until_error()
            await conv.send({"type": "lexicon", "lexicon": {}})
            cleared = await conv.until_complete(await conv.request(text, request_id="cleared"))
            return described, plain, session, both, bad, bad_inline, cleared

    described, plain, session, both, bad, bad_inline, cleared = run(scenario())
    assert "lexicon" in described.features and described.limits["max_lexicon_entries"] == 256

    def length(answer, index):
        word = answer.complete.words[index]
        return word.end_s - word.start_s

    assert [w.word for w in session.complete.words] == text.split() == [w.word for w in plain.complete.words]
    # The tone backend gives every phoneme PHONEME_FRAMES frames: the word lasts as its phonemes say.
    assert length(session, 1) == pytest.approx(len(KOKORO) * PHONEME_FRAMES * FRAME_S, abs=0.03)
    assert length(plain, 1) != pytest.approx(length(session, 1), abs=0.03)
    assert length(both, 1) == pytest.approx(length(session, 1), abs=1e-3)  # the session's entry stays
    assert length(both, 3) != pytest.approx(length(session, 3), abs=0.03)  # the request's own entry
    assert cleared.complete.words == plain.complete.words
    assert bad.code == ErrorCode.INVALID_LEXICON and bad.request_id == "bad" and "'SQL'" in bad.message
    assert (
        bad_inline.code == ErrorCode.INVALID_LEXICON and "inline pronunciation 2 ('x')" in bad_inline.message
    )


def test_an_utterance_takes_the_session_lexicon_and_its_own(serve, tone):
    server = serve(tone)

    async def scenario():
        async with open_session(server.ws_url) as conv:
            await conv.send({"type": "lexicon", "lexicon": {"Kokoro": KOKORO}})
            await conv.utterance("u1", text="Say Kokoro ", lexicon={"SQL": {"respell": "sequel"}})
            await conv.fragment("end", "u1", "and SQL.")
            return await conv.until_complete("u1")

    answer = run(scenario())
    words = answer.complete.words
    assert [w.word for w in words] == ["Say", "Kokoro", "and", "SQL."]
    kokoro_s = len(KOKORO) * PHONEME_FRAMES * FRAME_S
    assert words[1].end_s - words[1].start_s == pytest.approx(kokoro_s, abs=0.03)
    # The respelling is said as the G2P says "sequel" in the same place.
    (sequel,) = [w for s in tone.synthesize("and sequel.", "af_heart") for w in s.words][1:]
    assert words[3].end_s - words[3].start_s == pytest.approx(sequel.end_s - sequel.start_s, abs=1e-3)


def test_post_invocations_reads_a_lexicon_and_refuses_a_bad_one(serve, tone):
    server = serve(tone)
    url = f"{server.http_url}/invocations"
    body = {"text": "Say Kokoro.", "format": "pcm"}
    plain = httpx.post(url, json=body, timeout=30)
    fixed = httpx.post(url, json={**body, "lexicon": {"Kokoro": KOKORO}}, timeout=30)
    inline = httpx.post(url, json={**body, "text": f"Say [Kokoro](/{KOKORO}/)."}, timeout=30)
    assert plain.status_code == fixed.status_code == inline.status_code == 200
    assert len(fixed.content) > len(plain.content) + 0.2 * 48_000
    assert len(inline.content) == len(fixed.content)
    bad = httpx.post(url, json={**body, "lexicon": {"Kokoro": "k9"}}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_lexicon"


def test_marks_and_words_show_an_inline_forms_word_as_written(serve, tone):
    server = serve(tone)
    text = f"Say **[Kokoro](/{KOKORO}/)**, then $12."

    async def scenario():
        async with open_session(server.ws_url) as conv:
            return await conv.until_complete(await conv.request(text, request_id="m", marks=True))

    answer = run(scenario())
    spoken = " ".join(frame.text for frame, _ in answer.marks)
    assert spoken == "Say Kokoro, then twelve dollars."  # markdown and figures as ever, no marks left
    words = answer.complete.words
    assert [w.word for w in words] == ["Say", "Kokoro,", "then", "twelve", "dollars."]
    assert words[1].end_s - words[1].start_s == pytest.approx(
        len(KOKORO) * PHONEME_FRAMES * FRAME_S, abs=0.03
    )
