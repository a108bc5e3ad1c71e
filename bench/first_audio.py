"""Benchmark 1b: first audio of a reply's first sentence, lead-in sent early vs with its segment.

Kokoro starts every pass with the start token's predicted duration of near-silence (the lead-in,
0.3-0.5 s at speed 1), and the decoder, about 95 % of a pass on a CPU, cannot be run in windows without
changing the audio (reference_server/backends/onnx_backend.py). With ``--lead-in early`` the server
runs the text side of a speech's first segment, sends the first part of the lead-in at once as digital
silence (:func:`reference_server.backends.base.lead_in_frames`), then decodes and sends the rest.

Two reference servers (onnx, deadline segmentation; ``--lead-in early`` and ``--lead-in off``) run
side by side; every trial opens a new session to each in turn (the order alternates) and sends the bench
reply (:data:`bench.texts.REPLY_SENTENCES`, first two sentences) as one request. Per trial:

* ``first_audio_ms``: request sent → first audio bytes received (what the target speaks of);
* ``first_voice_ms``: request sent → the moment a player that starts at the first audio byte and plays
  without gaps, waiting when it runs dry, reaches the first sound (first sample above 2 % of the peak):
  when the listener hears the voice begin;
* ``wait_before_voice_ms``: the silence that player inserts before the voice while waiting for audio
  (with ``early``, a wait after the lead-in piece when the decoder takes longer than that piece lasts);
* ``underrun_ms``: all the silence that player inserts over the whole reply (the machine's speed: on a
  busy machine the second sentence comes late in both modes);
* the audio itself: both modes must give the same number of samples; ``max_diff`` is the largest
  difference between the modes' samples of the same trial (PCM16 units), all of it inside the lead-in.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.channels import converse, direct_channel
from bench.record import Result
from bench.stack import ReferenceServer
from bench.summary import describe, ms, paired
from bench.texts import REPLY_SENTENCES

__all__ = ["MODES", "NAME", "SMOKE", "TITLE", "Config", "notes", "plot", "run", "tables"]

NAME = "first_audio"
TITLE = "1b. First audio of a reply's first sentence: lead-in sent early vs with its segment"

MODES = ("off", "early")
LABELS = {"off": "lead-in with its segment (old)", "early": "lead-in sent early (new)"}
SAMPLE_RATE = 24_000
_TIMES = ("first_audio_ms", "first_voice_ms", "wait_before_voice_ms", "underrun_ms")


@dataclass(frozen=True)
class Config:
    """Attributes: trials per mode (after two untimed warm-ups of each); the reply sent."""

    trials: int = 15
    text: str = " ".join(REPLY_SENTENCES[:2])


SMOKE = Config(trials=1, text="Happy to help. It is here.")


def _player(
    arrivals: list[tuple[float, int]], sent_at: float, onset_sample: int
) -> tuple[float, float, float]:
    """(first voice, wait before the voice, underrun) in ms for a player that starts at the first
    arrival and waits when dry; ``arrivals`` are (perf_counter seconds, PCM16 bytes)."""
    clock = None  # when the player will have played everything it has
    played = 0  # samples handed to the player so far
    underrun = 0.0
    voice_at = None
    before_voice = 0.0
    for at, size in arrivals:
        samples = size // 2
        if clock is None:
            clock = at
        elif at > clock:
            underrun += at - clock
            clock = at
        if voice_at is None and played + samples > onset_sample:
            voice_at = clock + (onset_sample - played) / SAMPLE_RATE
            before_voice = underrun
        clock += samples / SAMPLE_RATE
        played += samples
    assert voice_at is not None
    return (voice_at - sent_at) * 1000.0, before_voice * 1000.0, underrun * 1000.0


async def _trial(server: ReferenceServer, text: str) -> tuple[dict[str, Any], np.ndarray]:
    async with direct_channel(server.ws_url) as channel:
        (timeline,) = await converse(channel, [text], keep_pcm=True)
    assert timeline.sent_at is not None and timeline.pcm is not None
    pcm = np.frombuffer(bytes(timeline.pcm), dtype="<i2").astype(np.int32)
    onset = int(np.flatnonzero(np.abs(pcm) > 0.02 * np.abs(pcm).max())[0])
    voice_ms, wait_ms, underrun_ms = _player(timeline.arrivals, timeline.sent_at, onset)
    first = timeline.arrivals[0][1] // 2
    return {
        "first_audio_ms": round(timeline.first_audio_ms or 0.0, 2),
        "first_voice_ms": round(voice_ms, 2),
        "wait_before_voice_ms": round(wait_ms, 2),
        "underrun_ms": round(underrun_ms, 2),
        "first_piece_s": round(first / SAMPLE_RATE, 3),
        "audio_s": round(len(pcm) / SAMPLE_RATE, 3),
        "onset_s": round(onset / SAMPLE_RATE, 3),
        "pieces": len(timeline.arrivals),
    }, pcm


async def run(context: Any, config: Config = Config()) -> Result:
    """Alternate the two servers ``config.trials`` times (see the module docstring)."""
    servers = {mode: ReferenceServer("onnx", lead_in=mode) for mode in MODES}
    result = Result(
        NAME,
        TITLE,
        config={**asdict(config), "servers": {mode: s.settings() for mode, s in servers.items()}},
    )
    try:
        for server in servers.values():
            await server.start()
        for _ in range(2):  # warm-up: connections, the model-speed estimate, the first passes
            for mode in MODES:
                await _trial(servers[mode], config.text)
        for number in range(config.trials):
            order = MODES if number % 2 == 0 else MODES[::-1]
            audio: dict[str, np.ndarray] = {}
            trials = {}
            for mode in order:
                trial, audio[mode] = await _trial(servers[mode], config.text)
                trial.update(mode=mode, trial=number + 1)
                trials[mode] = trial
                context.log(
                    f"  trial {number + 1} {mode:<5} first audio {trial['first_audio_ms']:7.1f} ms, "
                    f"first voice {trial['first_voice_ms']:7.1f} ms, underrun {trial['underrun_ms']:6.1f} ms"
                )
            same_length = len(audio["early"]) == len(audio["off"])
            diff = np.abs(audio["early"] - audio["off"]) if same_length else None
            for mode in order:
                trials[mode]["same_length"] = same_length
                trials[mode]["max_diff"] = None if diff is None else int(diff.max())
                trials[mode]["differing_samples"] = None if diff is None else int(np.count_nonzero(diff))
                lead = round(trials["early"]["first_piece_s"] * SAMPLE_RATE)
                after = None if diff is None else int(np.count_nonzero(diff[lead:]))
                trials[mode]["differing_after_lead_in"] = after
                result.trials.append(trials[mode])
    finally:
        for server in servers.values():
            await server.stop()
    figures: dict[str, Any] = {}
    for mode in MODES:
        mine = [t for t in result.trials if t["mode"] == mode]
        figures[mode] = {key: describe([t[key] for t in mine]) for key in (*_TIMES, "first_piece_s")}
    figures["paired_change_ms"] = {
        key: describe(paired(result.trials, key, "early", "off"))
        for key in ("first_audio_ms", "first_voice_ms")
    }
    early = [t for t in result.trials if t["mode"] == "early"]
    figures["same_length_all"] = all(t["same_length"] for t in early)
    figures["max_diff_pcm16"] = max((t["max_diff"] or 0) for t in early) if early else None
    figures["differing_after_lead_in"] = sum((t["differing_after_lead_in"] or 0) for t in early)
    result.figures = figures
    return result


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Rows: each mode's medians of first audio, first voice and waits; then the paired change."""
    figures, trials = result["figures"], result["trials"]
    headers = [
        "mode",
        "first audio, median",
        "p95",
        "first voice heard, median",
        "wait before the voice, median",
        "underrun over the reply, median",
        "n",
    ]
    rows = []
    for mode in MODES:
        f = figures[mode]
        wait = f.get("wait_before_voice_ms", {}).get("median")
        rows.append(
            [
                LABELS[mode],
                ms(f["first_audio_ms"]["median"]),
                ms(f["first_audio_ms"]["p95"]),
                ms(f["first_voice_ms"]["median"]),
                ms(wait),
                ms(f["underrun_ms"]["median"]),
                str(f["first_audio_ms"]["n"]),
            ]
        )
    change = [
        [
            "new − old, same trial",
            ms(statistics.median(paired(trials, "first_audio_ms", "early", "off") or [0.0])),
            "",
            ms(statistics.median(paired(trials, "first_voice_ms", "early", "off") or [0.0])),
            "",
            "",
            str(len(paired(trials, "first_audio_ms", "early", "off"))),
        ]
    ]
    return [(headers, rows + change)]


def notes(result: dict[str, Any]) -> list[str]:
    """What the first piece is, and how the two modes' audio compare."""
    figures, trials = result["figures"], result["trials"]
    first_piece = statistics.median([t["first_piece_s"] for t in trials if t["mode"] == "early"] or [0.0])
    onset = statistics.median([t["onset_s"] for t in trials] or [0.0])
    return [
        f"With the lead-in sent early the first piece is {first_piece:.3f} s of digital silence (median); "
        f"the voice starts {onset:.3f} s into the audio. First audio is that silence's arrival; "
        "'first voice heard' is when a gapless player started at the first byte reaches the voice.",
        f"Same audio: same length in every trial: {figures['same_length_all']}; largest sample difference "
        f"{figures['max_diff_pcm16']} in PCM16 units (bound 0.002 x 32767 = 65.5); samples that differ "
        f"after the early lead-in piece: {figures['differing_after_lead_in']}.",
        "The wait before the voice (lead-in early) is silence inserted after the lead-in piece while the "
        "decoder finishes the first segment: the listener hears a longer silence, not a gap in speech. The "
        "underrun over the reply counts from the first audio byte, so it grows by about as much as first "
        "audio shrinks; beyond that it is the machine's speed (the second sentence is long).",
        "The voice itself can start at most by the lead-in piece's length sooner (0.15-0.23 s at speed 1): "
        "the decoder, about 95 % of a pass, still has to run before the first word; compare the paired "
        "medians (both modes of a trial ran back to back), since other work on the machine moves each trial.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Box plots of first audio and first voice per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for axis, key, title in (
        (axes[0], "first_audio_ms", "first audio (ms)"),
        (axes[1], "first_voice_ms", "first voice heard (ms)"),
    ):
        data = [[t[key] for t in result["trials"] if t["mode"] == mode] for mode in MODES]
        axis.boxplot(data, tick_labels=[LABELS[m] for m in MODES])
        axis.set_title(title)
        axis.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
