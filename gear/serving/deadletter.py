"""Dead letters: requests a quorum queue dropped after too many deliveries, never lost silently.

With ``quorum=True`` Gear's queues dead-letter a message that went back to its queue more than
``delivery_limit`` times (a server that crashed, or lost its connection, while handling it, each time)
to ``EXCHANGE.@dead`` (kept for operators) and ``EXCHANGE.@dead.notify`` (see :mod:`gear.base.topology`).
Every instance consumes the notify queue (the instances compete: each dead letter reaches one of them)
and for each dead letter:

* if the reason is the delivery limit, logs one WARNING line (what, from whom, which queue, how many
  deliveries) and counts it (``Service.stats["dead_letters"]``); other reasons are expected outcomes:
  ``expired`` (a request past its deadline, whose caller gave up already) and ``rejected`` (a foreign
  message Gear refused) are kept in ``EXCHANGE.@dead`` and logged at DEBUG only;
* if it is a call or a gather whose caller still waits (its deadline has not passed), publishes an
  error reply to the caller: the call raises :class:`gear.errors.DeliveryLimitError` at once instead of
  timing out (``Service.stats["dead_letter_replies"]``).

Then it acknowledges the notification; the copy in ``EXCHANGE.@dead`` stays for operators:
:func:`list_dead_letters` (``gear dead-letters URL``) shows them without taking them away.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gear.base.deadline import Deadline
from gear.base.envelope import METHOD, STATUS, EnvelopeError, ErrorBody, Kind, Meta, parse_meta
from gear.base.topology import dead_letter_queue
from gear.errors import ConnectionLostError, DeliveryLimitError, GearError
from gear.link import Delivery, Link, Settle, open_link
from gear.session.publisher import Outgoing, Publisher

__all__ = (
    "DELIVERY_LIMIT",
    "DeadLetter",
    "DeadLetters",
    "ParkedLetter",
    "list_dead_letters",
    "read_dead_letter",
)

log = logging.getLogger("gear.serving.deadletter")

DELIVERY_LIMIT = "delivery_limit"
"""The ``x-death`` reason of a message dropped for too many deliveries."""
_REPLY_BUDGET = 5.0
"""Seconds at most spent publishing one error reply (less when the caller's deadline is nearer)."""


class DeadLetter:
    """What the broker says about one dead-lettered message (its ``x-death`` headers)."""

    __slots__ = ("deliveries", "queue", "reason")

    def __init__(self, queue: str, reason: str, deliveries: int | None) -> None:
        self.queue = queue
        """The queue that dropped it."""
        self.reason = reason
        """``delivery_limit`` (too many deliveries), or ``rejected``, ``expired``, ``maxlen``."""
        self.deliveries = deliveries
        """How many times it was delivered, where the broker says (RabbitMQ 4.3 does; 3.x and 4.0 not)."""


def read_dead_letter(headers: Mapping[str, Any] | None) -> DeadLetter | None:
    """The dead-letter facts in a message's headers, or None if it was never dead-lettered."""
    headers = headers or {}
    deaths = headers.get("x-death")
    first = deaths[0] if isinstance(deaths, list) and deaths and isinstance(deaths[0], dict) else {}
    queue = _text(headers.get("x-first-death-queue")) or _text(first.get("queue"))
    reason = _text(headers.get("x-first-death-reason")) or _text(first.get("reason"))
    if not queue or not reason:
        return None
    count = headers.get("x-delivery-count")
    deliveries = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
    return DeadLetter(queue, reason, deliveries)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


class DeadLetters:
    """Consumes ``EXCHANGE.@dead.notify``: one log line and a count per dead letter, and an error reply
    to a caller still waiting."""

    def __init__(self, identity: str, publisher: Publisher, delivery_limit: int) -> None:
        self._identity = identity
        self._publisher = publisher
        self._delivery_limit = delivery_limit
        self.seen = 0
        """Requests dropped for the delivery limit that this instance was told of."""
        self.replies = 0
        """Error replies it sent to callers still waiting."""
        self._tasks: set[asyncio.Task[None]] = set()

    def on_delivery(self, delivery: Delivery, settle: Settle) -> None:
        """Take one notification from ``EXCHANGE.@dead.notify`` (inline, from the link): handle it in a
        task of its own, then acknowledge it."""
        task = asyncio.get_running_loop().create_task(self.handle(delivery, settle))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def handle(self, delivery: Delivery, settle: Settle) -> None:
        """Log, count and (to a caller still waiting) answer one notification, then acknowledge it."""
        try:
            await self._tell(delivery)
        finally:
            settle.ack(delivery.delivery_tag)

    async def _tell(self, delivery: Delivery) -> None:
        p = delivery.properties
        dead = read_dead_letter(p.headers) or DeadLetter("?", "?", None)
        if dead.reason != DELIVERY_LIMIT:
            # expired (a request past its deadline: its caller gave up already) or rejected (a foreign
            # message Gear refused): expected outcomes, kept in EXCHANGE.@dead, not incidents
            log.debug("queue %r dead-lettered a message (%s)", dead.queue, dead.reason)
            return
        self.seen += 1
        try:
            meta = parse_meta(p.message_type, p.correlation_id, p.app_id, p.reply_to, p.headers)
        except EnvelopeError as exc:
            log.warning(
                "queue %r dead-lettered a message that is not Gear's (%s): %s", dead.queue, dead.reason, exc
            )
            return
        waiting = meta.kind in (Kind.CALL, Kind.GATHER) and meta.reply_to is not None
        deadline = None if meta.deadline_ms is None else Deadline.from_unix_ms(meta.deadline_ms)
        told = waiting and (deadline is None or not deadline.expired)
        log.warning(
            "%s %r from %s (request %s) dropped by queue %r (%s) after %s; %s",
            meta.kind.value,
            meta.method,
            meta.sender,
            meta.request_id,
            dead.queue,
            dead.reason,
            _deliveries(dead, self._delivery_limit),
            "telling the caller"
            if told
            else "its caller no longer waits"
            if waiting
            else "no caller to tell",
        )
        if told:
            until = Deadline.from_timeout(_REPLY_BUDGET)
            await self._reply(meta, dead, until if deadline is None else until.sooner(deadline))

    async def _reply(self, meta: Meta, dead: DeadLetter, until: Deadline) -> None:
        assert meta.reply_to is not None
        error = DeliveryLimitError.describe(meta.method, dead.queue, dead.reason, dead.deliveries)
        body = ErrorBody(type=DeliveryLimitError.wire_type, message=error.message, details=error.details)
        msg = Outgoing(
            routing_key=meta.reply_to,
            address=meta.reply_to,
            body=body.model_dump_json().encode(),
            request_id=meta.request_id,
            kind=Kind.REPLY.value,
            headers={METHOD: meta.method, STATUS: "error"},
            method=meta.method,
            trace_id=meta.trace_id,
            traced=False,
        )
        try:
            await self._publisher.publish(msg, until)
        except GearError as exc:
            log.warning("could not tell %s that %r was dead-lettered: %s", meta.reply_to, meta.method, exc)
            return
        self.replies += 1


def _deliveries(dead: DeadLetter, limit: int) -> str:
    if dead.deliveries is not None:
        return f"{dead.deliveries} deliveries"
    if dead.reason == "delivery_limit":
        return f"more than {limit} redeliveries"
    return "its deliveries"


# -- listing what is kept ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParkedLetter:
    """One message kept in ``EXCHANGE.@dead``, as ``gear dead-letters`` shows it."""

    kind: str | None
    """``gear.call``, ``gear.cast``, ``gear.gather``, ``gear.reply``, or another app's type."""
    method: str | None
    sender: str | None
    request_id: str | None
    reply_to: str | None
    queue: str
    """The queue that dropped it."""
    reason: str
    deliveries: int | None
    dead_at: str | None
    """When it was dead-lettered (ISO 8601), where the broker says."""
    body_bytes: int


class _Unwatched:
    """Link events of a short-lived listing link: nothing to do."""

    def on_blocked(self, reason: str) -> None:
        """Not publishing: nothing waits."""

    def on_unblocked(self) -> None:
        """Not publishing: nothing waits."""

    def on_closed(self, link: Link, reason: str) -> None:
        """The listing fails on its own (its consume or its wait)."""

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The queue went away: the listing ends with what it has."""


async def list_dead_letters(
    url: str,
    *,
    exchange: str = "gear",
    limit: int = 100,
    quiet: float = 0.5,
    within: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> list[ParkedLetter]:
    """The first ``limit`` dead letters kept in ``EXCHANGE.@dead``, oldest first, left where they are.

    A snapshot: the messages are consumed without acknowledging them until none arrives for ``quiet``
    seconds (or ``limit`` arrived, or ``within`` seconds passed), then given back by closing the
    connection.

    Raises:
        ConnectError: the broker cannot be reached or refused the login.
        ConnectionLostError: there is no ``EXCHANGE.@dead`` (only ``quorum=True`` declares it), or the
            connection failed.
        ValueError: ``limit`` outside 1..65535.
    """
    if not 1 <= limit <= 65535:
        raise ValueError(f"limit must be within 1..65535, got {limit}")
    queue = dead_letter_queue(exchange)
    found: list[ParkedLetter] = []
    arrived = asyncio.Event()

    def collect(delivery: Delivery, settle: Settle) -> None:
        # never settled: closing the link gives every one of them back to the queue, in order
        if len(found) < limit:
            found.append(_parked(delivery))
            arrived.set()

    link = await open_link(
        url,
        _Unwatched(),
        heartbeat=max(5, int(within)),
        handshake_timeout=within,
        prefetch=limit,
        name=f"gear dead-letters {queue}",
        ssl_context=ssl_context,
    )
    try:
        try:
            await link.consume("host", queue, collect)
        except ConnectionLostError as exc:
            raise ConnectionLostError(
                f"no dead-letter queue {queue!r} here (Gear declares it with quorum=True): {exc}"
            ) from None
        give_up = asyncio.get_running_loop().time() + within
        while len(found) < limit and asyncio.get_running_loop().time() < give_up:
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), quiet)
            except TimeoutError:
                break
    finally:
        await link.close()
    return found


def _parked(delivery: Delivery) -> ParkedLetter:
    p = delivery.properties
    headers = p.headers or {}
    dead = read_dead_letter(headers) or DeadLetter("?", "?", None)
    deaths = headers.get("x-death")
    first = deaths[0] if isinstance(deaths, list) and deaths and isinstance(deaths[0], dict) else {}
    when = first.get("time")
    return ParkedLetter(
        kind=p.message_type,
        method=_text(headers.get(METHOD)) or None,
        sender=p.app_id,
        request_id=p.correlation_id,
        reply_to=p.reply_to,
        queue=dead.queue,
        reason=dead.reason,
        deliveries=dead.deliveries,
        dead_at=when.isoformat() if isinstance(when, datetime) else None,
        body_bytes=len(delivery.body),
    )
