"""The one inbound path: every delivery is routed exactly once, by :class:`Router`.

A delivery from either consumer (the shared ``TYPE`` queue or this instance's ``TYPE.HOST``) is, in
this order:

1. not a Gear message (or one whose properties do not decode): requeued once, since the broker's copy
   may be intact and this one damaged on the way, and rejected for good when it comes back the same
   (a poison message must not loop);
2. a notice about a hedged call (``gear.session.hedge``): ``running`` and ``claim`` to the calling side,
   ``grant`` and ``deny`` to the serving side;
3. a reply: given to the call or gather waiting for it (:class:`ReplyWaiters`, the RPC), else to the
   reply handler registered for its method (:class:`ReplyHandlers`, for ``reply_to=TYPE`` calls),
   else dropped and counted as a late reply (its call timed out, or it is a duplicate);
4. a request (call, cast, gather): handed to the serving side (:class:`RequestServer`, the
   dispatcher), which owns it from there (run, reply, ack).

The calling side and the serving side never see each other: the router holds both through these
narrow Protocols, and the service wires them up once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

from gear.base.envelope import EnvelopeError, Kind, Meta, Notice, parse_meta
from gear.base.reply import Reply, decode_reply
from gear.errors import ConfigurationError, RemoteError
from gear.link import Delivery, Settle
from gear.serving.handler import check_method_name
from gear.session.probe import PROBE_METHOD
from gear.tracing.emitter import Emitter

__all__ = ("LinkWatch", "ReplyHandler", "ReplyHandlers", "ReplyWaiters", "RequestServer", "Router")

log = logging.getLogger("gear.serving.inbound")

ReplyHandler = Callable[[Reply], Any]
"""``fn(reply)``, async or plain: takes replies to calls made with ``reply_to=TYPE``."""


class ReplyWaiters(Protocol):
    """The calling side, as the router sees it."""

    def take_reply(self, meta: Meta, body: bytes) -> bool:
        """Resolve the call or gather waiting for this reply; False when none waits for it."""
        ...

    def take_notice(self, meta: Meta) -> None:
        """A ``running`` or ``claim`` notice about a hedged call this instance made."""
        ...


class RequestServer(Protocol):
    """The serving side, as the router sees it."""

    def on_request(self, delivery: Delivery, settle: Settle, meta: Meta) -> None:
        """Take one request delivery (settled through ``settle``); from now on it owns settling it."""
        ...

    def take_verdict(self, meta: Meta) -> None:
        """A caller's ``grant`` or ``deny`` for a claim this instance made."""
        ...


class LinkWatch(Protocol):
    """What watches the link for a zombie (:class:`gear.session.probe.LinkProbe`), as the router sees it."""

    def seen(self) -> None:
        """A delivery arrived."""
        ...

    def take(self, request_id: str) -> None:
        """A probe came back."""
        ...


class ReplyHandlers:
    """The ``@svc.reply_handler(method)`` registry and the runs of those handlers."""

    def __init__(self, executor: Callable[[], Executor]) -> None:
        self._executor = executor
        self._funcs: dict[str, ReplyHandler] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __bool__(self) -> bool:
        return bool(self._funcs)

    def register(self, name: str, func: ReplyHandler) -> None:
        """Register ``func`` for replies to ``name``.

        Raises:
            ConfigurationError: a bad name or a duplicate.
        """
        check_method_name(name)
        if name in self._funcs:
            raise ConfigurationError(f"a reply handler for {name!r} is already registered")
        self._funcs[name] = func

    def take(self, meta: Meta, body: bytes) -> bool:
        """Start the handler registered for this reply's method; False when there is none."""
        func = self._funcs.get(meta.method)
        if func is None:
            return False
        try:
            reply = Reply(meta.sender, decode_reply(meta.ok, body), None, meta.request_id, meta.method)
        except RemoteError as err:
            reply = Reply(meta.sender, None, err, meta.request_id, meta.method)
        task = asyncio.ensure_future(self._run(func, reply))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, func: ReplyHandler, reply: Reply) -> None:
        try:
            if inspect.iscoroutinefunction(func):
                await func(reply)
            else:
                await asyncio.get_running_loop().run_in_executor(self._executor(), func, reply)
        except Exception:
            log.exception("reply handler for %r failed", reply.method)

    async def drain(self, limit: float) -> bool:
        """Wait until no reply handler runs; False if ``limit`` seconds ran out first."""
        try:
            async with asyncio.timeout(limit):
                while self._tasks:
                    await asyncio.wait(list(self._tasks))
        except TimeoutError:
            return False
        return True


class Router:
    """Routes each delivery once: see the module docstring."""

    def __init__(
        self,
        *,
        calls: ReplyWaiters,
        replies: ReplyHandlers,
        server: RequestServer,
        events: Emitter,
        watch: LinkWatch | None = None,
    ) -> None:
        self._watch = watch
        self._calls = calls
        self._replies = replies
        self._server = server
        self._events = events
        self.late_replies = 0
        """Replies nobody waited for (their call had timed out, or a duplicate)."""

    def on_delivery(self, delivery: Delivery, settle: Settle) -> None:
        """Entry point from the link, inline: replies are routed and acknowledged here, requests go
        to the server, which settles them when served."""
        p = delivery.properties
        meter = self._events.meter
        if meter is not None:
            meter.consumed(delivery.queue, p.message_type or "other")
        try:
            if delivery.malformed is not None:
                raise EnvelopeError(delivery.malformed)
            meta = parse_meta(p.message_type, p.correlation_id, p.app_id, p.reply_to, p.headers)
        except EnvelopeError as exc:
            if not delivery.redelivered:
                # once more: the broker's copy may be intact and this one damaged on the way
                settle.reject(delivery.delivery_tag, True)
                return
            log.warning("rejecting a non-Gear message from %r for good: %s", delivery.queue, exc)
            if settle.reject(delivery.delivery_tag, False):
                self._events.rejected_foreign(delivery, str(exc))
            return
        watch = self._watch
        if watch is not None:
            if meta.kind is Kind.REPLY and meta.method == PROBE_METHOD:
                watch.take(meta.request_id)
                settle.ack(delivery.delivery_tag)
                return
            watch.seen()
        if meta.notice is not None:
            if meta.notice is Notice.GRANT or meta.notice is Notice.DENY:
                self._server.take_verdict(meta)
            else:
                self._calls.take_notice(meta)
            settle.ack(delivery.delivery_tag)
            return
        if meta.kind is not Kind.REPLY:
            self._server.on_request(delivery, settle, meta)
            return
        if not self._calls.take_reply(meta, delivery.body) and not self._replies.take(meta, delivery.body):
            self.late_replies += 1
            self._events.late_reply(meta.request_id, meta.method, meta.sender, meta.trace_id)
        settle.ack(delivery.delivery_tag)
