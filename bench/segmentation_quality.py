"""Benchmark 8: what deadline-aware segmentation does to the audio: segments chosen, duration, word timings.

Each reply of the playback benchmark (:data:`bench.texts.PLAYBACK_REPLIES`) is spoken twice by the same
backend, in this process:

* unsegmented: each sentence in one pass (``backend.synthesize``), as the server did before §10.1;
* segmented: each sentence as a request of one session, through the server's own runtime
  (:class:`reference_server.request_audio.RequestAudio`, deadline segmentation, the session's listener and
  model-speed estimate), so the cuts are the ones the server makes. The runtime runs on a paced clock
  (:class:`_Paced`): every pass advances it by the time the model would take at ``Config.xrt`` times real
  time, so the cuts are those of a machine of that speed, however busy this one is (the playback benchmark
  measures the real thing; this one measures what cuts do to the audio).

Figures: the segments chosen (words and spoken units each, and the boundary each ends at), the duration of
each sentence both ways, and, when the backend reports word timings (torch), how far each word moved: the
difference of its start time from the sentence's start, segmented minus unsegmented, and at each cut how
much of that came before the cut (the model paces a shorter text differently) and how much at the cut (the
gap between the two words changed by the trimmed silence and the kept pause).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.record import Result
from bench.summary import describe
from bench.texts import LONG_REPLIES, PLAYBACK_REPLIES

__all__ = ["NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "segmentation_quality"
TITLE = "8. Segmentation quality: the cuts chosen, duration and word timings, segmented vs unsegmented"


@dataclass(frozen=True)
class Config:
    """Attributes: the replies; the backend (``torch`` reports word timings, ``onnx`` does not; ``auto``
    takes torch when its weights are in place); the voice; warm-up conversations before measuring."""

    replies: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(PLAYBACK_REPLIES))
    backend: str = "auto"
    voice: str = "af_heart"
    warmup: tuple[tuple[str, ...], ...] = (LONG_REPLIES["refund"],)
    xrt: float = 3.45
    """The model speed the cuts are chosen for: the int8 ONNX on the two AMD EPYC cores of the first
    benchmark run (bench §4)."""


SMOKE = Config(
    replies={
        "short": ("Hello there.", "It is me, the reference server, with a sentence long enough to cut.")
    },
    backend="onnx",
    warmup=(("Hello there.", "This is a deployment check.", "It has three sentences."),),
)


class _Clock:
    """Monotonic seconds that move only when a pass is "synthesized" (thread-safe enough: one worker)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Paced:
    """A backend whose passes take, on :class:`_Clock`, the time they would take at ``xrt`` times real
    time: the real audio and word timings of ``inner``, the timing of a machine of known speed."""

    def __init__(self, inner: Any, clock: _Clock, xrt: float) -> None:
        self.inner, self.clock, self.xrt = inner, clock, xrt
        self.name, self.sample_rate, self.voices = inner.name, inner.sample_rate, inner.voices

    def load(self) -> None:
        pass

    def warm_up(self) -> None:
        pass

    def synthesize(self, text: str, voice: str, speed: float = 1.0) -> Any:
        for segment in self.inner.synthesize(text, voice, speed):
            self.clock.now += len(segment.audio) / self.sample_rate / self.xrt
            yield segment


def _backend(name: str) -> Any:
    from reference_server import assets
    from reference_server.backends import create_backend

    if name == "auto":
        try:
            found = assets.locate()
            import torch  # noqa: F401  (the torch backend's own import)
        except Exception:
            name = "onnx"
        else:
            name = "torch" if found.torch_weights is not None else "onnx"
    backend = create_backend(name)
    backend.load()
    backend.warm_up()
    return backend


async def _segmented(runtime: Any, sentences: tuple[str, ...], voice: str) -> list[dict[str, Any]]:
    """Speak the sentences as the requests of one session; per sentence its audio, words and segments."""
    from protocol.messages import SynthesisRequest
    from reference_server.request_audio import RequestAudio
    from reference_server.scheduling import Listener

    listener = Listener()
    spoken = []
    for number, sentence in enumerate(sentences):
        audio = RequestAudio(
            runtime, SynthesisRequest(text=sentence, voice=voice, request_id=f"q{number}"), listener
        )
        pcm = bytearray()
        words: list[Any] = []
        try:
            while (piece := await audio.next()) is not None:
                pcm += piece.pcm
                words += piece.words or []
        finally:
            audio.close()
        spoken.append({"pcm_bytes": len(pcm), "words": words, "segments": audio.segments})
    return spoken


def _unsegmented(backend: Any, sentence: str, voice: str) -> tuple[float, list[Any]]:
    samples, words, offset = 0, [], 0.0
    for segment in backend.synthesize(sentence, voice, 1.0):
        words += [(w.word, offset + w.start_s, offset + w.end_s) for w in segment.words or []]
        samples += len(segment.audio)
        offset = samples / backend.sample_rate
    return samples / backend.sample_rate, words


async def run(context: Any, config: Config = Config()) -> Result:
    """Speak every reply both ways (see the module docstring)."""
    import asyncio

    from reference_server.runtime import Runtime
    from reference_server.settings import Settings
    from speech.segmenter import spoken_units

    backend = await asyncio.to_thread(_backend, config.backend)
    clock = _Clock()
    runtime = Runtime(
        Settings(backend=backend.name), _Paced(backend, clock, config.xrt), clock=clock, lockstep=True
    )
    result = Result(NAME, TITLE, config={**asdict(config), "backend_used": backend.name})
    try:
        for sentences in config.warmup:
            await _segmented(runtime, sentences, config.voice)
        context.log(
            f"  {backend.name} backend ready; cuts chosen at {runtime.speed.snapshot()['xrt']}x real time"
        )
        for reply, sentences in config.replies.items():
            segmented = await _segmented(runtime, sentences, config.voice)
            for number, (sentence, cut) in enumerate(zip(sentences, segmented, strict=True)):
                plain_s, plain_words = await asyncio.to_thread(_unsegmented, backend, sentence, config.voice)
                row: dict[str, Any] = {
                    "reply": reply,
                    "sentence": number + 1,
                    "chars": len(sentence),
                    "units": spoken_units(sentence),
                    "segments": [_segment(s) for s in cut["segments"]],
                    "unsegmented_s": round(plain_s, 3),
                    "segmented_s": round(cut["pcm_bytes"] / 2 / 24_000, 3),
                }
                row.update(_word_drift(plain_words, cut["words"], cut["segments"]))
                result.trials.append(row)
                context.log(
                    f"  {reply} #{number + 1}: {len(row['segments'])} segment(s), "
                    f"{row['segmented_s']:.2f} s vs {row['unsegmented_s']:.2f} s unsegmented"
                )
    finally:
        runtime.scheduler.close()
    result.figures = _figures(result.trials)
    if backend.name != "torch":
        result.notes.append(
            f"Word timings not compared: the {backend.name} backend reports none (the torch backend does; "
            "its weights are rebuilt by `python -m reference_server.assets fetch --torch yes`)."
        )
    return result


def _segment(record: Any) -> dict[str, Any]:
    """A :class:`reference_server.request_audio.SegmentRecord` as JSON."""
    return {
        "units": record.units,
        "words": record.words,
        "chars": record.chars,
        "boundary": record.boundary,
        "first": record.first,
        "budget_s": None if record.budget_s is None else round(record.budget_s, 3),
        "compute_s": round(record.compute_s, 3),
        "audio_s": round(record.audio_s, 3),
    }


def _word_drift(plain: list[Any], words: list[Any], segments: list[Any]) -> dict[str, Any]:
    """How far each word's start moved (segmented minus unsegmented, ms), and at each cut how much of
    that came before it (Kokoro paces a shorter text differently) and how much at it (the gap changed)."""
    if not plain or not words or len(plain) != len(words):
        return {}
    drift = [round((w.start_s - p[1]) * 1000.0, 1) for p, w in zip(plain, words, strict=True)]
    cuts_after, count = [], 0
    for segment in segments[:-1]:
        count += _word_count(segment)
        cuts_after.append(count)
    at_cuts = [
        {"after_word": i, "before_ms": drift[i - 1], "across_ms": round(drift[i] - drift[i - 1], 1)}
        for i in cuts_after
        if 0 < i < len(words)
    ]
    return {"word_drift_ms": drift, "cuts": at_cuts}


def _word_count(segment: Any) -> int:
    return int(segment["words"]) if isinstance(segment, dict) else int(segment.words)


def _figures(trials: list[dict[str, Any]]) -> dict[str, Any]:
    cut = [t for t in trials if len(t["segments"]) > 1 and t["unsegmented_s"]]
    changes = [round((t["segmented_s"] - t["unsegmented_s"]) * 1000.0, 1) for t in cut]
    drift = [abs(d) for t in cut for d in t.get("word_drift_ms", [])]
    at_cuts = [c for t in trials for c in t.get("cuts", [])]
    return {
        "sentences": len(trials),
        "sentences_cut": len(cut),
        "segments_per_sentence": describe([len(t["segments"]) for t in trials]),
        "first_segment_units": describe([t["segments"][0]["units"] for t in trials if t["sentence"] == 1]),
        "later_segment_units": describe([s["units"] for t in trials for s in t["segments"][1:]]),
        "duration_change_ms": describe(changes),
        "duration_change_pct": describe(
            [100.0 * c / 1000.0 / t["unsegmented_s"] for c, t in zip(changes, cut, strict=True)]
        ),
        "word_drift_ms": describe(drift),
        "drift_before_cut_ms": describe([c["before_ms"] for c in at_cuts]),
        "gap_change_at_cut_ms": describe([c["across_ms"] for c in at_cuts]),
    }


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Every sentence: its segments and both durations; then the summary."""
    rows = []
    for t in result["trials"]:
        segments = " | ".join(f"{s['units']:.0f}u {s['boundary'].lower()}" for s in t["segments"])
        change = (t["segmented_s"] - t["unsegmented_s"]) * 1000.0
        rows.append(
            [
                f"{t['reply']} #{t['sentence']}",
                f"{t['units']:.0f}u",
                segments,
                f"{t['unsegmented_s']:.2f} s",
                f"{t['segmented_s']:.2f} s ({change:+,.0f} ms)",
            ]
        )
    figures = result["figures"]

    def median(key: str, unit: str = " ms") -> str:
        value = figures[key]["median"]
        return "–" if value is None else f"{value:,.1f}{unit}"

    change = f"{median('duration_change_ms')} ({median('duration_change_pct', ' %')})"
    drift = f"{median('word_drift_ms')} ({figures['word_drift_ms']['max'] or '–'} ms)"
    before = median("drift_before_cut_ms")
    gap = median("gap_change_at_cut_ms")
    summary = [
        ["sentences cut / spoken", f"{figures['sentences_cut']} / {figures['sentences']}"],
        ["first segment of a reply, median", median("first_segment_units", " units")],
        ["later segments, median", median("later_segment_units", " units")],
        ["duration change of a cut sentence, median", change],
        ["word start moved in a cut sentence, median |Δ| (max)", drift],
        ["word before a cut moved, median (Kokoro paces the shorter text)", before],
        ["gap at a cut changed by, median (trimmed silence and kept pause)", gap],
    ]
    return [
        (["sentence", "spoken units", "segments (units, boundary)", "unsegmented", "segmented"], rows),
        (["quality figure", "value"], summary),
    ]


def notes(result: dict[str, Any]) -> list[str]:
    """What the segments are and where the extra silence comes from."""
    return [
        f"Backend: {result['config'].get('backend_used')}; the cuts are the server's own (deadline "
        "segmentation, one session's listener, the sentences sent at once after a warm-up) for a model "
        f"running {result['config'].get('xrt', '?')}x real time: a faster machine cuts less, a slower one "
        "more.",
        "A unit is a letter or digit (a kana 2, a CJK ideograph 3): about 60 ms of English speech. Where a "
        "sentence is cut the server trims the 0.3-0.5 s of silence Kokoro puts at the start and end of every "
        "pass and keeps a pause that suits the boundary (reference_server.request_audio.PAUSE_S). Word "
        "timings come from the torch backend's predicted durations, which give each pause to a word, so a "
        "gap is read between word starts.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Each sentence's duration, unsegmented vs segmented."""
    from bench.plots import grouped_bars

    trials = result["trials"]
    categories = [f"{t['reply'].split()[0][:6]}\n#{t['sentence']}" for t in trials]
    grouped_bars(
        path,
        "Sentence duration (s)",
        categories,
        {
            "unsegmented": [t["unsegmented_s"] for t in trials],
            "segmented": [t["segmented_s"] for t in trials],
        },
        title="Duration of each sentence: one pass vs the server's segments",
    )
