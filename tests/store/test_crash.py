"""Kill -9 the reference broker with a data directory and start it again: nothing confirmed is lost.

The broker runs in a subprocess (``python -m gear.broker --data-dir``). Confirmed persistent messages
go to three durable queues (two share a fan-out exchange, so one stored copy serves both); some are
acked, some delivered and left unacked, then the process is killed without warning and restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aio_pika
import pytest

pytestmark = pytest.mark.timeout(120)


@contextmanager
def _broker(data_dir: Path) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    """Start the broker on ``data_dir``; yield its URL, the process and its first output lines."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", "0", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            found = re.search(r"ready at amqp://[^@]*@([\d.]+):(\d+)/", line)
            if found:
                yield f"amqp://guest:guest@{found.group(1)}:{found.group(2)}/", process, lines
                break
        else:
            pytest.fail(f"broker did not start: {lines}")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        process.stdout.close()


def _persistent(body: str) -> aio_pika.Message:
    return aio_pika.Message(body.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT)


async def _load(url: str, kill: Callable[[], None]) -> None:
    """Declare, publish (confirmed), ack some, leave some delivered, and make sure the broker has
    committed all of it (a last confirmed publish after the acks and gets)."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel(publisher_confirms=True)
    fan = await channel.declare_exchange("crash.fan", aio_pika.ExchangeType.FANOUT, durable=True)
    q1 = await channel.declare_queue("crash.q1", durable=True)
    q2 = await channel.declare_queue("crash.q2", durable=True)
    await channel.declare_queue("crash.q3", durable=True)
    await channel.declare_queue("crash.transient-queue", durable=False)
    await q1.bind(fan)
    await q2.bind(fan)
    for n in range(100):
        await fan.publish(_persistent(f"fan-{n}"), routing_key="")
        await channel.default_exchange.publish(_persistent(f"q1-{n}"), routing_key="crash.q1")
        await channel.default_exchange.publish(_persistent(f"q3-{n}"), routing_key="crash.q3")
        await channel.default_exchange.publish(aio_pika.Message(f"t-{n}".encode()), routing_key="crash.q3")
        await channel.default_exchange.publish(_persistent(f"tq-{n}"), routing_key="crash.transient-queue")
    consumer = await connection.channel()
    for _ in range(50):  # acked: gone after the restart
        message = await q1.get(no_ack=False)
        await message.ack()
    kept = await consumer.get_queue("crash.q2")
    for _ in range(30):  # delivered, never acked: back, marked redelivered
        assert await kept.get(no_ack=False) is not None
    await asyncio.sleep(0)
    await channel.default_exchange.publish(_persistent("last"), routing_key="crash.q3")
    await consumer.set_qos(prefetch_count=1)  # a round trip on the consumer channel too
    await channel.default_exchange.publish(_persistent("last-2"), routing_key="crash.q3")
    kill()  # with the connection open and q2's deliveries unacked
    with contextlib.suppress(Exception):
        await connection.close()


async def _drain(url: str, name: str) -> list[tuple[str, bool]]:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(name, passive=True)
        found = []
        while (message := await queue.get(no_ack=True, fail=False)) is not None:
            found.append((message.body.decode(), bool(message.redelivered)))
        return found
    finally:
        await connection.close()


async def _exists(url: str, name: str) -> bool:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        try:
            await channel.declare_queue(name, passive=True)
        except aio_pika.exceptions.ChannelClosed:
            return False
        return True
    finally:
        await connection.close()


def test_kill_9_keeps_every_confirmed_unacked_message_once(tmp_path: Path) -> None:
    with _broker(tmp_path) as (url, process, _):
        asyncio.run(_load(url, lambda: os.kill(process.pid, signal.SIGKILL)))
        process.wait(timeout=30)

    with _broker(tmp_path) as (url, _, lines):
        assert any("recovered 1 exchange(s), 3 queue(s), 2 binding(s)" in line for line in lines), lines
        assert any("352 queued message(s) (277 stored)" in line for line in lines), lines
        q1 = asyncio.run(_drain(url, "crash.q1"))
        q2 = asyncio.run(_drain(url, "crash.q2"))
        q3 = asyncio.run(_drain(url, "crash.q3"))
        transient_queue = asyncio.run(_exists(url, "crash.transient-queue"))

    everything = [f"fan-{n}" for n in range(100)]
    # q1 got fan-n and q1-n interleaved; its first 50 messages were acked
    q1_published = [body for n in range(100) for body in (f"fan-{n}", f"q1-{n}")]
    assert q1 == [(body, False) for body in q1_published[50:]]
    assert q2 == [(body, n < 30) for n, body in enumerate(everything)]
    assert q3 == [(f"q3-{n}", False) for n in range(100)] + [("last", False), ("last-2", False)]
    assert not transient_queue


def test_a_clean_restart_recovers_the_same_and_the_fanout_binding_still_routes(tmp_path: Path) -> None:
    async def publish(url: str) -> None:
        connection = await aio_pika.connect(url)
        channel = await connection.channel(publisher_confirms=True)
        fan = await channel.declare_exchange("crash.fan", aio_pika.ExchangeType.FANOUT, durable=True)
        for name in ("crash.q1", "crash.q2"):
            queue = await channel.declare_queue(name, durable=True)
            await queue.bind(fan)
        await fan.publish(_persistent("before"), routing_key="")
        await connection.close()

    async def publish_again(url: str) -> None:
        connection = await aio_pika.connect(url)
        channel = await connection.channel(publisher_confirms=True)
        fan = await channel.get_exchange("crash.fan")
        await fan.publish(_persistent("after"), routing_key="")
        await connection.close()

    with _broker(tmp_path) as (url, _, _):
        asyncio.run(publish(url))
    with _broker(tmp_path) as (url, _, lines):
        assert any("2 queued message(s) (1 stored)" in line for line in lines), lines
        asyncio.run(publish_again(url))
        assert asyncio.run(_drain(url, "crash.q1")) == [("before", False), ("after", False)]
    with _broker(tmp_path) as (url, _, _):
        assert asyncio.run(_drain(url, "crash.q1")) == []
        assert asyncio.run(_drain(url, "crash.q2")) == [("before", False), ("after", False)]
