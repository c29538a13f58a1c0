"""Shared fixtures: ``broker`` runs each integration test on the reference broker and on RabbitMQ."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.backends import ENV_URL, BrokerHandle, RabbitMQ, find_rabbitmq
from tests.rabbitmq_container import START_TIMEOUT


def unique(prefix: str) -> str:
    """A name no other test uses (queues and TYPEs on a shared RabbitMQ)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def pytest_report_header() -> str:
    """Name the AMQP client libraries this run uses (CI installs the newest the ranges allow)."""
    from importlib.metadata import version

    return "client libraries: " + ", ".join(f"{p} {version(p)}" for p in ("aiormq", "aio-pika", "pamqp"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without a RabbitMQ URL, the first test that asks for RabbitMQ may start its container: give it
    the container's startup time on top of its own timeout."""
    if os.environ.get(ENV_URL):
        return
    for item in items:
        fixtures = getattr(item, "fixturenames", ())  # test functions have them, other items not
        if item.get_closest_marker("rabbitmq") and {"broker", "rabbitmq"} & set(fixtures):
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(START_TIMEOUT + 60))
            return


_USED: list[str] = []
"""The RabbitMQ this session ran its rabbitmq tests against, in words (for the summary)."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say which RabbitMQ the rabbitmq tests ran against (CI's log, and the README's platform table,
    ``python scripts/platforms.py``, read this line)."""
    for used in _USED:
        terminalreporter.write_line(f"RabbitMQ under test: {used}")


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQ]:
    """The session's real RabbitMQ (see ``tests/backends.py``); skips the test when there is none.

    Only tests that need RabbitMQ ask for it, so a run without them never starts a container.
    """
    found, reason = find_rabbitmq()
    if found is None:
        pytest.skip(reason)
    _USED.append(f"RabbitMQ {'.'.join(map(str, found.version))} ({found.where})")
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(params=["reference", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[BrokerHandle]:
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
    found: RabbitMQ = request.getfixturevalue("rabbitmq")
    yield BrokerHandle.of(found)


@pytest.fixture(params=["reference-disk", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def durable_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[BrokerHandle]:
    """A broker that keeps durable state across ``restart``: the reference broker with a data
    directory, or a real RabbitMQ (only where the tests may restart it)."""
    if request.param == "reference-disk":
        from gear.broker import Broker

        server = Broker(port=0, data_dir=str(tmp_path_factory.mktemp("data")))
        await server.start()
        handle = BrokerHandle(kind="reference", url=server.url, broker=server)
        try:
            yield handle
        finally:
            await handle.broker.stop()
        return
    found: RabbitMQ = request.getfixturevalue("rabbitmq")
    if not found.exclusive:
        pytest.skip("restarting a shared RabbitMQ disturbs its other users; set GEAR_TEST_DISRUPTIVE=1")
    yield BrokerHandle.of(found)


@pytest.fixture
def names() -> type[_Names]:
    """``names.unique("WEB")`` gives a TYPE that no other test uses."""
    return _Names


class _Names:
    unique = staticmethod(unique)
