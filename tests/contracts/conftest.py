"""The contract tests run their services on the broker under test (``broker``: reference and RabbitMQ)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.backends import BrokerHandle
from tests.sdk.conftest import Fleet


@pytest.fixture
async def fleet(broker: BrokerHandle) -> AsyncIterator[Fleet]:
    """Services on the broker under test, stopped (and their queues deleted) after the test."""
    f = Fleet(broker)
    try:
        yield f
    finally:
        await f.stop()
