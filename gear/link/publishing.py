"""The publish channel: confirmed, mandatory publishes with the outcome of each as a value.

Every way an attempt can end is an :class:`Outcome`, so the layer above decides on data (retry,
republish, fail) instead of on exceptions:

==================  ========================================================================
``CONFIRMED``       the broker acked it (and routed it somewhere)
``RETURNED``        no queue was bound (``basic.return`` came before the ack)
``NACKED``          the broker refused responsibility (``basic.nack``)
``NOT_SENT``        nothing reached the socket (the channel was closed, or not free before the deadline)
``LINK_LOST``       sent, then the connection failed before the confirm: it may have been routed
``CHANNEL_CLOSED``  sent, then the broker closed the channel (a channel error, e.g. 406): maybe routed
``UNCONFIRMED``     sent, and no confirm came before the deadline: it may have been routed
==================  ========================================================================

Theory of operation
-------------------
:class:`PublishChannel` owns the connection's current confirm channel. A channel error on it (say a
406 for one bad message) is not a link failure: the publishes outstanding on it learn
``CHANNEL_CLOSED``, a new channel is opened on the same connection (after a pause that grows while
such errors repeat, so a bad message can never cause a storm), and the consumer channels never
notice. A message whose earlier attempt was caught in a channel error may have been a bystander of
another message's, so it can be sent *isolated*: alone on the channel, the others waiting at a gate,
so that a second refusal is its own. During a RabbitMQ node loss a channel opened while a quorum queue
elects its leader can stay nacked for that queue (3.10): :meth:`PublishChannel.renew` moves
publishing to a fresh channel and closes the old one once its publishes settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gear.amqp import ChannelClosedError, ClosedError, ConnectionClosedError
from gear.base.timers import DueSet, LoopTimers, loop_time
from gear.errors import ConfigurationError
from gear.link.confirms import Confirms, Verdict
from gear.link.connection import Channel, Connection
from gear.wire import spec
from gear.wire.content import Publish
from gear.wire.properties import Properties

__all__ = ("Outcome", "PublishChannel", "PublishResult", "confirm_channel")

log = logging.getLogger("gear.link")

_REOPEN_PAUSES = (0.0, 0.1, 0.5, 2.0)
"""Pause before reopening the publish channel after its 1st, 2nd, 3rd... recent channel error."""
_REOPEN_MEMORY = 30.0
"""Seconds after which a publish-channel error no longer counts as recent."""
_RETIRE_WAIT = 30.0
"""Longest wait for the publishes on a renewed (old) channel to settle before closing it."""
_CLOSE_WAIT = 2.0


class Outcome(StrEnum):
    """How one publish attempt ended."""

    CONFIRMED = "confirmed"
    RETURNED = "returned"
    NACKED = "nacked"
    NOT_SENT = "not_sent"
    LINK_LOST = "link_lost"
    CHANNEL_CLOSED = "channel_closed"
    UNCONFIRMED = "unconfirmed"


_MAYBE_ROUTED = frozenset({Outcome.LINK_LOST, Outcome.CHANNEL_CLOSED, Outcome.UNCONFIRMED})


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The outcome of one attempt, with the broker's reply code and text where there is one."""

    outcome: Outcome
    reason: str = ""
    reply_code: int | None = None
    channel: Channel | None = None
    """For ``NACKED``: the channel that nacked it (see :meth:`PublishChannel.renew`)."""

    @property
    def maybe_routed(self) -> bool:
        """True when the broker may have taken the message although no ack was seen."""
        return self.outcome in _MAYBE_ROUTED


_CONFIRMED = PublishResult(Outcome.CONFIRMED)
_RETURNED = PublishResult(Outcome.RETURNED)


class PublishChannel:
    """The confirm channel of one connection, replaced when the broker closes it (see above)."""

    def __init__(
        self, connection: Connection, channel: Channel, on_fail: Callable[[str], None], timers: LoopTimers
    ) -> None:
        self._connection = connection
        self._timers = timers
        self._on_fail = on_fail
        self._channel = channel
        self._confirms = Confirms(channel)
        self._ready = asyncio.Event()
        self._ready.set()
        self._gate = asyncio.Event()
        """Cleared while an isolated publish runs: other publishes wait."""
        self._gate.set()
        self._isolation = asyncio.Lock()
        self._in_flight = 0
        self._due: DueSet[asyncio.Future[Verdict], asyncio.Future[Verdict]] = DueSet(
            timers, loop_time, _give_up
        )
        """The verdicts awaited, each given up at its loop time."""
        self._watched = 0
        self.drained = asyncio.Event()
        """Set while no publish awaits its verdict."""
        self.drained.set()
        self._uses: dict[Channel, int] = {}
        self._retiring: dict[Channel, asyncio.Event] = {}
        self._renewing: asyncio.Task[None] | None = None
        self._errors: list[float] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self._watch(channel)

    @property
    def in_flight(self) -> int:
        """Publishes awaiting their verdict."""
        return self._in_flight

    @property
    def watched(self) -> int:
        """Publishes awaiting their verdict whose confirm the link's silence watchdog waits for."""
        return self._watched

    def stop(self) -> None:
        """The link is going away: no more reopening, renewing or retiring."""
        self._stopped = True
        for task in list(self._tasks):
            task.cancel()

    # -- publishing ----------------------------------------------------------------------------------

    async def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        message_id: str,
        correlation_id: str,
        kind: str,
        app_id: str,
        headers: dict[str, Any],
        until: float,
        reply_to: str | None = None,
        expiration_ms: int | None = None,
        persistent: bool = False,
        isolated: bool = False,
        watched: bool = True,
    ) -> PublishResult:
        """Publish one attempt (mandatory, confirmed) and wait for its outcome until loop time ``until``.

        Never raises for a broker or network failure: the outcome says what happened. ``watched``:
        whether the link's silence watchdog waits for its confirm (:attr:`watched`).

        Raises:
            ConfigurationError: a property Gear cannot encode (a programming error, never I/O).
        """
        if isolated or not (self._gate.is_set() and self._ready.is_set()):
            # the common case (channel ready, nobody isolated) skips the timeout scope and its timer
            try:
                async with asyncio.timeout_at(until):
                    if isolated:
                        await self._isolate()
                    else:
                        while not (self._gate.is_set() and self._ready.is_set()):
                            await (self._ready if self._gate.is_set() else self._gate).wait()
            except TimeoutError:
                return PublishResult(Outcome.NOT_SENT, "the publish channel was not free before the deadline")
        try:
            channel = self._channel
            properties = Properties(
                content_type="application/json",
                headers=headers or None,
                delivery_mode=2 if persistent else 1,
                correlation_id=correlation_id,
                reply_to=reply_to,
                expiration=None if expiration_ms is None else str(max(1, expiration_ms)),
                message_id=message_id,
                message_type=kind,
                app_id=app_id,
            )
            publish = Publish(exchange, routing_key, properties, body, mandatory=True)
            if not watched:
                return await self._send(channel, publish, message_id, until)
            self._watched += 1
            try:
                return await self._send(channel, publish, message_id, until)
            finally:
                self._watched -= 1
        finally:
            if isolated:
                self._end_isolation()

    async def _send(self, channel: Channel, publish: Publish, message_id: str, until: float) -> PublishResult:
        confirms = self._confirms
        try:
            verdict = confirms.send(publish, message_id)
        except ClosedError as exc:
            return PublishResult(Outcome.NOT_SENT, exc.text, exc.code or None)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"cannot encode the message for {publish.routing_key!r}: {exc}") from exc
        self._in_flight += 1
        self.drained.clear()
        self._uses[channel] = self._uses.get(channel, 0) + 1
        # the confirm's deadline: one timer for all publishes (at the earliest), not a timeout scope
        self._due.add(verdict, until, verdict)
        try:
            result = await verdict
        except _NoVerdictError:
            return PublishResult(Outcome.UNCONFIRMED, "no confirm from the broker before the deadline")
        except ChannelClosedError as exc:
            if self._connection.is_open:
                return PublishResult(Outcome.CHANNEL_CLOSED, exc.text, exc.code or None)
            return PublishResult(Outcome.LINK_LOST, exc.text, exc.code or None)
        except ConnectionClosedError as exc:
            return PublishResult(Outcome.LINK_LOST, exc.text, exc.code or None)
        finally:
            self._due.discard(verdict)
            self._settled(channel)
        if result is Verdict.ACK:
            return _CONFIRMED
        if result is Verdict.RETURNED:
            return _RETURNED
        return PublishResult(Outcome.NACKED, "the broker nacked it", channel=channel)

    def _settled(self, channel: Channel) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self.drained.set()
        left = self._uses[channel] - 1
        if left:
            self._uses[channel] = left
            return
        del self._uses[channel]
        idle = self._retiring.get(channel)
        if idle is not None:
            idle.set()

    async def _isolate(self) -> None:
        """Hold the channel alone: others wait at the gate until :meth:`_end_isolation`."""
        await self._isolation.acquire()
        self._gate.clear()
        try:
            await self._ready.wait()
            await self.drained.wait()
        except BaseException:
            self._end_isolation()
            raise

    def _end_isolation(self) -> None:
        self._gate.set()
        self._isolation.release()

    # -- replacing the channel -------------------------------------------------------------------------

    def _watch(self, channel: Channel) -> None:
        channel.closed.add_done_callback(lambda closed: self._on_closed(channel, closed.result()))

    def _on_closed(self, channel: Channel, error: ChannelClosedError) -> None:
        if channel is not self._channel or self._stopped or not self._connection.is_open:
            return
        now = asyncio.get_running_loop().time()
        self._errors = [t for t in self._errors if now - t < _REOPEN_MEMORY] + [now]
        pause = _REOPEN_PAUSES[min(len(self._errors), len(_REOPEN_PAUSES)) - 1]
        log.warning(
            "the broker closed the publish channel on %s (%s %s); reopening it in %gs",
            self._connection.where,
            error.code or "",
            error.text,
            pause,
        )
        self._ready.clear()
        self._spawn(self._reopen(pause))

    async def _reopen(self, pause: float) -> None:
        if pause:
            await asyncio.sleep(pause)
        channel = await self._open("cannot reopen the publish channel")
        if channel is not None:
            self._use(channel)
            self._ready.set()

    async def _open(self, failure: str) -> Channel | None:
        """A new confirm-mode channel, or None after reporting ``failure`` (the link closed, or the
        broker took longer than the link's reopen wait)."""
        try:
            async with asyncio.timeout(_reopen_wait(self._connection)):
                return await confirm_channel(self._connection)
        except (ClosedError, TimeoutError) as exc:
            self._on_fail(f"{failure} ({exc})")
            return None

    def _use(self, channel: Channel) -> None:
        self._channel = channel
        self._confirms = Confirms(channel)
        self._watch(channel)

    async def renew(self, suspect: Channel | None, until: float) -> None:
        """Move publishing to a fresh channel unless that already happened since ``suspect`` was in
        use; the old channel is closed once the publishes on it have settled."""
        if suspect is not self._channel or self._stopped or not self._connection.is_open:
            return
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(until):
                await asyncio.shield(self._renewing)

    async def _renew(self) -> None:
        old = self._channel
        self._ready.clear()
        try:
            channel = await self._open("cannot open a new publish channel")
        finally:
            self._ready.set()
        if channel is None:
            return
        self._use(channel)
        idle = asyncio.Event()
        if not self._uses.get(old):
            idle.set()
        self._retiring[old] = idle
        self._spawn(self._close_when_idle(old, idle))

    async def _close_when_idle(self, channel: Channel, idle: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(idle.wait(), _RETIRE_WAIT)
        self._retiring.pop(channel, None)
        await channel.close(_CLOSE_WAIT)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _NoVerdictError(Exception):
    """The deadline came before the broker's verdict (the verdict's future fails with it)."""


def _give_up(verdict: asyncio.Future[Verdict]) -> None:
    if not verdict.done():
        verdict.set_exception(_NoVerdictError())


async def confirm_channel(connection: Connection) -> Channel:
    """Open a channel on ``connection`` and put it in confirm mode.

    Raises:
        ClosedError: the connection or the channel closed meanwhile.
    """
    channel = await connection.channel()
    await channel.call(spec.Confirm.Select())
    return channel


def _reopen_wait(connection: Connection) -> float:
    return max(1.0, 1.5 * connection.heartbeat or 10.0)
