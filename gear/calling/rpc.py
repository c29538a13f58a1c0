"""The calling side: ``call``, ``cast`` and ``gather``, with deadlines and a pending-reply map.

Each call gets a stable request id and a future in ``_pending``; the router (``gear.serving.inbound``) hands
every reply to :meth:`RPC.take_reply`, which resolves the future matched by its ``correlation_id`` (or
says it matched none, and the router tries the reply handlers). There are no locks around round trips:
many calls share the one publish channel and the one reply queue (``TYPE.HOST``).

Outcomes travel as values and typed errors: the publisher returns whether the request was routed or
raises what went wrong (``UnroutableError``, ``NotConfirmedError``...); a publish that could not finish
before the call's deadline becomes ``CallTimeoutError`` here, as does a reply that does not come.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pydantic_core

from gear.base.address import Address
from gear.base.context import current_request
from gear.base.deadline import Deadline
from gear.base.envelope import (
    DEADLINE,
    HEDGE,
    HEDGE_AFTER,
    METHOD,
    PARENT,
    TRACE,
    Kind,
    Meta,
    Notice,
    new_request_id,
    new_trace_id,
)
from gear.base.limits import seconds
from gear.base.reply import Replies, Reply, ReplyCallback, decode_reply, result_adapter, validate_result
from gear.base.timers import LoopTimers, Timer
from gear.calling.sync import SyncRPC
from gear.errors import (
    BrokerBlockedError,
    CallTimeoutError,
    ConfigurationError,
    ConnectionLostError,
    GearError,
    OutcomeUnknownError,
    PayloadTooLargeError,
    RemoteError,
    UnroutableError,
)
from gear.session.hedge import HEDGE_EVERY, MAX_COPIES, Holder, Notices, Servers, copy_of, notice
from gear.session.hooks import Hooks
from gear.session.publisher import Outgoing, Publisher, RepublishPolicy
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter
from gear.tracing.spans import ClientSpan

__all__ = ("NESTED_MARGIN", "RPC", "ReplyCallback")

log = logging.getLogger("gear.calling.rpc")


_NO_RETRY = RepublishPolicy(retry=False)

T = TypeVar("T")

NESTED_MARGIN = 0.5
"""Seconds (at most 10 % of what is left) a nested call leaves to the handler that makes it: the
handler's error must reach its caller before that caller gives up, through a broker and two event
loops that may pause (a full garbage collection in a large process can take some 300 ms)."""


@dataclass(slots=True, eq=False)
class _Pending:
    future: asyncio.Future[Any]
    address: str
    method: str
    timeout: float
    started: float
    trace_id: str
    replies: list[Reply] | None = None
    expected: int | None = None
    timer: Timer | None = field(default=None)
    """Its one timer: the deadline's, or a hedged call's next copy's (which arms the next, then the
    deadline's)."""
    msg: Outgoing | None = None
    """The request, while its caller may send copies of it (``hedge_after``)."""
    deadline: Deadline | None = None
    holder: Holder | None = None
    """Who runs it, as far as this caller knows (hedged calls only, made at the first notice)."""
    copies: int = 0
    shared: bool = False
    """A call to a shared ``TYPE``: its copies may go straight to an instance that answered lately."""


class RPC:
    """``svc.rpc``: call, cast and gather for one service instance."""

    def __init__(
        self,
        *,
        identity: str,
        publisher: Publisher,
        default_timeout: float,
        cast_retry_budget: float,
        events: Emitter | None = None,
        hooks: Hooks | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
        call_policy: RepublishPolicy | None = None,
        timers: LoopTimers | None = None,
        hedge_after: float = 0.0,
        notices: Notices | None = None,
        hedge_shared: bool = False,
    ) -> None:
        self._identity = identity
        self._hedge_after = hedge_after
        """Seconds a call may stay silent before a copy is sent (0: never; see ``gear.session.hedge``)."""
        self._hedge_shared = hedge_shared
        """Copy calls to a shared ``TYPE`` too (else only ``TYPE.HOST`` calls)."""
        self._notices = notices or Notices(publisher)
        self._servers = Servers()
        self.copies = 0
        """Copies of silent calls sent (``hedge_after``)."""
        self.conflicts = 0
        """Hedged calls that two instances said they ran (a notice came too late to stop a copy)."""
        self._timers = timers or LoopTimers()
        self._call_policy = call_policy
        """How returned requests of calls are republished (``None``: the publisher's default)."""
        self._publisher = publisher
        self._default_timeout = default_timeout
        self._cast_budget = cast_retry_budget
        self._max_bytes = max_message_bytes
        self._events = events or Emitter(NullTracer(), identity)
        self._pending: dict[str, _Pending] = {}
        self._addresses: dict[str, Address] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        """The service's event loop while it runs (what :attr:`sync` submits to)."""
        self._undeliverable = (hooks or Hooks()).undeliverable

    @property
    def sync(self) -> SyncRPC:
        """The blocking facade for plain handlers and other threads: ``svc.rpc.sync.call(...)``."""
        return SyncRPC(self)

    @property
    def default_timeout(self) -> float:
        """The deadline of a call or gather made without ``timeout``, in seconds."""
        return self._default_timeout

    @property
    def cast_retry_budget(self) -> float:
        """How long a cast made without ``retry_budget`` may be republished, in seconds."""
        return self._cast_budget

    # -- helpers -----------------------------------------------------------------------------------

    def _address(self, text: str) -> Address:
        found = self._addresses.get(text)
        if found is None:
            try:
                found = Address.parse(text)
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from None
            if len(self._addresses) < 4096:
                self._addresses[text] = found
        return found

    def _prepare(
        self,
        address: str,
        method: str,
        payload: Any,
        timeout: float | None,
        kind: Kind,
        reply_to: str | None = None,
    ) -> tuple[Address, Outgoing, Deadline, float]:
        """The request to send and its budget: ``(address, message, deadline, seconds left)``.

        A cast's message carries no deadline (it does not expire; ``timeout`` is its retry budget).

        Raises:
            ConfigurationError: a bad address, method, timeout or payload.
            PayloadTooLargeError: the payload is over ``max_message_bytes``.
        """
        addr = self._address(address)
        if not isinstance(method, str) or not method:
            raise ConfigurationError(f"method must be a non-empty string, not {method!r}")
        what = "retry_budget" if kind is Kind.CAST else "timeout"
        budget = self._default_timeout if timeout is None else seconds(timeout, what)
        now = time.monotonic()
        deadline = Deadline.from_timeout(budget, now)
        remaining = budget
        ctx = current_request()
        headers: dict[str, Any] = {METHOD: method}
        if ctx is not None:
            served = ctx.due
            if served is not None:
                # Keep a little of the served request's budget for its own reply: a nested call
                # that times out must leave the handler time to answer before its caller gives up.
                inherited = served.earlier(min(NESTED_MARGIN, 0.1 * max(0.0, served.at - now)))
                if inherited.at < deadline.at:
                    deadline, remaining = inherited, inherited.at - now
            trace_id = ctx.trace_id or new_trace_id()
            headers[PARENT] = ctx.request_id
            parent: str | None = ctx.request_id
        else:
            # with OpenTelemetry, a call made inside an instrumented request joins that request's trace
            trace_id = self._events.current_trace_id() or new_trace_id()
            parent = None
        headers[TRACE] = trace_id
        cast = kind is Kind.CAST
        if not cast:
            headers[DEADLINE] = deadline.unix_ms
        if (
            kind is Kind.CALL
            and self._hedge_after > 0
            and reply_to == self._identity
            and (self._hedge_shared or addr.host is not None)
        ):
            headers[HEDGE] = 0
            headers[HEDGE_AFTER] = int(self._hedge_after * 1000)
        try:
            body = pydantic_core.to_json(payload)
        except pydantic_core.PydanticSerializationError as exc:
            raise ConfigurationError(f"payload is not JSON-serialisable: {exc}") from None
        if len(body) > self._max_bytes:
            what = f"the payload for {method!r} on {address!r}"
            raise PayloadTooLargeError(what, len(body), self._max_bytes)
        msg = Outgoing(
            routing_key=addr.routing_key,
            address=address,
            body=body,
            request_id=new_request_id(),
            kind=kind.value,
            headers=headers,
            reply_to=reply_to,
            deadline=None if cast else deadline,
            persistent=cast,
            method=method,
            trace_id=trace_id,
            parent_id=parent,
            traced=self._events.traces(trace_id),
        )
        return addr, msg, deadline, remaining

    # -- call --------------------------------------------------------------------------------------

    async def call(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
    ) -> Any:
        """Call ``method`` on the instance behind ``address`` and return its result (decoded JSON).

        Args:
            address: ``TYPE.HOST`` (that instance) or ``TYPE`` (any one instance, round-robin).
            method: the remote handler's name.
            payload: JSON-able value or pydantic model.
            timeout: seconds; default ``Settings.timeout``. Inside a handler the deadline is never
                later than the one being served.

        Raises:
            CallTimeoutError: no reply before the deadline (``BrokerBlockedError``, a subclass, when
                the broker blocked this instance's publishing meanwhile: a resource alarm).
            UnroutableError: every attempt was returned until the deadline.
            NotConfirmedError: the broker nacked the request.
            PublishRefusedError: the broker refused this request (e.g. over its size limit).
            PayloadTooLargeError: the payload is over ``max_message_bytes`` (nothing was sent).
            ConnectionLostError: the service is stopping.
            RemoteError: the handler failed (``MethodNotFoundError``, ``BadPayloadError`` or a
                ``RemoteError`` with the remote type name).
            ConfigurationError: a bad address, method, timeout or payload.
        """
        addr, msg, deadline, remaining = self._prepare(
            address, method, payload, timeout, Kind.CALL, self._identity
        )
        if addr.is_fanout:
            raise ConfigurationError(f"{address!r} reaches several instances: use rpc.gather()")
        span = self._events.client_span(msg, address)
        try:
            ok, body = await self._round_trip(msg, addr, address, method, remaining, deadline)
            result = decode_reply(ok, body)
        except Exception as exc:
            span.end(exc)
            raise
        span.end()
        return result

    async def call_as(
        self,
        result_type: type[T],
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
    ) -> T:
        """:meth:`call`, with the result validated into ``result_type`` (a pydantic model, or any
        type pydantic validates); type checkers see that type returned.

        Raises:
            BadResultError: the result does not fit ``result_type``.
            ConfigurationError: pydantic cannot validate into ``result_type`` (before any I/O).
            GearError: as :meth:`call` (``CallTimeoutError``, ``UnroutableError``,
                ``NotConfirmedError``, ``PublishRefusedError``, ``PayloadTooLargeError``,
                ``ConnectionLostError``, ``RemoteError``).
        """
        result_adapter(result_type)  # a type pydantic cannot validate into fails before any I/O
        result = await self.call(address, method, payload, timeout=timeout)
        return cast(T, validate_result(result_type, result, address, method))

    async def call_with_callback(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        callback: ReplyCallback,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        result_type: Any = None,
    ) -> str:
        """Send the request and return its request id as soon as the broker confirmed it; ``callback``
        runs later, once, with the result (validated into ``result_type`` if given) or with the
        exception (``CallTimeoutError``, ``RemoteError``, ``BadResultError``...). It may be a plain
        or an async function.

        Raises:
            GearError: the request was not sent, as :meth:`call` (``UnroutableError``,
                ``NotConfirmedError``, ``PublishRefusedError``, ``PayloadTooLargeError``,
                ``ConnectionLostError``, ``ConfigurationError``).
            CallTimeoutError: the deadline came before the broker confirmed it.
        """
        if result_type is not None:
            result_adapter(result_type)
        addr, msg, deadline, remaining = self._prepare(
            address, method, payload, timeout, Kind.CALL, self._identity
        )
        if addr.is_fanout:
            raise ConfigurationError(f"{address!r} reaches several instances: use rpc.gather()")
        span = self._events.client_span(msg, address)
        try:
            await self._call_back(msg, address, method, remaining, deadline, callback, result_type, span)
        except Exception as exc:
            span.end(exc)
            raise
        return msg.request_id

    async def call_reply_to(
        self,
        reply_to: str,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
    ) -> str:
        """Send the request with its reply addressed to ``reply_to``, a TYPE: the reply goes to that
        TYPE's shared queue, where any instance's ``@svc.reply_handler(method)`` takes it (a
        stateless caller). Returns the request id once the broker confirmed the request.

        Raises:
            GearError: the request was not sent, as :meth:`call` (``UnroutableError``,
                ``NotConfirmedError``, ``PublishRefusedError``, ``PayloadTooLargeError``,
                ``ConnectionLostError``, ``ConfigurationError``).
            CallTimeoutError: the deadline came before the broker confirmed it.
        """
        back = self._address(reply_to).routing_key
        addr, msg, deadline, remaining = self._prepare(address, method, payload, timeout, Kind.CALL, back)
        if addr.is_fanout:
            raise ConfigurationError(f"{address!r} reaches several instances: use rpc.gather()")
        with _span_scope(self._events.client_span(msg, address)):
            await self._send(msg, deadline, address, method, remaining)
        return msg.request_id

    async def _call_back(
        self, msg: Outgoing, address: str, method: str, remaining: float, deadline: Deadline,
        callback: ReplyCallback, result_type: Any, span: ClientSpan,
    ) -> None:  # fmt: skip
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        rid = msg.request_id
        pending = _Pending(fut, address, method, remaining, loop.time(), msg.trace_id or "")
        self._pending[rid] = pending
        try:
            await self._send(msg, deadline, address, method, remaining)
        except BaseException:
            self._pending.pop(rid, None)
            raise
        pending.timer = self._watch(pending, msg, deadline, self._address(address).host is None)
        fut.add_done_callback(lambda f: self._run_callback(callback, f, result_type, address, method, span))

    async def _round_trip(
        self, msg: Outgoing, addr: Address, address: str, method: str, remaining: float, deadline: Deadline
    ) -> tuple[bool, bytes]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        rid = msg.request_id
        pending = _Pending(fut, address, method, remaining, loop.time(), msg.trace_id or "")
        self._pending[rid] = pending
        try:
            try:  # inline rather than through _send: one coroutine less on the hot path
                await self._publisher.publish(msg, deadline, policy=self._call_policy, verdict_grace=0.0)
            except (OutcomeUnknownError, ConnectionLostError) as exc:
                blocked = self._publisher.blocked_since(pending.started)
                error = _unsent(exc, deadline, address, method, remaining, blocked)
                if isinstance(error, CallTimeoutError):
                    self._trace_timeout(rid, pending)
                raise error from None
            if fut.done():
                ok, body = fut.result()
            else:
                # the reply's deadline: a timer (one loop timer for all calls), not a timeout scope
                pending.timer = self._watch(pending, msg, deadline, addr.host is None)
                try:
                    ok, body = await fut  # CallTimeoutError from _expire, which traced it
                finally:
                    self._timers.cancel(pending.timer)
        except UnroutableError as exc:
            self._events.unroutable(msg.request_id, msg.trace_id, msg.method, addr.type or "*", exc.attempts)
            raise
        finally:
            self._pending.pop(rid, None)
        return ok, body

    async def _send(
        self, msg: Outgoing, deadline: Deadline, address: str, method: str, remaining: float
    ) -> None:
        """Publish a request whose caller stops waiting at ``deadline``.

        Raises:
            CallTimeoutError: the deadline came before the broker confirmed it.
            UnroutableError, NotConfirmedError, PublishRefusedError: as :meth:`Publisher.publish`.
            ConnectionLostError: the service is stopping.
        """
        started = asyncio.get_running_loop().time()
        try:
            await self._publisher.publish(msg, deadline, policy=self._call_policy, verdict_grace=0.0)
        except (OutcomeUnknownError, ConnectionLostError) as exc:
            blocked = self._publisher.blocked_since(started)
            raise _unsent(exc, deadline, address, method, remaining, blocked) from None

    def _watch(self, pending: _Pending, msg: Outgoing, deadline: Deadline, shared: bool) -> Timer:
        """A call was sent: its one timer, which expires it at ``deadline`` or, for a hedged call,
        first copies it if it stays silent for ``hedge_after`` (see ``gear.session.hedge``); ``shared``: the
        call goes to a shared ``TYPE``."""
        rid = msg.request_id
        if HEDGE in msg.headers:
            pending.msg, pending.deadline, pending.shared = msg, deadline, shared
            when = asyncio.get_running_loop().time() + self._hedge_after
            if when < deadline.at:
                return self._timers.call_at(when, functools.partial(self._hedge, rid))
        return self._timers.call_at(deadline.at, functools.partial(self._expire, rid))

    def _hedge(self, rid: str) -> None:
        """Send a copy of a call that is still silent, and plan the next one (or the call's deadline)."""
        pending = self._pending.get(rid)
        if pending is None or pending.future.done() or pending.msg is None or pending.deadline is None:
            return
        deadline = pending.deadline
        if (
            (pending.holder is not None and pending.holder.instance is not None)  # runs: no copy, ever
            or pending.copies >= MAX_COPIES
            or deadline.remaining() < HEDGE_EVERY / 2
        ):
            pending.timer = self._timers.call_at(deadline.at, functools.partial(self._expire, rid))
            return
        pending.copies += 1
        self.copies += 1
        log.debug("call %s to %s silent: copy %d", rid, pending.address, pending.copies)
        copy = copy_of(pending.msg, pending.copies)
        if pending.shared and pending.copies % 2 == 0:
            # the TYPE queue may wait for a new leader: every other copy goes to an instance directly
            direct = self._servers.pick(copy.routing_key, pending.copies // 2)
            if direct is not None:
                copy = dataclasses.replace(copy, routing_key=direct)
        self._notices.copy(copy, deadline)
        when = asyncio.get_running_loop().time() + HEDGE_EVERY
        if when < deadline.at:
            pending.timer = self._timers.call_at(when, functools.partial(self._hedge, rid))
        else:
            pending.timer = self._timers.call_at(deadline.at, functools.partial(self._expire, rid))

    def take_notice(self, meta: Meta) -> None:
        """A notice about a hedged call (runs inline in the channel reader): ``running`` stops its
        copies; a ``claim`` is granted to the first instance only, and to none once the call is over; a
        ``reclaim`` (a redelivery) only to the instance already known to run it."""
        pending = self._pending.get(meta.request_id)
        holder: Holder | None = None
        if pending is not None and pending.msg is not None and not pending.future.done():
            holder = pending.holder
            if holder is None:
                holder = pending.holder = Holder()
        if meta.notice is Notice.RUNNING:
            if holder is not None:
                before = holder.conflicts
                holder.running(meta.sender)
                if holder.conflicts > before:
                    self.conflicts += 1
                    log.warning("call %s (%r) runs on %s and %s", meta.request_id, meta.method,
                                holder.instance, meta.sender)  # fmt: skip
        elif meta.notice is Notice.CLAIM or meta.notice is Notice.RECLAIM:
            # a redelivery: the instance that took it first may have run it, its reply lost with its
            # link; while nobody is known to run the call its copies carry it instead
            again = meta.notice is Notice.RECLAIM
            granted = holder is not None and holder.claim(meta.sender, again=again)
            verdict = Notice.GRANT if granted else Notice.DENY
            self._notices.send(notice(meta, meta.sender, verdict), pending.deadline if pending else None)

    def _expire(self, rid: str) -> None:
        pending = self._pending.pop(rid, None)
        if pending is not None and not pending.future.done():
            self._trace_timeout(rid, pending)
            blocked = self._publisher.blocked_since(pending.started)
            error = (
                CallTimeoutError(pending.address, pending.method, pending.timeout)
                if blocked is None
                else BrokerBlockedError(pending.address, pending.method, pending.timeout, blocked)
            )
            pending.future.set_exception(error)
            pending.future.exception()  # retrieved here: a callback may be the only consumer

    def _run_callback(
        self, callback: ReplyCallback, fut: asyncio.Future[Any], result_type: Any, address: str, method: str,
        span: ClientSpan,
    ) -> None:  # fmt: skip
        value: Any
        if fut.cancelled():
            span.end()
            return
        exc = fut.exception()
        if exc is not None:
            value = exc
        else:
            ok, body = fut.result()
            try:
                value = decode_reply(ok, body)
                if result_type is not None:
                    value = validate_result(result_type, value, address, method)
            except GearError as err:
                value = err
        span.end(value if isinstance(value, BaseException) else None)
        try:
            out = callback(value)
            if asyncio.iscoroutine(out):
                task = asyncio.ensure_future(out)
                task.add_done_callback(_log_task_error)
        except Exception:
            log.exception("reply callback %r failed", callback)

    # -- cast --------------------------------------------------------------------------------------

    async def cast(
        self, address: str, method: str, payload: Any = None, *, retry_budget: float | None = None
    ) -> bool:
        """Send without waiting for a result; return once the broker confirmed it.

        The message is persistent and does not expire. If every attempt is returned (no queue bound)
        for ``retry_budget`` seconds (default ``Settings.cast_retry_budget``), ``on_undeliverable`` is
        called with ``(address, method, payload)`` and ``False`` is returned; with no hook set,
        ``UnroutableError`` is raised instead, so nothing is lost silently. The whole cast, confirm
        included, never takes longer than the budget.

        Raises:
            UnroutableError: returned for the whole budget and no ``on_undeliverable`` hook.
            NotConfirmedError: the broker nacked it.
            PublishRefusedError: the broker refused this message (e.g. over its size limit).
            OutcomeUnknownError: sent, but no confirm within the budget: it may have been delivered.
            ConnectionLostError: nothing could be sent within the budget (no connection, or a
                blocked one), or the service is stopping.
            PayloadTooLargeError: the payload is over ``max_message_bytes`` (nothing was sent).
            ConfigurationError: a bad address, method or payload.
        """
        budget = self._cast_budget if retry_budget is None else retry_budget
        _addr, msg, until, _remaining = self._prepare(address, method, payload, budget, Kind.CAST)
        with _span_scope(self._events.client_span(msg, address)):
            try:
                return await self._publisher.publish(msg, until)
            except UnroutableError:
                if not self._undeliverable:
                    raise
                await self._undeliverable.run(address, method, payload)
                return False

    # -- gather ------------------------------------------------------------------------------------

    async def gather(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        expected: int | None = None,
    ) -> Replies:
        """Call every instance behind ``address`` (``TYPE.*`` or ``*.*``) and collect the replies.

        Returns when ``expected`` replies arrived or the timeout ran out, whichever comes first, with
        the replies so far (errors included, as ``Reply.error``). No instance at all gives an empty
        list at once, whose ``routed`` is False (the broker returned the request).

        Raises:
            NotConfirmedError: the broker nacked the request.
            ConnectionLostError: the request could not be sent before the timeout (no connection, or
                a blocked one), or the service is stopping.
            ConfigurationError: a bad address, method, timeout or payload.
        """
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)):
            raise ConfigurationError(f"expected must be a whole number of replies, not {expected!r}")
        _addr, msg, deadline, _remaining = self._prepare(
            address, method, payload, timeout, Kind.GATHER, self._identity
        )
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        pending = _Pending(fut, address, method, 0.0, loop.time(), msg.trace_id or "", [], expected)
        rid = msg.request_id
        self._pending[rid] = pending
        with _span_scope(self._events.client_span(msg, address)):
            try:
                try:
                    routed = await self._publisher.publish(msg, deadline, policy=_NO_RETRY, verdict_grace=0.0)
                except OutcomeUnknownError:
                    return Replies()  # sent, no verdict by the deadline: no time left for replies either
                if not routed:
                    return Replies(routed=False)
                if expected is not None and expected <= 0:
                    return Replies()
                async with asyncio.timeout_at(deadline.at):
                    await fut
            except TimeoutError:
                pass  # the deadline ends a gather: what came so far is its result
            finally:
                self._pending.pop(rid, None)
        return Replies(pending.replies or ())

    # -- replies -----------------------------------------------------------------------------------

    def take_reply(self, meta: Meta, body: bytes) -> bool:
        """Resolve the call or gather waiting for this reply (runs inline in the channel reader);
        False when none waits for it any more."""
        pending = self._pending.get(meta.request_id)
        if pending is None or pending.future.done():
            return False
        if self._events.enabled:
            elapsed = asyncio.get_running_loop().time() - pending.started
            self._events.response(
                meta.request_id, pending.trace_id, meta.method, meta.sender, elapsed, meta.ok
            )
        if pending.replies is None:
            self._pending.pop(meta.request_id, None)
            self._timers.cancel(pending.timer)
            if pending.shared and pending.msg is not None:
                self._servers.seen(pending.msg.routing_key, meta.sender)
            pending.future.set_result((meta.ok, body))
            return True
        try:
            result = decode_reply(meta.ok, body)
            reply = Reply(meta.sender, result, None, meta.request_id, meta.method)
        except RemoteError as err:
            reply = Reply(meta.sender, None, err, meta.request_id, meta.method)
        pending.replies.append(reply)
        if pending.expected is not None and len(pending.replies) >= pending.expected:
            pending.future.set_result(None)
        return True

    def fail_all(self, exc: GearError) -> None:
        """Fail every pending call (the service is stopping)."""
        for rid, pending in list(self._pending.items()):
            self._pending.pop(rid, None)
            self._timers.cancel(pending.timer)
            if not pending.future.done():
                if pending.replies is not None:
                    pending.future.set_result(None)
                else:
                    pending.future.set_exception(exc)
                    pending.future.exception()  # its caller may already have given up

    @property
    def in_flight(self) -> int:
        """Calls and gathers waiting for replies."""
        return len(self._pending)

    def _trace_timeout(self, rid: str, pending: _Pending) -> None:
        self._events.timeout(rid, pending.trace_id, pending.method, pending.address, pending.timeout)


def _unsent(
    exc: OutcomeUnknownError | ConnectionLostError,
    deadline: Deadline,
    address: str,
    method: str,
    remaining: float,
    blocked: str | None = None,
) -> GearError:
    """What a caller sees when its request's publish did not finish: a timeout once the deadline has
    come (sent without a verdict, or never sent; ``BrokerBlockedError`` when the broker ``blocked``
    publishing meanwhile), else the service is stopping."""
    if isinstance(exc, ConnectionLostError) and not deadline.expired:
        return exc
    if blocked is not None:
        return BrokerBlockedError(address, method, remaining, blocked)
    return CallTimeoutError(address, method, remaining)


@contextmanager
def _span_scope(span: ClientSpan) -> Iterator[None]:
    """End ``span`` when the block ends; an exception leaving the block marks it failed."""
    try:
        yield
    except Exception as exc:
        span.end(exc)
        raise
    finally:
        span.end()


def _log_task_error(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("reply callback failed", exc_info=task.exception())
