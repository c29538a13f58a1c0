"""A publish's content properties are checked when it arrives, with RabbitMQ's answers; crossing channel
closes; a delivery held unacknowledged past ``x-consumer-timeout``. Raw sockets, both brokers."""

from __future__ import annotations

import asyncio
import struct

import pytest
from pamqp import body as content_body, commands, header

from tests.backends import BrokerHandle
from tests.conformance._support import WAIT
from tests.raw_amqp import RawAmqp


def _short(raw: bytes) -> bytes:
    return bytes((len(raw),)) + raw


def _table(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _nested(depth: int) -> bytes:
    inner = b""
    for _ in range(depth):
        inner = b"\x01kF" + _table(inner)
    return _table(inner)


def _publish(raw: RawAmqp, queue: str, properties: bytes, body: bytes = b"hi", exchange: str = "") -> None:
    raw.send(1, commands.Basic.Publish(exchange=exchange, routing_key=queue))
    head = struct.pack(">HHQ", 60, 0, len(body)) + properties
    raw.send_bytes(struct.pack(">BHI", 2, 1, len(head)) + head + b"\xce")
    raw.send_bytes(struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce")


async def _confirming(broker: BrokerHandle) -> tuple[RawAmqp, str]:
    raw = await RawAmqp.open(broker.url, channel=1)
    raw.send(1, commands.Confirm.Select())
    await raw.expect(commands.Confirm.SelectOk)
    raw.send(1, commands.Queue.Declare(queue="", exclusive=True))
    declared = await raw.expect(commands.Queue.DeclareOk)
    return raw, str(declared.queue)


UNDECODABLE = {
    "table-length-past-the-end": struct.pack(">HI", 0x2000, 100) + b"\x01k",
    "unknown-field-type": struct.pack(">H", 0x2000) + _table(b"\x01kZ"),
    "shortstr-past-the-end": struct.pack(">H", 0x8000) + b"\x10ab",
    "bytes-after-the-list": struct.pack(">H", 0x8000) + b"\x02ab" + b"junk",
}


@pytest.mark.parametrize("properties", UNDECODABLE.values(), ids=UNDECODABLE.keys())
async def test_a_property_list_that_does_not_decode_is_a_541(broker: BrokerHandle, properties: bytes) -> None:
    """RabbitMQ decodes a publish's properties when it arrives; failing that, its channel process crashes
    and the connection is closed with a bare 541 INTERNAL_ERROR, class 0 method 0."""
    raw, queue = await _confirming(broker)
    try:
        _publish(raw, queue, properties)
        close = await raw.expect_connection_close(541, "undecodable content properties")
        assert (close.reply_text, close.class_id, close.method_id) == ("INTERNAL_ERROR", 0, 0)
    finally:
        await raw.close()


@pytest.mark.parametrize("exchange", ["", "amq.headers"], ids=["default", "amq.headers"])
async def test_headers_nested_very_deep(broker: BrokerHandle, exchange: str) -> None:
    """RabbitMQ decodes any depth and queues the message; the reference broker bounds nesting (100), a
    deliberate limit: connection.close 530 NOT_ALLOWED naming it, through any exchange (issue 40)."""
    raw, queue = await _confirming(broker)
    try:
        _publish(raw, queue, struct.pack(">H", 0x2000) + _nested(10_000), exchange=exchange)
        if broker.is_reference:
            close = await raw.expect_connection_close(530, "headers nested past the bound")
            assert "deeper than 100 levels, the reference broker's limit" in close.reply_text
        else:
            await raw.expect(commands.Basic.Ack)
    finally:
        await raw.close()


@pytest.mark.parametrize(
    ("expiration", "why"),
    [(b"abc", "no_integer"), (b"12x", '{leftover_string,"x"}'), (b"-1", "{value_negative,-1}")],
)
async def test_an_invalid_expiration_is_a_406_on_basic_publish(
    broker: BrokerHandle, expiration: bytes, why: str
) -> None:
    raw, queue = await _confirming(broker)
    try:
        _publish(raw, queue, struct.pack(">H", 0x0100) + _short(expiration))
        close = await raw.expect(commands.Channel.Close)
        assert close.reply_text == f"PRECONDITION_FAILED - invalid expiration '{expiration.decode()}': {why}"
        assert (close.reply_code, close.class_id, close.method_id) == (406, 60, 40)
    finally:
        await raw.close()


async def test_a_cc_header_that_is_not_an_array_is_a_406(broker: BrokerHandle) -> None:
    raw, queue = await _confirming(broker)
    try:
        _publish(raw, queue, struct.pack(">H", 0x2000) + _table(b"\x02CCS" + _table(b"q")))
        close = await raw.expect(commands.Channel.Close)
        assert close.reply_text == (
            'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}'
        )
    finally:
        await raw.close()


async def test_a_message_others_would_trip_over_is_confirmed_and_forwarded_verbatim(
    broker: BrokerHandle,
) -> None:
    """The continuation bit alone, a content type that is not UTF-8: RabbitMQ accepts both."""
    raw, queue = await _confirming(broker)
    try:
        for properties in (struct.pack(">H", 0x0001), struct.pack(">H", 0x8000) + b"\x02\xff\xfe"):
            _publish(raw, queue, properties)
            await raw.expect(commands.Basic.Ack)
    finally:
        await raw.close()


async def test_crossing_channel_closes_are_answered_and_the_connection_lives(broker: BrokerHandle) -> None:
    """amqp091-go's case: the server's channel.close (404, publish to a missing exchange) and the
    client's crossed. The server answers the client's close with close-ok and discards the rest until
    the client's close-ok; the connection and its other channels go on."""
    raw = await RawAmqp.open(broker.url, channel=1)
    try:
        await raw.open_channel(2)
        raw.send(1, commands.Basic.Publish(exchange="gear.conformance.missing", routing_key="k"))
        raw.send_bytes(struct.pack(">BHI", 2, 1, 14) + struct.pack(">HHQ", 60, 0, 1) + b"\x00\x00\xce")
        raw.send_bytes(struct.pack(">BHI", 3, 1, 1) + b"x\xce")
        raw.send(1, commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        close = await raw.expect(commands.Channel.Close)
        assert close.reply_code == 404
        await raw.expect(commands.Channel.CloseOk)
        raw.send(1, commands.Channel.CloseOk())
        raw.send(2, commands.Basic.Qos(prefetch_count=1))
        channel, answer = await raw.next_frame()
        assert (channel, type(answer)) == (2, commands.Basic.QosOk), f"the connection must live: {answer!r}"
        raw.send(1, commands.Channel.Open())
        channel, answer = await raw.next_frame()
        assert (channel, type(answer)) == (1, commands.Channel.OpenOk)
    finally:
        await raw.close()


async def test_a_delivery_unacked_past_x_consumer_timeout(broker: BrokerHandle) -> None:
    """RabbitMQ 4.0-4.2 (and the reference broker) close the channel with 406 when a delivery stays
    unacknowledged past the queue's x-consumer-timeout; 3.x knows only the broker-wide
    consumer_timeout (30 minutes), so on RabbitMQ 3.10 nothing happens; 4.3 refuses the argument on
    a classic queue (406 at the declare: set the timeout by policy there)."""
    raw = await RawAmqp.open(broker.url, channel=1)
    try:
        raw.send(1, commands.Queue.Declare(queue="", exclusive=True, arguments={"x-consumer-timeout": 500}))
        if not broker.is_reference and broker.semantics >= (4, 3):
            close = await raw.expect(commands.Channel.Close)
            assert close.reply_code == 406
            assert "invalid arg 'x-consumer-timeout'" in str(close.reply_text)
            return
        queue = str((await raw.expect(commands.Queue.DeclareOk)).queue)
        raw.publish(1, "", queue, b"held")
        raw.send(1, commands.Basic.Consume(queue=queue, consumer_tag="slow"))
        await raw.expect(commands.Basic.ConsumeOk)
        await raw.expect(commands.Basic.Deliver)
        await raw.expect(header.ContentHeader)
        await raw.expect(content_body.ContentBody)
        if broker.is_reference:
            close = await raw.expect(commands.Channel.Close, within=WAIT)
            assert close.reply_text == (
                "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
                "500 ms. This timeout value can be configured, see consumers doc guide to learn more"
            )
            assert (close.reply_code, close.class_id, close.method_id) == (406, 0, 0)
        else:
            await asyncio.sleep(1.5)
            raw.send(1, commands.Basic.Qos(prefetch_count=1))
            await raw.expect(commands.Basic.QosOk)  # not a channel.close: the channel is still open
    finally:
        await raw.close()
