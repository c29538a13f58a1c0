"""The request a handler is serving, visible to the handler and to the calls it makes.

A handler's nested ``svc.rpc.call(...)`` reads the current request from a context variable: it inherits
the remaining budget (its deadline is never later than the one it serves), the trace id, and records the
served request as its parent. Plain (thread-pool) handlers see the same context: it is copied into the
worker thread, and from there onto the event loop by ``svc.rpc.sync``.

An async handler still running at its deadline is cancelled. A plain one cannot be interrupted, so it
reads :func:`cancelled` (or :func:`remaining_budget`) between steps and gives up by itself::

    @svc.handler("export")
    def export(keys: list[str]) -> list[str]:
        rows = []
        for key in keys:
            if gear.cancelled():          # the caller's deadline passed, or the service is stopping
                break
            rows.append(svc.rpc.sync.call("REPO.h1", "get", key))
        return rows
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import field

from gear.base.deadline import Deadline
from gear.base.records import immutable

__all__ = ("RequestContext", "cancelled", "current_deadline", "current_request", "remaining_budget")


@immutable
class RequestContext:
    """What a handler knows about the request it serves.

    Attributes:
        request_id: the stable id of the request (the same across republishes and redeliveries).
        method: the method name.
        sender: the caller's ``TYPE.HOST``.
        due: the request's deadline, or ``None`` for a cast without one (:attr:`deadline` gives it as
            unix seconds).
        trace_id: the call tree's trace id.
        attempt: which publish attempt delivered it (1 unless it was republished).
        redelivered: the broker's redelivered flag.
        cancel_at_deadline: the handler gives up at the deadline (``False`` for handlers registered
            with ``cancel_at_deadline=False``).
        stopping: set when the service stops and gives up on handlers still running.
    """

    request_id: str
    method: str
    sender: str
    due: Deadline | None
    trace_id: str | None
    attempt: int = 1
    redelivered: bool = False
    cancel_at_deadline: bool = True
    stopping: threading.Event | None = field(default=None, repr=False, compare=False)

    @property
    def deadline(self) -> float | None:
        """The absolute deadline as a unix timestamp in seconds, or ``None`` for a cast without one."""
        return None if self.due is None else self.due.unix

    @property
    def remaining(self) -> float | None:
        """Seconds left until the deadline (may be negative), or ``None``."""
        return None if self.due is None else self.due.remaining()

    @property
    def cancelled(self) -> bool:
        """True when the handler should stop: its deadline passed (unless it opted out) or the service
        gave up on it while stopping. Its result would not be sent."""
        if self.stopping is not None and self.stopping.is_set():
            return True
        return self.cancel_at_deadline and self.due is not None and self.due.expired


_current: ContextVar[RequestContext | None] = ContextVar("gear_request", default=None)


def current_request() -> RequestContext | None:
    """The request being served by this handler, or ``None`` outside handlers."""
    return _current.get()


def current_deadline() -> float | None:
    """The absolute deadline (unix seconds) of the request being served, or ``None``."""
    ctx = _current.get()
    return None if ctx is None else ctx.deadline


def remaining_budget() -> float | None:
    """Seconds left for the request being served, or ``None`` outside handlers."""
    ctx = _current.get()
    return None if ctx is None else ctx.remaining


def cancelled() -> bool:
    """True when the handler being served should stop (see :attr:`RequestContext.cancelled`);
    ``False`` outside handlers."""
    ctx = _current.get()
    return ctx is not None and ctx.cancelled
