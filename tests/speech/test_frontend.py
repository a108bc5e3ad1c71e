"""Tests for speech.frontend: a battery of texts as language models write them, and its properties.

The battery (``BATTERY``) holds markdown answers in the nine Kokoro languages with the exact pieces a
listener should hear. Each is checked whole, one character at a time, in random fragments and in
word-piece fragments the way an LLM streams tokens: the pieces must be identical every time.
"""

from __future__ import annotations

import itertools
import random
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from speech.chunker import DEFAULT_MAX_CHUNK_CHARS
from speech.frontend import Piece, SpeechFrontend, speech_text
from speech.markdown import strip_markdown
from speech.normalization import normalize_text


def pieces(fragments: list[str], language: str, **kwargs) -> list[Piece]:
    frontend = SpeechFrontend(language, **kwargs)
    out = []
    for fragment in fragments:
        out += frontend.feed(fragment)
    return out + frontend.flush()


def random_fragments(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    cuts = (
        sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 40))))
        if len(text) > 1
        else []
    )
    return [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


def token_fragments(text: str, seed: int) -> list[str]:
    """Pieces of 1 to 6 characters that tend to end before a space, like an LLM's tokens."""
    rng = random.Random(seed)
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + rng.randint(1, 6))
        space = text.find(" ", start + 1, end + 1)
        end = space if space > 0 and rng.random() < 0.7 else end
        out.append(text[start:end])
        start = end
    return out


# (id, language, text, spoken pieces)
BATTERY = [
    # --- English (a) ---------------------------------------------------------------------------------------
    (
        "heading-paragraph",
        "a",
        "## Quick summary\nThe meeting moved to **Friday**. Bring your laptop!",
        ["Quick summary", "The meeting moved to Friday.", "Bring your laptop!"],
    ),
    (
        "nested-bullets",
        "a",
        "Here are the options:\n\n- **Option A:** cheaper, but slower.\n"
        "  - Needs a license\n- **Option B:** faster.",
        ["Here are the options:", "Option A: cheaper, but slower.", "Needs a license", "Option B: faster."],
    ),
    (
        "numbered-list",
        "a",
        "Steps:\n1. Open the app.\n2. Tap *Settings*.\n3. Choose `Reset`.",
        ["Steps:", "one. Open the app.", "two. Tap Settings.", "three. Choose Reset."],
    ),
    ("title-line", "a", "Title line\nBody text here.", ["Title line", "Body text here."]),
    (
        "abbreviations",
        "a",
        "Dr. Smith met Mrs. Jones in the U.S. capital. They talked, e.g. about pi (3.14).",
        [
            "Dr. Smith met Mrs. Jones in the U.S. capital.",
            "They talked, for example about pi (three point one four).",
        ],
    ),
    (
        "currency",
        "a",
        "The **Pro** plan costs $1,234.50 per year. The basic one is €5, or 5 € in Europe.",
        [
            "The Pro plan costs one thousand two hundred and thirty-four dollars and fifty cents per year.",
            "The basic one is five euros, or five euros in Europe.",
        ],
    ),
    (
        "time-date",
        "a",
        "The call is at 10:30 a.m. on 2024-03-15. Don't be late!",
        ["The call is at ten thirty a m on March fifteenth, twenty twenty-four.", "Don't be late!"],
    ),
    (
        "percentages",
        "a",
        "Revenue grew 12.5% year over year (up from 9%).",
        ["Revenue grew twelve point five percent year over year (up from nine percent)."],
    ),
    (
        "url-email",
        "a",
        "Visit https://docs.example.com/start or email help@example.com.",
        ["Visit docs dot example dot com slash start or email help at example dot com."],
    ),
    (
        "ellipses",
        "a",
        "Well... I'm not sure. Maybe… Let me check.",
        ["Well... I'm not sure.", "Maybe…", "Let me check."],
    ),
    (
        "speech-tags",
        "a",
        '"Are you ready?" she asked. "Almost," he replied. "Give me a minute."',
        ['"Are you ready?" she asked.', '"Almost," he replied.', '"Give me a minute."'],
    ),
    (
        "parenthesis-after-terminator",
        "a",
        "Sales rose. (Costs did too.) Profit fell.",
        ["Sales rose.", "(Costs did too.)", "Profit fell."],
    ),
    (
        "code-fence",
        "a",
        "Run this:\n\n```bash\npip install kokoro\n```\n\nThen restart.",
        ["Run this:", "Then restart."],
    ),
    (
        "code-span-link",
        "a",
        "Use the `--force` flag, as [the docs](https://x.io/docs) explain.",
        ["Use the --force flag, as the docs explain."],
    ),
    (
        "table",
        "a",
        "| Metric | Value |\n|---|---|\n| Latency | 250 ms |\n| Uptime | 99.9% |",
        [
            "Metric, Value",
            "Latency, two hundred and fifty milliseconds",
            "Uptime, ninety-nine point nine percent",
        ],
    ),
    ("block-quote", "a", "> **Tip:** Save often.\n> It helps.", ["Tip: Save often.", "It helps."]),
    (
        "emoji",
        "a",
        "Great news 🎉! Your order shipped 📦.\n✅ Paid\n✅ Packed",
        ["Great news !", "Your order shipped .", "Paid", "Packed"],
    ),
    (
        "bold-italic-punctuation",
        "a",
        "This is ***really*** important: don't skip it!",
        ["This is really important: don't skip it!"],
    ),
    (
        "heading-emoji-ordinal",
        "a",
        "### 🚀 Launch plan\nWe launch on March 3rd.",
        ["Launch plan", "We launch on March third."],
    ),
    (
        "grouped-number",
        "a",
        "About 1,500 people came, and 3 left early.",
        ["About one thousand five hundred people came, and three left early."],
    ),
    ("opening-hours", "a", "Open 9:00–17:00 daily.", ["Open nine o'clock to seventeen hundred daily."]),
    (
        "year-decade",
        "a",
        "In 1969, humans landed on the Moon. The 1970s followed.",
        ["In nineteen sixty-nine, humans landed on the Moon.", "The nineteen seventies followed."],
    ),
    (
        "phone",
        "a",
        "Call us at (555) 123-4567 today.",
        ["Call us at five five five, one two three, four five six seven today."],
    ),
    (
        "units",
        "a",
        "The trail is 5 km long and climbs 300 m; bring 2 L of water.",
        ["The trail is five kilometers long and climbs three hundred meters; bring two liters of water."],
    ),
    (
        "temperature",
        "a",
        "It's 20°C outside (68°F).",
        ["It's twenty degrees Celsius outside (sixty-eight degrees Fahrenheit)."],
    ),
    (
        "citations",
        "a",
        "The Earth is round [1]. The Moon is not cheese [2][3].",
        ["The Earth is round .", "The Moon is not cheese ."],
    ),
    ("exclamation-speech-tag", "a", '"Stop!" yelled the guard.', ['"Stop!" yelled the guard.']),
    (
        "image-link",
        "a",
        "See ![diagram](d.png) below, or read [this guide](https://a.b/c).",
        ["See diagram below, or read this guide."],
    ),
    (
        "versus-approx",
        "a",
        "Python vs. Rust: approx. 3x faster.",
        ["Python versus Rust: approximately 3x faster."],
    ),
    ("task-list", "a", "- [x] Write tests\n- [ ] Ship it", ["Write tests", "Ship it"]),
    ("setext-rule", "a", "Summary\n=======\nAll good.\n\n---\n\nBye.", ["Summary", "All good.", "Bye."]),
    ("html-break", "a", "Line one<br>Line two", ["Line one", "Line two"]),
    (
        "arithmetic",
        "a",
        "2 + 2 = 4, and 3 × 4 = 12.",
        ["two plus two equals four, and three times four equals twelve."],
    ),
    ("cents", "a", "$0.99 each, or $5 for ten.", ["ninety-nine cents each, or five dollars for ten."]),
    ("em-dash", "a", "**Note:** This is *important*—really.", ["Note: This is important—really."]),
    ("ellipsis-lowercase", "a", "I think... maybe? Let's see!!", ["I think... maybe?", "Let's see!!"]),
    (
        "us-quarter",
        "a",
        "The U.S. economy grew 2.1% in Q3. Analysts expected 1.9%.",
        ["The U.S. economy grew two point one percent in Q3.", "Analysts expected one point nine percent."],
    ),
    (
        "negative",
        "a",
        "Temperatures ranged from -5 to 10 degrees.",
        ["Temperatures ranged from minus five to ten degrees."],
    ),
    (
        "nested-numbered",
        "a",
        "1. **Install**\n   - Run `make install`\n   - Wait ~2 min\n2. **Test**",
        ["one. Install", "Run make install", "Wait about two minutes", "two. Test"],
    ),
    (
        "millions",
        "a",
        "The startup raised $2.5 million in 2023.",
        ["The startup raised two point five million dollars in twenty twenty-three."],
    ),
    (
        "sentence-after-link",
        "a",
        "Read [the guide](https://x.y/z). Then try it.",
        ["Read the guide.", "Then try it."],
    ),
    # --- British English (b) -------------------------------------------------------------------------------
    (
        "british-date",
        "b",
        "The meeting is on 03/04/2024 at 14:30.",
        ["The meeting is on the third of April, twenty twenty-four at fourteen thirty."],
    ),
    (
        "british-pounds",
        "b",
        "It costs £3.50, not £4.",
        ["It costs three pounds and fifty pence, not four pounds."],
    ),
    # --- Spanish (e) ---------------------------------------------------------------------------------------
    (
        "es-questions-price",
        "e",
        "## Resumen\n¿Qué tal? ¡Muy bien! El precio es 1.234,50 € (IVA incluido).",
        [
            "Resumen",
            "¿Qué tal?",
            "¡Muy bien!",
            "El precio es mil doscientos treinta y cuatro euros con cincuenta céntimos (IVA incluido).",
        ],
    ),
    (
        "es-dialogue",
        "e",
        "—¿Vienes? —preguntó María.\n—Sí, a las 10:30.",
        ["—¿Vienes? —preguntó María.", "—Sí, a las diez y treinta."],
    ),
    ("es-guillemets", "e", "«Es increíble», dijo. Luego se fue.", ["«Es increíble», dijo.", "Luego se fue."]),
    (
        "es-date-units",
        "e",
        "El Sr. García llegó el 15/03/2024. Pesaba 70 kg.",
        ["El señor García llegó el quince de marzo de dos mil veinticuatro.", "Pesaba setenta kilogramos."],
    ),
    (
        "es-bullets-percent",
        "e",
        "- **Ventaja:** es rápido.\n- **Desventaja:** cuesta 20 %.",
        ["Ventaja: es rápido.", "Desventaja: cuesta veinte por ciento."],
    ),
    (
        "es-url-abbreviation",
        "e",
        "Visita https://ejemplo.es/ayuda, p. ej. hoy.",
        ["Visita ejemplo punto es barra ayuda, por ejemplo hoy."],
    ),
    # --- French (f) ----------------------------------------------------------------------------------------
    (
        "fr-guillemets",
        "f",
        "# Bienvenue 👋\n« Bonjour ! » dit-elle. « Ça va ? » Oui, très bien.",
        ["Bienvenue", "« Bonjour ! » dit-elle.", "« Ça va ? »", "Oui, très bien."],
    ),
    (
        "fr-price-time",
        "f",
        "Le prix est de 1 234,50 € TTC. Rendez-vous à 10h30 !",
        [
            "Le prix est de mille deux cent trente-quatre euros et cinquante centimes TTC.",
            "Rendez-vous à dix heures trente !",
        ],
    ),
    (
        "fr-title-ordinal",
        "f",
        "M. Dupont arrive le 1er mars. Il reste 2 jours…",
        ["Monsieur Dupont arrive le premier mars.", "Il reste deux jours…"],
    ),
    (
        "fr-percent-year",
        "f",
        "La croissance atteint 3,5 % en 2023.",
        ["La croissance atteint trois virgule cinq pour cent en deux mille vingt-trois."],
    ),
    (
        "fr-numbered",
        "f",
        "1. **Ouvrez** l'application.\n2. Cliquez sur *Paramètres*.",
        ["un. Ouvrez l'application.", "deux. Cliquez sur Paramètres."],
    ),
    # --- Italian (i) ---------------------------------------------------------------------------------------
    (
        "it-dialogue-price",
        "i",
        "## Riepilogo\nCiao! Come stai? «Bene», rispose. Costa 12,50 €.",
        ["Riepilogo", "Ciao!", "Come stai?", "«Bene», rispose.", "Costa dodici euro e cinquanta centesimi."],
    ),
    (
        "it-time-date",
        "i",
        "Il treno parte alle 18:45 del 25/12/2024, ecc.",
        [
            "Il treno parte alle diciotto e quarantacinque del venticinque dicembre duemilaventiquattro, "
            "eccetera"
        ],
    ),
    # --- Brazilian Portuguese (p) --------------------------------------------------------------------------
    (
        "pt-price",
        "p",
        "**Olá!** Tudo bem? O preço é R$ 1.234,50 à vista.",
        ["Olá!", "Tudo bem?", "O preço é mil duzentos e trinta e quatro reais e cinquenta centavos à vista."],
    ),
    (
        "pt-title-time",
        "p",
        "O Sr. Silva chegou às 9:15. A temperatura era 25 °C.",
        ["O senhor Silva chegou às nove e quinze.", "A temperatura era vinte e cinco graus Celsius."],
    ),
    # --- Hindi (h) -----------------------------------------------------------------------------------------
    (
        "hi-danda-price",
        "h",
        "## नमस्ते\nमैं ठीक हूँ। आप कैसे हैं? कीमत ₹1,250 है।",
        ["नमस्ते", "मैं ठीक हूँ।", "आप कैसे हैं?", "कीमत 1250 रुपये है।"],
    ),
    (
        "hi-bullets-percent",
        "h",
        "- पहला बिंदु\n- दूसरा बिंदु: 12.5% वृद्धि॥",
        ["पहला बिंदु", "दूसरा बिंदु: 12 दशमलव 5 प्रतिशत वृद्धि॥"],
    ),
    # --- Japanese (j) --------------------------------------------------------------------------------------
    (
        "ja-quotes-price",
        "j",
        "## 概要\n今日は晴れです。「こんにちは。」と彼は言った。価格は1,234円です！",
        ["概要", "今日は晴れです。", "「こんにちは。」と彼は言った。", "価格は1234円です！"],
    ),
    (
        "ja-bullets-emoji",
        "j",
        "- **注意**：明日は雨です。\n- 傘を持ってね😊",
        ["注意：明日は雨です。", "傘を持ってね"],
    ),
    # --- Mandarin Chinese (z) ------------------------------------------------------------------------------
    (
        "zh-quotes",
        "z",
        "**你好！**我很好。他说：“你好。”然后走了。😀",
        ["你好！", "我很好。", "他说：“你好。”", "然后走了。"],
    ),
    (
        "zh-numbered",
        "z",
        "### 步骤\n1. 打开应用。\n2. 点击「设置」。",
        ["步骤", "1. 打开应用。", "2. 点击「设置」。"],
    ),
    # --- a second batch, written before it was first run: 18 of 20 as written; one expectation was
    # wrong ("p.m. Tomorrow" is a sentence end), one is a known miss (KNOWN_MISSES) ---
    (
        "two-paragraphs",
        "a",
        "First paragraph here.\n\nSecond one, with **bold** text!",
        ["First paragraph here.", "Second one, with bold text!"],
    ),
    ("paren-numbers", "a", "Options:\n1) Red\n2) Blue", ["Options:", "one) Red", "two) Blue"]),
    ("heading-colon", "a", "### Pros:\n- Fast\n- Cheap", ["Pros:", "Fast", "Cheap"]),
    (
        "pm-capital",
        "a",
        "We close at 5 p.m. Tomorrow we open at 9 a.m.",
        ["We close at five p m", "Tomorrow we open at nine a m"],
    ),
    (
        "nested-quote",
        "a",
        "He said, \"She told me 'no.'\" Then he left.",
        ["He said, \"She told me 'no.'\"", "Then he left."],
    ),
    (
        "bold-exclaim-mid",
        "a",
        "That was **amazing!** Let's do it again.",
        ["That was amazing!", "Let's do it again."],
    ),
    (
        "code-span-punct",
        "a",
        "Call `foo.bar()` first. Then `baz()`.",
        ["Call foo.bar() first.", "Then baz()."],
    ),
    (
        "question-list",
        "a",
        "Want to know more?\n- Pricing\n- Support",
        ["Want to know more?", "Pricing", "Support"],
    ),
    (
        "decimal-list",
        "a",
        "- Pi is 3.14159\n- e is 2.718",
        ["Pi is three point one four one five nine", "e is two point seven one eight"],
    ),
    ("percent-range", "a", "Growth was 5–7% last year.", ["Growth was five to seven percent last year."]),
    (
        "es-inner-question",
        "e",
        "Y tú, ¿qué piensas? Yo creo que sí.",
        ["Y tú, ¿qué piensas?", "Yo creo que sí."],
    ),
    (
        "es-decimal-million",
        "e",
        "Son 1,5 millones de personas.",
        ["Son uno coma cinco millones de personas."],
    ),
    (
        "fr-million-euros",
        "f",
        "Le budget est de 2,5 millions d'euros.",
        ["Le budget est de deux virgule cinq millions d'euros."],
    ),
    ("fr-question-list", "f", "Que faire ?\n- Attendre\n- Partir", ["Que faire ?", "Attendre", "Partir"]),
    (
        "it-quotes-bold",
        "i",
        "Ha detto: «**Sì**, certo.» Poi è uscito.",
        ["Ha detto: «Sì, certo.»", "Poi è uscito."],
    ),
    (
        "pt-emphasis-percent",
        "p",
        "A inflação foi de *4,5%* em 2023.",
        ["A inflação foi de quatro vírgula cinco por cento em dois mil e vinte e três."],
    ),
    ("hi-plain-numbers", "h", "मेरे पास 25 किताबें हैं। और 3 पेन।", ["मेरे पास 25 किताबें हैं।", "और 3 पेन।"]),
    (
        "ja-quote-then-sentence",
        "j",
        "「本当？」と聞いた。彼は笑った。",
        ["「本当？」と聞いた。", "彼は笑った。"],
    ),
    ("zh-list-colon", "z", "注意：\n1. 带伞。\n2. 早点出发！", ["注意：", "1. 带伞。", "2. 早点出发！"]),
]


KNOWN_MISSES = [
    pytest.param(
        "a",
        "I work at Acme Inc. It is great.",
        ["I work at Acme Inc.", "It is great."],
        id="abbreviation-ends-sentence",
        marks=pytest.mark.xfail(
            strict=True,
            reason="sentencex reads 'Inc.' before a capital as an abbreviation: the two sentences share a "
            "segment (same words, one pause fewer); a boundary would need the whole next word (chunker docs)",
        ),
    ),
]


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in BATTERY] + KNOWN_MISSES,
)
def test_battery_whole_by_character_and_in_fragments(language, text, expected):
    whole = pieces([text], language)
    assert [piece.text for piece in whole] == expected
    assert pieces(list(text), language) == whole
    for seed in range(3):
        assert pieces(random_fragments(text, seed), language) == whole, seed
        assert pieces(token_fragments(text, seed), language) == whole, seed


def test_battery_covers_every_language_and_the_required_shapes():
    assert {case[1] for case in BATTERY} == set("abefhijpz")
    assert len(BATTERY) >= 80


def test_pieces_flag_hard_breaks_and_keep_the_written_text():
    out = pieces(["# Price\nIt is $5. Buy it"], "a")
    assert out == [
        Piece("Price", "Price", True),
        Piece("It is five dollars.", "It is $5.", False),
        Piece("Buy it", "Buy it", False),
    ]


def test_pieces_without_letters_or_digits_are_dropped():
    # A chunk without letters joins the next one; a last one alone is dropped once emoji are gone.
    assert pieces(["🎉🎉\n...\n👍 Nice."], "a") == [Piece("... Nice.", "🎉🎉 ... 👍 Nice.", False)]
    assert pieces(["Done! 🎉"], "a") == [Piece("Done!", "Done!", False)]


def test_markdown_and_normalization_can_be_turned_off():
    assert speech_text("**$5** now", "a", markdown=False) == "**five dollars** now"
    assert speech_text("**$5** now", "a", normalize=False) == "$5 now"


def test_one_frontend_serves_many_texts():
    frontend = SpeechFrontend("e")
    assert frontend.feed("Hola. ") == []
    assert [piece.text for piece in frontend.flush()] == ["Hola."]
    assert [piece.text for piece in frontend.feed("Son 5 €. Ya")] == ["Son cinco euros."]
    assert [piece.text for piece in frontend.flush()] == ["Ya"]


def test_unknown_language_gets_generic_rules():
    assert speech_text("# Titel\nEs kostet 5 €. 👍 Gut.", "de") == "Titel Es kostet 5 €. Gut."


def test_arguments_are_checked():
    with pytest.raises(TypeError):
        SpeechFrontend(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SpeechFrontend("")
    with pytest.raises(TypeError):
        SpeechFrontend("a").feed(None)  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------------------

TOKENS = [
    "Hello", "world", "the", "I", "A", "Dr.", "U.S.", "e.g.", "1980.", "3.14", "1,234", "$5", "€2.50", "5 €",
    "10:30", "12%", "5 km", "2024-03-15", "#1", "you", "é", "ça", "¿", "¡", "«", "»", "“", "”", '"', "'",
    ".", ".", "!", "?", "...", "…", "?!", "。", "！", "？", "।", "你好", "मैं", "こんにちは", "「", "」",
    "👍", "🎉", "(", ")", ",", ";", ":", "—", "–",
    "**", "*", "_", "`", "```", "#", "# ", "- ", "> ", "| ", "[", "]", "](", "[link](http://x.y/z)",
    "![alt](a.png)", "[1]", "<br>", "\\", "1.", "2)", "example.com", "a@b.co", "snake_case",
    " ", " ", " ", "  ", "\n", "\n\n", "\t",
]  # fmt: skip
random_texts = st.lists(st.sampled_from(TOKENS), max_size=50).map("".join)
LANGUAGES = st.sampled_from(list("abefhijpz"))


@st.composite
def fragmentations(draw, texts):
    text = draw(texts)
    cuts = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=25))
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(text)}), len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(fragmentations(random_texts), LANGUAGES, st.booleans())
def test_fragmentation_invariance(case, language, markdown):
    """Any split of the input into fragments gives the same pieces."""
    text, fragments = case
    assert pieces(fragments, language, markdown=markdown) == pieces([text], language, markdown=markdown)


@PROPERTY_SETTINGS
@given(random_texts, LANGUAGES, st.booleans())
def test_nothing_spoken_is_lost(text, language, markdown):
    """The spoken contract (module docstring of speech.frontend), checked piece by piece.

    The pieces' written texts cover the clean text in order, whitespace aside; each piece says
    normalize_text of its written text; only chunks with no letter or digit after normalization vanish.
    """
    clean = " ".join((strip_markdown(text) if markdown else text).split())
    out = pieces([text], language, markdown=markdown)
    position = 0
    for piece in out:
        assert piece.text == normalize_text(piece.written, language)
        assert any(char.isalnum() for char in piece.text)
        found = clean.find(piece.written, position)
        assert found >= 0, (piece, clean[position:])
        skipped = clean[position:found]
        assert not any(char.isalnum() for char in normalize_text(skipped, language)), skipped
        position = found + len(piece.written)
    assert not any(char.isalnum() for char in normalize_text(clean[position:], language))


WORDS = st.sampled_from(["alpha", "Beta", "gamma", "delta", "día", "ça", "東京", "टेस्ट", "Öl"])


@st.composite
def documents(draw):
    """(markdown, spoken words) of a small LLM-style document whose words need no normalization."""
    lines, spoken = [], []
    for _ in range(draw(st.integers(1, 6))):
        words = draw(st.lists(WORDS, min_size=1, max_size=5))
        kind = draw(st.sampled_from(["para", "heading", "bullet", "quote", "bold", "link", "code", "fence"]))
        phrase = " ".join(words)
        if kind == "fence":
            lines += ["```", phrase, "```"]
            continue
        spoken += words
        lines.append(
            {
                "para": phrase + draw(st.sampled_from([".", "!", "?", "", "…"])),
                "heading": "## " + phrase,
                "bullet": "- " + phrase,
                "quote": "> " + phrase,
                "bold": f"**{phrase}**",
                "link": f"[{phrase}](https://example.com/a.b)",
                "code": f"`{phrase}`",
            }[kind]
        )
    return "\n".join(lines), spoken


@PROPERTY_SETTINGS
@given(documents(), LANGUAGES)
def test_documents_speak_their_words_and_nothing_else(document, language):
    markdown, spoken = document
    said = [word.strip(".!?…") for word in speech_text(markdown, language).split()]
    assert said == spoken


@PROPERTY_SETTINGS
@given(
    st.lists(st.sampled_from(TOKENS), max_size=40).map(lambda tokens: strip_markdown(" ".join(tokens))),
    st.sampled_from(list("abefhijpz")),
)
@example("3.14 —   1980.", "h")  # found by CI: a dash read as "to" only once the spaces were collapsed
@example("$  5 and 7   % of 3 \t km", "a")
def test_normalized_text_is_not_normalized_again(text, language):
    """What the agent or a client already normalized, the server leaves as it is (no double normalization).

    Tokens are separated by spaces here: figures glued to symbols without a space ("3.14€2.50") can read
    differently once their neighbours became words."""
    once = normalize_text(text, language)
    assert normalize_text(once, language) == once


# --- cost ------------------------------------------------------------------------------------------------

REPLY = (
    '## Plan for **today** 🚀\n\nDr. Smith said: "We start at 10:30." Costs are $1,234.50 (up 12.5%).\n'
    "- Buy milk, e.g. 2 L.\n- Call (555) 123-4567!\n1. Read [docs](https://x.io/a). Then *rest*…\n"
    "| a | b |\n|---|---|\n| 5 km | 3.14 |\n```\ncode()\n```\n「你好。」他说。मैं ठीक हूँ। ¿Qué? « Oui ! » "
)


def traced_lines(text: str, language: str) -> int:
    """Python lines executed to stream ``text`` one character at a time: a deterministic cost measure."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    frontend = SpeechFrontend(language)
    sys.settrace(tracer)
    try:
        for char in text:
            frontend.feed(char)
        frontend.flush()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("language", ["a", "f", "z"])
def test_cost_is_linear_in_text_length(language):
    """Counted, not timed: twice the text costs at most 2.2 times the executed lines, and the held text
    stays bounded by the cap."""
    SpeechFrontend(language).feed(REPLY)  # warm the caches (compiled patterns)
    small = traced_lines(REPLY * 8, language)
    large = traced_lines(REPLY * 16, language)
    assert large <= 2.2 * small, (small, large)
    frontend = SpeechFrontend(language)
    most = 0
    for char in REPLY * 4:
        frontend.feed(char)
        most = max(most, frontend.pending)
    assert most <= DEFAULT_MAX_CHUNK_CHARS + 10
