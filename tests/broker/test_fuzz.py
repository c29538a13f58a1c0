"""Hostile input: random and mutated frames against a live broker, which must keep serving others."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import aio_pika
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import body as pbody
from pamqp import commands, frame, header

from gear.broker import Broker
from tests.broker._harness import CAPABILITIES, PROTOCOL_HEADER


class _ThreadBroker:
    """A broker on its own event loop in a thread, so synchronous hypothesis tests can hammer it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(port=0)
        self.errors: list[dict[str, object]] = []
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> _ThreadBroker:
        self.loop.set_exception_handler(lambda _loop, context: self.errors.append(context))
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def threaded() -> Iterator[_ThreadBroker]:
    with _ThreadBroker() as server:
        yield server


def _handshake() -> bytes:
    return (
        PROTOCOL_HEADER
        + b"".join(
            frame.marshal(m, 0)
            for m in (
                commands.Connection.StartOk(
                    client_properties={"capabilities": CAPABILITIES},
                    mechanism="PLAIN",
                    response="\x00guest\x00guest",
                ),
                commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0),
                commands.Connection.Open(virtual_host="/"),
            )
        )
        + frame.marshal(commands.Channel.Open(), 1)
    )


_VALID = [
    frame.marshal(commands.Queue.Declare(queue="fuzz", arguments={"x-message-ttl": 1000}), 1),
    frame.marshal(commands.Exchange.Declare(exchange="fx", exchange_type="topic"), 1),
    frame.marshal(commands.Queue.Bind(queue="fuzz", exchange="fx", routing_key="a.#"), 1),
    frame.marshal(commands.Basic.Publish(exchange="fx", routing_key="a.b", mandatory=True), 1)
    + frame.marshal(
        header.ContentHeader(0, 5, commands.Basic.Properties(headers={"k": [1, "x"]}, expiration="50")), 1
    )
    + frame.marshal(pbody.ContentBody(b"hello"), 1),
    frame.marshal(commands.Basic.Consume(queue="fuzz", consumer_tag="c"), 1),
    frame.marshal(commands.Basic.Get(queue="fuzz"), 1),
    frame.marshal(commands.Basic.Ack(delivery_tag=1, multiple=True), 1),
    frame.marshal(commands.Basic.Nack(delivery_tag=0, multiple=True, requeue=True), 1),
    frame.marshal(commands.Confirm.Select(), 1),
    frame.marshal(commands.Tx.Select(), 1),
    frame.marshal(commands.Basic.Qos(prefetch_count=3), 1),
    frame.marshal(commands.Channel.Open(), 2),
    b"\x08\x00\x00\x00\x00\x00\x00\xce",
]


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    frames = draw(st.lists(st.sampled_from(_VALID), min_size=1, max_size=8))
    data = bytearray(b"".join(frames))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[pos : pos + draw(st.integers(1, 8))]
    return bytes(data)


def _blast(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(data)
        sock.settimeout(0.02)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError):
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        _mutated().map(lambda d: _handshake() + d),
        st.binary(max_size=300),
        _mutated().map(lambda d: PROTOCOL_HEADER + d),
    )
)
def test_hostile_bytes_never_crash_the_broker(threaded: _ThreadBroker, data: bytes) -> None:
    _blast(threaded.broker.port, data)
    assert threaded.broker.core.internal_errors == 0
    assert threaded.errors == []


def test_a_normal_client_works_after_the_fuzzing(threaded: _ThreadBroker) -> None:
    async def check() -> None:
        connection = await aio_pika.connect(threaded.broker.url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(exclusive=True)
            await channel.default_exchange.publish(aio_pika.Message(b"still here"), queue.name)
            assert (await queue.get(timeout=5)).body == b"still here"

    asyncio.run(check())
    assert threaded.broker.core.internal_errors == 0
