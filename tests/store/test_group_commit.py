"""Through the asyncio shell: a confirm for a persistent message waits for the fsync, which runs in a
worker thread while the broker keeps serving."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import aio_pika
import pytest

from gear.broker import Broker
from gear.broker.store import disk as disk_module

pytestmark = pytest.mark.timeout(60)


async def test_the_confirm_waits_for_the_fsync_and_the_broker_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    held = threading.Event()
    real = disk_module.Disk.fsync_job

    def gated(self: disk_module.Disk, name: str) -> Callable[[], None]:
        job = real(self, name)

        def run() -> None:
            if not gate.is_set():
                held.set()
                assert gate.wait(30)
            job()

        return run

    monkeypatch.setattr(disk_module.Disk, "fsync_job", gated)
    async with Broker(port=0, data_dir=str(tmp_path)) as broker:
        connection = await aio_pika.connect(broker.url)
        try:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue("durable", durable=True)
            publish = asyncio.ensure_future(
                channel.default_exchange.publish(
                    aio_pika.Message(b"kept", delivery_mode=aio_pika.DeliveryMode.PERSISTENT), "durable"
                )
            )
            assert await asyncio.to_thread(held.wait, 10), "the group commit's fsync started"
            other = await connection.channel()
            transient = await other.declare_queue("", exclusive=True)  # the broker still answers
            await other.default_exchange.publish(aio_pika.Message(b"t"), transient.name)
            assert not publish.done(), "no confirm while the fsync is held"
            gate.set()
            await asyncio.wait_for(publish, 10)
            message = await queue.get(no_ack=True)
            assert message.body == b"kept"
        finally:
            gate.set()
            await connection.close()
