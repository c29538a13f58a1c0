"""One open AMQP connection with Gear's three channels, watched for silence.

Theory of operation
-------------------
:func:`open_link` connects (bounded by a handshake timeout: a broker at its connection limit accepts
TCP and never sends ``connection.start``) and opens three channels: ``publish`` (confirms on, every
publish mandatory: :class:`~gear.link.publishing.PublishChannel`), ``type`` (consumes the shared
``TYPE`` queue) and ``host`` (consumes ``TYPE.HOST``: point-to-point requests and the replies to this
instance's calls). Topology is declared on a channel of its own, closed afterwards, so a refused
declaration never disturbs the three.

A link ends in exactly one of two ways: :meth:`Link.close` (on purpose, no event) or a failure, which
is reported once through :meth:`LinkEvents.on_closed` with a reason in words. Failures are:

* the connection closing under us (the socket failed, or the broker closed it);
* the broker breaking the protocol (a frame over ``frame_max``, a bad frame end, content out of
  order...): the protocol core closes the connection at once and says what the broker sent;
* **silence**: the broker sends something (data or a heartbeat) at least every ``heartbeat / 2``
  seconds, so no complete frame for ``1.5 * heartbeat`` means the link is dead even though the socket
  looks open (a silent partition, a dead peer, a stale NAT entry). While publishes await their
  confirms the limit is shorter, ``max(heartbeat / 2 + 1, 0.75 * heartbeat)`` (not for the zombie
  probe's: it has a deadline of its own, and a broker busy with thousands of reconnects may be silent
  that long). Liveness is judged on
  *parsed frames*, by the one parser of the stream: a link with traffic is alive by definition, one
  that delivers only garbage or half a frame is dead;
* a ``type`` or ``host`` channel closed by the broker (the owner rebuilds the whole link).

Deliveries are handed to the consumer callback inline, as frozen :class:`~gear.amqp.Delivery`
values with the :class:`~gear.link.delivery.Settle` of their channel
(``settle.ack(delivery.delivery_tag)``), which counts what is unsettled so that :meth:`Link.retire`
can wait for the requests taken from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from gear.amqp import ChannelClosedError, ClosedError, ConsumerCancelled
from gear.base.timers import LoopTimers
from gear.base.topology import CONSUMER_DISCONNECTED_TIMEOUT, QueueSpec, Topology
from gear.errors import ConfigurationError, ConnectError, ConnectionLostError
from gear.link.connection import Channel, Connection, connect, replies
from gear.link.delivery import ConsumerChannel, DeliveryCallback
from gear.link.publishing import PublishChannel
from gear.wire import spec

__all__ = ("Link", "LinkEvents", "open_link")

log = logging.getLogger("gear.link")

_CURRENT = re.compile(r"current is (?:the value )?(?:'(?P<value>-?\d+)'|(?P<none>none))")

_CLOSE_WAIT = 2.0
_KEPT_AS_THEY_ARE: set[str] = set()
"""Queues whose ``x-consumer-disconnected-timeout`` differs from Gear's and were said to be kept."""


class LinkEvents(Protocol):
    """What the owner of a link is told about."""

    def on_blocked(self, reason: str) -> None:
        """The broker sent ``connection.blocked``."""

    def on_unblocked(self) -> None:
        """The broker sent ``connection.unblocked``."""

    def on_closed(self, link: Link, reason: str) -> None:
        """The link failed (once; not called for :meth:`Link.close`)."""

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The broker cancelled the consumer of ``queue`` (typically: it was deleted)."""


async def open_link(
    url: str,
    events: LinkEvents,
    *,
    heartbeat: int,
    handshake_timeout: float,
    prefetch: int,
    name: str,
    ssl_context: ssl.SSLContext | None = None,
    timers: LoopTimers | None = None,
    busy_poll: float = 0.0,
) -> Link:
    """Connect to one broker and open the three channels, all within ``handshake_timeout``.

    ``ssl_context`` (from :func:`gear.session.tls.client_context`) is used for ``amqps://`` URLs;
    ``busy_poll`` is :attr:`gear.Settings.busy_poll`.

    Raises:
        ConfigurationError: a malformed URL.
        ConnectError: the TCP connect or TLS handshake failed, the handshake did not finish within
            ``handshake_timeout``, or the broker refused the login or the virtual host.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + handshake_timeout
    conn = await connect(
        url,
        heartbeat=heartbeat,
        name=name,
        handshake_timeout=handshake_timeout,
        ssl_context=ssl_context,
        busy_poll=busy_poll,
    )
    try:
        async with asyncio.timeout_at(give_up):
            # one round trip for the three channels, confirm mode and prefetch: a channel's methods
            # may follow its channel.open at once (the broker handles them in order), and every
            # round trip saved counts thousands of times when a fleet reconnects at once
            (publish, p_open), (type_ch, t_open), (host_ch, h_open) = (conn.open_channel() for _ in range(3))
            qos = spec.Basic.Qos(prefetch_count=prefetch)
            await replies(
                [
                    p_open,
                    t_open,
                    h_open,
                    publish.request(spec.Confirm.Select()),
                    type_ch.request(qos),
                    host_ch.request(qos),
                ]
            )
    except TimeoutError:
        conn.abort("channel setup timeout")
        raise ConnectError(
            f"opening channels on {conn.where} did not finish within {handshake_timeout:g}s"
        ) from None
    except ClosedError as exc:
        conn.abort("channel setup failed")
        raise ConnectError(f"cannot open channels on {conn.where}: {exc}") from None
    return Link(conn, publish, type_ch, host_ch, events, timers or LoopTimers())


class Link:
    """One open AMQP connection with the publish, type and host channels."""

    def __init__(
        self,
        conn: Connection,
        publish: Channel,
        type_ch: Channel,
        host_ch: Channel,
        events: LinkEvents,
        timers: LoopTimers,
    ) -> None:
        self._conn = conn
        self._publish = PublishChannel(conn, publish, self._fail, timers)
        self._events = events
        self.where = conn.where
        """The broker's URL, password masked."""
        self._consumers = {"type": ConsumerChannel(type_ch), "host": ConsumerChannel(host_ch)}
        self._closing_on_purpose = False
        self._failed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.heartbeat = conn.heartbeat
        """The negotiated heartbeat timeout in seconds (0: none)."""
        self.dead_after = 1.5 * self.heartbeat
        """Seconds of silence from the broker after which an idle link is declared dead."""
        self.dead_after_busy = max(self.heartbeat / 2 + 1.0, 0.75 * self.heartbeat)
        """Seconds of silence after which a link with publishes awaiting confirms is declared dead."""
        conn.when_blocked = events.on_blocked
        conn.when_unblocked = events.on_unblocked
        conn.when_cancelled = self._cancelled
        conn.closed.add_done_callback(self._on_conn_closed)
        for channel in (type_ch, host_ch):
            channel.closed.add_done_callback(self._consumer_channel_closed)
        if self.heartbeat:
            self._spawn(self._watch())

    # -- facts ---------------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """True until the link failed or was closed."""
        return not self._failed and not self._closing_on_purpose and self._conn.is_open

    @property
    def server_properties(self) -> dict[str, Any]:
        """What the broker said of itself in ``connection.start`` (product, version, capabilities...)."""
        return self._conn.server_properties

    @property
    def frame_max(self) -> int:
        """The negotiated largest frame, in bytes."""
        return self._conn.frame_max

    @property
    def channel_max(self) -> int:
        """The negotiated highest channel number."""
        return self._conn.channel_max

    @property
    def unsettled(self) -> int:
        """Deliveries handed out on this link and not settled yet (requests being handled)."""
        return sum(consumers.unsettled for consumers in self._consumers.values())

    def silence(self) -> float:
        """Seconds since the broker last completed a frame."""
        return self._conn.silence()

    # -- lifecycle -------------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        """Report the failure once and drop the socket."""
        if self._failed or self._closing_on_purpose:
            return
        self._failed = True
        self.abort()
        self._events.on_closed(self, reason)

    def _on_conn_closed(self, closed: asyncio.Future[ClosedError]) -> None:
        error = closed.result()
        if error.by_broker:
            self._fail(f"the broker closed the connection ({error.code} {error.text})")
        else:
            self._fail(error.text)  # the socket closed, or the broker broke the protocol: said in words

    def _consumer_channel_closed(self, closed: asyncio.Future[ChannelClosedError]) -> None:
        if self._closing_on_purpose or not self._conn.is_open:
            return
        self._fail(f"a consumer channel closed ({closed.result()})")

    def _cancelled(self, event: ConsumerCancelled) -> None:
        for consumers in self._consumers.values():
            if consumers.channel.number != event.channel:
                continue
            if consumers.queues.pop(event.consumer_tag, None) is not None:
                self._events.on_consumer_cancelled(self, event.queue)

    async def _watch(self) -> None:
        """Declare the link dead when no frame came for too long: ``dead_after`` seconds, or
        ``dead_after_busy`` while publishes await their confirms (the confirm watchdog).

        It wakes when the shorter limit would be passed if no frame came meanwhile, not on a fixed
        tick: a broker's heartbeats keep pushing that moment back, so a link wakes its watchdog about
        once per heartbeat interval (a fixed tick of 0.5 s woke it ten thousand times a second in a
        process of 5,000 instances). Past that limit (a late frame) it checks every ``tick``."""
        tick = min(0.5, max(0.1, self.heartbeat / 8))
        while self.is_open:
            until_busy_limit = self.dead_after_busy - self.silence()
            await asyncio.sleep(until_busy_limit + 0.01 if until_busy_limit > 0 else tick)
            silence = self.silence()
            busy = self._publish.watched
            if silence > (self.dead_after_busy if busy else self.dead_after) and self.is_open:
                waiting = f", {busy} publish(es) awaiting confirms" if busy else ""
                self._fail(
                    f"nothing received for {silence:.1f}s (heartbeat {self.heartbeat}s{waiting}): "
                    "the network or the broker went silent"
                )
                return

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def retire(self, grace: float) -> None:
        """Leave this link gracefully for another one: stop consuming, let the deliveries taken from
        it be settled and the publishes on it be confirmed (up to ``grace`` seconds), then close it."""
        self._closing_on_purpose = True
        await self.stop_consuming()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                for consumers in self._consumers.values():
                    await consumers.all_settled.wait()
                await self._publish.drained.wait()
        await self.close()

    async def close(self) -> None:
        """Close the connection on purpose (no ``on_closed`` event). Requests still being handled
        keep running; their acks find the channel gone and the broker requeues them."""
        self._closing_on_purpose = True
        self._publish.stop()
        for task in list(self._tasks):
            task.cancel()
        await self._conn.close(_CLOSE_WAIT)

    def abort(self) -> None:
        """Drop the socket at once."""
        self._failed = True
        self._publish.stop()
        self._conn.abort("aborted")

    # -- topology --------------------------------------------------------------------------------------

    async def apply(self, topology: Topology, step_done: Callable[[], None] | None = None) -> None:
        """Declare the exchange, the queues and their bindings (idempotent), on a channel of their own;
        ``step_done`` is called after each step.

        Everything is sent at once and the replies are awaited together (one round trip: a fleet
        that reconnects at once pays each round trip thousands of times). A queue that exists with
        another ``x-consumer-disconnected-timeout`` refuses its declaration, which closes the channel
        and fails what followed it: then the topology is declared again one step at a time (see
        :meth:`_declare_queue`).

        Raises:
            ConfigurationError: the broker refused a declaration (e.g. a queue exists with other
                arguments, or access was refused).
            ConnectionLostError: the connection failed meanwhile.
        """
        done = step_done or _nothing
        try:
            try:
                channel = await self._declare_together(topology)
            except ChannelClosedError as exc:
                if _current_argument(exc, CONSUMER_DISCONNECTED_TIMEOUT) is None:
                    raise
                done()
                channel = await self._declare_one_by_one(topology, done)
            done()
        except ChannelClosedError as exc:
            if not exc.by_broker or exc.code not in (403, 406):
                raise ConnectionLostError(f"declaring the topology on {self.where} failed: {exc}") from exc
            hint = ""
            if "x-queue-type" in exc.text:
                hint = (
                    " (the queue exists with another type: `quorum` was switched on or off; delete "
                    "the old queue, e.g. rabbitmqctl delete_queue NAME, or use new HOST names)"
                )
            raise ConfigurationError(f"broker refused Gear's topology: {exc.code} {exc.text}{hint}") from exc
        except ClosedError as exc:
            raise ConnectionLostError(f"declaring the topology on {self.where} failed: {exc}") from exc
        channel.close_soon()  # its close-ok is not waited for: the channel is done with either way

    async def _declare_together(self, topology: Topology) -> Channel:
        """Open a channel and declare the whole topology on it in one round trip; the channel.

        Raises:
            ClosedError: the broker refused a declaration (the first refusal), or the connection failed.
        """
        channel, opened = self._conn.open_channel()
        ex = topology.exchange
        await replies(
            [
                opened,
                channel.request(
                    spec.Exchange.Declare(exchange=ex.name, exchange_type=ex.type, durable=ex.durable)
                ),
                *(channel.request(_queue_declare(q, q.arguments)) for q in topology.queues),
                *(
                    channel.request(
                        spec.Queue.Bind(queue=b.queue, exchange=b.exchange, routing_key=b.routing_key)
                    )
                    for b in topology.bindings
                ),
            ]
        )
        return channel

    async def _declare_one_by_one(self, topology: Topology, done: Callable[[], None]) -> Channel:
        """Declare the topology a step at a time on a fresh channel (each queue as :meth:`_declare_queue`
        says); the channel to close.

        Raises:
            ClosedError: the broker refused a declaration, or the connection failed.
        """
        channel = await self._conn.channel()
        ex = topology.exchange
        await channel.call(spec.Exchange.Declare(exchange=ex.name, exchange_type=ex.type, durable=ex.durable))
        done()
        for q in topology.queues:
            channel = await self._declare_queue(channel, q)
            done()
        for b in topology.bindings:
            await channel.call(spec.Queue.Bind(queue=b.queue, exchange=b.exchange, routing_key=b.routing_key))
            done()
        return channel

    async def _declare_queue(self, channel: Channel, q: QueueSpec) -> Channel:
        """Declare ``q``; the channel to go on with.

        A queue that exists with another ``x-consumer-disconnected-timeout`` (declared by an older
        Gear, or with another setting: RabbitMQ 4.3 checks it on redeclaration) is declared again, on a
        fresh channel, with the value it has, and that is logged (once per queue and process): a queue
        cannot change it.

        Raises:
            ChannelClosedError, ClosedError: the broker refused it, or the connection failed.
        """
        try:
            await channel.call(_queue_declare(q, q.arguments))
            return channel
        except ChannelClosedError as exc:
            current = _current_argument(exc, CONSUMER_DISCONNECTED_TIMEOUT)
            if current is None:
                raise
        arguments = {k: v for k, v in q.arguments.items() if k != CONSUMER_DISCONNECTED_TIMEOUT}
        if current[0]:
            arguments[CONSUMER_DISCONNECTED_TIMEOUT] = current[1]
        if q.name not in _KEPT_AS_THEY_ARE:
            _KEPT_AS_THEY_ARE.add(q.name)
            log.warning(
                "queue %r exists with %s %s, not %s: kept (a queue cannot change it; to change it, set a "
                "policy consumer-disconnected-timeout or delete the queue)",
                q.name,
                CONSUMER_DISCONNECTED_TIMEOUT,
                current[1] if current[0] else "unset",
                q.arguments.get(CONSUMER_DISCONNECTED_TIMEOUT, "unset"),
            )
        channel = await self._conn.channel()
        await channel.call(_queue_declare(q, arguments))
        return channel

    # -- consuming -------------------------------------------------------------------------------------

    async def consume(
        self, which: str, queue: str, callback: DeliveryCallback, *, priority: int | None = None
    ) -> None:
        """Start consuming ``queue`` on the ``type`` or ``host`` channel; every delivery goes to
        ``callback`` inline, with how to settle it (``settle.ack(delivery.delivery_tag)`` or ``reject``).
        ``priority`` is the consumer's ``x-priority``: the broker delivers to a consumer of lower
        priority only while every higher one is full.

        Raises:
            ConnectionLostError: the channel or connection failed.
        """
        consumers = self._consumers[which]
        try:
            arguments = {} if priority is None else {"x-priority": priority}
            await consumers.consume(queue, f"gear.{which}.{queue}", callback, arguments)
        except ClosedError as exc:
            raise ConnectionLostError(f"cannot consume {queue!r}: {exc}") from exc

    @property
    def consuming(self) -> frozenset[str]:
        """The queues this link consumes (asked for, and not cancelled since)."""
        return frozenset(q for consumers in self._consumers.values() for q in list(consumers.queues.values()))

    async def stop_consuming(self, queue: str | None = None) -> None:
        """Cancel the consumer of ``queue`` (default: every consumer); deliveries already taken are
        still processed and acknowledged."""
        for consumers in self._consumers.values():
            for tag, name in list(consumers.queues.items()):
                if queue is None or name == queue:
                    await consumers.cancel(tag, _CLOSE_WAIT)

    # -- publishing ------------------------------------------------------------------------------------

    @property
    def publishing(self) -> PublishChannel:
        """The publish channel: ``link.publishing.publish(...)`` sends one confirmed attempt."""
        return self._publish


def _nothing() -> None:
    return None


def _queue_declare(q: QueueSpec, arguments: dict[str, Any]) -> spec.Queue.Declare:
    return spec.Queue.Declare(
        queue=q.name, durable=q.durable, exclusive=q.exclusive, auto_delete=q.auto_delete, arguments=arguments
    )


def _current_argument(error: ChannelClosedError, argument: str) -> tuple[bool, int] | None:
    """From RabbitMQ's ``406 ... inequivalent arg 'ARGUMENT' ... current is ...``: ``(True, value)``
    or ``(False, 0)`` when the queue has none; None when the refusal is about something else."""
    if not error.by_broker or error.code != 406 or f"'{argument}'" not in error.text:
        return None
    found = _CURRENT.search(error.text)
    if found is None:
        return None
    return (False, 0) if found.group("none") else (True, int(found.group("value")))
