"""The request a handler is serving, visible to the handler and to the calls it makes.

A handler's nested ``svc.rpc.call(...)`` reads the current request from a context variable: it inherits
the remaining budget (its deadline is never later than the one it serves), the trace id, and records the
served request as its parent. Plain (thread-pool) handlers see the same context: it is copied into the
worker thread.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ("RequestContext", "current_deadline", "current_request", "remaining_budget")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler knows about the request it serves.

    Attributes:
        request_id: the stable id of the request (the same across republishes and redeliveries).
        method: the method name.
        sender: the caller's ``TYPE.HOST``.
        deadline: absolute deadline as a unix timestamp in seconds, or ``None`` for a cast without one.
        trace_id: the call tree's trace id.
        attempt: which publish attempt delivered it (1 unless it was republished).
        redelivered: the broker's redelivered flag.
    """

    request_id: str
    method: str
    sender: str
    deadline: float | None
    trace_id: str | None
    attempt: int = 1
    redelivered: bool = False

    @property
    def remaining(self) -> float | None:
        """Seconds left until the deadline (may be negative), or ``None``."""
        return None if self.deadline is None else self.deadline - time.time()


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


def _set(ctx: RequestContext | None) -> object:
    return _current.set(ctx)
