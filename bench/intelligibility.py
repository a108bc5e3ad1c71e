"""Benchmark 12: round-trip intelligibility: the server's speech heard back by Whisper-base, per language.

Every sentence of :data:`SENTENCES` (ten a language, everyday text with numbers, dates, currency and
abbreviations) goes through what the server does with a request's text: the text front-end
(:func:`speech.frontend.speech_pieces`, in the voice's language), then the ONNX backend in this process
(the server's own backend on CPU, as the segmentation benchmark calls it). Each voice of :data:`VOICES`
(two a language where Kokoro has two) speaks it; the audio, resampled to 16 kHz, is transcribed by the
CTranslate2 build of multilingual Whisper-base (faster-whisper, int8 on CPU, beam 5, the language given,
no context carried between sentences). The model is the one ``python -m reference_server.assets fetch
--asr yes`` verifies (its sha256 is pinned in :data:`reference_server.assets.ASR_MODEL`).

Scoring (:func:`canonical`): both sides are brought to one spoken form before the error rates (jiwer) are
computed, so a figure counts what was heard, not how Whisper chose to spell it.

* Spaced scripts (English, Spanish, French, Italian, Portuguese, Hindi): the reference is what the server
  spoke (the front-end's output: ``$12.50`` is ``twelve dollars and fifty cents``); the transcript goes
  through the same normalizer (:func:`speech.normalization.normalize_text`), so Whisper's ``$12.50`` or
  ``12:30`` reads as the same words. Then both are NFKC, lower case, punctuation and symbols become
  spaces, whitespace collapsed. CER counts characters (spaces included), WER words.
* Hindi: Whisper-base writes most Hindi speech in Urdu script (one spoken language, two scripts; Urdu
  leaves short vowels unwritten), so both sides are compared as consonant skeletons of their ASCII
  transliteration (anyascii; :func:`_hindustani_skeleton`). Figures stay figures on our side (eSpeak reads
  them); Whisper writing one as a word costs that word.
* Japanese: both sides become their katakana reading (MeCab with unidic-lite, Arabic figures written as
  kanji numerals first), so 八時 and 8時 and はちじ are one thing; CER counts kana.
* Mandarin: both sides become pinyin syllables with tone numbers (pypinyin, figures as numerals first),
  so a simplified or traditional character, and a figure or its numeral, are one thing; the error rate
  counts syllables (one a character, so it is a CER).
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bench.record import Result

__all__ = [
    "NAME",
    "SENTENCES",
    "SMOKE",
    "TITLE",
    "VOICES",
    "WHISPER_LANGUAGE",
    "Config",
    "Heard",
    "Listener",
    "canonical",
    "error_rates",
    "notes",
    "onnx_backend",
    "plot",
    "run",
    "speak",
    "tables",
]

NAME = "intelligibility"
TITLE = "12. Intelligibility: the server's speech heard back by Whisper-base, per language and voice"

SENTENCES: dict[str, tuple[str, ...]] = {
    "a": (
        "The meeting starts at 9:30 tomorrow morning.",
        "Dr. Lee paid $12.50 for two coffees.",
        "Please call me back before Friday.",
        "My flight leaves on March 3rd, 2025.",
        "The train was 15 minutes late again.",
        "We need 3 eggs, 2 cups of flour and some milk.",
        "Turn left after the bank on Main St.",
        "The temperature dropped to 5 degrees last night.",
        "She has lived here since 1998.",
        "Can you send the report by email?",
    ),
    "b": (
        "I paid £20 for the tickets.",
        "Mr. Brown lives at 42 Baker Street.",
        "The shop closes at half past five on Sundays.",
        "The match was on 14 May 2023.",
        "Could you put the kettle on, please?",
        "The bus to the city centre runs every 10 minutes.",
        "We walked 8 kilometres along the river.",
        "The NHS appointment is next Tuesday.",
        "It rained all weekend in Manchester.",
        "The flat costs £1,200 a month.",
    ),
    "e": (
        "El tren sale a las 8:15 de la mañana.",
        "La cena cuesta 25 euros por persona.",
        "Mi cumpleaños es el 12 de octubre.",
        "El Sr. García vive en Madrid.",
        "¿Dónde está la estación de autobuses?",
        "Compré 3 kilos de naranjas en el mercado.",
        "Hace mucho calor en verano.",
        "La reunión es el lunes a las 10.",
        "Mi hermana tiene 27 años.",
        "Necesito un médico, por favor.",
    ),
    "f": (
        "Le train part à 8 heures demain matin.",
        "Le repas coûte 25 euros par personne.",
        "Mon anniversaire est le 12 octobre.",
        "M. Dupont habite à Paris.",
        "Où se trouve la gare, s'il vous plaît ?",
        "J'ai acheté 3 kilos de pommes au marché.",
        "Il fait très chaud en été.",
        "La réunion est lundi à 10 heures.",
        "Ma sœur a 27 ans.",
        "Nous sommes arrivés le 14 juillet 2023.",
    ),
    "h": (
        "मैं कल सुबह 8 बजे दफ़्तर जाऊँगा।",
        "इस किताब की कीमत 250 रुपये है।",
        "मेरा जन्मदिन 12 अक्टूबर को है।",
        "डॉ. शर्मा दिल्ली में रहते हैं।",
        "रेलवे स्टेशन कहाँ है?",
        "आज बहुत गर्मी है।",
        "मेरी बहन 27 साल की है।",
        "हम सोमवार को मिलेंगे।",
        "मुझे एक कप चाय चाहिए।",
        "बाज़ार में 3 किलो आम खरीदे।",
    ),
    "i": (
        "Il treno parte alle 8 di mattina.",
        "La cena costa 25 euro a persona.",
        "Il mio compleanno è il 12 ottobre.",
        "Il dott. Rossi abita a Roma.",
        "Dov'è la stazione, per favore?",
        "Ho comprato 3 chili di arance al mercato.",
        "Fa molto caldo in estate.",
        "La riunione è lunedì alle 10.",
        "Mia sorella ha 27 anni.",
        "Ho pagato 12,50 euro per il pranzo.",
    ),
    "j": (
        "明日の朝8時に駅で会いましょう。",
        "このコーヒーは500円です。",
        "私の誕生日は10月12日です。",
        "田中さんは東京に住んでいます。",
        "駅はどこですか。",
        "今日はとても暑いですね。",
        "妹は27歳です。",
        "会議は月曜日の午後3時からです。",
        "りんごを3つ買いました。",
        "すみません、お水をください。",
    ),
    "p": (
        "O ônibus sai às 8 horas da manhã.",
        "O almoço custa R$ 25.",
        "Meu aniversário é dia 12 de outubro.",
        "O Sr. Silva mora em São Paulo.",
        "Onde fica a estação, por favor?",
        "Comprei 3 quilos de laranja na feira.",
        "Faz muito calor no verão.",
        "A reunião é na segunda-feira às 10 horas.",
        "Minha irmã tem 27 anos.",
        "Paguei R$ 12,50 pelo café.",
    ),
    "z": (
        "明天早上8点在车站见。",
        "这杯咖啡25元。",
        "我的生日是10月12日。",
        "王先生住在北京。",
        "请问火车站在哪里？",
        "今天天气很热。",
        "我妹妹今年27岁。",
        "会议在星期一下午3点开始。",
        "我买了3公斤苹果。",
        "服务员，请给我一杯水。",
    ),
}
"""Ten short everyday sentences per Kokoro language code, figures, dates, currency and abbreviations among
them, as a user would write them (the front-end turns them into words)."""

VOICES: dict[str, tuple[str, ...]] = {
    "a": ("af_heart", "am_michael"),
    "b": ("bf_emma", "bm_george"),
    "e": ("ef_dora", "em_alex"),
    "f": ("ff_siwis",),
    "h": ("hf_alpha", "hm_omega"),
    "i": ("if_sara", "im_nicola"),
    "j": ("jf_alpha", "jm_kumo"),
    "p": ("pf_dora", "pm_alex"),
    "z": ("zf_xiaoxiao", "zm_yunxi"),
}
"""Two voices a language (a female and a male one), one where Kokoro has one (French)."""

WHISPER_LANGUAGE = {
    "a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja", "p": "pt", "z": "zh",
}  # fmt: skip
"""The language Whisper is told for each Kokoro code."""

SPACED = frozenset("abefhip")
"""Languages whose words are spaced, so a WER is reported too."""


@dataclass(frozen=True)
class Config:
    """Attributes: the sentences and voices per Kokoro language code; Whisper's beam width."""

    sentences: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(SENTENCES))
    voices: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(VOICES))
    beam_size: int = 5


SMOKE = Config(
    sentences={code: SENTENCES[code][:1] for code in ("a", "j")},
    voices={"a": ("af_heart",), "j": ("jf_alpha",)},
)


# --- scoring ------------------------------------------------------------------------------------------

_SKELETON_FOLDS = str.maketrans({"f": "p", "q": "k", "z": "j", "x": "k"})


def _hindustani_skeleton(text: str) -> str:
    """Devanagari or Urdu script as a consonant skeleton: anyascii's transliteration, lower case, vowels,
    ``h``, ``y``, ``w``, ``v`` and marks dropped, nukta sounds folded onto their base (``f``→``p``,
    ``q``→``k``, ``z``→``j``). Whisper-base writes most Hindi speech in Urdu script, which leaves short
    vowels unwritten; the skeleton is what both scripts spell alike."""
    from anyascii import anyascii

    words = []
    for word in anyascii(text).lower().translate(_SKELETON_FOLDS).split():
        kept = "".join(ch for ch in word if ch.isalnum() and ch not in "aeiouhywv")
        if kept:
            words.append(kept)
    return " ".join(words)


_ENGLISH_DOTTED_TIME = re.compile(
    r"(?<![\d$£€.,])([01]?\d|2[0-3])\.([0-5]\d)(?![\d.,%])(?!\s*(?:dollar|pound|euro|cent|pence|percent))",
    re.IGNORECASE,
)
"""A time as British writing (and Whisper) puts it, ``9.30``: not an amount of money or a percentage."""


def _spaced_form(text: str) -> str:
    """NFKC, lower case, every punctuation or symbol character a space, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in text)
    return " ".join(text.split())


@cache
def _tagger() -> Any:
    import fugashi

    return fugashi.Tagger()


def _numerals(text: str) -> str:
    """Arabic figures as Chinese/Japanese numerals (``25`` → ``二十五``), by cn2an."""
    import cn2an

    return cn2an.transform(text, "an2cn") if re.search(r"\d", text) else text


def _katakana(text: str) -> str:
    """Hiragana → katakana (the reading MeCab gives is katakana)."""
    return "".join(chr(ord(ch) + 0x60) if "\u3041" <= ch <= "\u3096" else ch for ch in text)


def canonical(text: str, language: str, *, transcript: bool = False) -> str:
    """``text`` in the spoken form both sides of a comparison are scored in (module docstring).

    Args:
        text: a reference (what the server spoke) or what Whisper heard.
        language: a Kokoro code (``"a"`` … ``"z"``).
        transcript: ``text`` is Whisper's: in the spaced scripts it goes through the server's normalizer
            first, as the reference did, so figures and symbols become the same words.

    Returns:
        Spaced scripts: lower-case words single-spaced; Japanese: katakana, no spaces; Mandarin: pinyin
        syllables with tone numbers, single-spaced.
    """
    text = unicodedata.normalize("NFKC", text)
    if language == "j":
        pieces = []
        for word in _tagger()(_numerals(text)):
            if unicodedata.category(word.surface[:1] or " ")[0] in "PSZ":
                continue
            reading = getattr(word.feature, "kana", None) or word.surface
            pieces.append(_katakana(reading))
        return "".join(pieces)
    if language == "z":
        from pypinyin import Style, lazy_pinyin

        hanzi = "".join(ch for ch in _numerals(text) if "\u3400" <= ch <= "\u9fff")
        return " ".join(lazy_pinyin(hanzi, style=Style.TONE3, neutral_tone_with_five=True))
    if transcript:
        from speech.normalization import normalize_text

        if language in ("a", "b"):  # Whisper writes "9.30" for the time the server said as "nine thirty"
            text = _ENGLISH_DOTTED_TIME.sub(r"\1:\2", text)
        text = normalize_text(text, language)
    text = _spaced_form(text)
    return _hindustani_skeleton(text) if language == "h" else text


def error_rates(reference: str, heard: str, language: str) -> dict[str, float | None]:
    """``{"cer", "wer"}`` of ``heard`` against ``reference`` (both already :func:`canonical`), by jiwer.

    CER: character edits over the reference's characters (Mandarin: syllable edits over its syllables);
    WER: word edits over its words, only for spaced scripts (``None`` otherwise). An empty reference
    scores 0 against an empty transcript and 1 against anything else.
    """
    import jiwer

    if not reference:
        return {"cer": 0.0 if not heard else 1.0, "wer": None}
    if language == "z":
        cer = jiwer.wer(reference, heard) if heard else 1.0
        return {"cer": cer, "wer": None}
    cer = jiwer.cer(reference, heard) if heard else 1.0
    wer = (jiwer.wer(reference, heard) if heard else 1.0) if language in SPACED else None
    return {"cer": cer, "wer": wer}


# --- speaking and hearing -----------------------------------------------------------------------------


def speak(backend: Any, text: str, voice: str) -> tuple[str, Any]:
    """``text`` as the server speaks it in ``voice``: (the front-end's spoken text, float32 audio at 24 kHz).

    The text goes through :func:`speech.frontend.speech_pieces` in the voice's language, each piece
    through ``backend.synthesize`` (a loaded :class:`reference_server.backends.base.Backend`), as a request's
    text does in the server (§14.2).
    """
    import numpy as np

    from protocol.voices import Voice
    from speech.frontend import speech_pieces

    spoken, audio = [], []
    for piece in speech_pieces(text, Voice.parse(voice).code):
        spoken.append(piece.text)
        audio += [segment.audio for segment in backend.synthesize(piece.text, voice, 1.0)]
    return " ".join(spoken), (np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32))


@dataclass(frozen=True, slots=True)
class Heard:
    """One sentence spoken and heard: the text, what the server spoke, what Whisper wrote, the scores."""

    language: str
    voice: str
    text: str
    spoken: str
    heard: str
    reference_form: str
    heard_form: str
    cer: float
    wer: float | None
    audio_s: float


class Listener:
    """Whisper-base on CPU (faster-whisper, int8), loaded once from the verified asset cache.

    Args:
        model_dir: the model folder; default :func:`reference_server.assets.locate_asr` (no network).
        beam_size: Whisper's beam width.
        cpu_threads: CTranslate2's threads (0: its default).

    Raises:
        ImportError: faster-whisper is not installed (the ``quality`` extra).
        reference_server.assets.AssetError: the model is not fetched or not the pinned one.
    """

    def __init__(self, model_dir: Path | None = None, *, beam_size: int = 5, cpu_threads: int = 0) -> None:
        from faster_whisper import WhisperModel

        from reference_server import assets

        path = model_dir if model_dir is not None else assets.locate_asr()
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=cpu_threads)
        self.beam_size = beam_size

    def hear(self, audio: Any, sample_rate: int, language: str) -> str:
        """What Whisper hears in ``audio`` (float32 mono) told the Kokoro ``language``; stripped text."""
        import numpy as np
        import soxr

        pcm = soxr.resample(np.asarray(audio, dtype=np.float32), sample_rate, 16_000).astype(np.float32)
        segments, _ = self.model.transcribe(
            pcm,
            language=WHISPER_LANGUAGE[language],
            beam_size=self.beam_size,
            temperature=0.0,
            condition_on_previous_text=False,
            without_timestamps=True,
            vad_filter=False,
        )
        return " ".join(segment.text.strip() for segment in segments).strip()

    def round_trip(self, backend: Any, text: str, voice: str, *, expected: str | None = None) -> Heard:
        """Speak ``text`` in ``voice`` (:func:`speak`), hear it, score it (:func:`canonical`,
        :func:`error_rates`).

        Args:
            expected: what ``text`` should be spoken as, the reference scored against; default what the
                front-end made of it. A gate pins it, so that a front-end that starts saying something
                else is measured against what it used to say rather than against itself.
        """
        from protocol.voices import Voice

        language = Voice.parse(voice).code
        spoken, audio = speak(backend, text, voice)
        heard = self.hear(audio, backend.sample_rate, language)
        reference_form = canonical(spoken if expected is None else expected, language)
        heard_form = canonical(heard, language, transcript=True)
        rates = error_rates(reference_form, heard_form, language)
        return Heard(
            language,
            voice,
            text,
            spoken,
            heard,
            reference_form,
            heard_form,
            float(rates["cer"] or 0.0),
            rates["wer"],
            len(audio) / backend.sample_rate,
        )


def onnx_backend(languages: Iterable[str] | None = None) -> Any:
    """The reference server's ONNX backend, loaded and warmed up in this process (verified assets)."""
    from reference_server.backends import create_backend

    backend = create_backend("onnx")
    backend.load()
    backend.warm_up()
    return backend


# --- the benchmark ------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


async def run(context: Any, config: Config = Config()) -> Result:
    """Speak and hear every sentence in every voice (module docstring); figures per language and voice."""
    import asyncio

    from protocol.voices import LANGUAGE_NAMES

    result = Result(NAME, TITLE, config=asdict(config))
    try:
        listener = await asyncio.to_thread(Listener, beam_size=config.beam_size)
    except ImportError as error:
        result.notes.append(f"Not run: faster-whisper is not installed ({error}); `make test` installs it.")
        return result
    backend = await asyncio.to_thread(onnx_backend)
    for language, sentences in config.sentences.items():
        for voice in config.voices[language]:
            for text in sentences:
                heard = await asyncio.to_thread(listener.round_trip, backend, text, voice)
                result.trials.append(asdict(heard))
            cers = [t["cer"] for t in result.trials if t["voice"] == voice]
            context.log(f"  {LANGUAGE_NAMES.get(language, language)} {voice}: median CER {_median(cers)}")
    figures: dict[str, Any] = {"languages": {}, "voices": {}}
    for language in config.sentences:
        trials = [t for t in result.trials if t["language"] == language]
        wers = [t["wer"] for t in trials if t["wer"] is not None]
        figures["languages"][language] = {
            "n": len(trials),
            "median_cer": _median([t["cer"] for t in trials]),
            "mean_cer": round(statistics.fmean(t["cer"] for t in trials), 4) if trials else None,
            "max_cer": round(max((t["cer"] for t in trials), default=0.0), 4),
            "median_wer": _median(wers),
        }
        for voice in config.voices[language]:
            mine = [t for t in trials if t["voice"] == voice]
            wers = [t["wer"] for t in mine if t["wer"] is not None]
            figures["voices"][voice] = {
                "n": len(mine),
                "median_cer": _median([t["cer"] for t in mine]),
                "mean_cer": round(statistics.fmean(t["cer"] for t in mine), 4) if mine else None,
                "median_wer": _median(wers),
            }
    result.figures = figures
    return result


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Per language, per voice, then the worst sentences with what Whisper heard."""
    from protocol.voices import LANGUAGE_NAMES

    figures = result.get("figures") or {}
    if not figures:
        return []
    languages = [
        [
            f"{LANGUAGE_NAMES.get(code, code)} (`{code}`)",
            str(f["n"]),
            _pct(f["median_cer"]),
            _pct(f["mean_cer"]),
            _pct(f["max_cer"]),
            _pct(f["median_wer"]),
        ]
        for code, f in figures["languages"].items()
    ]
    voices = [
        [f"`{voice}`", str(f["n"]), _pct(f["median_cer"]), _pct(f["mean_cer"]), _pct(f["median_wer"])]
        for voice, f in figures["voices"].items()
    ]
    worst = sorted(result["trials"], key=lambda t: -t["cer"])[:15]
    cases = [
        [f"`{t['voice']}`", t["text"], t["heard"] or "(nothing)", _pct(t["cer"])]
        for t in worst
        if t["cer"] > 0
    ]
    return [
        (["language", "sentences × voices", "median CER", "mean CER", "worst CER", "median WER"], languages),
        (["voice", "sentences", "median CER", "mean CER", "median WER"], voices),
        (["voice", "written", "heard by Whisper-base", "CER"], cases),
    ]


def notes(result: dict[str, Any]) -> list[str]:
    """How to read the figures; which language is worst and why."""
    from protocol.voices import LANGUAGE_NAMES

    languages = (result.get("figures") or {}).get("languages") or {}
    found = []
    if languages:

        def badness(code: str) -> tuple[float, float]:
            return (languages[code]["median_cer"] or 0.0, languages[code]["mean_cer"] or 0.0)

        worst = max(languages, key=badness)
        found.append(
            f"Worst language: {LANGUAGE_NAMES.get(worst, worst)}, median CER "
            f"{_pct(languages[worst]['median_cer'])}. "
            + (
                "Whisper-base, not the speech: it writes most Hindi speech in Urdu script (scored through "
                "consonant skeletons, which cost the vowels Urdu leaves unwritten), spells figures as words "
                '(बारह for 12), and answers short sentences in English (आज बहुत गर्मी है → "Today is very '
                'hot.", रेलवे स्टेशन कहाँ है? → "Railway station."): a translation, so the speech was '
                "understood. The gate's Hindi band is the widest for this reason."
                if worst == "h"
                else "See the worst cases above for what was heard."
            )
        )
    return [
        *found,
        "CER and WER by jiwer on a canonical spoken form (module docstring): spaced scripts lower-cased, "
        "punctuation dropped and Whisper's figures read by the server's own normalizer, so `$12.50` and "
        "`twelve dollars and fifty cents` agree; Japanese as katakana readings; Mandarin as pinyin syllables "
        "with tones; Hindi and Urdu script as consonant skeletons. A CER still mixes our errors with "
        "Whisper-base's (74 M parameters): Japanese and Mandarin homophones in other characters (コーヒー "
        "heard as 工費, 会议 as 回憶), Whisper's own abbreviations (`3 kg` for `tre chili`, US spellings for "
        "`kilometres`) and word splits (`Mi assore la` for `Mia sorella`) count as errors.",
        "Found and fixed by this benchmark (the front-end, speech/normalization.py): an amount with cents "
        "before a currency's name was read as a decimal (`12,50 euro` spoken `dodici virgola cinquanta "
        "euro`, `12.50 dollars` `twelve point five zero dollars`), `Main St.` was spoken `main saint` "
        "(heard `main scent`), Italian `dott.` and Spanish `Sr.` were left to the G2P. Before the fix "
        "Italian's median CER was 5.7 %, and those sentences 24.5 % and 5.7-8.6 %.",
        "The gate in `make test` (tests/bench/test_intelligibility.py) speaks two of these sentences a "
        "language against their pinned spoken form and holds each language's mean CER to a band set from "
        "these figures.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Median and mean CER per voice."""
    from bench.plots import grouped_bars

    voices = (result.get("figures") or {}).get("voices") or {}
    if not voices:
        return
    grouped_bars(
        path,
        "CER (%)",
        [voice.replace("_", "\n", 1) for voice in voices],
        {
            "median CER": [100 * (f["median_cer"] or 0.0) for f in voices.values()],
            "mean CER": [100 * (f["mean_cer"] or 0.0) for f in voices.values()],
        },
        title="Whisper-base's character error rate on the server's speech, per voice",
    )
