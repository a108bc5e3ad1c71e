"""Unit tests of the benchmark package's own logic: no model, no server, no timing assertions."""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bench import agent_latency, audio_formats, chunker_cost, playback, report, transport_sizes
from bench.__main__ import main
from bench.record import Result, load_results, save_result
from bench.runner import BENCHMARKS, benchmark_module
from bench.summary import change_pct, describe, percentile, ratio
from bench.texts import CLIPS, REPLY, REPLY_SENTENCES
from speech.chunker import IncrementalSentenceChunker
from speech.frontend import speech_pieces


def test_the_reply_has_the_seeds_shape() -> None:
    # REFERENCE.md §3: 267 characters, four sentences.
    assert len(REPLY) == 267
    chunker = IncrementalSentenceChunker()
    sentences = [*chunker.feed(REPLY), chunker.flush()]
    assert tuple(sentences) == REPLY_SENTENCES
    assert len(CLIPS) == 24 == len(set(CLIPS))


def test_seed_timing_releases_the_first_sentence_and_the_reply_on_time() -> None:
    from reference_agent.scripted import tokenize

    first_token_s, tokens_per_s = agent_latency.seed_timing(REPLY, 0.6, 5.0)
    pieces = tokenize(REPLY)
    chunker = IncrementalSentenceChunker()
    release = next(i for i, piece in enumerate(pieces) if chunker.feed(piece))
    assert first_token_s > 0
    assert first_token_s + release / tokens_per_s == pytest.approx(0.6, abs=1e-3)
    assert first_token_s + (len(pieces) - 1) / tokens_per_s == pytest.approx(5.0, abs=1e-3)


def test_seed_timing_refuses_impossible_rhythms() -> None:
    with pytest.raises(ValueError, match="more than one sentence"):
        agent_latency.seed_timing("Just one sentence here.", 0.6, 5.0)
    with pytest.raises(ValueError, match="cannot arrive"):
        agent_latency.seed_timing("A first sentence with many words in it. Then more.", 0.1, 5.0)


def test_underrun_counts_the_silence_a_real_time_player_waits() -> None:
    second = 48_000  # one second of 24 kHz PCM16
    # On time: the second piece arrives while the first still plays.
    assert playback.underrun([(10.0, second), (10.5, second)]) == (0.0, 0)
    # Late: the first second ends at 11.0, the next arrives at 11.25, then one arrives in time.
    assert playback.underrun([(10.0, second), (11.25, second), (11.5, second)]) == (0.25, 1)
    # Two stalls add up; buffered audio is never dropped.
    assert playback.underrun([(0.0, second // 2), (1.0, second // 2), (2.0, second)]) == (1.0, 2)
    assert playback.underrun([]) == (0.0, 0)


def test_summaries() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 95) == 5
    assert percentile([0, 10], 95) == pytest.approx(9.5)
    with pytest.raises(ValueError):
        percentile([], 50)
    assert describe([3.0, 1.0, 2.0]) == {"n": 3, "median": 2.0, "p95": 2.9, "min": 1.0, "max": 3.0}
    assert describe([])["median"] is None
    assert ratio(6.0, 2.0) == 3.0 and ratio(None, 2.0) is None and ratio(1.0, 0.0) is None
    assert change_pct(156.7, 329.3) == -52.4  # the seed's own figure


def _decoded_seconds(data: bytes, container_format: str) -> float:
    import av

    with av.open(io.BytesIO(data), format=container_format) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    return samples / rate


@pytest.mark.parametrize(
    ("encode", "container_format"), [(transport_sizes.encode_mp3, "mp3"), (transport_sizes.encode_aac, "mp4")]
)
def test_encoders_produce_playable_audio_of_the_same_length(encode, container_format) -> None:
    seconds = 2.0
    t = np.arange(int(24_000 * seconds)) / 24_000
    pcm = (np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes()
    data = encode(pcm)
    assert len(data) < len(pcm) / 5  # compressed at all: 48 or 32 kbps against 384
    # Encoder delay and padding add at most a few frames.
    assert _decoded_seconds(data, container_format) == pytest.approx(seconds, abs=0.15)


def test_aac_is_fragmented_mp4() -> None:
    data = transport_sizes.encode_aac(b"\0\0" * 24_000)
    boxes = []
    offset = 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        boxes.append(data[offset + 4 : offset + 8].decode("ascii"))
        offset += size
    assert boxes[:2] == ["ftyp", "moov"] and "moof" in boxes and "mdat" in boxes


def test_chunker_cost_feeds_every_character() -> None:
    text = chunker_cost.text_of_length(1_000)
    assert len(text) == 1_000
    _, chunks = chunker_cost.feed_by_character(text)
    assert chunks == len(IncrementalSentenceChunker().feed(text)) + 1


def test_frontend_cost_feeds_a_markdown_reply_every_character() -> None:
    text = chunker_cost.text_of_length(1_000, chunker_cost.MARKDOWN_REPLY)
    assert len(text) == 1_000 and "```" in text and "$1,234.50" in text
    _, pieces = chunker_cost.feed_frontend_by_character(text)
    assert pieces == len(list(speech_pieces(text, "a")))


def test_results_round_trip_and_report(tmp_path: Path) -> None:
    result = Result("chunker_cost", chunker_cost.TITLE, config={"sizes": [10, 20]})
    result.trials = [
        {"trial": 1, "chars": 10, "ms": 1.0, "chunks": 1},
        {"trial": 1, "chars": 20, "ms": 2.0, "chunks": 2},
    ]
    result.figures = {
        "10": {**describe([1.0]), "us_per_char": 100.0},
        "20": {**describe([2.0]), "us_per_char": 100.0},
        "time_ratio": 2.0,
        "size_ratio": 2.0,
    }
    path = save_result(result, tmp_path / "results")
    assert json.loads(path.read_text())["environment"]["cpu_count"] >= 1
    assert load_results(tmp_path / "results")["chunker_cost"]["figures"]["time_ratio"] == 2.0
    output = report.write_report(tmp_path / "results", tmp_path / "RESULTS.md")
    text = output.read_text()
    assert "| 10 | 1.0 ms | 100.00 µs | 1 |" in text
    for name in BENCHMARKS:
        assert benchmark_module(name).TITLE in text
    assert "Not run yet" in text and "Not run: `bench/gpu.sh`" in text


def test_markdown_table_escapes_pipes() -> None:
    assert report.markdown_table(["a"], [["x|y"]]).splitlines()[-1] == "| x\\|y |"


def test_command_line_refuses_unknown_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_benchmark"]) == 2
    assert "unknown benchmark" in capsys.readouterr().out


def test_agent_latency_underrun_of_a_stream_follows_its_t_ms() -> None:
    import base64

    second = base64.b64encode(b"\x00\x00" * 24_000).decode()  # one second of 24 kHz audio
    events = [
        {"type": "agent_start", "t_ms": 0},
        {"type": "audio_chunk", "t_ms": 500.0, "data": second},
        {"type": "audio_chunk", "t_ms": 1500.0, "data": second},  # just in time
        {"type": "audio_chunk", "t_ms": 2750.0, "data": second},  # 250 ms late
    ]
    assert agent_latency._playback(events) == (250.0, 1)
    assert agent_latency._playback([{"type": "agent_start"}]) == (None, None)


def _agent_result(modes: tuple[str, ...]) -> dict:
    figures = {}
    for condition in ("local", "hop"):
        figures[condition] = {"batch_over_bidi": 4.0, "stream_over_bidi": 1.01, "failed_trials": 0}
        for i, mode in enumerate(modes):
            figures[condition][f"{mode}_first_audio_ms"] = describe([1000.0 * (i + 1)])
            figures[condition][f"{mode}_underrun_ms"] = describe([0.0])
            figures[condition][f"{mode}_stalls"] = 0
    return {"figures": figures, "seed": {"local_ratio": 2.4, "deployed_ratio": 3.5}}


def test_agent_latency_tables_show_the_three_modes_side_by_side() -> None:
    (first, underrun) = agent_latency.tables(_agent_result(agent_latency.MODES))
    headers, rows = first
    assert headers[1:4] == ["bidi, median", "stream, median", "batch, median"]
    assert rows[0][1:4] == ["1,000 ms", "2,000 ms", "3,000 ms"] and "1.01×" in rows[0]
    assert [row[1] for row in underrun[1]] == ["bidi", "stream", "batch"] * 2
    # A result saved before stream mode existed still renders (bidi and batch only).
    legacy = _agent_result(("bidi", "batch"))
    for condition in legacy["figures"].values():
        for mode in ("bidi", "batch"):
            del condition[f"{mode}_underrun_ms"]
    ((headers, _),) = agent_latency.tables(legacy)
    assert "stream / bidi" not in headers


# --- timing stream: legs, old vs new playback, segmentation quality -------------------------------------


def test_simulator_legs_split_first_audio_from_the_wire_log() -> None:
    from bench import simulator_overhead
    from simulator.wirelog import WireRecord

    records = [
        WireRecord(0.000, "container", "out", "connect"),
        WireRecord(0.010, "client", "in", "PayloadPart"),  # the request reaches the simulator
        WireRecord(0.0102, "container", "out", "text"),
        WireRecord(0.012, "container", "in", "text", data_type="UTF8"),  # synthesis_start
        WireRecord(0.0125, "client", "out", "PayloadPart", data_type="UTF8"),
        WireRecord(0.300, "container", "in", "binary", data_type="BINARY"),  # first audio at the simulator
        WireRecord(0.3004, "client", "out", "PayloadPart", data_type="BINARY"),
    ]
    legs = simulator_overhead.legs(records, started_at=100.0, sent_at=100.008, first_audio_at=100.302)
    assert legs == {
        "client_to_simulator": pytest.approx(2.0),
        "simulator_in": pytest.approx(0.2),
        "container_round_trip": pytest.approx(1.8),
        "model": pytest.approx(288.0),
        "simulator_out": pytest.approx(0.4),
        "simulator_to_client": pytest.approx(1.6),
    }
    assert sum(legs.values()) == pytest.approx((100.302 - 100.008) * 1000)
    assert simulator_overhead.legs(records[:3], 100.0, 100.008, 100.302) is None  # no audio: no legs


def test_playback_compares_old_and_new_per_reply_and_session_count(tmp_path: Path) -> None:
    config = playback.Config(trials=2, replies={"a": ("x",), "b": ("y",)}, sessions=(1, 2))
    trials = [
        {"trial": t, "mode": mode, "reply": reply, "sessions": n, "session": s, "underrun_ms": u,
         "stalls": int(u > 0), "first_audio_ms": 100.0 + u, "audio_s": 5.0, "delivery_s": 3.0}
        for t in (1, 2)
        for reply in ("a", "b")
        for n in (1, 2)
        for s in range(1, n + 1)
        for mode, u in (("old", 400.0 * n), ("new", 0.0 if n == 1 else 50.0 * t))
    ]  # fmt: skip
    figures = playback._figures(trials, config)
    assert (
        figures["a|1|old"]["underrun_ms"]["median"] == 400.0
        and figures["a|1|new"]["underrun_ms"]["median"] == 0
    )
    assert figures["b|2|new"]["underrun_ms"] == {
        "n": 4,
        "median": 75.0,
        "p95": 100.0,
        "min": 50.0,
        "max": 100.0,
    }
    assert figures["first_audio|new"]["median"] == 100.0
    result = {"config": asdict(config), "figures": figures, "trials": trials}
    (headers, rows), (_, first_rows) = playback.tables(result)
    assert headers[2:4] == ["underrun, median (old)", "underrun, median (new)"]
    assert rows[0] == ["a", "1", "400 ms", "0 ms", "1 / 0", "2"]
    assert first_rows[-1] == ["all replies", "500 ms", "100 ms", "4"]
    playback.plot(result, tmp_path / "playback.png")
    assert (tmp_path / "playback.png").read_bytes().startswith(b"\x89PNG")


def test_segmentation_quality_figures_and_tables() -> None:
    from bench import segmentation_quality

    segment = {"units": 27.0, "words": 5, "chars": 31, "boundary": "PREPOSITION", "first": False}
    end = {**segment, "units": 58.0, "boundary": "END"}
    at_cut = {"after_word": 5, "before_ms": -70.0, "across_ms": 30.0}
    trials = [
        {"reply": "r", "sentence": 1, "chars": 14, "units": 12.0, "unsegmented_s": 1.6, "segmented_s": 1.6,
         "segments": [{**segment, "units": 12.0, "boundary": "END", "first": True}]},
        {"reply": "r", "sentence": 2, "chars": 101, "units": 85.0, "unsegmented_s": 5.8, "segmented_s": 5.9,
         "segments": [segment, end], "word_drift_ms": [0.0, 10.0, -30.0], "cuts": [at_cut]},
    ]  # fmt: skip
    figures = segmentation_quality._figures(trials)
    assert (figures["sentences"], figures["sentences_cut"]) == (2, 1)
    assert figures["duration_change_ms"]["max"] == 100.0 and figures["word_drift_ms"]["max"] == 30.0
    assert (
        figures["drift_before_cut_ms"]["median"] == -70.0
        and figures["gap_change_at_cut_ms"]["median"] == 30.0
    )
    (_, rows), (_, summary) = segmentation_quality.tables({"trials": trials, "figures": figures})
    assert rows[1][2] == "27u preposition | 58u end" and rows[1][4] == "5.90 s (+100 ms)"
    assert summary[0] == ["sentences cut / spoken", "1 / 2"]


def test_word_drift_lines_words_up_and_splits_it_at_the_cuts() -> None:
    from bench import segmentation_quality
    from protocol.messages import Word

    plain = [("a", 0.30, 0.50), ("b", 0.52, 0.70), ("c", 0.71, 0.90)]
    words = [Word("a", 0.30, 0.50), Word("b", 0.60, 0.78), Word("c", 0.79, 0.98)]
    segments = [{"words": 1}, {"words": 2}]
    drift = segmentation_quality._word_drift(plain, words, segments)
    assert drift["word_drift_ms"] == [0.0, 80.0, 80.0]
    assert drift["cuts"] == [{"after_word": 1, "before_ms": 0.0, "across_ms": 80.0}]
    assert segmentation_quality._word_drift(plain, words[:2], segments) == {}


@pytest.mark.parametrize("fmt", ["mp3", "opus", "flac", "aac"])
def test_audio_formats_knows_when_a_body_first_holds_audio(fmt: str) -> None:
    """First audio over HTTP is the first prefix that decodes to a sample: not the container's header."""
    from reference_server.encoders import FormatEncoder

    t = np.arange(12_000) / 24_000
    pcm = (np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes()
    encoder = FormatEncoder(fmt, 24_000)
    body = encoder.encode(pcm) + encoder.flush()
    assert audio_formats.decodes(body, fmt)
    assert not audio_formats.decodes(body[:20], fmt)  # a header, or a piece of the first frame
    assert audio_formats.decodes(b"\0" * 46, "wav") and not audio_formats.decodes(b"\0" * 44, "wav")


def test_audio_formats_table_sets_the_seed_beside_its_rows() -> None:
    result = Result(audio_formats.NAME, audio_formats.TITLE)
    first = describe([120.0, 140.0])
    result.figures = {
        "pcm_mulaw 8 kHz": {
            "bytes": 16_000,
            "audio_s": 2.0,
            "bytes_per_s": 8000,
            "kbps": 64.0,
            "first_audio_ms": first,
        },
        "aac sse": {
            "bytes": 12_000,
            "audio_s": 2.0,
            "bytes_per_s": 6000,
            "kbps": 48.0,
            "first_audio_ms": first,
        },
    }
    result.seed = {"aac": {"kbps": 41.6, "base64_kbps": 55.1}}
    [(headers, rows)] = audio_formats.tables(json.loads(result.to_json()))
    assert headers[0] == "mode" and rows == [
        ["pcm_mulaw 8 kHz", "8,000", "64.0", "130", "139", "2", ""],
        ["aac sse", "6,000", "48.0", "130", "139", "2", "55.1"],
    ]


def test_report_orders_sections_by_number_with_letters_after() -> None:
    names = [name for name in report._ORDER if name in ("transport_sizes", "audio_formats", "throughput")]
    assert names == ["transport_sizes", "audio_formats", "throughput"]


def test_agent_latency_ideal_is_the_writing_time_plus_one_first_sentence_pass() -> None:
    ideal = agent_latency.ideal_figures(600.0, 5000.0, 500.0)
    assert ideal == {"bidi_ms": 1100.0, "batch_ms": 5500.0, "batch_over_bidi": 5.0}
    # The hop adds its latency each way to both: the request going out, the first audio coming back.
    hop = agent_latency.ideal_figures(600.0, 5000.0, 500.0, hop_ms=25.0)
    assert hop == {"bidi_ms": 1150.0, "batch_ms": 5550.0, "batch_over_bidi": round(5550 / 1150, 2)}
    # A slower pass lowers the ideal ratio: the ratio alone does not compare across machines.
    assert agent_latency.ideal_figures(600.0, 5000.0, 1500.0)["batch_over_bidi"] == 3.10
    assert agent_latency.ideal_figures(None, 5000.0, 500.0)["batch_over_bidi"] is None


def test_agent_latency_first_sentence_is_what_the_chunker_releases_first() -> None:
    assert agent_latency.first_sentence(REPLY) == REPLY_SENTENCES[0]
    assert agent_latency.first_sentence("No end here") == "No end here"


def test_agent_latency_first_sentence_written_is_the_delta_that_releases_it() -> None:
    events = [
        {"type": "agent_start", "t_ms": 0},
        {"type": "text_delta", "t_ms": 300.0, "text": "Hello "},
        {"type": "text_delta", "t_ms": 400.0, "text": "there. "},
        {"type": "text_delta", "t_ms": 500.0, "text": "More "},
        {"type": "text_delta", "t_ms": 600.0, "text": "text."},
    ]
    assert agent_latency._written_ms(events) == 500.0
    assert agent_latency._written_ms(events[:3]) is None


def test_capacity_is_the_largest_level_that_holds_with_every_level_below(tmp_path: Path) -> None:
    from bench import capacity

    config = asdict(capacity.Config())

    def level(n: int, first_p95: float, silence_p95: float, failed: tuple[str, ...] = ()) -> dict:
        figures = {"first_audio_ms": describe([first_p95]), "underrun_ms": describe([silence_p95])}
        return {
            "conversations": n,
            "replies": 2 * n,
            "failed": list(failed),
            "streams_open": n / 2,
            **figures,
        }

    held, slow, stalled, broken = (
        level(2, 900.0, 100.0),
        level(4, 1600.0, 0.0),
        level(4, 1000.0, 600.0),
        level(1, 100.0, 0.0, ("SessionError: internal_error",)),
    )
    assert capacity.holds(held, config)
    assert not capacity.holds(slow, config) and not capacity.holds(stalled, config)
    assert not capacity.holds(broken, config)
    for each in (held, slow):
        each["holds"] = capacity.holds(each, config)
    result = asdict(
        Result(capacity.NAME, capacity.TITLE, figures={"levels": [held, slow], "capacity": 2}, config=config)
    )
    ((_, rows),) = capacity.tables(result)
    assert rows == [
        ["2", "900 / 900 ms", "100 / 100 ms", "1.0", "4", "yes"],
        ["4", "1,600 / 1,600 ms", "0 / 0 ms", "2.0", "8", "no"],
    ]
    assert "**2 concurrent conversation(s)**" in capacity.notes(result)[0]
    assert "1.0 bidirectional streams are open at once" in capacity.notes(result)[0]
    capacity.plot(result, tmp_path / "capacity.png")
    assert (tmp_path / "capacity.png").read_bytes().startswith(b"\x89PNG")
