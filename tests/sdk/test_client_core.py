"""The sans-I/O AMQP client core (``gear.amqp``): handshake, content, confirms, closes both ways, and
every way a broker can break the protocol, each found at once with a typed error.

Broker frames are built with pamqp, so the core is checked against another implementation of the wire
format; what the client sends is read back with pamqp too.
"""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands, frame, heartbeat

from gear.amqp import (
    ChannelClosedError,
    ChannelState,
    ClientConnection,
    ConnectionState,
    Credentials,
    ProtocolError,
)
from gear.wire.frames import FrameReader
from tests.sdk._wire import Recorder, content, deliver, method, open_client, server_frames


def sent(conn: ClientConnection) -> list[tuple[int, str]]:
    """What the client queued for the socket: ``(channel, method name or frame kind)``."""
    data = conn.data_to_send()
    if data.startswith(b"AMQP"):
        data = data[8:]
    reader, out = FrameReader(1 << 20), []
    reader.feed(data)
    while (f := reader.next_frame()) is not None:
        kind, channel, payload = f
        if kind == 1:
            value = _method_of(_whole(kind, channel, payload))
            out.append((channel, value.name))
        else:
            out.append((channel, {2: "header", 3: "body", 8: "heartbeat"}[kind]))
    return out


def _method_of(data: bytes) -> Any:
    """The (first) method in ``data``, decoded by pamqp."""
    return frame.unmarshal(data)[2]


def _whole(kind: int, channel: int, payload: bytes) -> bytes:
    return bytes([kind]) + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + b"\xce"


def _channel(conn: ClientConnection, rec: Recorder, *, confirm: bool = False) -> Any:
    ch = conn.open_channel(rec)
    conn.receive(method(commands.Channel.OpenOk(), ch.number))
    if confirm:
        ch.call(commands.Confirm.Select())
        conn.receive(method(commands.Confirm.SelectOk(), ch.number))
    conn.data_to_send()
    rec.events.clear()
    return ch


# -- handshake ---------------------------------------------------------------------------------------


def test_the_handshake_logs_in_negotiates_and_opens_the_vhost() -> None:
    rec = Recorder()
    conn = ClientConnection(
        rec, credentials=Credentials.plain("ann", "s3cret"), vhost="prod", heartbeat=10, frame_max=131072
    )
    conn.initiate()
    assert conn.data_to_send() == b"AMQP\x00\x00\x09\x01"
    start, tune, open_ok = server_frames(frame_max=65536, heartbeat=60, channel_max=0)
    conn.receive(start)
    start_ok = _method_of(conn.data_to_send())
    assert start_ok.mechanism == "PLAIN"
    assert start_ok.response == "\0ann\0s3cret"
    assert start_ok.client_properties["capabilities"]["connection.blocked"] is True
    assert start_ok.client_properties["capabilities"]["authentication_failure_close"] is True
    conn.receive(tune)
    assert sent(conn) == [(0, "Connection.TuneOk"), (0, "Connection.Open")]
    assert (conn.heartbeat, conn.frame_max, conn.channel_max) == (10, 65536, 2047)
    assert conn.server_properties["version"] == "4.3.6"
    assert conn.state.value == "handshake"
    conn.receive(open_ok)
    assert conn.state is ConnectionState.OPEN
    assert rec.events == [("open",)]


@pytest.mark.parametrize(
    ("client", "server", "agreed"),
    [(10, 60, 10), (0, 60, 60), (10, 0, 10), (0, 0, 0), (120, 60, 60)],
)
def test_heartbeat_negotiation_follows_rabbitmqs_rule(client: int, server: int, agreed: int) -> None:
    rec = Recorder()
    conn = ClientConnection(rec, credentials=Credentials.plain("g", "g"), heartbeat=client)
    conn.initiate()
    for data in server_frames(heartbeat=server):
        conn.receive(data)
    assert conn.heartbeat == agreed


def test_a_refused_login_is_the_brokers_close_with_its_reason() -> None:
    rec = Recorder()
    conn = ClientConnection(rec, credentials=Credentials.plain("g", "bad"))
    conn.initiate()
    start, _, _ = server_frames()
    conn.receive(start)
    conn.receive(method(commands.Connection.Close(403, "ACCESS_REFUSED - Login was refused", 0, 0)))
    assert rec.events == [("closed", 403, "ACCESS_REFUSED - Login was refused", True)]
    assert sent(conn)[-1] == (0, "Connection.CloseOk")


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"AMQP\x00\x01\x00\x00", "does not speak AMQP 0-9-1"),  # RabbitMQ 4.x answers a bad header so
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "unknown frame type 72"),
    ],
)
def test_a_peer_that_is_not_an_amqp_0_9_1_broker_is_refused_at_once(answer: bytes, words: str) -> None:
    rec = Recorder()
    conn = ClientConnection(rec, credentials=Credentials.plain("g", "g"))
    conn.initiate()
    conn.data_to_send()
    with pytest.raises(ProtocolError, match=words):
        conn.receive(answer)
    assert conn.state is ConnectionState.CLOSED
    assert rec.events[0][0] == "closed"


def test_a_mechanism_the_broker_does_not_offer_is_named() -> None:
    rec = Recorder()
    conn = ClientConnection(rec, credentials=Credentials.external())
    conn.initiate()
    with pytest.raises(
        ProtocolError, match="offers login mechanisms PLAIN AMQPLAIN; this connection uses EXTERNAL"
    ):
        conn.receive(server_frames()[0])


# -- messages ----------------------------------------------------------------------------------------


def test_a_delivery_is_read_whole_wherever_the_reads_split_it() -> None:
    headers = {
        "x-deadline": 1234567890123,
        "traceparent": "00-ab-cd-01",
        "retry": True,
        "n": {"deep": [1, "a"]},
    }
    props: dict[str, Any] = dict(
        message_id="m7",
        correlation_id="c7",
        reply_to="WEB.h1",
        message_type="gear.call",
        app_id="WEB.h1",
        headers=headers,
        content_type="application/json",
        delivery_mode=2,
        expiration="5000",
        user_id="guest",
    )
    for cut in range(0, 200):
        rec = Recorder()
        conn = open_client(rec)
        ch = _channel(conn, rec)
        ch.consume("q", "ctag", rec.consume, rec)
        conn.receive(method(commands.Basic.ConsumeOk("ctag"), ch.number))
        wire = deliver(ch.number, 7, b'{"x": 1}', **props)
        assert conn.receive(wire[:cut]) + conn.receive(wire[cut:]) == 3
        (d,) = rec.deliveries
        assert (d.queue, d.consumer_tag, d.delivery_tag, d.redelivered, d.routing_key) == (
            "q",
            "ctag",
            7,
            True,
            "T.h7",
        )
        assert d.body == b'{"x": 1}'
        assert d.malformed is None
        p = d.properties
        assert (p.message_id, p.correlation_id, p.reply_to, p.message_type, p.app_id) == (
            "m7", "c7", "WEB.h1", "gear.call", "WEB.h1",
        )  # fmt: skip
        assert (p.headers, p.delivery_mode, p.expiration, p.user_id) == (headers, 2, "5000", "guest")
        assert d.ack()
        assert rec.settled == [("ack", 7, False)]


def test_large_and_empty_bodies() -> None:
    rec = Recorder()
    conn = open_client(rec, frame_max=4096)
    ch = _channel(conn, rec)
    ch.consume("q", "ctag", rec.consume, rec)
    big = bytes(range(256)) * 100
    conn.receive(content(ch.number, commands.Basic.Deliver("ctag", 1, False, "", "k"), big, 4096))
    conn.receive(deliver(ch.number, 2, b""))
    assert [d.body for d in rec.deliveries] == [big, b""]


def test_confirms_and_returns_on_a_confirm_channel() -> None:
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec, confirm=True)
    assert [ch.publish(b"") for _ in range(5)] == [1, 2, 3, 4, 5]
    returned = content(
        ch.number, commands.Basic.Return(312, "NO_ROUTE", "gear", "X.y"), b"b", message_id="m3"
    )
    conn.receive(
        method(commands.Basic.Ack(1), ch.number)
        + returned
        + method(commands.Basic.Ack(3), ch.number)
        + method(commands.Basic.Nack(5, multiple=True), ch.number)
    )
    assert rec.events == [
        ("confirm", 1, False, True),
        ("return", 312, "m3", b"b"),
        ("confirm", 3, False, True),
        ("confirm", 5, True, False),
    ]


def test_replies_come_in_order_and_a_reply_nobody_asked_for_is_a_protocol_error() -> None:
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec)
    ch.call(commands.Queue.Declare(queue="q"))
    ch.call(commands.Basic.Qos(prefetch_count=5))
    conn.receive(
        method(commands.Queue.DeclareOk("q", 0, 0), ch.number) + method(commands.Basic.QosOk(), ch.number)
    )
    assert rec.events == [("reply", "Queue.DeclareOk"), ("reply", "Basic.QosOk")]
    with pytest.raises(ProtocolError, match=r"503 COMMAND_INVALID - unexpected Queue.BindOk on channel 1"):
        conn.receive(method(commands.Queue.BindOk(), ch.number))


def test_a_consumer_cancelled_by_the_broker_is_reported_and_its_late_deliveries_go_back() -> None:
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec)
    ch.consume("q", "ctag", rec.consume, rec)
    conn.receive(method(commands.Basic.ConsumeOk("ctag"), ch.number))
    conn.data_to_send()
    conn.receive(method(commands.Basic.Cancel("ctag", nowait=True), ch.number) + deliver(ch.number, 9, b"x"))
    assert ("cancelled", "ctag") in rec.events
    assert rec.deliveries == []
    assert sent(conn) == [(ch.number, "Basic.Reject")]


def test_an_undecodable_property_list_marks_the_message_and_keeps_the_link() -> None:
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec)
    ch.consume("q", "ctag", rec.consume, rec)
    head = method(commands.Basic.Deliver("ctag", 1, False, "", "k"), ch.number)
    bad_table = b"\x00\x3c\x00\x00" + (1).to_bytes(8, "big") + b"\x20\x00" + b"\x00\x00\x00\x05\x01a?\x00\x00"
    header = (
        bytes([2]) + ch.number.to_bytes(2, "big") + len(bad_table).to_bytes(4, "big") + bad_table + b"\xce"
    )
    body = bytes([3]) + ch.number.to_bytes(2, "big") + (1).to_bytes(4, "big") + b"z\xce"
    conn.receive(head + header + body + deliver(ch.number, 2, b"ok"))
    assert [d.delivery_tag for d in rec.deliveries] == [1, 2]
    assert "unknown field type" in (rec.deliveries[0].malformed or "")
    assert conn.state is ConnectionState.OPEN


def test_the_client_decodes_the_headers_the_broker_accepts() -> None:
    """Both ends decode tables with ``gear.wire.table`` at the same depth: what the reference broker let
    through (a key that is not UTF-8, nesting one short of the bound) decodes on the client, one level
    more is malformed on both."""
    import struct

    from gear.broker.properties import UndecodablePropertiesError, check_properties
    from gear.wire.properties import decode_properties
    from gear.wire.table import MAX_DEPTH

    def headers(entries: bytes) -> bytes:
        return struct.pack(">HI", 0x2000, len(entries)) + entries

    def nested(depth: int) -> bytes:
        inner = b""
        for _ in range(depth):
            inner = b"\x01kF" + struct.pack(">I", len(inner)) + inner
        return headers(inner)

    for raw in (headers(b"\x01\xffS\x00\x00\x00\x01x"), nested(MAX_DEPTH - 1)):
        check_properties(raw)
        assert decode_properties(raw, 2, 0x2000, len(raw)).headers is not None
    too_deep = nested(MAX_DEPTH)
    with pytest.raises(UndecodablePropertiesError) as refused:
        check_properties(too_deep)
    assert "nested deeper" in refused.value.detail
    with pytest.raises(ValueError, match="nested deeper"):
        decode_properties(too_deep, 2, 0x2000, len(too_deep))


def test_blocked_and_unblocked() -> None:
    rec = Recorder()
    conn = open_client(rec)
    conn.receive(
        method(commands.Connection.Blocked("low on memory")) + method(commands.Connection.Unblocked())
    )
    assert rec.events == [("blocked", "low on memory"), ("unblocked",)]


def test_heartbeats_count_as_frames() -> None:
    rec = Recorder()
    conn = open_client(rec)
    assert conn.receive(frame.marshal(heartbeat.Heartbeat(), 0) * 3) == 3
    conn.send_heartbeat()
    assert sent(conn) == [(0, "heartbeat")]


# -- closing -----------------------------------------------------------------------------------------


def test_the_broker_closing_a_channel_is_answered_and_later_publishes_refused() -> None:
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec, confirm=True)
    conn.receive(method(commands.Channel.Close(406, "PRECONDITION_FAILED - bad", 60, 40), ch.number))
    assert sent(conn) == [(ch.number, "Channel.CloseOk")]
    assert rec.events == [("closed", 406, "PRECONDITION_FAILED - bad", True)]
    with pytest.raises(ChannelClosedError, match="406") as raised:
        ch.publish(b"frames")
    assert raised.value.by_broker
    assert conn.data_to_send() == b""
    again = conn.open_channel(rec)
    assert again.number == ch.number + 1 or again.number == ch.number


def test_crossing_channel_closes_follow_the_spec() -> None:
    """The client closes; the broker's own close crosses it: answered with close-ok, its reason
    reported, everything else discarded, the number reused only after the broker's close-ok."""
    rec = Recorder()
    conn = open_client(rec)
    ch = _channel(conn, rec, confirm=True)
    ch.consume("q", "ctag", rec.consume, rec)
    conn.data_to_send()
    ch.close()
    assert sent(conn) == [(ch.number, "Channel.Close")]
    conn.receive(
        deliver(ch.number, 1, b"in flight")
        + method(commands.Channel.Close(404, "NOT_FOUND - no exchange 'x'", 60, 40), ch.number)
        + method(commands.Basic.Ack(1), ch.number)
    )
    assert sent(conn) == [(ch.number, "Channel.CloseOk")]
    assert rec.deliveries == []
    assert rec.events == [("closed", 404, "NOT_FOUND - no exchange 'x'", True)]
    assert ch.state.value == "closing"
    with pytest.raises(ChannelClosedError, match="404"):
        ch.publish(b"x")
    conn.receive(method(commands.Channel.CloseOk(), ch.number))
    assert ch.state is ChannelState.CLOSED
    assert conn.state is ConnectionState.OPEN


def test_the_broker_closing_the_connection_closes_every_channel_once() -> None:
    rec = Recorder()
    conn = open_client(rec)
    _channel(conn, rec)
    _channel(conn, rec)
    conn.receive(method(commands.Connection.Close(320, "CONNECTION_FORCED - shutdown", 0, 0)))
    assert sent(conn) == [(0, "Connection.CloseOk")]
    assert rec.events == [("closed", 320, "CONNECTION_FORCED - shutdown", True)] * 3
    assert conn.receive(b"anything at all") == 0


def test_crossing_connection_closes() -> None:
    rec = Recorder()
    conn = open_client(rec)
    conn.close()
    assert sent(conn) == [(0, "Connection.Close")]
    conn.receive(method(commands.Connection.Close(320, "CONNECTION_FORCED - bye", 0, 0)))
    assert sent(conn) == [(0, "Connection.CloseOk")]
    assert rec.events == [("closed", 320, "CONNECTION_FORCED - bye", True)]


# -- a broker that breaks the protocol ---------------------------------------------------------------


def _frame(kind: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return bytes([kind]) + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + end


_DELIVER = method(commands.Basic.Deliver("ctag", 1, False, "", "k"), 1)
_HEADER_OF_4 = _frame(2, 1, b"\x00\x3c\x00\x00" + (4).to_bytes(8, "big") + b"\x00\x00")


@pytest.mark.parametrize(
    ("wire", "code", "words"),
    [
        (
            b"\x01\x00\x01\xff\xff\xff\xff",
            501,
            "frame size 4294967295 is larger than negotiated maximum 131072",
        ),
        (_frame(9, 0, b""), 501, "unknown frame type 9"),
        (_frame(1, 1, commands.Basic.QosOk().marshal(), end=b"\x00"), 501, "frame end octet"),
        (
            _DELIVER + _HEADER_OF_4 + _frame(3, 1, b"12345"),
            505,
            "body frame of 5 bytes on channel 1, where 4 remained",
        ),
        (_DELIVER + _HEADER_OF_4 + _frame(3, 1, b"12") + _DELIVER, 505, "expected a content body frame"),
        (_HEADER_OF_4, 505, "content header frame on channel 1 with no method first"),
        (_DELIVER + _DELIVER, 505, "expected a content header frame on channel 1, got a method frame"),
        (
            method(commands.Basic.Deliver("t", 1, False, "", "k"), 7),
            504,
            "Basic.Deliver on channel 7, which is not open",
        ),
        (method(commands.Basic.Ack(1), 1), 503, "Basic.Ack on channel 1, which is not in confirm mode"),
        (method(commands.Channel.CloseOk(), 1), 503, "channel.close-ok on channel 1, which was not closing"),
        (_frame(1, 1, b"\x00\x3c\x00\x3c\x05ab"), 502, "consumer tag runs past the end"),
        (_frame(1, 1, b"\x00\x63\x00\x01"), 540, "unknown method: class 99, method 1"),
        (_frame(3, 0, b"x"), 505, "a content body on channel 0"),
        (method(commands.Connection.Start()), 503, "unexpected Connection.Start on channel 0"),
    ],
)
def test_a_protocol_violation_closes_the_connection_at_once_saying_what_the_broker_sent(
    wire: bytes, code: int, words: str
) -> None:
    rec = Recorder()
    conn = open_client(rec)
    _channel(conn, rec)
    with pytest.raises(ProtocolError, match=words) as raised:
        conn.receive(wire)
    assert raised.value.code == code
    close = _method_of(conn.data_to_send())
    assert (close.name, close.reply_code) == ("Connection.Close", code)
    assert rec.events == [("closed", code, f"the broker broke the protocol: {raised.value}", False)] * 2
    assert conn.state is ConnectionState.CLOSED
    assert conn.receive(_DELIVER) == 0
    assert conn.buffered == 0


def test_an_oversized_frame_is_refused_from_its_header_without_waiting_for_its_payload() -> None:
    rec = Recorder()
    conn = open_client(rec, frame_max=4096)
    with pytest.raises(ProtocolError, match="frame size 4097"):
        conn.receive(b"\x03\x00\x01\x00\x00\x10\x01")  # the 7-byte header alone
