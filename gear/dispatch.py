"""The serving side: handler registry, payload validation, execution, replies, expiry, idempotency.

A request delivery becomes one task owned by Gear (not by the AMQP channel, so a connection loss does
not kill a handler mid-way). The task drops the request if its absolute deadline already passed,
checks the handler's idempotency window, validates the JSON payload against the handler's first
parameter's type hint (pydantic), runs the handler (plain functions in a thread pool, so they never
starve heartbeats), publishes the reply (JSON; errors as ``ErrorBody``) and only then acks the request.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import time
import typing
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from gear.adapter import Delivery, ack
from gear.context import RequestContext, _current
from gear.envelope import METHOD, STATUS, EnvelopeError, ErrorBody, Kind, Meta, parse_meta
from gear.errors import (
    ConfigurationError,
    ConnectionLostError,
    GearError,
    PayloadTooLargeError,
    RemoteError,
)
from gear.publisher import Outgoing, Publisher
from gear.reply import Reply, decode_reply
from gear.rpc import RPC
from gear.tracing.api import Attr, EventName, NullTracer, Tracer

__all__ = ("Dispatcher", "Handler")

log = logging.getLogger("gear.dispatch")

_ANY = TypeAdapter(Any)


@dataclass(slots=True, eq=False)
class Handler:
    """A registered method: the function and how its payload is validated."""

    name: str
    func: Callable[..., Any]
    is_async: bool
    payload: TypeAdapter[Any] | None
    window: float | None = None
    seen: OrderedDict[str, tuple[float, tuple[bool, bytes] | None]] = field(default_factory=OrderedDict)

    @classmethod
    def build(
        cls,
        name: str,
        func: Callable[..., Any],
        window: float | None,
        localns: dict[str, Any] | None = None,
    ) -> Handler:
        """Inspect ``func``: async or plain, and the type hint of its first parameter.

        Raises:
            ConfigurationError: ``func`` takes more than one required parameter, or a hint cannot be
                resolved.
        """
        if not callable(func):
            raise ConfigurationError(f"handler for {name!r} is not callable")
        params = [
            p for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        required = [p for p in params[1:] if p.default is p.empty]
        if required:
            raise ConfigurationError(
                f"handler {name!r} takes one payload parameter; {required[0].name!r} has no default"
            )
        payload: TypeAdapter[Any] | None = None
        if params:
            try:
                hints = typing.get_type_hints(func, localns=localns)
            except Exception as exc:
                raise ConfigurationError(f"cannot resolve type hints of handler {name!r}: {exc}") from exc
            hint = hints.get(params[0].name)
            payload = _ANY if hint is None else TypeAdapter(hint)
        if window is not None and window <= 0:
            raise ConfigurationError("idempotency_window must be > 0 seconds")
        is_async = inspect.iscoroutinefunction(func)
        return cls(name, func, is_async, payload, window)


class Dispatcher:
    """Turns deliveries into handler runs and replies; routes replies to the RPC client."""

    def __init__(
        self,
        *,
        identity: str,
        publisher: Publisher,
        executor: Callable[[], Executor],
        tracer: Tracer | None = None,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self._identity = identity
        self._max_bytes = max_message_bytes
        self._publisher = publisher
        self._executor = executor
        self._tracer: Tracer = tracer or NullTracer()
        self.rpc: RPC | None = None
        self.handlers: dict[str, Handler] = {}
        self.reply_handlers: dict[str, Callable[[Reply], Any]] = {}
        self.expired = 0
        self.duplicates = 0
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- registry ----------------------------------------------------------------------------------

    def register(
        self,
        name: str,
        func: Callable[..., Any],
        window: float | None = None,
        localns: dict[str, Any] | None = None,
    ) -> None:
        """Register ``func`` as the handler of ``name``.

        Raises:
            ConfigurationError: a bad name, a duplicate, or a bad signature.
        """
        _check_name(name)
        if name in self.handlers:
            raise ConfigurationError(f"a handler for {name!r} is already registered")
        self.handlers[name] = Handler.build(name, func, window, localns)

    def register_reply(self, name: str, func: Callable[[Reply], Any]) -> None:
        """Register the handler for replies to ``name`` sent with ``reply_to=TYPE``.

        Raises:
            ConfigurationError: a bad name or a duplicate.
        """
        _check_name(name)
        if name in self.reply_handlers:
            raise ConfigurationError(f"a reply handler for {name!r} is already registered")
        self.reply_handlers[name] = func

    # -- deliveries --------------------------------------------------------------------------------

    def on_delivery(self, delivery: Delivery) -> Awaitable[None] | None:
        """Entry point from the adapter: replies inline, requests as a task."""
        try:
            meta = parse_meta(
                delivery.kind, delivery.correlation_id, delivery.app_id, delivery.reply_to,
                delivery.headers,
            )
        except EnvelopeError as exc:
            log.warning("dropping a non-Gear message from %r: %s", delivery.queue, exc)
            return None
        if meta.kind is Kind.REPLY:
            if self.rpc is not None:
                self.rpc.on_reply(meta, delivery.body)
            return None
        self._in_flight += 1
        self._idle.clear()
        return self._serve(delivery, meta)

    def on_unmatched_reply(self, meta: Meta, body: bytes) -> bool:
        """A reply no pending call waits for: give it to a reply handler if one is registered."""
        func = self.reply_handlers.get(meta.method)
        if func is None:
            return False
        try:
            reply = Reply(meta.sender, decode_reply(meta.ok, body), None, meta.request_id, meta.method)
        except RemoteError as err:
            reply = Reply(meta.sender, None, err, meta.request_id, meta.method)
        task = asyncio.ensure_future(self._run_reply_handler(func, reply))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run_reply_handler(self, func: Callable[[Reply], Any], reply: Reply) -> None:
        try:
            if inspect.iscoroutinefunction(func):
                await func(reply)
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._executor(), func, reply)
        except Exception:
            log.exception("reply handler for %r failed", reply.method)

    async def _serve(self, delivery: Delivery, meta: Meta) -> None:
        try:
            await self._serve_one(delivery, meta)
        except Exception:
            log.exception("serving %r failed", meta.method)
        finally:
            await ack(delivery)
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _serve_one(self, delivery: Delivery, meta: Meta) -> None:
        now = time.time()
        if self._tracer.enabled:
            self._trace(EventName.DELIVER, delivery, meta, {})
        if meta.deadline_ms is not None and now * 1000 >= meta.deadline_ms:
            self.expired += 1
            if self._tracer.enabled:
                self._trace(EventName.EXPIRED, delivery, meta, {Attr.ERROR_TYPE: "expired"})
            return
        wants_reply = meta.kind is not Kind.CAST and meta.reply_to is not None
        handler = self.handlers.get(meta.method)
        if handler is None:
            if wants_reply:
                err = ErrorBody(
                    type="MethodNotFound", message=f"{self._identity} has no handler for {meta.method!r}"
                )
                await self._reply(meta, False, err.model_dump_json().encode())
            else:
                log.warning("no handler for cast %r from %s; dropped", meta.method, meta.sender)
            return
        if handler.window is not None:
            duplicate, cached = self._check_duplicate(handler, meta.request_id, now)
            if duplicate:
                self.duplicates += 1
                if self._tracer.enabled:
                    self._trace(EventName.DELIVER, delivery, meta, {Attr.DUPLICATE: True})
                if cached is not None and wants_reply:
                    await self._reply(meta, cached[0], cached[1])
                return
        ok, body = await self._run(handler, delivery, meta)
        if handler.window is not None:
            handler.seen[meta.request_id] = (now + handler.window, (ok, body))
        if wants_reply:
            await self._reply(meta, ok, body)

    def _check_duplicate(
        self, handler: Handler, rid: str, now: float
    ) -> tuple[bool, tuple[bool, bytes] | None]:
        seen = handler.seen
        while seen:
            first = next(iter(seen.values()))
            if first[0] > now:
                break
            seen.popitem(last=False)
        entry = seen.get(rid)
        if entry is None:
            seen[rid] = (now + (handler.window or 0), None)
            return False, None
        return True, entry[1]

    async def _run(self, handler: Handler, delivery: Delivery, meta: Meta) -> tuple[bool, bytes]:
        try:
            if handler.payload is None:
                args: tuple[Any, ...] = ()
            else:
                args = (_validate_payload(handler.payload, delivery.body),)
        except ValidationError as exc:
            details = {"errors": json.loads(exc.json(include_url=False))}
            err = ErrorBody(type="BadPayload", message=f"invalid payload for {meta.method!r}: "
                            f"{exc.error_count()} error(s)", details=details)
            return False, err.model_dump_json().encode()
        ctx = RequestContext(
            meta.request_id, meta.method, meta.sender,
            None if meta.deadline_ms is None else meta.deadline_ms / 1000, meta.trace_id, meta.attempt,
            delivery.redelivered,
        )
        token = _current.set(ctx)
        try:
            if handler.is_async:
                result = await handler.func(*args)
            else:
                loop = asyncio.get_running_loop()
                run = contextvars.copy_context().run
                result = await loop.run_in_executor(self._executor(), run, handler.func, *args)
            body = pydantic_core.to_json(result)
        except Exception as exc:
            return False, _error_body(exc)
        finally:
            _current.reset(token)
        if len(body) > self._max_bytes:
            too_large = PayloadTooLargeError(f"the result of {meta.method!r}", len(body), self._max_bytes)
            return False, _error_body(too_large)
        return True, body

    async def _reply(self, meta: Meta, ok: bool, body: bytes) -> None:
        assert meta.reply_to is not None
        # the caller knows the trace; the status is only spelled out for errors (absent means ok)
        headers: dict[str, Any] = {METHOD: meta.method}
        if not ok:
            headers[STATUS] = "error"
        msg = Outgoing(
            routing_key=meta.reply_to, address=meta.reply_to, body=body, request_id=meta.request_id,
            kind=Kind.REPLY.value, headers=headers, method=meta.method, trace_id=meta.trace_id,
        )
        loop = asyncio.get_running_loop()
        budget = 1.0 if meta.deadline_ms is None else meta.deadline_ms / 1000 - time.time()
        until = loop.time() + max(budget, 1.0)
        try:
            await self._publisher.publish(msg, until)
        except (GearError, TimeoutError) as exc:
            # a link outage is logged once by the connector; one line per lost reply would drown it
            level = logging.DEBUG if isinstance(exc, (ConnectionLostError, TimeoutError)) else logging.WARNING
            log.log(level, "reply to %s for %r not delivered: %s", meta.reply_to, meta.method, exc)
            if self._tracer.enabled:
                self._tracer.emit(EventName.UNROUTABLE, trace_id=meta.trace_id, attributes={
                    Attr.REQUEST_ID: meta.request_id, Attr.CONVERSATION_ID: meta.request_id,
                    Attr.RPC_METHOD: meta.method, Attr.RPC_KIND: "reply", Attr.ERROR_TYPE: "unroutable",
                    Attr.CALLER: self._identity,
                })
            return
        if self._tracer.enabled:
            self._tracer.emit(EventName.REPLY_SENT, trace_id=meta.trace_id, attributes={
                Attr.REQUEST_ID: meta.request_id, Attr.CONVERSATION_ID: meta.request_id,
                Attr.RPC_METHOD: meta.method, Attr.RPC_KIND: "reply", Attr.CALLER: self._identity,
                Attr.PEER_SERVICE: meta.sender.split(".")[0],
                **({} if ok else {Attr.ERROR_TYPE: "remote"}),
            })

    # -- shutdown ----------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests being served right now."""
        return self._in_flight

    async def drain(self, limit: float) -> bool:
        """Wait until no request is being served; False if ``limit`` seconds ran out first."""
        try:
            async with asyncio.timeout(limit):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def _trace(self, name: EventName, delivery: Delivery, meta: Meta, extra: dict[str, Any]) -> None:
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq", Attr.OPERATION_TYPE: "process",
            Attr.OPERATION_NAME: "deliver", Attr.DESTINATION: f"queue:{delivery.queue}",
            Attr.ROUTING_KEY: delivery.routing_key, Attr.MESSAGE_ID: delivery.message_id,
            Attr.DELIVERY_TAG: delivery.delivery_tag, Attr.REQUEST_ID: meta.request_id,
            Attr.RPC_SYSTEM: "gear", Attr.RPC_METHOD: meta.method, Attr.CALLER: meta.sender,
            Attr.RPC_KIND: meta.kind.value.removeprefix("gear."), Attr.ATTEMPT: meta.attempt,
            Attr.REDELIVERED: delivery.redelivered, Attr.BODY_SIZE: len(delivery.body),
        }
        attrs.update(extra)
        self._tracer.emit(name, trace_id=meta.trace_id, span_id=meta.request_id,
                          parent_span_id=None, attributes=attrs)


def _validate_payload(adapter: TypeAdapter[Any], body: bytes) -> Any:
    if body and body != b"null":
        return adapter.validate_json(body)
    try:
        return adapter.validate_json(b"null")
    except ValidationError:
        try:  # no payload for a model whose fields all have defaults
            return adapter.validate_json(b"{}")
        except ValidationError:
            pass
        raise


def _error_body(exc: BaseException) -> bytes:
    details = getattr(exc, "details", None)
    if not isinstance(details, dict):
        details = {}
    try:
        pydantic_core.to_json(details)
    except pydantic_core.PydanticSerializationError:
        details = {"unserialisable_details": repr(details)[:500]}
    return ErrorBody(type=type(exc).__name__, message=str(exc), details=details).model_dump_json().encode()


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name or len(name.encode()) > 200:
        raise ConfigurationError(f"a method name is a non-empty string up to 200 bytes, not {name!r}")
