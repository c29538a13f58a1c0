"""Content properties and field tables: checked when a publish arrives, decoded in linear time,
rewritten by splicing; a message that does not decode costs its own publisher, nobody else."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given, settings, strategies as st
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from gear.broker.errors import AMQPError
from gear.broker.model.checks import check_properties
from gear.wire.properties import Properties, decode_properties, splice_properties
from gear.wire.table import MAX_DEPTH, FieldError, decode_table, encode_table, skip_table
from tests.broker._harness import Client, make_core, names


def _short(text: bytes) -> bytes:
    return bytes((len(text),)) + text


def _table(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _nested(depth: int) -> bytes:
    """A headers table ``{"k": {"k": ...}}`` nested ``depth`` tables deep (as the headers property)."""
    inner = b""
    for _ in range(depth):
        inner = b"\x01kF" + _table(inner)
    return struct.pack(">H", 0x2000) + _table(inner)


def _publish_raw(
    client: Client, queue: str, properties: bytes, body: bytes = b"hi", exchange: str = ""
) -> bytes:
    head = struct.pack(">HHQ", 60, 0, len(body)) + properties
    return (
        frame.marshal(commands.Basic.Publish(exchange=exchange, routing_key=queue), 1)
        + struct.pack(">BHI", 2, 1, len(head))
        + head
        + b"\xce"
        + frame.marshal(ContentBody(body), 1)
    )


def _confirming(core_client: Client, queue: str = "q") -> None:
    core_client.handshake()
    core_client.open_channel(1, confirm=True)
    core_client.send(1, commands.Queue.Declare(queue=queue))


#: Property lists RabbitMQ answers with connection.close 541 INTERNAL_ERROR (checked on 3.10).
UNDECODABLE = {
    "table length past the end": struct.pack(">HI", 0x2000, 100) + b"\x01k",
    "unknown field type": struct.pack(">H", 0x2000) + _table(b"\x01kZ"),
    "NUL field type": struct.pack(">H", 0x2000) + _table(b"\x01a\x00"),
    "shortstr past the end": struct.pack(">H", 0x8000) + b"\x10ab",
    "bytes after the list": struct.pack(">H", 0x8000) + b"\x02ab" + b"junk",
    "a second flag word": struct.pack(">HH", 0x8001, 0) + b"\x04text",
}


@pytest.mark.parametrize("properties", UNDECODABLE.values(), ids=UNDECODABLE.keys())
def test_an_undecodable_property_list_costs_its_publisher_the_connection_and_nobody_anything(
    properties: bytes,
) -> None:
    core, _ = make_core()
    healthy, hostile = Client(core), Client(core)
    _confirming(healthy)
    hostile.handshake()
    hostile.open_channel(1)
    healthy.conn.receive(b"".join(healthy.publish_bytes(1, "", "q", b"%d" % i) for i in range(200)))
    hostile.conn.receive(_publish_raw(hostile, "q", properties))
    healthy.conn.receive(b"".join(healthy.publish_bytes(1, "", "q", b"%d" % i) for i in range(200, 400)))
    acks = healthy.turn()
    closed = hostile.turn()
    assert names(closed) == ["Connection.Close"]
    close = closed[0][1]
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        541,
        "INTERNAL_ERROR",
        0,
        0,
    )
    assert all(name == "Basic.Ack" for name in names(acks))
    assert max(a.delivery_tag for _, a in acks) == 400
    queue = core.vhosts["/"].queues["q"]
    assert [e.message.body for e in queue.ready] == [b"%d" % i for i in range(400)]
    assert core.internal_errors == 0
    assert core.alarm.used == sum(e.message.size for e in queue.ready)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000])
@pytest.mark.parametrize("exchange", ["", "amq.headers", "amq.topic"])
def test_headers_past_the_depth_limit_are_refused_by_name_with_connection_close(
    exchange: str, depth: int
) -> None:
    """A deliberate limit, not bytes that fail to decode: 530 NOT_ALLOWED on basic.publish with a text
    that names it, through any exchange, and the healthy publisher beside it loses nothing."""
    core, _ = make_core()
    healthy, hostile = Client(core), Client(core)
    _confirming(healthy)
    hostile.handshake()
    hostile.open_channel(1)
    hostile.conn.receive(_publish_raw(hostile, "q", _nested(depth), exchange=exchange))
    healthy.conn.receive(b"".join(healthy.publish_bytes(1, "", "q", b"%d" % i) for i in range(10)))
    closed = hostile.turn()
    assert names(closed) == ["Connection.Close"]
    close = closed[0][1]
    assert (close.reply_code, close.class_id, close.method_id) == (530, 60, 40)
    assert close.reply_text == (
        f"NOT_ALLOWED - headers nested deeper than {MAX_DEPTH} levels, "
        "the reference broker's limit (RabbitMQ has none)"
    )
    acks = healthy.turn()
    assert {name for name in names(acks)} == {"Basic.Ack"}
    assert max(a.delivery_tag for _, a in acks) == 10
    assert core.internal_errors == 0


@pytest.mark.parametrize(
    ("expiration", "why"),
    [
        ("abc", "no_integer"),
        ("", "no_integer"),
        ("12x", '{leftover_string,"x"}'),
        ("5 ", '{leftover_string," "}'),
        ("-1", "{value_negative,-1}"),
    ],
)
def test_an_invalid_expiration_is_a_406_on_basic_publish_as_rabbitmq_words_it(
    expiration: str, why: str
) -> None:
    core, _ = make_core()
    client = Client(core)
    _confirming(client)
    properties = struct.pack(">H", 0x0100) + _short(expiration.encode())
    out = client.feed(_publish_raw(client, "q", properties))
    assert names(out) == ["Channel.Close"]
    close = out[0][1]
    assert close.reply_text == f"PRECONDITION_FAILED - invalid expiration '{expiration}': {why}"
    assert (close.reply_code, close.class_id, close.method_id) == (406, 60, 40)


@pytest.mark.parametrize(
    ("expiration", "shown"),
    [(b"\x80", "\\udc80"), (b"1\xff", "1\\udcff"), (b"\xed\xa0\x80", "\\udced\\udca0\\udc80")],
)
def test_an_expiration_that_is_not_utf8_is_a_406_that_shows_its_bytes(expiration: bytes, shown: str) -> None:
    core, _ = make_core()
    client = Client(core)
    _confirming(client)
    out = client.feed(_publish_raw(client, "q", struct.pack(">H", 0x0100) + _short(expiration)))
    assert names(out) == ["Channel.Close"]
    close = out[0][1]
    assert close.reply_text.startswith(f"PRECONDITION_FAILED - invalid expiration '{shown}': ")
    assert (close.reply_code, close.class_id, close.method_id) == (406, 60, 40)
    assert core.internal_errors == 0


@pytest.mark.parametrize("expiration", ["+5", "007", "0", "4294967296"])
def test_expirations_rabbitmq_accepts_are_accepted(expiration: str) -> None:
    core, _ = make_core()
    client = Client(core)
    _confirming(client)
    out = client.feed(_publish_raw(client, "q", struct.pack(">H", 0x0100) + _short(expiration.encode())))
    assert names(out) == ["Basic.Ack"]


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        (b"\x02CCS" + _table(b"q"), 'invalid message: {unacceptable_type_in_header,"CC",longstr}'),
        (b"\x03BCCI\x00\x00\x00\x01", 'invalid message: {unacceptable_type_in_header,"BCC",signedint}'),
    ],
)
def test_cc_and_bcc_headers_must_be_arrays(entry: bytes, text: str) -> None:
    core, _ = make_core()
    client = Client(core)
    _confirming(client)
    out = client.feed(_publish_raw(client, "q", struct.pack(">H", 0x2000) + _table(entry)))
    assert names(out) == ["Channel.Close"]
    assert out[0][1].reply_text == f"PRECONDITION_FAILED - {text}"


def test_what_rabbitmq_accepts_is_accepted_and_forwarded_byte_for_byte() -> None:
    accepted = [
        struct.pack(">H", 0x0001),  # the continuation bit alone (RabbitMQ ignores it)
        struct.pack(">H", 0x8000) + b"\x02\xff\xfe",  # content_type that is not UTF-8
        struct.pack(">H", 0x2000) + _table(b"\x01\xffS" + _table(b"x")),  # a header key that is not UTF-8
        struct.pack(">H", 0x2000) + _table(b"\x01aS" + _table(b"x") + b"\x01aS" + _table(b"y")),  # twice
        struct.pack(">H", 0x1000) + b"\x07",  # delivery_mode 7: not persistent (4.x)
        struct.pack(">HQ", 0x0040, 2**63),  # a timestamp past the year 9999
        _nested(MAX_DEPTH - 1),
    ]
    core, _ = make_core()
    client = Client(core)
    _confirming(client)
    for properties in accepted:
        assert names(client.feed(_publish_raw(client, "q", properties))) == ["Basic.Ack"]
    queue = core.vhosts["/"].queues["q"]
    assert [e.message.properties for e in queue.ready] == accepted
    client.conn.receive(frame.marshal(commands.Basic.Consume(queue="q", no_ack=True), 1))
    core.run_turn()
    delivered = client.conn.data_to_send()
    for properties in accepted:
        assert struct.pack(">HHQ", 60, 0, 2) + properties + b"\xce" in delivered


def test_a_wide_table_decodes_whole() -> None:
    entries = b"".join(b"\x02k" + bytes((i % 200 + 1,)) + b"t\x01" for i in range(20_000))
    table = decode_table(entries, 0, len(entries))
    assert len(table) == 200
    assert all(value is True for value in table.values())
    skip_table(entries, 0, len(entries))


def test_dead_lettering_changes_only_the_headers_it_must() -> None:
    core, _ = make_core()
    client = Client(core)
    client.handshake()
    client.open_channel(1)
    client.send(1, commands.Queue.Declare(queue="dead"))
    client.send(
        1,
        commands.Queue.Declare(
            queue="q", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}
        ),
    )
    kept = b"\x04wideL" + struct.pack(">q", 7) + b"\x03rawS" + _table(b"\xff\x00")
    original = (
        struct.pack(">H", 0x8000 | 0x2000 | 0x0100 | 0x0040)
        + _short(b"text/plain")
        + _table(kept)
        + _short(b"60000")
        + struct.pack(">Q", 1_700_000_000)
    )
    client.feed(_publish_raw(client, "q", original))
    client.send(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    client.send(1, commands.Basic.Reject(delivery_tag=1, requeue=False))
    raw = core.vhosts["/"].queues["dead"].ready[0].message.properties
    assert kept in raw, "the publisher's own header bytes are kept as they were"
    assert _short(b"text/plain") in raw
    assert struct.pack(">Q", 1_700_000_000) in raw
    props = _decode(raw)
    assert props.expiration is None
    assert props.headers is not None
    assert props.headers["wide"] == 7
    assert props.headers["raw"] == b"\xff\x00"
    assert props.headers["x-death"][0]["reason"] == "rejected"
    assert props.headers["x-first-death-queue"] == "q"
    assert core.alarm.used == sum(e.message.size for q in core.vhosts["/"].queues.values() for e in q.ready)


def _decode(raw: bytes) -> Properties:
    """A property list decoded as the broker reads a publish's."""
    return decode_properties(raw, 0, len(raw), lenient=True)


def test_rewriting_keeps_every_other_byte() -> None:
    raw = bytes(
        commands.Basic.Properties(
            content_type="a", headers={"BCC": ["x"], "n": 1}, reply_to="amq.rabbitmq.reply-to", priority=3
        ).marshal()
    )
    new = _decode(splice_properties(raw, reply_to="amq.rabbitmq.reply-to.k", drop_headers=("BCC",)))
    assert (new.content_type, new.priority, new.reply_to, new.headers) == (
        "a",
        3,
        "amq.rabbitmq.reply-to.k",
        {"n": 1},
    )


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.datetimes(timezones=st.just(datetime.UTC)).map(lambda t: t.replace(microsecond=0)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _values, max_size=6))
def test_broker_made_tables_encode_and_decode_back(table: dict[str, object]) -> None:
    encoded = encode_table(table)
    decoded = decode_table(encoded, 4, len(encoded))
    assert decoded.keys() == table.keys()
    assert encode_table(decoded) == encoded


_cut_tables = st.builds(
    lambda table, cut: encode_table(table)[4:cut],
    st.dictionaries(st.text(max_size=4), _values, max_size=4),
    st.integers(0, 80),
)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64) | _cut_tables)
def test_the_checker_and_the_decoder_accept_the_same_tables(data: bytes) -> None:
    try:
        decode_table(data, 0, len(data))
    except FieldError:
        decoded = False
    else:
        decoded = True
    try:
        skip_table(data, 0, len(data))
    except FieldError:
        checked = False
    else:
        checked = True
    assert decoded == checked


@settings(max_examples=500, deadline=None)
@given(
    st.builds(
        lambda flags, rest: struct.pack(">H", flags) + rest, st.integers(0, 0xFFFF), st.binary(max_size=64)
    )
)
def test_a_property_list_that_passes_the_check_always_decodes(raw: bytes) -> None:
    try:
        check_properties(raw)
    except AMQPError:  # refused (a 541 or a 406); anything else fails the test
        return
    _decode(raw)


def test_header_frames_of_a_real_client_still_decode() -> None:
    props = commands.Basic.Properties(
        content_type="application/json",
        headers={"x": [1, "two", {"three": 3.5}], "when": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)},
        delivery_mode=2,
        priority=4,
        expiration="1000",
        message_id="m",
        timestamp=datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
    )
    raw = frame.marshal(header.ContentHeader(0, 0, props), 1)[7 + 12 : -1]
    checked = check_properties(raw)
    assert (checked.ttl, checked.priority, checked.persistent) == (1000, 4, True)
    decoded = _decode(raw)
    assert decoded.headers == props.headers
    assert decoded.timestamp == int(datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC).timestamp())
