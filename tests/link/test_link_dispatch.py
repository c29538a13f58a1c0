"""The link's one dispatch of the core's events (``gear.link.connection.Connection.dispatch``), without a
socket: a ``Connection`` whose stream is fed broker frames built with pamqp."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pamqp import commands, frame

from gear.amqp import ChannelClosedError, ConsumerCancelled, Credentials, Delivery
from gear.link.connection import Channel, Connection, Endpoint
from gear.wire import spec
from tests.amqp._wire import deliver, method, server_frames


async def _open() -> Connection:
    endpoint = Endpoint("broker", 5672, False, "/", Credentials.plain("g", "g"), "g", None)
    conn = Connection(endpoint, heartbeat=0, name="test", where="amqp://broker/")
    conn.core.initiate()
    for data in server_frames(heartbeat=0):
        conn.stream.data_received(data)
    assert conn.opened.done()
    return conn


async def _answered(conn: Connection, call: Any, *replies: bytes) -> Any:
    pending = asyncio.ensure_future(call)
    await asyncio.sleep(0)
    for reply in replies:
        conn.stream.data_received(reply)
    return await pending


async def _channel(conn: Connection, number: int = 1) -> Channel:
    channel: Channel = await _answered(conn, conn.channel(), method(commands.Channel.OpenOk(), number))
    return channel


async def test_a_consumer_that_fails_is_logged_and_the_rest_of_the_read_still_acted_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conn = await _open()
    channel = await _channel(conn)
    got: list[Delivery] = []

    def take(delivery: Delivery) -> None:
        if delivery.delivery_tag == 1:
            raise RuntimeError("a bug above")
        got.append(delivery)

    await _answered(conn, channel.consume("q", "ctag", take), method(commands.Basic.ConsumeOk("ctag"), 1))
    with caplog.at_level(logging.ERROR, logger="gear.link"):
        conn.stream.data_received(deliver(1, 1, b"a") + deliver(1, 2, b"b"))
    assert [d.body for d in got] == [b"b"]
    assert "acting on Delivery from amqp://broker/ failed" in caplog.text
    conn.stream.data_received(deliver(1, 3, b"c"))
    assert [d.body for d in got] == [b"b", b"c"]


async def test_a_delivery_for_a_consumer_the_link_gave_up_on_goes_back_to_the_queue() -> None:
    """A consume whose setup timed out may still be registered by the broker: what it delivers is
    rejected with requeue (another consumer takes it), not an error."""
    conn = await _open()
    await _channel(conn)
    written: list[bytes] = []

    class Transport:
        def write(self, data: bytes) -> None:
            written.append(data)

        def is_closing(self) -> bool:
            return False

    conn.stream.transport = Transport()  # type: ignore[assignment]
    conn.stream.data_received(deliver(1, 7, b"a", consumer_tag="gone"))
    await asyncio.sleep(0)
    sent = [frame.unmarshal(data)[2] for data in written]  # pamqp reads what went out
    rejects = [(m.delivery_tag, m.requeue) for m in sent if isinstance(m, commands.Basic.Reject)]
    assert (len(sent), rejects) == (1, [(7, True)])


async def test_replies_resolve_their_calls_in_order_and_a_close_fails_the_calls_still_waiting() -> None:
    conn = await _open()
    channel = await _channel(conn)
    declare = asyncio.ensure_future(channel.call(spec.Queue.Declare(queue="q")))
    bind = asyncio.ensure_future(channel.call(spec.Queue.Bind(queue="q", exchange="x")))
    await asyncio.sleep(0)
    conn.stream.data_received(
        method(commands.Queue.DeclareOk("q", 0, 0), 1)
        + method(commands.Channel.Close(404, "NOT_FOUND - no exchange 'x'", 50, 20), 1)
    )
    assert await declare == spec.Queue.DeclareOk("q", 0, 0)
    with pytest.raises(ChannelClosedError, match="404") as refused:
        await bind
    assert refused.value.by_broker
    assert channel.closed.result() is refused.value
    assert not channel.is_open


async def test_blocked_unblocked_and_cancelled_consumers_go_to_the_owners_hooks() -> None:
    conn = await _open()
    channel = await _channel(conn)
    heard: list[Any] = []
    conn.when_blocked = lambda reason: heard.append(("blocked", reason))
    conn.when_unblocked = lambda: heard.append(("unblocked",))
    conn.when_cancelled = heard.append
    await _answered(
        conn, channel.consume("q", "ctag", heard.append), method(commands.Basic.ConsumeOk("ctag"), 1)
    )
    conn.stream.data_received(
        method(commands.Connection.Blocked("low on memory"))
        + method(commands.Connection.Unblocked())
        + method(commands.Basic.Cancel("ctag", nowait=True), 1)
    )
    assert heard == [("blocked", "low on memory"), ("unblocked",), ConsumerCancelled(1, "ctag", "q")]
    assert channel.consumers == {}


async def test_a_broker_that_breaks_the_protocol_closes_the_connection_and_its_channels() -> None:
    conn = await _open()
    channel = await _channel(conn)
    conn.stream.data_received(method(commands.Basic.Ack(1), 1))  # not a confirm channel
    error = conn.closed.result()
    assert (error.code, error.by_broker) == (503, False)
    assert error.text.startswith(
        "the broker broke the protocol: 503 COMMAND_INVALID - Basic.Ack on channel 1"
    )
    assert channel.closed.result().code == 503
    assert not conn.is_open
