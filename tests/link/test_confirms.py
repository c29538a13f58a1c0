"""Publisher confirms through the link's shell, without a socket: a ``Connection`` whose core is driven
by broker frames built with pamqp."""

from __future__ import annotations

import asyncio

import pytest
from pamqp import commands

from gear.amqp import ChannelClosedError, Credentials
from gear.link.confirms import Confirms, Verdict
from gear.link.connection import Channel, Connection, Endpoint
from gear.wire import spec
from gear.wire.content import Publish
from gear.wire.properties import Properties
from tests.amqp._wire import content, method, server_frames

_PUBLISH = Publish("", "k", Properties(), b"")


async def _confirm_channel() -> tuple[Connection, Channel, Confirms]:
    endpoint = Endpoint("broker", 5672, False, "/", Credentials.plain("g", "g"), "g", None)
    conn = Connection(endpoint, heartbeat=0, name="test", where="amqp://broker/")
    conn.core.initiate()
    for data in server_frames(heartbeat=0):
        conn.stream.data_received(data)
    opening = asyncio.ensure_future(conn.channel())
    await asyncio.sleep(0)
    conn.stream.data_received(method(commands.Channel.OpenOk(), 1))
    channel = await opening
    selecting = asyncio.ensure_future(channel.call(spec.Confirm.Select()))
    await asyncio.sleep(0)
    conn.stream.data_received(method(commands.Confirm.SelectOk(), 1))
    await selecting
    return conn, channel, Confirms(channel)


async def test_confirms_settle_publishes_by_the_brokers_verdicts() -> None:
    conn, _, confirms = await _confirm_channel()
    futures = [confirms.send(_PUBLISH, f"m{n}") for n in range(1, 7)]
    conn.stream.data_received(
        content(1, commands.Basic.Return(312, "NO_ROUTE", "gear", "k"), b"", message_id="m2")
        + method(commands.Basic.Ack(3, multiple=True), 1)  # 1, 2 (already returned) and 3
        + method(commands.Basic.Nack(5), 1)
        + content(1, commands.Basic.Return(312, "NO_ROUTE", "gear", "k"), b"", message_id="unknown")
        + method(commands.Basic.Ack(9), 1)  # nothing pending under that tag
    )
    settled = {n: f.result() for n, f in enumerate(futures, 1) if f.done()}
    assert settled == {1: Verdict.ACK, 2: Verdict.RETURNED, 3: Verdict.ACK, 5: Verdict.NACKED}
    assert len(confirms) == 2


async def test_a_verdict_for_a_publish_given_up_on_is_ignored() -> None:
    conn, _, confirms = await _confirm_channel()
    first, second = confirms.send(_PUBLISH, "m1"), confirms.send(_PUBLISH, "m2")
    first.cancel()
    conn.stream.data_received(method(commands.Basic.Ack(2, multiple=True), 1))
    assert second.result() is Verdict.ACK
    assert len(confirms) == 0


async def test_a_closed_channel_fails_pending_publishes_and_refuses_later_ones() -> None:
    conn, _, confirms = await _confirm_channel()
    pending = confirms.send(_PUBLISH, "m1")
    conn.stream.data_received(method(commands.Channel.Close(406, "PRECONDITION_FAILED - too big", 60, 40), 1))
    error = pending.exception()
    assert isinstance(error, ChannelClosedError)
    assert (error.code, error.by_broker) == (406, True)
    with pytest.raises(ChannelClosedError, match="too big"):
        confirms.send(_PUBLISH, "m2")
    assert conn.core.data_to_send().endswith(method(commands.Channel.CloseOk(), 1))
