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
                   requests only), ``x-gear-status: error`` (error replies only)
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

from gear.records import immutable

__all__ = (
    "ATTEMPT",
    "DEADLINE",
    "METHOD",
    "PARENT",
    "STATUS",
    "TRACE",
    "EnvelopeError",
    "ErrorBody",
    "Kind",
    "Meta",
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


class Kind(StrEnum):
    """The AMQP ``type`` property of a Gear message."""

    CALL = "gear.call"
    CAST = "gear.cast"
    GATHER = "gear.gather"
    REPLY = "gear.reply"


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


_KINDS = {kind.value: kind for kind in Kind}


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


def attempt_message_id(request_id: str, attempt: int) -> str:
    """The AMQP ``message_id`` of one publish attempt: unique, so returns match the right confirm."""
    return f"{request_id}.{attempt}"


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
    )
