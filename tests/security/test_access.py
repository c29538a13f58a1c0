"""Users, vhosts and permissions, on the reference broker and on RabbitMQ (the same tests).

Every refusal is checked for its reply code and text. RabbitMQ 3.13+ prefixes the permission
(``configure access to queue ...``); 3.10-3.12 and the reference broker do not.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aio_pika
import aiormq
import pytest
from pamqp import commands, encode

from tests.backends import BrokerHandle, RabbitMQ
from tests.raw_amqp import PROTOCOL_HEADER, RawAmqp, ServerClosedError, client_properties
from tests.security.access_fixture import Names, Secured, rabbitmq_users, secured_broker

WAIT = 5.0
LOGIN_REFUSED = (
    "ACCESS_REFUSED - Login was refused using authentication mechanism {}. "
    "For details see the broker logfile."
)


@pytest.fixture(scope="module")
def names() -> Names:
    """One set of unique names for this module (rabbitmqctl is slow: the setup is made once)."""
    return Names.new()


@pytest.fixture(scope="module")
def _rabbitmq_users(rabbitmq: RabbitMQ, names: Names) -> Iterator[RabbitMQ]:
    if rabbitmq.ctl is None:
        pytest.skip(f"this RabbitMQ cannot be configured from the tests: {rabbitmq.ctl_note}")
    with rabbitmq_users(rabbitmq.ctl, names):
        yield rabbitmq


@pytest.fixture(params=["reference", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)])
async def secured(request: pytest.FixtureRequest, names: Names) -> AsyncIterator[Secured]:
    """The restricted-user setup on each broker."""
    if request.param == "reference":
        async with secured_broker("reference", names) as setup:
            yield setup
        return
    found: RabbitMQ = request.getfixturevalue("_rabbitmq_users")
    semantics = BrokerHandle.of(found).semantics
    async with secured_broker("rabbitmq", names, found.url, semantics) as setup:
        yield setup


def _assert_refusal(secured: Secured, text: str, kind: str, name: str) -> None:
    prefix = "(?:configure |write |read )?" if not secured.is_reference else ""
    pattern = (
        f"ACCESS_REFUSED - {prefix}access to {kind} '{name}' in vhost '{re.escape(secured.vhost)}' "
        f"refused for user '{re.escape(secured.user)}'"
    )
    assert re.fullmatch(pattern, text), f"expected {pattern!r}, got {text!r}"


Op = Callable[[aiormq.abc.AbstractChannel], Awaitable[Any]]


async def _publish_then_sync(channel: aiormq.abc.AbstractChannel, exchange: str) -> Any:
    await channel.basic_publish(b"m", exchange=exchange, routing_key="k")
    return await channel.basic_qos(prefetch_count=1)  # the refusal closes the channel before this answers


async def _consume(channel: aiormq.abc.AbstractChannel, queue: str) -> Any:
    async def ignore(message: aiormq.abc.DeliveredMessage) -> None:
        pass

    return await channel.basic_consume(queue, ignore)


REFUSALS: list[tuple[str, Op, str, str]] = [
    ("queue.declare", lambda ch: ch.queue_declare("x-q"), "queue", "x-q"),
    ("queue.declare of a new queue", lambda ch: ch.queue_declare("x-new"), "queue", "x-new"),
    ("queue.declare server-named", lambda ch: ch.queue_declare(""), "queue", "amq\\.gen-[A-Za-z0-9_-]{22}"),
    (
        "queue.declare with a DLX (read on it)",
        lambda ch: ch.queue_declare("c-dlq", arguments={"x-dead-letter-exchange": "w-x"}),
        "queue",
        "c-dlq",
    ),
    ("queue.delete", lambda ch: ch.queue_delete("x-q"), "queue", "x-q"),
    ("queue.delete of a missing queue", lambda ch: ch.queue_delete("x-gone"), "queue", "x-gone"),
    ("queue.purge", lambda ch: ch.queue_purge("x-q"), "queue", "x-q"),
    ("queue.bind (write on the queue)", lambda ch: ch.queue_bind("x-q", "r-x", "k"), "queue", "x-q"),
    ("queue.bind (read on the exchange)", lambda ch: ch.queue_bind("w-q", "x-x", "k"), "exchange", "x-x"),
    ("queue.unbind", lambda ch: ch.queue_unbind("x-q", "r-x", "k"), "queue", "x-q"),
    ("exchange.declare", lambda ch: ch.exchange_declare("x-x", exchange_type="direct"), "exchange", "x-x"),
    (
        "exchange.declare with an AE (read on it)",
        lambda ch: ch.exchange_declare(
            "c-ae", exchange_type="direct", arguments={"alternate-exchange": "w-x"}
        ),
        "exchange",
        "c-ae",
    ),
    ("exchange.delete", lambda ch: ch.exchange_delete("x-x"), "exchange", "x-x"),
    (
        "exchange.bind (write on the destination)",
        lambda ch: ch.exchange_bind("x-x", "r-x", "k"),
        "exchange",
        "x-x",
    ),
    ("exchange.bind (read on the source)", lambda ch: ch.exchange_bind("w-x", "x-x", "k"), "exchange", "x-x"),
    ("basic.publish", lambda ch: _publish_then_sync(ch, "x-x"), "exchange", "x-x"),
    (
        "basic.publish to the default exchange",
        lambda ch: _publish_then_sync(ch, ""),
        "exchange",
        "amq\\.default",
    ),
    ("basic.consume", lambda ch: _consume(ch, "x-q"), "queue", "x-q"),
    ("basic.get", lambda ch: ch.basic_get("x-q"), "queue", "x-q"),
]


PASSIVE_DECLARES: list[tuple[str, Op, str, str]] = [
    ("queue.declare passive", lambda ch: ch.queue_declare("x-q", passive=True), "queue", "x-q"),
    (
        "exchange.declare passive",
        lambda ch: ch.exchange_declare("x-x", exchange_type="direct", passive=True),
        "exchange",
        "x-x",
    ),
]
"""Need no permission up to RabbitMQ 4.2 (and on the reference broker), configure from 4.3 on."""


ALLOWED: list[tuple[str, Op]] = [
    ("queue.declare (configure)", lambda ch: ch.queue_declare("c-q")),
    ("queue.bind (write queue, read exchange)", lambda ch: ch.queue_bind("w-q", "r-x", "k")),
    ("basic.publish (write)", lambda ch: _publish_then_sync(ch, "w-x")),
    ("basic.get (read)", lambda ch: ch.basic_get("r-q")),
    ("basic.consume (read)", lambda ch: _consume(ch, "r-q")),
    ("queue.purge (read)", lambda ch: ch.queue_purge("r-q")),
    ("queue.delete (configure)", lambda ch: ch.queue_delete("c-q")),
]


async def test_every_operation_checks_its_permission(secured: Secured) -> None:
    refusals, allowed = list(REFUSALS), list(ALLOWED)
    if not secured.is_reference and secured.semantics >= (4, 3):
        refusals += [
            (f"{label} (configure on 4.3+)", op, kind, name) for label, op, kind, name in PASSIVE_DECLARES
        ]
    else:
        allowed += [(f"{label} (no permission needed)", op) for label, op, _, _ in PASSIVE_DECLARES]
    conn = await aiormq.connect(secured.url())
    try:
        for label, op, kind, name in refusals:
            channel = await conn.channel()
            with pytest.raises(aiormq.exceptions.ChannelAccessRefused) as info:
                await asyncio.wait_for(op(channel), WAIT)
            _assert_refusal(secured, str(info.value.args[0]), kind, name)
            assert not conn.is_closed, f"{label}: a permission refusal closes the channel, not the connection"
        for label, op in allowed:
            channel = await conn.channel()
            try:
                await asyncio.wait_for(op(channel), WAIT)
            except aiormq.exceptions.AMQPError as exc:
                pytest.fail(f"{label} must be allowed, got {exc!r}")
            await channel.close()
    finally:
        await conn.close()


async def _open_refusal(secured: Secured, user: str, vhost: str) -> commands.Connection.Close:
    raw = await RawAmqp.open(secured.url(user, secured.password, vhost), wait_open_ok=False)
    try:
        return await raw.expect_connection_close(530, f"connection.open of {vhost!r} as {user!r}")
    finally:
        await raw.close()


async def test_vhost_without_access_is_530_at_connection_open(secured: Secured) -> None:
    close = await _open_refusal(secured, secured.stranger, secured.vhost)
    assert close.reply_text == (
        f"NOT_ALLOWED - access to vhost '{secured.vhost}' refused for user '{secured.stranger}'"
    )
    assert (close.class_id, close.method_id) == (10, 40)
    close = await _open_refusal(secured, secured.user, "/")  # a user with access to one vhost only
    assert close.reply_text == f"NOT_ALLOWED - access to vhost '/' refused for user '{secured.user}'"
    close = await _open_refusal(secured, secured.user, secured.vhost + "-missing")
    assert close.reply_text == f"NOT_ALLOWED - vhost {secured.vhost}-missing not found"


async def test_wrong_password_and_unknown_user_get_the_same_403(secured: Secured) -> None:
    before = secured.failed_logins() if secured.is_reference else 0
    texts = []
    for user in (secured.user, secured.user + "-nobody"):
        with pytest.raises(aiormq.exceptions.ProbableAuthenticationError) as info:
            await aio_pika.connect(secured.url(user, "not-" + secured.password), timeout=WAIT)
        texts.append(str(info.value.args[0]))
    assert texts == [LOGIN_REFUSED.format("PLAIN")] * 2, "the answer must not tell which users exist"
    if secured.broker is not None:
        assert secured.failed_logins() == before + 2, "failed logins are counted in the status view"
        assert f"failed logins: {before + 2}" in str(secured.broker.status())


async def _start_ok(secured: Secured, mechanism: str, response: str, *, capabilities: bool = True) -> RawAmqp:
    raw = await RawAmqp.connect(secured.url())
    raw.send_bytes(PROTOCOL_HEADER)
    start = await raw.expect(commands.Connection.Start)
    # Both are offered; RabbitMQ's order follows its registry, which changes with the plugins enabled
    # (3.10 with management and Prometheus lists AMQPLAIN first).
    assert {"PLAIN", "AMQPLAIN"} <= set(start.mechanisms.split())
    properties: dict[str, Any] = client_properties() if capabilities else {"product": "no-capabilities"}
    raw.send(
        0,
        commands.Connection.StartOk(
            client_properties=properties, mechanism=mechanism, response=response, locale="en_US"
        ),
    )
    return raw


def _amqplain(user: str, password: str) -> str:
    return encode.field_table({"LOGIN": user, "PASSWORD": password})[4:].decode("utf-8")


async def test_amqplain_login(secured: Secured) -> None:
    raw = await _start_ok(secured, "AMQPLAIN", _amqplain(secured.user, secured.password))
    try:
        await raw.expect(commands.Connection.Tune)
    finally:
        await raw.close()
    raw = await _start_ok(secured, "AMQPLAIN", _amqplain(secured.user, "wrong"))
    try:
        close = await raw.expect_connection_close(403, "AMQPLAIN with a wrong password")
        assert close.reply_text == LOGIN_REFUSED.format("AMQPLAIN")
        assert (close.class_id, close.method_id) == (0, 0)
    finally:
        await raw.close()


async def test_failed_handshakes_without_the_capability_just_close(secured: Secured) -> None:
    """No close frame for a client that cannot take one; the socket closes (RabbitMQ: after 3 s)."""
    cases = [
        ("PLAIN", f"\0{secured.user}\0wrong", False),  # wrong password, no authentication_failure_close
        ("NOT-A-MECHANISM", f"\0{secured.user}\0{secured.password}", True),
        ("PLAIN", "no separators", True),  # malformed response
        ("EXTERNAL", "", True),  # not offered without a client certificate
    ]

    async def silent(mechanism: str, response: str, capabilities: bool) -> None:
        raw = await _start_ok(secured, mechanism, response, capabilities=capabilities)
        try:
            data = await raw.wait_eof(f"{mechanism} {response!r}")
            assert data == b"", f"{mechanism}: expected no answer at all, got {data!r}"
        finally:
            await raw.close()

    await asyncio.gather(*(silent(*case) for case in cases))


async def test_update_secret_is_answered(secured: Secured) -> None:
    raw = await RawAmqp.open(secured.url())
    try:
        raw.send(0, commands.Connection.UpdateSecret(new_secret=secured.password, reason="rotation"))
        await raw.expect(commands.Connection.UpdateSecretOk)
        await raw.open_channel(1)  # the connection goes on
    finally:
        await raw.close()


async def test_closed_socket_after_refusal_loses_nothing_else(secured: Secured) -> None:
    """A refused login leaves the broker serving everyone else."""
    raw = await _start_ok(secured, "PLAIN", f"\0{secured.user}\0wrong")
    try:
        await raw.expect_connection_close(403, "wrong password")
    except ServerClosedError:  # pragma: no cover - a broker that closed first is also fine
        pass
    finally:
        await raw.close()
    conn = await aiormq.connect(secured.url())
    await conn.close()
