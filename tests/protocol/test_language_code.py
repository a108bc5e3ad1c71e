"""``protocol.voices.language_code``: the one place a language tag becomes a Kokoro language, asked by the
text front-end's normalization, sentence rules and segmenter alike (ARCHITECTURE.md, "a tenth language")."""

from __future__ import annotations

import pytest

from protocol.voices import LANGUAGES, language_code
from speech.chunker import sentence_language
from speech.normalization import normalize_text
from speech.segmenter import cuts

TAGS = {
    "a": "a",
    "A": "a",
    "en": "a",
    "en-US": "a",
    "en_AU": "a",
    "en-GB": "b",
    "en-UK": "b",
    "b": "b",
    "es-MX": "e",
    "fr-CA": "f",
    "hi-IN": "h",
    "it": "i",
    "ja-JP": "j",
    "pt": "p",
    "pt_br": "p",
    "zh": "z",
    "zh-TW": "z",
    "cmn": "z",
    " j ": "j",
    "Brazilian Portuguese": "p",
    "de": "",
    "de-DE": "",
    "": "",
    "x-klingon": "",
}


@pytest.mark.parametrize(("tag", "code"), TAGS.items())
def test_a_tag_names_its_kokoro_language(tag: str, code: str):
    assert language_code(tag) == code


def test_every_language_is_named_by_its_code_tag_and_aliases():
    for code, language in LANGUAGES.items():
        assert {language_code(name) for name in (code, language.tag, *language.aliases)} == {code}


def test_a_non_string_is_a_type_error():
    with pytest.raises(TypeError):
        language_code(None)  # type: ignore[arg-type]


def test_the_front_end_reads_tags_as_language_code_does():
    """Normalization, sentence rules and the segmenter agree on a tag they once each read in their own
    table ("en-UK" was British to normalization and American to the segmenter)."""
    assert normalize_text("It costs £5.", "en-UK") == normalize_text("It costs £5.", "b")
    assert sentence_language("en-UK") == sentence_language("b") == "en"
    assert sentence_language("zh-TW") == "zh" and sentence_language("de-AT") == "de"
    sentence = "Well, the colour of the sky, which we saw at dawn, was grey and then blue."
    assert cuts(sentence, "EN-uk") == cuts(sentence, "b") != cuts(sentence, "x-klingon")
