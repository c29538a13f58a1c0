"""Raw-socket framing tests against a live reference broker: bad input closes that connection only."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import aio_pika
import pytest
from pamqp import commands, frame, header

from gear.broker import Broker
from tests.raw_amqp import PROTOCOL_HEADER, WAIT, RawAmqp


@pytest.fixture
async def server() -> AsyncIterator[Broker]:
    async with Broker(port=0) as broker:
        yield broker


async def _still_works(broker: Broker) -> None:
    connection = await aio_pika.connect(broker.url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(exclusive=True)
        await channel.default_exchange.publish(aio_pika.Message(b"ok"), queue.name)
        message = await queue.get(timeout=5)
        assert message.body == b"ok"


async def _expect_close(raw: RawAmqp, code: int) -> None:
    close = await raw.expect_connection_close(code, "a framing error closes the connection")
    assert close.reply_text.split(" - ")[0] in (
        "FRAME_ERROR",
        "UNEXPECTED_FRAME",
        "CHANNEL_ERROR",
        "COMMAND_INVALID",
        "NOT_IMPLEMENTED",
        "SYNTAX_ERROR",
    )


def _method(channel: int, payload: bytes, frame_type: int = 1, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + end


@pytest.mark.parametrize(
    ("rule", "data", "code"),
    [
        ("bad frame end", _method(1, b"\x00\x14\x00\x28", end=b"\x00"), 501),
        ("unknown frame type", _method(1, b"\x00\x14\x00\x28", frame_type=9), 501),
        ("frame larger than frame_max", struct.pack(">BHI", 1, 1, 200_000) + b"\x00" * 64, 501),
        ("heartbeat on channel 1", b"\x08\x00\x01\x00\x00\x00\x00\xce", 505),
        ("method on an unopened channel", frame.marshal(commands.Queue.Declare(queue="q"), 9), 504),
        ("unknown method id", _method(1, b"\x00\x3c\x03\xe7"), 540),
        ("truncated method arguments", _method(1, b"\x00\x32\x00\x0a\x00"), 501),
        ("body without header", _method(1, b"abc", frame_type=3), 505),
        ("header on channel 0", _method(0, b"\x00\x3c\x00\x00" + b"\x00" * 10, frame_type=2), 505),
    ],
)
async def test_framing_errors_close_the_connection_with_the_code(
    server: Broker, rule: str, data: bytes, code: int
) -> None:
    raw = await RawAmqp.open(server.url, channel=1)
    raw.send_bytes(data)
    await _expect_close(raw, code)
    await _still_works(server)


def _nested_table(depth: int) -> bytes:
    inner = b""
    for _ in range(depth):
        inner = b"\x01kF" + struct.pack(">I", len(inner)) + inner
    return struct.pack(">I", len(inner)) + inner


async def test_arguments_nested_past_the_limit_are_refused_by_name(server: Broker) -> None:
    """queue.bind with x-match arguments 10,000 tables deep: the broker's deliberate depth limit, named
    in a 530 NOT_ALLOWED connection.close (not a frame error: the frame is well-formed)."""
    raw = await RawAmqp.open(server.url, channel=1)
    short = lambda text: bytes((len(text),)) + text  # noqa: E731
    bind = struct.pack(">HHH", 50, 20, 0) + short(b"q") + short(b"amq.headers") + short(b"") + b"\x00"
    raw.send_bytes(_method(1, bind + _nested_table(10_000)))
    close = await raw.expect_connection_close(530, "a deliberate limit, named")
    assert close.reply_text == (
        "NOT_ALLOWED - Queue.Bind: field tables nested deeper than 100 levels, "
        "the reference broker's limit (RabbitMQ has none)"
    )
    assert (close.class_id, close.method_id) == (50, 20)
    await _still_works(server)


async def test_method_between_publish_and_header_is_505(server: Broker) -> None:
    raw = await RawAmqp.open(server.url, channel=1)
    raw.send(1, commands.Basic.Publish(exchange="", routing_key="q"))
    raw.send(1, commands.Basic.Qos(prefetch_count=1))
    await _expect_close(raw, 505)


async def test_bad_protocol_header_gets_amqp_0_9_1_header_then_close(server: Broker) -> None:
    for greeting in (b"AMQP\x00\x00\x0a\x00", b"GET / HTTP/1.1\r\n\r\n"):
        raw = await RawAmqp.connect(server.url)
        raw.send_bytes(greeting)
        assert await raw.wait_eof("a bad header gets our header, then the socket closes") == PROTOCOL_HEADER


async def test_truncated_frame_then_disconnect_leaves_broker_healthy(server: Broker) -> None:
    raw = await RawAmqp.open(server.url, channel=1)
    publish = frame.marshal(commands.Basic.Publish(exchange="", routing_key="q"), 1)
    content = frame.marshal(header.ContentHeader(0, 1000), 1)
    raw.send_bytes(publish + content + b"\x03\x00\x01\x00\x00\x03\xe8" + b"x" * 10)
    await raw.close()
    await _still_works(server)
    assert not [c for c in server.status().connections if c.state != "running"]


async def test_body_larger_than_announced_size_is_501(server: Broker) -> None:
    raw = await RawAmqp.open(server.url, channel=1)
    raw.send(1, commands.Basic.Publish(exchange="", routing_key="q"))
    raw.send_bytes(frame.marshal(header.ContentHeader(0, 2), 1) + _method(1, b"abcd", frame_type=3))
    await _expect_close(raw, 501)


async def test_client_close_gets_close_ok_and_the_client_closes_the_socket(server: Broker) -> None:
    raw = await RawAmqp.open(server.url, channel=1)
    raw.send(0, commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    await raw.expect(commands.Connection.CloseOk)
    assert server.status().connections == [], "a closing connection is gone from the status view"
    assert len(server.protocols) == 1, "the server waits for the client to close the socket"
    await raw.close()
    for _ in range(int(WAIT / 0.01)):
        if not server.protocols:
            break
        await asyncio.sleep(0.01)
    assert not server.protocols, "the client's socket close ends the connection"


async def test_silent_client_is_dropped_after_two_heartbeat_intervals(server: Broker) -> None:
    raw = await RawAmqp.open(server.url, heartbeat_s=1, channel=1)
    # the server sends heartbeats while we stay silent, then gives up on us
    channel, obj = await raw.read_frame()
    assert (channel, type(obj).__name__) == (0, "Heartbeat")
    await raw.wait_eof("a silent client is dropped")
