"""Quorum delivery limits: a request redelivered past the limit is never lost silently.

Its caller gets ``DeliveryLimitError`` at once (not a timeout), the instance that learns of it logs one
line and counts it, and the dead letter stays in ``EXCHANGE.@dead`` for ``gear dead-letters``. On
RabbitMQ only: the reference broker runs quorum queues as classic ones, with no delivery limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

import aiormq
import pytest
from typer.testing import CliRunner

import gear
from gear.amqp import Delivery
from gear.base.envelope import ErrorBody
from gear.cli.main import app
from gear.serving.deadletter import DeadLetters, list_dead_letters, read_dead_letter
from gear.session.publisher import Outgoing
from gear.wire.properties import Properties
from tests.backends import BrokerHandle, RabbitMQ
from tests.conftest import unique
from tests.fleet import Fleet, eventually


class CrashingServer:
    """Takes the request off the queue and dies before answering (its connection closes with the
    delivery unacknowledged, so the broker requeues it), again and again, as a crash-looping server."""

    def __init__(self, url: str, queue: str) -> None:
        self.url = url
        self.queue = queue
        self.deliveries = 0

    async def run(self) -> None:
        while True:
            connection = await aiormq.connect(self.url)
            try:
                channel = await connection.channel()
                got = await channel.basic_get(self.queue, no_ack=False)
                if isinstance(got, aiormq.abc.DeliveredMessage) and got.delivery_tag is not None:
                    self.deliveries += 1
                else:
                    await asyncio.sleep(0.02)  # nothing yet (or any more): look again
            finally:
                await connection.close()


@pytest.fixture
async def rabbitmq_fleet(rabbitmq: RabbitMQ) -> Any:
    fleet = Fleet(BrokerHandle.of(rabbitmq))
    try:
        yield fleet
    finally:
        await fleet.stop()


@pytest.mark.rabbitmq
async def test_a_request_redelivered_past_the_limit_fails_at_once_and_is_kept(
    rabbitmq_fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    fleet = rabbitmq_fleet
    limit = 20  # RabbitMQ 4.x's own default, set explicitly by Gear on every release
    repo = unique("REPO")
    declarer = fleet.service(repo, "s1", quorum=True, delivery_limit=limit)

    @declarer.handler("work")
    async def work(_: Any = None) -> str:
        return "done"

    await fleet.start(declarer)  # declares REPO as Gear does (quorum, limit, dead-lettering) ...
    await declarer.stop()  # ... and leaves it with no Gear server: only the crashing one below
    caller = fleet.client(quorum=True, delivery_limit=limit)
    await fleet.start(caller)
    server = CrashingServer(fleet.broker.url, repo)
    crashing = asyncio.create_task(server.run())
    caplog.set_level(logging.WARNING, logger="gear.serving.deadletter")
    try:
        with pytest.raises(gear.DeliveryLimitError) as raised:
            await caller.rpc.call(repo, "work", {"n": 1}, timeout=60)
    finally:
        crashing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await crashing
    assert server.deliveries == limit + 1, "delivered once, then redelivered up to the limit"
    error = raised.value
    assert (error.type, error.details["queue"], error.details["reason"]) == (
        "DeliveryLimit",
        repo,
        "delivery_limit",
    )
    # RabbitMQ 4.3 says how often it was delivered (x-delivery-count); 3.x does not, 4.0 not always
    if fleet.broker.semantics >= (4, 3):
        assert error.details["deliveries"] == limit + 1
    assert error.details["deliveries"] in (limit + 1, None)
    # the error reply counts once its publish is confirmed, which may come after the reply itself
    await eventually(lambda: caller.stats["dead_letter_replies"] == 1, what="the error reply's confirm")
    assert (caller.stats["dead_letters"], caller.stats["dead_letter_replies"]) == (1, 1)
    lines = [r.getMessage() for r in caplog.records if r.name == "gear.serving.deadletter"]
    assert len(lines) == 1, lines
    assert f"dropped by queue {repo!r} (delivery_limit)" in lines[0]
    assert "telling the caller" in lines[0]

    # the operator's copy stays, and listing it twice leaves it there
    for _ in range(2):
        (kept,) = await list_dead_letters(fleet.broker.url, exchange=fleet.exchange, quiet=0.3)
    assert (kept.kind, kept.method, kept.sender, kept.queue) == ("gear.call", "work", caller.identity, repo)
    assert kept.dead_at is not None
    assert abs((datetime.now(UTC) - datetime.fromisoformat(kept.dead_at)).total_seconds()) < 600
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["dead-letters", "--url", fleet.broker.url, "--exchange", fleet.exchange, "--json"],
    )
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["queue"] == f"{fleet.exchange}.@dead"
    assert [(d["method"], d["request_id"]) for d in listed["dead_letters"]] == [("work", kept.request_id)]


@pytest.mark.rabbitmq
async def test_listing_a_broker_without_dead_letter_queues_says_so(rabbitmq: RabbitMQ) -> None:
    with pytest.raises(gear.ConnectionLostError, match=r"no dead-letter queue 'nowhere-\w+\.@dead'"):
        await list_dead_letters(rabbitmq.url, exchange=unique("nowhere-"), quiet=0.1)


def test_dead_letter_headers_of_each_release_are_read() -> None:
    """The headers RabbitMQ 3.10.8, 4.0.5 and 4.3.6 put on a message they dead-lettered (measured)."""
    death = {
        "count": 1,
        "reason": "delivery_limit",
        "queue": "REPO",
        "exchange": "",
        "routing-keys": ["REPO"],
    }
    common = {"x-death": [death], "x-first-death-queue": "REPO", "x-first-death-reason": "delivery_limit"}
    facts = {
        "4.3": read_dead_letter({**common, "x-delivery-count": 21, "x-acquired-count": 21}),
        "4.0": read_dead_letter(common),
        "3.10": read_dead_letter({**common, "x-delivery-count": 0}),
        "x-death only": read_dead_letter({"x-death": [death]}),
    }
    read = {k: None if v is None else (v.queue, v.reason, v.deliveries) for k, v in facts.items()}
    assert read == {
        "4.3": ("REPO", "delivery_limit", 21),
        "4.0": ("REPO", "delivery_limit", None),
        "3.10": ("REPO", "delivery_limit", None),
        "x-death only": ("REPO", "delivery_limit", None),
    }
    assert read_dead_letter({"x-gear-method": "work"}) is None
    assert read_dead_letter(None) is None


class _GoneChannel:
    """A channel that is gone: settling is a no-op."""

    def ack(self, delivery_tag: int) -> bool:
        return False

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        return False


class _Publisher:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    async def publish(self, msg: Outgoing, until: float) -> bool:
        self.sent.append(msg)
        return True


def _dead(reason: str, kind: str = "gear.call", deadline_in: float = 30.0) -> Delivery:
    headers = {
        "x-gear-method": "work",
        "x-gear-deadline": int((time.time() + deadline_in) * 1000),
        "x-first-death-queue": "REPO",
        "x-first-death-reason": reason,
    }
    reply_to = None if kind == "gear.cast" else "WEB.w1"
    props = Properties(
        message_id="r1.1",
        correlation_id="r1",
        reply_to=reply_to,
        message_type=kind,
        app_id="WEB.w1",
        headers=headers,
    )
    return Delivery(1, "q", "ctag", 1, True, "gear", "@dead", props, b"{}")


async def test_only_delivery_limit_drops_are_incidents_and_only_waiting_callers_are_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    publisher = _Publisher()
    watcher = DeadLetters("REPO.h1", publisher, delivery_limit=20)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG, logger="gear.serving.deadletter")
    for delivery in (
        _dead("expired"),  # its caller gave up at the deadline the expiry came from
        _dead("rejected", kind="gear.cast"),
        _dead("delivery_limit"),
        _dead("delivery_limit", deadline_in=-1.0),  # too late to tell
        _dead("delivery_limit", kind="gear.cast"),  # nobody to tell
    ):
        await watcher.handle(delivery, _GoneChannel())
    assert (watcher.seen, watcher.replies) == (3, 1)
    (reply,) = publisher.sent
    assert (reply.routing_key, reply.request_id, reply.kind) == ("WEB.w1", "r1", "gear.reply")
    error = ErrorBody.model_validate_json(reply.body)
    assert (error.type, error.details["queue"], error.details["reason"]) == (
        "DeliveryLimit",
        "REPO",
        "delivery_limit",
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.rsplit("; ", 1)[1] for w in warnings] == [
        "telling the caller",
        "its caller no longer waits",
        "no caller to tell",
    ]
