"""Names for the example system per backend, and cleanup of what it leaves on a shared RabbitMQ."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from gear.examples.system import Names
from tests.backends import BrokerHandle


@pytest.fixture
async def system_names(broker: BrokerHandle) -> AsyncIterator[Names]:
    """Default names on the reference broker; private ones on RabbitMQ, deleted afterwards.

    The shared ``TYPE`` queues are durable and never expire (they hold requests for a whole service),
    so a test that invents TYPEs on a long-lived RabbitMQ removes them itself.
    """
    if broker.is_reference:
        yield Names()
        return
    names = Names.isolated(f"t{uuid.uuid4().hex[:6]}")
    yield names
    import aio_pika

    connection = await aio_pika.connect(broker.url)
    async with connection:
        channel = await connection.channel()
        for queue in (names.repo, names.ctrl, names.web):
            await channel.queue_delete(queue)
        await channel.exchange_delete(names.exchange)
