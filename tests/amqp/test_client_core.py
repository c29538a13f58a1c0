"""The sans-I/O AMQP client core (``gear.amqp``): handshake, content, confirms, closes both ways, and
every way a broker can break the protocol, each found at once and reported as the connection's close,
saying what the broker sent. Each test asserts on the events ``receive`` returns.

Broker frames are built with pamqp, so the core is checked against another implementation of the wire
format; what the client sends is read back with pamqp too.
"""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands, frame, heartbeat

from gear.amqp import (
    Blocked,
    ChannelClosed,
    ChannelClosedError,
    ChannelState,
    ClientChannel,
    ClientConnection,
    Confirm,
    ConnectionClosed,
    ConnectionState,
    ConsumerCancelled,
    Credentials,
    Delivery,
    Event,
    MethodReply,
    Opened,
    Returned,
    Unblocked,
)
from gear.wire import spec
from gear.wire.content import Publish
from gear.wire.frames import FrameReader
from gear.wire.properties import Properties
from tests.amqp._wire import content, deliver, method, open_client, server_frames

_PUBLISH = Publish("", "q", Properties(), b"")


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


def _channel(conn: ClientConnection, *, confirm: bool = False) -> ClientChannel:
    ch = conn.open_channel("open")
    (opened,) = conn.receive(method(commands.Channel.OpenOk(), ch.number))
    assert _reply(opened) == (ch.number, "Channel.OpenOk", "open")
    if confirm:
        ch.call(spec.Confirm.Select())
        conn.receive(method(commands.Confirm.SelectOk(), ch.number))
    conn.data_to_send()
    return ch


def _consuming(conn: ClientConnection, queue: str = "q", tag: str = "ctag") -> ClientChannel:
    ch = _channel(conn)
    ch.consume(queue, tag)
    conn.receive(method(commands.Basic.ConsumeOk(tag), ch.number))
    conn.data_to_send()
    return ch


def _reply(event: Event) -> tuple[int, str, object]:
    """A method reply as ``(channel, method name, waiter)`` (pamqp's methods do not compare)."""
    assert isinstance(event, MethodReply)
    return event.channel, event.method.name, event.waiter


def _closed(events: list[Event]) -> ConnectionClosed:
    """The connection's close among ``events`` (there is exactly one)."""
    (closed,) = [e for e in events if isinstance(e, ConnectionClosed)]
    return closed


# -- handshake ---------------------------------------------------------------------------------------


def test_the_handshake_logs_in_negotiates_and_opens_the_vhost() -> None:
    conn = ClientConnection(
        credentials=Credentials.plain("ann", "s3cret"), vhost="prod", heartbeat=10, frame_max=131072
    )
    conn.initiate()
    assert conn.data_to_send() == b"AMQP\x00\x00\x09\x01"
    start, tune, open_ok = server_frames(frame_max=65536, heartbeat=60, channel_max=0)
    assert conn.receive(start) == []
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
    assert conn.receive(open_ok) == [Opened()]
    assert conn.state is ConnectionState.OPEN


@pytest.mark.parametrize(
    ("client", "server", "agreed"),
    [(10, 60, 10), (0, 60, 60), (10, 0, 10), (0, 0, 0), (120, 60, 60)],
)
def test_heartbeat_negotiation_follows_rabbitmqs_rule(client: int, server: int, agreed: int) -> None:
    conn = ClientConnection(credentials=Credentials.plain("g", "g"), heartbeat=client)
    conn.initiate()
    for data in server_frames(heartbeat=server):
        conn.receive(data)
    assert conn.heartbeat == agreed


def test_a_refused_login_is_the_brokers_close_with_its_reason() -> None:
    conn = ClientConnection(credentials=Credentials.plain("g", "bad"))
    conn.initiate()
    start, _, _ = server_frames()
    conn.receive(start)
    refused = conn.receive(method(commands.Connection.Close(403, "ACCESS_REFUSED - Login was refused", 0, 0)))
    assert refused == [ConnectionClosed(403, "ACCESS_REFUSED - Login was refused", True)]
    assert sent(conn)[-1] == (0, "Connection.CloseOk")


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"AMQP\x00\x01\x00\x00", "does not speak AMQP 0-9-1"),  # RabbitMQ 4.x answers a bad header so
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "unknown frame type 72"),
    ],
)
def test_a_peer_that_is_not_an_amqp_0_9_1_broker_is_refused_at_once(answer: bytes, words: str) -> None:
    conn = ClientConnection(credentials=Credentials.plain("g", "g"))
    conn.initiate()
    conn.data_to_send()
    (closed,) = conn.receive(answer)
    assert isinstance(closed, ConnectionClosed)
    assert words in closed.text
    assert (closed.code, closed.by_broker) == (501, False)
    assert conn.state is ConnectionState.CLOSED


def test_a_mechanism_the_broker_does_not_offer_is_named() -> None:
    conn = ClientConnection(credentials=Credentials.external())
    conn.initiate()
    closed = _closed(conn.receive(server_frames()[0]))
    assert closed.code == 530
    assert "offers login mechanisms PLAIN AMQPLAIN; this connection uses EXTERNAL" in closed.text


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
        conn = open_client()
        ch = _consuming(conn)
        wire = deliver(ch.number, 7, b'{"x": 1}', **props)
        frames = conn.frames_received
        (d,) = conn.receive(wire[:cut]) + conn.receive(wire[cut:])
        assert conn.frames_received == frames + 3
        assert isinstance(d, Delivery)
        assert (d.channel, d.queue, d.consumer_tag, d.delivery_tag, d.redelivered, d.routing_key) == (
            ch.number,
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
        assert ch.ack(d.delivery_tag)
        assert sent(conn) == [(ch.number, "Basic.Ack")]


def test_settling_is_a_call_on_the_channel_with_the_tag() -> None:
    conn = open_client()
    ch = _consuming(conn)
    conn.receive(deliver(ch.number, 1, b"a") + deliver(ch.number, 2, b"b") + deliver(ch.number, 3, b"c"))
    assert ch.ack(1)
    assert ch.nack(2, requeue=False)
    assert ch.reject(3, requeue=True)
    acked, nacked, rejected = (_method_of(f) for f in _frames(conn.data_to_send()))
    assert (acked.name, acked.delivery_tag, acked.multiple) == ("Basic.Ack", 1, False)
    assert (nacked.name, nacked.delivery_tag, nacked.requeue) == ("Basic.Nack", 2, False)
    assert (rejected.name, rejected.delivery_tag, rejected.requeue) == ("Basic.Reject", 3, True)
    ch.close()
    assert not ch.ack(4)


def _frames(data: bytes) -> list[bytes]:
    reader, out = FrameReader(1 << 20), []
    reader.feed(data)
    while (f := reader.next_frame()) is not None:
        out.append(_whole(*f))
    return out


def test_large_and_empty_bodies() -> None:
    conn = open_client(frame_max=4096)
    ch = _consuming(conn)
    big = bytes(range(256)) * 100
    events = conn.receive(content(ch.number, commands.Basic.Deliver("ctag", 1, False, "", "k"), big, 4096))
    events += conn.receive(deliver(ch.number, 2, b""))
    assert [d.body for d in events if isinstance(d, Delivery)] == [big, b""]


def test_confirms_and_returns_on_a_confirm_channel() -> None:
    conn = open_client()
    ch = _channel(conn, confirm=True)
    n = ch.number
    assert [ch.publish(_PUBLISH) for _ in range(5)] == [1, 2, 3, 4, 5]
    returned = content(n, commands.Basic.Return(312, "NO_ROUTE", "gear", "X.y"), b"b", message_id="m3")
    events = conn.receive(
        method(commands.Basic.Ack(1), n)
        + returned
        + method(commands.Basic.Ack(3), n)
        + method(commands.Basic.Nack(5, multiple=True), n)
    )
    assert events[0] == Confirm(n, 1, False, False)
    assert isinstance(events[1], Returned)
    assert (events[1].reply_code, events[1].properties.message_id, events[1].body) == (312, "m3", b"b")
    assert events[2:] == [Confirm(n, 3, False, False), Confirm(n, 5, True, True)]


def test_replies_come_in_order_and_a_reply_nobody_asked_for_is_a_protocol_error() -> None:
    conn = open_client()
    ch = _channel(conn)
    ch.call(spec.Queue.Declare(queue="q"), "declare")
    ch.call(spec.Basic.Qos(prefetch_count=5), "qos")
    events = conn.receive(
        method(commands.Queue.DeclareOk("q", 0, 0), ch.number) + method(commands.Basic.QosOk(), ch.number)
    )
    assert [_reply(e) for e in events] == [
        (ch.number, "Queue.DeclareOk", "declare"),
        (ch.number, "Basic.QosOk", "qos"),
    ]
    closed = _closed(conn.receive(method(commands.Queue.BindOk(), ch.number)))
    assert closed.code == 503
    assert "503 COMMAND_INVALID - unexpected Queue.BindOk on channel 1" in closed.text


def test_a_channel_closing_hands_back_the_waiters_of_unanswered_methods() -> None:
    conn = open_client()
    ch = _channel(conn)
    ch.call(spec.Queue.Declare(queue="q"), "declare")
    ch.call(spec.Basic.Qos(prefetch_count=5), "qos")
    events = conn.receive(method(commands.Channel.Close(404, "NOT_FOUND - no queue 'q'", 50, 10), ch.number))
    assert events == [ChannelClosed(ch.number, 404, "NOT_FOUND - no queue 'q'", True, ("declare", "qos"))]


def test_a_consumer_cancelled_by_the_broker_is_reported_and_its_late_deliveries_go_back() -> None:
    conn = open_client()
    ch = _consuming(conn)
    events = conn.receive(
        method(commands.Basic.Cancel("ctag", nowait=True), ch.number) + deliver(ch.number, 9, b"x")
    )
    assert events == [ConsumerCancelled(ch.number, "ctag", "q")]
    assert sent(conn) == [(ch.number, "Basic.Reject")]


def test_an_undecodable_property_list_marks_the_message_and_keeps_the_link() -> None:
    conn = open_client()
    ch = _consuming(conn)
    head = method(commands.Basic.Deliver("ctag", 1, False, "", "k"), ch.number)
    bad_table = b"\x00\x3c\x00\x00" + (1).to_bytes(8, "big") + b"\x20\x00" + b"\x00\x00\x00\x05\x01a?\x00\x00"
    header = (
        bytes([2]) + ch.number.to_bytes(2, "big") + len(bad_table).to_bytes(4, "big") + bad_table + b"\xce"
    )
    body = bytes([3]) + ch.number.to_bytes(2, "big") + (1).to_bytes(4, "big") + b"z\xce"
    first, second = conn.receive(head + header + body + deliver(ch.number, 2, b"ok"))
    assert isinstance(first, Delivery)
    assert isinstance(second, Delivery)
    assert (first.delivery_tag, second.delivery_tag, second.malformed) == (1, 2, None)
    assert "unknown field type" in (first.malformed or "")
    assert conn.state is ConnectionState.OPEN


def test_the_client_decodes_the_headers_the_broker_accepts() -> None:
    """Both ends decode tables with ``gear.wire.table`` at the same depth: what the reference broker let
    through (a key that is not UTF-8, nesting one short of the bound) decodes on the client, one level
    more is refused on both."""
    import struct

    from gear.broker.model.checks import TooDeepError, check_properties
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
        assert decode_properties(raw, 0, len(raw)).headers is not None
    too_deep = nested(MAX_DEPTH)
    with pytest.raises(TooDeepError) as refused:
        check_properties(too_deep)
    assert "nested deeper" in refused.value.detail
    with pytest.raises(ValueError, match="nested deeper"):
        decode_properties(too_deep, 0, len(too_deep))


def test_blocked_and_unblocked() -> None:
    conn = open_client()
    events = conn.receive(
        method(commands.Connection.Blocked("low on memory")) + method(commands.Connection.Unblocked())
    )
    assert events == [Blocked("low on memory"), Unblocked()]


def test_heartbeats_count_as_frames() -> None:
    conn = open_client()
    frames = conn.frames_received
    assert conn.receive(frame.marshal(heartbeat.Heartbeat(), 0) * 3) == []
    assert conn.frames_received == frames + 3
    conn.send_heartbeat()
    assert sent(conn) == [(0, "heartbeat")]


# -- closing -----------------------------------------------------------------------------------------


def test_the_broker_closing_a_channel_is_answered_and_later_publishes_refused() -> None:
    conn = open_client()
    ch = _channel(conn, confirm=True)
    events = conn.receive(method(commands.Channel.Close(406, "PRECONDITION_FAILED - bad", 60, 40), ch.number))
    assert sent(conn) == [(ch.number, "Channel.CloseOk")]
    assert events == [ChannelClosed(ch.number, 406, "PRECONDITION_FAILED - bad", True)]
    with pytest.raises(ChannelClosedError, match="406") as raised:
        ch.publish(_PUBLISH)
    assert raised.value.by_broker
    assert conn.data_to_send() == b""
    again = conn.open_channel()
    assert again.number == ch.number + 1 or again.number == ch.number


def test_crossing_channel_closes_follow_the_spec() -> None:
    """The client closes; the broker's own close crosses it: answered with close-ok, its reason
    reported, everything else discarded, the number reused only after the broker's close-ok."""
    conn = open_client()
    ch = _channel(conn, confirm=True)
    ch.consume("q", "ctag")
    conn.data_to_send()
    ch.close()
    assert sent(conn) == [(ch.number, "Channel.Close")]
    events = conn.receive(
        deliver(ch.number, 1, b"in flight")
        + method(commands.Channel.Close(404, "NOT_FOUND - no exchange 'x'", 60, 40), ch.number)
        + method(commands.Basic.Ack(1), ch.number)
    )
    assert sent(conn) == [(ch.number, "Channel.CloseOk")]
    assert events == [ChannelClosed(ch.number, 404, "NOT_FOUND - no exchange 'x'", True, (None,))]
    assert ch.state.value == "closing"
    with pytest.raises(ChannelClosedError, match="404"):
        ch.publish(_PUBLISH)
    assert conn.receive(method(commands.Channel.CloseOk(), ch.number)) == []
    assert ch.state is ChannelState.CLOSED
    assert conn.state is ConnectionState.OPEN


def test_the_broker_closing_the_connection_closes_every_channel_once() -> None:
    conn = open_client()
    one, two = _channel(conn), _channel(conn)
    events = conn.receive(method(commands.Connection.Close(320, "CONNECTION_FORCED - shutdown", 0, 0)))
    assert sent(conn) == [(0, "Connection.CloseOk")]
    reason = (320, "CONNECTION_FORCED - shutdown", True)
    assert events == [
        ConnectionClosed(*reason),
        ChannelClosed(one.number, *reason),
        ChannelClosed(two.number, *reason),
    ]
    assert conn.receive(b"anything at all") == []


def test_crossing_connection_closes() -> None:
    conn = open_client()
    assert conn.close() == []
    assert sent(conn) == [(0, "Connection.Close")]
    events = conn.receive(method(commands.Connection.Close(320, "CONNECTION_FORCED - bye", 0, 0)))
    assert sent(conn) == [(0, "Connection.CloseOk")]
    assert events == [ConnectionClosed(320, "CONNECTION_FORCED - bye", True)]


def test_the_socket_lost_closes_the_connection_and_its_channels_once() -> None:
    conn = open_client()
    ch = _channel(conn)
    ch.call(spec.Basic.Qos(prefetch_count=1), "qos")
    assert conn.connection_lost("reset") == [
        ConnectionClosed(0, "reset", False),
        ChannelClosed(ch.number, 0, "reset", False, ("qos",)),
    ]
    assert conn.connection_lost("again") == []


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
    conn = open_client()
    _channel(conn)
    closed, channel_closed = conn.receive(wire)
    assert isinstance(closed, ConnectionClosed)
    assert (closed.code, closed.by_broker) == (code, False)
    assert closed.text.startswith(f"the broker broke the protocol: {code} ")
    assert words in closed.text
    assert channel_closed == ChannelClosed(1, code, closed.text, False)
    close = _method_of(conn.data_to_send())
    assert (close.name, close.reply_code) == ("Connection.Close", code)
    assert conn.state is ConnectionState.CLOSED
    assert conn.receive(_DELIVER) == []
    assert conn.buffered == 0


def test_an_oversized_frame_is_refused_from_its_header_without_waiting_for_its_payload() -> None:
    conn = open_client(frame_max=4096)
    closed = _closed(conn.receive(b"\x03\x00\x01\x00\x00\x10\x01"))  # the 7-byte header alone
    assert "frame size 4097" in closed.text
