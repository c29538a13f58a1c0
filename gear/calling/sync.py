"""``svc.rpc.sync``: call, cast and gather from a thread that is not the service's event loop.

Plain (``def``) handlers run in a worker thread, where ``await`` is not available. The facade has the
same methods and arguments as :class:`gear.RPC`; each one runs the async operation on the service's
event loop and blocks only the calling thread until it ends, so the loop keeps serving (heartbeats,
other handlers, the very reply being waited for). ::

    @svc.handler("report")
    def report(day: str) -> dict[str, Any]:               # runs in a worker thread
        rows = svc.rpc.sync.call("REPO.host2", "rows", day)  # inherits this request's deadline
        svc.rpc.sync.cast("AUDIT", "reported", day)
        return {"day": day, "rows": len(rows)}

The request context (deadline, trace) is copied into the worker thread and from there onto the loop,
so a nested call inherits the remaining budget exactly as ``await svc.rpc.call`` would in an async
handler, and it raises the same typed errors. Any other thread of the process (a script's worker, a
callback of a blocking library) may use the facade too, once the service is started.

Each blocking call holds one worker thread until it ends: a plain handler that calls plain handlers of
its own service can exhaust ``handler_threads``; give such chains async handlers or more threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from gear.base.limits import seconds
from gear.base.reply import Reply, ReplyCallback
from gear.errors import CallTimeoutError, ConfigurationError, ConnectionLostError, GearError

__all__ = ("SYNC_GRACE", "AsyncRPC", "SyncRPC")

T = TypeVar("T")

SYNC_GRACE = 5.0
"""Seconds a blocked thread waits past the operation's own deadline before it gives up on a loop
that no longer runs the operation (a stopped or stalled event loop)."""


class AsyncRPC(Protocol):
    """What the facade drives: :class:`gear.RPC` as seen from here, so that ``gear.calling.rpc`` imports this
    module and not the other way round. (A per-call ``timeout`` is the API: ASYNC109 does not apply.)"""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    @property
    def default_timeout(self) -> float: ...

    @property
    def cast_retry_budget(self) -> float: ...

    async def call(
        self,
        address: str,
        method: str,
        payload: Any = ...,
        *,
        timeout: float | None = ...,  # noqa: ASYNC109
    ) -> Any: ...

    async def call_as(
        self, result_type: type[T], address: str, method: str, payload: Any = ...,
        *, timeout: float | None = ...,  # noqa: ASYNC109
    ) -> T: ...  # fmt: skip

    async def call_with_callback(
        self, address: str, method: str, payload: Any = ..., *, callback: ReplyCallback,
        timeout: float | None = ..., result_type: Any = ...,  # noqa: ASYNC109
    ) -> str: ...  # fmt: skip

    async def call_reply_to(
        self, reply_to: str, address: str, method: str, payload: Any = ...,
        *, timeout: float | None = ...,  # noqa: ASYNC109
    ) -> str: ...  # fmt: skip

    async def cast(
        self, address: str, method: str, payload: Any = ..., *, retry_budget: float | None = ...
    ) -> bool: ...

    async def gather(
        self, address: str, method: str, payload: Any = ..., *, timeout: float | None = ...,  # noqa: ASYNC109
        expected: int | None = ...,
    ) -> list[Reply]: ...  # fmt: skip


class SyncRPC:
    """Blocking ``call``, ``cast`` and ``gather`` bound to the service's event loop (``svc.rpc.sync``)."""

    def __init__(self, rpc: AsyncRPC) -> None:
        self._rpc = rpc

    def call(self, address: str, method: str, payload: Any = None, *, timeout: float | None = None) -> Any:
        """:meth:`gear.RPC.call` from this thread; the same arguments, result and errors.

        Raises:
            CallTimeoutError, UnroutableError, NotConfirmedError, RemoteError, ConfigurationError: as
                :meth:`gear.RPC.call` (``ConfigurationError`` also when called from a thread that runs
                an event loop).
            ConnectionLostError: the service is not running.
        """
        coro = self._rpc.call(address, method, payload, timeout=timeout)
        return self._call(coro, address, method, timeout)

    def call_as(
        self,
        result_type: type[T],
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,
    ) -> T:
        """:meth:`gear.RPC.call_as` from this thread; the same arguments, result and errors.

        Raises:
            BadResultError: the result does not fit ``result_type``; and as :meth:`call`.
        """
        coro = self._rpc.call_as(result_type, address, method, payload, timeout=timeout)
        return self._call(coro, address, method, timeout)

    def call_with_callback(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        callback: ReplyCallback,
        timeout: float | None = None,
        result_type: Any = None,
    ) -> str:
        """:meth:`gear.RPC.call_with_callback` from this thread; ``callback`` runs later on the
        service's event loop (it must not block).

        Raises:
            as :meth:`call`.
        """
        coro = self._rpc.call_with_callback(
            address, method, payload, callback=callback, timeout=timeout, result_type=result_type
        )
        return self._call(coro, address, method, timeout)

    def call_reply_to(
        self, reply_to: str, address: str, method: str, payload: Any = None, *, timeout: float | None = None
    ) -> str:
        """:meth:`gear.RPC.call_reply_to` from this thread.

        Raises:
            as :meth:`call`.
        """
        coro = self._rpc.call_reply_to(reply_to, address, method, payload, timeout=timeout)
        return self._call(coro, address, method, timeout)

    def _call(self, coro: Coroutine[Any, Any, T], address: str, method: str, timeout: float | None) -> T:
        budget = self._budget(timeout, coro)
        return self._run(coro, budget, lambda: CallTimeoutError(address, method, budget))

    def cast(
        self, address: str, method: str, payload: Any = None, *, retry_budget: float | None = None
    ) -> bool:
        """:meth:`gear.RPC.cast` from this thread; the same arguments, result and errors.

        Raises:
            UnroutableError, NotConfirmedError, ConnectionLostError, ConfigurationError: as
            :meth:`gear.RPC.cast`.
        """
        given = retry_budget
        budget = self._rpc.cast_retry_budget if given is None else seconds(given, "retry_budget")
        coro = self._rpc.cast(address, method, payload, retry_budget=retry_budget)
        return self._run(
            coro, budget, lambda: ConnectionLostError(f"cast to {address!r} not confirmed in time")
        )

    def gather(
        self,
        address: str,
        method: str,
        payload: Any = None,
        *,
        timeout: float | None = None,
        expected: int | None = None,
    ) -> list[Reply]:
        """:meth:`gear.RPC.gather` from this thread; the same arguments, result and errors.

        Raises:
            NotConfirmedError, ConfigurationError: as :meth:`gear.RPC.gather`.
        """
        coro = self._rpc.gather(address, method, payload, timeout=timeout, expected=expected)
        budget = self._budget(timeout, coro)
        return self._run(coro, budget, lambda: CallTimeoutError(address, method, budget))

    def _budget(self, timeout: float | None, coro: Coroutine[Any, Any, Any]) -> float:
        """The call's budget in seconds; an invalid ``timeout`` closes ``coro`` unstarted.

        Raises:
            ConfigurationError: ``timeout`` is not a finite number of seconds in range.
        """
        if timeout is None:
            return self._rpc.default_timeout
        try:
            return seconds(timeout)
        except ConfigurationError:
            coro.close()
            raise

    def _run(self, coro: Coroutine[Any, Any, T], budget: float, gave_up: Callable[[], GearError]) -> T:
        loop = self._rpc.loop
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: blocking it is fine
        else:
            coro.close()
            raise ConfigurationError(
                "svc.rpc.sync blocks its thread, and this thread runs an event loop: "
                "use 'await svc.rpc.call(...)' in async code"
            )
        if loop is None or loop.is_closed():
            coro.close()
            raise ConnectionLostError("the service is not running (start it before svc.rpc.sync)")
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # the loop closed in between
            coro.close()
            raise ConnectionLostError("the service's event loop is closed") from None
        try:
            return future.result(budget + SYNC_GRACE)
        except GearError:
            raise
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise gave_up() from None
        except concurrent.futures.CancelledError:
            raise ConnectionLostError("the service stopped while the operation was running") from None
