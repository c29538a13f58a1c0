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
3. The attempt's outcome (a value from :mod:`gear.link.publishing`) decides what comes next:

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
     ``PublishRefusedError`` with the broker's reason;
   * **unconfirmed** at ``until``: ``OutcomeUnknownError`` (it may have been delivered).

The whole loop is bounded by ``until`` (the call's deadline or a cast's retry budget), so a missing
queue never turns into a livelock and a dead broker never into a hang. When the budget runs out with
nothing sent, the error is ``ConnectionLostError``; when an attempt may have reached the broker, it is
``OutcomeUnknownError``. Every retry waits on something that can only complete later (a new link, a
backoff, a reopened channel), so the loop never starves the event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from gear.envelope import ATTEMPT, attempt_message_id
from gear.errors import (
    ConnectionLostError,
    GearError,
    NotConfirmedError,
    OutcomeUnknownError,
    PublishRefusedError,
    UnroutableError,
)
from gear.link import Outcome
from gear.reconnect import Connector
from gear.records import immutable
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter

__all__ = ("Outgoing", "Publisher", "RepublishPolicy")

_RETRY_PAUSE = 0.01
"""Seconds before retrying an attempt that could not be sent (the link is being replaced)."""
_VERDICT_GRACE = 0.25
"""Seconds past ``until`` an attempt already sent may wait for the broker's verdict (a busy broker's
return or ack can be late; a verdict beats "outcome unknown"). Within the 0.5 s the SDK promises."""
_NACK_PAUSES = (0.25, 0.75)
"""Pauses before the 2nd and 3rd attempt of a nacked message; a 3rd nack is ``NotConfirmedError``.
A nack is rare and usually lasting (a full queue with ``reject-publish``), but during a RabbitMQ node
loss it is transient, and a channel opened during a quorum leader election stays nacked: each retry
goes out on a fresh channel, the last about a second after the first nack."""


@dataclass(frozen=True, slots=True)
class RepublishPolicy:
    """How returned messages are retried: delays double from ``initial`` up to ``maximum``."""

    initial: float = 0.05
    maximum: float = 1.0
    retry: bool = True
    give_up_after: int | None = None
    """Fail as unroutable once the broker returned this many attempts, even if the budget is not spent
    (``None``: republish until it is)."""

    def delay(self, attempt: int) -> float:
        """The sleep after the ``attempt``-th return (1-based)."""
        return min(self.maximum, self.initial * 2.0 ** min(attempt - 1, 32))


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
    deadline_unix: float | None = None
    persistent: bool = False
    method: str = ""
    trace_id: str | None = None
    parent_id: str | None = None
    traced: bool = True
    """Whether its trace is recorded (see :meth:`gear.tracing.Emitter.traces`): when not, no attempt
    of it asks the emitter anything."""


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
        self.returns = 0
        self.republishes = 0
        self.nacks = 0
        """Attempts the broker nacked."""

    async def publish(
        self,
        msg: Outgoing,
        until: float,
        *,
        policy: RepublishPolicy | None = None,
        verdict_grace: float = _VERDICT_GRACE,
    ) -> bool:
        """Publish until confirmed; True when confirmed, False when returned and not retried.

        Never waits past loop time ``until`` (plus ``verdict_grace`` for the verdict on an attempt
        already sent): every wait (link, unblocked, channel, confirm) is bounded by it.

        Args:
            msg: the message.
            until: loop time after which no further attempt starts and no wait continues.
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
        policy = policy or self._policy
        loop = asyncio.get_running_loop()
        connector = self._connector
        attempt = 0
        reason = ""
        maybe_routed = ""  # why an earlier attempt may have reached the broker
        isolated = False  # the next attempt goes out alone (after a channel error)
        nacks = 0
        returned = 0  # attempts the broker returned
        slowest = 0.0  # seconds from sending an attempt to the broker returning it, at most
        headers = msg.headers
        while True:
            attempt += 1
            try:
                link = connector.link
                if link is None or not connector.ready.is_set() or not link.is_open:
                    link = await connector.wait_ready(until)
                if not connector.unblocked.is_set():
                    await connector.wait_unblocked(until)
            except TimeoutError:
                raise self._budget_spent(msg, maybe_routed, returned) from None
            if attempt > 1:  # absent means 1: a smaller header table on the hot path
                headers = {**msg.headers, ATTEMPT: attempt}
            expiration_ms: int | None = None
            if msg.deadline_unix is not None:
                expiration_ms = int((msg.deadline_unix - time.time()) * 1000)
                if expiration_ms <= 0:
                    raise self._budget_spent(msg, maybe_routed, returned)
            message_id = attempt_message_id(msg.request_id, attempt)
            events = self._events
            tracing = msg.traced and events.active
            if tracing:
                events.publish(msg, message_id, attempt, reason or None)
            meter = events.meter
            sent_at = time.perf_counter()
            result = await link.publishing.publish(
                self._exchange,
                msg.routing_key,
                msg.body,
                message_id=message_id,
                correlation_id=msg.request_id,
                kind=msg.kind,
                app_id=self._app_id,
                headers=headers,
                until=until + verdict_grace,
                reply_to=msg.reply_to,
                expiration_ms=expiration_ms,
                persistent=msg.persistent,
                isolated=isolated,
            )
            outcome = result.outcome
            if meter is not None and outcome is not Outcome.NOT_SENT:
                meter.published(msg.kind, msg.routing_key, time.perf_counter() - sent_at, outcome)
            if outcome is Outcome.CONFIRMED:
                if tracing:
                    events.confirmed(msg, message_id, attempt)
                return True
            if outcome is Outcome.RETURNED:
                self.returns += 1
                returned += 1
                if tracing:
                    events.returned(msg, message_id, attempt)
                if not policy.retry:
                    return False
                slowest = max(slowest, time.perf_counter() - sent_at)
                delay = policy.delay(attempt)
                cap = policy.give_up_after
                # an attempt whose verdict could only come too late would end as "outcome unknown"
                # and hide what every verdict so far said
                too_late = loop.time() + delay + slowest >= until + verdict_grace
                if too_late or (cap is not None and returned >= cap):
                    raise UnroutableError(msg.address, returned, connector.connected_url)
                self.republishes += 1
                reason = "return"
                await asyncio.sleep(delay)
                continue
            if outcome is Outcome.NACKED:
                self.nacks += 1
                if tracing:
                    events.nacked(msg, message_id, attempt)
                nacks += 1
                pause = _NACK_PAUSES[nacks - 1] if nacks <= len(_NACK_PAUSES) else None
                if pause is None or loop.time() + pause >= until:
                    raise NotConfirmedError(f"broker nacked the publish to {msg.address!r} ({nacks} time(s))")
                # transient during a node loss: try again, after a pause, on a fresh channel
                await asyncio.sleep(pause)
                await link.publishing.renew(result.channel, until)
                reason = "nack"
                continue
            if outcome is Outcome.UNCONFIRMED:
                raise OutcomeUnknownError(msg.address, result.reason)
            if result.maybe_routed:
                maybe_routed = result.reason
            if outcome is Outcome.CHANNEL_CLOSED:
                if isolated:  # it was alone on the channel: the broker refused this very message
                    raise PublishRefusedError(msg.address, result.reply_code, result.reason)
                isolated = True  # maybe a bystander of another message's error: retry it alone
                reason = "channel_closed"
            else:  # LINK_LOST or NOT_SENT: the link is unusable; the next attempt waits for a new one
                if outcome is Outcome.LINK_LOST or not link.is_open:
                    connector.lose(link, result.reason)
                reason = "connection_lost"
                # always yield to the loop before retrying: a close callback may still have to run
                await asyncio.sleep(_RETRY_PAUSE)
            if loop.time() >= until:
                raise self._budget_spent(msg, maybe_routed, returned)

    def _budget_spent(self, msg: Outgoing, maybe_routed: str, returned: int) -> GearError:
        if maybe_routed:
            return OutcomeUnknownError(msg.address, f"sent, then {maybe_routed}, and not resent in time")
        if returned:
            return UnroutableError(msg.address, returned, self._connector.connected_url)
        blocked = self._connector.blocked_reason
        if blocked is not None:
            return ConnectionLostError(
                f"the broker blocked the connection ({blocked}) for the whole budget; "
                f"nothing was sent to {msg.address!r}"
            )
        return ConnectionLostError(
            f"no connection to the broker within the budget; nothing was sent to {msg.address!r}"
        )
