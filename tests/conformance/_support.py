"""Typed helpers shared by the conformance tests: connections, inboxes, and error assertions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, cast

import aio_pika
import aiormq
import aiormq.channel
import aiormq.connection
import pytest
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)

from tests.backends import BrokerHandle
from tests.conftest import unique

#: Upper bound for anything that must happen (a delivery, a reconnect). Only a failure waits this long.
WAIT = 5.0
#: How long a test watches for something that must NOT happen (a delivery past prefetch, an expired message).
QUIET = 0.4

_CODE_BY_EXCEPTION: dict[type[BaseException], int] = {
    **{cls: code for code, cls in aiormq.channel.EXCEPTION_MAPPING.items()},
    **{cls: code for code, cls in aiormq.connection.EXCEPTION_MAPPING.items()},
}

REPLY_NAMES: dict[int, str] = {
    312: "NO_ROUTE",
    403: "ACCESS_REFUSED",
    404: "NOT_FOUND",
    405: "RESOURCE_LOCKED",
    406: "PRECONDITION_FAILED",
    501: "FRAME_ERROR",
    503: "COMMAND_INVALID",
    504: "CHANNEL_ERROR",
    505: "UNEXPECTED_FRAME",
    530: "NOT_ALLOWED",
    540: "NOT_IMPLEMENTED",
}


def reply_of(exc: BaseException) -> tuple[int | None, str]:
    """The (reply code, reply text) a broker close carried, as aiormq reports it."""
    for cls in type(exc).__mro__:
        if cls in _CODE_BY_EXCEPTION:
            return _CODE_BY_EXCEPTION[cls], str(exc.args[0]) if exc.args else ""
    if len(exc.args) >= 2 and isinstance(exc.args[0], int):  # unmapped code: ChannelClosed(code, text)
        return exc.args[0], str(exc.args[1])
    return None, str(exc.args[0]) if exc.args else ""


async def expect_close(call: Awaitable[Any], code: int, rule: str) -> str:
    """Await ``call``; it must fail with a broker close of ``code`` whose text starts ``NAME - ``."""
    name = REPLY_NAMES[code]
    error: BaseException | None = None
    try:
        await asyncio.wait_for(call, WAIT)
    except TimeoutError:
        pytest.fail(f"{rule}: expected reply {code}, but the broker did not answer within {WAIT}s")
    except (aiormq.exceptions.AMQPError, aio_pika.exceptions.AMQPError) as exc:
        error = exc
    if error is None:
        pytest.fail(f"{rule}: expected the broker to close with {code} {name}, but the call succeeded")
    got_code, text = reply_of(error)
    assert got_code == code, f"{rule}: expected reply code {code} {name}, got {got_code} ({error!r})"
    assert text.startswith(f"{name} - "), f"{rule}: reply text should start '{name} - ', got {text!r}"
    return text


async def underlay(channel: AbstractChannel) -> aiormq.Channel:
    """The aiormq channel under an aio-pika channel, for frames aio-pika has no method for."""
    return cast(aiormq.Channel, await channel.get_underlay_channel())


def body(message: AbstractIncomingMessage | None) -> bytes | None:
    """The message body, or None for no message (keeps assertions single-part)."""
    return None if message is None else message.body


class Inbox:
    """Collects what a consumer receives; ``next`` and ``quiet`` turn waits into readable failures."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self.received: list[AbstractIncomingMessage] = []

    async def __call__(self, message: AbstractIncomingMessage) -> None:
        self.received.append(message)
        await self._queue.put(message)

    async def next(self, rule: str, within: float = WAIT) -> AbstractIncomingMessage:
        """The next delivery; fails with ``rule`` if none arrives within ``within`` seconds."""
        try:
            return await asyncio.wait_for(self._queue.get(), within)
        except TimeoutError:
            pytest.fail(f"{rule}: no delivery arrived within {within}s")

    async def take(self, count: int, rule: str) -> list[AbstractIncomingMessage]:
        """The next ``count`` deliveries, in order."""
        return [await self.next(f"{rule} (delivery {i + 1} of {count})") for i in range(count)]

    async def quiet(self, rule: str, wait: float = QUIET) -> None:
        """Nothing may be delivered during ``wait`` seconds."""
        with contextlib.suppress(TimeoutError):
            message = await asyncio.wait_for(self._queue.get(), wait)
            pytest.fail(f"{rule}: unexpected delivery {message.body!r} (routing key {message.routing_key!r})")


async def get_or_none(queue: AbstractQueue, *, no_ack: bool = True) -> AbstractIncomingMessage | None:
    """One ``basic.get``: the message, or None on ``get-empty``."""
    return await queue.get(no_ack=no_ack, fail=False, timeout=WAIT)


async def drain_bodies(queue: AbstractQueue) -> list[bytes]:
    """Every ready message's body, taken with ``basic.get`` until ``get-empty``."""
    bodies: list[bytes] = []
    while (message := await get_or_none(queue)) is not None:
        bodies.append(message.body)
    return bodies


def msg(body: bytes | str, **properties: Any) -> aio_pika.Message:
    """A message with ``body`` (str is UTF-8 encoded)."""
    return aio_pika.Message(body.encode() if isinstance(body, str) else body, **properties)


@dataclass
class Amqp:
    """Per-test AMQP session: connections that close at teardown, names that are cleaned up on RabbitMQ."""

    broker: BrokerHandle
    connections: list[AbstractConnection] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    exchanges: list[str] = field(default_factory=list)

    def queue_name(self, prefix: str) -> str:
        """A unique queue name, deleted after the test."""
        name = unique(f"conf.{prefix}.")
        self.queues.append(name)
        return name

    def exchange_name(self, prefix: str) -> str:
        """A unique exchange name, deleted after the test."""
        name = unique(f"conf.{prefix}.")
        self.exchanges.append(name)
        return name

    async def connect(self, url: str | None = None) -> AbstractConnection:
        """A plain ``aio_pika.connect`` connection."""
        connection = await aio_pika.connect(url or self.broker.url, timeout=WAIT)
        self.connections.append(connection)
        return connection

    async def connect_robust(self, url: str | None = None, **kwargs: Any) -> AbstractRobustConnection:
        """An ``aio_pika.connect_robust`` connection."""
        connection = await aio_pika.connect_robust(url or self.broker.url, timeout=WAIT, **kwargs)
        self.connections.append(connection)
        return cast(AbstractRobustConnection, connection)

    async def channel(
        self,
        connection: AbstractConnection | None = None,
        *,
        confirms: bool = True,
        returns_raise: bool = False,
    ) -> AbstractChannel:
        """A channel on ``connection`` (default: a new plain connection)."""
        connection = connection or await self.connect()
        return await connection.channel(publisher_confirms=confirms, on_return_raises=returns_raise)

    async def exchange(
        self, channel: AbstractChannel, kind: str, prefix: str = "x", **kwargs: Any
    ) -> AbstractExchange:
        """Declare a fresh exchange of ``kind`` (direct, fanout, topic, headers)."""
        return await channel.declare_exchange(self.exchange_name(prefix), kind, **kwargs)

    async def queue(self, channel: AbstractChannel, prefix: str = "q", **kwargs: Any) -> AbstractQueue:
        """Declare a fresh named queue (cleaned up on RabbitMQ)."""
        return await channel.declare_queue(self.queue_name(prefix), **kwargs)

    async def close(self) -> None:
        """Close connections, then delete what the test declared (RabbitMQ outlives the test)."""
        for connection in reversed(self.connections):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), WAIT)
        if self.broker.is_reference or not (self.queues or self.exchanges):
            return
        connection = await aio_pika.connect(self.broker.url, timeout=WAIT)
        try:
            channel = await connection.channel()
            for queue in self.queues:
                try:
                    await channel.queue_delete(queue)
                except aiormq.exceptions.ChannelLockedResource:
                    # an exclusive queue whose owner is still closing (RabbitMQ 4.x removes it a
                    # moment after the close): it goes with its connection; the error closed the channel
                    channel = await connection.channel()
            for exchange in self.exchanges:
                await channel.exchange_delete(exchange)
        finally:
            await connection.close()
