"""The connection handshake's rules: server properties, PLAIN credentials and tune-ok validation."""

from __future__ import annotations

from typing import Any

from pamqp import commands

from gear.broker.config import BrokerConfig
from gear.broker.errors import AMQPError
from gear.broker.frames import PROTOCOL_HEADER

__all__ = ("ACCEPTED_HEADERS", "SERVER_CAPABILITIES", "check_tune", "plain_credentials", "server_properties")

#: 0-9-1, and the 0-9 header that RabbitMQ also treats as 0-9-1.
ACCEPTED_HEADERS = (PROTOCOL_HEADER, b"AMQP\x01\x01\x00\x09")

#: RabbitMQ's capabilities table (``rabbit_reader:server_capabilities``), all true.
SERVER_CAPABILITIES: dict[str, Any] = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": True,
}
_VERSION = "0.1.0"


def server_properties() -> dict[str, Any]:
    """``connection.start`` server-properties."""
    return {
        "product": "Gear reference broker",
        "version": _VERSION,
        "platform": "Python/asyncio",
        "copyright": "Gear contributors",
        "information": "In-memory AMQP 0-9-1 broker with RabbitMQ semantics; see gear.broker",
        "cluster_name": "gear",
        "capabilities": dict(SERVER_CAPABILITIES),
    }


def plain_credentials(response: str | bytes | None) -> tuple[str, str] | None:
    """``(user, password)`` from a PLAIN response ``\\0user\\0password``, or None if malformed."""
    raw = response.encode("utf-8") if isinstance(response, str) else bytes(response or b"")
    parts = raw.split(b"\x00")
    if len(parts) != 3 or not parts[1]:
        return None
    return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")


def check_tune(method: commands.Connection.TuneOk, config: BrokerConfig) -> None:
    """RabbitMQ's ``validate_negotiated_integer_value`` for frame_max and channel_max.

    Raises:
        AMQPError: 530 when a value is below the minimum, zero, or above what the server offered.
    """
    for field, value, minimum, server in (
        ("frame_max", method.frame_max, 4096, config.frame_max),
        ("channel_max", method.channel_max, 1, config.channel_max),
    ):
        if value and value < minimum:
            raise AMQPError(
                530,
                f"negotiated {field} = {value} is lower than the minimum allowed value ({minimum})",
                class_id=10,
                method_id=31,
            )
        if server and (not value or value > server):
            raise AMQPError(
                530,
                f"negotiated {field} = {value} is higher than the maximum allowed value ({server})",
                class_id=10,
                method_id=31,
            )
