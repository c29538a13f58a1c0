"""The ``amqp`` fixture: one AMQP session per test, on whichever broker ``broker`` is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.backends import BrokerHandle
from tests.conformance._support import Amqp


@pytest.fixture
async def amqp(broker: BrokerHandle) -> AsyncIterator[Amqp]:
    """Connections and names for one test; everything is closed and deleted afterwards."""
    session = Amqp(broker)
    try:
        yield session
    finally:
        await session.close()


@pytest.fixture
async def durable_amqp(durable_broker: BrokerHandle) -> AsyncIterator[Amqp]:
    """As ``amqp``, on a broker whose durable state survives ``restart``."""
    session = Amqp(durable_broker)
    try:
        yield session
    finally:
        await session.close()
