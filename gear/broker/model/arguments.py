"""Queue argument rules: validation on declare and equivalence on redeclare, with RabbitMQ's texts."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from gear.broker.errors import AMQPError

__all__ = ("QUEUE_ARGUMENTS", "assert_equivalent", "int_arg", "str_arg", "type_name", "validate")

#: Queue arguments compared on redeclare (classic queue ``queue_arguments``).
QUEUE_ARGUMENTS = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    "x-queue-type",
    "x-queue-master-locator",
    "x-queue-leader-locator",
)
_INTEGER_ARGS = (
    "x-message-ttl",
    "x-expires",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-consumer-timeout",
)
_STRING_ARGS = ("x-dead-letter-exchange", "x-dead-letter-routing-key", "x-overflow", "x-queue-type")
_OVERFLOWS = ("drop-head", "reject-publish", "reject-publish-dlx")


def type_name(value: Any) -> str:
    """The AMQP field type RabbitMQ would name for ``value`` (as pamqp encodes Python values)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if -128 <= value <= 127:
            return "byte"
        if -32768 <= value <= 32767:
            return "short"
        if -(2**31) <= value < 2**31:
            return "signedint"
        return "long"
    if isinstance(value, str | bytes):
        return "longstr"
    if isinstance(value, float):
        return "double"
    if isinstance(value, decimal.Decimal):
        return "decimal"
    if isinstance(value, datetime.datetime):
        return "timestamp"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return "void"


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _describe(value: Any) -> str:
    return "none" if value is None else f"the value '{_text(value)}' of type '{type_name(value)}'"


def validate(
    arguments: dict[str, Any], what: str, *, durable: bool, exclusive: bool, auto_delete: bool
) -> None:
    """Check a new queue's arguments and flags.

    Raises:
        AMQPError: 406 with RabbitMQ's reason for the first invalid argument.
    """
    for key in _INTEGER_ARGS:
        value = arguments.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise AMQPError(
                406, f"invalid arg '{key}' for {what}: \"expected integer, got {type_name(value)}\""
            )
        if value < 0:
            raise AMQPError(406, f"invalid arg '{key}' for {what}: {{value_negative,{value}}}")
        if value == 0 and key == "x-expires":
            raise AMQPError(406, f"invalid arg '{key}' for {what}: {{value_zero,0}}")
    for key in _STRING_ARGS:
        value = arguments.get(key)
        if value is not None and not isinstance(value, str | bytes):
            raise AMQPError(406, f"invalid type '{type_name(value)}' for arg '{key}' in {what}")
    overflow = arguments.get("x-overflow")
    if overflow is not None and _text(overflow) not in _OVERFLOWS:
        raise AMQPError(406, f"invalid arg 'x-overflow' for {what}: invalid_overflow")
    kind = _text(arguments.get("x-queue-type", "classic"))
    if kind in ("quorum", "stream"):
        # Accepted and run as an in-memory classic queue, but with the declaration rules of the type.
        for bad, prop in (
            (exclusive, "exclusive-owner"),
            (not durable, "non-durable"),
            (auto_delete, "auto-delete"),
        ):
            if bad:
                raise AMQPError(406, f"invalid property '{prop}' for {what}")
    elif kind != "classic":
        raise AMQPError(406, f"invalid arg 'x-queue-type' for {what}: unsupported queue type '{kind}'")


def assert_equivalent(received: dict[str, Any], current: dict[str, Any], what: str) -> None:
    """Redeclare with different compared arguments is a 406 (integer widths compare equal).

    Raises:
        AMQPError: 406 "inequivalent arg ..." as RabbitMQ words it.
    """
    for arg in QUEUE_ARGUMENTS:
        new, old = received.get(arg), current.get(arg)
        if new is None and old is None:
            continue
        if new is not None and old is not None and _text(new) == _text(old):
            continue
        if new is not None and old is not None:
            detail = f"received '{_text(new)}' but current is '{_text(old)}'"
        else:
            detail = f"received {_describe(new)} but current is {_describe(old)}"
        raise AMQPError(406, f"inequivalent arg '{arg}' for {what}: {detail}")


def int_arg(arguments: dict[str, Any], key: str) -> int | None:
    """``arguments[key]`` as an int, or None when absent, a bool or not a number."""
    value = arguments.get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def str_arg(arguments: dict[str, Any], key: str) -> str | None:
    """``arguments[key]`` as text (bytes decoded), or None when absent or not text."""
    value = arguments.get(key)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
