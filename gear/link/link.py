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
  confirms the limit is shorter, ``max(heartbeat / 2 + 1, 0.75 * heartbeat)``. Liveness is judged on
  *parsed frames*, by the one parser of the stream: a link with traffic is alive by definition, one
  that delivers only garbage or half a frame is dead;
* a ``type`` or ``host`` channel closed by the broker (the owner rebuilds the whole link).

Deliveries are handed to the consumer callback inline, as typed :class:`~gear.amqp.Delivery`
values; they are settled through the link (``delivery.ack()``), which counts what is unsettled so that
:meth:`Link.retire` can wait for the requests taken from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from pamqp import commands

from gear.alarms import Alarms
from gear.amqp import ChannelClosedError, ClosedError, Delivery
from gear.errors import ConfigurationError, ConnectError, ConnectionLostError
from gear.link.connection import Channel, ChannelListener, Connection, connect
from gear.link.publishing import PublishChannel, confirm_channel
from gear.topology import Topology

__all__ = ("DeliveryCallback", "Link", "LinkEvents", "open_link")

log = logging.getLogger("gear.link")

_CLOSE_WAIT = 2.0

DeliveryCallback = Callable[[Delivery], None]
"""Takes each delivery inline; settles it (``delivery.ack()``) now, or later from a task of its own."""


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
    alarms: Alarms | None = None,
    busy_poll: float = 0.0,
) -> Link:
    """Connect to one broker and open the three channels, all within ``handshake_timeout``.

    ``ssl_context`` (from :func:`gear.tls.client_context`) is used for ``amqps://`` URLs;
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
            publish = await confirm_channel(conn)
            consumers = [await conn.channel() for _ in range(2)]
            for channel in consumers:
                await channel.call(commands.Basic.Qos(prefetch_count=prefetch))
    except TimeoutError:
        conn.abort("channel setup timeout")
        raise ConnectError(
            f"opening channels on {conn.where} did not finish within {handshake_timeout:g}s"
        ) from None
    except ClosedError as exc:
        conn.abort("channel setup failed")
        raise ConnectError(f"cannot open channels on {conn.where}: {exc}") from None
    return Link(conn, publish, consumers[0], consumers[1], events, alarms or Alarms())


class _Consumers(ChannelListener):
    """A consumer channel's listener and settling interface: counts what it handed out unsettled."""

    def __init__(self, link: Link, channel: Channel) -> None:
        self._link = link
        self.channel = channel
        self.queues: dict[str, str] = {}
        """consumer tag -> queue."""
        channel.listener = self

    def ack(self, delivery_tag: int) -> bool:
        self._link.settled()
        return self.channel.ack(delivery_tag)

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        self._link.settled()
        return self.channel.reject(delivery_tag, requeue)

    def on_cancelled(self, consumer_tag: str) -> None:
        queue = self.queues.pop(consumer_tag, None)
        if queue is not None:
            self._link._cancelled(queue)

    def on_closed(self, error: ChannelClosedError) -> None:
        self._link._consumer_channel_closed(error)


class Link:
    """One open AMQP connection with the publish, type and host channels."""

    def __init__(
        self,
        conn: Connection,
        publish: Channel,
        type_ch: Channel,
        host_ch: Channel,
        events: LinkEvents,
        alarms: Alarms,
    ) -> None:
        self._conn = conn
        self._publish = PublishChannel(conn, publish, self._fail, alarms)
        self._events = events
        self.where = conn.where
        """The broker's URL, password masked."""
        self._consumers = {"type": _Consumers(self, type_ch), "host": _Consumers(self, host_ch)}
        self._unsettled = 0
        self._all_settled = asyncio.Event()
        self._all_settled.set()
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
        conn.closed.add_done_callback(self._on_conn_closed)
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

    def _consumer_channel_closed(self, error: ChannelClosedError) -> None:
        if self._closing_on_purpose or not self._conn.is_open:
            return
        self._fail(f"a consumer channel closed ({error})")

    def _cancelled(self, queue: str) -> None:
        self._events.on_consumer_cancelled(self, queue)

    async def _watch(self) -> None:
        """Declare the link dead when no frame came for too long: ``dead_after`` seconds, or
        ``dead_after_busy`` while publishes await their confirms (the confirm watchdog)."""
        interval = min(0.5, max(0.1, self.heartbeat / 8))
        while self.is_open:
            await asyncio.sleep(interval)
            silence = self.silence()
            busy = self._publish.in_flight
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
                await self._all_settled.wait()
                await self._publish.drained.wait()
        await self.close()

    def taken(self) -> None:
        """A delivery was handed out on this link."""
        self._unsettled += 1
        self._all_settled.clear()

    def settled(self) -> None:
        """A delivery handed out on this link was settled."""
        self._unsettled -= 1
        if self._unsettled <= 0:
            self._all_settled.set()

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

    async def apply(self, topology: Topology) -> None:
        """Declare the exchange, the queues and their bindings (idempotent), on a channel of their own.

        Raises:
            ConfigurationError: the broker refused a declaration (e.g. a queue exists with other
                arguments, or access was refused).
            ConnectionLostError: the connection failed meanwhile.
        """
        try:
            channel = await self._conn.channel()
        except ClosedError as exc:
            raise ConnectionLostError(f"declaring the topology on {self.where} failed: {exc}") from exc
        try:
            ex = topology.exchange
            await channel.call(
                commands.Exchange.Declare(exchange=ex.name, exchange_type=ex.type, durable=ex.durable)
            )
            for q in topology.queues:
                await channel.call(
                    commands.Queue.Declare(
                        queue=q.name,
                        durable=q.durable,
                        exclusive=q.exclusive,
                        auto_delete=q.auto_delete,
                        arguments=q.arguments,
                    )
                )
            for b in topology.bindings:
                await channel.call(
                    commands.Queue.Bind(queue=b.queue, exchange=b.exchange, routing_key=b.routing_key)
                )
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
        await channel.close(_CLOSE_WAIT)

    # -- consuming -------------------------------------------------------------------------------------

    async def consume(self, which: str, queue: str, callback: DeliveryCallback) -> None:
        """Start consuming ``queue`` on the ``type`` or ``host`` channel; every delivery goes to
        ``callback`` inline and must be settled through it (``delivery.ack()`` or ``reject()``).

        Raises:
            ConnectionLostError: the channel or connection failed.
        """
        consumers = self._consumers[which]
        tag = f"gear.{which}.{queue}"

        def take(delivery: Delivery) -> None:
            self.taken()
            callback(delivery)

        consumers.queues[tag] = queue
        try:
            await consumers.channel.consume(queue, tag, take, consumers)
        except ClosedError as exc:
            consumers.queues.pop(tag, None)
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
                if queue is not None and name != queue:
                    continue
                consumers.queues.pop(tag, None)
                with contextlib.suppress(ClosedError, TimeoutError):
                    await asyncio.wait_for(
                        consumers.channel.call(commands.Basic.Cancel(consumer_tag=tag)), _CLOSE_WAIT
                    )

    # -- publishing ------------------------------------------------------------------------------------

    @property
    def publishing(self) -> PublishChannel:
        """The publish channel: ``link.publishing.publish(...)`` sends one confirmed attempt."""
        return self._publish
