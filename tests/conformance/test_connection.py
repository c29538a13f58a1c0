"""Connection level: authentication, vhosts, tune limits, heartbeats."""

from __future__ import annotations

import asyncio
import urllib.parse

import aio_pika
import aiormq
import pytest
from pamqp import commands, heartbeat

from tests.backends import BrokerHandle
from tests.conformance._support import QUIET, WAIT
from tests.raw_amqp import RawAmqp, ServerClosedError


def _with_credentials(url: str, user: str, password: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


async def test_bad_password_is_refused_with_403(broker: BrokerHandle) -> None:
    """Wrong credentials (authentication_failure_close advertised): connection.close 403 ACCESS_REFUSED."""
    url = _with_credentials(broker.url, "guest", "wrong-password")
    with pytest.raises(aiormq.exceptions.ProbableAuthenticationError) as raised:
        await aio_pika.connect(url, timeout=WAIT * 2)
    assert "ACCESS_REFUSED - " in str(raised.value), f"expected an ACCESS_REFUSED close, got {raised.value!r}"


async def test_unknown_vhost_is_530(broker: BrokerHandle) -> None:
    """connection.open of a vhost that does not exist: 530 NOT_ALLOWED."""
    parts = urllib.parse.urlsplit(broker.url)
    url = urllib.parse.urlunsplit(parts._replace(path="/gear-no-such-vhost"))
    raw = await RawAmqp.open(url, wait_open_ok=False)  # aiormq reports this close as InvalidFrameError
    try:
        close = await raw.expect_connection_close(530, "connection.open of an unknown vhost")
        assert str(close.reply_text).startswith("NOT_ALLOWED - "), f"got {close.reply_text!r}"
    finally:
        await raw.close()


async def test_opening_more_channels_than_channel_max_is_530(broker: BrokerHandle) -> None:
    """With channel_max negotiated to 1, opening a second channel: 530 NOT_ALLOWED (connection error)."""
    raw = await RawAmqp.open(broker.url, channel_max=1)
    try:
        await raw.open_channel(1)
        raw.send(2, commands.Channel.Open())
        await raw.expect_connection_close(530, "channel beyond the negotiated channel_max")
    finally:
        await raw.close()


async def test_channel_max_counts_open_channels_not_channel_numbers(broker: BrokerHandle) -> None:
    """channel_max limits how many channels are open, not their numbers: with channel_max 2, channels
    65535 and 1 open, a third is 530 with RabbitMQ's count text; after a close, 70 opens."""
    raw = await RawAmqp.open(broker.url, channel_max=2)
    try:
        await raw.open_channel(65535)
        await raw.open_channel(1)
        raw.send(1, commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        await raw.expect(commands.Channel.CloseOk)
        await raw.open_channel(70)
        raw.send(300, commands.Channel.Open())
        close = await raw.expect_connection_close(530, "a third channel with channel_max 2")
        assert close.reply_text == (
            "NOT_ALLOWED - number of channels opened (2) has reached the negotiated channel_max (2)"
        ), close.reply_text
    finally:
        await raw.close()


async def test_close_after_pipelined_publishes_gets_close_ok_and_the_client_closes(
    broker: BrokerHandle,
) -> None:
    """Publishes and connection.close in one write: the client reads its close-ok (not a reset), and
    the server leaves closing the socket to the client (RabbitMQ's close handshake)."""
    raw = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        for n in range(200):
            raw.publish(1, "", "gear-no-such-queue", b"x" * (n % 7) * 1000)
        raw.send(0, commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        await raw.expect(commands.Connection.CloseOk)
        with pytest.raises(TimeoutError):  # the socket stays open: the server waits for the client
            await raw.read_frame(QUIET)
    finally:
        await raw.close()


async def test_frames_after_close_are_discarded_until_close_ok(broker: BrokerHandle) -> None:
    """After the server's connection.close, frames other than close/close-ok are ignored; close-ok ends
    the connection."""
    raw = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        raw.send(1, commands.Channel.Open())  # already open: 504 CHANNEL_ERROR, a connection error
        _, close = await raw.read_frame(WAIT)
        assert isinstance(close, commands.Connection.Close), close
        raw.publish(1, "", "gear-no-such-queue", b"late")
        raw.send(2, commands.Channel.Open())
        raw.send(0, commands.Connection.CloseOk())
        assert await raw.wait_eof("close-ok ends the close handshake") == b""
    finally:
        await raw.close()


async def test_tune_ok_frame_max_below_4096_is_530(broker: BrokerHandle) -> None:
    """tune-ok with frame_max below the 4096 minimum refuses the connection (530 if a close is sent;
    RabbitMQ 3.10 just closes the socket during tuning)."""
    raw = await RawAmqp.open(broker.url, frame_max=1024, wait_open_ok=False)
    try:
        await raw.expect_refused(530, "tune-ok frame_max < 4096")
    finally:
        await raw.close()


async def test_server_sends_heartbeats_and_drops_a_silent_client(broker: BrokerHandle) -> None:
    """With heartbeat=1 the server sends heartbeat frames and closes the socket of a silent client."""
    raw = await RawAmqp.open(broker.url, heartbeat_s=1)
    try:
        channel, frame = await raw.read_frame(WAIT)
        assert isinstance(frame, heartbeat.Heartbeat), f"an idle connection gets heartbeats, got {frame!r}"
        assert channel == 0, "heartbeats travel on channel 0"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT * 2
        while True:
            assert loop.time() < deadline, "a client silent for several heartbeats must be dropped"
            try:
                await raw.read_frame(deadline - loop.time())
            except ServerClosedError:
                break
            except TimeoutError:
                continue
    finally:
        await raw.close()


async def test_client_heartbeats_keep_connection_alive(broker: BrokerHandle) -> None:
    """A client that sends heartbeats is not dropped after several heartbeat intervals."""
    raw = await RawAmqp.open(broker.url, heartbeat_s=1)
    try:
        loop = asyncio.get_running_loop()
        until = loop.time() + 3.5
        while loop.time() < until:
            raw.send_bytes(heartbeat.Heartbeat.marshal())
            try:
                await raw.read_frame(0.4)
            except TimeoutError:
                pass
            except ServerClosedError:
                raise AssertionError("a client that sends heartbeats must not be disconnected") from None
        await raw.open_channel(1)
    finally:
        await raw.close()
