"""Services on the broker under test for the integration tests: ``Fleet``, the ``fleet`` fixture (which a
directory's conftest.py re-exports), ``eventually`` and ``delete_queues``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aiormq
import pytest

import gear
from tests.backends import BrokerHandle
from tests.conftest import unique


class Fleet:
    """Creates services on one broker and stops them all at the end of the test."""

    def __init__(self, broker: BrokerHandle) -> None:
        self.broker = broker
        self.services: list[gear.Service] = []
        self.exchange = unique("gear-test-")  # broadcasts stay inside this test

    def service(self, type_: str, host: str, **kw: Any) -> gear.Service:
        kw.setdefault("url", self.broker.url)
        kw.setdefault("exchange", self.exchange)
        kw.setdefault("timeout", 5.0)
        kw.setdefault("connect_wait", 10.0)
        kw.setdefault("handshake_timeout", 5.0)
        kw.setdefault("drain_timeout", 3.0)
        kw.setdefault("instance_queue_ttl", 120.0)
        svc = gear.Service(type_, host, **kw)
        self.services.append(svc)
        return svc

    def client(self, **kw: Any) -> gear.Service:
        return self.service(unique("CLI"), "c1", serve=False, **kw)

    async def start(self, *services: gear.Service) -> None:
        await asyncio.gather(*(s.start() for s in services or self.services))

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.services), return_exceptions=True)
        if not self.broker.is_reference:  # leave nothing behind on a shared RabbitMQ
            names = {q.name for s in self.services for q in s.topology.queues}
            with contextlib.suppress(Exception):  # best effort: the test's verdict is already in
                await delete_queues(self.broker.url, sorted(names), exchange=self.exchange)


async def delete_queues(url: str, names: Iterable[str], *, exchange: str | None = None) -> None:
    """Delete the queues ``names`` in order (then ``exchange``, if given) on the broker at ``url``.

    Raises:
        Exception: whatever the connection or a deletion raised (aiormq's errors).
    """
    conn = await aiormq.connect(url)
    try:
        ch = await conn.channel()
        for name in names:
            await ch.queue_delete(queue=name)
        if exchange is not None:
            await ch.exchange_delete(exchange=exchange)
    finally:
        await conn.close()


@pytest.fixture
async def fleet(broker: BrokerHandle) -> AsyncIterator[Fleet]:
    """Services on the broker under test, stopped after the test."""
    f = Fleet(broker)
    try:
        yield f
    finally:
        await f.stop()


async def eventually(check: Callable[[], bool], limit: float = 10.0, what: str = "condition") -> None:
    """Poll ``check`` until it holds (fails the test after ``limit`` seconds)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not check():
        if loop.time() > end:
            raise AssertionError(f"{what} did not happen within {limit}s")
        await asyncio.sleep(0.02)
