"""Publishing with confirms, returns and a bounded republish policy.

Theory of operation
-------------------
Every Gear publish is ``mandatory`` on a channel with publisher confirms. For one logical message
(one stable request id) the :class:`Publisher` makes one or more *attempts*:

1. Wait until a link is ready and the connection is not blocked, but never past the attempt budget
   (``until``): publishes during a reconnect or a memory alarm wait instead of failing at once or
   hanging forever.
2. Publish with ``message_id = <request id>.<attempt>`` and the attempt number in a header. The
   message id must differ per attempt: the link (``gear.link.confirms``) matches ``basic.return`` to
   its pending confirm by message id, and RabbitMQ sends the return *before* the ack.
3. The attempt's outcome (a value from :mod:`gear.link.publishing`) decides what comes next (the
   sans-I/O policy :class:`gear.session.attempts.Attempts` decides, :meth:`Publisher.publish` carries it out):

   * **confirmed**: done;
   * **returned** (no queue bound, e.g. the instance queue was deleted, or no TYPE consumer declared
     its queue yet): sleep a growing backoff and republish, as long as the next attempt can still
     start before ``until``; then ``UnroutableError``. A call's policy gives up sooner, once the
     broker returned it ``give_up_after`` times (``Settings.unroutable_after``): a caller learns at
     once that nobody serves the address. Policies that must not retry (a gather to ``TYPE.*`` with
     no instance) get ``False`` back at once;
   * **nacked**: retried twice, after a pause and on a fresh publish channel (nacks are transient during
     a cluster node loss); a third nack is ``NotConfirmedError`` (the broker refused responsibility);
   * **link lost / not sent**: the link is taken out of service at once (the connector reconnects)
     and the attempt is repeated on the next link (at-least-once: the stable request id lets the
     server's duplicate window drop the copy);
   * **channel closed** by a channel error (say a 406): the channel is reopened and the attempt
     repeated *in isolation* (nothing else in flight on the channel), since the culprit may have been
     another message in flight; a refusal of the isolated attempt is this message's own:
     ``PublishRefusedError`` with the broker's reason. A reply (:attr:`Publisher.reply_policy`)
     refused with ``403``/``404`` is sent again after a growing pause until its budget ends instead:
     its caller learns nothing from the refusal, and a node whose data disk died refuses everything so
     until the zombie probe moves the link to a healthy node, where the reply goes through;
   * **unconfirmed** at ``until``: ``OutcomeUnknownError`` (it may have been delivered).

The whole loop is bounded by ``until`` (the call's deadline or a cast's retry budget), so a missing
queue never turns into a livelock and a dead broker never into a hang. When the budget runs out with
nothing sent, the error is ``ConnectionLostError``; when an attempt may have reached the broker, it is
``OutcomeUnknownError``. Every retry waits on something that can only complete later (a new link, a
backoff, a reopened channel), so the loop never starves the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from gear.base.deadline import Deadline
from gear.base.envelope import ATTEMPT, attempt_message_id
from gear.base.records import immutable
from gear.errors import GearError
from gear.link import Link, Outcome, PublishResult
from gear.session.attempts import NODE_REFUSALS, Attempts, RepublishPolicy, Retry, Settled, Step
from gear.session.reconnect import Connector
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter

__all__ = ("Outgoing", "Publisher", "RepublishPolicy")

_VERDICT_GRACE = 0.25
"""Seconds past ``until`` an attempt already sent may wait for the broker's verdict (a busy broker's
return or ack can be late; a verdict beats "outcome unknown"). Within the 0.5 s the SDK promises."""


@immutable
class Outgoing:
    """One logical message, as built by its sender and shared by all its attempts (never changed:
    what happened to it is the value :meth:`Publisher.publish` returns or the error it raises)."""

    routing_key: str
    address: str
    body: bytes
    request_id: str
    kind: str
    headers: dict[str, Any]
    """The wire headers of the first attempt (a retry sends a copy with its attempt number)."""
    reply_to: str | None = None
    deadline: Deadline | None = None
    """The request's deadline, sent as ``x-gear-deadline`` and as the broker's ``expiration``."""
    persistent: bool = False
    method: str = ""
    trace_id: str | None = None
    parent_id: str | None = None
    copy: int = 0
    """A hedged call's copy number (0: the original); copies get message ids of their own."""
    traced: bool = True
    """Whether its trace is recorded (see :meth:`gear.tracing.Emitter.traces`): when not, no attempt
    of it asks the emitter anything."""
    watched: bool = True
    """Whether its confirm shortens the link's silence watchdog (see :class:`gear.link.Link`); the
    zombie probe's does not: the probe has a deadline of its own."""

    @property
    def deadline_unix(self) -> float | None:
        """The deadline in unix seconds (what tracing records), or ``None``."""
        return None if self.deadline is None else self.deadline.unix


class Publisher:
    """Publishes :class:`Outgoing` messages through the connector's current link."""

    def __init__(
        self,
        connector: Connector,
        *,
        exchange: str,
        app_id: str,
        policy: RepublishPolicy,
        events: Emitter | None = None,
    ) -> None:
        self._connector = connector
        self._exchange = exchange
        self._app_id = app_id
        self._policy = policy
        self._events = events or Emitter(NullTracer(), app_id, exchange)
        self.on_refused: Callable[[Link], None] | None = None
        """Called with the link when the broker closed the channel over a publish with ``403`` or
        ``404``, as a node whose data disk died does (the zombie probe checks that link at once)."""
        self.reply_policy = dataclasses.replace(policy, refused_again=True)
        """The default policy for replies: a refused reply is sent again until its budget ends (see
        :attr:`RepublishPolicy.refused_again`)."""
        self.returns = 0
        self.republishes = 0
        self.nacks = 0
        """Attempts the broker nacked."""

    async def publish(
        self,
        msg: Outgoing,
        until: Deadline,
        *,
        policy: RepublishPolicy | None = None,
        verdict_grace: float = _VERDICT_GRACE,
    ) -> bool:
        """Publish until confirmed; True when confirmed, False when returned and not retried.

        Never waits past ``until`` (plus ``verdict_grace`` for the verdict on an attempt
        already sent): every wait (link, unblocked, channel, confirm) is bounded by it.

        Args:
            msg: the message.
            until: the deadline (a call's) or the end of the retry budget (a cast's, a reply's) after
                which no further attempt starts and no wait continues.
            policy: overrides the default republish policy.
            verdict_grace: seconds past ``until`` an attempt already sent may wait for its ack or
                return; 0 for a request whose caller stops waiting at ``until`` anyway.

        Raises:
            UnroutableError: the budget ran out and the broker's last verdict was a return (the
                retry had to wait for a link, or the next attempt could not have its verdict in
                time: its backoff plus the slowest return so far would pass ``until`` and the grace).
            NotConfirmedError: the broker nacked it.
            PublishRefusedError: the broker closed the channel over it on two attempts.
            OutcomeUnknownError: sent, but no verdict from the broker within the budget.
            ConnectionLostError: nothing could be sent within the budget (no connection, or a blocked
                one), or the service is stopping.
        """
        attempts = Attempts(msg.address, policy or self._policy, until.at, verdict_grace)
        connector, events = self._connector, self._events
        while True:
            attempt = attempts.next()
            link = connector.link
            if (
                link is None
                or not link.is_open
                or not connector.ready.is_set()
                or not connector.unblocked.is_set()
            ):
                link = await self._ready_link(attempts)
            expiration_ms: int | None = None
            if msg.deadline is not None:
                expiration_ms = msg.deadline.expiration_ms()
                if expiration_ms <= 0:
                    raise attempts.spent(connector.blocked_reason, connector.connected_url)
            message_id = attempt_message_id(msg.request_id, attempt, msg.copy)
            tracing = msg.traced and events.active
            if tracing:
                events.publish(msg, message_id, attempt, attempts.reason or None)
            sent_at = time.perf_counter()
            result = await link.publishing.publish(
                self._exchange,
                msg.routing_key,
                msg.body,
                message_id=message_id,
                correlation_id=msg.request_id,
                kind=msg.kind,
                app_id=self._app_id,
                # absent means attempt 1: a smaller header table on the hot path
                headers=msg.headers if attempt == 1 else {**msg.headers, ATTEMPT: attempt},
                until=attempts.until + verdict_grace,
                reply_to=msg.reply_to,
                expiration_ms=expiration_ms,
                persistent=msg.persistent,
                isolated=attempts.isolated,
                watched=msg.watched,
            )
            took = time.perf_counter() - sent_at
            now = asyncio.get_running_loop().time()
            link_open = result.outcome is not Outcome.NOT_SENT or link.is_open  # read when it matters
            step = attempts.judge(result, now, took, connector.connected_url, link_open)
            if (
                result.outcome is Outcome.CHANNEL_CLOSED
                and result.reply_code in NODE_REFUSALS
                and self.on_refused is not None
            ):
                self.on_refused(link)
            self._record(msg, message_id, attempt, result.outcome, took, step, tracing)
            if isinstance(step, Settled):
                return step.routed
            if isinstance(step, GearError):
                raise step
            await self._retry(step, attempts, link, result)

    async def _ready_link(self, attempts: Attempts) -> Link:
        """The open link once the connection is ready and not blocked, waiting until the budget's end.

        Raises:
            GearError: the budget ran out first (see :meth:`Attempts.spent`).
        """
        connector = self._connector
        try:
            link = connector.link
            if link is None or not connector.ready.is_set() or not link.is_open:
                link = await connector.wait_ready(attempts.until)
            if not connector.unblocked.is_set():
                await connector.wait_unblocked(attempts.until)
        except TimeoutError:
            raise attempts.spent(connector.blocked_reason, connector.connected_url) from None
        return link

    def _record(
        self,
        msg: Outgoing,
        message_id: str,
        attempt: int,
        outcome: Outcome,
        took: float,
        step: Step,
        tracing: bool,
    ) -> None:
        """Count, meter and trace an attempt's outcome."""
        events = self._events
        meter = events.meter
        if meter is not None and outcome is not Outcome.NOT_SENT:
            meter.published(msg.kind, msg.routing_key, took, outcome)
        if outcome is Outcome.CONFIRMED:
            if tracing:
                events.confirmed(msg, message_id, attempt)
        elif outcome is Outcome.RETURNED:
            self.returns += 1
            self.republishes += type(step) is Retry
            if tracing:
                events.returned(msg, message_id, attempt)
        elif outcome is Outcome.NACKED:
            self.nacks += 1
            if tracing:
                events.nacked(msg, message_id, attempt)

    async def _retry(self, step: Retry, attempts: Attempts, link: Link, result: PublishResult) -> None:
        """Carry out what comes before the next attempt (every retry yields to the loop or waits).

        Raises:
            GearError: a bounded retry whose budget ran out meanwhile (see :meth:`Attempts.spent`).
        """
        connector = self._connector
        if step.drop_link:
            connector.lose(link, result.reason)
        if step.pause:
            await asyncio.sleep(step.pause)
        if step.renew:
            await link.publishing.renew(result.channel, attempts.until)
        if step.bounded and asyncio.get_running_loop().time() >= attempts.until:
            raise attempts.spent(connector.blocked_reason, connector.connected_url)

    def blocked_since(self, since: float) -> str | None:
        """Why the broker blocked this instance's publishing at some moment after loop time ``since``
        (None: it did not)."""
        return self._connector.blocked_since(since)
