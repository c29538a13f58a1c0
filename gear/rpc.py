"""The calling side: ``call``, ``cast`` and ``gather``, with deadlines and a pending-reply map.

Each call gets a stable request id and a future in ``_pending``; the reply (matched by its
``correlation_id``) resolves it. There are no locks around round trips: many calls share the one
publish channel and the one reply queue (``TYPE.HOST``). A reply whose request is no longer pending
(it timed out, or it is a duplicate) is dropped and counted in ``late_replies``; a reply meant for a
stateless caller (``reply_to=TYPE``) goes to the matching ``@svc.reply_handler``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import pydantic_core

from gear.address import Address
from gear.context import current_request
from gear.envelope import DEADLINE, METHOD, PARENT, TRACE, Kind, Meta, new_request_id, new_trace_id
from gear.errors import (
    CallTimeoutError,
    ConfigurationError,
    ConnectionLostError,
    GearError,
    PayloadTooLargeError,
    RemoteError,
    UnroutableError,
)
from gear.publisher import Outgoing, Publisher, RepublishPolicy
from gear.reply import Reply, decode_reply, result_adapter, validate_result
from gear.sync import SyncRPC
from gear.tracing.api import NullTracer
from gear.tracing.emitter import Emitter
from gear.tracing.spans import ClientSpan

__all__ = ("NESTED_MARGIN", "RPC", "ReplyCallback")

log = logging.getLogger("gear.rpc")

ReplyCallback = Callable[[Any], Awaitable[None] | None]
"""``callback(result_or_exception)``: called once with the result, or a ``GearError`` instance."""

_NO_RETRY = RepublishPolicy(retry=False)

T = TypeVar("T")

NESTED_MARGIN = 0.1
"""Seconds (at most 10 % of what is left) a nested call leaves to the handler that makes it."""


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
    timer: asyncio.TimerHandle | None = field(default=None)


class RPC:
    """``svc.rpc``: call, cast and gather for one service instance."""

    def __init__(
        self,
        *,
        identity: str,
        own_type: str,
        publisher: Publisher,
        default_timeout: float,
        cast_retry_budget: float,
        on_reply_unmatched: Callable[[Meta, bytes], bool],
        events: Emitter | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self._identity = identity
        self._own_type = own_type
        self._publisher = publisher
        self._default_timeout = default_timeout
        self._cast_budget = cast_retry_budget
        self._max_bytes = max_message_bytes
        self._unmatched = on_reply_unmatched
        self._events = events or Emitter(NullTracer(), identity)
        self._pending: dict[str, _Pending] = {}
        self._addresses: dict[str, Address] = {}
        self.late_replies = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        """The service's event loop while it runs (what :attr:`sync` submits to)."""
        self.undeliverable_hook: Callable[[], Callable[..., object] | None] = lambda: self.on_undeliverable
        self.on_undeliverable: Callable[..., object] | None = None
        """``fn(address, method, payload)`` for casts returned for their whole budget."""

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
        self, address: str, method: str, payload: Any, timeout: float | None, kind: Kind
    ) -> tuple[Address, Outgoing, float, float]:
        addr = self._address(address)
        if not isinstance(method, str) or not method:
            raise ConfigurationError(f"method must be a non-empty string, not {method!r}")
        budget = self._default_timeout if timeout is None else float(timeout)
        if budget <= 0:
            raise ConfigurationError(f"timeout must be > 0, not {timeout!r}")
        now = time.time()
        deadline = now + budget
        ctx = current_request()
        headers: dict[str, Any] = {METHOD: method}
        if ctx is not None:
            if ctx.deadline is not None:
                # Keep a little of the served request's budget for its own reply: a nested call
                # that times out must leave the handler time to answer before its caller gives up.
                inherited = ctx.deadline - min(NESTED_MARGIN, 0.1 * max(0.0, ctx.deadline - now))
                deadline = min(deadline, inherited)
            trace_id = ctx.trace_id or new_trace_id()
            headers[PARENT] = ctx.request_id
            parent: str | None = ctx.request_id
        else:
            # with OpenTelemetry, a call made inside an instrumented request joins that request's trace
            trace_id = self._events.current_trace_id() or new_trace_id()
            parent = None
        headers[TRACE] = trace_id
        headers[DEADLINE] = int(deadline * 1000)
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
            deadline_unix=deadline,
            method=method,
            trace_id=trace_id,
            parent_id=parent,
        )
        remaining = deadline - now
        return addr, msg, remaining, asyncio.get_running_loop().time() + remaining

    # -- call --------------------------------------------------------------------------------------

    @overload
    async def call(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        callback: None = None,
        reply_to: None = None,
        result_type: type[T],
    ) -> T: ...

    @overload
    async def call(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        callback: ReplyCallback,
        reply_to: None = None,
        result_type: Any = None,
    ) -> None: ...

    @overload
    async def call(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        callback: ReplyCallback | None = None,
        reply_to: str | None = None,
        result_type: Any = None,
    ) -> Any: ...

    async def call(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call deadline is the API
        callback: ReplyCallback | None = None,
        reply_to: str | None = None,
        result_type: Any = None,
    ) -> Any:
        """Call ``method`` on the instance(s) behind ``address`` and return its result.

        Args:
            address: ``TYPE.HOST`` (that instance) or ``TYPE`` (any one instance, round-robin).
            method: the remote handler's name.
            payload: JSON-able value or pydantic model.
            timeout: seconds; default ``Settings.timeout``. Inside a handler the deadline is never
                later than the one being served.
            callback: if given, return as soon as the broker confirmed the request; ``callback`` is
                called later with the result or with the exception (``CallTimeoutError``,
                ``RemoteError``...). It may be a plain or an async function.
            reply_to: ``None`` for this instance (``TYPE.HOST``); a ``TYPE`` for a stateless caller:
                the reply goes to that TYPE's queue and any instance's ``@reply_handler(method)``
                takes it. Then ``call`` returns the request id once confirmed.
            result_type: validate the result into this type (e.g. a pydantic model); type checkers
                then see the call return that type.

        Raises:
            CallTimeoutError: no reply before the deadline.
            BadResultError: the reply does not validate into ``result_type`` (with the callback,
                the callback receives it).
            UnroutableError: every attempt was returned until the deadline.
            NotConfirmedError: the broker nacked the request.
            PublishRefusedError: the broker refused this request (e.g. over its size limit).
            PayloadTooLargeError: the payload is over ``max_message_bytes`` (nothing was sent).
            ConnectionLostError: the service is stopping.
            RemoteError: the handler failed (``MethodNotFoundError``, ``BadPayloadError`` or a
                ``RemoteError`` with the remote type name).
            ConfigurationError: a bad address, method, timeout, payload or ``result_type``.
        """
        if result_type is not None:
            result_adapter(result_type)  # a type pydantic cannot validate into fails before any I/O
        addr, msg, remaining, until = self._prepare(address, method, payload, timeout, Kind.CALL)
        if addr.is_fanout:
            raise ConfigurationError(f"{address!r} reaches several instances: use rpc.gather()")
        span = self._events.client_span(msg, address)
        try:
            if reply_to is not None and reply_to != self._identity:
                msg.reply_to = self._address(reply_to).routing_key
                await self._publish_bounded(msg, until, address, method, remaining)
                span.end()
                return msg.request_id
            if callback is not None:
                await self._call_back(msg, address, method, remaining, until, callback, result_type, span)
                return None
            ok, body = await self._round_trip(msg, addr, address, method, remaining, until)
            result = decode_reply(ok, body)
            if result_type is not None:
                result = validate_result(result_type, result, address, method)
        except Exception as exc:
            span.end(exc)
            raise
        span.end()
        return result

    async def _call_back(
        self, msg: Outgoing, address: str, method: str, remaining: float, until: float,
        callback: ReplyCallback, result_type: Any, span: ClientSpan,
    ) -> None:  # fmt: skip
        msg.reply_to = self._identity
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        rid = msg.request_id
        pending = _Pending(fut, address, method, remaining, loop.time(), msg.trace_id or "")
        self._pending[rid] = pending
        try:
            await self._publish_bounded(msg, until, address, method, remaining)
        except BaseException:
            self._pending.pop(rid, None)
            raise
        pending.timer = loop.call_at(until, self._expire, rid)
        fut.add_done_callback(lambda f: self._run_callback(callback, f, result_type, address, method, span))

    async def _round_trip(
        self, msg: Outgoing, addr: Address, address: str, method: str, remaining: float, until: float
    ) -> tuple[bool, bytes]:
        msg.reply_to = self._identity
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        rid = msg.request_id
        pending = _Pending(fut, address, method, remaining, loop.time(), msg.trace_id or "")
        self._pending[rid] = pending
        try:
            async with asyncio.timeout_at(until):
                await self._publisher.publish(msg, until)
                ok, body = await fut
        except (TimeoutError, ConnectionLostError) as failure:
            if isinstance(failure, ConnectionLostError) and loop.time() < until:
                raise  # the service is stopping, not a spent budget
            if msg.returned and not msg.routed:  # the deadline fell during a republish
                exc = UnroutableError(address, msg.returned)
                self._trace_unroutable(msg, addr, exc)
                raise exc from None
            self._trace_timeout(rid, pending)
            raise CallTimeoutError(address, method, remaining) from None
        except UnroutableError as exc:
            self._trace_unroutable(msg, addr, exc)
            raise
        finally:
            self._pending.pop(rid, None)
        return ok, body

    async def _publish_bounded(
        self, msg: Outgoing, until: float, address: str, method: str, remaining: float
    ) -> None:
        try:
            async with asyncio.timeout_at(until):
                await self._publisher.publish(msg, until)
        except (TimeoutError, ConnectionLostError) as failure:
            if isinstance(failure, ConnectionLostError) and asyncio.get_running_loop().time() < until:
                raise
            raise CallTimeoutError(address, method, remaining) from None

    def _expire(self, rid: str) -> None:
        pending = self._pending.pop(rid, None)
        if pending is not None and not pending.future.done():
            self._trace_timeout(rid, pending)
            pending.future.set_exception(CallTimeoutError(pending.address, pending.method, pending.timeout))
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
        _addr, msg, _remaining, until = self._prepare(address, method, payload, budget, Kind.CAST)
        msg.deadline_unix = None
        msg.headers.pop(DEADLINE, None)
        msg.persistent = True
        with _span_scope(self._events.client_span(msg, address)):
            try:
                return await self._publisher.publish(msg, until)
            except UnroutableError:
                hook = self.undeliverable_hook()
                if hook is None:
                    raise
                out = hook(address, method, payload)
                if asyncio.iscoroutine(out):
                    await out
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
    ) -> list[Reply]:
        """Call every instance behind ``address`` (``TYPE.*`` or ``*.*``) and collect the replies.

        Returns when ``expected`` replies arrived or the timeout ran out, whichever comes first, with
        the replies so far (errors included, as ``Reply.error``). No instance at all gives ``[]``.

        Raises:
            NotConfirmedError: the broker nacked the request.
            ConnectionLostError: the request could not be sent before the timeout (no connection, or
                a blocked one), or the service is stopping.
            ConfigurationError: a bad address, method, timeout or payload.
        """
        _addr, msg, _remaining, until = self._prepare(address, method, payload, timeout, Kind.GATHER)
        msg.reply_to = self._identity
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        pending = _Pending(fut, address, method, 0.0, loop.time(), msg.trace_id or "", [], expected)
        rid = msg.request_id
        self._pending[rid] = pending
        with _span_scope(self._events.client_span(msg, address)):
            try:
                async with asyncio.timeout_at(until):
                    if not await self._publisher.publish(msg, until, policy=_NO_RETRY):
                        return []
                    if expected is not None and expected <= 0:
                        return []
                    await fut
            except TimeoutError:
                pass
            finally:
                self._pending.pop(rid, None)
        return list(pending.replies or [])

    # -- replies -----------------------------------------------------------------------------------

    def on_reply(self, meta: Meta, body: bytes) -> None:
        """Route one reply delivery to its pending call (runs inline in the channel reader)."""
        pending = self._pending.get(meta.request_id)
        if pending is None or pending.future.done():
            if self._unmatched(meta, body):
                return
            self.late_replies += 1
            self._events.late_reply(meta.request_id, meta.method, meta.sender)
            return
        if self._events.enabled:
            elapsed = asyncio.get_running_loop().time() - pending.started
            self._events.response(
                meta.request_id, pending.trace_id, meta.method, meta.sender, elapsed, meta.ok
            )
        if pending.replies is None:
            self._pending.pop(meta.request_id, None)
            if pending.timer is not None:
                pending.timer.cancel()
            pending.future.set_result((meta.ok, body))
            return
        try:
            result = decode_reply(meta.ok, body)
            reply = Reply(meta.sender, result, None, meta.request_id, meta.method)
        except RemoteError as err:
            reply = Reply(meta.sender, None, err, meta.request_id, meta.method)
        pending.replies.append(reply)
        if pending.expected is not None and len(pending.replies) >= pending.expected:
            pending.future.set_result(None)

    def fail_all(self, exc: GearError) -> None:
        """Fail every pending call (the service is stopping)."""
        for rid, pending in list(self._pending.items()):
            self._pending.pop(rid, None)
            if pending.timer is not None:
                pending.timer.cancel()
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

    def _trace_unroutable(self, msg: Outgoing, addr: Address, exc: UnroutableError) -> None:
        self._events.unroutable(msg.request_id, msg.trace_id, msg.method, addr.type or "*", exc.attempts)

    def _trace_timeout(self, rid: str, pending: _Pending) -> None:
        self._events.timeout(rid, pending.trace_id, pending.method, pending.address, pending.timeout)


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
