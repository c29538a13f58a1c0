"""The connection handshake's rules: server properties, SASL mechanisms and tune-ok validation.

Mechanisms, as RabbitMQ offers them: ``PLAIN`` (``\\0user\\0password``), ``AMQPLAIN`` (a field table
without its length prefix, with ``LOGIN`` and ``PASSWORD``) and, on a TLS connection whose client
presented a verified certificate, ``EXTERNAL`` (the user is the certificate subject's common name).
"""

from __future__ import annotations

from typing import Any

from gear.broker.errors import AMQPError
from gear.broker.node.config import BrokerConfig
from gear.wire import spec
from gear.wire.frames import PROTOCOL_HEADER
from gear.wire.table import FieldError, decode_table

__all__ = (
    "ACCEPTED_HEADERS",
    "PASSWORD_MECHANISMS",
    "SERVER_CAPABILITIES",
    "BadResponseError",
    "amqplain_credentials",
    "check_tune",
    "credentials",
    "offered_mechanisms",
    "plain_credentials",
    "server_properties",
)

#: Mechanisms with a user name and password, in the order RabbitMQ offers them.
PASSWORD_MECHANISMS = ("PLAIN", "AMQPLAIN")


class BadResponseError(Exception):
    """An unknown or not offered mechanism, or a malformed response: RabbitMQ closes silently."""


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


def check_tune(method: spec.Connection.TuneOk, config: BrokerConfig) -> None:
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


def amqplain_credentials(response: str | bytes | None) -> tuple[str, str] | None:
    """``(user, password)`` from an AMQPLAIN response (a length-less field table), or None if malformed."""
    raw = response.encode("utf-8") if isinstance(response, str) else bytes(response or b"")
    try:
        table = decode_table(raw, 0, len(raw))
    except FieldError:
        return None
    login, password = table.get("LOGIN"), table.get("PASSWORD")
    if not isinstance(login, str | bytes) or not isinstance(password, str | bytes) or not login:
        return None
    as_text = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in (login, password)]
    return as_text[0], as_text[1]


def offered_mechanisms(certificate_user: str | None) -> str:
    """The ``connection.start`` mechanisms: EXTERNAL only when a client certificate names a user."""
    names = (*PASSWORD_MECHANISMS, "EXTERNAL") if certificate_user else PASSWORD_MECHANISMS
    return " ".join(names)


def credentials(
    mechanism: str | bytes | None, response: str | bytes | None, certificate_user: str | None
) -> tuple[str, str, str | None]:
    """``(mechanism, user, password)`` from ``connection.start-ok``; password None for EXTERNAL.

    Raises:
        BadResponseError: the mechanism was not offered, or its response is malformed.
    """
    name = mechanism.decode("utf-8", "replace") if isinstance(mechanism, bytes) else str(mechanism or "")
    if name == "PLAIN":
        found = plain_credentials(response)
    elif name == "AMQPLAIN":
        found = amqplain_credentials(response)
    elif name == "EXTERNAL" and certificate_user:
        return name, certificate_user, None
    else:
        raise BadResponseError(f"unknown or not offered authentication mechanism {name[:64]!r}")
    if found is None:
        raise BadResponseError(f"malformed {name} response")
    return name, found[0], found[1]
