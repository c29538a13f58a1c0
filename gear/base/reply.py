"""Replies as callers see them: decoding a reply body into a result or a typed remote error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

from gear.base.envelope import ErrorBody
from gear.errors import BadResultError, ConfigurationError, RemoteError, remote_error_from_wire

__all__ = (
    "Replies",
    "Reply",
    "ReplyCallback",
    "decode_reply",
    "result_adapter",
    "validate_result",
    "validation_errors",
)


ReplyCallback = Callable[[Any], Awaitable[None] | None]
"""``callback(result_or_exception)``: called once with the result, or a ``GearError`` instance."""


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


class Replies(list[Reply]):
    """What :meth:`RPC.gather` collected: the replies in the order they arrived (a plain list), and
    whether the request reached anyone.

    Attributes:
        routed: False when the broker returned the request: no instance is bound for the address, so
            the empty list means "nobody there", not "nobody answered in time".
    """

    def __init__(self, replies: Iterable[Reply] = (), *, routed: bool = True) -> None:
        super().__init__(replies)
        self.routed = routed


def decode_reply(ok: bool, body: bytes) -> Any:
    """The result of a reply body, or raise its error.

    Raises:
        RemoteError: (or a subclass) for an error reply; ``MalformedReply`` for a body that is not
            JSON (damaged on the way, or not sent by Gear).
    """
    if ok:
        try:
            return pydantic_core.from_json(body) if body else None
        except ValueError as exc:
            raise RemoteError("MalformedReply", f"the reply is not JSON: {exc}") from None
    try:
        err = ErrorBody.model_validate_json(body)
    except ValidationError:
        raise RemoteError("MalformedErrorReply", body[:200].decode("utf-8", "replace")) from None
    raise remote_error_from_wire(err.type, err.message, err.details)


def validation_errors(exc: ValidationError) -> list[Any]:
    """pydantic's errors as JSON-able values (without the input where it is not JSON-able: bytes that
    are not UTF-8, say)."""
    try:
        errors: list[Any] = json.loads(exc.json(include_url=False))
    except ValueError:
        errors = json.loads(exc.json(include_url=False, include_input=False))
    return errors


_adapters: dict[Any, TypeAdapter[Any]] = {}


def result_adapter(result_type: Any) -> TypeAdapter[Any]:
    """The (cached) validator for ``result_type``.

    Raises:
        ConfigurationError: pydantic cannot validate into that type.
    """
    adapter = _adapters.get(result_type)
    if adapter is None:
        try:
            adapter = TypeAdapter(result_type)
        except (PydanticSchemaGenerationError, TypeError) as exc:
            raise ConfigurationError(f"result_type {result_type!r} cannot be validated: {exc}") from None
        if len(_adapters) < 1024:
            _adapters[result_type] = adapter
    return adapter


def validate_result(result_type: Any, value: Any, address: str = "", method: str = "") -> Any:
    """``value`` validated into ``result_type``.

    Raises:
        BadResultError: the value does not fit (``details`` holds pydantic's errors).
        ConfigurationError: pydantic cannot validate into that type.
    """
    try:
        return result_adapter(result_type).validate_python(value)
    except ValidationError as exc:
        details = {"errors": validation_errors(exc)}
        raise BadResultError(address, method, value, details) from None
