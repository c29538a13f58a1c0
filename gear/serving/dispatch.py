"""The serving side: deliveries to handler runs and replies, expiry, duplicates, deadlines, draining.

A request delivery becomes one task owned by Gear (not by the AMQP channel, so a connection loss does
not kill a handler mid-way). The task drops the request if its absolute deadline already passed,
checks the duplicate window (a request id seen before gets the first run's reply, see
``gear.serving.duplicates``), validates the JSON payload against the handler's first parameter's type hint
(pydantic), runs the handler (plain functions in a thread pool, so they never starve heartbeats),
publishes the reply (JSON; errors as ``ErrorBody``) and only then acks the request.

Deadlines bound the run too: an async handler still running at its request's deadline is cancelled
(``gear.base.timers``: one loop timer for all of them), a plain one that had no free thread by then is
not run, and one that finishes after it (it can watch ``gear.cancelled()``) has its result dropped; in
all cases no reply is sent (the caller already gave up) and ``cancelled`` counts it. Handlers
registered with ``cancel_at_deadline=False`` run to the end and reply.

On stop the dispatcher stops accepting (new requests stay unacknowledged, so the broker requeues
them), drains what is running, and finally abandons what is left (cancelled, not acknowledged).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import pydantic_core
from pydantic import ValidationError

from gear.base.context import RequestContext, _current
from gear.base.deadline import Deadline
from gear.base.envelope import METHOD, STATUS, ErrorBody, Kind, Meta, Notice
from gear.base.reply import validation_errors
from gear.base.timers import DueSet, LoopTimers, loop_time
from gear.errors import ConfigurationError, ConnectionLostError, GearError, PayloadTooLargeError
from gear.link import Delivery, Settle
from gear.serving.duplicates import Answer, DuplicateWindow
from gear.serving.handler import Handler, check_method_name, validate_payload
from gear.session.hedge import Notices, Verdicts, at_risk, notice
from gear.session.publisher import Outgoing, Publisher
from gear.tracing.api import NullTracer, Settlement
from gear.tracing.emitter import Emitter

__all__ = ("RECENT_CASTS", "RECENT_CASTS_KEPT", "Dispatcher")

log = logging.getLogger("gear.serving.dispatch")

RECENT_CASTS = 4096
"""Casts taken lately whose request ids are kept (about 400 kB at most): a copy of one of them (published
again by a caller whose confirm was lost) does not run again, and they are remembered when the link is
lost. At 1,000 casts a second, those of the last 4 s (a dead link is found within 3.75-7.5 s)."""
_REPLY_BUDGET = 1.0
"""Seconds a reply may take to publish at least (its caller's deadline, when later, bounds it)."""
RECENT_CASTS_KEPT = 300.0
"""Seconds the casts taken before a lost link are remembered: RabbitMQ gives back what a cut-off node
held when the cut heals, or once the cluster has declared that node down (45-75 s by default)."""


class Dispatcher:
    """Turns request deliveries into handler runs and replies (the router hands them over)."""

    def __init__(
        self,
        *,
        identity: str,
        publisher: Publisher,
        executor: Callable[[], Executor],
        events: Emitter | None = None,
        window: DuplicateWindow | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
        timers: LoopTimers | None = None,
        notices: Notices | None = None,
    ) -> None:
        self._identity = identity
        self._notices = notices or Notices(publisher)
        self._verdicts = Verdicts()
        """Claims of hedged calls waiting for their caller's verdict (see ``gear.session.hedge``)."""
        self._asking: set[str] = set()
        """The request ids of those claims."""
        self.superseded = 0
        """Hedged calls not run because their caller said another instance runs them (or it gave up)."""
        self._max_bytes = max_message_bytes
        self._publisher = publisher
        self._executor = executor
        self._events = events or Emitter(NullTracer(), identity)
        self.window = window if window is not None else DuplicateWindow()
        self.handlers: dict[str, Handler] = {}
        self.expired = 0
        self.duplicates = 0
        self.cancelled = 0
        """Handler runs that outlived their request's deadline (no reply was sent)."""
        self.held = 0
        """Requests that arrived while stopping and were left unacknowledged (requeued on close)."""
        self._accepting = True
        self._stopping = threading.Event()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._serving: set[asyncio.Task[Any]] = set()
        self._timers = timers or LoopTimers()
        """Cancel async handlers at their request's deadline (one loop timer for all)."""
        self._quiet: DueSet[int, tuple[Meta, Deadline | None]] = DueSet(
            self._timers, loop_time, self._say_running
        )
        """Hedged calls running here that have not said ``running`` yet, due when they should."""
        self._due: DueSet[int, asyncio.Task[Any]] = DueSet(self._timers, loop_time, asyncio.Task.cancel)
        """The tasks of async handlers to cancel at their request's deadline."""
        self._run_keys = itertools.count()
        self._recent_casts: deque[str] = deque(maxlen=RECENT_CASTS)
        """The request ids of the casts taken lately, oldest first (see :meth:`link_lost`)."""
        self._recent_ids: set[str] = set()
        """The same, as a set: a copy of a cast taken lately does not run again."""

    # -- registry ----------------------------------------------------------------------------------

    def register(
        self,
        name: str,
        func: Callable[..., Any],
        window: float | None = None,
        localns: dict[str, Any] | None = None,
        *,
        dedupe: bool = True,
        cancel_at_deadline: bool = True,
        on_error: Callable[[Exception], Exception] | None = None,
    ) -> None:
        """Register ``func`` as the handler of ``name`` (``on_error``: see :attr:`Handler.on_error`).

        Raises:
            ConfigurationError: a bad name, a duplicate, or a bad signature.
        """
        check_method_name(name)
        if name in self.handlers:
            raise ConfigurationError(f"a handler for {name!r} is already registered")
        self.handlers[name] = Handler.build(
            name,
            func,
            window,
            localns,
            dedupe=dedupe,
            cancel_at_deadline=cancel_at_deadline,
            on_error=on_error,
        )

    # -- deliveries --------------------------------------------------------------------------------

    def link_lost(self, now: float) -> int:
        """The link was lost: the casts taken on it lately may come back (their acknowledgement may
        not have reached the broker, or a cut-off node may not have passed it on), so remember them
        for :data:`RECENT_CASTS_KEPT` seconds; a redelivered copy then does not run again on this
        instance. How many were remembered."""
        remembered = 0
        until = now + RECENT_CASTS_KEPT
        for request_id in self._recent_casts:
            if self.window.claim(request_id, until, now):
                self.window.settle(request_id, until, (True, b""))
                remembered += 1
        self._recent_casts.clear()
        self._recent_ids.clear()
        return remembered

    def on_request(self, delivery: Delivery, settle: Settle, meta: Meta) -> None:
        """Take one request (from the router, inline): serve it in a task of its own, which
        acknowledges it once the reply is sent."""
        if not self._accepting:
            # Stopping: not run and not acknowledged, so the broker requeues it when the connection
            # closes (for the next instance of this TYPE, or this one's restart).
            self.held += 1
            return
        self._in_flight += 1
        self._idle.clear()
        task = asyncio.get_running_loop().create_task(self._serve(delivery, settle, meta))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _serve(self, delivery: Delivery, settle: Settle, meta: Meta) -> None:
        task = asyncio.current_task()
        assert task is not None
        settled = False
        try:
            with self._events.server_span(delivery, meta, delivery.properties.headers):
                await self._serve_one(delivery, meta, task)
            settled = True
        except Exception:
            log.exception("serving %r failed", meta.method)
            settled = True
        finally:
            # A run cancelled by a stop that gave up on it is not acknowledged: the broker requeues it.
            if settled and settle.ack(delivery.delivery_tag):
                self._events.settle(delivery, meta, Settlement.ACK)
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _serve_one(self, delivery: Delivery, meta: Meta, task: asyncio.Task[Any]) -> None:
        now = time.time()
        events = self._events
        deadline = None if meta.deadline_ms is None else Deadline.from_unix_ms(meta.deadline_ms, now)
        if deadline is not None and deadline.unix <= now:
            self.expired += 1
            events.deliver(delivery, meta)
            events.expired(delivery, meta)
            return
        wants_reply = meta.kind is not Kind.CAST and meta.reply_to is not None
        handler = self.handlers.get(meta.method)
        if handler is None:
            events.deliver(delivery, meta)
            events.failed("MethodNotFound")
            if wants_reply:
                err = ErrorBody(
                    type="MethodNotFound", message=f"{self._identity} has no handler for {meta.method!r}"
                )
                await self._reply(meta, deadline, False, err.model_dump_json().encode())
            else:
                log.warning("no handler for cast %r from %s; dropped", meta.method, meta.sender)
            return
        expires = _window_expiry(handler, meta, deadline, now) if handler.dedupe else None
        if expires is not None and not self.window.claim(meta.request_id, expires, now):
            await self._serve_repeat(delivery, meta, deadline, expires, wants_reply)
            return
        if meta.kind is Kind.CAST and handler.dedupe and expires is None:
            # a copy: delivered again after a lost link, or published again by a caller whose
            # confirm was lost; taken here already (and run, or running): it does not run again
            again = delivery.redelivered or meta.attempt > 1
            if again and (self.window.holds(meta.request_id, now) or meta.request_id in self._recent_ids):
                self.duplicates += 1
                events.deliver(delivery, meta, duplicate=True)
                return
            if len(self._recent_casts) == RECENT_CASTS:
                self._recent_ids.discard(self._recent_casts[0])
            self._recent_casts.append(meta.request_id)
            self._recent_ids.add(meta.request_id)
        if meta.hedge is not None and wants_reply and not await self._may_run(delivery, meta, deadline, now):
            self.superseded += 1
            events.deliver(delivery, meta, duplicate=True)
            if expires is not None:
                self.window.settle(meta.request_id, expires, None)
            return
        events.deliver(delivery, meta)  # one event per delivery; a repeat is flagged in _serve_repeat
        outcome: Answer | None = None
        running = self._say_running_later(meta, deadline)
        try:
            outcome = await self._run(handler, delivery, meta, deadline, task)
        finally:
            if running is not None:
                self._quiet.discard(running)
            if expires is not None:
                self.window.settle(meta.request_id, expires, outcome)
        if outcome is not None and wants_reply:
            await self._reply(meta, deadline, outcome[0], outcome[1], time.time() - now)

    async def _serve_repeat(
        self, delivery: Delivery, meta: Meta, deadline: Deadline | None, expires: float, wants_reply: bool
    ) -> None:
        """A request id seen before: answer with the first run's reply (waiting for it if needed)."""
        self.duplicates += 1
        self._events.deliver(delivery, meta, duplicate=True)
        if meta.request_id in self._asking:
            # a copy of a request whose first delivery here still waits for its caller's verdict:
            # dropped; if the verdict is no, the caller's next copy asks again
            return
        if meta.hedge is not None and wants_reply and meta.reply_to is not None:
            # a copy (or the late original) of a hedged call this instance runs or ran: no more copies
            self._notices.send(notice(meta, meta.reply_to, Notice.RUNNING), deadline)
        try:
            async with asyncio.timeout(max(0.0, expires - time.time())):
                outcome = await self.window.outcome(meta.request_id)
        except TimeoutError:
            return
        if outcome is not None and wants_reply:
            await self._reply(meta, deadline, outcome[0], outcome[1])

    async def _may_run(self, delivery: Delivery, meta: Meta, deadline: Deadline | None, now: float) -> bool:
        """Whether a hedged call may run here (see ``gear.session.hedge``): a fresh original at once; a
        copy, a redelivery or a late one only once its caller granted it (a copy of a call to ``TYPE`` may
        come through this instance's own queue too)."""
        assert meta.reply_to is not None
        if not at_risk(delivery, meta, now):
            return True
        # redelivered from the shared queue, it may have run on another instance; from this instance's
        # own queue, not (this instance's window would know it), so it asks as a copy does
        again = delivery.redelivered and delivery.queue != self._identity
        claim = Notice.RECLAIM if again else Notice.CLAIM
        self._notices.send(notice(meta, meta.reply_to, claim), deadline)
        self._asking.add(meta.request_id)
        try:
            granted = await self._verdicts.wait(meta.request_id, deadline)
        finally:
            self._asking.discard(meta.request_id)
        if not granted:
            log.debug("call %s (%r) from %s not run here: its caller runs it elsewhere or gave up",
                      meta.request_id, meta.method, meta.sender)  # fmt: skip
        return granted

    def _say_running_later(self, meta: Meta, deadline: Deadline | None) -> int | None:
        """A hedged call that runs for more than a quarter of its ``hedge_after`` says ``running``, so
        its caller sends no copy of a request that is merely slow. Its key in ``_quiet`` (the run
        takes it out when it ends), or None."""
        if meta.hedge is None or meta.reply_to is None or meta.kind is not Kind.CALL:
            return None
        key = next(self._run_keys)
        self._quiet.add(key, asyncio.get_running_loop().time() + meta.hedge_after_ms / 4000, (meta, deadline))
        return key

    def _say_running(self, call: tuple[Meta, Deadline | None]) -> None:
        meta, deadline = call
        assert meta.reply_to is not None
        self._notices.send(notice(meta, meta.reply_to, Notice.RUNNING), deadline)

    def _cancel_at(self, when: float, task: asyncio.Task[Any]) -> int:
        """Cancel ``task`` at loop time ``when`` unless its key is taken out of ``_due`` first."""
        key = next(self._run_keys)
        self._due.add(key, when, task)
        return key

    def take_verdict(self, meta: Meta) -> None:
        """A caller's ``grant`` or ``deny`` for a claim (from the router, inline)."""
        self._verdicts.take(meta)

    async def _run(
        self,
        handler: Handler,
        delivery: Delivery,
        meta: Meta,
        deadline: Deadline | None,
        task: asyncio.Task[Any],
    ) -> Answer | None:
        """Validate the payload and run the handler: its reply, or ``None`` when it outlived its
        deadline (cancelled, or a plain handler that finished late) and no reply is due."""
        try:
            if handler.payload is None:
                args: tuple[Any, ...] = ()
            else:
                args = (validate_payload(handler.payload, delivery.body),)
        except ValidationError as exc:
            self._events.failed("BadPayload")
            details = {"errors": validation_errors(exc)}
            err = ErrorBody(
                type="BadPayload",
                message=f"invalid payload for {meta.method!r}: {exc.error_count()} error(s)",
                details=details,
            )
            return False, err.model_dump_json().encode()
        cancels = handler.cancel_at_deadline and deadline is not None
        ctx = RequestContext(
            meta.request_id,
            meta.method,
            meta.sender,
            deadline,
            meta.trace_id,
            meta.attempt,
            delivery.redelivered,
            handler.cancel_at_deadline,
            self._stopping,
        )
        ctx_token = _current.set(ctx)
        watch: int | None = None
        fired = False
        outcome: Answer | None = None
        try:
            if handler.is_async:
                if cancels:
                    assert deadline is not None
                    watch = self._cancel_at(deadline.at, task)
                try:
                    result = await handler.func(*args)
                finally:
                    # not pending any more: it rang, and cancelled this task (still running then)
                    fired = watch is not None and not self._due.discard(watch)
            else:
                loop = asyncio.get_running_loop()
                run = contextvars.copy_context().run
                result = await loop.run_in_executor(
                    self._executor(), run, _unless_cancelled, handler.func, args
                )
                if result is _SKIPPED:
                    self._on_cancelled(handler, delivery, meta)
                    return None
            body = pydantic_core.to_json(result)
            if len(body) > self._max_bytes:
                too_large = PayloadTooLargeError(f"the result of {meta.method!r}", len(body), self._max_bytes)
                outcome = False, _error_body(too_large)
            else:
                outcome = True, body
        except asyncio.CancelledError:
            if not fired:
                raise  # not ours: a stop that gives up on the handler
        except Exception as exc:
            self._events.failed(exc)
            outcome = False, _error_body(exc if handler.on_error is None else handler.on_error(exc))
        finally:
            _current.reset(ctx_token)
        if fired:
            task.uncancel()  # the cancellation was the deadline's, and it ends here
        if fired or outcome is None or (cancels and deadline is not None and deadline.expired):
            self._on_cancelled(handler, delivery, meta)
            return None
        return outcome

    def _on_cancelled(self, handler: Handler, delivery: Delivery, meta: Meta) -> None:
        self.cancelled += 1
        how = "cancelled" if handler.is_async else "finished"
        log.info("handler %r for %s %s past its deadline; no reply sent", meta.method, meta.sender, how)
        self._events.cancelled(delivery, meta)

    async def _reply(
        self,
        meta: Meta,
        deadline: Deadline | None,
        ok: bool,
        body: bytes,
        handler_seconds: float | None = None,
    ) -> None:
        """Publish the reply to a request, for as long as its caller waits (at least a second)."""
        assert meta.reply_to is not None
        # the caller knows the trace; the status is only spelled out for errors (absent means ok)
        headers: dict[str, Any] = {METHOD: meta.method}
        if not ok:
            headers[STATUS] = "error"
        msg = Outgoing(
            routing_key=meta.reply_to,
            address=meta.reply_to,
            body=body,
            request_id=meta.request_id,
            kind=Kind.REPLY.value,
            headers=headers,
            method=meta.method,
            trace_id=meta.trace_id,
            traced=self._events.traces(meta.trace_id),
        )
        if deadline is None or deadline.remaining() < _REPLY_BUDGET:
            deadline = Deadline.from_timeout(_REPLY_BUDGET)
        try:
            await self._publisher.publish(msg, deadline, policy=self._publisher.reply_policy)
        except GearError as exc:
            # a link outage is logged once by the connector; one line per lost reply would drown it
            level = logging.DEBUG if isinstance(exc, ConnectionLostError) else logging.WARNING
            log.log(level, "reply to %s for %r not delivered: %s", meta.reply_to, meta.method, exc)
            self._events.reply_unroutable(meta)
            return
        self._events.reply_sent(meta, ok, handler_seconds)

    # -- shutdown ----------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests being served right now."""
        return self._in_flight

    def accept(self) -> None:
        """Serve requests (again, after a stop)."""
        self._accepting = True
        self._stopping = threading.Event()

    def stop_accepting(self) -> None:
        """From now on, requests are left unacknowledged instead of served (replies still flow)."""
        self._accepting = False

    async def drain(self, limit: float) -> bool:
        """Wait until no request is being served; False if ``limit`` seconds ran out first."""
        try:
            async with asyncio.timeout(limit):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def abandon(self, limit: float) -> int:
        """Give up on the requests still being served: async handlers are cancelled, plain ones see
        ``gear.cancelled()``; none of them is acknowledged, so the broker requeues them. Waits up to
        ``limit`` seconds for the cancelled tasks; returns how many there were."""
        self._stopping.set()
        tasks = [task for task in self._serving if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=limit)
        return len(tasks)


def _window_expiry(handler: Handler, meta: Meta, deadline: Deadline | None, now: float) -> float | None:
    """Until when (unix seconds) a request id stays in the duplicate window; ``None``: not at all.

    Calls and gathers: their deadline (or the handler's ``idempotency_window``, if longer); casts have
    no deadline and are remembered only with an ``idempotency_window``.
    """
    if meta.kind is Kind.CAST:
        return None if handler.window is None else now + handler.window
    if handler.window is None:
        return None if deadline is None else deadline.unix
    return now + handler.window if deadline is None else max(deadline.unix, now + handler.window)


_SKIPPED = object()


def _unless_cancelled(func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run a plain handler in its worker thread, unless its request was given up while it waited for
    a free thread (then ``_SKIPPED``)."""
    ctx = _current.get()
    if ctx is not None and ctx.cancelled:
        return _SKIPPED
    return func(*args)


def _error_body(exc: BaseException) -> bytes:
    details = getattr(exc, "details", None)
    if not isinstance(details, dict):
        details = {}
    try:
        pydantic_core.to_json(details)
    except pydantic_core.PydanticSerializationError:
        details = {"unserialisable_details": repr(details)[:500]}
    return ErrorBody(type=type(exc).__name__, message=str(exc), details=details).model_dump_json().encode()
