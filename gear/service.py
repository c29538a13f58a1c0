"""``gear.Service``: one service instance (a TYPE on a HOST) that serves handlers and makes calls.

::

    svc = gear.Service("WEB", host="web1", url="amqp://guest:guest@localhost/")

    @svc.handler("status")
    async def status(query: StatusQuery) -> StatusReport: ...

    async with svc:                       # connect, declare, consume
        await svc.rpc.call("REPO.host2", "status", {"verbose": True}, timeout=5)

A process that only *calls* (a CLI, a script) is a Service without handlers: use
:meth:`Service.client`, which picks a unique HOST so replies come back to its own ``TYPE.HOST`` queue,
declares no shared TYPE queue and is not reached by multicasts or broadcasts; ``x-expires`` removes its
queue after it is gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import ValidationError

from gear.base.address import Address
from gear.base.redact import mask_secrets
from gear.base.timers import LoopTimers
from gear.base.topology import Topology
from gear.calling.rpc import RPC
from gear.contract.proxy import make_proxy
from gear.contract.serving import error_check, implementation_of
from gear.errors import ConfigurationError, ConnectionLostError
from gear.link import Link
from gear.metrics.exporters import Exporters
from gear.metrics.health import Readiness
from gear.serving.deadletter import DeadLetters
from gear.serving.dispatch import Dispatcher
from gear.serving.duplicates import DuplicateWindow
from gear.serving.inbound import ReplyHandlers, Router
from gear.session.hedge import Notices
from gear.session.hooks import HookAttr, Hooks
from gear.session.probe import LinkProbe
from gear.session.publisher import Publisher, RepublishPolicy
from gear.session.reconnect import Backoff, Connector, ServiceState
from gear.session.tls import client_context
from gear.settings import Settings
from gear.tracing.api import Tracer
from gear.tracing.emitter import Emitter
from gear.tracing.sampling import TraceSampler

__all__ = ("PING_METHOD", "Service")

PING_METHOD = "gear.ping"
"""Every serving instance answers this method with a description of itself (see ``gear nodes``)."""

log = logging.getLogger("gear.service")

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C")


class Service:
    """One Gear service instance.

    Args:
        type: the service TYPE (``GEAR_TYPE`` if omitted).
        host: this instance's HOST word (``GEAR_HOST``, else the short host name).
        url: one broker URL or a list (a cluster, tried in turn); ``GEAR_URL`` if omitted.
        settings: a full :class:`Settings`; the other arguments override it.
        tracer: where trace events go; default: JSON lines under ``settings.trace`` (``GEAR_TRACE``)
            if set, else off.
        serve: declare and consume the shared TYPE queue and the multicast/broadcast bindings.
            Default: True when a handler or reply handler is registered at start.
        **overrides: any other :class:`Settings` field (``timeout=2``, ``prefetch=16``...).

    Raises:
        ConfigurationError: invalid TYPE, HOST, URL or settings (before any I/O).
    """

    # the service's events: see gear.session.hooks for when each is called and how
    on_ready: HookAttr[[]] = HookAttr()
    """``fn()``: a link is up, topology declared, consumers running (start, reconnect, failback)."""
    on_lost: HookAttr[[str]] = HookAttr()
    """``fn(reason)``: the link was lost; reconnecting starts."""
    on_blocked: HookAttr[[str]] = HookAttr()
    """``fn(reason)``: the broker blocks publishing (memory or disk alarm)."""
    on_unblocked: HookAttr[[]] = HookAttr()
    """``fn()``: the broker unblocks publishing."""
    on_undeliverable: HookAttr[[str, str, Any]] = HookAttr()
    """``fn(address, method, payload)``: a cast was returned for its whole retry budget."""

    def __init__(
        self,
        type: str | None = None,
        host: str | None = None,
        *,
        url: str | Sequence[str] | None = None,
        settings: Settings | None = None,
        tracer: Tracer | None = None,
        serve: bool | None = None,
        **overrides: Any,
    ) -> None:
        self.hooks = Hooks()
        """The slots behind the ``on_*`` hooks (see :mod:`gear.session.hooks`)."""
        values: dict[str, Any] = {}
        if type is not None:
            values["type"] = type
        if host is not None:
            values["host"] = host
        if url is not None:
            values["url"] = url if isinstance(url, str) else tuple(url)
        values.update(overrides)
        try:
            if settings is None:
                self.settings = Settings(**values)
            elif not values:
                self.settings = settings  # frozen and validated: as it is (reading the sources costs ~20 ms)
            else:
                self.settings = Settings(**{**settings.model_dump(), **values})
        except ValidationError as exc:
            raise ConfigurationError(Settings.explain(exc)) from None
        except ValueError as exc:
            raise ConfigurationError(mask_secrets(str(exc))) from None
        if self.settings.type is None:
            raise ConfigurationError("a service needs a TYPE: Service('WEB') or GEAR_TYPE=WEB")
        self.type: str = self.settings.type
        self.host: str = self.settings.host
        try:
            self.address = Address.instance(self.type, self.host)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc
        self.identity = self.address.routing_key
        self._serve = serve
        self._own_tracer = tracer is None
        if tracer is None:
            from gear.tracing.tracer import tracer_from_env

            tracer = tracer_from_env(
                self.type,
                self.host,
                f"{self.identity}.{os.getpid()}",
                directory=self.settings.trace,
                sample_rate=self.settings.trace_sample,
            )
        self._tracer: Tracer = tracer
        s = self.settings
        events = Emitter(self._tracer, self.identity, s.exchange, sampler=TraceSampler(s.trace_sample))
        timers = LoopTimers()  # the deadlines of calls, confirms and handlers: one loop timer for all
        self._connector = Connector(
            s.url,
            name=f"gear {self.identity} pid {os.getpid()}",
            heartbeat=s.heartbeat,
            handshake_timeout=s.handshake_timeout,
            prefetch=s.prefetch,
            backoff=Backoff(initial=s.reconnect_initial, maximum=s.reconnect_max),
            connect_wait=s.connect_wait,
            set_up=self._set_up_link,
            events=events,
            hooks=self.hooks,
            spread_key=self.identity if s.spread_urls else "",
            ssl_context=client_context(s),
            failback_every=s.failback_interval,
            retire_grace=s.drain_timeout,
            busy_poll=s.busy_poll,
            timers=timers,
            when_lost=self._link_lost,
        )
        republish = RepublishPolicy(initial=s.republish_initial, maximum=s.republish_max)
        self._publisher = Publisher(
            self._connector, exchange=s.exchange, app_id=self.identity, policy=republish, events=events
        )
        self._executor: ThreadPoolExecutor | None = None
        notices = Notices(self._publisher)
        self._dispatcher = Dispatcher(
            identity=self.identity,
            publisher=self._publisher,
            executor=self._get_executor,
            events=events,
            window=DuplicateWindow(s.duplicate_window_entries, s.duplicate_window_bytes),
            max_message_bytes=s.max_message_bytes,
            timers=timers,
            notices=notices,
        )
        self.rpc = RPC(
            identity=self.identity,
            publisher=self._publisher,
            default_timeout=s.timeout,
            cast_retry_budget=s.cast_retry_budget,
            events=events,
            hooks=self.hooks,
            max_message_bytes=s.max_message_bytes,
            call_policy=dataclasses.replace(republish, give_up_after=s.unroutable_after),
            timers=timers,
            hedge_after=s.hedge_after,
            notices=notices,
            hedge_shared=s.hedge_shared,
        )
        self._dead_letters = DeadLetters(self.identity, self._publisher, s.delivery_limit)
        self._reply_handlers = ReplyHandlers(self._get_executor)
        self._probe = LinkProbe(
            self._connector,
            self._publisher,
            self.identity,
            quiet=s.probe_quiet,
            timeout=s.probe_timeout,
            longest_quiet=s.probe_longest_quiet,
            prefetch=s.prefetch,
        )
        self._publisher.on_refused = self._probe.suspect
        self._router = Router(
            calls=self.rpc,
            replies=self._reply_handlers,
            server=self._dispatcher,
            events=events,
            watch=self._probe,
        )
        self._links = 0
        """Links set up so far: each consumes its instance queue with a higher ``x-priority``."""
        self._precedence_until = 0.0
        """Until this monotonic time, a new link consumes the shared queue with ``x-priority`` 1."""
        self._demotion: asyncio.Task[None] | None = None
        self._topology: Topology | None = None
        self._started = False
        self._started_at = 0.0
        self._stopping = False
        self._stop_requested = False
        """SIGTERM/SIGINT came (``run_forever``): not ready from that moment, before the drain starts."""
        self._draining = False
        """True while :meth:`stop` waits for handlers (no TYPE consumer, replies still received)."""
        self._stop_event = asyncio.Event()
        self._events = events
        self._exporters: Exporters | None = None
        self._contracts: list[Any] = []

    @classmethod
    def client(
        cls, type: str = "CLI", *, url: str | Sequence[str] | None = None, **overrides: Any
    ) -> Service:
        """A calling-only instance with a unique HOST (``cli-<pid>-<random>``) and a short-lived queue.

        Raises:
            ConfigurationError: invalid TYPE, URL or settings.
        """
        overrides.setdefault("instance_queue_ttl", 60.0)
        host = f"cli-{os.getpid()}-{os.urandom(4).hex()}"
        return cls(type, host, url=url, serve=False, **overrides)

    # -- registration ------------------------------------------------------------------------------

    def handler(
        self,
        name: str,
        *,
        idempotency_window: float | None = None,
        dedupe: bool = True,
        cancel_at_deadline: bool = True,
    ) -> Callable[[F], F]:
        """Register a handler for method ``name``: an async or plain function.

        The first parameter's type hint (a pydantic model or plain types) validates the JSON payload;
        a missing hint accepts any JSON. Plain functions run in a thread pool (they may make nested
        calls through ``svc.rpc.sync``). The return value is sent back as JSON.

        Args:
            name: the method name callers use.
            idempotency_window: seconds a request id is remembered after it was first seen; needed
                for casts (they have no deadline), optional for calls (remembered until their deadline
                anyway, or for this long if it is longer).
            dedupe: a call (or gather) whose request id this instance saw before its deadline does
                not run again: it gets the first run's reply, waiting for it if that run is still in
                progress. ``False`` runs every delivery.
            cancel_at_deadline: an async handler still running at its request's deadline is
                cancelled; a plain one sees ``gear.cancelled()`` turn True and its result is dropped;
                no reply is sent either way. ``False`` lets the handler finish and reply late.

        Raises:
            ConfigurationError: a bad name, a duplicate, or a handler with more than one required
                parameter.
        """

        def register(func: F) -> F:
            # the defining scope's names, so hints on models declared inside a function resolve
            localns = dict(sys._getframe(1).f_locals)
            self._dispatcher.register(
                name, func, idempotency_window, localns, dedupe=dedupe, cancel_at_deadline=cancel_at_deadline
            )
            return func

        return register

    def reply_handler(self, name: str) -> Callable[[F], F]:
        """Register ``fn(reply: gear.Reply)`` for replies to ``name`` sent with ``reply_to=TYPE``.

        Raises:
            ConfigurationError: a bad name or a duplicate.
        """

        def register(func: F) -> F:
            self._reply_handlers.register(name, func)
            return func

        return register

    # -- contracts ---------------------------------------------------------------------------------

    def implement(self, contract: Callable[..., Any], implementation: object) -> None:
        """Serve ``contract`` (a :class:`gear.Contract`): each of its methods becomes a handler, the
        ``implementation``'s method of the same name (async or plain, as for :meth:`handler`).

        Everything is checked before anything is registered: a service never starts with part of a
        contract. Subclass the contract in the implementation's class to have mypy check it too. A
        declared error whose details do not fit its ``details_model`` is not sent: the server logs why
        and the caller gets a ``ContractViolationError``.

        Raises:
            ConfigurationError: not a contract; a method missing, or one whose payload or return
                type differs from the contract's (every such method is named); a method already
                registered.
        """
        found = implementation_of(contract, implementation)
        taken = [method.name for method, _ in found if method.name in self._dispatcher.handlers]
        if taken:
            raise ConfigurationError(f"handlers for {', '.join(map(repr, taken))} are already registered")
        owner = getattr(contract, "__name__", repr(contract))
        for method, func in found:
            self._dispatcher.register(method.name, func, on_error=error_check(owner, method.name))
        self._contracts.append(contract)

    def proxy(self, contract: Callable[..., C], address: str, *, timeout: float | None = None) -> C:
        """A typed proxy for ``contract`` at ``address``::

            repo = svc.proxy(Repo, "REPO.host2")
            found = await repo.get(ItemQuery(key="a"))      # mypy checks the payload and the result

        Calls validate the reply into the declared type and raise ``rpc.call``'s errors (a declared
        error as its own class); one-way methods are casts; on ``TYPE.*`` and ``*.*`` calls go
        through :func:`gear.gather`.

        Args:
            contract: a :class:`gear.Contract` class.
            address: any of the four address forms.
            timeout: seconds for each call (casts: their retry budget); default ``Settings.timeout``.
                Inside a handler a call never outlives the request being served.

        Raises:
            ConfigurationError: not a contract, a bad address or timeout.
        """
        return make_proxy(self.rpc, contract, address, timeout)

    @property
    def contracts(self) -> tuple[type[Any], ...]:
        """The contracts this instance implements (:meth:`implement`), in order."""
        return tuple(self._contracts)

    @property
    def methods(self) -> Mapping[str, Callable[..., Any]]:
        """The registered handlers' functions by method name (read-only)."""
        return MappingProxyType({name: h.func for name, h in self._dispatcher.handlers.items()})

    # -- state -------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a link is open with topology declared and consumers running."""
        link = self._connector.link
        return self._connector.ready.is_set() and link is not None and link.is_open

    @property
    def state(self) -> ServiceState:
        """``connecting``, ``ready``, ``blocked``, ``reconnecting`` or ``stopped``."""
        return self._connector.state

    def health(self) -> dict[str, Any]:
        """A JSON-able summary: state, broker, reconnects, last error, work in flight, counters."""
        return {
            "instance": self.identity,
            **self._connector.health(),
            "calls_in_flight": self.rpc.in_flight,
            "handlers_in_flight": self._dispatcher.in_flight,
            "stats": self.stats,
            "draining": self._draining,
        }

    def readiness(self) -> Readiness:
        """Whether this instance takes work (``/readyz``): a link is open, the topology declared, every
        consumer it needs attached, and it is not stopping or draining (a SIGTERM to
        :meth:`run_forever` makes it unready at once)."""
        reasons: list[str] = []
        if not self._started:
            reasons.append("not started")
        if self._stop_requested or self._stopping:
            reasons.append("draining" if self._draining else "stopping")
        link = self._connector.link
        if not self.connected or link is None:
            reasons.append(f"link {self.state.value}")
        elif not self._stopping:
            topology = self.topology
            wanted = [topology.host_queue.name]
            if topology.type_queue is not None:
                wanted.append(topology.type_queue.name)
            attached = link.consuming
            reasons += [f"consumer of {q!r} not attached" for q in wanted if q not in attached]
        return Readiness(not reasons, tuple(reasons))

    @property
    def metrics_port(self) -> int | None:
        """The port ``/metrics``, ``/livez`` and ``/readyz`` are served on while running (None: none)."""
        server = self._exporters.server if self._exporters is not None else None
        return server.port if server is not None else None

    @property
    def blocked(self) -> bool:
        """True while the broker blocks this connection (publishes wait)."""
        return self._connector.blocked_reason is not None

    @property
    def topology(self) -> Topology:
        """The topology this instance declares."""
        if self._topology is None:
            return self._make_topology()
        return self._topology

    @property
    def stats(self) -> dict[str, int]:
        """Counters: late replies, returns, republishes, expired, cancelled and duplicate requests,
        duplicate-window evictions and entries held, requests left for requeue at stop, reconnects, and (with
        ``quorum``) dead letters this instance was told of and error replies it sent for them; probes
        sent and zombie links found (``probe_quiet``); copies of silent calls sent and hedged requests not run
        here because their caller runs them elsewhere (``hedge_after``)."""
        return {
            "late_replies": self._router.late_replies,
            "returns": self._publisher.returns,
            "republishes": self._publisher.republishes,
            "expired": self._dispatcher.expired,
            "cancelled": self._dispatcher.cancelled,
            "duplicates": self._dispatcher.duplicates,
            "duplicate_window_evicted": self._dispatcher.window.evicted,
            "duplicate_window": len(self._dispatcher.window),
            "held_at_stop": self._dispatcher.held,
            "nacks": self._publisher.nacks,
            "reconnects": self._connector.reconnects,
            "failbacks": self._connector.failbacks,
            "calls_in_flight": self.rpc.in_flight,
            "handlers_in_flight": self._dispatcher.in_flight,
            "dead_letters": self._dead_letters.seen,
            "dead_letter_replies": self._dead_letters.replies,
            "probes": self._probe.sent,
            "zombies": self._probe.zombies,
            "copies": self.rpc.copies,
            "superseded": self._dispatcher.superseded,
        }

    def _make_topology(self) -> Topology:
        serve = self._serve
        if serve is None:
            serve = bool(self._dispatcher.handlers or self._reply_handlers)
        s = self.settings
        return Topology.for_service(
            self.type,
            self.host,
            exchange=s.exchange,
            quorum=s.quorum,
            instance_queue_ttl=s.instance_queue_ttl,
            serve=serve,
            delivery_limit=s.delivery_limit,
            consumer_disconnected_timeout=s.consumer_disconnected_timeout,
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (trying every URL with backoff), declare the topology and start consuming.

        Raises:
            ConnectError: no broker reachable within ``connect_wait`` (or handshake timeouts).
            ConfigurationError: the broker refused the topology.
            RuntimeError: already started.
        """
        if self._started:
            raise RuntimeError(f"{self.identity} is already started")
        self._topology = self._make_topology()
        if self._topology.type_queue is not None and PING_METHOD not in self._dispatcher.handlers:
            self._dispatcher.register(PING_METHOD, self._ping)
        s = self.settings
        self._exporters = Exporters.start(
            self, self._events, port=s.metrics_port, bind=s.metrics_bind, exchange=s.exchange
        )
        self._started_at = time.time()
        self._started = True
        self._stopping = False
        self._stop_requested = False
        self._dispatcher.accept()
        self.rpc.loop = asyncio.get_running_loop()
        try:
            await self._connector.start()
            self._probe.start()
        except BaseException:
            self._started = False
            self.rpc.loop = None
            await self._connector.close()
            await self._close_exporters()
            raise
        log.info("%s started", self.identity)

    async def stop(self) -> None:
        """Graceful stop that drains.

        1. Stop taking requests: the shared TYPE consumer is cancelled (the broker gives new requests
           to the other instances) and requests still arriving on this instance's own queue are left
           unacknowledged (the broker requeues them when the connection closes).
        2. Keep receiving replies while the handlers in flight finish, nested calls included, for up
           to ``drain_timeout`` seconds. (Requests left alone count against the ``prefetch`` of the
           instance queue: past ``prefetch`` of them, replies for this instance wait behind them.)
        3. Give up on what is still running (async handlers are cancelled, plain ones see
           ``gear.cancelled()``; their requests are not acknowledged, so they are requeued), fail calls
           still waiting with ``ConnectionLostError``, close the connection.
        """
        if not self._started or self._stopping:
            return
        self._stopping = True
        self._dispatcher.stop_accepting()
        link = self._connector.link
        type_queue = self.topology.type_queue
        if link is not None and type_queue is not None:
            await link.stop_consuming(type_queue.name)
        self._draining = True
        give_up = time.monotonic() + self.settings.drain_timeout
        drained = await self._dispatcher.drain(self.settings.drain_timeout)
        drained = await self._reply_handlers.drain(max(0.0, give_up - time.monotonic())) and drained
        if not drained:
            left = await self._dispatcher.abandon(limit=1.0)
            log.warning(
                "%s: %d handler(s) still running after drain_timeout (%gs); cancelled, their "
                "requests go back to the queue",
                self.identity,
                left,
                self.settings.drain_timeout,
            )
        link = self._connector.link
        if link is not None:
            await link.stop_consuming()
        self.rpc.fail_all(ConnectionLostError(f"{self.identity} stopped"))
        await self._probe.stop()
        if self._demotion is not None:
            self._demotion.cancel()
            self._demotion = None
        await self._connector.close()
        self.rpc.loop = None
        self._draining = False
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._started = False
        self._stop_event.set()
        await self._close_exporters()
        if self._own_tracer:
            self._tracer.close()
        log.info("%s stopped", self.identity)

    async def run_forever(self) -> None:
        """Start, serve until SIGINT/SIGTERM or :meth:`stop`, then stop gracefully (``gear serve``).

        Raises:
            ConnectError: as :meth:`start`.
        """
        await self.start()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self._request_stop)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        try:
            await self._stop_event.wait()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self.stop()

    def _request_stop(self) -> None:
        """SIGTERM/SIGINT: unready now (an orchestrator stops sending work), then stop and drain."""
        self._stop_requested = True
        self._stop_event.set()

    async def _close_exporters(self) -> None:
        exporters, self._exporters = self._exporters, None
        if exporters is not None:
            await exporters.close()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return f"<gear.Service {self.identity} connected={self.connected}>"

    # -- internals ---------------------------------------------------------------------------------

    async def _ping(self, _: Any = None) -> dict[str, Any]:
        """The built-in ``gear.ping``: who and how this instance is (``gear nodes`` shows it)."""
        return {
            "instance": self.identity,
            "type": self.type,
            "host": self.host,
            "pid": os.getpid(),
            "uptime_s": round(time.time() - self._started_at, 3),
            "methods": sorted(m for m in self._dispatcher.handlers if m != PING_METHOD),
            "handlers_in_flight": self._dispatcher.in_flight,
            "duplicate_window": len(self._dispatcher.window),
            "reconnects": self._connector.reconnects,
            "failbacks": self._connector.failbacks,
            "state": self._connector.state.value,
            "broker": self._connector.connected_url,
            "last_error": self._connector.last_error,
        }

    async def _set_up_link(self, link: Link, step_done: Callable[[], None]) -> None:
        topology = (self._topology or self._make_topology()).for_broker(link.server_properties)
        await link.apply(topology, step_done)
        # the consumes go out together (one round trip; the declarations they need are answered)
        consumes = []
        ahead = 0.0
        type_queue = topology.type_queue
        if type_queue is not None and not self._stopping:
            # after a silent loss the old consumer may still be registered (a cut-off node): this one
            # goes first for a while, so the old one gets nothing while this one has room
            ahead = self._precedence_until - time.monotonic()
            consumes.append(
                link.consume(
                    "type", type_queue.name, self._router.on_delivery, priority=1 if ahead > 0 else None
                )
            )
        notify = topology.dead_letter_notify
        if notify is not None:
            consumes.append(link.consume("host", notify.name, self._dead_letters.on_delivery))
        # Each new link consumes the instance queue with a higher priority than the one before: a
        # consumer left behind on a node that was cut off stays registered until the cluster declares
        # that node down (net_tick_timeout, about a minute), and with the same priority it would get
        # every other request meanwhile, each lost until then; with a lower one it gets none while
        # this consumer has room (the queue is this instance's alone, so nobody else is outranked).
        self._links += 1
        consumes.append(
            link.consume("host", topology.host_queue.name, self._router.on_delivery, priority=self._links)
        )
        await asyncio.gather(*consumes)
        step_done()
        if type_queue is not None and ahead > 0:
            self._demote_later(link, type_queue.name, ahead)

    def _link_lost(self, silent: bool) -> None:
        """The link was lost: the casts taken on it may be delivered again (see
        :meth:`gear.serving.dispatch.Dispatcher.link_lost`); after a ``silent`` loss (the broker may keep the
        old consumers for a while) the next link's shared consumer goes first for
        ``type_precedence_after_loss`` seconds."""
        self._dispatcher.link_lost(time.time())
        if silent and self.settings.type_precedence_after_loss > 0:
            self._precedence_until = time.monotonic() + self.settings.type_precedence_after_loss

    def _demote_later(self, link: Link, queue: str, after: float) -> None:
        """In ``after`` seconds, consume ``queue`` on ``link`` again without precedence."""
        if self._demotion is not None:
            self._demotion.cancel()

        async def demote() -> None:
            await asyncio.sleep(after)
            if link is not self._connector.link or self._stopping or not link.is_open:
                return
            try:
                await link.stop_consuming(queue)
                if not self._stopping:
                    await link.consume("type", queue, self._router.on_delivery)
            except ConnectionLostError as exc:
                log.debug("consuming %r again without precedence failed: %s", queue, exc)

        self._demotion = asyncio.create_task(demote())

    def _get_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self.settings.handler_threads, thread_name_prefix=f"gear-{self.identity}"
            )
        return self._executor
