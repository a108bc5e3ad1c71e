"""sagemaker_transport.eventstream, cross-checked against botocore, smithy and the official bidi client."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import struct
import uuid
import zlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sagemaker_transport.eventstream import (
    MAX_HEADERS_BYTES,
    MAX_PAYLOAD_BYTES,
    Byte,
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    HeaderType,
    Long,
    PayloadPart,
    Short,
    decode_message,
    encode_headers,
    encode_message,
    exception_message,
    header_type,
    is_envelope,
    parse_payload_part,
    payload_part_message,
    signed_envelope,
    unwrap_envelope,
)

PROPERTY = settings(max_examples=200, deadline=None)
UTC = dt.UTC

# --- strategies --------------------------------------------------------------------------------------

header_names = st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode()) <= 255)
timestamps = st.integers(-(10**12), 4 * 10**12).map(
    lambda ms: dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms)
)
header_values = st.one_of(
    st.booleans(),
    st.integers(-128, 127).map(Byte),
    st.integers(-(2**15), 2**15 - 1).map(Short),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Long),
    st.binary(max_size=40),
    st.text(max_size=20),
    timestamps,
    st.uuids(),
)
headers_maps = st.dictionaries(header_names, header_values, max_size=6)
messages = st.tuples(headers_maps, st.binary(max_size=200))


def typed(headers) -> dict[str, tuple[HeaderType, object]]:
    """Header values with their wire types, so Byte(1) and 1 differ."""
    return {name: (header_type(value), value) for name, value in headers.items()}


def decode_stream(data: bytes, cuts: list[int] | None = None) -> list[EventStreamMessage]:
    decoder = EventStreamDecoder()
    out: list[EventStreamMessage] = []
    points = sorted(cuts or [])
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        out.extend(decoder.feed(data[a:b]))
    decoder.close()
    return out


def frame(raw_headers: bytes, payload: bytes = b"") -> bytes:
    """An independent writer for hand-made (possibly invalid) header sections."""
    prelude = struct.pack("!II", 16 + len(raw_headers) + len(payload), len(raw_headers))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + raw_headers + payload
    return head + struct.pack("!I", zlib.crc32(head))


# --- our own round trips -----------------------------------------------------------------------------


def test_wire_layout_of_a_small_message() -> None:
    data = encode_message({"a": True, "n": 7}, b"xy")
    assert data == frame(b"\x01a\x00" + b"\x01n\x04\x00\x00\x00\x07", b"xy")
    assert encode_message({}, b"") == frame(b"")
    assert len(encode_message({}, b"")) == 16


def test_every_header_type_round_trips_with_its_type() -> None:
    headers = {
        "t": True,
        "f": False,
        "b": Byte(-128),
        "s": Short(32767),
        "i": -(2**31),
        "l": Long(2**63 - 1),
        "ba": b"\x00\xff",
        "str": "héllo",
        "ts": dt.datetime(2026, 5, 9, 7, 36, 11, 123000, tzinfo=UTC),
        "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    }
    message = decode_message(encode_message(headers, b"p"))
    assert typed(message.headers) == typed(headers)
    assert list(message.headers) == list(headers)  # wire order kept
    assert message.payload == b"p"


def test_timestamps_keep_milliseconds_and_need_a_timezone() -> None:
    t = dt.datetime(2024, 1, 1, 0, 0, 0, 999999, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    decoded = decode_message(encode_message({"t": t})).headers["t"]
    assert decoded == t.replace(microsecond=999000)  # floor to the millisecond, same instant
    before_epoch = dt.datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC)
    assert decode_message(encode_message({"t": before_epoch})).headers["t"] == before_epoch.replace(
        microsecond=999000
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        encode_message({"t": dt.datetime(2024, 1, 1)})


@pytest.mark.parametrize(
    ("headers", "payload", "error"),
    [
        ({"": 1}, b"", ValueError),
        ({"x" * 256: 1}, b"", ValueError),
        ({"i": 2**31}, b"", ValueError),
        ({"b": b"x" * 32768}, b"", ValueError),
        ({"s": "x" * 32768}, b"", ValueError),
        ({"f": 1.5}, b"", TypeError),
        ({}, bytes(MAX_PAYLOAD_BYTES + 1), ValueError),
        ({f"h{i}": b"x" * 30000 for i in range(5)}, b"", ValueError),  # headers over 128 KiB
    ],
)
def test_encoder_refuses_what_decoders_refuse(headers, payload, error) -> None:
    with pytest.raises(error):
        encode_message(headers, payload)


def test_sized_int_ranges() -> None:
    for cls, bits in ((Byte, 8), (Short, 16), (Long, 64)):
        assert cls(-(2 ** (bits - 1))) == -(2 ** (bits - 1))
        with pytest.raises(ValueError):
            cls(2 ** (bits - 1))
    assert repr(Byte(3)) == "Byte(3)"


@PROPERTY
@given(messages)
def test_round_trip(case) -> None:
    headers, payload = case
    message = decode_message(encode_message(headers, payload))
    assert typed(message.headers) == typed(headers)
    assert message.payload == payload
    assert EventStreamMessage(headers, payload).encode() == encode_message(headers, payload)


@PROPERTY
@given(st.lists(messages, max_size=5), st.data())
def test_any_split_decodes_the_same(cases, data) -> None:
    stream = b"".join(encode_message(h, p) for h, p in cases)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    decoded = decode_stream(stream, cuts)
    assert [(typed(m.headers), m.payload) for m in decoded] == [(typed(h), p) for h, p in cases]


def test_byte_at_a_time() -> None:
    stream = encode_message({"a": "b"}, bytes(range(256)) * 40) * 3
    decoder = EventStreamDecoder()
    out = []
    for i in range(len(stream)):
        out.extend(decoder.feed(stream[i : i + 1]))
        assert decoder.pending < len(stream) // 3
    decoder.close()
    assert len(out) == 3 and all(m.payload == bytes(range(256)) * 40 for m in out)


@PROPERTY
@given(messages, st.data())
def test_any_flipped_byte_is_rejected(case, data) -> None:
    headers, payload = case
    encoded = bytearray(encode_message(headers, payload))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    decoder = EventStreamDecoder()
    # CRC-32 detects every error burst of up to 32 bits, so nothing different can come out.
    with pytest.raises(EventStreamError):
        decoder.feed(bytes(encoded))
        decoder.close()


# --- limits and malformed input ----------------------------------------------------------------------


def _prelude(total: int, headers_len: int) -> bytes:
    head = struct.pack("!II", total, headers_len)
    return head + struct.pack("!I", zlib.crc32(head))


@pytest.mark.parametrize(
    ("prelude", "message"),
    [
        (_prelude(16 + MAX_PAYLOAD_BYTES + 1, 0), "payload of"),
        (_prelude(16 + MAX_HEADERS_BYTES + 1, MAX_HEADERS_BYTES + 1), "headers of"),
        (_prelude(15, 0), "inconsistent lengths"),
        (_prelude(20, 5), "inconsistent lengths"),
        (b"\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00", "prelude CRC"),
    ],
)
def test_bad_preludes_fail_as_soon_as_the_prelude_arrives(prelude: bytes, message: str) -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError, match=message):
        decoder.feed(prelude)  # no payload bytes needed to know


def test_configurable_limits() -> None:
    decoder = EventStreamDecoder(max_payload_bytes=10, max_headers_bytes=8)
    assert len(encode_headers({"abc": "d"})) == 8
    assert decoder.feed(encode_message({"abc": "d"}, b"0123456789"))  # exactly at the limits
    with pytest.raises(EventStreamError, match="payload"):
        EventStreamDecoder(max_payload_bytes=10).feed(encode_message({}, b"x" * 11))
    with pytest.raises(EventStreamError, match="headers"):
        EventStreamDecoder(max_headers_bytes=8).feed(encode_message({"abc": "de"}))


@pytest.mark.parametrize(
    ("raw_headers", "message"),
    [
        (b"\x01a\x0a", "unknown value type 10"),
        (b"\x00", "empty name"),
        (b"\x05ab", "runs past"),
        (b"\x01a\x04\x00\x00", "runs past"),
        (b"\x01a\x07\x00\x05abc", "runs past"),
        (b"\x01a\x06\x00", "runs past"),
        (b"\x01a\x09" + b"\x00" * 15, "runs past"),
        (b"\x01a\x07\x00\x01\xff", "not UTF-8"),
        (b"\x02\xff\xfe\x00", "not UTF-8"),
        (b"\x01a\x00\x01a\x01", "duplicate header"),
        (b"\x01a\x08\x7f\xff\xff\xff\xff\xff\xff\xff", "out of range"),
    ],
)
def test_malformed_headers(raw_headers: bytes, message: str) -> None:
    with pytest.raises(EventStreamError, match=message):
        EventStreamDecoder().feed(frame(raw_headers))


def test_errors_keep_earlier_messages_and_stick() -> None:
    good = encode_message({"n": 1}, b"ok")
    bad = bytearray(encode_message({"n": 2}, b"no"))
    bad[-1] ^= 1
    decoder = EventStreamDecoder()
    with pytest.raises(EventStreamError, match="message CRC") as info:
        decoder.feed(good + bytes(bad))
    assert [m.payload for m in info.value.messages] == [b"ok"]
    with pytest.raises(EventStreamError, match="already failed"):
        decoder.feed(good)
    with pytest.raises(EventStreamError, match="already failed"):
        decoder.close()


def test_truncated_stream_is_reported_at_close() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(encode_message({}, b"abc")[:-1]) == []
    assert decoder.pending == 18
    with pytest.raises(EventStreamError, match="ended inside a message"):
        decoder.close()
    with pytest.raises(EventStreamError, match="exactly one message, found 2"):
        decode_message(encode_message({}) * 2)


# --- SageMaker bidi helpers --------------------------------------------------------------------------


def test_payload_part_headers_and_defaults() -> None:
    message = decode_message(payload_part_message(b'{"text":"hi"}', "UTF8", "PARTIAL", "pad"))
    assert list(message.headers.items()) == [
        (":message-type", "event"),
        (":event-type", "PayloadPart"),
        ("DataType", "UTF8"),
        ("CompletionState", "PARTIAL"),
        ("P", "pad"),
        (":content-type", "application/octet-stream"),
    ]
    part = parse_payload_part(message)
    assert part == PayloadPart(b'{"text":"hi"}', "UTF8", "PARTIAL", "pad")
    assert part.is_utf8 and not part.is_complete
    bare = parse_payload_part(decode_message(payload_part_message(b"\x01\x02")))
    assert bare == PayloadPart(b"\x01\x02", "BINARY", "COMPLETE", None)  # REFERENCE.md §1 defaults
    assert not bare.is_utf8 and bare.is_complete
    empty = decode_message(payload_part_message(b""))
    assert ":content-type" not in empty.headers
    with pytest.raises(ValueError):
        payload_part_message(b"x", data_type="TEXT")
    with pytest.raises(ValueError):
        payload_part_message(b"x", completion_state="DONE")


def test_parse_payload_part_refuses_other_messages() -> None:
    with pytest.raises(EventStreamError, match="not a PayloadPart"):
        parse_payload_part(decode_message(exception_message("ModelStreamError", {"Message": "x"})))
    odd = encode_message({":message-type": "event", ":event-type": "PayloadPart", "DataType": Byte(1)})
    with pytest.raises(EventStreamError, match="must be a string"):
        parse_payload_part(decode_message(odd))


def test_exception_message() -> None:
    message = decode_message(exception_message("ModelStreamError", {"Message": "boom", "ErrorCode": "X"}))
    assert message.message_type == "exception"
    assert message.exception_type == "ModelStreamError"
    assert message.content_type == "application/json"
    assert message.payload == b'{"Message":"boom","ErrorCode":"X"}'
    assert decode_message(exception_message("InternalStreamFailure", '{"Message":"x"}')).payload == (
        b'{"Message":"x"}'
    )
    with pytest.raises(ValueError):
        exception_message("ModelStreamError", "not json")
    with pytest.raises(ValueError):
        exception_message("ModelStreamError", b"[1]")


def test_envelope_round_trip() -> None:
    inner = payload_part_message(b"abc", "BINARY")
    date = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)
    envelope = decode_message(signed_envelope(inner, date, b"\x01" * 32))
    assert is_envelope(envelope)
    assert list(envelope.headers) == [":date", ":chunk-signature"]
    assert envelope.headers[":date"] == date
    assert unwrap_envelope(envelope) == decode_message(inner)
    assert unwrap_envelope(decode_message(signed_envelope(b"", date, b"\x02" * 32))) is None
    plain = decode_message(inner)
    assert not is_envelope(plain) and unwrap_envelope(plain) is plain


def test_malformed_envelopes() -> None:
    wrong_types = decode_message(encode_message({":date": "today", ":chunk-signature": b"s"}, b""))
    with pytest.raises(EventStreamError, match="signing envelope"):
        unwrap_envelope(wrong_types)
    date = dt.datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(EventStreamError):
        unwrap_envelope(decode_message(signed_envelope(b"garbage", date, b"s")))
    two = payload_part_message(b"a") * 2
    with pytest.raises(EventStreamError, match="exactly one"):
        unwrap_envelope(decode_message(signed_envelope(two, date, b"s")))


# --- interoperability: botocore ----------------------------------------------------------------------


def _botocore_view(value: object) -> object:
    """What botocore's decoder returns for each of our header values."""
    if isinstance(value, dt.datetime):
        return (value - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    return value


@PROPERTY
@given(st.lists(messages, min_size=1, max_size=4), st.data())
def test_botocore_decodes_our_messages(cases, data) -> None:
    eventstream = pytest.importorskip("botocore.eventstream")
    stream = b"".join(encode_message(h, p) for h, p in cases)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    buffer = eventstream.EventStreamBuffer()
    decoded = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        buffer.add_data(stream[a:b])
        decoded.extend(buffer)
    assert len(decoded) == len(cases)
    for message, (headers, payload) in zip(decoded, cases, strict=True):
        assert message.headers == {k: _botocore_view(v) for k, v in headers.items()}
        assert message.payload == payload


# --- interoperability: smithy (the official bidi client's event-stream library) ----------------------


@PROPERTY
@given(messages)
def test_smithy_decodes_our_messages(case) -> None:
    events = pytest.importorskip("smithy_aws_event_stream.events")
    headers, payload = case
    event = events.Event.decode(io.BytesIO(encode_message(headers, payload)))
    assert event.message.payload == payload
    assert event.message.headers == headers


def _smithy_value(value: object) -> object:
    """Our header value in smithy's sized-int classes."""
    events = pytest.importorskip("smithy_aws_event_stream.events")
    for ours, theirs in ((Byte, events.Byte), (Short, events.Short), (Long, events.Long)):
        if isinstance(value, ours):
            return theirs(int(value))
    return value


@PROPERTY
@given(messages)
@example(({"t": dt.datetime(1970, 1, 1, 0, 0, 1, 1000, tzinfo=UTC)}, b""))
def test_we_decode_smithy_messages_byte_for_byte(case) -> None:
    events = pytest.importorskip("smithy_aws_event_stream.events")
    headers, payload = case
    smithy_headers = {name: _smithy_value(value) for name, value in headers.items()}
    encoded = events.EventMessage(headers=smithy_headers, payload=payload).encode()
    message = decode_message(encoded)
    # smithy writes timestamps as int(value.timestamp() * 1000), a float product that can land one
    # millisecond low (1.001 s -> 1000 ms); compare with what it put on the wire, as its decoder reads it.
    on_the_wire = events.Event.decode(io.BytesIO(encoded)).message.headers
    assert {name: (header_type(value), value) for name, value in message.headers.items()} == {
        name: (header_type(headers[name]), value) for name, value in on_the_wire.items()
    }
    assert message.payload == payload
    assert encoded == encode_message(message.headers, payload)


# --- interoperability: the official SageMaker bidi client (aws-sdk-sagemaker-runtime-http2) ----------


class _Collector:
    """Stands in for the HTTP/2 request body the client writes events to."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))


class _StaticCredentials:
    async def get_identity(self, *, properties):
        from smithy_aws_core.identity import AWSCredentialsIdentity

        return AWSCredentialsIdentity(access_key_id="AKIDEXAMPLE", secret_access_key="secret")


@pytest.fixture
def sagemaker():
    """The official client's models, codec and event publisher/receiver."""
    models = pytest.importorskip("aws_sdk_sagemaker_runtime_http2.models")
    config = pytest.importorskip("aws_sdk_sagemaker_runtime_http2.config")
    protocols = pytest.importorskip("smithy_aws_core.aio.protocols")
    aio = pytest.importorskip("smithy_aws_event_stream.aio")
    return models, protocols.RestJsonClientProtocol(config._PROTOCOL_SETTINGS).payload_codec, aio


PARTS = [
    (b'{"text":"Hello."}', "UTF8", "COMPLETE", None),
    (b"\x01\x02" * 100, "BINARY", "PARTIAL", "pppp"),
    (b"\x03\x04", None, None, None),
    (b"", None, "COMPLETE", None),
]


def test_payload_parts_are_byte_identical_to_the_official_client(sagemaker) -> None:
    models, codec, aio = sagemaker
    body = _Collector()
    publisher = aio.AWSEventPublisher(payload_codec=codec, async_writer=body)

    async def send_all() -> None:
        for payload, data_type, state, p in PARTS:
            part = models.RequestPayloadPart(bytes_=payload, data_type=data_type, completion_state=state, p=p)
            await publisher.send(models.RequestStreamEventPayloadPart(value=part))

    asyncio.run(send_all())
    assert body.writes == [payload_part_message(*part) for part in PARTS]


def test_we_read_the_official_clients_signed_input_stream(sagemaker) -> None:
    models, codec, aio = sagemaker
    signers = pytest.importorskip("aws_sdk_signers.signers")
    events = pytest.importorskip("smithy_aws_event_stream.events")
    signer = signers.AsyncEventSigner(
        initial_signature=b"0" * 64, event_encoder_cls=events.EventHeaderEncoder
    )
    signing = aio.SigningConfig(
        signer=signer,
        signing_properties={"region": "us-east-1", "service": "sagemaker"},
        identity_resolver=_StaticCredentials(),
        identity_properties={},
    )
    body = _Collector()
    publisher = aio.AWSEventPublisher(payload_codec=codec, async_writer=body, signing_config=signing)

    async def send_all() -> None:
        for payload, data_type, state, p in PARTS:
            part = models.RequestPayloadPart(bytes_=payload, data_type=data_type, completion_state=state, p=p)
            await publisher.send(models.RequestStreamEventPayloadPart(value=part))
        await publisher.close()  # the signed empty end-of-input envelope

    asyncio.run(send_all())
    stream = b"".join(body.writes)
    envelopes = decode_stream(stream, list(range(0, len(stream), 7)))
    assert len(envelopes) == len(PARTS) + 1
    received = [unwrap_envelope(envelope) for envelope in envelopes]
    assert received[-1] is None
    expected = [
        PayloadPart(payload, data_type or "BINARY", state or "COMPLETE", p)
        for payload, data_type, state, p in PARTS
    ]
    assert [parse_payload_part(message) for message in received[:-1]] == expected
    for envelope, write in zip(envelopes, body.writes, strict=True):
        signature = envelope.headers[":chunk-signature"]
        assert isinstance(signature, bytes) and len(signature) == 32  # HMAC-SHA256
        # Our envelope writer reproduces the signer's bytes exactly.
        assert signed_envelope(envelope.payload, envelope.headers[":date"], signature) == write


def test_the_official_client_reads_our_output_stream(sagemaker) -> None:
    models, codec, aio = sagemaker
    types_ = pytest.importorskip("smithy_core.aio.types")

    def receiver(stream: bytes):
        return aio.AWSEventReceiver(
            payload_codec=codec,
            source=types_.AsyncBytesReader(stream),
            deserializer=models._ResponseStreamEventDeserializer().deserialize,
        )

    async def receive_all(stream: bytes) -> list[object]:
        rx = receiver(stream)
        out = []
        while (event := await rx.receive()) is not None:
            out.append(event)
        return out

    stream = payload_part_message(b'{"type":"synthesis_start"}', "UTF8", "COMPLETE") + payload_part_message(
        b"\x01\x02", "BINARY", "PARTIAL"
    )
    received = asyncio.run(receive_all(stream))
    assert [type(e).__name__ for e in received] == ["ResponseStreamEventPayloadPart"] * 2
    assert received[0].value == models.ResponsePayloadPart(
        bytes_=b'{"type":"synthesis_start"}', data_type="UTF8", completion_state="COMPLETE"
    )
    assert received[1].value.bytes_ == b"\x01\x02" and received[1].value.completion_state == "PARTIAL"

    error = exception_message(
        "ModelStreamError", {"Message": "container failed", "ErrorCode": "StreamBroken"}
    )
    with pytest.raises(models.ModelStreamError) as info:
        asyncio.run(receive_all(error))
    assert (info.value.message, info.value.error_code) == ("container failed", "StreamBroken")

    failure = exception_message("InternalStreamFailure", {"Message": "internal"})
    with pytest.raises(models.InternalStreamFailure) as info2:
        asyncio.run(receive_all(failure))
    assert info2.value.message == "internal"
