"""Shared fixtures: ``broker`` runs each integration test on the reference broker and on RabbitMQ."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.backends import BrokerHandle, rabbitmq_url_or_skip_reason, stop_container


def unique(prefix: str) -> str:
    """A name no other test uses (queues and TYPEs on a shared RabbitMQ)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def pytest_report_header() -> str:
    """Name the AMQP client libraries this run uses (CI installs the newest the ranges allow)."""
    from importlib.metadata import version

    return "client libraries: " + ", ".join(f"{p} {version(p)}" for p in ("aiormq", "aio-pika", "pamqp"))


@pytest.fixture(scope="session")
def _rabbitmq() -> Iterator[tuple[str | None, object, str]]:
    found = rabbitmq_url_or_skip_reason()
    yield found
    stop_container()


@pytest.fixture(params=["reference", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def broker(
    request: pytest.FixtureRequest, _rabbitmq: tuple[str | None, object, str]
) -> AsyncIterator[BrokerHandle]:
    """A running broker: Gear's reference broker in-process, or a real RabbitMQ."""
    if request.param == "reference":
        from gear.broker import Broker

        server = Broker(port=0)
        await server.start()
        handle = BrokerHandle(kind="reference", url=server.url, broker=server)
        try:
            yield handle
        finally:
            await handle.broker.stop()  # the one running now (a test may have restarted it)
        return
    url, ctl, reason = _rabbitmq
    if url is None:
        pytest.skip(reason)
    yield BrokerHandle(kind="rabbitmq", url=url, ctl=ctl)  # type: ignore[arg-type]


@pytest.fixture
def names() -> type[_Names]:
    """``names.unique("WEB")`` gives a TYPE that no other test uses."""
    return _Names


class _Names:
    unique = staticmethod(unique)
