"""Gear's exceptions: one root, a subclass per way a call can end badly.

::

    GearError
    ├── ConfigurationError (ValueError)        bad TYPE/HOST/address/settings/input, found before any I/O
    │   └── PayloadTooLargeError               a message over ``max_message_bytes``; nothing was sent
    ├── ConnectError (ConnectionError)         cannot reach any broker, handshake timed out, auth refused
    ├── ConnectionLostError (ConnectionError)  no usable connection for the operation's whole budget
    │                                          (none, or blocked by the broker), or the service stopped
    ├── DeliveryError                          the broker did not take the message
    │   ├── UnroutableError                    returned (no queue bound) until the deadline ran out
    │   ├── NotConfirmedError                  the broker nacked the publish
    │   └── PublishRefusedError                the broker closed the channel over this message (406...)
    ├── OutcomeUnknownError (TimeoutError)     sent, but neither confirmed nor refused within the budget:
    │                                          it may have been delivered
    ├── CallTimeoutError (TimeoutError)        no reply before the deadline
    │   └── BrokerBlockedError                 ... while the broker blocked publishing (a resource
    │                                          alarm: low on memory or disk), all the way to it
    ├── BadResultError (ValueError)            a reply arrived but does not fit ``result_type``
    └── RemoteError                            the remote handler failed; .type, .message, .details
        ├── MethodNotFoundError                the remote instance has no handler for the method
        ├── BadPayloadError                    the remote handler rejected the payload (validation)
        └── DeliveryLimitError                 a quorum queue dropped the request after too many
                                               deliveries (servers crashed or lost it each time)

Remote errors cross the wire as JSON ``{"type", "message", "details"}``, never pickle. A ``RemoteError``
carries the remote exception's type name; ``MethodNotFoundError``, ``BadPayloadError`` and
``DeliveryLimitError`` are raised as themselves because Gear produces them. The aliases without the
``Error`` suffix (``CallTimeout``, ``Unroutable``, ...) are the names the issue tracker uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = (
    "BadPayload",
    "BadPayloadError",
    "BadResultError",
    "BrokerBlockedError",
    "CallTimeout",
    "CallTimeoutError",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "DeliveryError",
    "DeliveryLimitError",
    "GearError",
    "MethodNotFound",
    "MethodNotFoundError",
    "NotConfirmed",
    "NotConfirmedError",
    "OutcomeUnknownError",
    "PayloadTooLargeError",
    "PublishRefusedError",
    "RemoteError",
    "Unroutable",
    "UnroutableError",
    "remote_error_from_wire",
    "validation_summary",
)


class GearError(Exception):
    """The root of every exception Gear raises on purpose."""


class ConfigurationError(GearError, ValueError):
    """Invalid configuration or address, detected before any I/O."""


class PayloadTooLargeError(ConfigurationError):
    """A request, cast or reply body is larger than ``Settings.max_message_bytes``; nothing was sent.

    Attributes:
        size: the encoded body's size in bytes.
        limit: the limit it exceeded.
    """

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} is {size:,} bytes, over the {limit:,}-byte message limit (max_message_bytes)"
        )
        self.size = size
        self.limit = limit


class ConnectError(GearError, ConnectionError):
    """No broker could be reached, the handshake timed out, or the broker refused the login."""


class ConnectionLostError(GearError, ConnectionError):
    """The connection dropped while an operation depended on it and it did not come back in time."""


class DeliveryError(GearError):
    """The broker did not accept the message for delivery."""


class UnroutableError(DeliveryError):
    """Every attempt was returned by the broker (no queue bound for the routing key).

    Attributes:
        address: the address that could not be routed.
        attempts: how many publishes the broker returned before Gear gave up.
        broker: the broker that returned them (URL, password masked), when known.
    """

    def __init__(self, address: str, attempts: int, broker: str | None = None) -> None:
        where = f" on {broker}" if broker else ""
        super().__init__(f"no queue bound for {address!r}{where} ({attempts} attempt(s) returned)")
        self.address = address
        self.attempts = attempts
        self.broker = broker


class NotConfirmedError(DeliveryError):
    """The broker nacked the publish (the queue refused the message)."""


class PublishRefusedError(DeliveryError):
    """The broker closed the publish channel over this message (e.g. ``406 PRECONDITION_FAILED``
    for a message over its size limit), on two attempts in a row.

    Attributes:
        reply_code: the broker's AMQP reply code, if known.
        reply_text: the broker's explanation.
    """

    def __init__(self, address: str, reply_code: int | None, reply_text: str) -> None:
        code = f"{reply_code} " if reply_code else ""
        super().__init__(f"the broker refused the message to {address!r}: {code}{reply_text}")
        self.reply_code = reply_code
        self.reply_text = reply_text


class OutcomeUnknownError(GearError, TimeoutError):
    """The message was sent, but the broker neither confirmed nor refused it within the budget (the
    connection died or went silent): it may or may not have been delivered. Distinct from a nack.

    Attributes:
        address: where it was sent.
    """

    def __init__(self, address: str, detail: str) -> None:
        super().__init__(
            f"outcome unknown for the message to {address!r}: {detail}; it may have been delivered"
        )
        self.address = address


class CallTimeoutError(GearError, TimeoutError):
    """No reply arrived before the call's deadline.

    Attributes:
        address: where the request went.
        method: the remote method name.
        timeout: the budget the call had, in seconds.
    """

    def __init__(self, address: str, method: str, timeout: float) -> None:
        super().__init__(f"{method!r} on {address!r} got no reply within {timeout:.3g}s")
        self.address = address
        self.method = method
        self.timeout = timeout


class BrokerBlockedError(CallTimeoutError):
    """The deadline came while the broker blocked this instance's publishing (``connection.blocked``:
    a memory or disk alarm, which on a cluster blocks the publishers of every node): the request, or
    its reply, could not be sent in time. The call waited for the alarm to clear until its deadline,
    as a short alarm costs nothing then; nothing confirmed is lost.

    Attributes:
        reason: what the broker said (``"low on disk"``, ``"low on memory"``).
    """

    def __init__(self, address: str, method: str, timeout: float, reason: str) -> None:
        super().__init__(address, method, timeout)
        self.args = (
            f"{method!r} on {address!r} got no reply within {timeout:.3g}s: the broker blocks "
            f"publishers ({reason})",
        )
        self.reason = reason


class BadResultError(GearError, ValueError):
    """A reply arrived, but its result does not validate into the call's ``result_type``.

    Attributes:
        address: where the request went.
        method: the remote method name.
        result: the decoded JSON result as it arrived.
        details: ``{"errors": [...]}``, pydantic's validation errors as JSON.
    """

    def __init__(self, address: str, method: str, result: Any, details: Mapping[str, Any]) -> None:
        count = len(details.get("errors", ()))
        super().__init__(f"the result of {method!r} on {address!r} does not fit: {count} error(s)")
        self.address = address
        self.method = method
        self.result = result
        self.details: dict[str, Any] = dict(details)


class RemoteError(GearError):
    """The remote handler raised.

    Attributes:
        type: the remote exception's class name (e.g. ``"KeyError"``).
        message: ``str()`` of the remote exception.
        details: JSON-able extra data the handler attached, or ``{}``.
    """

    wire_type: str | None = None

    def __init__(self, type: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{type}: {message}" if message else type)
        self.type = type
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


class MethodNotFoundError(RemoteError):
    """The remote instance has no handler registered under that method name."""

    wire_type = "MethodNotFound"


class BadPayloadError(RemoteError):
    """The remote handler's type hints rejected the payload; ``details`` holds the validation errors.

    ``str()`` names the fields that failed (``... (value: Field required)``), as the CLI prints it.

    Attributes:
        problems: the first few validation errors in one line, ``where: what`` each (``""`` when the
            reply carried none).
    """

    wire_type = "BadPayload"

    def __init__(self, type: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(type, message, details)
        self.problems = validation_summary(self.details)
        if self.problems:
            self.args = (f"{self.args[0]} ({self.problems})",)


def validation_summary(details: Mapping[str, Any], limit: int = 3) -> str:
    """``value: Field required; key: ...``: the first ``limit`` pydantic errors carried in ``details``
    (``{"errors": [{"loc", "msg"}, ...]}``) in one line; ``""`` when there are none."""
    errors = details.get("errors")
    if not isinstance(errors, list) or not errors:
        return ""
    parts = []
    for error in errors[:limit]:
        if isinstance(error, Mapping):
            where = ".".join(str(p) for p in error.get("loc", ())) or "payload"
            parts.append(f"{where}: {error.get('msg', '?')}")
    more = f"; and {len(errors) - limit} more" if len(errors) > limit else ""
    return "; ".join(parts) + more


class DeliveryLimitError(RemoteError):
    """The request was delivered again and again (each time its server crashed or lost its connection
    before answering) until its quorum queue's delivery limit dropped it. Another Gear instance saw it
    dead-lettered and says so before the call's deadline (``gear.serving.deadletter``); ``details`` holds
    ``queue``, ``reason`` (``delivery_limit``) and ``deliveries`` (null where the broker does not say).
    """

    wire_type = "DeliveryLimit"

    @classmethod
    def describe(cls, method: str, queue: str, reason: str, deliveries: int | None) -> DeliveryLimitError:
        """The error for a request to ``method`` that ``queue`` dead-lettered."""
        times = f"{deliveries} deliveries" if deliveries is not None else "too many deliveries"
        message = (
            f"queue {queue!r} dropped the request for {method!r} after {times} ({reason}): each delivery "
            "ended with its server crashing or losing its connection before it answered"
        )
        details = {"queue": queue, "reason": reason, "deliveries": deliveries}
        return cls(cls.wire_type, message, details)


_BY_WIRE_TYPE: Mapping[str, type[RemoteError]] = MappingProxyType(
    {
        cls.wire_type: cls
        for cls in (MethodNotFoundError, BadPayloadError, DeliveryLimitError)
        if cls.wire_type
    }
)


def remote_error_from_wire(type: str, message: str, details: Mapping[str, Any] | None = None) -> RemoteError:
    """Build the exception a caller raises for an error reply."""
    cls = _BY_WIRE_TYPE.get(type, RemoteError)
    return cls(type, message, details)


CallTimeout = CallTimeoutError
Unroutable = UnroutableError
NotConfirmed = NotConfirmedError
MethodNotFound = MethodNotFoundError
BadPayload = BadPayloadError
