"""Hedged calls: copies of a call whose server shows no sign of life, run by one instance only.

Theory of operation
-------------------
A call can be handed to a consumer that no longer reaches its instance: a consumer registered through a
cluster node that was cut off stays registered on the other nodes until they declare that node down
(``net_tick_timeout``, about a minute), and what the queue hands it meanwhile waits there, unseen, past
the call's deadline. Only the caller can notice (its call stays silent), and only a copy can save it.

* **Caller.** A call made with ``hedge_after`` carries ``x-gear-hedge: 0`` (and ``x-gear-hedge-after``).
  While it has neither a reply nor a sign of life (a ``running`` or ``claim`` notice) ``hedge_after``
  seconds after it was sent, the caller publishes a copy (same request id, ``x-gear-hedge: n``) every
  :data:`HEDGE_EVERY` seconds, at most :data:`MAX_COPIES`, never after its deadline.
* **Who may run it.** A delivery that is *at risk* (:func:`at_risk`: a copy, a redelivery, or a
  request older than half of ``hedge_after`` when it arrives) does not run until its caller said yes:
  the server sends a ``claim`` notice and waits (bounded by the deadline) for ``grant`` or ``deny``.
  The caller grants the first instance that claims or said ``running`` and denies every other one
  (:class:`Holder`), and denies every claim once the call is over: a late original that comes back
  after a copy was answered is dropped. A redelivery from the shared queue (``reclaim``) is granted
  only to the instance already known to run the call: the instance that took it first may have run
  it and lost its reply with its link (it sends that reply again once it has a new link), and while
  no instance is known to run the call, its copies carry it instead. (A redelivery from an instance's
  own queue asks as a copy does: its duplicate window would know a run of its own.) A fresh original
  runs at once, as without hedging; if it is still running a quarter of ``hedge_after`` after it
  arrived, its server says ``running``. On one instance the duplicate window runs a request id once
  anyway (a copy of a request in progress there waits for that run's reply, and says ``running``).
* **Where copies go.** A copy of a ``TYPE.HOST`` call goes to that instance's queue. Of a call to a
  shared ``TYPE``, every other copy goes to the ``TYPE`` queue and the others straight to an instance
  that answered a call to that ``TYPE`` lately (:class:`Servers`): the ``TYPE`` queue may itself wait
  for a new leader (its node was cut off).

What it rests on: a fresh original's ``running`` notice reaches its caller before the caller's first
copy is due (it is sent at most ``hedge_after / 2 + hedge_after / 4`` after the request was sent, the
copy at ``hedge_after``), and the hosts' clocks agree within ``hedge_after / 4`` (the age of a request is
measured from the caller's clock, as its deadline is). A handler that is merely slow is told apart from a
lost request by that notice, so it gets no copy. What it cannot tell apart: a request that ran on an
instance just as the fault silenced it (its reply lost) from one that never arrived; a copy of a
``TYPE`` call may then run it again elsewhere (at-least-once, as a redelivery to another instance;
``hedge_shared=False`` copies only ``TYPE.HOST`` calls, whose window runs them once).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from gear.amqp import Delivery
from gear.base.deadline import Deadline
from gear.base.envelope import HEDGE, METHOD, NOTICE, Kind, Meta, Notice
from gear.errors import GearError
from gear.session.publisher import Outgoing, Publisher, RepublishPolicy

__all__ = (
    "HEDGE_EVERY",
    "MAX_COPIES",
    "Holder",
    "Notices",
    "Servers",
    "Verdicts",
    "at_risk",
    "copy_of",
    "notice",
)

log = logging.getLogger("gear.session.hedge")

HEDGE_EVERY = 0.5
"""Seconds between two copies of a call that stays silent."""
MAX_COPIES = 16
"""Copies of one call at most."""
NOTICE_BUDGET = 2.0
"""Seconds a notice may take to publish (at most; a request's deadline, when sooner, bounds it)."""
_NO_RETRY = RepublishPolicy(retry=False)


def copy_of(msg: Outgoing, n: int) -> Outgoing:
    """The ``n``-th copy of the request ``msg`` (same request id, its own message ids)."""
    return dataclasses.replace(msg, headers={**msg.headers, HEDGE: n}, copy=n)


def notice(meta: Meta, to: str, what: Notice, trace_id: str | None = None) -> Outgoing:
    """A notice about the request ``meta`` for the instance at routing key ``to``."""
    return Outgoing(
        routing_key=to,
        address=to,
        body=b"",
        request_id=meta.request_id,
        kind=Kind.REPLY.value,
        headers={METHOD: meta.method, NOTICE: what.value},
        method=meta.method,
        trace_id=trace_id,
        traced=False,
    )


def at_risk(delivery: Delivery, meta: Meta, now: float) -> bool:
    """Whether a hedged call's delivery must be granted by its caller before it runs: a copy, a
    redelivery, or a request that arrives (unix time ``now``) older than half its ``hedge_after``."""
    if meta.hedge is None:
        return False
    if meta.hedge > 0 or delivery.redelivered:
        return True
    expiration = delivery.properties.expiration
    if meta.deadline_ms is None or not expiration or not expiration.isdigit():
        return False
    sent = (meta.deadline_ms - int(expiration)) / 1000
    return now - sent >= meta.hedge_after_ms / 2000


@dataclasses.dataclass(slots=True)
class Holder:
    """The caller's side of one hedged call: who runs it, as far as the caller knows."""

    instance: str | None = None
    """The instance that said ``running`` first or was granted (None: none yet)."""
    conflicts: int = 0
    """``running`` notices from another instance than the holder (a run the caller could not stop)."""

    def claim(self, sender: str, *, again: bool = False) -> bool:
        """``sender`` asks to run the call: yes for the first one (and again for it), no for the rest;
        for a redelivery (``again``) yes only to the instance already known to run it."""
        if self.instance is None and not again:
            self.instance = sender
        return self.instance == sender

    def running(self, sender: str) -> None:
        """``sender`` says it runs (or holds) the call."""
        if self.instance is None:
            self.instance = sender
        elif self.instance != sender:
            self.conflicts += 1


class Servers:
    """The instances that answered this caller's calls to each shared ``TYPE`` lately: where a copy
    can go when the ``TYPE`` queue itself waits for a new leader (its node was cut off)."""

    PER_TYPE = 4
    TYPES = 1024

    def __init__(self) -> None:
        self._by_type: dict[str, list[str]] = {}

    def seen(self, routing_key: str, sender: str) -> None:
        """``sender`` (an instance's routing key) answered a call to the queue ``routing_key``."""
        known = self._by_type.get(routing_key)
        if known is None:
            if len(self._by_type) >= self.TYPES:
                self._by_type.pop(next(iter(self._by_type)))
            known = self._by_type[routing_key] = []
        if sender in known:
            if known[-1] != sender:
                known.remove(sender)
                known.append(sender)
            return
        known.append(sender)
        if len(known) > self.PER_TYPE:
            del known[0]

    def pick(self, routing_key: str, n: int) -> str | None:
        """The ``n``-th choice (round robin, newest first) among those, or None when none is known."""
        known = self._by_type.get(routing_key)
        return known[-1 - n % len(known)] if known else None


class Notices:
    """Publishes notices in tasks of their own (they are never awaited by a handler or a call)."""

    def __init__(self, publisher: Publisher) -> None:
        self._publisher = publisher
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0

    def send(self, msg: Outgoing, deadline: Deadline | None = None) -> None:
        """Publish ``msg`` within :data:`NOTICE_BUDGET` (or until ``deadline``, if sooner)."""
        until = Deadline.from_timeout(NOTICE_BUDGET)
        if deadline is not None:
            until = until.sooner(deadline)
        task = asyncio.get_running_loop().create_task(self._publish(msg, until))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def copy(self, msg: Outgoing, deadline: Deadline) -> None:
        """Publish a copy of a request, bounded by its deadline."""
        task = asyncio.get_running_loop().create_task(self._publish(msg, deadline))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, msg: Outgoing, until: Deadline) -> None:
        try:
            await self._publisher.publish(msg, until, policy=_NO_RETRY, verdict_grace=0.0)
            self.sent += 1
        except GearError as exc:
            log.debug("%s about %s to %s not sent: %s", msg.headers.get(NOTICE, "copy"), msg.request_id,
                      msg.routing_key, exc)  # fmt: skip


class Verdicts:
    """The serving side's claims waiting for their caller's ``grant`` or ``deny``."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bool]] = {}

    async def wait(self, request_id: str, deadline: Deadline | None) -> bool:
        """The caller's verdict on ``request_id`` (False when none came before ``deadline``)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = fut
        try:
            if deadline is None:
                return await fut
            async with asyncio.timeout_at(deadline.at):
                return await fut
        except TimeoutError:
            return False
        finally:
            if self._waiting.get(request_id) is fut:
                del self._waiting[request_id]

    def take(self, meta: Meta) -> None:
        """A ``grant`` or ``deny`` arrived."""
        fut = self._waiting.get(meta.request_id)
        if fut is not None and not fut.done():
            fut.set_result(meta.notice is Notice.GRANT)
