"""Hooks and synthesizers of the table on what is spoken and how it is encoded: languages and text
normalization (§14), word timings, G.711 encodings (§3.3.1, §4.1) and voice blends (§4.1)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from conformance.mutants.base import ToneSynthesizer
from conformance.mutants.defects.core import (
    DefectConnection,
    Frame,
    Outgoing,
    dump,
    is_request,
    json_object,
    map_controls,
)
from protocol.encodings import decode_to_pcm16
from protocol.voices import KOKORO_VOICES, is_blend, language_of, parse_voice
from speech.frontend import speech_text


class _LanguageBlindSynthesizer(ToneSynthesizer):
    """Counts every character as a Latin letter: kanji, kana and hanzi last as long as one letter each."""

    syllable_seconds = ToneSynthesizer.seconds_per_char


# -- text normalization, word timings (§14) ---------------------------------------------------------------


class _ReadsMarkdownAloud(ToneSynthesizer):
    """Reads markdown as plain text: every marker is spoken by its name."""

    NAMES = (("**", " asterisk asterisk "), ("*", " asterisk "), ("_", " underscore "), ("`", " backtick "))

    def spoken(self, segment: str, voice: str) -> str:
        text = re.sub(r"(?m)^(#+)", lambda m: " hash" * len(m.group(1)), segment)
        text = re.sub(r"(?m)^- ", " dash ", text)
        for marker, name in self.NAMES:
            text = text.replace(marker, name)
        try:
            return speech_text(text, language_of(voice).code, markdown=False)
        except (TypeError, ValueError, KeyError):  # KeyError: a voice of no language (refused before this)
            return text


class _DropsFigures(ToneSynthesizer):
    """A G2P that skips what it cannot read: every digit is dropped before the text is spoken."""

    def spoken(self, segment: str, voice: str) -> str:
        return super().spoken(re.sub(r"\d", "", segment), voice)


class _UnescapesFirst(ToneSynthesizer):
    """Removes markdown's backslash escapes before it reads markdown, so escaped syntax is syntax again."""

    def spoken(self, segment: str, voice: str) -> str:
        return super().spoken(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", segment), voice)


class _NoWordTimings(ToneSynthesizer):
    """Has no word timings, although the server lists English with ``word_timings: true``."""

    def words(self, segment: str, voice: str, start_s: float, end_s: float) -> None:
        return None


# -- encodings (§3.3.1, §4.1) -----------------------------------------------------------------------------


def _g711_brackets(change: Callable[[DefectConnection, str, bytes, bool], list[Frame]]) -> Outgoing:
    """An ``outgoing`` hook that hands each audio frame of a G.711 bracket to ``change`` (with the
    bracket's encoding and whether it is the bracket's first frame) and adds what the change adds to the
    bracket's ``audio_bytes``, so only what ``change`` breaks is wrong."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        out: list[Frame] = []
        for frame in frames:
            obj = json_object(frame)
            if obj is not None and obj.get("type") == "synthesis_start":
                encoding = obj.get("encoding")
                session.g711 = encoding if encoding in ("pcm_mulaw", "pcm_alaw") else None
                session.g711_first, session.g711_added = True, 0
            elif obj is not None and obj.get("type") == "synthesis_complete" and session.g711:
                obj["audio_bytes"] += session.g711_added
                frame, session.g711 = dump(obj), None
            elif isinstance(frame, bytes) and session.g711:
                changed = change(session, session.g711, frame, session.g711_first)
                session.g711_first = False
                session.g711_added += sum(map(len, changed)) - len(frame)
                out += changed
                continue
            out.append(frame)
        return out

    return hook


def _mulaw_as_alaw(session: DefectConnection, encoding: str, frame: bytes, first: bool) -> list[Frame]:
    from protocol.encodings import encode_pcm16

    if encoding != "pcm_mulaw":
        return [frame]
    return [encode_pcm16(decode_to_pcm16(frame, "pcm_mulaw"), "pcm_alaw")]


def _g711_json_first_frame(
    session: DefectConnection, encoding: str, frame: bytes, first: bool
) -> list[Frame]:
    # The G.711 samples 7B 7D: the text {}, a JSON object, as a frame of its own.
    return [b"{}", frame] if first else [frame]


def _drop_unknown_encoding(session: DefectConnection, obj: dict[str, Any]) -> Any:
    from protocol.encodings import ENCODINGS

    encoding = obj.get("encoding")
    if isinstance(encoding, str) and encoding not in ENCODINGS:
        return {k: v for k, v in obj.items() if k != "encoding"}  # answered in PCM16, not refused
    return None


# -- voice blends (§4.1) -----------------------------------------------------------------------------------


class _EqualWeightsSynthesizer(ToneSynthesizer):
    """Mixes a blend's voices in equal parts, whatever its weights."""

    def pitch(self, voice: str) -> float:
        if not is_blend(voice):
            return super().pitch(voice)
        voices = parse_voice(voice, KOKORO_VOICES).voices
        return sum(super(_EqualWeightsSynthesizer, self).pitch(v) for v in voices) / len(voices)


class _FirstVoiceSynthesizer(ToneSynthesizer):
    """Speaks a blend in its first voice alone."""

    def pitch(self, voice: str) -> float:
        return super().pitch(parse_voice(voice, KOKORO_VOICES).voices[0] if is_blend(voice) else voice)


class _DriftingBlendSynthesizer(ToneSynthesizer):
    """Speaks a blend it has spoken before 15 % higher each time (a mix that is not reproducible)."""

    def __init__(self) -> None:
        self.times_spoken: dict[str, int] = {}  # not ``spoken``: that is ToneSynthesizer's method

    def pitch(self, voice: str) -> float:
        if not is_blend(voice):
            return super().pitch(voice)
        times = self.times_spoken[voice] = self.times_spoken.get(voice, -1) + 1
        return super().pitch(voice) * (1 + 0.15 * times)


def _remember_blends(session: DefectConnection, obj: dict[str, Any]) -> Any:
    voice = obj.get("voice")
    if is_request(obj) and isinstance(voice, str) and is_blend(voice):
        session.blends[obj.get("request_id")] = voice
    return None


def _echo_blend_as_sent(obj: dict[str, Any], session: DefectConnection) -> dict[str, Any]:
    if obj.get("type") == "synthesis_start" and obj.get("request_id") in session.blends:
        obj["voice"] = session.blends[obj["request_id"]]  # as the client wrote it, not canonical
    return obj


def _blend_refusal_unnamed(obj: dict[str, Any], session: DefectConnection) -> dict[str, Any]:
    refused = obj.get("type") == "error" and obj.get("code") == "invalid_voice"
    if refused and obj.get("request_id") in session.blends:
        obj["message"] = "this voice is not valid"
    return obj


def _with_session(change: Callable[[dict[str, Any], DefectConnection], dict[str, Any]]) -> Outgoing:
    """An ``outgoing`` hook rewriting each control frame with ``change(obj, session)``."""

    def hook(session: DefectConnection, frames: list[Frame]) -> list[Frame]:
        return map_controls(lambda obj: change(obj, session))(session, frames)

    return hook


def _blend_across_languages(session: DefectConnection, obj: dict[str, Any]) -> Any:
    voice = obj.get("voice")
    if is_request(obj) and isinstance(voice, str) and is_blend(voice):
        names = [re.sub(r"\(.*\)$", "", part) for part in voice.split("+")]
        if all(name in KOKORO_VOICES for name in names) and len({language_of(n).code for n in names}) > 1:
            return {**obj, "voice": names[0]}  # spoken in its first voice instead of refused
    return None
