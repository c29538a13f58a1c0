"""The publisher against a slow broker, without sockets: an unroutable message ends as unroutable.

A loaded broker can take a good part of a call's budget to return each attempt. A republish whose
return could only come after the deadline would end as "outcome unknown" (a timeout for a call) and
hide what every earlier verdict said; the publisher does not start one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gear.base.deadline import Deadline
from gear.errors import PublishRefusedError, UnroutableError
from gear.link.publishing import Outcome, PublishResult
from gear.session.publisher import Outgoing, Publisher, RepublishPolicy


class SlowReturns:
    """A link whose broker returns every attempt ``rtt`` seconds after it was sent; an attempt whose
    return would come after its ``until`` gets no verdict in time."""

    def __init__(self, rtt: float) -> None:
        self.rtt = rtt
        self.attempts = 0
        self.is_open = True
        self.publishing = self

    async def publish(
        self, exchange: str, routing_key: str, body: bytes, *, until: float, **_: Any
    ) -> PublishResult:
        self.attempts += 1
        loop = asyncio.get_running_loop()
        if loop.time() + self.rtt > until:
            await asyncio.sleep(max(0.0, until - loop.time()))
            return PublishResult(Outcome.UNCONFIRMED, "no confirm before the deadline")
        await asyncio.sleep(self.rtt)
        return PublishResult(Outcome.RETURNED)


class Connector:
    """A connector whose link is up and unblocked."""

    def __init__(self, link: Any) -> None:
        self.link = link
        self.ready = asyncio.Event()
        self.ready.set()
        self.unblocked = asyncio.Event()
        self.unblocked.set()
        self.connected_url = "amqp://guest:***@broker:5672/"
        self.blocked_reason = None


def _request() -> Outgoing:
    return Outgoing(
        routing_key="REPO.gone", address="REPO.gone", body=b"null", request_id="r1", kind="call",
        headers={}, method="get",
    )  # fmt: skip


def _publisher(link: Any, app_id: str, initial: float, maximum: float = 1.0) -> Publisher:
    """A publisher on ``link`` (a fake with ``publish``) whose connection is up and unblocked."""
    policy = RepublishPolicy(initial=initial, maximum=maximum)
    return Publisher(Connector(link), exchange="gear", app_id=app_id, policy=policy)  # type: ignore[arg-type]


async def test_no_republish_starts_whose_return_could_only_come_after_the_deadline() -> None:
    # returns take 0.2 s; backoffs 0.05 s, then 0.1 s; a budget of 0.65 s. After the second return
    # (at about 0.45 s) a third attempt would be sent at 0.55 s and could only be returned at 0.75 s.
    link = SlowReturns(rtt=0.2)
    publisher = _publisher(link, "WEB.w1", initial=0.05)
    until = Deadline.from_timeout(0.65)
    with pytest.raises(UnroutableError) as info:
        await publisher.publish(_request(), until, verdict_grace=0.0)
    assert info.value.attempts == link.attempts  # every attempt sent had its verdict: a return
    assert info.value.broker == "amqp://guest:***@broker:5672/"


class RefusesAWhile:
    """A link whose broker refuses every attempt (closes the channel over it, 403) until ``until``
    seconds after the first, as a node whose data disk died does until its link is left."""

    def __init__(self, refusing: float) -> None:
        self.refusing = refusing
        self.started: float | None = None
        self.attempts = 0
        self.is_open = True
        self.publishing = self

    async def publish(self, exchange: str, routing_key: str, body: bytes, **_: Any) -> PublishResult:
        self.attempts += 1
        now = asyncio.get_running_loop().time()
        self.started = now if self.started is None else self.started
        await asyncio.sleep(0)
        if now - self.started < self.refusing:
            return PublishResult(Outcome.CHANNEL_CLOSED, "ACCESS_REFUSED - write access refused", 403)
        return PublishResult(Outcome.CONFIRMED)


def _reply() -> Outgoing:
    return Outgoing(
        routing_key="WEB.c", address="WEB.c", body=b"null", request_id="r1", kind="gear.reply",
        headers={}, method="get",
    )  # fmt: skip


async def test_a_reply_the_broker_refuses_for_a_while_goes_through_once_it_takes_it() -> None:
    link = RefusesAWhile(refusing=0.3)
    publisher = _publisher(link, "REPO.r1", initial=0.05, maximum=0.2)
    suspected: list[Any] = []
    publisher.on_refused = suspected.append  # the zombie probe's suspect, in a Service
    assert await publisher.publish(_reply(), Deadline.from_timeout(2.0), policy=publisher.reply_policy)
    assert link.attempts > 2
    assert suspected == [link] * (link.attempts - 1)  # every refusal reported the link it came on


async def test_a_refused_request_fails_at_once_with_the_brokers_reason() -> None:
    link = RefusesAWhile(refusing=0.3)
    publisher = _publisher(link, "WEB.w1", initial=0.05, maximum=0.2)
    with pytest.raises(PublishRefusedError, match="ACCESS_REFUSED"):
        await publisher.publish(_request(), Deadline.from_timeout(2.0))
    assert link.attempts == 2  # the second alone on its channel: the refusal is this message's own
