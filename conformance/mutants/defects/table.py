"""The one-defect mutants as a table, in spec order: each :class:`~conformance.mutants.defects.core.Defect`
names the requirement ids it breaks, the cases that must report it ``FAILED`` and its hooks (from the
concept modules beside this one)."""

from __future__ import annotations

from typing import Any

from conformance.mutants.defects.audio import (
    _blend_across_languages,
    _blend_refusal_unnamed,
    _DriftingBlendSynthesizer,
    _drop_unknown_encoding,
    _DropsFigures,
    _echo_blend_as_sent,
    _EqualWeightsSynthesizer,
    _FirstVoiceSynthesizer,
    _g711_brackets,
    _g711_json_first_frame,
    _LanguageBlindSynthesizer,
    _mulaw_as_alaw,
    _NoWordTimings,
    _ReadsMarkdownAloud,
    _remember_blends,
    _UnescapesFirst,
    _with_session,
)
from conformance.mutants.defects.conditions import CONDITION_DEFECTS
from conformance.mutants.defects.conditions2 import CONDITION2_DEFECTS
from conformance.mutants.defects.controls import (
    _bad_marks_ignored,
    _capabilities_unasked,
    _describe_held,
    _describe_released,
    _later_segment,
    _list_unspoken_voice,
    _remember_marked,
    _words_dropped_when_marked,
)
from conformance.mutants.defects.core import (
    Defect,
    is_cancel,
    is_request,
    json_object,
    map_controls,
    refuse,
    stall_after,
    twice_if,
)
from conformance.mutants.defects.invocations import (
    _aac_without_adts,
    _container_sse_says_pcm,
    _error_body_string,
    _flac_without_streaminfo,
    _g711_sent_as_pcm16,
    _http_rewrite,
    _mulaw_as_audio_basic,
    _no_header_bytes,
    _ogg_pages_bad_crc,
    _pcm_as_l16,
    _sse_crlf,
    _sse_seq_from_one,
    _streamed_wav_exact_sizes,
    _wav_eight_bits,
    _whole_wav_unknown_sizes,
)
from conformance.mutants.defects.requests import (
    _KNOWN,
    _answers_after_close,
    _audio_after_complete,
    _cancel_sticks,
    _drop_cancelled_start,
    _duplicate_swallowed,
    _extra_text_audio,
    _idle_cancel_refused,
    _ignores_active_cancel,
    _ignores_queued_cancel,
    _queue_never_full,
    _remember_ids,
    _renamed_ids,
    _text_checked_first,
    _unknown_cancel_swallowed,
)
from conformance.mutants.defects.run_level import RUN_LEVEL_DEFECTS
from conformance.mutants.defects.spans import SPAN_DEFECTS
from conformance.mutants.defects.utterances import (
    _UTTERANCE_TYPES,
    _blank_fragment_refused,
    _halves_not_joined,
    _high_half_refused,
    _lone_low_half_dropped,
)

_R = ("R6.3-2", "R6.3-3")


def _lexicon_and_id_both_wrong(obj: dict[str, Any]) -> bool:
    """A ``lexicon`` message whose ``request_id`` is present but not a string, and whose ``lexicon`` is not
    an object of strings (§4.5, §14.3)."""
    if obj.get("type") != "lexicon" or obj.get("request_id") is None or isinstance(obj["request_id"], str):
        return False
    lexicon = obj.get("lexicon")
    return not isinstance(lexicon, dict) or any(not isinstance(v, str) for v in lexicon.values())


DEFECTS: tuple[Defect, ...] = (
    Defect(
        "refuses-unknown-members",
        "Refuses a request with a member it does not know (invalid_field) (§1.4)",
        ("R1.4-1",),
        incoming=refuse("invalid_field", lambda o: is_request(o) and bool(set(o) - _KNOWN)),
    ),
    Defect(
        "refuses-null",
        "Refuses a request whose optional member is null instead of treating it as absent (§1.4)",
        ("R1.4-2",),
        incoming=refuse("invalid_field", lambda o: is_request(o) and any(v is None for v in o.values())),
    ),
    Defect(
        "refuses-integral-float",
        "Refuses sample_rate 24000.0 (an integer written with a fraction) (§1.4)",
        ("R1.4-3",),
        incoming=refuse("invalid_sample_rate", lambda o: isinstance(o.get("sample_rate"), float)),
    ),
    Defect(
        "cancel-invalid-field",
        "Refuses every cancel with invalid_field: neither offers cancel nor says unknown_type (§1.5)",
        ("R1.5-2",),
        incoming=refuse("invalid_field", is_cancel),
    ),
    Defect(
        "refuses-null-type",
        'Refuses a request whose type is null or absent (only "synthesize" is read as a request) (§4)',
        ("R4-1a",),
        incoming=refuse("unknown_type", lambda o: o.get("type") is None and "text" in o),
    ),
    Defect(
        "speed-as-invalid-field",
        "Refuses a speed out of range with invalid_field instead of invalid_speed (§4.1)",
        ("R4.1-5h",),
        incoming=lambda s, o: (
            {**o, "speed": "fast"}
            if isinstance(o.get("speed"), (int, float))
            and not isinstance(o.get("speed"), bool)
            and not 0.5 <= o["speed"] <= 2.0
            else None
        ),
    ),
    Defect(
        "accepts-stale",
        "Ignores request_timestamp: stale requests are spoken, not refused with request_stale (§4.1)",
        ("R4.1-9", "R4.1-5t"),
        incoming=lambda s, o: (
            {k: v for k, v in o.items() if k != "request_timestamp"}
            if isinstance(o.get("request_timestamp"), (int, float, str))
            else None
        ),
    ),
    Defect(
        "refuses-future",
        "Refuses a request_timestamp in the future with request_stale (§4.1)",
        ("R4.1-10",),
        incoming=refuse(
            "request_stale",
            lambda o: (
                isinstance(o.get("request_timestamp"), (int, float))
                and o["request_timestamp"] > __import__("time").time() + 60
            ),
        ),
    ),
    Defect(
        "duplicate-swallowed",
        "Neither refuses nor answers a request whose id is already queued or active (§4.1)",
        ("R4.1-7a", "R4.1-7b"),
        incoming=_duplicate_swallowed,
    ),
    Defect(
        "queue-never-full",
        "Swallows requests beyond max_queue instead of refusing them with queue_full (§4.1)",
        ("R4.1-11a",),
        incoming=_queue_never_full,
    ),
    Defect(
        "assigned-ids-renamed",
        "Assigns ids of the form req-<N> instead of r<N> to requests without one (§4.1)",
        ("R4.1-8c",),
        incoming=_remember_ids,
        outgoing=_renamed_ids,
    ),
    Defect(
        "refuses-long-text",
        "Refuses texts over 500 characters with text_too_long although max_text_chars is 10,000 (§4.1)",
        ("R4.1-1",),
        incoming=refuse("text_too_long", lambda o: isinstance(o.get("text"), str) and len(o["text"]) > 500),
    ),
    Defect(
        "idle-cancel-refused",
        "Answers a cancel-all on an idle session with unknown_request (§4.2)",
        ("R4.2-4b",),
        incoming=_idle_cancel_refused,
    ),
    Defect(
        "cancel-sticks",
        "A cancel-all on an idle session also cancels the next request (§4.2)",
        ("R4.2-8", "R4.2-4a"),
        incoming=_cancel_sticks,
    ),
    Defect(
        "active-cancel-ignored",
        "Ignores the cancel of the active request and speaks it to the end (§4.2)",
        ("R4.2-6a", "R4.2-6b"),
        incoming=_ignores_active_cancel,
    ),
    Defect(
        "queued-cancel-ignored",
        "Ignores the cancel of a queued request and speaks it in full (§4.2)",
        ("R4.2-7a", "R4.2-7b", "R4.2-7c", "R4.2-1"),
        where=("R4.2-7a",),
        incoming=_ignores_queued_cancel,
    ),
    Defect(
        "cancelled-without-start",
        "A request cancelled while queued gets its synthesis_complete without a synthesis_start (§4.2)",
        ("R4.2-5a",),
        where=("R4.2-7a",),
        outgoing=_drop_cancelled_start,
    ),
    Defect(
        "unknown-cancel-swallowed",
        "Swallows a cancel naming no queued or active request instead of refusing it (§4.2)",
        ("R4.2-2d",),
        incoming=_unknown_cancel_swallowed,
    ),
    Defect(
        "control-as-binary",
        "Sends control frames as BINARY messages (§3.2)",
        ("R3.2-4",),
        outgoing=lambda s, frames: [f.encode() if isinstance(f, str) else f for f in frames],
    ),
    Defect(
        "start-not-schema-valid",
        'Sends synthesis_start with "channels": "mono", which its schema forbids (§3.2, §5)',
        ("R3.2-1", "R5-1"),
        outgoing=map_controls(
            lambda o: {**o, "channels": "mono"} if o.get("type") == "synthesis_start" else o
        ),
    ),
    Defect(
        "huge-control",
        "Pads synthesis_complete past 1 MiB with an unknown member (§3.2)",
        ("R3.2-2",),
        outgoing=map_controls(
            lambda o: {**o, "padding": "x" * 1_100_000} if o.get("type") == "synthesis_complete" else o
        ),
    ),
    Defect(
        "audio-in-text",
        "Sends a little audio (8 bytes of silence) in a TEXT frame in every bracket (§3.3.1)",
        ("R3.3.1-5",),
        outgoing=_extra_text_audio,
    ),
    Defect(
        "wrong-voice",
        'Reports "af_heart" in synthesis_start whatever voice was asked for (§5.1)',
        ("R5.1-1b",),
        outgoing=map_controls(
            lambda o: {**o, "voice": "af_heart"} if o.get("type") == "synthesis_start" else o
        ),
    ),
    Defect(
        "wrong-audio-bytes",
        "Reports audio_bytes 2 bytes more than it sent (§5.3)",
        ("R5.3-2",),
        outgoing=map_controls(
            lambda o: (
                {**o, "audio_bytes": o["audio_bytes"] + 2} if o.get("type") == "synthesis_complete" else o
            )
        ),
    ),
    Defect(
        "complete-twice",
        "Sends every synthesis_complete twice (§6.1)",
        ("R6.1-1b",),
        outgoing=lambda s, frames: [
            g
            for f in frames
            for g in ((f, f) if (json_object(f) or {}).get("type") == "synthesis_complete" else (f,))
        ],
    ),
    Defect(
        "audio-after-complete",
        "Sends two samples of audio after each synthesis_complete, outside any bracket (§6.1)",
        ("R6.1-2",),
        outgoing=_audio_after_complete,
    ),
    Defect(
        "error-twice",
        "Sends every error frame twice (§6.3)",
        ("R6.3-2a",),
        outgoing=lambda s, frames: [g for f in frames for g in twice_if(f, "error")],
    ),
    Defect(
        "stalls-after-bad-speed",
        "Stops answering requests after it refuses a speed: the refusal killed its synthesis worker, while "
        "error frames and describe are still answered (§6.3)",
        ("R6.3-2c",),
        where=("R4.1-5h",),
        outgoing=stall_after("invalid_speed"),
    ),
    Defect(
        "error-without-id",
        "Leaves request_id null in every error frame, even when the message had a valid one (§6.3)",
        ("R6.3-3b",),
        outgoing=map_controls(lambda o: {**o, "request_id": None} if o.get("type") == "error" else o),
    ),
    Defect(
        "answers-after-close",
        "Refuses messages that arrive after close instead of ignoring them (§7.1)",
        ("R7.1-1a", "R7.1-1b", "R7.1-1c"),
        incoming=_answers_after_close,
    ),
    Defect(
        "close-1001",
        "Closes a drained session with 1001 instead of 1000 (§7.1)",
        ("R7.1-3b",),
        server={"close_code": 1001},
    ),
    Defect(
        "checks-text-first",
        "Checks text before request_id, so a message with both wrong gets text_required (§9.2)",
        ("R9.2-1c",),
        incoming=_text_checked_first,
    ),
    Defect(
        "checks-lexicon-first",
        "Checks a lexicon message's lexicon before its request_id: both wrong gets invalid_lexicon (§9.2)",
        ("R9.2-1f",),
        incoming=refuse("invalid_lexicon", _lexicon_and_id_both_wrong),
    ),
    Defect(
        "accepts-bom",
        "Strips a UTF-8 byte order mark instead of refusing the message with invalid_json (§3.1)",
        ("R3.1-3d",),
        server={"strip_bom": True},
    ),
    Defect(
        "ping-flaps",
        "Answers GET /ping 200 once (enough to be started), then 503 (§2.2)",
        ("R2.2-1a",),
        server={"ping_ok_times": 1},
    ),
    Defect(
        "requires-subprotocol",
        "Refuses the WebSocket upgrade unless the client asks for a subprotocol (§2.3)",
        ("R2.3-3",),
        server={"require_subprotocol": True},
    ),
    Defect(
        "refuses-query",
        "Refuses the WebSocket upgrade when the URL has a query string (§2.1)",
        ("R2.1-2",),
        server={"refuse_query": True},
    ),
    Defect(
        "slow-ping-busy",
        "Answers GET /ping only after 3 s while a synthesis runs (§2.2)",
        ("R2.2-2",),
        server={"ping_delay_busy_s": 3.0},
    ),
    Defect(
        "slow-handshake",
        "Waits 0.6 s before completing the WebSocket handshake (§2.3)",
        ("R2.3-1", "R2.3-2"),
        server={"accept_delay_s": 0.6},
    ),
    Defect(
        "logs-text",
        "Prints every request's text to its output (§13)",
        ("R13-3",),
        server={"log_text": True},
    ),
    Defect(
        "streamed-wav-exact",
        "Writes exact sizes into a streamed WAV header instead of 0xFFFFFFFF (§11.2)",
        ("R11.2-2",),
        http=_http_rewrite(_streamed_wav_exact_sizes),
    ),
    Defect(
        "wav-8-bit-header",
        "Declares 8 bits per sample in the WAV header of 16-bit audio (§11.2)",
        ("R11.2-1",),
        http=_http_rewrite(_wav_eight_bits),
    ),
    Defect(
        "whole-wav-unknown-sizes",
        "Sends a stream: false WAV with the streamed header's 0xFFFFFFFF sizes instead of exact ones (§11.2)",
        ("R11.2-3",),
        http=_http_rewrite(_whole_wav_unknown_sizes),
    ),
    Defect(
        "pcm-as-l16",
        "Labels raw PCM audio/L16 (big-endian by RFC 2586) instead of audio/pcm (§11.3)",
        ("R11.3-1",),
        http=_http_rewrite(_pcm_as_l16),
    ),
    Defect(
        "mulaw-audio-basic",
        "Answers a pcm_mulaw body under Content-Type audio/basic, not RFC 4856's audio/PCMU;rate=<Hz> "
        "(§11.3)",
        ("R11.3-2b", "R11.3-2d"),
        where=("R11.3-2b", "R11.3-2d"),
        http=_http_rewrite(_mulaw_as_audio_basic),
    ),
    Defect(
        "g711-body-pcm16",
        "Labels a pcm_mulaw or pcm_alaw body audio/PCMU or audio/PCMA but sends PCM16 samples (§11.3)",
        ("R11.3-2a", "R11.3-2d"),
        where=("R11.3-2a", "R11.3-2d"),
        http=_http_rewrite(_g711_sent_as_pcm16),
    ),
    Defect(
        "sse-crlf",
        "Ends SSE lines with CRLF (§11.4)",
        ("R11.4-5",),
        http=_http_rewrite(_sse_crlf),
    ),
    Defect(
        "sse-seq-from-1",
        "Numbers SSE audio_chunk events from 1 (§11.4)",
        ("R11.4-6b",),
        http=_http_rewrite(_sse_seq_from_one),
    ),
    Defect(
        "http-error-string",
        'Answers HTTP refusals with {"error": "<code>: <message>"} (the AWS sample\'s shape) (§11.6)',
        ("R11.6-2b",),
        http=_http_rewrite(_error_body_string),
    ),
    Defect(
        "requires-json-type",
        "Refuses POST /invocations unless Content-Type is application/json (415) (§11.1)",
        ("R11.1-1",),
        server={"require_json": True},
    ),
    Defect(
        "mulaw-as-alaw",
        "Answers a pcm_mulaw request with A-law codes: the wrong companding table (§3.3.1, §4.1)",
        ("R4.1-13a",),
        outgoing=_g711_brackets(_mulaw_as_alaw),
    ),
    Defect(
        "g711-json-frame",
        "Sends the G.711 samples 7B 7D ({}) as the first audio frame of a G.711 bracket (§3.3.2)",
        ("R3.3.2-1",),
        where=("R4.1-14a",),
        outgoing=_g711_brackets(_g711_json_first_frame),
    ),
    Defect(
        "ignores-unknown-encoding",
        "Answers a request for an encoding it does not offer in pcm_s16le instead of refusing it (§4.1)",
        ("R4.1-14b", "R4.1-5k"),
        incoming=_drop_unknown_encoding,
    ),
    Defect(
        "blend-ignores-weights",
        "Speaks every voice blend in equal parts, whatever its weights (§4.1)",
        ("R4.1-19a",),
        server={"synth": _EqualWeightsSynthesizer()},
    ),
    Defect(
        "blend-first-voice",
        "Speaks a voice blend in its first voice alone (§4.1)",
        ("R4.1-19a",),
        server={"synth": _FirstVoiceSynthesizer()},
    ),
    Defect(
        "blend-drifts",
        "Speaks a blend it has spoken before 15 % higher each time: the same blend is not the same voice "
        "(§4.1)",
        ("R4.1-19b",),
        server={"synth": _DriftingBlendSynthesizer()},
    ),
    Defect(
        "blend-echo-as-sent",
        "Echoes a blend in synthesis_start as the client wrote it, not in canonical form (§4.1, §5.1)",
        ("R4.1-18",),
        incoming=_remember_blends,
        outgoing=_with_session(_echo_blend_as_sent),
    ),
    Defect(
        "blend-across-languages",
        "Accepts a blend of voices of two languages and speaks it in the first voice (§4.1)",
        ("R4.1-16b",),
        incoming=_blend_across_languages,
    ),
    Defect(
        "blend-refusal-unnamed",
        "Refuses an invalid blend with invalid_voice and a message that names no part of it (§4.1)",
        ("R4.1-17",),
        incoming=_remember_blends,
        outgoing=_with_session(_blend_refusal_unnamed),
    ),
    Defect(
        "lists-unspoken-voice",
        "Lists a voice in capabilities that its requests refuse with invalid_voice (§4.4)",
        ("R4.4-5a",),
        outgoing=map_controls(_list_unspoken_voice),
    ),
    Defect(
        "describe-waits",
        "Answers a describe only once the requests queued or active when it came are completed (§4.4)",
        ("R4.4-2",),
        incoming=_describe_held,
        outgoing=_describe_released,
    ),
    Defect(
        "capabilities-unasked",
        "Sends a capabilities frame unasked, ahead of the first frame of every session (§4.4)",
        ("R4.4-4",),
        outgoing=_capabilities_unasked,
    ),
    Defect(
        "marks-first-only",
        "Sends the marks frame of a request's first segment only (§5.5)",
        ("R5.5-4a",),
        outgoing=map_controls(lambda o: None if _later_segment(o) else o),
    ),
    Defect(
        "marks-spans-from-zero",
        "Gives every segment's marks start_s 0, overlapping the segments before it (§5.5)",
        ("R5.5-6b",),
        outgoing=map_controls(lambda o: {**o, "start_s": 0.0} if _later_segment(o) else o),
    ),
    Defect(
        "marks-drop-words",
        "Leaves words out of synthesis_complete when the request asked for marks (they were in the marks) "
        "(§5.5)",
        ("R5.5-8",),
        incoming=_remember_marked,
        outgoing=_words_dropped_when_marked,
    ),
    Defect(
        "marks-bad-ignored",
        'Ignores a marks member that is not a boolean ("yes") instead of refusing it with invalid_field '
        "(§5.5)",
        ("R5.5-3", "R4.1-5u"),
        incoming=_bad_marks_ignored,
    ),
    Defect(
        "no-words",
        "Lists English with word_timings true but sends no words (§14.1)",
        ("R14.1-2",),
        server={"synth": _NoWordTimings()},
    ),
    Defect(
        "reads-markdown",
        "Reads markdown aloud: hashes, asterisks, underscores, backticks and bullets spoken by name (§14.2)",
        ("R14.2-1",),
        server={"synth": _ReadsMarkdownAloud()},
    ),
    Defect(
        "drops-figures",
        "Drops every digit of the text, as a G2P that cannot read figures does (§14.2)",
        ("R14.2-2",),
        server={"synth": _DropsFigures()},
    ),
    Defect(
        "unescapes-first",
        "Removes backslash escapes before reading markdown: escaped [12] is a citation again, and dropped "
        "(§14.2)",
        ("R14.2-4",),
        server={"synth": _UnescapesFirst()},
    ),
    Defect(
        "sse-no-header-bytes",
        "Leaves header_bytes out of the first audio_chunk of an SSE wav stream (§11.4)",
        ("R11.4-7",),
        http=_http_rewrite(_no_header_bytes),
    ),
    Defect(
        "plain-http-errors",
        "Answers 404 and 405 with the web framework's plain-text bodies, not the one error shape (§11.6)",
        ("R11.6-3",),
        server={"plain_http_errors": True},
    ),
    Defect(
        "flood-holds-the-loop",
        "Parses each client message in 5 ms of CPU and reads every message waiting without handing the "
        "event loop back: one session's flood holds GET /ping and the other sessions (§10.3)",
        ("R10.3-4a", "R10.3-4b"),
        server={"greedy_parse_s": 0.005},
    ),
    Defect(
        "no-reserve",
        "Refuses a new session with too_many_sessions while every slot is held by sessions idle for longer "
        "than idle_eviction_s: idle sockets lock callers out (§7.5)",
        ("R7.5-3",),
        server={"reserve": False},
    ),
    Defect(
        "refuses-busy-handshake",
        "Refuses the WebSocket handshake (403) when max_sessions are open, instead of accepting and then "
        "refusing with too_many_sessions (§2.3)",
        ("R2.3-5",),
        server={"refuse_busy_handshake": True},
    ),
    Defect(
        "too-many-without-frame",
        "Closes a session past max_sessions with 1013 and no too_many_sessions error frame (§9.4)",
        ("R9.4-1",),
        server={"too_many_frame": False},
    ),
    Defect(
        "too-many-stays-open",
        "Sends the fatal too_many_sessions frame to a session past max_sessions, then serves it anyway "
        "(§9.4)",
        ("R9.4-2a", "R9.4-2b"),
        server={"too_many_serves": True},
    ),
    Defect(
        "language-blind",
        "Speaks every language's text with one English-like rule: Japanese and Chinese come out far too "
        "short, as read by a G2P that skips what it cannot read (§14.1)",
        ("R14.1-1",),
        server={"synth": _LanguageBlindSynthesizer()},
    ),
    Defect(
        "opus-bad-page-crc",
        "Sends Ogg pages whose CRC is wrong: a decoder drops every page of the Opus body (§11.7)",
        ("R11.7-2a",),
        where=("R11.7-1",),
        http=_http_rewrite(_ogg_pages_bad_crc),
    ),
    Defect(
        "flac-without-streaminfo",
        "Sends FLAC frames without the fLaC marker and STREAMINFO a FLAC stream starts with (§11.7)",
        ("R11.7-2b",),
        where=("R11.7-1",),
        http=_http_rewrite(_flac_without_streaminfo),
    ),
    Defect(
        "aac-without-adts",
        "Sends raw AAC access units without their ADTS headers: no decoder can frame them (§11.7)",
        ("R11.7-2c",),
        where=("R11.7-1",),
        http=_http_rewrite(_aac_without_adts),
    ),
    Defect(
        "container-sse-says-pcm",
        "Says encoding pcm_s16le in the SSE synthesis_start of an opus, flac or aac stream (§11.4)",
        ("R11.4-6a",),
        http=_http_rewrite(_container_sse_says_pcm),
    ),
    Defect(
        "sse-cuts-units",
        "Cuts the SSE chunks of opus, flac and aac streams every 100 bytes, across Ogg pages, FLAC frames "
        "and ADTS frames (§11.4)",
        ("R11.4-9",),
        server={"cut_units_bytes": 100},
    ),
    Defect(
        "utterance-invalid-field",
        "Offers no utterances but refuses utterance, append, flush and end with invalid_field, not "
        "unknown_type (§15.1)",
        ("R15.1-1",),
        incoming=refuse("invalid_field", lambda o: o.get("type") in _UTTERANCE_TYPES),
        server={"utterances": False},
    ),
    Defect(
        "refuses-high-half",
        "Refuses a fragment ending with a high surrogate half (invalid_json) instead of holding it (§15.2)",
        ("R15.2-2",),
        incoming=_high_half_refused,
    ),
    Defect(
        "halves-not-joined",
        "Speaks the two halves of a surrogate pair split across fragments as two '?' instead of joining "
        "them into one code point (§15.2)",
        ("R15.2-3",),
        incoming=_halves_not_joined,
    ),
    Defect(
        "accepts-lone-low-half",
        "Drops a low surrogate half that begins a fragment while no half is held instead of refusing it "
        "with invalid_json (§15.2)",
        ("R15.2-4e",),
        incoming=_lone_low_half_dropped,
    ),
    Defect(
        "refuses-blank-fragment",
        "Refuses an append, flush or end whose text is whitespace only (text_required), as §4.1 does a "
        "request's text (§15.2)",
        ("R15.2-5",),
        incoming=_blank_fragment_refused,
    ),
    *RUN_LEVEL_DEFECTS,
    *SPAN_DEFECTS,
    *CONDITION_DEFECTS,
    *CONDITION2_DEFECTS,
)
"""Every one-defect mutant of the table, in spec order, then :data:`RUN_LEVEL_DEFECTS`, then
:data:`~conformance.mutants.defects.conditions.CONDITION_DEFECTS`."""
