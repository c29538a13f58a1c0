"""Keeping one link to the broker alive: connect, lose, reconnect, re-apply topology.

Theory of operation
-------------------
The :class:`Connector` owns at most one :class:`~gear.link.Link`. ``ready`` is an event that is set
exactly while a link is open *and* its topology is declared *and* its consumers run; publishers wait on
it (bounded by their own deadline) instead of failing at once or hanging.

* **Start.** ``start()`` tries the URLs, round after round, sleeping a jittered exponential backoff
  between rounds, until one works or ``connect_wait`` has passed (then ``ConnectError`` with the last
  reason). A connect attempt has its own handshake timeout (see ``gear.link``).
* **URL order.** With several brokers (a cluster), each instance starts at a different place in the
  list (a stable hash of its identity), so instances spread over the nodes; after a loss, the broker
  that failed is tried last, so a reconnect goes to a live node first.
* **Loss.** Every way a link can fail (the socket closed, the broker closed it, the watchdog heard
  nothing for too long, a publish found it dead, the broker cancelled a consumer) ends in
  :meth:`Connector.lose`: ``ready`` is cleared at once (publishers stop using the link), the socket is
  aborted, one WARNING is logged, and one reconnect task starts (single flight). The task loops like
  ``start()`` but never gives up until ``close()``, and survives any exception below it (logged with
  its traceback, then retried after the backoff).
* **Recovery.** The topology is re-applied *as data* (the same :class:`~gear.base.topology.Topology` every
  time, never a replay of history), then the consumers restart, ``ready`` is set again and one INFO
  line says how long the outage lasted. Calls in flight never noticed: their replies wait in the
  ``TYPE.HOST`` queue. Each setup step (a declaration, a binding, a consume) is bounded on its own, not
  the setup as a whole: when thousands of instances come back to one broker at once, every step is
  slow but each goes through, where a bound on the whole abandoned setups that progressed and began
  them again from the handshake, loading the broker further (a storm that did not converge).
* **Failback.** Connected to another broker than its first choice (after a failover), the instance
  tries the first choice every ``failback_every`` seconds; once it answers, a complete new link
  (topology, consumers) is set up there, publishers switch to it, and the old link is retired
  gracefully (its consumers cancelled, requests taken from it finished and acked on it, its
  publishes settled). So a cluster node that returns gets its share of instances back.
* **Cancelled consumer.** If the broker cancels a consumer (its queue was deleted behind our back), the
  whole link is dropped and rebuilt by the same path: a fresh connection requeues everything unacked
  and re-declares from data. One recovery path, tested by every reconnect test.
* **Blocked.** ``connection.blocked`` clears the ``unblocked`` event and fires ``on_blocked``; publishers wait
  on it, bounded by their deadline. A new link starts unblocked.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gear.base.redact import mask_url
from gear.base.timers import LoopTimers
from gear.errors import ConfigurationError, ConnectError, ConnectionLostError
from gear.link import Link, open_link
from gear.session.hooks import Hooks
from gear.session.pacing import opening_turns
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter

__all__ = ("Backoff", "Connector", "ServiceState")

log = logging.getLogger("gear.session.reconnect")

_STILL_DOWN_EVERY = 60.0
"""Seconds between the WARNING lines that say a connect or reconnect is still failing (one line per
incident: the attempts in between are logged at DEBUG)."""


class ServiceState(StrEnum):
    """Where a service instance's connection stands."""

    CONNECTING = "connecting"
    """``start()`` is trying to reach a broker for the first time."""
    READY = "ready"
    """Connected, topology declared, consuming."""
    BLOCKED = "blocked"
    """Connected, but the broker blocks publishes (memory or disk alarm)."""
    RECONNECTING = "reconnecting"
    """The link was lost; a new one is being made."""
    STOPPED = "stopped"
    """Not started, or stopped."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: round ``n`` waits between ``(1-jitter)`` and 1 times
    ``min(maximum, initial * factor**n)``."""

    initial: float = 0.1
    maximum: float = 1.0
    factor: float = 2.0
    jitter: float = 0.5

    def delay(self, round_: int, rng: random.Random | None = None) -> float:
        """The sleep before round ``round_ + 1`` (0-based)."""
        base = min(self.maximum, self.initial * self.factor ** min(round_, 64))
        draw = (rng or random).random()
        return base * (1.0 - self.jitter * draw)


_SETUP_BOUND = 2.0
"""Seconds (or five times the last setup's duration, if longer) each step of a topology setup may take
in the first round of a reconnect; the bound grows by as much each round, up to ``handshake_timeout``."""

SetUp = Callable[[Link, Callable[[], None]], Awaitable[None]]
"""Declares the topology on a new link and starts its consumers, calling its second argument after each
step (a declaration, a binding, a consume): each step has the whole bound to itself."""


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
        set_up: SetUp,
        events: Emitter | None = None,
        hooks: Hooks | None = None,
        spread_key: str = "",
        ssl_context: ssl.SSLContext | None = None,
        failback_every: float = 0.0,
        retire_grace: float = 5.0,
        timers: LoopTimers | None = None,
        busy_poll: float = 0.0,
        when_lost: Callable[[bool], None] | None = None,
    ) -> None:
        self._when_lost = when_lost
        self._timers = timers or LoopTimers()
        self._busy_poll = busy_poll
        urls = tuple(urls)
        first = zlib.crc32(spread_key.encode()) % len(urls) if spread_key and urls else 0
        self._urls = urls[first:] + urls[:first]
        self._ssl_context = ssl_context
        self._return_every = failback_every
        self._retire_grace = retire_grace
        self._homeward: asyncio.Task[None] | None = None
        self.failbacks = 0
        """How many times this instance moved back to its first-choice broker."""
        self._name = name
        self._heartbeat = heartbeat
        self._handshake_timeout = handshake_timeout
        self._prefetch = prefetch
        self._backoff = backoff
        self._connect_wait = connect_wait
        self._set_up = set_up
        self._events = events or Emitter(NullTracer(), name)
        self._hooks = hooks or Hooks()
        self.link: Link | None = None
        self.ready = asyncio.Event()
        self.unblocked = asyncio.Event()
        self.unblocked.set()
        self.blocked_reason: str | None = None
        self._blocked_last: tuple[str, float] | None = None
        """The reason and the loop time of the last ``connection.unblocked`` (or link loss while blocked)."""
        self.reconnects = 0
        self.started = False
        self.last_error: str | None = None
        """Why the last link was lost or the last connect attempt failed."""
        self.connected_url: str | None = None
        """The URL (without password) of the broker the current link goes to."""
        self._connected_since = 0.0
        self._closing = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._lost_at = 0.0
        self._lost_url: str | None = None
        self._setup_took = 0.0
        """Seconds the last successful topology setup took."""

    # -- state -------------------------------------------------------------------------------------

    @property
    def state(self) -> ServiceState:
        """The connection's state right now."""
        if not self.started:
            return ServiceState.STOPPED
        if self.ready.is_set() and self.link is not None and self.link.is_open:
            return ServiceState.BLOCKED if self.blocked_reason is not None else ServiceState.READY
        if self.reconnects or self._reconnect_task is not None:
            return ServiceState.RECONNECTING
        return ServiceState.CONNECTING

    def health(self) -> dict[str, Any]:
        """State, broker, uptime of the link, reconnects and the last error, JSON-able."""
        link = self.link
        up = self.state in (ServiceState.READY, ServiceState.BLOCKED)
        return {
            "state": self.state.value,
            "broker": self.connected_url if up else None,
            "connected_for_s": round(time.time() - self._connected_since, 3) if up else None,
            "reconnects": self.reconnects,
            "blocked_reason": self.blocked_reason,
            "last_error": self.last_error,
            "heartbeat_s": link.heartbeat if link is not None else self._heartbeat,
        }

    @property
    def setup_took(self) -> float:
        """Seconds the last successful topology setup took (0: none yet): a measure of the broker's
        pace when the link was made."""
        return self._setup_took

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
        attempts = 0
        next_warning = loop.time()
        while True:
            for url in self._urls:
                attempts += 1
                try:
                    await self._bring_up(url)
                    return
                except ConfigurationError:
                    raise
                except (ConnectError, ConnectionLostError) as exc:
                    last = exc
                    self.last_error = str(exc)
                    if loop.time() >= next_warning:
                        next_warning = loop.time() + _STILL_DOWN_EVERY
                        log.warning(
                            "connect to broker failed (attempt %d; retrying, this line repeats at most "
                            "once a minute): %s",
                            attempts,
                            exc,
                        )
                    else:
                        log.debug("connect attempt %d failed: %s", attempts, exc)
            delay = self._backoff.delay(round_)
            round_ += 1
            if loop.time() + delay > give_up:
                raise ConnectError(self._gave_up(last, attempts)) from last
            await asyncio.sleep(delay)

    def _gave_up(self, last: BaseException | None, attempts: int) -> str:
        """Why ``start()`` gave up, in one line: the last failure (it names the broker) first."""
        tried = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if len(self._urls) == 1 and last is not None:
            return f"{last} (gave up after {self._connect_wait:g}s, {tried})"
        return (
            f"no broker reachable within {self._connect_wait:g}s ({len(self._urls)} URLs, {tried}); "
            f"last error: {last}"
        )

    async def wait_ready(self, until: float) -> Link:
        """The open link, waiting for a reconnect until loop time ``until``.

        Raises:
            TimeoutError: not connected by ``until``.
            ConnectionLostError: the connector is closing or was never started.
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
        if self._homeward is not None:
            self._homeward.cancel()
            await asyncio.gather(self._homeward, return_exceptions=True)
            self._homeward = None
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            await asyncio.gather(self._reconnect_task, return_exceptions=True)
            self._reconnect_task = None
        link, self.link = self.link, None
        if link is not None:
            await link.close()

    # -- link events -------------------------------------------------------------------------------

    def on_blocked(self, reason: str) -> None:
        """Record the broker's ``connection.blocked`` and call the hook."""
        self.blocked_reason = reason or "blocked"
        self.unblocked.clear()
        log.warning("the broker blocked publishing on %s: %s", self.connected_url, self.blocked_reason)
        self._events.blocked(self.blocked_reason)
        self._hooks.blocked.fire(self.blocked_reason)

    def blocked_since(self, since: float) -> str | None:
        """Why the broker blocked publishing at some moment after loop time ``since`` (None: it did
        not)."""
        if self.blocked_reason is not None:
            return self.blocked_reason
        last = self._blocked_last
        return last[0] if last is not None and last[1] > since else None

    def on_unblocked(self) -> None:
        """Record ``connection.unblocked`` and call the hook."""
        was = self.blocked_reason is not None
        if self.blocked_reason is not None:
            self._blocked_last = (self.blocked_reason, asyncio.get_running_loop().time())
        self.blocked_reason = None
        self.unblocked.set()
        if was:
            log.info("the broker unblocked publishing on %s", self.connected_url)
            self._events.unblocked()
            self._hooks.unblocked.fire()

    def on_closed(self, link: Link, reason: str) -> None:
        """The link failed: see :meth:`lose`."""
        self.lose(link, reason)

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The broker cancelled a consumer: drop the link so the reconnect path rebuilds everything. Not a
        silent loss: the broker answers, and sees the link close at once."""
        self.lose(link, f"the broker cancelled the consumer of {queue!r} (queue deleted?)", silent=False)

    def lose(self, link: Link, reason: str, *, silent: bool | None = None) -> None:
        """Declare ``link`` dead: publishers stop using it at once, it is aborted, one reconnect starts.
        ``silent``: whether the broker may not know the link is gone (and keep its consumers a while);
        by default, whether its transport was still up when it was given up.

        Safe to call any number of times and for a link that is already replaced (then it does nothing).
        """
        if link is not self.link or self._closing:
            return
        self.ready.clear()
        self.link = None
        if silent is None:
            silent = link.is_open  # given up while its transport was up: the broker may not know yet
        link.abort()
        self.last_error = reason
        self._lost_at = asyncio.get_running_loop().time()
        self._lost_url = self.connected_url
        log.warning(
            "connection to %s lost: %s; reconnecting (every %gs at most)",
            link.where,
            reason,
            self._backoff.maximum,
        )
        if self.blocked_reason is not None:
            self.on_unblocked()
        if self._when_lost is not None:
            self._when_lost(silent)
        self._events.connection_lost(reason)
        self._hooks.lost.fire(reason)
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    # -- internals ---------------------------------------------------------------------------------

    async def _open_and_set_up(self, url: str, setup_within: float | None = None) -> Link:
        """A link to ``url`` with topology declared and consumers running (not yet in use), the
        handshake and each setup step bounded by ``setup_within`` seconds (default, and at most: the
        handshake timeout).

        Raises:
            ConnectError: cannot connect.
            ConnectionLostError: setup failed or took longer than the handshake timeout.
            ConfigurationError: the broker refused the topology.
        """
        async with opening_turns(url):  # a fleet's instances open their links a few at a time
            return await self._open_and_set_up_now(url, setup_within)

    async def _open_and_set_up_now(self, url: str, setup_within: float | None) -> Link:
        link = await open_link(
            url,
            self,
            heartbeat=self._heartbeat,
            # a reconnect's first rounds give a node that does not answer (cut off) little time: a
            # live one answers a handshake within a fraction of a second
            handshake_timeout=min(self._handshake_timeout, setup_within or self._handshake_timeout),
            prefetch=self._prefetch,
            name=self._name,
            ssl_context=self._ssl_context,
            timers=self._timers,
            busy_poll=self._busy_poll,
        )
        bound = self._handshake_timeout if setup_within is None else setup_within
        began = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            # declarations and consumes are RPCs too: a broker that stops answering mid-setup must
            # not stall recovery, so each step gets the same bound as the handshake. Each step, not
            # the whole: a broker that thousands of instances reconnect to at once answers every one
            # slowly, and a setup abandoned for being slow as a whole is begun again from the
            # handshake, which loads the broker more (a storm that never ends, issue 37)
            async with asyncio.timeout(bound) as scope:

                def step_done() -> None:
                    scope.reschedule(loop.time() + bound)

                await self._set_up(link, step_done)
        except TimeoutError:
            await link.close()
            raise ConnectionLostError(
                f"a topology setup step on {link.where} took longer than {bound:g}s"
            ) from None
        except BaseException:
            await link.close()
            raise
        if not link.is_open:
            raise ConnectionLostError(f"connection to {link.where} closed during setup")
        self._setup_took = time.monotonic() - began
        return link

    async def _bring_up(self, url: str, setup_within: float | None = None) -> None:
        self.link = await self._open_and_set_up(url, setup_within)
        self.connected_url = mask_url(url)
        self._connected_since = time.time()
        self.ready.set()
        self._hooks.ready.fire()
        self._go_home_later(url)

    def _go_home_later(self, url: str) -> None:
        """Connected elsewhere than the first-choice broker: watch for it to come back."""
        if url == self._urls[0] or not self._return_every:
            return
        if self._homeward is None or self._homeward.done():
            self._homeward = asyncio.create_task(self._return_home())

    async def _return_home(self) -> None:
        """Every ``failback_every`` seconds (with jitter), try the first-choice broker; once it
        answers, move there: the new link is set up completely before the old one is retired, so
        nothing waits and nothing is dropped (requests taken from the old link finish on it)."""
        home = self._urls[0]
        while not self._closing:
            await asyncio.sleep(self._return_every * (0.75 + 0.5 * random.random()))
            old = self.link
            if self.connected_url == mask_url(home):
                return  # a reconnect already took it home
            if self._closing or old is None or not self.ready.is_set():
                continue  # reconnecting: the reconnect path decides where to go
            try:
                new = await self._open_and_set_up(home)
            except (ConnectError, ConnectionLostError, ConfigurationError) as exc:
                log.debug("first-choice broker %s not back yet: %s", mask_url(home), exc)
                continue
            if self.link is not old or self._closing:  # lost meanwhile: the reconnect path owns it
                await new.close()
                continue
            self.link = new
            self.connected_url = mask_url(home)
            self._connected_since = time.time()
            self.failbacks += 1
            log.info("moved back to the first-choice broker %s", self.connected_url)
            self._hooks.ready.fire()
            await old.retire(self._retire_grace)
            return

    def _reconnect_order(self, round_: int = 1, unanswered: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """The URLs with the one that just failed moved to the end (a live node first); in the first
        round it is left out, as a node that went silent would hold the attempt for the whole
        handshake timeout. URLs that did not answer a connect in this reconnect (``unanswered``: a
        node cut off, or down) come after those that did (a node that answered but whose setup waited
        on a queue's leader election is worth trying again first)."""
        lost = self._lost_url
        if lost is None or len(self._urls) < 2:
            return self._urls
        others = tuple(u for u in self._urls if mask_url(u) != lost)
        order = others if round_ == 0 and others else others + tuple(u for u in self._urls if u not in others)
        return tuple(sorted(order, key=lambda u: u in unanswered))

    async def _reconnect(self) -> None:
        loop = asyncio.get_running_loop()
        round_ = 0
        attempts = 0
        next_warning = loop.time() + _STILL_DOWN_EVERY
        unanswered: set[str] = set()
        while not self._closing:
            # a setup stuck on a queue whose leader was on a node that vanished (a cut-off node: the
            # others elect a new leader only after several seconds), or a handshake with a node that
            # does not answer (cut off itself), is given up soon in the first rounds, so the next
            # node or the next round goes ahead as soon as it can
            within = min(self._handshake_timeout, max(_SETUP_BOUND, 5 * self._setup_took) * (round_ + 1))
            for url in self._reconnect_order(round_, frozenset(unanswered)):
                attempts += 1
                try:
                    await self._bring_up(url, within)
                except (ConnectError, ConnectionLostError, ConfigurationError) as exc:
                    if isinstance(exc, ConnectError):
                        unanswered.add(url)
                    else:
                        unanswered.discard(url)
                    self.last_error = str(exc)
                    log.debug("reconnect attempt %d failed: %s", attempts, exc)
                    continue
                except Exception:
                    # the supervisor must outlive any bug below it: log it, back off, go on
                    self.last_error = "unexpected error while reconnecting (see the log)"
                    log.exception("reconnect attempt %d to %s failed unexpectedly", attempts, mask_url(url))
                    continue
                self.reconnects += 1
                downtime = loop.time() - self._lost_at
                self._events.reconnected(attempts, downtime)
                log.info(
                    "reconnected to %s after %.1fs (%d attempt(s))", self.connected_url, downtime, attempts
                )
                return
            if loop.time() >= next_warning:
                next_warning = loop.time() + _STILL_DOWN_EVERY
                log.warning(
                    "still no broker after %.0fs (%d attempts); last error: %s",
                    loop.time() - self._lost_at,
                    attempts,
                    self.last_error,
                )
            await asyncio.sleep(self._backoff.delay(round_))
            round_ += 1
