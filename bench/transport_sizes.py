"""Benchmark 3: bytes on the wire for 24 synthesized clips, per audio encoding.

The seed encoded 24 clips four ways and compared totals (REFERENCE.md §3): raw PCM16 at 24 kHz, the same
base64-encoded (as an SSE or JSON transport carries it), MP3 at 48 kbps and AAC at 32 kbps in
fragmented MP4. Here the clips (:data:`bench.texts.CLIPS`) are synthesized by the reference server in
one WebSocket session, then each clip is encoded on its own, as a transport would send it:

* ``pcm``: the server's PCM16LE bytes as received;
* ``mp3``: lameenc (LAME), 48 kbps, mono, 24 kHz in (the server's own MP3 rate, PROTOCOL.md §11.5);
* ``aac``: FFmpeg's AAC encoder through PyAV, 32 kbps, mono, muxed into MP4 with
  ``movflags=frag_keyframe+empty_moov`` (fragmented, so a player can start before the end).

Base64 sizes are per clip (each clip base64-encoded on its own, padded), summed; bit rates are total
bytes × 8 over the clips' total duration.
"""

from __future__ import annotations

import base64
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import seeds
from bench.channels import BYTES_PER_SECOND, converse, direct_channel
from bench.record import Result
from bench.texts import CLIPS

__all__ = [
    "ENCODINGS",
    "NAME",
    "SMOKE",
    "TITLE",
    "Config",
    "encode_aac",
    "encode_mp3",
    "plot",
    "run",
    "tables",
]

NAME = "transport_sizes"
TITLE = "3. Transport sizes: 24 clips as PCM, base64, MP3 and AAC"

SAMPLE_RATE = 24_000
MP3_KBPS = 48
AAC_KBPS = 32
ENCODINGS = ("pcm", "mp3", "aac")

#: The seed's per-sentence check (REFERENCE.md §3): PCM bytes and seconds of its first three clips.
SEED_CHECK = {
    "Hello there.": (73_200, 1.525),
    "This is a deployment check.": (108_000, 2.250),
    "It has three sentences.": (98_400, 2.050),
}


@dataclass(frozen=True)
class Config:
    """Attributes: clips: the texts synthesized (one request each, one session)."""

    clips: tuple[str, ...] = CLIPS


SMOKE = Config(clips=CLIPS[:2])


def encode_mp3(pcm: bytes, kbps: int = MP3_KBPS, sample_rate: int = SAMPLE_RATE) -> bytes:
    """PCM16LE mono → MP3 (CBR ``kbps``) with lameenc, LAME's quality 2 (high quality, slower)."""
    import lameenc

    encoder = lameenc.Encoder()
    encoder.set_bit_rate(kbps)
    encoder.set_in_sample_rate(sample_rate)
    encoder.set_channels(1)
    encoder.set_quality(2)
    return bytes(encoder.encode(pcm) + encoder.flush())


def encode_aac(pcm: bytes, kbps: int = AAC_KBPS, sample_rate: int = SAMPLE_RATE) -> bytes:
    """PCM16LE mono → AAC-LC (``kbps``) in fragmented MP4, with PyAV (FFmpeg's native AAC encoder).

    ``frag_keyframe+empty_moov`` writes an empty ``moov`` first and the audio in ``moof``/``mdat``
    fragments, the form a streaming transport can play before the end.
    """
    import av
    import numpy as np

    samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
    buffer = io.BytesIO()
    with av.open(
        buffer, mode="w", format="mp4", options={"movflags": "frag_keyframe+empty_moov"}
    ) as container:
        stream = container.add_stream("aac", rate=sample_rate)
        stream.bit_rate = kbps * 1000
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = sample_rate
        for packet in stream.encode(frame):  # PyAV converts s16 to the encoder's planar float
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def _b64_len(data: bytes) -> int:
    return len(base64.b64encode(data))


async def run(context: Any, config: Config = Config()) -> Result:
    """Synthesize the clips in one session, encode each three ways, total the sizes."""
    server = await context.servers.get("onnx")
    result = Result(
        NAME,
        TITLE,
        config={
            **asdict(config),
            "clip_count": len(config.clips),
            "server": server.settings(),
            "mp3_kbps": MP3_KBPS,
            "aac_kbps": AAC_KBPS,
        },
    )
    async with direct_channel(server.ws_url) as channel:
        timelines = await converse(channel, config.clips, keep_pcm=True)
    totals = {encoding: {"bytes": 0, "base64_bytes": 0} for encoding in ENCODINGS}
    duration_s = 0.0
    for timeline in timelines:
        assert timeline.pcm is not None
        pcm = bytes(timeline.pcm)
        encoded = {"pcm": pcm, "mp3": encode_mp3(pcm), "aac": encode_aac(pcm)}
        clip_s = len(pcm) / BYTES_PER_SECOND
        duration_s += clip_s
        row: dict[str, Any] = {"text": timeline.text, "duration_s": round(clip_s, 3)}
        for encoding, data in encoded.items():
            totals[encoding]["bytes"] += len(data)
            totals[encoding]["base64_bytes"] += _b64_len(data)
            row[f"{encoding}_bytes"] = len(data)
        result.trials.append(row)
    for encoding in ENCODINGS:
        totals[encoding]["kbps"] = round(totals[encoding]["bytes"] * 8 / duration_s / 1000, 1)
        totals[encoding]["base64_kbps"] = round(totals[encoding]["base64_bytes"] * 8 / duration_s / 1000, 1)
    result.figures = {"clips": len(timelines), "duration_s": round(duration_s, 3), **totals}
    seed_total_s = seeds.SIZES["pcm"].total_bytes / BYTES_PER_SECOND
    result.seed = {
        "duration_s": round(seed_total_s, 3),
        **{key: asdict(row) for key, row in seeds.SIZES.items()},
        "sentence_check": {text: {"pcm_bytes": b, "duration_s": s} for text, (b, s) in SEED_CHECK.items()},
    }
    return result


def _int(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def tables(result: dict[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """Totals per encoding beside the seed's; then the per-sentence check the seed published."""
    figures, seed = result["figures"], result["seed"]
    headers = ["encoding", "bytes (ours)", "base64 bytes", "kbps", "seed bytes", "seed base64", "seed kbps"]
    rows = [
        [
            "total audio",
            f"{figures['duration_s']:.1f} s ({figures['clips']} clips)",
            "",
            "",
            f"{seed['duration_s']:.1f} s (24 clips)",
            "",
            "",
        ]
    ]
    names = {
        "pcm": "raw PCM16 24 kHz (base64 in the next column)",
        "mp3": f"MP3 {MP3_KBPS} kbps (lameenc)",
        "aac": f"AAC {AAC_KBPS} kbps, fragmented MP4 (PyAV)",
    }
    for encoding in ENCODINGS:
        ours, theirs = figures[encoding], seed[encoding]
        rows.append(
            [
                names[encoding],
                _int(ours["bytes"]),
                _int(ours["base64_bytes"]),
                f"{ours['kbps']:.1f} (base64 {ours['base64_kbps']:.1f})",
                _int(theirs["total_bytes"]),
                _int(theirs["base64_bytes"]),
                f"{theirs['kbps']:.1f}",
            ]
        )
    check_rows = []
    by_text = {t["text"]: t for t in result["trials"]}
    for text, reference in seed["sentence_check"].items():
        ours = by_text.get(text)
        check_rows.append(
            [
                f'"{text}"',
                "–" if ours is None else f"{ours['pcm_bytes']:,} B, {ours['duration_s']:.3f} s",
                f"{reference['pcm_bytes']:,} B, {reference['duration_s']:.3f} s",
            ]
        )
    return [(headers, rows), (["sentence (PCM16, 24 kHz)", "ours", "seed"], check_rows)]


def notes(result: dict[str, Any]) -> list[str]:
    """What the totals can and cannot be compared with."""
    return [
        "The seed's clip texts are not published; ours are 24 short assistant replies of about the same "
        "length, so compare bit rates and the ratios between encodings, not the byte totals.",
        "Each clip is encoded and base64-encoded on its own, as a transport sends it; AAC's bit rate "
        "includes the fragmented MP4 boxes, which is why it exceeds the encoder's 32 kbps.",
    ]


def plot(result: dict[str, Any], path: Path) -> None:
    """Bit rate per encoding (raw and base64), ours beside the seed's."""
    from bench.plots import grouped_bars

    figures, seed = result["figures"], result["seed"]
    categories = [
        "PCM16",
        "PCM16 base64",
        f"MP3 {MP3_KBPS}k",
        f"MP3 {MP3_KBPS}k base64",
        f"AAC {AAC_KBPS}k fMP4",
        f"AAC {AAC_KBPS}k base64",
    ]
    ours = []
    theirs = []
    for encoding in ENCODINGS:
        ours += [figures[encoding]["kbps"], figures[encoding]["base64_kbps"]]
        rate = seed[encoding]["kbps"]
        theirs += [rate, round(rate * seed[encoding]["base64_bytes"] / seed[encoding]["total_bytes"], 1)]
    grouped_bars(
        path,
        "kbps (log scale)",
        categories,
        {"ours": ours, "seed (REFERENCE.md §3)": theirs},
        title=f"{figures['clips']} clips, {figures['duration_s']:.1f} s of audio",
        log=True,
    )
