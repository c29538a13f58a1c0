"""Finding a zombie link: connected, heartbeats flowing, yet the instance's queues deliver nothing.

Theory of operation
-------------------
A RabbitMQ node whose data disk fails does not crash: its quorum write-ahead log dies, yet its
listener, its connections and its heartbeats stay up, and what the queues hand to consumers on it goes
nowhere. A cut-off node looks the same for a while. The heartbeat watchdog (``gear.link``) cannot see
this; only an end-to-end check can: a message published to this instance's own ``TYPE.HOST`` queue
must come back through its own consumer.

The check runs only when the link has been *quiet*: no delivery for ``quiet`` seconds, and fewer
requests still being handled than ``prefetch`` (slow handlers holding every delivery the consumer is
allowed would keep a probe from coming back, and dropping the link would run them again). A busy
instance is proven alive by its deliveries and never probes. A quiet one publishes one small probe
(kind ``gear.reply``, method :data:`PROBE_METHOD`, expiring with its timeout) to its own routing key;
the router hands it back here. Back in time: the link works, and the next probe waits twice as long
(up to ``longest_quiet``), so an idle instance costs one message per ``longest_quiet`` seconds. In time
means within ``timeout`` seconds, or four round trips of a broker that answers slowly (a reconnect
storm: see :mod:`gear.session.cadence`); each wait is jittered, so instances that reconnected together do
not probe together. Not back (or not confirmed) in time: the link is declared dead
(:meth:`gear.session.reconnect.Connector.lose`), which reconnects to another node (the failed one last) and
makes the broker return what the old consumers held. Any real delivery starts the quiet count and the
interval afresh. While the broker blocks publishing (a resource alarm) no probe is sent: a blocked
publish proves nothing about the queues.

A publish the broker refuses with ``403``/``404`` on this link (what a node whose data disk died answers
every publish, while it may still deliver) makes the probe check the link at once, busy or not
(:meth:`LinkProbe.suspect`): refused too, the link is left; confirmed, it is kept.

A probe that is late (not back, or not confirmed, in time) is sent again at once with twice as long,
and only a second late one is the verdict (a broker busy with thousands of reconnects is slow, not a
zombie; a refusal is a verdict at once). So a zombie is found within ``quiet + 3 * timeout`` seconds
of its last delivery for an instance that had traffic, and within ``longest_quiet + 3 * timeout`` for
one that had been idle for long. The probe sent again is *watched*: the link's silence watchdog
(``gear.link``) waits for its confirm as for a call's, so a link from which nothing at all comes any
more (a node cut off: no heartbeat either) is dropped once it has been silent for ``dead_after_busy``
(3.75 s with the default heartbeat), without waiting out the second probe; a slow broker still sends
heartbeats and gets the whole second wait.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time

from gear.base.deadline import Deadline
from gear.base.envelope import METHOD, Kind
from gear.errors import ConnectionLostError, GearError, OutcomeUnknownError, UnroutableError
from gear.session.cadence import ProbeCadence
from gear.session.publisher import Outgoing, Publisher, RepublishPolicy
from gear.session.reconnect import Connector

__all__ = ("PROBE_METHOD", "LinkProbe")

log = logging.getLogger("gear.session.probe")

PROBE_METHOD = "gear.probe"
"""The method of the probe messages an instance sends to itself."""
_NO_RETRY = RepublishPolicy(retry=False)


class LinkProbe:
    """Checks, when the link is quiet, that a message through this instance's own queue comes back.

    Args:
        connector: the instance's connector (its link, and :meth:`~Connector.lose` for a zombie).
        publisher: publishes the probe.
        identity: the instance's ``TYPE.HOST`` (the probe's routing key).
        quiet: seconds without a delivery before the first probe (0: never probe).
        timeout: seconds a probe has to come back (at least; see :mod:`gear.session.cadence`).
        longest_quiet: the longest wait between probes of a link that stays quiet.
        prefetch: deliveries a consumer may hold unsettled (no probe while that many are).
    """

    def __init__(
        self,
        connector: Connector,
        publisher: Publisher,
        identity: str,
        *,
        quiet: float,
        timeout: float,
        longest_quiet: float,
        prefetch: int = 1,
    ) -> None:
        self._prefetch = prefetch
        self._connector = connector
        self._publisher = publisher
        self._identity = identity
        self._quiet = quiet
        self._cadence = ProbeCadence(quiet, longest_quiet, timeout)
        self._last = 0.0
        self._link: object = None
        """The link the cadence's round trip was last seeded for."""
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._suspected: object = None
        """A link a publish on which the broker refused as a failing node does (see :meth:`suspect`)."""
        self._wake = asyncio.Event()
        self.sent = 0
        """Probes published."""
        self.zombies = 0
        """Links this probe declared dead."""

    # -- from the router -------------------------------------------------------------------------------

    def seen(self) -> None:
        """A delivery arrived: the link is alive; the next probe waits ``quiet`` seconds again."""
        self._last = time.monotonic()
        self._cadence.interval = self._quiet

    def take(self, request_id: str) -> None:
        """A probe came back (late ones are dropped)."""
        waiter = self._waiting.pop(request_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def suspect(self, link: object) -> None:
        """The broker refused a publish on ``link`` with ``403``/``404`` (what a node whose data disk
        died answers every publish): probe it now, busy or not. Only a refusal of the probe too is a
        verdict (a probe that a busy link could not hand back proves nothing)."""
        if self._task is not None and self._suspected is None:
            self._suspected = link
            self._wake.set()

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start probing (nothing when ``quiet`` is 0)."""
        if self._quiet > 0 and self._task is None:
            self._last = time.monotonic()
            self._task = asyncio.create_task(self._run(), name=f"gear probe {self._identity}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        connector = self._connector
        cadence = self._cadence
        while True:
            wait = cadence.wait(random.random())  # instances that reconnected together spread out
            try:
                async with asyncio.timeout(max(0.05, self._last + wait - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            suspected, self._suspected = self._suspected, None
            if suspected is not None:
                await self._check_refusals(suspected)
                continue
            link = connector.link
            if time.monotonic() - self._last < wait:
                continue  # a delivery came meanwhile
            if link is None or not link.is_open or not connector.ready.is_set() or connector.blocked_reason:
                self._last = time.monotonic()  # reconnecting or blocked: start counting afresh
                continue
            if link.unsettled >= self._prefetch:
                # handlers at work may hold every delivery the consumer may have (prefetch): a probe
                # could not come back, and a link dropped for it would run them again elsewhere
                self._last = time.monotonic()
                continue
            if link is not self._link:
                self._link = link  # a new link: the broker's pace as its setup measured it
                cadence.link_set_up(connector.setup_took)
            try:
                works, why = await self._verdict(link)
            except Exception:  # the supervisor of a link must outlive any bug here
                log.exception("probing the link of %s failed unexpectedly", self._identity)
                works, why = None, ""
            if works is False and connector.link is link and connector.blocked_reason is None:
                self.zombies += 1
                connector.lose(
                    link,
                    f"a message to its own queue {self._identity!r} {why}: the node no longer "
                    "delivers (a zombie)",
                )
            self._last = time.monotonic()

    async def _check_refusals(self, link: object) -> None:
        """Probe a suspected link once: refused too, it is a zombie; anything else proves nothing."""
        connector = self._connector
        if link is not connector.link or connector.blocked_reason:
            return  # already replaced, or blocked (a blocked publish proves nothing)
        try:
            works, why, late = await self._probe(wait_back=False)
        except Exception:  # the supervisor of a link must outlive any bug here
            log.exception("probing the link of %s failed unexpectedly", self._identity)
            return
        current = connector.link
        if (
            works is False
            and not late
            and current is not None
            and current is link
            and not connector.blocked_reason
        ):
            self.zombies += 1
            connector.lose(
                current,
                f"a message to its own queue {self._identity!r} {why}: the node refuses what it is sent",
            )

    async def _verdict(self, link: object) -> tuple[bool | None, str]:
        """Probe until there is a verdict: a late probe is sent again at once with twice as long (a
        broker busy with thousands of reconnects is slow, not a zombie); a second late one is the
        verdict. True: the link works; False: a zombie (with why); None: no verdict."""
        while True:
            works, why, late = await self._probe(watched=self._cadence.late > 0)
            if not late or self._connector.link is not link or self._cadence.was_late():
                return works, why

    async def _probe(self, wait_back: bool = True, watched: bool = False) -> tuple[bool | None, str, bool]:
        """One probe: True back in time, False not (a zombie; with why), None no verdict (no link,
        blocked); and whether it was late (not back or not confirmed in time) rather than refused.
        ``wait_back`` false: True once the broker confirmed it, without waiting for it to come back.
        ``watched``: the link's silence watchdog waits for its confirm (the probe after a late one)."""
        loop = asyncio.get_running_loop()
        request_id = f"probe-{os.urandom(6).hex()}"
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting[request_id] = waiter
        timeout = self._cadence.deadline()
        deadline = Deadline.from_timeout(timeout)
        sent = time.monotonic()
        msg = Outgoing(
            routing_key=self._identity,
            address=self._identity,
            body=b"",
            request_id=request_id,
            kind=Kind.REPLY.value,
            headers={METHOD: PROBE_METHOD},
            deadline=deadline,
            method=PROBE_METHOD,
            traced=False,
            watched=watched,  # a first probe has its own deadline; after a late one, silence decides
        )
        self.sent += 1
        try:
            routed = await self._publisher.publish(msg, deadline, policy=_NO_RETRY, verdict_grace=0.0)
            if not routed:
                return None, "", False  # no queue bound: the consumer-cancel path rebuilds the link
            if not wait_back:
                return True, "", False
            async with asyncio.timeout_at(deadline.at):
                await waiter
            self._cadence.came_back(time.monotonic() - sent)
            return True, "", False
        except (ConnectionLostError, UnroutableError):
            return None, "", False  # no link (the reconnect path owns it), or no queue (consumer-cancel)
        except OutcomeUnknownError as exc:
            why, late = f"could not be sent ({exc})", True  # not confirmed in time
        except GearError as exc:
            # nacked, refused (a node whose disk failed refuses writes to the exchange with 403): the
            # node does not work either
            why, late = f"could not be sent ({exc})", False
        except TimeoutError:
            why, late = f"did not come back within {timeout:.3g}s", True
        finally:
            self._waiting.pop(request_id, None)
            if not waiter.done():
                waiter.cancel()
        return (None, "", False) if self._connector.blocked_reason else (False, why, late)
