"""A reference broker and the example system, running on a loop in a background thread.

CLI commands call ``asyncio.run`` themselves, so the tests that invoke them are plain functions on the
main thread, and everything they talk to lives on a separate thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

from examples.system import System, running_system

T = TypeVar("T")


class BackgroundLoop:
    """An event loop on its own thread; ``run(coro)`` executes a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-broker-loop", daemon=True)
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
    system: System
    background: BackgroundLoop


@pytest.fixture(scope="package")
def running() -> Iterator[Running]:
    """One reference broker and one example system (3 REPO, 2 CTRL, 1 WEB) for all CLI tests."""
    from gear.broker import Broker

    background = BackgroundLoop()
    stack = AsyncExitStack()

    async def start() -> tuple[str, System]:
        broker = await stack.enter_async_context(Broker(port=0))
        system = await stack.enter_async_context(running_system(broker.url))
        return broker.url, system

    url, system = background.run(start())
    try:
        yield Running(url=url, system=system, background=background)
    finally:
        background.run(stack.aclose())
        background.close()


@pytest.fixture
def url(running: Running) -> str:
    return running.url


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner()
