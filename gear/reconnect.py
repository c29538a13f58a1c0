"""Keeping one link to the broker alive: connect, lose, reconnect, re-apply topology.

Theory of operation
-------------------
The :class:`Connector` owns at most one :class:`~gear.adapter.Link`. ``ready`` is an event that is set
exactly while a link is open *and* its topology is declared *and* its consumers run; publishers wait on
it (bounded by their own deadline) instead of failing at once or hanging.

* **Start.** ``start()`` tries the URLs in order, round after round, sleeping a jittered exponential
  backoff between rounds, until one works or ``connect_wait`` has passed (then ``ConnectError`` with the
  last reason). A connect attempt has its own handshake timeout (see ``gear.adapter``).
* **Loss.** When the link reports it closed, ``ready`` is cleared and one reconnect task starts
  (single flight: a second loss report while it runs is ignored). The task loops like ``start()`` but
  never gives up until ``close()``.
* **Recovery.** The topology is re-applied *as data* (the same :class:`~gear.topology.Topology` every
  time, never a replay of history), then the consumers restart and ``ready`` is set again. Calls in
  flight never noticed: their replies wait in the durable ``TYPE.HOST`` queue.
* **Cancelled consumer.** If the broker cancels a consumer (its queue was deleted behind our back), the
  connector drops the whole link and lets the reconnect path rebuild it: re-declaring on the live link
  races with whatever deleted the queue and can leave a delivery in limbo on a half-cancelled consumer,
  while a fresh connection requeues everything unacked and re-declares from data. One recovery path,
  tested by every reconnect test.
* **Blocked.** ``connection.blocked`` clears the ``unblocked`` event and calls the hook; publishers wait
  on it, bounded by their deadline. A new link starts unblocked.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gear.adapter import Link, open_link
from gear.errors import ConfigurationError, ConnectError, ConnectionLostError
from gear.redact import mask_url
from gear.tracing.api import Attr, EventName, NullTracer, Tracer

__all__ = ("Backoff", "Connector")

log = logging.getLogger("gear.reconnect")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: round ``n`` waits between ``(1-jitter)`` and 1 times
    ``min(maximum, initial * factor**n)``."""

    initial: float = 0.1
    maximum: float = 5.0
    factor: float = 2.0
    jitter: float = 0.5

    def delay(self, round_: int, rng: random.Random | None = None) -> float:
        """The sleep before round ``round_ + 1`` (0-based)."""
        base = min(self.maximum, self.initial * self.factor ** min(round_, 64))
        draw = (rng or random).random()
        return base * (1.0 - self.jitter * draw)


OnReady = Callable[[Link], Awaitable[None]]


class Connector:
    """Owns the link of one service instance and brings it back after a loss."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        name: str,
        heartbeat: int,
        handshake_timeout: float,
        prefetch: int,
        backoff: Backoff,
        connect_wait: float,
        on_ready: OnReady,
        tracer: Tracer | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._urls = tuple(urls)
        self._ssl_context = ssl_context
        self._name = name
        self._heartbeat = heartbeat
        self._handshake_timeout = handshake_timeout
        self._prefetch = prefetch
        self._backoff = backoff
        self._connect_wait = connect_wait
        self._on_ready = on_ready
        self._tracer: Tracer = tracer or NullTracer()
        self.link: Link | None = None
        self.ready = asyncio.Event()
        self.unblocked = asyncio.Event()
        self.unblocked.set()
        self.blocked_reason: str | None = None
        self.on_blocked_hook: Callable[..., object] | None = None
        self.on_unblocked_hook: Callable[..., object] | None = None
        self.reconnects = 0
        self.started = False
        self._closing = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._lost_at = 0.0

    # -- public ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, declare and consume, retrying until ``connect_wait`` runs out.

        Raises:
            ConnectError: no broker could be reached in time (the message says why).
            ConfigurationError: the broker refused the topology.
        """
        self._closing = False
        self.started = True
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._connect_wait
        last: BaseException | None = None
        round_ = 0
        while True:
            for url in self._urls:
                try:
                    await self._bring_up(url)
                    return
                except ConfigurationError:
                    raise
                except (ConnectError, ConnectionLostError) as exc:
                    last = exc
                    log.warning("connect to broker failed: %s", exc)
            delay = self._backoff.delay(round_)
            round_ += 1
            if loop.time() + delay > give_up:
                raise ConnectError(
                    f"no broker reachable within {self._connect_wait:g}s; last error: {last}"
                ) from last
            await asyncio.sleep(delay)

    async def wait_ready(self, until: float) -> Link:
        """The open link, waiting for a reconnect until loop time ``until``.

        Raises:
            TimeoutError: not connected by ``until``.
            ConnectionLostError: the connector is closing.
        """
        while True:
            if not self.started:
                raise ConnectionLostError(
                    "the service is not started: use `async with svc:` or `await svc.start()` first"
                )
            if self._closing:
                raise ConnectionLostError("the service is stopping")
            link = self.link
            if self.ready.is_set():
                if link is not None and link.is_open:
                    return link
                # ready, but the link died and its close callback has not run yet: retire it now,
                # or waiting on a set event would return at once, forever (a livelock)
                if link is not None:
                    self.lose(link, "connection closed")
                else:
                    self.ready.clear()
            async with asyncio.timeout_at(until):
                await self.ready.wait()

    async def wait_unblocked(self, until: float) -> None:
        """Return when the connection is not blocked, waiting until loop time ``until``.

        Raises:
            TimeoutError: still blocked at ``until``.
        """
        if not self.unblocked.is_set():
            async with asyncio.timeout_at(until):
                await self.unblocked.wait()

    async def close(self) -> None:
        """Stop reconnecting and close the link."""
        self._closing = True
        self.started = False
        self.ready.clear()
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            await asyncio.gather(self._reconnect_task, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        link, self.link = self.link, None
        if link is not None:
            await link.close()

    # -- link events -------------------------------------------------------------------------------

    def on_blocked(self, reason: str) -> None:
        """Record the broker's ``connection.blocked`` and call the hook."""
        self.blocked_reason = reason or "blocked"
        self.unblocked.clear()
        self._emit(EventName.BLOCKED, {Attr.BLOCKED_REASON: self.blocked_reason})
        hook = self.on_blocked_hook
        if hook is not None:
            _call_hook(hook, self.blocked_reason)

    def on_unblocked(self) -> None:
        """Record ``connection.unblocked`` and call the hook."""
        was = self.blocked_reason is not None
        self.blocked_reason = None
        self.unblocked.set()
        if was:
            self._emit(EventName.UNBLOCKED, {})
            hook = self.on_unblocked_hook
            if hook is not None:
                _call_hook(hook)

    def on_closed(self, link: Link, exc: BaseException | None) -> None:
        """The link died: start the single reconnect task."""
        self.lose(link, repr(exc))

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The broker cancelled a consumer: drop the link so the reconnect path rebuilds everything."""
        self.lose(link, f"the broker cancelled the consumer of {queue!r} (queue deleted?)")

    def lose(self, link: Link, reason: str) -> None:
        """Declare ``link`` dead: publishers stop using it at once, it is aborted, one reconnect starts.

        Safe to call any number of times and for a link that is already replaced (then it does nothing).
        """
        if link is not self.link or self._closing:
            return
        log.warning("connection to %s lost: %s; reconnecting", link.where, reason)
        self.ready.clear()
        self.link = None
        link.abort()
        if self.blocked_reason is not None:
            self.on_unblocked()
        self._lost_at = asyncio.get_running_loop().time()
        self._emit(EventName.CONNECTION_LOST, {"exception.message": reason})
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    # -- internals ---------------------------------------------------------------------------------

    async def _bring_up(self, url: str) -> None:
        link = await open_link(
            url,
            self,
            heartbeat=self._heartbeat,
            handshake_timeout=self._handshake_timeout,
            prefetch=self._prefetch,
            name=self._name,
            ssl_context=self._ssl_context,
        )
        self.link = link
        try:
            # declarations and consumes are RPCs too: a broker that stops answering mid-setup must
            # not stall recovery, so setup gets the same bound as the handshake
            async with asyncio.timeout(self._handshake_timeout):
                await self._on_ready(link)
        except TimeoutError:
            self.link = None
            await link.close()
            raise ConnectionLostError(
                f"topology setup on {link.where} took longer than {self._handshake_timeout:g}s"
            ) from None
        except BaseException:
            self.link = None
            await link.close()
            raise
        if not link.is_open:
            self.link = None
            raise ConnectionLostError("connection closed during setup")
        self.ready.set()

    async def _reconnect(self) -> None:
        loop = asyncio.get_running_loop()
        round_ = 0
        while not self._closing:
            for url in self._urls:
                try:
                    await self._bring_up(url)
                except (ConnectError, ConnectionLostError, ConfigurationError) as exc:
                    log.warning("reconnect attempt failed: %s", exc)
                    continue
                except Exception:
                    # the supervisor must outlive any bug below it: log it once, back off, go on
                    log.exception("reconnect attempt to %s failed unexpectedly", url)
                    continue
                self.reconnects += 1
                self._emit(
                    EventName.RECONNECT,
                    {
                        Attr.RECONNECT_ATTEMPT: round_ + 1,
                        Attr.DOWNTIME_MS: round((loop.time() - self._lost_at) * 1000, 3),
                    },
                )
                log.info("reconnected to %s", mask_url(url))
                return
            await asyncio.sleep(self._backoff.delay(round_))
            round_ += 1

    def _emit(self, name: EventName, attrs: dict[str, object]) -> None:
        if self._tracer.enabled:
            attrs[Attr.MESSAGING_SYSTEM] = "rabbitmq"
            self._tracer.emit(name, attributes=attrs)


_hook_tasks: set[asyncio.Task[object]] = set()


def _call_hook(hook: Callable[..., object], *args: object) -> None:
    try:
        result = hook(*args)
        if asyncio.iscoroutine(result):
            task: asyncio.Task[object] = asyncio.ensure_future(result)
            _hook_tasks.add(task)
            task.add_done_callback(_hook_tasks.discard)
    except Exception:
        log.exception("hook %r failed", hook)
