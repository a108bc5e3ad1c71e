"""The fixed G2P battery (issue 17): texts in every language and the phonemes Kokoro must be given for them.

``g2p_battery.json`` pins, for each text and voice, the phoneme string of every segment. Both backends
run the same G2P (reference_server/backends/g2p.py) on whatever libraries the install has, so the
file catches the G2P code drifting between installs (phonemizer against phonemizer-fork, another
espeak-ng data set, another misaki) as well as between the backends. Regenerate it only on purpose,
after checking the new phonemes, with::

    PYTHONPATH=. python tests/reference_server/g2p_battery.py
"""

from __future__ import annotations

import json
from pathlib import Path

BATTERY_FILE = Path(__file__).with_name("data") / "g2p_battery.json"

NATIVE = {
    "a": "Hello there, friend.",
    "b": "Good morning, friend.",
    "e": "Buenos días, amigo.",
    "f": "Bonjour, mon ami.",
    "h": "नमस्ते, मेरे दोस्त।",
    "i": "Buongiorno, amico mio.",
    "j": "こんにちは、友達。",
    "p": "Bom dia, meu amigo.",
    "z": "你好，我的朋友。",
}
"""One short native sentence per language: three words, about a second of speech and its lead-in."""

BATTERY = [
    *((f"{code}:native", text) for code, text in NATIVE.items()),
    ("a", "The lighthouse keeper counted 112 steps; Dr. Smith paid $4.50."),
    ("b", "Colour, theatre and aluminium: the British spellings."),
    ("e", "El año 2024 tuvo 366 días, y el niño comió paella."),
    ("f", "Les enfants ont vu 15 oiseaux à l'hôpital."),
    ("h", "मैं हिंदी बोलता हूँ। यह 25 रुपये का है।"),
    ("i", "Gli gnocchi costano 12 euro, però sono buonissimi."),
    ("j", "東京タワーに行きました！ちょっと待って、２０２４年です。"),
    ("p", "Eu não sei, mas a canção é linda. São 30 reais."),
    ("z", "我在2024年学习中文。北京的天气很好！"),
]
"""(language code or ``code:native``, text): every language, with numbers, punctuation and script features."""

VOICE_OF = {"a": "af_heart", "b": "bf_emma", "e": "ef_dora", "f": "ff_siwis", "h": "hf_alpha", "i": "if_sara"}
VOICE_OF |= {"j": "jf_alpha", "p": "pf_dora", "z": "zf_xiaobei"}


def voice_for(key: str) -> str:
    """The voice a battery entry is phonemized for."""
    return VOICE_OF[key.split(":")[0]]


def load() -> dict[str, list[str]]:
    """``{"<voice>|<text>": [phonemes of each segment]}`` as pinned."""
    return json.loads(BATTERY_FILE.read_text(encoding="utf-8"))


def key(voice: str, text: str) -> str:
    return f"{voice}|{text}"


def _regenerate() -> None:
    from reference_server import assets
    from reference_server.backends.g2p import Phonemizer

    vocab = json.loads(assets.CONFIG_PATH.read_text(encoding="utf-8"))["vocab"]
    phonemizer = Phonemizer(vocab)
    pinned = {}
    for name, text in BATTERY:
        voice = voice_for(name)
        pinned[key(voice, text)] = [segment.phonemes for segment in phonemizer.segments(text, voice)]
    BATTERY_FILE.write_text(json.dumps(pinned, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(pinned)} entries to {BATTERY_FILE}")


if __name__ == "__main__":
    _regenerate()
