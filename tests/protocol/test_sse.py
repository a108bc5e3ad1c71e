"""Tests for protocol.sse: WHATWG event-stream parsing, event encoding, strict base64."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.sse import SSEDecoder, SSEError, SSEEvent, decode_base64_strict, encode_event

PROPERTY = settings(max_examples=300, deadline=None)


def decode_all(data: bytes, pieces: list[int] | None = None) -> list[SSEEvent]:
    """Decode ``data`` fed at the given cut offsets (one piece when None)."""
    decoder = SSEDecoder()
    cuts = sorted(pieces or [])
    events: list[SSEEvent] = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        events.extend(decoder.feed(data[a:b]))
    events.extend(decoder.close())
    return events


# --- encoding ----------------------------------------------------------------------------------------


def test_encode_json_event_as_in_the_spec() -> None:
    # PROTOCOL.md §11.4: exactly "event: <type>\ndata: <one-line JSON>\n\n".
    data = {"type": "audio_chunk", "seq": 0, "data": "AAA=", "text": "line\nbreak é"}
    encoded = encode_event(data, event="audio_chunk")
    line = '{"type":"audio_chunk","seq":0,"data":"AAA=","text":"line\\nbreak é"}'
    assert encoded == f"event: audio_chunk\ndata: {line}\n\n".encode()
    assert decode_all(encoded) == [SSEEvent(data=line, event="audio_chunk")]


def test_encode_multiline_text_and_id() -> None:
    encoded = encode_event("a\nb\r\nc\rd", event="x", id="7")
    assert encoded == b"event: x\nid: 7\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert decode_all(encoded) == [SSEEvent(data="a\nb\nc\nd", event="x", id="7")]
    assert encode_event("") == b"data: \n\n"
    assert decode_all(encode_event("")) == [SSEEvent(data="")]
    assert decode_all(encode_event("  two spaces")) == [SSEEvent(data="  two spaces")]


@pytest.mark.parametrize(
    "kwargs",
    [{"event": "a\nb"}, {"event": "a\rb"}, {"id": "1\n"}, {"id": "a\0b"}],
)
def test_encode_rejects_values_that_would_break_the_stream(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        encode_event("x", **kwargs)


def test_encode_rejects_non_json_data() -> None:
    with pytest.raises(ValueError):
        encode_event({"x": float("nan")})
    with pytest.raises(TypeError):
        encode_event(b"bytes")  # type: ignore[arg-type]


# --- decoding: the WHATWG examples and rules ---------------------------------------------------------


def test_whatwg_examples() -> None:
    # HTML standard §9.2.6 examples.
    assert decode_all(b"data: YHOO\ndata: +2\ndata: 10\n\n") == [SSEEvent("YHOO\n+2\n10")]
    stream = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n"
    assert decode_all(stream) == [SSEEvent("first event", id="1"), SSEEvent("second event", id=None)]
    assert decode_all(b"data\n\ndata\ndata\n\ndata:") == [SSEEvent(""), SSEEvent("\n")]
    assert decode_all(b"data:test\n\ndata: test\n\n") == [SSEEvent("test"), SSEEvent("test")]


def test_event_type_id_persistence_and_fields() -> None:
    stream = (
        b"event: start\ndata: 1\nid: a\n\n"
        b"data: 2\n\n"  # type resets, id persists
        b"event: nodata\n\n"  # no data: not dispatched
        b"id: b\n\n"  # not dispatched, but the id changes
        b"id: bad\0id\ndata: 3\n\n"  # an id with NUL is ignored
        b"retry: 1500\nretry: 1x\nfoo: bar\ndata: 4\n\n"
    )
    decoder = SSEDecoder()
    assert decoder.feed(stream) == [
        SSEEvent("1", event="start", id="a"),
        SSEEvent("2", id="a"),
        SSEEvent("3", id="b"),
        SSEEvent("4", id="b"),
    ]
    assert decoder.retry == 1500
    assert decoder.last_event_id == "b"


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_line_ends(line_end: bytes) -> None:
    stream = b"data: a" + line_end + b"data: b" + line_end + line_end
    assert decode_all(stream) == [SSEEvent("a\nb")]


def test_cr_and_lf_in_separate_reads_make_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The LF completes the CR above; it is not an empty line, so nothing is dispatched yet.
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n\r") == [SSEEvent("a\nb")]
    assert decoder.feed(b"\n") == []  # the LF of that last CRLF
    assert not decoder.incomplete


def test_bom_is_dropped_once_even_when_split() -> None:
    assert decode_all(b"\xef\xbb\xbfdata: x\n\n", [1, 2]) == [SSEEvent("x")]
    # A second BOM is part of the field name "\ufeffdata", which is unknown and ignored.
    assert decode_all(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []


def test_multibyte_characters_split_across_reads() -> None:
    text = "é€😀 ﬁ"
    stream = f"data: {text}\n\n".encode()
    for cut in range(len(stream) + 1):
        assert decode_all(stream, [cut]) == [SSEEvent(text)]
    assert decode_all(stream, list(range(len(stream)))) == [SSEEvent(text)]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert decode_all(b"data: a\xffb\n\n") == [SSEEvent("a\ufffdb")]


def test_close_discards_an_unfinished_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: done\n\ndata: half") == [SSEEvent("done")]
    assert decoder.incomplete
    assert decoder.close() == []
    with pytest.raises(RuntimeError):
        decoder.feed(b"\n\n")
    decoder = SSEDecoder()
    decoder.feed(b"data: x\n")
    assert decoder.incomplete  # a field without its blank line
    decoder = SSEDecoder()
    decoder.feed(b": only a comment\n")
    assert not decoder.incomplete


def test_event_size_limit() -> None:
    decoder = SSEDecoder(max_event_chars=100)
    decoder.feed(b"data: " + b"x" * 50 + b"\n\n")
    with pytest.raises(SSEError):
        decoder.feed(b"data: " + b"y" * 200)
    decoder = SSEDecoder(max_event_chars=100)
    with pytest.raises(SSEError):
        for _ in range(10):
            decoder.feed(b"data: " + b"z" * 20 + b"\n")


# --- property: any events, any line ends, any split ---------------------------------------------------

names = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=8)
ids = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=["Cs"]), max_size=6)
texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
json_data = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=3)
events = st.tuples(st.one_of(texts, json_data), st.none() | names, st.none() | ids)


def expected_events(specs: list[tuple[object, str | None, str | None]]) -> list[SSEEvent]:
    out = []
    last_id = ""
    for data, event, id_ in specs:
        if id_ is not None:
            last_id = id_
        if isinstance(data, dict):
            # What the encoder writes: compact JSON.
            body = encode_event(data).decode()[len("data: ") : -2]
        else:
            body = str(data).replace("\r\n", "\n").replace("\r", "\n")
        out.append(SSEEvent(body, event or "message", last_id or None))
    return out


@PROPERTY
@given(
    st.lists(events, max_size=6),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_round_trip_with_any_split(specs, line_end, with_bom, with_comments, data) -> None:
    parts = []
    for payload, event, id_ in specs:
        if with_comments:
            parts.append(b": keep-alive\n")
        parts.append(encode_event(payload, event=event, id=id_))
    stream = b"".join(parts)
    # The encoder writes LF only and the data holds no raw CR or LF, so this changes every line end.
    stream = stream.replace(b"\n", line_end)
    if with_bom:
        stream = b"\xef\xbb\xbf" + stream
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    expected = expected_events(specs)
    assert decode_all(stream) == expected
    assert decode_all(stream, cuts) == expected


@PROPERTY
@given(st.lists(st.tuples(texts, st.none() | names, st.none() | ids), max_size=5), st.data())
def test_decodes_what_sse_starlette_writes(specs, data) -> None:
    sse_starlette = pytest.importorskip("sse_starlette")
    sep = data.draw(st.sampled_from(["\r\n", "\n", "\r"]))
    stream = b"".join(
        sse_starlette.ServerSentEvent(payload, event=event, id=id_, sep=sep).encode()
        for payload, event, id_ in specs
    )
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    assert decode_all(stream, cuts) == expected_events(specs)


# --- base64 ------------------------------------------------------------------------------------------


@PROPERTY
@given(st.binary(max_size=64))
def test_base64_round_trip(raw: bytes) -> None:
    encoded = base64.b64encode(raw)
    assert decode_base64_strict(encoded.decode()) == raw
    assert decode_base64_strict(encoded) == raw


@pytest.mark.parametrize(
    "text",
    [
        "QQ",
        "QQ=",
        "QQ===",
        "QR==",
        "QUI=x",
        "QQ==QQ==",
        " QQ==",
        "QQ==\n",
        "-_8=",
        "+/8",
        "=QQ=",
        "é",
        "QUJD\nREVG",
    ],
)
def test_base64_rejects_anything_not_canonical(text: str) -> None:
    with pytest.raises(ValueError, match="invalid base64"):
        decode_base64_strict(text)
