"""What a Gear message carries on the wire, besides its JSON body.

A request is an AMQP message with:

=================  =========================================================================
``message_id``     unique per publish attempt (``<request id>.<attempt>``); returns match on it
``correlation_id`` the stable request id (16 hex chars), the same across republishes
``type``           ``gear.call``, ``gear.cast``, ``gear.gather`` or ``gear.reply``
``app_id``         the sender's ``TYPE.HOST``
``reply_to``       the routing key the reply goes to (calls and gathers only)
``expiration``     the remaining budget in ms, so the broker drops it too
``headers``        ``x-gear-method``, ``x-gear-deadline`` (absolute, unix ms), ``x-gear-attempt`` (only
                   from the second attempt on), ``x-gear-trace`` / ``x-gear-parent`` (trace identity,
                   requests only), ``x-gear-status: error`` (error replies only), ``x-gear-hedge``
                   (calls whose caller may send copies: 0 on the original, n on its n-th copy) with
                   ``x-gear-hedge-after`` (ms), ``x-gear-notice`` (a notice about a request, not its
                   reply: ``running``, ``claim``, ``reclaim``, ``grant`` or ``deny``;
                   see ``gear.session.hedge``)
body               the payload or result as JSON (never pickle); an error reply's body is
                   :class:`ErrorBody`
=================  =========================================================================

Header parsing is hand-written and strict (it runs per message); pydantic models only what a
handler author or a remote peer controls: error bodies.
"""

from __future__ import annotations

import os
import random
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gear.base.records import immutable

__all__ = (
    "ATTEMPT",
    "DEADLINE",
    "HEDGE",
    "HEDGE_AFTER",
    "METHOD",
    "NOTICE",
    "PARENT",
    "STATUS",
    "TRACE",
    "EnvelopeError",
    "ErrorBody",
    "Kind",
    "Meta",
    "Notice",
    "attempt_message_id",
    "new_request_id",
    "new_trace_id",
    "parse_meta",
)

METHOD = "x-gear-method"
DEADLINE = "x-gear-deadline"
ATTEMPT = "x-gear-attempt"
TRACE = "x-gear-trace"
PARENT = "x-gear-parent"
STATUS = "x-gear-status"
HEDGE = "x-gear-hedge"
HEDGE_AFTER = "x-gear-hedge-after"
NOTICE = "x-gear-notice"


class Kind(StrEnum):
    """The AMQP ``type`` property of a Gear message."""

    CALL = "gear.call"
    CAST = "gear.cast"
    GATHER = "gear.gather"
    REPLY = "gear.reply"


class Notice(StrEnum):
    """``x-gear-notice``: what a notice about a hedged call says (see ``gear.session.hedge``)."""

    RUNNING = "running"
    """Server to caller: an instance runs (or holds) the request; send no copy."""
    CLAIM = "claim"
    """Server to caller: may this instance run the request? (a copy, or a late request)."""
    RECLAIM = "reclaim"
    """Server to caller: the same, for a redelivered request (an instance took it before, and may
    have run it: its caller says yes only to the instance it already knows runs it)."""
    GRANT = "grant"
    """Caller to server: yes, and no other instance will be told yes."""
    DENY = "deny"
    """Caller to server: no (another instance runs it, or the caller gave up)."""


class EnvelopeError(ValueError):
    """A delivery is not a well-formed Gear message."""


class ErrorBody(BaseModel):
    """The JSON body of an error reply."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: str = Field(min_length=1, max_length=200)
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


@immutable
class Meta:
    """The Gear properties of one delivery, checked."""

    kind: Kind
    request_id: str
    method: str
    sender: str
    attempt: int
    deadline_ms: int | None
    reply_to: str | None
    trace_id: str | None
    parent_id: str | None
    ok: bool
    hedge: int | None = None
    """``x-gear-hedge``: None when the caller sends no copies; 0 for the original, n for a copy."""
    hedge_after_ms: int = 0
    """``x-gear-hedge-after``: how long the caller waits for a sign of life before a copy."""
    notice: Notice | None = None
    """A notice about the request (not its reply): see :class:`Notice`."""


_KINDS = {kind.value: kind for kind in Kind}
_NOTICES = {notice.value: notice for notice in Notice}


_ids = random.Random(os.urandom(32))
"""Ids come from a generator seeded from the OS once per process (and again in a forked child):
unpredictable enough for ids that only need to be unique, without a ``getrandom`` call per id."""
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def new_request_id() -> str:
    """A fresh request id: 16 hex chars (the trace contract's span id), never all zeros."""
    return f"{_ids.getrandbits(64) or 1:016x}"


def new_trace_id() -> str:
    """A fresh trace id: 32 hex chars (W3C trace context), never all zeros."""
    return f"{_ids.getrandbits(128) or 1:032x}"


def attempt_message_id(request_id: str, attempt: int, copy: int = 0) -> str:
    """The AMQP ``message_id`` of one publish attempt (of a hedged call's ``copy``-th copy): unique, so
    returns match the right confirm."""
    return f"{request_id}.{attempt}" if not copy else f"{request_id}.c{copy}.{attempt}"


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    return None


def parse_meta(
    kind: str | None,
    correlation_id: str | None,
    app_id: str | None,
    reply_to: str | None,
    headers: dict[str, Any] | None,
) -> Meta:
    """Check and extract the Gear properties of a delivery.

    Raises:
        EnvelopeError: if the type is not a Gear kind, or the request id or method is missing.
    """
    found = _KINDS.get(kind or "")
    if found is None:
        raise EnvelopeError(f"not a Gear message (type={kind!r})")
    if not correlation_id:
        raise EnvelopeError("no correlation_id (request id)")
    headers = headers or {}
    method = _text(headers.get(METHOD))
    if not method:
        raise EnvelopeError(f"no {METHOD} header")
    deadline = headers.get(DEADLINE)
    attempt = headers.get(ATTEMPT, 1)
    hedge = headers.get(HEDGE)
    after = headers.get(HEDGE_AFTER, 0)
    if not isinstance(after, int) or isinstance(after, bool) or after <= 0:
        hedge = after = None  # no copies without a known wait before them: served as unhedged
    if not isinstance(hedge, int) or isinstance(hedge, bool) or hedge < 0:
        hedge = None
    notice = headers.get(NOTICE)
    return Meta(
        kind=found,
        request_id=correlation_id,
        method=method,
        sender=app_id or "?",
        attempt=attempt if isinstance(attempt, int) else 1,
        deadline_ms=deadline if isinstance(deadline, int) and not isinstance(deadline, bool) else None,
        reply_to=reply_to or None,
        trace_id=_text(headers.get(TRACE)),
        parent_id=_text(headers.get(PARENT)),
        ok=_text(headers.get(STATUS)) != "error",
        hedge=hedge,
        hedge_after_ms=after if hedge is not None and after is not None else 0,
        notice=None if notice is None else _NOTICES.get(_text(notice) or ""),
    )
