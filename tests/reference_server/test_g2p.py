"""Per-language G2P (reference_server/backends/g2p.py, PROTOCOL.md §14.1): each language's phonemes are its
library's, words line up with them, long text is cut under Kokoro's token limit, and the pinned battery
does not drift. No model is loaded here."""

from __future__ import annotations

import json
import re

import pytest
from g2p_battery import BATTERY, NATIVE, key, load, voice_for

from reference_server import assets
from reference_server.backends.base import FRAME_SAMPLES, SAMPLE_RATE, word_timings
from reference_server.backends.g2p import (
    ESPEAK_LANGUAGES,
    MAX_TOKENS,
    PAUSE_SYMBOLS,
    PhonemeSegment,
    Phonemizer,
    WordSpan,
    available_languages,
    create_g2p,
    fit,
)

VOCAB = json.loads(assets.CONFIG_PATH.read_text(encoding="utf-8"))["vocab"]
TONES = frozenset("→↓↗↘")


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer(VOCAB)


def kept(phonemes: str) -> str:
    return "".join(symbol for symbol in phonemes if symbol in VOCAB)


def test_every_language_is_installed_here():
    """The server extra installs every language's G2P; a missing one would silently drop its voices."""
    assert available_languages() == set("abefhijpz")


def test_the_battery_does_not_drift(phonemizer):
    """Issue 17: the same texts give the same phonemes in every install (pinned in g2p_battery.json)."""
    pinned = load()
    assert len(pinned) == len(BATTERY)
    for name, text in BATTERY:
        voice = voice_for(name)
        got = [segment.phonemes for segment in phonemizer.segments(text, voice)]
        assert got == pinned[key(voice, text)], (voice, text)


@pytest.mark.parametrize("code", sorted("efhip"))
def test_espeak_languages_speak_what_kokoro_pipeline_would(phonemizer, code):
    """es, fr, hi, it, pt-br: the whole sentence through misaki's EspeakG2P, as KPipeline builds it."""
    from misaki.espeak import EspeakG2P

    library = EspeakG2P(language=ESPEAK_LANGUAGES[code])
    for name, text in BATTERY:
        if name.split(":")[0] != code:
            continue
        for segment in phonemizer.segments(text, voice_for(name)):
            if len(library(segment.text)[0].split()) == len(segment.text.split()):
                assert segment.phonemes == kept(library(segment.text)[0])


def test_japanese_is_misaki_japanese_g2p_not_english(phonemizer):
    """JAG2P() (KPipeline's 'j') and our G2P give the same phonemes; kana are not read as Latin letters."""
    # misaki.ja imports pyopenjtalk (the `crosscheck` extra, which `make test` installs); we do not need it.
    from misaki.ja import JAG2P

    library = JAG2P()
    english = create_g2p("a", VOCAB)
    from misaki.cutlet import HEPBURN

    inventory = set("".join(HEPBURN.values())) | set("ːʔɴŋɲmn ") | PAUSE_SYMBOLS
    for text in ("こんにちは、お元気ですか。", "東京タワーに行きました！", "ちょっと待って"):
        (segment,) = phonemizer.segments(text, "jf_alpha")
        assert segment.phonemes == kept(library(text)[0])
        assert set(segment.phonemes) <= inventory, set(segment.phonemes) - inventory
        assert segment.phonemes != english.phonemize(text).phonemes
    (segment,) = phonemizer.segments("今日はいい天気ですね。", "jf_alpha")
    assert [w.text for w in segment.words] == ["今日", "は", "いい", "天気", "です", "ね"]
    assert [segment.phonemes[w.start : w.end] for w in segment.words] == [
        "kʲoː",
        "βa",
        "iː",
        "teŋkʲi",
        "desɨ",
        "ne",
    ]


def test_chinese_is_misaki_chinese_g2p_with_tones(phonemizer):
    from misaki.zh import ZHG2P

    library = ZHG2P(version=None)
    for text in ("你好，世界。", "今天天气很好。", "我在2024年学习中文。"):
        (segment,) = phonemizer.segments(text, "zm_yunxi")
        assert segment.phonemes == kept(library(text)[0])
        for word in segment.words:
            if re.fullmatch(r"[\u4e00-\u9fff]+", word.text):
                assert TONES & set(segment.phonemes[word.start : word.end]), word  # every word has tones
    (segment,) = phonemizer.segments("今天天气很好。", "zf_xiaobei")
    assert [w.text for w in segment.words] == ["今天天气", "很", "好"]  # jieba's words


@pytest.mark.parametrize("name_text", BATTERY, ids=[name for name, _ in BATTERY])
def test_words_line_up_with_the_phonemes(phonemizer, name_text):
    name, text = name_text
    code = name.split(":")[0]
    segments = list(phonemizer.segments(text, voice_for(name)))
    for segment in segments:
        assert 0 < segment.token_count <= MAX_TOKENS and set(segment.phonemes) <= set(VOCAB)
        previous_end = 0
        for word in segment.words:
            assert previous_end <= word.start < word.end <= len(segment.phonemes), word
            spoken = segment.phonemes[word.start : word.end]
            assert spoken[0] not in PAUSE_SYMBOLS | {" "} and spoken[-1] not in PAUSE_SYMBOLS | {" "}
            previous_end = word.end
        if code in "abefhip":  # words are the text's whitespace-separated words, in order
            assert " ".join(w.text for w in segment.words) == " ".join(
                w for w in segment.text.split() if any(s not in PAUSE_SYMBOLS for s in w)
            )


def test_the_native_sentences_cover_every_language():
    assert set(NATIVE) == set("abefhijpz")


# --- the token guard --------------------------------------------------------------------------------------


def test_a_long_sentence_is_cut_between_words_at_a_clause_mark(phonemizer):
    clause = "the keeper climbed the stairs and trimmed the wick and polished the lens"
    text = ", ".join([clause] * 12) + "."  # one sentence, far over 510 tokens, no sentence end inside
    phonemizer.max_chunk_chars = 10_000  # let the chunker pass it whole: the guard must cut it
    try:
        segments = list(phonemizer.segments(text, "af_heart"))
    finally:
        phonemizer.max_chunk_chars = 120
    assert len(segments) >= 2
    assert all(0 < s.token_count <= MAX_TOKENS for s in segments)
    assert all(s.phonemes.rstrip().endswith(",") for s in segments[:-1])  # cut after a clause mark
    assert " ".join(s.text for s in segments).split() == text.split()
    words = [s.phonemes[w.start : w.end] for s in segments for w in s.words]
    assert len(words) == len(text.split())


def test_one_word_longer_than_the_limit_is_cut_inside():
    segment = PhonemeSegment("x", "a" * 600, (WordSpan("x", 0, 600),))
    head, tail = fit(segment)
    assert head.phonemes == "a" * MAX_TOKENS and tail.phonemes == "a" * 90
    assert head.words == (WordSpan("x", 0, MAX_TOKENS),) and tail.words == ()


# --- word timings from durations --------------------------------------------------------------------------


def test_word_timings_are_the_frames_of_each_words_symbols():
    # "ab, cd": tokens [start] a b , ␠ c d [end]
    segment = PhonemeSegment("ab, cd", "ab, cd", (WordSpan("ab,", 0, 2), WordSpan("cd", 4, 6)))
    durations = [10, 2, 3, 8, 1, 4, 5, 12]
    words = word_timings(segment, durations)
    assert FRAME_SAMPLES / SAMPLE_RATE == 0.025
    assert [(w.word, w.start_s, w.end_s) for w in words] == [
        ("ab,", 0.25, 0.375),  # frames 10 to 15: after the start token; the comma's pause is not the word's
        ("cd", 0.6, 0.825),  # frames 24 to 33 (exact values, no 0.6000000000000001)
    ]
    with pytest.raises(ValueError, match="durations"):
        word_timings(segment, durations[:-1])


def test_a_word_count_mismatch_is_handled_not_logged(phonemizer, caplog):
    """espeak-ng says "1500" in several words; EspeakG2P phonemizes word by word then, so each word keeps its
    phonemes (and timings), and phonemizer's "words count mismatch" warning is not passed on as noise."""
    text = "Il a payé 1500 euros pour 3 chats."
    with caplog.at_level("INFO"):
        [segment] = list(phonemizer.segments(text, "ff_siwis"))
    assert [w.text for w in segment.words] == text.split()
    assert all(w.start < w.end for w in segment.words[:-1])
    assert not [r for r in caplog.records if r.name.startswith("phonemizer")], caplog.text


def test_a_lazy_phonemizer_loads_a_language_when_a_text_first_needs_it(phonemizer):
    """``lazy=True`` (the mutant servers' tone backend): every language is served, none loaded until used,
    and a loaded language speaks as the eager phonemizer's does."""
    lazy = Phonemizer(VOCAB, "az", lazy=True)
    assert lazy.languages == {"a", "z"} and lazy.g2p == {}
    text = "The quick brown fox. It jumps."
    assert list(lazy.segments(text, "af_heart")) == list(phonemizer.segments(text, "af_heart"))
    assert set(lazy.g2p) == {"a"}
    with pytest.raises(KeyError):
        list(lazy.segments(text, "ef_dora"))  # Spanish is not served
    assert set(lazy.g2p) == {"a"}


def test_a_language_whose_libraries_are_missing_is_refused_at_once_lazy_or_not(monkeypatch):
    from reference_server.backends import g2p

    monkeypatch.setattr(g2p, "available_languages", lambda: frozenset("a"))
    monkeypatch.setitem(g2p._REQUIREMENTS, "z", ("no_such_module_for_chinese",))
    for lazy in (False, True):
        with pytest.raises(g2p.G2PUnavailableError, match="no_such_module_for_chinese"):
            Phonemizer(VOCAB, "az", lazy=lazy)
