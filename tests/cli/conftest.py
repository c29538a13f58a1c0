"""A broker and the example system, running on an event loop in a background thread.

CLI commands call ``asyncio.run`` themselves, so the tests that invoke them are plain functions on the
main thread, and everything they talk to lives on a separate thread with its own loop.

The broker is Gear's reference broker, in-process on a free port. Set ``GEAR_TEST_CLI_URL`` to run the
same tests against a RabbitMQ instead; they then use TYPE names and an exchange of their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from gear.cli.main import app
from gear.examples.system import Names, System, running_system

T = TypeVar("T")

ENV_URL = "GEAR_TEST_CLI_URL"


class BackgroundLoop:
    """An event loop on its own thread; ``run(coro)`` executes a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="cli-test-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class Running:
    """What the CLI tests talk to."""

    url: str
    names: Names
    system: System
    background: BackgroundLoop
    broker: Any = None
    invented_types: list[str] = field(default_factory=list)
    """TYPEs a test made up; their durable shared queues are deleted from an external RabbitMQ at the end."""

    def repo(self, host: str = "repo1") -> str:
        return f"{self.names.repo}.{host}"


@asynccontextmanager
async def _broker_url() -> AsyncIterator[tuple[str, Names, Any]]:
    external = os.environ.get(ENV_URL)
    if external:
        yield external, Names.isolated(f"cli{uuid.uuid4().hex[:6]}"), None
        return
    from gear.broker import Broker

    async with Broker(port=0) as broker:
        yield broker.url, Names(), broker


@pytest.fixture(scope="package")
def running() -> Iterator[Running]:
    """One broker and one example system (3 REPO, 2 CTRL, 1 WEB) shared by the CLI tests."""
    background = BackgroundLoop()
    stack = AsyncExitStack()

    async def start() -> Running:
        url, names, broker = await stack.enter_async_context(_broker_url())
        system = await stack.enter_async_context(running_system(url, names=names))
        return Running(url=url, names=names, system=system, background=background, broker=broker)

    running = background.run(start())
    running.invented_types += [running.names.repo, running.names.ctrl, running.names.web]
    try:
        yield running
    finally:
        background.run(stack.aclose())
        if running.broker is None:
            background.run(_delete(running.url, running.invented_types, running.names.exchange))
        background.close()


async def _delete(url: str, queues: list[str], exchange: str) -> None:
    import aio_pika

    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        for queue in queues:
            await channel.queue_delete(queue)
        await channel.exchange_delete(exchange)


Invoke = Callable[..., Result]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """In-process ``gear serve`` exports GEAR_*; put the environment back afterwards."""
    for name in ("GEAR_URL", "GEAR_TYPE", "GEAR_HOST", "GEAR_CONNECT_WAIT", "GEAR_TRACE", "GEAR_TIMEOUT"):
        monkeypatch.setenv(name, "")  # recorded as unset, so whatever the command sets is removed after
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def gear_cli(running: Running) -> Invoke:
    """``gear_cli("call", "REPO.repo1", "status")``: run the CLI against the test broker."""
    runner = CliRunner()
    env = {"GEAR_URL": running.url, "GEAR_EXCHANGE": running.names.exchange}

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, list(args), env=env, input=input)

    return invoke


def json_out(result: Result) -> Any:
    """The JSON document a ``--json`` command printed on stdout."""
    return json.loads(result.stdout)


@dataclass
class Slow:
    """An extra service whose ``status`` answers too late and whose ``boom`` raises."""

    type: str
    host: str = "s1"

    @property
    def address(self) -> str:
        return f"{self.type}.{self.host}"


@pytest.fixture(scope="package")
def slow(running: Running) -> Iterator[Slow]:
    import gear

    spec = Slow(type="SLOW" if running.broker is not None else f"SLOW_{uuid.uuid4().hex[:6]}")
    running.invented_types.append(spec.type)
    svc = gear.Service(spec.type, spec.host, url=running.url, exchange=running.names.exchange)

    @svc.handler("status")
    async def status(payload: Any = None) -> str:
        await asyncio.sleep(1.5)
        return "late"

    @svc.handler("boom")
    def boom(payload: Any = None) -> None:
        raise KeyError("no such thing")

    running.background.run(svc.start())
    try:
        yield spec
    finally:
        running.background.run(svc.stop())
