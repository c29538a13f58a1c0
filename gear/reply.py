"""Replies as callers see them: decoding a reply body into a result or a typed remote error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from gear.envelope import ErrorBody
from gear.errors import RemoteError, remote_error_from_wire

__all__ = ("Reply", "decode_reply", "validate_result")


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer collected by :meth:`RPC.gather` (or passed to a reply handler).

    Attributes:
        sender: the replying instance, ``TYPE.HOST``.
        result: the decoded JSON result (``None`` on error).
        error: the remote error, or ``None``.
        request_id: the request this answers.
        method: the method that was called.
    """

    sender: str
    result: Any = None
    error: RemoteError | None = None
    request_id: str = ""
    method: str = ""

    @property
    def ok(self) -> bool:
        """True when the remote handler returned normally."""
        return self.error is None


def decode_reply(ok: bool, body: bytes) -> Any:
    """The result of a reply body, or raise its error.

    Raises:
        RemoteError: (or a subclass) for an error reply.
    """
    if ok:
        return pydantic_core.from_json(body) if body else None
    try:
        err = ErrorBody.model_validate_json(body)
    except ValidationError:
        raise RemoteError("MalformedErrorReply", body[:200].decode("utf-8", "replace")) from None
    raise remote_error_from_wire(err.type, err.message, err.details)


_adapters: dict[Any, TypeAdapter[Any]] = {}


def validate_result(result_type: Any, value: Any) -> Any:
    """``value`` validated into ``result_type`` (adapters are cached per type).

    Raises:
        pydantic.ValidationError: the value does not fit.
    """
    adapter = _adapters.get(result_type)
    if adapter is None:
        adapter = _adapters[result_type] = TypeAdapter(result_type)
    return adapter.validate_python(value)
