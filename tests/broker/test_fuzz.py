"""Hostile input: random and mutated frames against a live broker, which must keep serving others."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import aio_pika
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pamqp import body as pbody, commands, frame, header

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


_METHODS = st.sampled_from(
    [
        commands.Queue.Declare(queue="q", arguments={"x-max-length": 2, "x-dead-letter-exchange": "dlx"}),
        commands.Queue.Declare(queue="", exclusive=True),
        commands.Queue.Declare(queue="q", passive=True),
        commands.Exchange.Declare(exchange="dlx", exchange_type="fanout"),
        commands.Exchange.Declare(
            exchange="t", exchange_type="topic", arguments={"alternate-exchange": "dlx"}
        ),
        commands.Exchange.Bind(destination="dlx", source="t", routing_key="#"),
        commands.Queue.Bind(queue="q", exchange="dlx"),
        commands.Queue.Bind(queue="q", exchange="t", routing_key="a.*"),
        commands.Queue.Unbind(queue="q", exchange="t", routing_key="a.*"),
        commands.Queue.Purge(queue="q"),
        commands.Queue.Delete(queue="q"),
        commands.Exchange.Delete(exchange="t"),
        commands.Basic.Qos(prefetch_count=1),
        commands.Basic.Qos(prefetch_count=2, global_=True),
        commands.Basic.Consume(queue="q", consumer_tag="c"),
        commands.Basic.Consume(queue="q", consumer_tag="n", no_ack=True),
        commands.Basic.Consume(queue="amq.rabbitmq.reply-to", consumer_tag="r", no_ack=True),
        commands.Basic.Cancel(consumer_tag="c"),
        commands.Basic.Get(queue="q"),
        commands.Basic.Ack(delivery_tag=1),
        commands.Basic.Ack(delivery_tag=0, multiple=True),
        commands.Basic.Nack(delivery_tag=2, multiple=True, requeue=False),
        commands.Basic.Reject(delivery_tag=1, requeue=True),
        commands.Basic.Recover(requeue=True),
        commands.Confirm.Select(),
        commands.Tx.Select(),
        commands.Tx.Commit(),
        commands.Tx.Rollback(),
        commands.Channel.Flow(active=True),
        commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0),
        commands.Channel.CloseOk(),
        commands.Channel.Open(),
    ]
)
_PUBLISH_PROPS = st.sampled_from(
    [
        commands.Basic.Properties(),
        commands.Basic.Properties(expiration="0"),
        commands.Basic.Properties(reply_to="amq.rabbitmq.reply-to", priority=5),
        commands.Basic.Properties(headers={"CC": ["q"], "BCC": ["x"]}, user_id="guest"),
    ]
)


@st.composite
def _session(draw: st.DrawFn) -> list[tuple[int, object]]:
    steps: list[tuple[int, object]] = []
    for _ in range(draw(st.integers(1, 25))):
        channel = draw(st.sampled_from([1, 1, 1, 2]))
        if draw(st.booleans()):
            steps.append((channel, draw(_METHODS)))
        else:
            steps.append(
                (
                    channel,
                    (
                        "publish",
                        draw(st.sampled_from(["", "t", "dlx"])),
                        draw(st.sampled_from(["q", "a.b", "amq.rabbitmq.reply-to.x"])),
                        draw(_PUBLISH_PROPS),
                        draw(st.booleans()),
                    ),
                )
            )
        if draw(st.integers(0, 9)) == 0:
            steps.append((0, ("tick", draw(st.floats(0, 5)))))
    return steps


@settings(max_examples=300, deadline=None)
@given(_session())
def test_random_method_sequences_keep_the_core_consistent(steps: list[tuple[int, object]]) -> None:
    from tests.broker._harness import Client, make_core

    core, clock = make_core()
    client, other = Client(core), Client(core)
    client.handshake()
    other.handshake()
    client.open_channel(1)
    client.open_channel(2)
    for channel, step in steps:
        if client.conn.finished:
            break
        if isinstance(step, tuple) and step[0] == "tick":
            clock.now += float(step[1])
            core.tick()
            continue
        if isinstance(step, tuple):
            _, exchange, key, props, mandatory = step
            client.publish(channel, exchange, key, b"body", mandatory=mandatory, properties=props)
        else:
            client.send(channel, step)
    assert core.internal_errors == 0
    # the broker's books balance: no negative counts, and a fresh client still works
    for vhost in core.vhosts.values():
        for queue in vhost.queues.values():
            assert queue.unacked >= 0
            assert all(c.unacked >= 0 for c in queue.consumers)
    client.conn.connection_lost()
    core.run_turn()
    assert all(q.unacked == 0 for v in core.vhosts.values() for q in v.queues.values())
    held = {
        id(e.message): e.message.size
        for v in core.vhosts.values()
        for q in v.queues.values()
        for e in q.ready
    }
    assert core.alarm.used == sum(held.values()), "memory accounting must match the messages held"
    other.open_channel(1)
    out = other.send(1, commands.Queue.Declare(queue="fresh"))
    assert isinstance(out[-1][1], commands.Queue.DeclareOk)
