"""The in-process API: Broker, running, serve, status, forced closes, alarms, connection limit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

import aio_pika
import pytest

from gear.broker import Broker, BrokerConfig, running, serve
from tests.raw_amqp import PROTOCOL_HEADER, RawAmqp


async def test_url_port_and_status_snapshot() -> None:
    async with Broker(port=0, host="127.0.0.1") as broker:
        assert broker.url == f"amqp://guest:guest@127.0.0.1:{broker.port}/"
        connection = await aio_pika.connect(broker.url + "?name=tester")
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("status-q")
            await channel.default_exchange.publish(aio_pika.Message(b"1"), "status-q")
            await channel.default_exchange.publish(aio_pika.Message(b"2"), "status-q")
            await queue.get(no_ack=False, timeout=5)
            status = broker.status()
            (conn,) = status.connections
            assert conn.state == "running"
            assert conn.channels == 1
            assert "tester" in conn.name
            (q,) = status.queues
            assert (q.name, q.vhost, q.messages_ready, q.messages_unacked, q.consumers, q.state) == (
                "status-q",
                "/",
                1,
                1,
                0,
                "running",
            )
            assert status.alarms == []
            assert status.memory_used > 0
            text = str(status)
            assert "status-q" in text
            assert "running" in text


async def test_config_object_and_keyword_fields_are_exclusive() -> None:
    config = BrokerConfig(port=0, heartbeat=5)
    async with Broker(config=config) as broker:
        assert broker.config.heartbeat == 5
    with pytest.raises(TypeError):
        Broker(config=config, port=0)
    with pytest.raises(TypeError, match="unknown broker option"):
        Broker(port=0, colour="red")


async def test_running_yields_a_working_url() -> None:
    async with running(port=0) as url:
        connection = await aio_pika.connect(url)
        await connection.close()


async def test_serve_reports_its_url_and_stops_when_cancelled() -> None:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(BrokerConfig(port=0), on_ready=ready.set_result))
    url = await asyncio.wait_for(ready, 5)
    connection = await aio_pika.connect(url)
    await connection.close()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_close_all_connections_sends_320_and_robust_clients_come_back() -> None:
    async with Broker(port=0) as broker:
        connection = await aio_pika.connect_robust(broker.url + "?reconnect_interval=0.1")
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue("robust-q")
            reconnected = asyncio.Event()
            connection.reconnect_callbacks.add(lambda *_: reconnected.set())
            await broker.close_all_connections("test says so")
            await asyncio.wait_for(reconnected.wait(), 10)
            await channel.default_exchange.publish(aio_pika.Message(b"after"), "robust-q")
            message = await queue.get(timeout=5)
            assert message.body == b"after"


async def test_close_all_connections_reply_is_connection_forced() -> None:
    async with Broker(port=0) as broker:
        raw = await RawAmqp.open(broker.url, channel=1)
        await broker.close_all_connections("maintenance")
        from pamqp import commands

        close = await raw.expect(commands.Connection.Close)
        assert (close.reply_code, close.reply_text) == (320, "CONNECTION_FORCED - maintenance")


async def test_memory_alarm_blocks_publisher_and_lets_consumer_drain() -> None:
    async with Broker(port=0) as broker:
        publisher = await aio_pika.connect(broker.url)
        consumer = await aio_pika.connect(broker.url)
        async with publisher, consumer:
            pub_channel = await publisher.channel()
            queue = await (await consumer.channel()).declare_queue("alarm-q")
            await pub_channel.default_exchange.publish(aio_pika.Message(b"before"), "alarm-q")
            broker.set_memory_alarm(True)
            held = asyncio.ensure_future(
                pub_channel.default_exchange.publish(aio_pika.Message(b"held"), "alarm-q")
            )
            for _ in range(100):
                if any(c.state == "blocked" for c in broker.status().connections):
                    break
                await asyncio.sleep(0.02)
            assert sorted(c.state for c in broker.status().connections) == ["blocked", "running"]
            assert broker.status().alarms == ["memory"]
            message = await queue.get(timeout=5)
            assert message.body == b"before"
            broker.set_memory_alarm(False)
            await asyncio.wait_for(held, 5)
            assert (await queue.get(timeout=5)).body == b"held"


async def test_disk_alarm_from_the_free_space_reading_blocks_and_releases_publishers() -> None:
    free = {"bytes": 10**9}
    paths: list[str] = []

    def disk_free(path: str) -> int:
        paths.append(path)
        return free["bytes"]

    async with Broker(port=0, disk_free_limit=50_000_000, disk_free=disk_free) as broker:
        publisher = await aio_pika.connect(broker.url)
        async with publisher:
            channel = await publisher.channel()
            queue = await channel.declare_queue("disk-q")
            free["bytes"] = 1_000_000
            broker.check_disk()
            assert broker.status().alarms == ["disk"]
            assert "disk: 1,000,000 bytes free, limit 50,000,000" in str(broker.status())
            # the connection is no longer read after the publish's first content frame (RabbitMQ's
            # publish_received): the publish waits, its body unread
            first = asyncio.ensure_future(channel.default_exchange.publish(aio_pika.Message(b"1"), "disk-q"))
            held = asyncio.ensure_future(channel.default_exchange.publish(aio_pika.Message(b"2"), "disk-q"))
            for _ in range(100):
                if any(c.state == "blocked" for c in broker.status().connections):
                    break
                await asyncio.sleep(0.02)
            assert [c.state for c in broker.status().connections] == ["blocked"]
            done, _ = await asyncio.wait([first, held], timeout=0.3)
            assert not done, "publishes under the disk alarm wait"
            assert broker.status().queues[0].messages_ready == 0
            free["bytes"] = 10**9  # the periodic check sees the space come back
            await asyncio.wait_for(asyncio.gather(first, held), 5)
            assert broker.status().alarms == []
            assert (await queue.get(timeout=5)).body == b"1"
            assert (await queue.get(timeout=5)).body == b"2"
    assert paths
    assert all(p == os.getcwd() for p in paths), "in memory, the working directory is measured"


async def test_connection_limit_accepts_tcp_but_never_starts_amqp() -> None:
    async with Broker(port=0, max_connections=1) as broker:
        first = await aio_pika.connect(broker.url)
        raw = await RawAmqp.connect(broker.url)
        raw.send_bytes(PROTOCOL_HEADER)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(raw.reader.read(100), 0.5)
        await raw.close()
        await first.close()
        await asyncio.sleep(0.05)
        second = await aio_pika.connect(broker.url)
        await second.close()


def _connect_now(host: str, port: int, count: int) -> list[socket.socket]:
    """Open ``count`` TCP connections from the loop's own thread, so the broker accepts none meanwhile."""
    opened = []
    try:
        for _ in range(count):
            opened.append(socket.create_connection((host, port), timeout=5))
    except OSError:
        for s in opened:
            s.close()
        raise
    return opened


async def test_a_fleet_reconnecting_at_once_is_queued_while_the_broker_is_busy() -> None:
    """The kernel completes handshakes for up to ``listen_backlog`` sockets the broker has not accepted
    yet; past that, SYNs are dropped and retried after 1, 3, 7 s... (asyncio's own default is 100)."""
    async with Broker(port=0) as broker:
        assert broker.config.listen_backlog == 4096
        opened = _connect_now("127.0.0.1", broker.port, 300)  # the broker's loop is blocked meanwhile
        try:
            connection = await aio_pika.connect(broker.url)  # and it serves once it runs again
            await connection.close()
        finally:
            for s in opened:
                s.close()


def test_the_listen_backlog_has_a_range() -> None:
    with pytest.raises(ValueError, match="listen_backlog must be a number from 1 to 65535"):
        BrokerConfig(listen_backlog=0)
