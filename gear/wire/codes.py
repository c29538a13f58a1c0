"""AMQP 0-9-1 reply codes and their names, as RabbitMQ spells them in reply texts."""

from __future__ import annotations

from types import MappingProxyType

__all__ = ("HARD_CODES", "REPLY_NAMES", "reply_name")

REPLY_NAMES = MappingProxyType(
    {
        200: "OK",
        311: "CONTENT_TOO_LARGE",
        312: "NO_ROUTE",
        313: "NO_CONSUMERS",
        320: "CONNECTION_FORCED",
        402: "INVALID_PATH",
        403: "ACCESS_REFUSED",
        404: "NOT_FOUND",
        405: "RESOURCE_LOCKED",
        406: "PRECONDITION_FAILED",
        501: "FRAME_ERROR",
        502: "SYNTAX_ERROR",
        503: "COMMAND_INVALID",
        504: "CHANNEL_ERROR",
        505: "UNEXPECTED_FRAME",
        506: "RESOURCE_ERROR",
        530: "NOT_ALLOWED",
        540: "NOT_IMPLEMENTED",
        541: "INTERNAL_ERROR",
    }
)
"""Reply code -> constant name."""

HARD_CODES = frozenset({320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541})
"""Codes that close the whole connection (``rabbit_framing_amqp_0_9_1:lookup_amqp_exception``)."""


def reply_name(code: int) -> str:
    """The constant name of ``code`` (``"CODE_<n>"`` for a code AMQP does not define)."""
    return REPLY_NAMES.get(code, f"CODE_{code}")
