"""What can go wrong below Gear, and how it is described: the client library's error classes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import aiormq.exceptions as amqp

__all__ = ("LIBRARY_ERRORS", "describe")

LIBRARY_ERRORS: tuple[type[BaseException], ...] = (
    amqp.AMQPError,
    ConnectionError,
    RuntimeError,
    OSError,
)
"""Everything the client library raises for a failed operation or a connection in trouble."""

_CODES: Mapping[type[BaseException], int] = MappingProxyType(
    {
        amqp.ChannelAccessRefused: 403,
        amqp.ChannelNotFoundEntity: 404,
        amqp.ChannelLockedResource: 405,
        amqp.ChannelPreconditionFailed: 406,
    }
)


def describe(exc: BaseException | None) -> tuple[int | None, str]:
    """The AMQP reply code (if known) and a short text for an exception from the client library."""
    if exc is None:
        return None, "closed"
    if isinstance(exc, type):
        return None, exc.__name__
    code = _CODES.get(type(exc))
    args = exc.args
    if code is None and len(args) == 2 and isinstance(args[0], int):
        return args[0], str(args[1])
    text = str(args[0]) if args else type(exc).__name__
    return code, text
