"""Publishing with confirms, returns and a bounded republish policy.

Theory of operation
-------------------
Every Gear publish is ``mandatory`` on a channel with publisher confirms. For one logical message
(one stable request id) the :class:`Publisher` makes one or more *attempts*:

1. Wait until a link is ready and the connection is not blocked, but never past the attempt budget
   (``until``): publishes during a reconnect or a memory alarm wait instead of failing at once or
   hanging forever.
2. Publish with ``message_id = <request id>.<attempt>`` and the attempt number in a header. The
   message id must differ per attempt: the client library matches ``basic.return`` to its pending
   confirm by message id, and RabbitMQ sends the return *before* the ack.
3. The attempt's outcome (a value from :mod:`gear.adapter.publish`) decides what comes next:

   * **confirmed**: done;
   * **returned** (no queue bound, e.g. the instance queue was deleted, or no TYPE consumer declared
     its queue yet): sleep a growing backoff and republish, as long as the next attempt can still
     start before ``until``; then ``UnroutableError``. Policies that must not retry (a gather to
     ``TYPE.*`` with no instance) get ``False`` back at once;
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

from gear.adapter import Outcome
from gear.envelope import ATTEMPT, DEADLINE, attempt_message_id
from gear.errors import (
    ConnectionLostError,
    GearError,
    NotConfirmedError,
    OutcomeUnknownError,
    PublishRefusedError,
    UnroutableError,
)
from gear.reconnect import Connector
from gear.tracing.api import Attr, EventName, NullTracer, Tracer

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

    def delay(self, attempt: int) -> float:
        """The sleep after the ``attempt``-th return (1-based)."""
        return min(self.maximum, self.initial * 2.0 ** min(attempt - 1, 32))


@dataclass(slots=True)
class Outgoing:
    """One logical message and what its attempts share."""

    routing_key: str
    address: str
    body: bytes
    request_id: str
    kind: str
    headers: dict[str, Any]
    reply_to: str | None = None
    deadline_unix: float | None = None
    persistent: bool = False
    method: str = ""
    trace_id: str | None = None
    parent_id: str | None = None
    returned: int = 0
    """How many attempts the broker returned so far."""
    routed: bool = False
    """True once an attempt was confirmed without a return."""


class Publisher:
    """Publishes :class:`Outgoing` messages through the connector's current link."""

    def __init__(
        self,
        connector: Connector,
        *,
        exchange: str,
        app_id: str,
        policy: RepublishPolicy,
        tracer: Tracer | None = None,
    ) -> None:
        self._connector = connector
        self._exchange = exchange
        self._app_id = app_id
        self._policy = policy
        self._tracer: Tracer = tracer or NullTracer()
        self.returns = 0
        self.republishes = 0

    async def publish(self, msg: Outgoing, until: float, *, policy: RepublishPolicy | None = None) -> bool:
        """Publish until confirmed; True when confirmed, False when returned and not retried.

        Never waits past loop time ``until``: every wait (link, unblocked, channel, confirm) is
        bounded by it.

        Args:
            msg: the message.
            until: loop time after which no further attempt starts and no wait continues.
            policy: overrides the default republish policy.

        Raises:
            UnroutableError: every attempt was returned and the budget ran out.
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
        while True:
            attempt += 1
            try:
                link = connector.link
                if link is None or not connector.ready.is_set() or not link.is_open:
                    link = await connector.wait_ready(until)
                if not connector.unblocked.is_set():
                    await connector.wait_unblocked(until)
            except TimeoutError:
                raise self._budget_spent(msg, maybe_routed) from None
            if attempt > 1:  # absent means 1: a smaller header table on the hot path
                msg.headers[ATTEMPT] = attempt
            expiration_ms: int | None = None
            if msg.deadline_unix is not None:
                expiration_ms = int((msg.deadline_unix - time.time()) * 1000)
                if expiration_ms <= 0:
                    raise self._budget_spent(msg, maybe_routed)
            message_id = attempt_message_id(msg.request_id, attempt)
            if self._tracer.enabled:
                self._trace(
                    EventName.REPUBLISH if attempt > 1 else EventName.PUBLISH,
                    msg,
                    message_id,
                    attempt,
                    {Attr.REPUBLISH_REASON: reason} if reason else {},
                )
            result = await link.publish(
                self._exchange,
                msg.routing_key,
                msg.body,
                message_id=message_id,
                correlation_id=msg.request_id,
                kind=msg.kind,
                app_id=self._app_id,
                headers=msg.headers,
                until=until + _VERDICT_GRACE,
                reply_to=msg.reply_to,
                expiration_ms=expiration_ms,
                persistent=msg.persistent,
                isolated=isolated,
            )
            outcome = result.outcome
            if outcome is Outcome.CONFIRMED:
                msg.routed = True
                if self._tracer.enabled:
                    self._trace(EventName.CONFIRM, msg, message_id, attempt, {})
                return True
            if outcome is Outcome.RETURNED:
                self.returns += 1
                msg.returned += 1
                if self._tracer.enabled:
                    self._trace(EventName.RETURN, msg, message_id, attempt, {Attr.REPLY_CODE: 312})
                if not policy.retry:
                    return False
                delay = policy.delay(attempt)
                if loop.time() + delay >= until:
                    raise UnroutableError(msg.address, attempt)
                self.republishes += 1
                reason = "return"
                await asyncio.sleep(delay)
                continue
            if outcome is Outcome.NACKED:
                if self._tracer.enabled:
                    self._trace(EventName.NACK, msg, message_id, attempt, {Attr.ERROR_TYPE: "nack"})
                nacks += 1
                pause = _NACK_PAUSES[nacks - 1] if nacks <= len(_NACK_PAUSES) else None
                if pause is None or loop.time() + pause >= until:
                    raise NotConfirmedError(f"broker nacked the publish to {msg.address!r} ({nacks} time(s))")
                # transient during a node loss: try again, after a pause, on a fresh channel
                await asyncio.sleep(pause)
                await link.renew_publish_channel(result.channel, until)
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
                raise self._budget_spent(msg, maybe_routed)

    def _budget_spent(self, msg: Outgoing, maybe_routed: str) -> GearError:
        if maybe_routed:
            return OutcomeUnknownError(msg.address, f"sent, then {maybe_routed}, and not resent in time")
        blocked = self._connector.blocked_reason
        if blocked is not None:
            return ConnectionLostError(
                f"the broker blocked the connection ({blocked}) for the whole budget; "
                f"nothing was sent to {msg.address!r}"
            )
        return ConnectionLostError(
            f"no connection to the broker within the budget; nothing was sent to {msg.address!r}"
        )

    def _trace(
        self, name: EventName, msg: Outgoing, message_id: str, attempt: int, extra: dict[str, Any]
    ) -> None:
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "send",
            Attr.OPERATION_NAME: "publish",
            Attr.DESTINATION: f"{self._exchange}:{msg.routing_key}",
            Attr.ROUTING_KEY: msg.routing_key,
            Attr.MESSAGE_ID: message_id,
            Attr.REQUEST_ID: msg.request_id,
            Attr.ATTEMPT: attempt,
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: msg.method,
            Attr.RPC_KIND: msg.kind.removeprefix("gear."),
            Attr.CALLER: self._app_id,
            Attr.BODY_SIZE: len(msg.body),
        }
        if DEADLINE in msg.headers:
            attrs[Attr.TIMEOUT_MS] = max(0, int(msg.headers[DEADLINE] - time.time() * 1000))
        attrs.update(extra)
        span: str | None = msg.request_id
        if msg.kind == "gear.reply":
            attrs[Attr.CONVERSATION_ID] = msg.request_id
            span = None
        self._tracer.emit(
            name, trace_id=msg.trace_id, span_id=span, parent_span_id=msg.parent_id, attributes=attrs
        )
